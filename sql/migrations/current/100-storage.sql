--------------------------------------------------------------------------------
-- Files and images (the Supabase Storage interface at /storage/v1)
--
-- Buckets and the metadata of objects live here, in `app` (on a Supabase
-- project the `storage` schema is Supabase's own); the bytes live in the
-- gateway's byte store (a folder under the data folder, or an S3-compatible
-- bucket), each version under its own key. An object's row is written only
-- once its bytes are durable, in the transaction that makes it visible.
--
-- Re-runnable (graphile-migrate applies current/ again on every change):
-- `if not exists` everywhere, and the rows below on conflict do nothing.
--------------------------------------------------------------------------------

create table if not exists app.storage_buckets (
  id                 text primary key
    constraint storage_buckets_id_check check (id ~ '^[a-z0-9][a-z0-9_-]{0,62}$'),
  public             boolean not null default false,
  -- Who owns an object's first folder (`{id}/...`): writes (and, in a private
  -- bucket, reads) are theirs. user: the user of that id; community: the
  -- managers of that community; event: the managers of that event's community.
  folder_owner       text not null
    constraint storage_buckets_folder_owner_check check (folder_owner in ('user', 'community', 'event')),
  file_size_limit    bigint not null
    constraint storage_buckets_file_size_limit_check check (file_size_limit between 1 and 5368709120),
  -- null: any type; else exact types or `type/*` patterns.
  allowed_mime_types text[]
    constraint storage_buckets_allowed_mime_types_check check (cardinality(allowed_mime_types) between 1 and 50),
  -- Images only: the content is sniffed, SVG and HTML refused, metadata
  -- stripped and orientation applied on upload; transformations served.
  images             boolean not null default false,
  -- Downloads carry Content-Disposition: attachment and nosniff, whatever the type.
  download_as_attachment boolean not null default false,
  created_at         timestamptz not null default now(),
  updated_at         timestamptz not null default now()
);
comment on table app.storage_buckets is
  'Storage buckets (made by migrations, more by admin.storage_bucket_create): who owns their folders, size and type limits, public or private.';

create table if not exists app.storage_objects (
  id             uuid primary key default gen_random_uuid(),
  bucket_id      text not null references app.storage_buckets (id),
  -- The object's path in its bucket; byte order (collation C) for prefix
  -- searches on the unique index and Supabase's sort order.
  name           text collate "C" not null
    constraint storage_objects_name_check check (
      length(name) between 3 and 1024
      and name ~ '^[A-Za-z0-9_/!.*''() &$@=;:+,?-]+$'
      and name !~ '(^|/)\.{0,2}(/|$)'),
  -- Who uploaded it (counted against their quota); null once that account is gone.
  owner_id       uuid references identity.users (id) on delete set null,
  -- Where its bytes are in the byte store: a fresh key for every version.
  storage_key    text not null constraint storage_objects_storage_key_key unique,
  size           bigint not null constraint storage_objects_size_check check (size >= 0),
  content_type   text not null constraint storage_objects_content_type_check check (length(content_type) between 1 and 255),
  cache_control  text not null default 'max-age=3600'
    constraint storage_objects_cache_control_check check (length(cache_control) between 1 and 255),
  -- A digest of the bytes (ETag, quoted).
  etag           text not null,
  -- Pixel size of an image, null otherwise.
  width          integer,
  height         integer,
  -- Metadata the client attached (x-metadata), at most 8 KB.
  user_metadata  jsonb
    constraint storage_objects_user_metadata_check check (user_metadata is null or octet_length(user_metadata::text) <= 8192),
  version        uuid not null default gen_random_uuid(),
  created_at     timestamptz not null default now(),
  updated_at     timestamptz not null default now(),
  constraint storage_objects_bucket_name_key unique (bucket_id, name)
);
comment on table app.storage_objects is
  'One stored object (file) of a bucket: its path, owner, size, type, digest and where its bytes are. Visible only once its bytes are durable.';
create index if not exists storage_objects_owner_idx on app.storage_objects (owner_id) where owner_id is not null;

create table if not exists app.storage_uploads (
  id             uuid primary key default gen_random_uuid(),
  bucket_id      text not null references app.storage_buckets (id),
  name           text collate "C" not null,
  owner_id       uuid not null,
  upsert         boolean not null default false,
  -- direct: POST/PUT /object; signed: through a signed upload URL;
  -- resumable: TUS; copy: POST /object/copy.
  kind           text not null constraint storage_uploads_kind_check check (kind in ('direct', 'signed', 'resumable', 'copy')),
  storage_key    text not null constraint storage_uploads_storage_key_key unique,
  declared_size  bigint,
  created_at     timestamptz not null default now(),
  -- After this the upload cannot finish, and its bytes are collected.
  expires_at     timestamptz not null
);
comment on table app.storage_uploads is
  'Uploads under way: the key their bytes are written to before the object exists. One that expires (cut off, gateway killed) has its bytes collected.';
create index if not exists storage_uploads_expires_idx on app.storage_uploads (expires_at);

create table if not exists app.storage_garbage (
  storage_key    text primary key,
  -- Downloads that read the old version just before it was replaced get this long.
  collect_after  timestamptz not null default now() + interval '10 minutes',
  attempts       integer not null default 0,
  last_error     text
);
comment on table app.storage_garbage is
  'Byte-store keys no object uses any more (replaced, deleted, orphaned uploads), with their transformations: deleted by the storage_collect job.';
create index if not exists storage_garbage_due_idx on app.storage_garbage (collect_after);

create table if not exists app.storage_usage (
  user_id          uuid primary key references identity.users (id) on delete cascade,
  bytes            bigint not null default 0,
  objects          integer not null default 0,
  -- Per-user overrides of the plan's limits (null: the plan's).
  quota_bytes      bigint constraint storage_usage_quota_bytes_check check (quota_bytes >= 0),
  uploads_per_minute integer constraint storage_usage_uploads_per_minute_check check (uploads_per_minute >= 0),
  -- The current one-minute window of uploads.
  window_start     timestamptz,
  window_uploads   integer not null default 0,
  -- Signed URLs made before this (the user's credentials ended) are refused.
  signed_urls_valid_after timestamptz
);
comment on table app.storage_usage is
  'Per user: bytes and objects stored (kept by a trigger), quota overrides, the upload rate window, and when their signed URLs stopped counting.';

create table if not exists private.storage_signing_keys (
  id          integer primary key default 1 constraint storage_signing_keys_one check (id = 1),
  secret      bytea not null default extensions.gen_random_bytes(32),
  created_at  timestamptz not null default now()
);
comment on table private.storage_signing_keys is
  'The HMAC key of signed URLs (made once, never leaves the database).';
insert into private.storage_signing_keys (id) values (1) on conflict do nothing;

-- Limits of the plans.
alter table app.subscription_plans add column if not exists storage_quota_bytes bigint not null default 104857600;
alter table app.subscription_plans add column if not exists storage_uploads_per_minute integer not null default 30;
comment on column app.subscription_plans.storage_quota_bytes is 'Bytes of storage objects a user of this plan may own.';
comment on column app.subscription_plans.storage_uploads_per_minute is 'Uploads a user of this plan may start in a minute.';
update app.subscription_plans set storage_quota_bytes = 1073741824, storage_uploads_per_minute = 60
 where id = 'premium' and storage_quota_bytes = 104857600;

-- Images of profiles, communities and events: an object, by id (a move keeps
-- it; a delete clears it).
-- Safe: nullable columns without a default are a catalog change; the foreign
-- keys check nothing (every value is null), and the tables they point at are new.
-- squawk-ignore adding-foreign-key-constraint
alter table app.profiles add column if not exists avatar_object_id uuid references app.storage_objects (id) on delete set null;
-- squawk-ignore adding-foreign-key-constraint
alter table app.communities add column if not exists image_object_id uuid references app.storage_objects (id) on delete set null;
-- squawk-ignore adding-foreign-key-constraint
alter table app.events add column if not exists image_object_id uuid references app.storage_objects (id) on delete set null;
-- Safe: graphile-migrate runs the migration in one transaction, where CONCURRENTLY is impossible; the columns are new (all null), so these partial indexes are empty.
-- squawk-ignore require-concurrent-index-creation
create index if not exists profiles_avatar_object_idx on app.profiles (avatar_object_id) where avatar_object_id is not null;
-- squawk-ignore require-concurrent-index-creation
create index if not exists communities_image_object_idx on app.communities (image_object_id) where image_object_id is not null;
-- squawk-ignore require-concurrent-index-creation
create index if not exists events_image_object_idx on app.events (image_object_id) where image_object_id is not null;
comment on column app.profiles.avatar_object_id is 'The avatar: an object of the avatars bucket in the user''s folder (the profile''s avatar_url).';
comment on column app.communities.image_object_id is 'The community''s image: an object of the community-images bucket in its folder (image_url).';
comment on column app.events.image_object_id is 'The event''s image when stored here: an object of the event-images bucket in its folder (image_url; image_path keeps a platform''s external URL).';

-- The api.user_profile type gains avatar_url (its functions are redefined by the area file).
do $$
begin
  if not exists (select from pg_attribute a
                  where a.attrelid = 'api.user_profile'::regclass and a.attname = 'avatar_url' and not a.attisdropped) then
    alter type api.user_profile add attribute avatar_url text;
  end if;
end;
$$;

-- The buckets of the product.
insert into app.storage_buckets (id, public, folder_owner, file_size_limit, allowed_mime_types, images, download_as_attachment) values
  ('avatars', true, 'user', 5242880, array['image/*'], true, false),
  ('community-images', true, 'community', 10485760, array['image/*'], true, false),
  ('event-images', true, 'event', 10485760, array['image/*'], true, false),
  ('attachments', false, 'user', 26214400, null, false, true)
on conflict (id) do nothing;

-- api.storage_resumable_upload answers more columns than its first draft (the area file defines it).
drop function if exists api.storage_resumable_upload(uuid);
drop function if exists api.storage_object_get(text, text, boolean);
drop function if exists api.storage_object_signed(text, text, text);

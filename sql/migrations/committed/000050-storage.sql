--! Previous: sha1:3de422f250d278123ee55561473a1f23df77861b
--! Hash: sha1:5e54587f1094d9fa5913c8293659a1ec089ff4cf
--! Message: storage

--! split: 100-storage.sql
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

--! split: 901-auth.sql
-- Made by `npm run db -- areas --diff` from sql/areas/auth.sql: the statements that make
-- the migrated database what that file states. Each run writes it again:
-- edit the area file, not this one. Table changes go in a file of this
-- folder numbered below 900.

-- Bodies are checked once every function exists (the check validated them all).
set local check_function_bodies = off;

CREATE OR REPLACE FUNCTION private.end_credentials(user_id uuid)
 RETURNS void
 LANGUAGE plpgsql
 SET search_path TO 'pg_catalog'
AS $function$
begin
  -- Sessions (refresh tokens; their access tokens fail with session_ended, their streams close).
  update identity.refresh_tokens r set revoked_at = now(), revoked_reason = 'logout'
   where r.user_id = end_credentials.user_id and r.revoked_at is null;
  -- API tokens (deactivated: listed with active false; their streams close).
  update app.api_tokens t set active = false
   where t.user_id = end_credentials.user_id and t.active;
  -- OAuth grants: access and refresh tokens, and codes not exchanged yet.
  update identity.oauth_tokens o set revoked_at = now()
   where o.user_id = end_credentials.user_id and o.revoked_at is null;
  delete from identity.oauth_codes c
   where c.user_id = end_credentials.user_id and c.used_at is null;
  -- MCP sessions.
  update private.mcp_sessions s set ended_at = now()
   where s.user_id = end_credentials.user_id and s.ended_at is null;
  -- The personal calendar feed URL.
  delete from app.calendar_feeds f where f.user_id = end_credentials.user_id;
  -- Signed URLs of storage objects the user made.
  insert into app.storage_usage as u (user_id, signed_urls_valid_after) values (end_credentials.user_id, now())
    on conflict on constraint storage_usage_pkey do update set signed_urls_valid_after = now();
end;
$function$;

CREATE OR REPLACE FUNCTION private.tg_users__storage_purge()
 RETURNS trigger
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog'
AS $function$
begin
  perform private.storage_purge_enqueue('user', old.id);
  return null;
end;
$function$;

set local check_function_bodies to default;

drop trigger if exists _900_storage_purge on identity.users;
CREATE TRIGGER _900_storage_purge AFTER DELETE ON identity.users FOR EACH ROW EXECUTE FUNCTION private.tg_users__storage_purge();

comment on function private.end_credentials(uuid) is 'Ends every credential of a user: sessions, API tokens, OAuth tokens and pending codes, MCP sessions, the calendar feed URL, signed storage URLs (a password set through a set-password link calls it; a re-hash at sign-in does not).';

comment on function private.tg_users__storage_purge() is 'Trigger: an account deleted, the objects of its storage folder are deleted by a storage_purge job.';

--! split: 903-account.sql
-- Made by `npm run db -- areas --diff` from sql/areas/account.sql: the statements that make
-- the migrated database what that file states. Each run writes it again:
-- edit the area file, not this one. Table changes go in a file of this
-- folder numbered below 900.

-- Bodies are checked once every function exists (the check validated them all).
set local check_function_bodies = off;

CREATE OR REPLACE FUNCTION private.account_files(user_id uuid)
 RETURNS jsonb
 LANGUAGE sql
 STABLE
 SET search_path TO 'pg_catalog'
AS $function$
    -- The objects the user uploaded (owner_id), in every bucket.
    select coalesce(jsonb_agg(jsonb_build_object(
             'bucket', o.bucket_id, 'path', o.name, 'size', o.size,
             'content_type', o.content_type, 'created_at', app.iso(o.created_at))
             order by o.bucket_id, o.name), '[]'::jsonb)
      from app.storage_objects o
     where o.owner_id = account_files.user_id
  $function$;

set local check_function_bodies to default;

comment on function private.account_files(uuid) is 'The stored files of a user for the export of their data: [{bucket, path, size, content_type, created_at}], every object they uploaded (app.storage_objects.owner_id).';

--! split: 904-profile.sql
-- Made by `npm run db -- areas --diff` from sql/areas/profile.sql: the statements that make
-- the migrated database what that file states. Each run writes it again:
-- edit the area file, not this one. Table changes go in a file of this
-- folder numbered below 900.

comment on column app.profiles.avatar_object_id is null;

comment on column app.subscription_plans.storage_quota_bytes is null;

comment on column app.subscription_plans.storage_uploads_per_minute is null;

-- Bodies are checked once every function exists (the check validated them all).
set local check_function_bodies = off;

CREATE OR REPLACE FUNCTION api.profile_get()
 RETURNS SETOF api.user_profile
 LANGUAGE sql
 STABLE
AS $function$
    select p.id, u.email, p.name, s.is_premium, p.subscription_type,
           s.max_hats, p.node_id, p.created_at, p.updated_at, app.storage_public_url(p.avatar_object_id)
      from app.profiles p
      join identity.users u on u.id = p.id
      join app.subscription_plans s on s.id = p.subscription_type
  $function$;

CREATE OR REPLACE FUNCTION api.profile_patch(patch jsonb)
 RETURNS SETOF api.user_profile
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog'
AS $function$
declare
  caller uuid := auth.uid();
begin
  if pg_catalog.jsonb_typeof(profile_patch.patch) is distinct from 'object' then
    raise exception 'the patch must be an object' using errcode = 'PT422', hint = 'validation_error';
  end if;
  if profile_patch.patch ? 'name' then
    perform api.profile_update(profile_patch.patch->>'name');
  end if;
  if profile_patch.patch ? 'avatar_path' then
    -- An object of the avatars bucket in the caller's own folder, or null to clear.
    update app.profiles p
       set avatar_object_id = private.storage_image_object('avatars', profile_patch.patch->>'avatar_path', caller)
     where p.id = caller;
    if not found then
      raise exception 'profile not found' using errcode = 'PT404', hint = 'profile_not_found';
    end if;
  end if;
  return query
    select p.id, u.email, p.name, s.is_premium, p.subscription_type,
           s.max_hats, p.node_id, p.created_at, p.updated_at, app.storage_public_url(p.avatar_object_id)
      from app.profiles p
      join identity.users u on u.id = p.id
      join app.subscription_plans s on s.id = p.subscription_type
     where p.id = caller;
  if not found then
    raise exception 'profile not found' using errcode = 'PT404', hint = 'profile_not_found';
  end if;
end;
$function$;

CREATE OR REPLACE FUNCTION api.profile_update(name text)
 RETURNS SETOF api.user_profile
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog'
AS $function$
declare
  new_name text := btrim(profile_update.name);
begin
  if new_name is null or length(new_name) not between 1 and 200 then
    raise exception 'name must be 1 to 200 characters' using errcode = 'PT422', hint = 'validation_error';
  end if;
  update app.profiles p
     set name = new_name, name_source = 'chosen'
   where p.id = auth.uid();
  if not found then
    raise exception 'profile not found' using errcode = 'PT404', hint = 'profile_not_found';
  end if;
  return query
    select p.id, u.email, p.name, s.is_premium, p.subscription_type,
           s.max_hats, p.node_id, p.created_at, p.updated_at, app.storage_public_url(p.avatar_object_id)
      from app.profiles p
      join identity.users u on u.id = p.id
      join app.subscription_plans s on s.id = p.subscription_type
     where p.id = auth.uid();
end;
$function$;

set local check_function_bodies to default;

grant execute on function api.profile_patch(jsonb) to authenticated;

comment on function api.profile_patch(jsonb) is 'PATCH /api/mobile/profile: changes what the patch names: name (as api.profile_update) and avatar_path (an object of the avatars bucket in the caller''s folder, or null to clear). PT422 validation_error or invalid_image_path, PT404 without a profile.';

comment on function api.profile_update(text) is 'Sets the caller''s name (then chosen: visible to other members). PT422 for an empty or too long name, PT404 without a profile.';

--! split: 905-communities.sql
-- Made by `npm run db -- areas --diff` from sql/areas/communities.sql: the statements that make
-- the migrated database what that file states. Each run writes it again:
-- edit the area file, not this one. Table changes go in a file of this
-- folder numbered below 900.

comment on column app.communities.image_object_id is null;

-- Bodies are checked once every function exists (the check validated them all).
set local check_function_bodies = off;

CREATE OR REPLACE FUNCTION api.community_update(community_id uuid, patch jsonb)
 RETURNS jsonb
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog'
AS $function$
declare
  caller uuid := auth.uid();
begin
  perform app.require_community(community_update.community_id);
  if not private.is_community_manager(community_update.community_id, caller) then
    raise exception 'only managers of the community may change it' using errcode = 'PT403', hint = 'not_community_manager';
  end if;
  if pg_catalog.jsonb_typeof(community_update.patch) is distinct from 'object' then
    raise exception 'the patch must be an object' using errcode = 'PT422', hint = 'validation_error';
  end if;
  if community_update.patch ? 'image_path' then
    -- An object of the community-images bucket in the community's folder, or null to clear.
    update app.communities c
       set image_object_id = private.storage_image_object('community-images', community_update.patch->>'image_path', caller)
     where c.id = community_update.community_id;
  end if;
  return api.community_get(community_update.community_id);
end;
$function$;

CREATE OR REPLACE FUNCTION app.community_json(c app.communities)
 RETURNS jsonb
 LANGUAGE sql
 STABLE
AS $function$
    select pg_catalog.jsonb_build_object(
      'id', c.id, 'name', c.name, 'description', c.description, 'tags', pg_catalog.to_jsonb(c.tags),
      'member_count', c.member_count, 'created_at', app.iso(c.created_at), 'updated_at', app.iso(c.updated_at),
      'image_url', app.storage_public_url(c.image_object_id))
  $function$;

CREATE OR REPLACE FUNCTION private.tg_communities__storage_purge()
 RETURNS trigger
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog'
AS $function$
begin
  perform private.storage_purge_enqueue('community', old.id);
  return null;
end;
$function$;

set local check_function_bodies to default;

drop trigger if exists _900_storage_purge on app.communities;
CREATE TRIGGER _900_storage_purge AFTER DELETE ON app.communities FOR EACH ROW EXECUTE FUNCTION private.tg_communities__storage_purge();

grant execute on function api.community_update(uuid,jsonb) to authenticated;

grant select (image_object_id) on table app.communities to anon, authenticated;

comment on function api.community_update(uuid,jsonb) is 'PATCH /api/mobile/communities/{id}: a manager changes what the patch names: image_path (an object of the community-images bucket in the community''s folder, or null to clear). PT403 not_community_manager, PT404 community_not_found, PT422 invalid_image_path.';

comment on function app.community_json(app.communities) is 'id, name, description, tags, member_count, created_at, updated_at, image_url of a community (CommunityListItem''s common part; inlined by the planner).';

comment on function private.tg_communities__storage_purge() is 'Trigger: a community deleted, the objects of its storage folder are deleted by a storage_purge job.';

--! split: 906-events.sql
-- Made by `npm run db -- areas --diff` from sql/areas/events.sql: the statements that make
-- the migrated database what that file states. Each run writes it again:
-- edit the area file, not this one. Table changes go in a file of this
-- folder numbered below 900.

comment on column app.events.image_object_id is null;

-- Bodies are checked once every function exists (the check validated them all).
set local check_function_bodies = off;

CREATE OR REPLACE FUNCTION api.event_page(shortlink text, public_url text)
 RETURNS jsonb
 LANGUAGE plpgsql
 STABLE SECURITY DEFINER
 SET search_path TO 'pg_catalog'
AS $function$
declare
  found app.events;
  gone app.event_tombstones;
  community app.communities;
  venue app.venues;
  base text := rtrim(public_url, '/');
  location_text text;
begin
  select e.* into found from app.events e
   where e.shortlink = event_page.shortlink and private.community_events_public(e.community_id);
  if found.id is null then
    -- A deleted event's page says it is cancelled while its tombstone is kept
    -- (until its end is 30 days past: private.event_tombstones_prune).
    select t.* into gone from app.event_tombstones t
     where t.shortlink = event_page.shortlink and private.community_events_public(t.community_id)
     order by t.deleted_at desc
     limit 1;
    if gone.event_id is null then
      raise exception 'event not found' using errcode = 'PT404', hint = 'event_not_found';
    end if;
    select c.* into community from app.communities c where c.id = gone.community_id;
    select v.* into venue from app.venues v where v.node_id = gone.venue_node_id;
    return private.event_page_json(gone.title, gone.description, gone.starts_at, gone.ends_at, gone.timezone,
                                   gone.image_path, gone.event_url, gone.shortlink, gone.location, venue, community,
                                   base, true);
  end if;
  select c.* into community from app.communities c where c.id = found.community_id;
  select v.* into venue from app.venues v where v.node_id = found.venue_node_id;
  location_text := private.event_location_text(venue.name, venue.address, found.location);
  -- The image as a URL (the stored object's public URL, else the external
  -- one), and the share preview's: a 1200x630 transformation when stored here.
  return private.event_page_json(found.title, found.description, found.starts_at, found.ends_at, found.timezone,
                                 coalesce(app.storage_public_url(found.image_object_id), found.image_path),
                                 found.event_url, found.shortlink, location_text, venue, community,
                                 base, false)
         || jsonb_build_object('og_image', coalesce(private.storage_render_url(found.image_object_id, 1200, 630, 'cover'),
                                                    app.storage_public_url(found.image_object_id), found.image_path));
end;
$function$;

CREATE OR REPLACE FUNCTION api.event_update(id uuid, patch jsonb, public_url text)
 RETURNS jsonb
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog'
AS $function$
declare
  caller uuid := auth.uid();
  found_event app.events := private.find_event(event_update.id);
begin
  if found_event.id is null then
    raise exception 'event not found' using errcode = 'PT404', hint = 'event_not_found';
  end if;
  if not private.is_community_manager(found_event.community_id, caller) then
    raise exception 'only managers of the event''s community may change it' using errcode = 'PT403', hint = 'not_community_manager';
  end if;
  if pg_catalog.jsonb_typeof(event_update.patch) is distinct from 'object' then
    raise exception 'the patch must be an object' using errcode = 'PT422', hint = 'validation_error';
  end if;
  if event_update.patch ? 'image_path' then
    -- An object of the event-images bucket in the event's folder, or null to clear (a platform's external image stays).
    update app.events e
       set image_object_id = private.storage_image_object('event-images', event_update.patch->>'image_path', caller)
     where e.id = found_event.id
    returning e.* into found_event;
  end if;
  return private.event_json(found_event, event_update.public_url);
end;
$function$;

CREATE OR REPLACE FUNCTION api.venue_checkin(venue_id uuid, hat_id uuid, visibility text DEFAULT NULL::text)
 RETURNS SETOF api.venue_checkin_outcome
 LANGUAGE plpgsql
 SET search_path TO 'pg_catalog'
AS $function$
declare
  event_count integer;
  only_event uuid;
  selection jsonb;
begin
  if not exists (select from app.venues v where v.node_id = venue_checkin.venue_id) then
    raise exception 'venue not found' using errcode = 'PT404', hint = 'venue_not_found';
  end if;
  if hat_id is null or not private.hat_belongs_to(hat_id, auth.uid()) then
    raise exception 'hat_id must be one of your hats' using errcode = 'PT422', hint = 'invalid_hat';
  end if;

  select count(*), min(e.id::text)::uuid,
         coalesce(jsonb_agg(jsonb_build_object(
           'id', e.id, 'node_id', e.node_id, 'title', e.title, 'description', e.description,
           'date', app.iso(e.starts_at), 'end_time', app.iso(e.ends_at),
           'image_path', coalesce(private.storage_object_name(e.image_object_id), e.image_path),
           'image_url', coalesce(app.storage_public_url(e.image_object_id), e.image_path)) order by e.starts_at, e.id), '[]'::jsonb)
    into event_count, only_event, selection
    from private.venue_concurrent_events(venue_checkin.venue_id) e;

  if event_count = 0 then
    return query select 'venue', o.created, o.checkin, null::jsonb
      from private.check_in(null, venue_checkin.venue_id, hat_id, null, visibility) o;
  elsif event_count = 1 then
    return query select 'event', o.created, o.checkin, null::jsonb
      from private.check_in(only_event, null, hat_id, null, visibility) o;
  else
    return query select 'event_selection', false, null::jsonb, selection;
  end if;
end;
$function$;

CREATE OR REPLACE FUNCTION private.event_object(e app.events, community_node_id uuid, caller_manages boolean, public_url text)
 RETURNS jsonb
 LANGUAGE sql
 STABLE
AS $function$
    select pg_catalog.jsonb_build_object(
             'id', e.id,
             'title', e.title,
             'date', app.iso(e.starts_at),
             'community_node_id', community_node_id,
             'shortlink', e.shortlink,
             'deeplink_path', '/l/event/' || e.shortlink,
             'deeplink_url', pg_catalog.rtrim(public_url, '/') || '/l/event/' || e.shortlink,
             'public_url', '/e/' || e.shortlink,
             'public_full_url', pg_catalog.rtrim(public_url, '/') || '/e/' || e.shortlink,
             'description', e.description,
             'end_time', app.iso(e.ends_at),
             'event_url', e.event_url,
             'image_path', coalesce(private.storage_object_name(e.image_object_id), e.image_path),
             'image_url', coalesce(app.storage_public_url(e.image_object_id), e.image_path),
             'location', e.location,
             'node_id', e.node_id,
             'platform_a_url', e.platform_a_url,
             'platform_b_url', e.platform_b_url,
             'platform_c_url', e.platform_c_url,
             'timezone', e.timezone)
           operator(pg_catalog.||)
           case when caller_manages then pg_catalog.jsonb_build_object(
             'can_sync', true,
             'external_platforms', pg_catalog.to_jsonb(pg_catalog.array_remove(array[
               case when e.platform_a_url is not null then 'platform_a' end,
               case when e.platform_b_url is not null then 'platform_b' end,
               case when e.platform_c_url is not null then 'platform_c' end
             ], null)))
           else '{}'::jsonb end
  $function$;

CREATE OR REPLACE FUNCTION private.tg_events__storage_purge()
 RETURNS trigger
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog'
AS $function$
begin
  perform private.storage_purge_enqueue('event', old.id);
  return null;
end;
$function$;

set local check_function_bodies to default;

drop trigger if exists _900_storage_purge on app.events;
CREATE TRIGGER _900_storage_purge AFTER DELETE ON app.events FOR EACH ROW EXECUTE FUNCTION private.tg_events__storage_purge();

grant execute on function api.event_update(uuid,jsonb,text) to authenticated;

comment on function api.event_page(text,text) is 'GET /e/{shortlink} (no credential): what the public page and its previews show: og_image (a 1200x630 transformation of a stored image, else the image), title, description, date, end (the effective end), timezone, image_path, event_url, url (the page), calendar_path, checkin_path (null once cancelled), location ("venue, address" or the location text), place {name, address, latitude, longitude} for schema.org (the venue, its address else its name; else the location text; else the community), organizer {name, url: the community''s public page}, event_status (EventScheduled, or EventCancelled for a deleted event while its tombstone is kept), attendance_mode. PT404 event_not_found, also for an event of a draft community.';

comment on function api.event_update(uuid,jsonb,text) is 'PATCH /api/mobile/events/{id}: a manager of the event''s community changes what the patch names: image_path (an object of the event-images bucket in the event''s folder, or null to clear). PT403 not_community_manager, PT404 event_not_found, PT422 invalid_image_path.';

comment on function private.tg_events__storage_purge() is 'Trigger: an event deleted, the objects of its storage folder are deleted by a storage_purge job.';

--! split: 917-storage.sql
-- Made by `npm run db -- areas --diff` from sql/areas/storage.sql: the statements that make
-- the migrated database what that file states. Each run writes it again:
-- edit the area file, not this one. Table changes go in a file of this
-- folder numbered below 900.

-- Bodies are checked once every function exists (the check validated them all).
set local check_function_bodies = off;

CREATE OR REPLACE FUNCTION api.storage_bucket_get(bucket_id text)
 RETURNS jsonb
 LANGUAGE sql
 STABLE SECURITY DEFINER
 SET search_path TO 'pg_catalog'
AS $function$
    select private.storage_bucket_json(private.storage_bucket(storage_bucket_get.bucket_id))
  $function$;

CREATE OR REPLACE FUNCTION api.storage_buckets_list()
 RETURNS jsonb
 LANGUAGE sql
 STABLE SECURITY DEFINER
 SET search_path TO 'pg_catalog'
AS $function$
    select coalesce(pg_catalog.jsonb_agg(private.storage_bucket_json(b) order by b.id), '[]'::jsonb)
      from app.storage_buckets b
  $function$;

CREATE OR REPLACE FUNCTION api.storage_object_copy_begin(bucket_id text, source text, destination_bucket text, destination text, upsert boolean)
 RETURNS TABLE(upload_id uuid, storage_key text, source_key text, size bigint, content_type text, cache_control text, etag text, width integer, height integer, user_metadata jsonb)
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog'
AS $function$
declare
  caller uuid := auth.uid();
  src record;
  target app.storage_buckets := private.storage_bucket(coalesce(storage_object_copy_begin.destination_bucket, storage_object_copy_begin.bucket_id));
  started record;
begin
  if caller is null then
    raise exception 'not signed in' using errcode = 'PT401', hint = 'unauthorized';
  end if;
  select * into src from api.storage_object_get(storage_object_copy_begin.bucket_id, storage_object_copy_begin.source);
  if not private.storage_type_allowed(target, src.content_type) or (target.images and src.width is null) then
    raise exception 'mime type % is not supported in bucket %', src.content_type, target.id using errcode = 'PT415', hint = 'invalid_mime_type';
  end if;
  select * into started from private.storage_upload_start(caller, target.id, storage_object_copy_begin.destination,
    coalesce(storage_object_copy_begin.upsert, false), src.size, 'copy');
  return query select started.upload_id, started.storage_key, src.storage_key, src.size, src.content_type, src.cache_control, src.etag,
                      src.width, src.height, src.user_metadata;
end;
$function$;

CREATE OR REPLACE FUNCTION api.storage_object_get(bucket text, path text, public_only boolean DEFAULT false)
 RETURNS TABLE(id uuid, bucket_id text, name text, storage_key text, size bigint, content_type text, cache_control text, etag text, width integer, height integer, user_metadata jsonb, version uuid, created_at timestamp with time zone, updated_at timestamp with time zone, public boolean, images boolean, download_as_attachment boolean)
 LANGUAGE plpgsql
 STABLE SECURITY DEFINER
 SET search_path TO 'pg_catalog'
AS $function$
declare
  b app.storage_buckets := private.storage_bucket(storage_object_get.bucket);
begin
  -- Not readable and absent look the same.
  if (storage_object_get.public_only and not b.public)
     or not (b.public or private.storage_folder_owned(b.id, storage_object_get.path, auth.uid())) then
    raise exception 'Object not found' using errcode = 'PT404', hint = 'object_not_found';
  end if;
  return query
    select o.id, o.bucket_id, o.name::text, o.storage_key, o.size, o.content_type, o.cache_control, o.etag, o.width, o.height,
           o.user_metadata, o.version, o.created_at, o.updated_at, b.public, b.images, b.download_as_attachment
      from app.storage_objects o
     where o.bucket_id = b.id and o.name = storage_object_get.path;
  if not found then
    raise exception 'Object not found' using errcode = 'PT404', hint = 'object_not_found';
  end if;
end;
$function$;

CREATE OR REPLACE FUNCTION api.storage_object_move(bucket_id text, source text, destination_bucket text, destination text)
 RETURNS void
 LANGUAGE plpgsql
 SET search_path TO 'pg_catalog'
AS $function$
declare
  target_bucket text := coalesce(storage_object_move.destination_bucket, storage_object_move.bucket_id);
begin
  perform private.storage_bucket(storage_object_move.bucket_id);
  perform private.storage_bucket(target_bucket);
  perform private.storage_check_name(storage_object_move.destination);
  if not private.storage_folder_owned(target_bucket, storage_object_move.destination, auth.uid()) then
    raise exception 'Access denied: you may not write %/%', target_bucket, storage_object_move.destination
      using errcode = 'PT403', hint = 'storage_access_denied';
  end if;
  if exists (select from app.storage_objects o where o.bucket_id = target_bucket and o.name = storage_object_move.destination) then
    raise exception 'The resource already exists' using errcode = 'PT409', hint = 'object_exists';
  end if;
  -- Row-level security: the source must be in a folder the caller owns.
  update app.storage_objects o
     set bucket_id = target_bucket, name = storage_object_move.destination
   where o.bucket_id = storage_object_move.bucket_id and o.name = storage_object_move.source;
  if not found then
    raise exception 'Object not found' using errcode = 'PT404', hint = 'object_not_found';
  end if;
end;
$function$;

CREATE OR REPLACE FUNCTION api.storage_object_signed(bucket text, path text, token text)
 RETURNS TABLE(id uuid, bucket_id text, name text, storage_key text, size bigint, content_type text, cache_control text, etag text, width integer, height integer, user_metadata jsonb, version uuid, created_at timestamp with time zone, updated_at timestamp with time zone, public boolean, images boolean, download_as_attachment boolean, transform jsonb)
 LANGUAGE plpgsql
 STABLE SECURITY DEFINER
 SET search_path TO 'pg_catalog'
AS $function$
declare
  claims jsonb := private.storage_token_claims(storage_object_signed.token, 'download',
    storage_object_signed.bucket || '/' || storage_object_signed.path);
begin
  return query
    select o.id, o.bucket_id, o.name::text, o.storage_key, o.size, o.content_type, o.cache_control, o.etag, o.width, o.height,
           o.user_metadata, o.version, o.created_at, o.updated_at, b.public, b.images, b.download_as_attachment, claims->'transform'
      from app.storage_objects o
      join app.storage_buckets b on b.id = o.bucket_id
     where o.bucket_id = storage_object_signed.bucket and o.name = storage_object_signed.path;
  if not found then
    raise exception 'Object not found' using errcode = 'PT404', hint = 'object_not_found';
  end if;
end;
$function$;

CREATE OR REPLACE FUNCTION api.storage_objects_list(bucket_id text, prefix text, max_rows integer, skip integer, search text, sort_column text, sort_order text)
 RETURNS jsonb
 LANGUAGE plpgsql
 STABLE
 SET search_path TO 'pg_catalog'
AS $function$
declare
  folder text := coalesce(storage_objects_list.prefix, '');
  pattern text;
  descending boolean := lower(coalesce(storage_objects_list.sort_order, 'asc')) = 'desc';
  sort text := coalesce(storage_objects_list.sort_column, 'name');
  result jsonb;
begin
  perform private.storage_bucket(storage_objects_list.bucket_id);
  if sort not in ('name', 'created_at', 'updated_at', 'last_accessed_at') then
    raise exception 'sortBy.column must be name, created_at, updated_at or last_accessed_at' using errcode = 'PT400', hint = 'bad_request';
  end if;
  -- A prefix names a folder: `a/b` lists what is under `a/b/`.
  folder := pg_catalog.ltrim(folder, '/');
  if folder <> '' and right(folder, 1) <> '/' then
    folder := folder || '/';
  end if;
  pattern := pg_catalog.replace(pg_catalog.replace(pg_catalog.replace(coalesce(storage_objects_list.search, ''), '\', '\\'), '%', '\%'), '_', '\_') || '%';
  -- Row-level security: only objects of folders the caller owns.
  with under as (
    select o as obj, pg_catalog.substr(o.name, length(folder) + 1) as rest
      from app.storage_objects o
     where o.bucket_id = storage_objects_list.bucket_id
       and o.name like pg_catalog.replace(folder, '_', '\_') || '%'
  ), folders as (
    select distinct pg_catalog.split_part(u.rest, '/', 1) as entry_name
      from under u
     where pg_catalog.strpos(u.rest, '/') > 0 and pg_catalog.split_part(u.rest, '/', 1) ilike pattern
  ), entries as (
    select f.entry_name, null::app.storage_objects as obj from folders f
    union all
    select u.rest, u.obj from under u where pg_catalog.strpos(u.rest, '/') = 0 and u.rest ilike pattern
  ), keyed as (
    select e.entry_name, e.obj,
           case sort when 'name' then e.entry_name
                     when 'created_at' then app.iso((e.obj).created_at)
                     else app.iso((e.obj).updated_at) end as sort_key
      from entries e
  ), page as (
    select k.entry_name, k.obj,
           row_number() over (order by (k.obj).id is not null,
                                       case when not descending then k.sort_key end collate "C" asc,
                                       case when descending then k.sort_key end collate "C" desc,
                                       k.entry_name collate "C") as ord
      from keyed k
     order by ord
     limit greatest(coalesce(storage_objects_list.max_rows, 100), 0)
    offset greatest(coalesce(storage_objects_list.skip, 0), 0)
  )
  select coalesce(pg_catalog.jsonb_agg(
           case when p.obj is null then
             pg_catalog.jsonb_build_object('name', p.entry_name, 'id', null, 'updated_at', null, 'created_at', null,
                                           'last_accessed_at', null, 'metadata', null)
           else
             pg_catalog.jsonb_build_object('name', p.entry_name, 'id', (p.obj).id, 'updated_at', app.iso((p.obj).updated_at),
                                           'created_at', app.iso((p.obj).created_at), 'last_accessed_at', app.iso((p.obj).updated_at),
                                           'metadata', private.storage_object_metadata(p.obj))
           end order by p.ord), '[]'::jsonb)
    into result
    from page p;
  return result;
end;
$function$;

CREATE OR REPLACE FUNCTION api.storage_objects_remove(bucket_id text, names text[])
 RETURNS jsonb
 LANGUAGE plpgsql
 SET search_path TO 'pg_catalog'
AS $function$
declare
  result jsonb;
begin
  perform private.storage_bucket(storage_objects_remove.bucket_id);
  -- Row-level security: only objects of folders the caller owns; the rest are not there for them.
  with gone as (
    delete from app.storage_objects o
     where o.bucket_id = storage_objects_remove.bucket_id and o.name = any (storage_objects_remove.names)
    returning o.*
  )
  select coalesce(pg_catalog.jsonb_agg(private.storage_object_json(g) order by g.name), '[]'::jsonb) into result from gone g;
  return result;
end;
$function$;

CREATE OR REPLACE FUNCTION api.storage_resumable_upload(upload_id uuid)
 RETURNS TABLE(storage_key text, file_size_limit bigint, allowed_mime_types text[], images boolean, bucket_id text, name text, declared_size bigint)
 LANGUAGE plpgsql
 STABLE SECURITY DEFINER
 SET search_path TO 'pg_catalog'
AS $function$
begin
  return query
    select u.storage_key, b.file_size_limit, b.allowed_mime_types, b.images, u.bucket_id, u.name::text, u.declared_size
      from app.storage_uploads u
      join app.storage_buckets b on b.id = u.bucket_id
     where u.id = storage_resumable_upload.upload_id and u.kind = 'resumable'
       and u.owner_id = auth.uid() and u.expires_at > now();
  if not found then
    raise exception 'Upload not found' using errcode = 'PT404', hint = 'upload_not_found';
  end if;
end;
$function$;

CREATE OR REPLACE FUNCTION api.storage_sign(bucket_id text, names text[], expires_in integer, transform jsonb DEFAULT NULL::jsonb)
 RETURNS jsonb
 LANGUAGE plpgsql
 STABLE SECURITY DEFINER
 SET search_path TO 'pg_catalog'
AS $function$
declare
  caller uuid := auth.uid();
  b app.storage_buckets := private.storage_bucket(storage_sign.bucket_id);
  result jsonb := '[]'::jsonb;
  object_name text;
  readable boolean;
  route text := case when storage_sign.transform is null then '/object/sign/' else '/render/image/sign/' end;
begin
  if storage_sign.expires_in is null or storage_sign.expires_in not between 1 and 31536000 then
    raise exception 'expiresIn must be 1 to 31536000 seconds' using errcode = 'PT400', hint = 'bad_request';
  end if;
  foreach object_name in array storage_sign.names loop
    readable := (b.public or private.storage_folder_owned(b.id, object_name, caller))
                and exists (select from app.storage_objects o where o.bucket_id = b.id and o.name = object_name);
    result := result || pg_catalog.jsonb_build_array(pg_catalog.jsonb_build_object(
      'path', object_name,
      'error', case when readable then null else 'Either the object does not exist or you do not have access to it' end,
      'signedURL', case when readable then
        route || b.id || '/' || object_name || '?token=' || private.storage_token(pg_catalog.jsonb_strip_nulls(pg_catalog.jsonb_build_object(
          'scope', 'download', 'url', b.id || '/' || object_name, 'sub', caller, 'transform', storage_sign.transform)),
          storage_sign.expires_in) end));
  end loop;
  return result;
end;
$function$;

CREATE OR REPLACE FUNCTION api.storage_sign_upload(bucket_id text, name text, upsert boolean)
 RETURNS jsonb
 LANGUAGE plpgsql
 STABLE SECURITY DEFINER
 SET search_path TO 'pg_catalog'
AS $function$
declare
  caller uuid := auth.uid();
  b app.storage_buckets := private.storage_bucket(storage_sign_upload.bucket_id);
  token text;
begin
  perform private.storage_check_name(storage_sign_upload.name);
  if not private.storage_folder_owned(b.id, storage_sign_upload.name, caller) then
    raise exception 'Access denied: you may not write %/%', b.id, storage_sign_upload.name using errcode = 'PT403', hint = 'storage_access_denied';
  end if;
  token := private.storage_token(pg_catalog.jsonb_build_object('scope', 'upload', 'url', b.id || '/' || storage_sign_upload.name,
    'sub', caller, 'upsert', coalesce(storage_sign_upload.upsert, false)), 7200);
  return pg_catalog.jsonb_build_object('url', '/object/upload/sign/' || b.id || '/' || storage_sign_upload.name || '?token=' || token,
                                       'token', token);
end;
$function$;

CREATE OR REPLACE FUNCTION api.storage_upload_begin(bucket_id text, name text, upsert boolean, declared_size bigint, kind text DEFAULT 'direct'::text)
 RETURNS TABLE(upload_id uuid, storage_key text, file_size_limit bigint, allowed_mime_types text[], images boolean)
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog'
AS $function$
declare
  caller uuid := auth.uid();
begin
  if caller is null then
    raise exception 'not signed in' using errcode = 'PT401', hint = 'unauthorized';
  end if;
  if storage_upload_begin.kind not in ('direct', 'resumable') then
    raise exception 'kind must be direct or resumable' using errcode = 'PT400', hint = 'bad_request';
  end if;
  return query select * from private.storage_upload_start(caller, storage_upload_begin.bucket_id, storage_upload_begin.name,
    coalesce(storage_upload_begin.upsert, false), storage_upload_begin.declared_size, storage_upload_begin.kind);
end;
$function$;

CREATE OR REPLACE FUNCTION api.storage_upload_begin_signed(bucket_id text, name text, token text, declared_size bigint)
 RETURNS TABLE(upload_id uuid, storage_key text, file_size_limit bigint, allowed_mime_types text[], images boolean)
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog'
AS $function$
declare
  claims jsonb := private.storage_token_claims(storage_upload_begin_signed.token, 'upload',
    storage_upload_begin_signed.bucket_id || '/' || storage_upload_begin_signed.name);
begin
  return query select * from private.storage_upload_start((claims->>'sub')::uuid, storage_upload_begin_signed.bucket_id,
    storage_upload_begin_signed.name, coalesce((claims->>'upsert')::boolean, false), storage_upload_begin_signed.declared_size, 'signed');
end;
$function$;

CREATE OR REPLACE FUNCTION app.storage_public_url(object_id uuid)
 RETURNS text
 LANGUAGE sql
 STABLE STRICT SECURITY DEFINER
 SET search_path TO 'pg_catalog'
AS $function$
    select pg_catalog.rtrim(private.public_url(), '/') || '/storage/v1/object/public/' || o.bucket_id || '/' || private.storage_url_path(o.name)
      from app.storage_objects o
      join app.storage_buckets b on b.id = o.bucket_id and b.public
     where o.id = storage_public_url.object_id
  $function$;

CREATE OR REPLACE FUNCTION private.storage_base64url(data bytea)
 RETURNS text
 LANGUAGE sql
 IMMUTABLE
 SET search_path TO 'pg_catalog'
AS $function$
    select pg_catalog.translate(pg_catalog.encode(storage_base64url.data, 'base64'), E'+/=\n', '-_')
  $function$;

CREATE OR REPLACE FUNCTION private.storage_base64url_decode(data text)
 RETURNS bytea
 LANGUAGE plpgsql
 IMMUTABLE
 SET search_path TO 'pg_catalog'
AS $function$
begin
  if storage_base64url_decode.data !~ '^[A-Za-z0-9_-]*$' then
    raise exception 'Invalid signature' using errcode = 'PT400', hint = 'invalid_signature';
  end if;
  return pg_catalog.decode(pg_catalog.translate(storage_base64url_decode.data, '-_', '+/')
    || pg_catalog.repeat('=', (4 - length(storage_base64url_decode.data) % 4) % 4), 'base64');
end;
$function$;

CREATE OR REPLACE FUNCTION private.storage_bucket(bucket_id text)
 RETURNS app.storage_buckets
 LANGUAGE plpgsql
 STABLE SECURITY DEFINER
 SET search_path TO 'pg_catalog'
AS $function$
declare
  b app.storage_buckets;
begin
  select * into b from app.storage_buckets s where s.id = storage_bucket.bucket_id;
  if b.id is null then
    raise exception 'Bucket not found' using errcode = 'PT404', hint = 'bucket_not_found';
  end if;
  return b;
end;
$function$;

CREATE OR REPLACE FUNCTION private.storage_bucket_json(b app.storage_buckets)
 RETURNS jsonb
 LANGUAGE sql
 STABLE
 SET search_path TO 'pg_catalog'
AS $function$
    select pg_catalog.jsonb_build_object('id', b.id, 'name', b.id, 'owner', '', 'public', b.public,
      'file_size_limit', b.file_size_limit, 'allowed_mime_types', b.allowed_mime_types,
      'created_at', app.iso(b.created_at), 'updated_at', app.iso(b.updated_at))
  $function$;

CREATE OR REPLACE FUNCTION private.storage_check_name(name text)
 RETURNS void
 LANGUAGE plpgsql
 IMMUTABLE
 SET search_path TO 'pg_catalog'
AS $function$
begin
  if storage_check_name.name is null
     or length(storage_check_name.name) not between 3 and 1024
     or storage_check_name.name !~ '^[A-Za-z0-9_/!.*''() &$@=;:+,?-]+$'
     or storage_check_name.name ~ '(^|/)\.{0,2}(/|$)' then
    raise exception 'Invalid key: %', left(coalesce(storage_check_name.name, ''), 1024)
      using errcode = 'PT400', hint = 'invalid_key';
  end if;
end;
$function$;

CREATE OR REPLACE FUNCTION private.storage_folder_id(name text)
 RETURNS uuid
 LANGUAGE sql
 IMMUTABLE
 SET search_path TO 'pg_catalog'
AS $function$
    select case when storage_folder_id.name ~ '^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}/[^/]'
                then pg_catalog.split_part(storage_folder_id.name, '/', 1)::uuid end
  $function$;

CREATE OR REPLACE FUNCTION private.storage_folder_owned(bucket_id text, name text, user_id uuid)
 RETURNS boolean
 LANGUAGE sql
 STABLE SECURITY DEFINER
 SET search_path TO 'pg_catalog'
AS $function$
    select coalesce((
      select case b.folder_owner
               when 'user' then f.id = storage_folder_owned.user_id
               when 'community' then private.is_community_manager(f.id, storage_folder_owned.user_id)
               when 'event' then exists (select from app.events e
                                          where e.id = f.id and private.is_community_manager(e.community_id, storage_folder_owned.user_id))
             end
        from app.storage_buckets b, (select private.storage_folder_id(storage_folder_owned.name) as id) f
       where b.id = storage_folder_owned.bucket_id and f.id is not null and storage_folder_owned.user_id is not null), false)
  $function$;

CREATE OR REPLACE FUNCTION private.storage_garbage_done(storage_keys text[], failures jsonb DEFAULT NULL::jsonb)
 RETURNS void
 LANGUAGE sql
 SET search_path TO 'pg_catalog'
AS $function$
    delete from app.storage_garbage g
     where g.storage_key = any (storage_garbage_done.storage_keys)
       and not (coalesce(storage_garbage_done.failures, '{}'::jsonb) ? g.storage_key);
    update app.storage_garbage g set last_error = left(storage_garbage_done.failures->>g.storage_key, 1000)
     where coalesce(storage_garbage_done.failures, '{}'::jsonb) ? g.storage_key;
  $function$;

CREATE OR REPLACE FUNCTION private.storage_garbage_take(max_rows integer DEFAULT 200)
 RETURNS TABLE(storage_key text)
 LANGUAGE sql
 SET search_path TO 'pg_catalog'
AS $function$
    -- A key an object uses again (a finish whose answer was lost) is not garbage.
    with used as (
      delete from app.storage_garbage g
       where g.collect_after <= now() and exists (select from app.storage_objects o where o.storage_key = g.storage_key)
    ), due as (
      select g.storage_key from app.storage_garbage g
       where g.collect_after <= now()
         and not exists (select from app.storage_objects o where o.storage_key = g.storage_key)
       order by g.collect_after
       limit storage_garbage_take.max_rows
       for update skip locked
    )
    update app.storage_garbage g
       set attempts = g.attempts + 1,
           collect_after = now() + least(interval '1 hour', interval '1 minute' * power(2, g.attempts))
      from due d where g.storage_key = d.storage_key
    returning g.storage_key
  $function$;

CREATE OR REPLACE FUNCTION private.storage_image_object(bucket_id text, name text, user_id uuid)
 RETURNS uuid
 LANGUAGE plpgsql
 STABLE SECURITY DEFINER
 SET search_path TO 'pg_catalog'
AS $function$
declare
  found_id uuid;
begin
  if storage_image_object.name is null then
    return null;
  end if;
  select o.id into found_id from app.storage_objects o
   where o.bucket_id = storage_image_object.bucket_id and o.name = storage_image_object.name;
  if found_id is null or not private.storage_folder_owned(storage_image_object.bucket_id, storage_image_object.name, storage_image_object.user_id) then
    raise exception 'no object % in % that you may use', storage_image_object.name, storage_image_object.bucket_id
      using errcode = 'PT422', hint = 'invalid_image_path';
  end if;
  return found_id;
end;
$function$;

CREATE OR REPLACE FUNCTION private.storage_object_json(o app.storage_objects)
 RETURNS jsonb
 LANGUAGE sql
 STABLE
 SET search_path TO 'pg_catalog'
AS $function$
    select pg_catalog.jsonb_build_object('id', o.id, 'name', o.name, 'bucket_id', o.bucket_id, 'owner', o.owner_id, 'owner_id', o.owner_id,
      'version', o.version, 'created_at', app.iso(o.created_at), 'updated_at', app.iso(o.updated_at),
      'last_accessed_at', app.iso(o.updated_at), 'metadata', private.storage_object_metadata(o), 'user_metadata', o.user_metadata)
  $function$;

CREATE OR REPLACE FUNCTION private.storage_object_metadata(o app.storage_objects)
 RETURNS jsonb
 LANGUAGE sql
 STABLE
 SET search_path TO 'pg_catalog'
AS $function$
    select pg_catalog.jsonb_build_object('eTag', o.etag, 'size', o.size, 'mimetype', o.content_type, 'cacheControl', o.cache_control,
      'lastModified', app.iso(o.updated_at), 'contentLength', o.size, 'httpStatusCode', 200)
  $function$;

CREATE OR REPLACE FUNCTION private.storage_object_name(object_id uuid)
 RETURNS text
 LANGUAGE sql
 STABLE STRICT SECURITY DEFINER
 SET search_path TO 'pg_catalog'
AS $function$
    select o.name::text from app.storage_objects o where o.id = storage_object_name.object_id
  $function$;

CREATE OR REPLACE FUNCTION private.storage_purge(folder_owner text, folder_id uuid, max_rows integer DEFAULT 500)
 RETURNS integer
 LANGUAGE sql
 SET search_path TO 'pg_catalog'
AS $function$
    with gone as (
      delete from app.storage_objects o
       where o.id in (
         select x.id from app.storage_objects x
           join app.storage_buckets b on b.id = x.bucket_id
          where b.folder_owner = storage_purge.folder_owner
            and x.name like storage_purge.folder_id::text || '/%'
          limit storage_purge.max_rows)
      returning o.id
    )
    select count(*)::integer from gone
  $function$;

CREATE OR REPLACE FUNCTION private.storage_purge_enqueue(folder_owner text, folder_id uuid)
 RETURNS bigint
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog'
AS $function$
begin
  if storage_purge_enqueue.folder_owner not in ('user', 'community', 'event') then
    raise exception 'folder_owner must be user, community or event' using errcode = '22023';
  end if;
  return private.enqueue_job('storage_purge',
    pg_catalog.jsonb_build_object('folder_owner', storage_purge_enqueue.folder_owner, 'id', storage_purge_enqueue.folder_id),
    job_key => 'storage_purge:' || storage_purge_enqueue.folder_owner || ':' || storage_purge_enqueue.folder_id);
end;
$function$;

CREATE OR REPLACE FUNCTION private.storage_quota_bytes(user_id uuid)
 RETURNS bigint
 LANGUAGE sql
 STABLE
 SET search_path TO 'pg_catalog'
AS $function$
    select coalesce(
      (select u.quota_bytes from app.storage_usage u where u.user_id = storage_quota_bytes.user_id),
      (select s.storage_quota_bytes from app.profiles p join app.subscription_plans s on s.id = p.subscription_type
        where p.id = storage_quota_bytes.user_id),
      (select s.storage_quota_bytes from app.subscription_plans s where s.id = 'basic'),
      0)
  $function$;

CREATE OR REPLACE FUNCTION private.storage_render_url(object_id uuid, width integer, height integer, resize text)
 RETURNS text
 LANGUAGE sql
 STABLE STRICT SECURITY DEFINER
 SET search_path TO 'pg_catalog'
AS $function$
    select pg_catalog.rtrim(private.public_url(), '/') || '/storage/v1/render/image/public/' || o.bucket_id || '/' || private.storage_url_path(o.name)
           || '?width=' || storage_render_url.width || '&height=' || storage_render_url.height || '&resize=' || storage_render_url.resize
      from app.storage_objects o
      join app.storage_buckets b on b.id = o.bucket_id and b.public and b.images
     where o.id = storage_render_url.object_id
  $function$;

CREATE OR REPLACE FUNCTION private.storage_token(claims jsonb, expires_in integer)
 RETURNS text
 LANGUAGE plpgsql
 STABLE SECURITY DEFINER
 SET search_path TO 'pg_catalog'
AS $function$
declare
  header text := private.storage_base64url(pg_catalog.convert_to('{"alg":"HS256","typ":"JWT"}', 'UTF8'));
  body text := private.storage_base64url(pg_catalog.convert_to((storage_token.claims
    || pg_catalog.jsonb_build_object('iat', extract(epoch from now()),
                                     'exp', floor(extract(epoch from now()))::bigint + storage_token.expires_in))::text, 'UTF8'));
begin
  return header || '.' || body || '.' || private.storage_base64url(
    extensions.hmac(pg_catalog.convert_to(header || '.' || body, 'UTF8'), (select k.secret from private.storage_signing_keys k), 'sha256'));
end;
$function$;

CREATE OR REPLACE FUNCTION private.storage_token_claims(token text, scope text, url text)
 RETURNS jsonb
 LANGUAGE plpgsql
 STABLE SECURITY DEFINER
 SET search_path TO 'pg_catalog'
AS $function$
declare
  parts text[] := pg_catalog.string_to_array(coalesce(storage_token_claims.token, ''), '.');
  claims jsonb;
  valid_after timestamptz;
begin
  if cardinality(parts) <> 3
     or parts[3] is distinct from private.storage_base64url(extensions.hmac(pg_catalog.convert_to(parts[1] || '.' || parts[2], 'UTF8'),
                                     (select k.secret from private.storage_signing_keys k), 'sha256')) then
    raise exception 'Invalid signature' using errcode = 'PT400', hint = 'invalid_signature';
  end if;
  claims := pg_catalog.convert_from(private.storage_base64url_decode(parts[2]), 'UTF8')::jsonb;
  if claims->>'scope' is distinct from storage_token_claims.scope or claims->>'url' is distinct from storage_token_claims.url then
    raise exception 'Invalid signature' using errcode = 'PT400', hint = 'invalid_signature';
  end if;
  if (claims->>'exp')::bigint <= extract(epoch from now()) then
    raise exception 'The signed URL has expired' using errcode = 'PT400', hint = 'signature_expired';
  end if;
  -- The signer's credentials ended (a password reset) after it was signed.
  select u.signed_urls_valid_after into valid_after from app.storage_usage u where u.user_id = (claims->>'sub')::uuid;
  if valid_after is not null and (claims->>'iat')::numeric <= extract(epoch from valid_after)
     or not exists (select from identity.users u where u.id = (claims->>'sub')::uuid) then
    raise exception 'The signed URL has expired' using errcode = 'PT400', hint = 'signature_expired';
  end if;
  return claims;
end;
$function$;

CREATE OR REPLACE FUNCTION private.storage_type_allowed(b app.storage_buckets, content_type text)
 RETURNS boolean
 LANGUAGE sql
 IMMUTABLE
 SET search_path TO 'pg_catalog'
AS $function$
    select b.allowed_mime_types is null
        or exists (select from pg_catalog.unnest(b.allowed_mime_types) t
                    where t = lower(pg_catalog.split_part(storage_type_allowed.content_type, ';', 1))
                       or (right(t, 2) = '/*' and lower(storage_type_allowed.content_type) like left(t, -1) || '%'))
  $function$;

CREATE OR REPLACE FUNCTION private.storage_upload_abort(upload_id uuid, storage_key text)
 RETURNS void
 LANGUAGE sql
 SET search_path TO 'pg_catalog'
AS $function$
    delete from app.storage_uploads u where u.id = storage_upload_abort.upload_id;
    -- Never the bytes of a visible object (a finish whose answer was lost may have committed).
    insert into app.storage_garbage (storage_key, collect_after)
      select storage_upload_abort.storage_key, now()
       where not exists (select from app.storage_objects o where o.storage_key = storage_upload_abort.storage_key)
      on conflict do nothing;
  $function$;

CREATE OR REPLACE FUNCTION private.storage_upload_finish(upload_id uuid, size bigint, etag text, content_type text, cache_control text, user_metadata jsonb, width integer, height integer)
 RETURNS jsonb
 LANGUAGE plpgsql
 SET search_path TO 'pg_catalog'
AS $function$
declare
  u app.storage_uploads;
  o app.storage_objects;
begin
  delete from app.storage_uploads p where p.id = storage_upload_finish.upload_id and p.expires_at > now() returning p.* into u;
  if u.id is null then
    raise exception 'The upload expired or was cancelled' using errcode = 'PT404', hint = 'upload_not_found';
  end if;
  -- The right to write may have ended while the bytes were on their way.
  if not private.storage_folder_owned(u.bucket_id, u.name, u.owner_id) then
    raise exception 'Access denied: you may not write %/%', u.bucket_id, u.name using errcode = 'PT403', hint = 'storage_access_denied';
  end if;
  if u.upsert then
    insert into app.storage_objects as s (bucket_id, name, owner_id, storage_key, size, content_type, cache_control, etag, width, height, user_metadata)
      values (u.bucket_id, u.name, u.owner_id, u.storage_key, storage_upload_finish.size, storage_upload_finish.content_type,
              coalesce(storage_upload_finish.cache_control, 'max-age=3600'), storage_upload_finish.etag,
              storage_upload_finish.width, storage_upload_finish.height, storage_upload_finish.user_metadata)
      on conflict on constraint storage_objects_bucket_name_key do update
        set owner_id = excluded.owner_id, storage_key = excluded.storage_key, size = excluded.size, content_type = excluded.content_type,
            cache_control = excluded.cache_control, etag = excluded.etag, width = excluded.width, height = excluded.height,
            user_metadata = excluded.user_metadata, version = gen_random_uuid()
      returning s.* into o;
  else
    if exists (select from app.storage_objects x where x.bucket_id = u.bucket_id and x.name = u.name) then
      raise exception 'The resource already exists' using errcode = 'PT409', hint = 'object_exists';
    end if;
    insert into app.storage_objects as s (bucket_id, name, owner_id, storage_key, size, content_type, cache_control, etag, width, height, user_metadata)
      values (u.bucket_id, u.name, u.owner_id, u.storage_key, storage_upload_finish.size, storage_upload_finish.content_type,
              coalesce(storage_upload_finish.cache_control, 'max-age=3600'), storage_upload_finish.etag,
              storage_upload_finish.width, storage_upload_finish.height, storage_upload_finish.user_metadata)
      returning s.* into o;
  end if;
  return private.storage_object_json(o);
end;
$function$;

CREATE OR REPLACE FUNCTION private.storage_upload_start(owner_id uuid, bucket_id text, name text, upsert boolean, declared_size bigint, kind text)
 RETURNS TABLE(upload_id uuid, storage_key text, file_size_limit bigint, allowed_mime_types text[], images boolean)
 LANGUAGE plpgsql
 SET search_path TO 'pg_catalog'
AS $function$
declare
  b app.storage_buckets := private.storage_bucket(storage_upload_start.bucket_id);
  existing app.storage_objects;
  used bigint;
  quota bigint;
  per_minute integer;
  w app.storage_usage;
  started app.storage_uploads;
begin
  perform private.storage_check_name(storage_upload_start.name);
  if not private.storage_folder_owned(b.id, storage_upload_start.name, storage_upload_start.owner_id) then
    raise exception 'Access denied: you may not write %/%', b.id, storage_upload_start.name using errcode = 'PT403', hint = 'storage_access_denied';
  end if;
  select * into existing from app.storage_objects o where o.bucket_id = b.id and o.name = storage_upload_start.name;
  if existing.id is not null and not storage_upload_start.upsert then
    raise exception 'The resource already exists' using errcode = 'PT409', hint = 'object_exists';
  end if;
  if storage_upload_start.declared_size > b.file_size_limit then
    raise exception 'The object exceeded the maximum allowed size (% bytes)', b.file_size_limit
      using errcode = 'PT413', hint = 'object_too_large';
  end if;
  -- The quota, with what is known now (the finish checks again with the real size).
  quota := private.storage_quota_bytes(storage_upload_start.owner_id);
  select coalesce(u.bytes, 0) into used from app.storage_usage u where u.user_id = storage_upload_start.owner_id;
  if coalesce(used, 0) + coalesce(storage_upload_start.declared_size, 0)
       - (case when existing.owner_id = storage_upload_start.owner_id then existing.size else 0 end) > quota
     or (storage_upload_start.declared_size is null and coalesce(used, 0) >= quota) then
    raise exception 'Storage quota exceeded: % of % bytes used', coalesce(used, 0), quota using errcode = 'PT413', hint = 'quota_exceeded';
  end if;
  -- Uploads per minute (a fixed window per user); a refused upload does not count.
  per_minute := coalesce(
    (select u.uploads_per_minute from app.storage_usage u where u.user_id = storage_upload_start.owner_id),
    (select s.storage_uploads_per_minute from app.profiles p join app.subscription_plans s on s.id = p.subscription_type
      where p.id = storage_upload_start.owner_id),
    30);
  insert into app.storage_usage as s (user_id, window_start, window_uploads)
    values (storage_upload_start.owner_id, now(), 1)
    on conflict (user_id) do update
      set window_start = case when s.window_start is null or s.window_start <= now() - interval '1 minute' then now() else s.window_start end,
          window_uploads = case when s.window_start is null or s.window_start <= now() - interval '1 minute' then 1 else s.window_uploads + 1 end
    returning s.* into w;
  if w.window_uploads > per_minute then
    raise exception 'Too many uploads: at most % a minute', per_minute using errcode = 'PT429', hint = 'too_many_uploads',
      detail = 'retry_after=' || greatest(1, ceil(extract(epoch from w.window_start + interval '1 minute' - now())))::integer;
  end if;
  insert into app.storage_uploads as u (bucket_id, name, owner_id, upsert, kind, storage_key, declared_size, expires_at)
    values (b.id, storage_upload_start.name, storage_upload_start.owner_id, storage_upload_start.upsert, storage_upload_start.kind,
            'objects/' || gen_random_uuid(), storage_upload_start.declared_size,
            now() + case storage_upload_start.kind when 'resumable' then interval '24 hours' else interval '1 hour' end)
    returning u.* into started;
  return query select started.id, started.storage_key, b.file_size_limit, b.allowed_mime_types, b.images;
end;
$function$;

CREATE OR REPLACE FUNCTION private.storage_uploads_expire(max_rows integer DEFAULT 1000)
 RETURNS integer
 LANGUAGE sql
 SET search_path TO 'pg_catalog'
AS $function$
    with gone as (
      delete from app.storage_uploads u
       where u.id in (select x.id from app.storage_uploads x where x.expires_at <= now()
                       order by x.expires_at limit storage_uploads_expire.max_rows for update skip locked)
      returning u.storage_key
    ), kept as (
      insert into app.storage_garbage (storage_key, collect_after)
        select g.storage_key, now() from gone g
         where not exists (select from app.storage_objects o where o.storage_key = g.storage_key)
        on conflict do nothing
    )
    select count(*)::integer from gone
  $function$;

CREATE OR REPLACE FUNCTION private.storage_url_path(name text)
 RETURNS text
 LANGUAGE sql
 IMMUTABLE
 SET search_path TO 'pg_catalog'
AS $function$
    select pg_catalog.replace(pg_catalog.replace(storage_url_path.name, ' ', '%20'), '?', '%3F')
  $function$;

CREATE OR REPLACE FUNCTION private.tg_storage_objects__bucket_rules()
 RETURNS trigger
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog'
AS $function$
declare
  b app.storage_buckets := private.storage_bucket(new.bucket_id);
begin
  if new.size > b.file_size_limit then
    raise exception 'The object exceeded the maximum allowed size (% bytes)', b.file_size_limit using errcode = 'PT413', hint = 'object_too_large';
  end if;
  if not private.storage_type_allowed(b, new.content_type) or (b.images and new.width is null) then
    raise exception 'mime type % is not supported in bucket %', new.content_type, b.id using errcode = 'PT415', hint = 'invalid_mime_type';
  end if;
  return new;
end;
$function$;

CREATE OR REPLACE FUNCTION private.tg_storage_objects__garbage()
 RETURNS trigger
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog'
AS $function$
begin
  if tg_op = 'DELETE' or new.storage_key is distinct from old.storage_key then
    insert into app.storage_garbage (storage_key) values (old.storage_key) on conflict do nothing;
  end if;
  return null;
end;
$function$;

CREATE OR REPLACE FUNCTION private.tg_storage_objects__usage()
 RETURNS trigger
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog'
AS $function$
declare
  used bigint;
begin
  if tg_op in ('UPDATE', 'DELETE') and old.owner_id is not null then
    update app.storage_usage u set bytes = u.bytes - old.size, objects = u.objects - 1 where u.user_id = old.owner_id;
  end if;
  if tg_op in ('INSERT', 'UPDATE') and new.owner_id is not null then
    insert into app.storage_usage as u (user_id, bytes, objects) values (new.owner_id, new.size, 1)
      on conflict (user_id) do update set bytes = u.bytes + excluded.bytes, objects = u.objects + 1
      returning u.bytes into used;
    -- Only what adds to a user's bytes is held to the quota (a smaller replacement, a move, always pass).
    if (tg_op = 'INSERT' or new.owner_id is distinct from old.owner_id or new.size > old.size)
       and used > private.storage_quota_bytes(new.owner_id) then
      raise exception 'Storage quota exceeded: % of % bytes', used, private.storage_quota_bytes(new.owner_id)
        using errcode = 'PT413', hint = 'quota_exceeded';
    end if;
  end if;
  return null;
end;
$function$;

set local check_function_bodies to default;

alter table app.storage_buckets enable row level security, no force row level security;

alter table app.storage_garbage enable row level security, no force row level security;

alter table app.storage_objects enable row level security, no force row level security;

alter table app.storage_uploads enable row level security, no force row level security;

alter table app.storage_usage enable row level security, no force row level security;

alter table private.storage_signing_keys enable row level security, no force row level security;

drop policy if exists "Objects in folders the caller owns" on app.storage_objects;
create policy "Objects in folders the caller owns" on app.storage_objects
  as permissive for all to authenticated
  using (private.storage_folder_owned(bucket_id, name, auth.uid()))
  with check (private.storage_folder_owned(bucket_id, name, auth.uid()));

drop trigger if exists storage_buckets_set_updated_at on app.storage_buckets;
CREATE TRIGGER storage_buckets_set_updated_at BEFORE UPDATE ON app.storage_buckets FOR EACH ROW EXECUTE FUNCTION private.tg__set_updated_at();

drop trigger if exists storage_objects_bucket_rules on app.storage_objects;
CREATE TRIGGER storage_objects_bucket_rules BEFORE INSERT OR UPDATE OF bucket_id, size, content_type, width ON app.storage_objects FOR EACH ROW EXECUTE FUNCTION private.tg_storage_objects__bucket_rules();

drop trigger if exists storage_objects_garbage on app.storage_objects;
CREATE TRIGGER storage_objects_garbage AFTER DELETE OR UPDATE OF storage_key ON app.storage_objects FOR EACH ROW EXECUTE FUNCTION private.tg_storage_objects__garbage();

drop trigger if exists storage_objects_set_updated_at on app.storage_objects;
CREATE TRIGGER storage_objects_set_updated_at BEFORE UPDATE ON app.storage_objects FOR EACH ROW EXECUTE FUNCTION private.tg__set_updated_at();

drop trigger if exists storage_objects_usage on app.storage_objects;
CREATE TRIGGER storage_objects_usage AFTER INSERT OR DELETE OR UPDATE OF owner_id, size ON app.storage_objects FOR EACH ROW EXECUTE FUNCTION private.tg_storage_objects__usage();

grant execute on function api.storage_bucket_get(text) to authenticated;

grant execute on function api.storage_buckets_list() to authenticated;

grant execute on function api.storage_object_copy_begin(text,text,text,text,boolean) to authenticated;

grant execute on function api.storage_object_get(text,text,boolean) to anon, authenticated;

grant execute on function api.storage_object_move(text,text,text,text) to authenticated;

grant execute on function api.storage_object_signed(text,text,text) to anon, authenticated;

grant execute on function api.storage_objects_list(text,text,integer,integer,text,text,text) to authenticated;

grant execute on function api.storage_objects_remove(text,text[]) to authenticated;

grant execute on function api.storage_resumable_upload(uuid) to authenticated;

grant execute on function api.storage_sign(text,text[],integer,jsonb) to authenticated;

grant execute on function api.storage_sign_upload(text,text,boolean) to authenticated;

grant execute on function api.storage_upload_begin(text,text,boolean,bigint,text) to authenticated;

grant execute on function api.storage_upload_begin_signed(text,text,text,bigint) to anon, authenticated;

grant execute on function app.storage_public_url(uuid) to anon, authenticated;

grant execute on function private.storage_bucket(text) to authenticated;

grant execute on function private.storage_check_name(text) to authenticated;

grant execute on function private.storage_folder_owned(text,text,uuid) to authenticated;

grant execute on function private.storage_object_json(app.storage_objects) to authenticated;

grant execute on function private.storage_object_metadata(app.storage_objects) to authenticated;

grant execute on function private.storage_object_name(uuid) to authenticated;

grant select, delete, update (bucket_id, name) on table app.storage_objects to authenticated;

comment on function api.storage_bucket_get(text) is 'GET /storage/v1/bucket/{id}: one bucket. PT404 bucket_not_found.';

comment on function api.storage_buckets_list() is 'GET /storage/v1/bucket: every bucket (their settings are not secret).';

comment on function api.storage_object_copy_begin(text,text,text,text,boolean) is 'POST /storage/v1/object/copy: checks that the caller may read the source and write the destination, and registers the copy as an upload (the gateway copies the bytes, then private.storage_upload_finish records it). The refusals of api.storage_object_get and api.storage_upload_begin; PT415 invalid_mime_type when the destination bucket does not take the type.';

comment on function api.storage_object_get(text,text,boolean) is 'Downloads, info and transformations of /storage/v1/object and /render/image: the object if the caller may read it (a public bucket: anyone; else the owners of its folder). public_only: the /public/ routes, which serve public buckets only. PT404 bucket_not_found or object_not_found (also when it may not be read).';

comment on function api.storage_object_move(text,text,text,text) is 'POST /storage/v1/object/move: renames an object the caller may write to a path (in the same or another bucket) they may write; its bytes, id and the images pointing at it stay. PT403 storage_access_denied, PT404 object_not_found, PT409 object_exists, and the destination bucket''s limits.';

comment on function api.storage_object_signed(text,text,text) is 'GET /storage/v1/object/sign/... and /render/image/sign/...?token=: the object a signed URL names, with the transformation it was signed with. PT400 invalid_signature or signature_expired; PT404 object_not_found.';

comment on function api.storage_objects_list(text,text,integer,integer,text,text,text) is 'POST /storage/v1/object/list/{bucket}: the folders and objects directly under prefix (a folder) whose names start with search (case-insensitive), folders first, then by sort_column; only in folders the caller owns (row-level security). PT404 bucket_not_found.';

comment on function api.storage_objects_remove(text,text[]) is 'DELETE /storage/v1/object/{bucket}: deletes the named objects the caller may delete (row-level security) and returns them; their bytes are collected later. PT404 bucket_not_found.';

comment on function api.storage_resumable_upload(uuid) is 'HEAD, PATCH and DELETE /storage/v1/upload/resumable/{id}: the caller''s resumable upload under way, with where its bytes go and its bucket''s limits. PT404 upload_not_found (another user''s, finished or expired).';

comment on function api.storage_sign(text,text[],integer,jsonb) is 'POST /storage/v1/object/sign/{bucket}[/{path}]: a signed download URL (valid expires_in seconds) for each path the caller may read, with the transformation to apply, if any; an `error` for the others. PT400 for an expiry outside 1 s to a year; PT404 bucket_not_found.';

comment on function api.storage_sign_upload(text,text,boolean) is 'POST /storage/v1/object/upload/sign/{bucket}/{path}: a signed upload URL (valid 2 hours) for a path the caller may write; the upload through it runs as the caller. PT400 invalid_key, PT403 storage_access_denied, PT404 bucket_not_found.';

comment on function api.storage_upload_begin(text,text,boolean,bigint,text) is 'POST and PUT /storage/v1/object/{bucket}/{path}, and TUS uploads: checks that the caller may write the path (before a byte is read) and registers the upload; the object appears when private.storage_upload_finish records its bytes. PT404 bucket_not_found, PT400 invalid_key, PT403 storage_access_denied, PT409 object_exists (without upsert), PT413 object_too_large or quota_exceeded, PT429 too_many_uploads.';

comment on function api.storage_upload_begin_signed(text,text,text,bigint) is 'PUT /storage/v1/object/upload/sign/{bucket}/{path}?token=: an upload through a signed upload URL, as the user who signed it (their right to write the path, quota and rate are checked again). PT400 invalid_signature or signature_expired, and the refusals of api.storage_upload_begin.';

comment on function app.storage_public_url(uuid) is 'The absolute public URL of an object of a public bucket (null otherwise): avatar_url, image_url.';

comment on function private.storage_base64url(bytea) is 'base64url without padding (JWT).';

comment on function private.storage_base64url_decode(text) is 'Decodes base64url (PT400 invalid_signature for anything else).';

comment on function private.storage_bucket(text) is 'The bucket, or PT404 bucket_not_found.';

comment on function private.storage_bucket_json(app.storage_buckets) is 'A bucket as Supabase Storage describes it.';

comment on function private.storage_check_name(text) is 'PT400 invalid_key unless the path is 3 to 1,024 characters of letters, digits and _/!.*''() &$@=;:+,?- with no empty, . or .. segment (app.storage_objects_name_check says the same).';

comment on function private.storage_folder_id(text) is 'The id an object''s first folder names (a uuid in canonical lower case, followed by more of the path), or null.';

comment on function private.storage_folder_owned(text,text,uuid) is 'THE storage rule: whether the user owns the object''s first folder in the bucket: user buckets, the folder named by their id; community buckets, a community they manage; event buckets, an event of a community they manage. Owners write (and, in private buckets, read); it is the row-level security of app.storage_objects.';

comment on function private.storage_garbage_done(text[],jsonb) is 'Forgets the keys whose bytes were deleted; records the error of those that failed (failures: key → message), which are tried again later.';

comment on function private.storage_garbage_take(integer) is 'A batch of byte-store keys to delete (the storage_collect job), each put off with back-off in case the job dies; private.storage_garbage_done forgets them once deleted.';

comment on function private.storage_image_object(text,text,uuid) is 'The id of the object at name in the bucket, if it is in a folder the user owns (an avatar, a community''s or an event''s image); PT422 invalid_image_path otherwise; null for null.';

comment on function private.storage_object_json(app.storage_objects) is 'An object as Supabase Storage answers it (remove, upload, copy).';

comment on function private.storage_object_metadata(app.storage_objects) is 'An object''s metadata as Supabase Storage lists it (eTag, size, mimetype, cacheControl, lastModified, contentLength, httpStatusCode).';

comment on function private.storage_object_name(uuid) is 'An object''s path in its bucket (image_path of an event whose image is stored here).';

comment on function private.storage_purge(text,uuid,integer) is 'Deletes up to max_rows objects of the folder of a user, community or event (folder_owner user, community or event) in every bucket of that kind; their bytes go to app.storage_garbage. Returns how many (the storage_purge job repeats it until none is left).';

comment on function private.storage_purge_enqueue(text,uuid) is 'Queues the storage_purge job that deletes every object of the folder of a user, community or event (and then their bytes), in the current transaction. Deleting an account, a community or an event calls it (their triggers _900_storage_purge); account deletion that keeps the users row calls it itself: private.storage_purge_enqueue(''user'', user_id).';

comment on function private.storage_quota_bytes(uuid) is 'The bytes of objects the user may own: their override in app.storage_usage, else their plan''s storage_quota_bytes.';

comment on function private.storage_render_url(uuid,integer,integer,text) is 'The absolute URL of a transformation of an image of a public bucket (the og:image of the event page: 1200×630, cover).';

comment on function private.storage_token(jsonb,integer) is 'A signed URL''s token: an HS256 JWT of the claims (scope, url, sub, ...) with iat and exp, signed with private.storage_signing_keys.';

comment on function private.storage_token_claims(text,text,text) is 'The claims of a signed URL''s token for that scope (download, upload) and url (bucket/path): PT400 invalid_signature when it was not made here for them, signature_expired past exp or once its signer''s credentials ended (or the account is gone).';

comment on function private.storage_type_allowed(app.storage_buckets,text) is 'Whether the bucket takes the type (allowed_mime_types: null for any, exact types or type/* patterns).';

comment on function private.storage_upload_abort(uuid,text) is 'An upload that will not finish (refused, cut off): forgets it, and its key goes to app.storage_garbage unless an object uses it.';

comment on function private.storage_upload_finish(uuid,bigint,text,text,text,jsonb,integer,integer) is 'Makes an upload''s object visible, once its bytes are durable (the gateway calls it, as its own role, with what it measured): the row is inserted (or, with upsert, replaced: the old bytes go to app.storage_garbage) in this one transaction. PT404 upload_not_found (expired), PT403 storage_access_denied (the right ended), PT409 object_exists (another upload won), and the bucket''s and the quota''s refusals (triggers).';

comment on function private.storage_upload_start(uuid,text,text,boolean,bigint,text) is 'Begins an upload for owner_id (the caller, or the signer of a signed upload URL): the bucket, the path, the owner''s right to write it, an existing object (without upsert), the declared size against the bucket''s limit and the quota, and the upload rate, before a byte is read; registers it under a fresh byte-store key (expiring after 1 hour, 24 for resumable uploads).';

comment on function private.storage_uploads_expire(integer) is 'Uploads past their expiry (cut off, or their gateway killed): forgotten, their keys to app.storage_garbage. Returns how many (the storage_collect job).';

comment on function private.storage_url_path(text) is 'An object path as it goes into a URL (paths hold no other character a URL path cannot carry).';

comment on function private.tg_storage_objects__bucket_rules() is 'Trigger: an object fits its bucket (size limit, types; an image bucket holds only images the gateway processed), however it got there (upload, copy, move).';

comment on function private.tg_storage_objects__garbage() is 'Trigger: the bytes of a deleted or replaced version go to app.storage_garbage (collected after a grace period for downloads under way).';

comment on function private.tg_storage_objects__usage() is 'Trigger: keeps app.storage_usage (bytes and objects per owner) and refuses what takes an owner past their quota (PT413 quota_exceeded), counted under the row lock of their usage row, so concurrent uploads cannot pass it together.';

--! split: 919-admin.sql
-- Made by `npm run db -- areas --diff` from sql/areas/admin.sql: the statements that make
-- the migrated database what that file states. Each run writes it again:
-- edit the area file, not this one. Table changes go in a file of this
-- folder numbered below 900.

-- Bodies are checked once every function exists (the check validated them all).
set local check_function_bodies = off;

CREATE OR REPLACE FUNCTION admin.storage_bucket_create(id text, public boolean, folder_owner text, file_size_limit bigint, allowed_mime_types text[] DEFAULT NULL::text[], images boolean DEFAULT false, download_as_attachment boolean DEFAULT false)
 RETURNS void
 LANGUAGE plpgsql
 SET search_path TO 'pg_catalog'
AS $function$
begin
  if storage_bucket_create.images and not storage_bucket_create.allowed_mime_types <@ array['image/*', 'image/jpeg', 'image/png', 'image/webp', 'image/avif', 'image/gif'] then
    raise exception 'an image bucket takes image/* or image/jpeg, png, webp, avif, gif only' using errcode = '22023';
  end if;
  insert into app.storage_buckets as b (id, public, folder_owner, file_size_limit, allowed_mime_types, images, download_as_attachment)
    values (storage_bucket_create.id, storage_bucket_create.public, storage_bucket_create.folder_owner, storage_bucket_create.file_size_limit,
            case when storage_bucket_create.images then coalesce(storage_bucket_create.allowed_mime_types, array['image/*'])
                 else storage_bucket_create.allowed_mime_types end,
            storage_bucket_create.images, storage_bucket_create.download_as_attachment)
    on conflict on constraint storage_buckets_pkey do update
      set public = excluded.public, folder_owner = excluded.folder_owner, file_size_limit = excluded.file_size_limit,
          allowed_mime_types = excluded.allowed_mime_types, images = excluded.images, download_as_attachment = excluded.download_as_attachment;
end;
$function$;

CREATE OR REPLACE FUNCTION admin.storage_set_limits(email text, quota_bytes bigint, uploads_per_minute integer)
 RETURNS void
 LANGUAGE plpgsql
 SET search_path TO 'pg_catalog'
AS $function$
declare
  target uuid;
begin
  select u.id into target from identity.users u where u.email = lower(btrim(storage_set_limits.email));
  if target is null then
    raise exception 'no user with email %', email using errcode = 'P0002';
  end if;
  insert into app.storage_usage as s (user_id, quota_bytes, uploads_per_minute)
    values (target, storage_set_limits.quota_bytes, storage_set_limits.uploads_per_minute)
    on conflict (user_id) do update set quota_bytes = excluded.quota_bytes, uploads_per_minute = excluded.uploads_per_minute;
end;
$function$;

CREATE OR REPLACE FUNCTION admin.storage_usage(max_rows integer DEFAULT 50)
 RETURNS TABLE(email text, bytes bigint, objects integer, quota_bytes bigint, uploads_per_minute integer)
 LANGUAGE sql
 STABLE
 SET search_path TO 'pg_catalog'
AS $function$
    select u.email, s.bytes, s.objects, private.storage_quota_bytes(s.user_id),
           coalesce(s.uploads_per_minute, (select pl.storage_uploads_per_minute from app.profiles p
                                             join app.subscription_plans pl on pl.id = p.subscription_type where p.id = s.user_id))
      from app.storage_usage s
      join identity.users u on u.id = s.user_id
     order by s.bytes desc, u.email
     limit greatest(coalesce(max_rows, 50), 0)
  $function$;

set local check_function_bodies to default;

comment on function admin.storage_bucket_create(text,boolean,text,bigint,text[],boolean,boolean) is 'Creates (or changes) a storage bucket: public or private, whose folders (user, community or event), the size limit in bytes, the types it takes (null: any; image/* patterns), whether it holds images (sniffed, metadata stripped, transformations) and whether downloads are attachments.';

comment on function admin.storage_set_limits(text,bigint,integer) is 'Sets a user''s own storage quota (bytes) and uploads per minute; null for either: their plan''s.';

comment on function admin.storage_usage(integer) is 'The users storing the most bytes: bytes, objects, their quota and uploads per minute.';

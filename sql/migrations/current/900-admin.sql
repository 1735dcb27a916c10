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

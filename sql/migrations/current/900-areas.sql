-- Made by `npm run db -- areas --diff` from sql/areas: the statements that make the
-- migrated database what the area files state, planned by pg-delta. Each run
-- writes it again: edit the area files, not this one. Data changes go in a
-- file of this folder numbered below 900 (docs/dba.md, "Changing a rule").

set local check_function_bodies = off;

ALTER TABLE "app"."storage_uploads" ALTER COLUMN "owner_id" DROP NOT NULL;

CREATE OR REPLACE FUNCTION api.storage_bucket_create(bucket_id text, public boolean, file_size_limit bigint, allowed_mime_types text[])
 RETURNS jsonb
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog'
AS $function$
begin
  perform private.storage_operator_only();
  if storage_bucket_create.bucket_id is null or storage_bucket_create.bucket_id !~ '^[a-z0-9][a-z0-9_-]{0,62}$' then
    raise exception 'Bucket name invalid' using errcode = 'PT400', hint = 'invalid_bucket_name';
  end if;
  perform private.storage_bucket_limits_check(storage_bucket_create.file_size_limit, storage_bucket_create.allowed_mime_types, false);
  insert into app.storage_buckets (id, public, folder_owner, file_size_limit, allowed_mime_types)
    values (storage_bucket_create.bucket_id, coalesce(storage_bucket_create.public, false), 'user',
            coalesce(storage_bucket_create.file_size_limit, private.storage_default_size_limit()), storage_bucket_create.allowed_mime_types)
    on conflict on constraint storage_buckets_pkey do nothing;
  if not found then
    raise exception 'The resource already exists' using errcode = 'PT409', hint = 'bucket_exists';
  end if;
  return pg_catalog.jsonb_build_object('name', storage_bucket_create.bucket_id);
end;
$function$;

CREATE OR REPLACE FUNCTION api.storage_bucket_delete(bucket_id text)
 RETURNS jsonb
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog'
AS $function$
begin
  perform private.storage_operator_only();
  perform private.storage_bucket(storage_bucket_delete.bucket_id);
  if storage_bucket_delete.bucket_id = any (private.storage_builtin_buckets()) then
    raise exception 'The bucket % is built in and cannot be deleted', storage_bucket_delete.bucket_id
      using errcode = 'PT409', hint = 'bucket_builtin';
  end if;
  if exists (select from app.storage_objects o where o.bucket_id = storage_bucket_delete.bucket_id)
     or exists (select from app.storage_uploads u where u.bucket_id = storage_bucket_delete.bucket_id and u.expires_at > now()) then
    raise exception 'The bucket you tried to delete is not empty' using errcode = 'PT409', hint = 'bucket_not_empty';
  end if;
  delete from app.storage_uploads u where u.bucket_id = storage_bucket_delete.bucket_id;
  delete from app.storage_buckets b where b.id = storage_bucket_delete.bucket_id;
  return pg_catalog.jsonb_build_object('message', 'Successfully deleted');
end;
$function$;

CREATE OR REPLACE FUNCTION api.storage_bucket_empty(bucket_id text)
 RETURNS jsonb
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog'
AS $function$
begin
  perform private.storage_operator_only();
  perform private.storage_bucket(storage_bucket_empty.bucket_id);
  -- Their bytes go to app.storage_garbage (the trigger), collected later.
  delete from app.storage_objects o where o.bucket_id = storage_bucket_empty.bucket_id;
  return pg_catalog.jsonb_build_object('message', 'Successfully emptied');
end;
$function$;

CREATE OR REPLACE FUNCTION api.storage_bucket_update(bucket_id text, changes jsonb)
 RETURNS jsonb
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog'
AS $function$
declare
  b app.storage_buckets;
  size_limit bigint;
  types text[];
begin
  perform private.storage_operator_only();
  select * into b from app.storage_buckets s where s.id = storage_bucket_update.bucket_id for update;
  if b.id is null then
    raise exception 'Bucket not found' using errcode = 'PT404', hint = 'bucket_not_found';
  end if;
  -- A field left out stays; null clears a limit.
  size_limit := case when storage_bucket_update.changes ? 'file_size_limit'
                     then coalesce((storage_bucket_update.changes->>'file_size_limit')::bigint, private.storage_default_size_limit())
                     else b.file_size_limit end;
  types := case when storage_bucket_update.changes ? 'allowed_mime_types'
                then (select pg_catalog.array_agg(t) from pg_catalog.jsonb_array_elements_text(
                        case pg_catalog.jsonb_typeof(storage_bucket_update.changes->'allowed_mime_types') when 'array'
                             then storage_bucket_update.changes->'allowed_mime_types' else '[]'::jsonb end) t)
                else b.allowed_mime_types end;
  perform private.storage_bucket_limits_check(size_limit, types, b.images);
  update app.storage_buckets s
     set public = coalesce((storage_bucket_update.changes->>'public')::boolean, s.public),
         file_size_limit = size_limit,
         allowed_mime_types = case when b.images then coalesce(types, array['image/*']) else types end
   where s.id = b.id;
  return pg_catalog.jsonb_build_object('message', 'Successfully updated');
end;
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
  if caller is null and not private.storage_operator() then
    raise exception 'not signed in' using errcode = 'PT401', hint = 'unauthorized';
  end if;
  select * into src from api.storage_object_get(storage_object_copy_begin.bucket_id, storage_object_copy_begin.source);
  if not private.storage_type_allowed(target, src.content_type) or (target.images and src.width is null) then
    raise exception 'mime type % is not supported', src.content_type using errcode = 'PT415', hint = 'invalid_mime_type';
  end if;
  select * into started from private.storage_upload_start(caller, target.id, storage_object_copy_begin.destination,
    coalesce(storage_object_copy_begin.upsert, false), src.size, 'copy');
  return query select started.upload_id, started.storage_key, src.storage_key, src.size, src.content_type, src.cache_control, src.etag,
                      src.width, src.height, src.user_metadata;
end;
$function$;

CREATE OR REPLACE FUNCTION api.storage_objects_list_v2(bucket_id text, prefix text, max_rows integer, cursor text, with_delimiter boolean, sort_column text, sort_order text)
 RETURNS jsonb
 LANGUAGE plpgsql
 STABLE
 SET search_path TO 'pg_catalog'
AS $function$
declare
  start text := coalesce(storage_objects_list_v2.prefix, '');
  descending boolean := lower(coalesce(storage_objects_list_v2.sort_order, 'asc')) = 'desc';
  sort text := coalesce(storage_objects_list_v2.sort_column, 'name');
  page_size integer := least(greatest(coalesce(storage_objects_list_v2.max_rows, 1000), 1), 1000);
  after jsonb;
  rows jsonb;
  more boolean;
  last_entry jsonb;
begin
  perform private.storage_bucket(storage_objects_list_v2.bucket_id);
  if sort not in ('name', 'created_at', 'updated_at') then
    raise exception 'sortBy.column must be name, created_at or updated_at' using errcode = 'PT400', hint = 'bad_request';
  end if;
  if storage_objects_list_v2.cursor is not null and storage_objects_list_v2.cursor <> '' then
    begin
      after := pg_catalog.convert_from(private.storage_base64url_decode(storage_objects_list_v2.cursor), 'UTF8')::jsonb;
    exception when others then
      after := null;
    end;
    if pg_catalog.jsonb_typeof(after) is distinct from 'object' or after->>'c' is distinct from sort
       or (after->>'d')::boolean is distinct from descending or pg_catalog.jsonb_typeof(after->'k') is distinct from 'array' then
      raise exception 'Invalid cursor' using errcode = 'PT400', hint = 'bad_request';
    end if;
  end if;
  -- Row-level security: only objects of folders the caller owns (the operator: all).
  with under as (
    select o as obj, o.name::text collate "C" as name,
           case when coalesce(storage_objects_list_v2.with_delimiter, false)
                     and pg_catalog.strpos(pg_catalog.substr(o.name, length(start) + 1), '/') > 0
                then left(o.name, length(start) + pg_catalog.strpos(pg_catalog.substr(o.name, length(start) + 1), '/')) end collate "C" as folder
      from app.storage_objects o
     where o.bucket_id = storage_objects_list_v2.bucket_id
       and pg_catalog.starts_with(o.name, start)
  ), entries as (
    select distinct u.folder as name, null::app.storage_objects as obj from under u where u.folder is not null
    union all
    select u.name, u.obj from under u where u.folder is null
  ), keyed as (
    -- The order: (rank, value, name). By name, folders and objects together; by a date, folders first.
    select e.name, e.obj,
           case when sort = 'name' or e.obj is null then 0 else 1 end as rank,
           (case when sort = 'name' or e.obj is null then e.name
                 when sort = 'created_at' then app.iso((e.obj).created_at)
                 else app.iso((e.obj).updated_at) end) collate "C" as value
      from entries e
  ), numbered as (
    select k.*,
           row_number() over (order by case when not descending then k.rank end asc, case when not descending then k.value end asc,
                                       case when not descending then k.name end asc, case when descending then k.rank end desc,
                                       case when descending then k.value end desc, case when descending then k.name end desc) as n
      from keyed k
     where after is null
        or (not descending and (k.rank, k.value, k.name) > ((after->'k'->>0)::integer, (after->'k'->>1) collate "C", (after->'k'->>2) collate "C"))
        or (descending and (k.rank, k.value, k.name) < ((after->'k'->>0)::integer, (after->'k'->>1) collate "C", (after->'k'->>2) collate "C"))
  )
  select coalesce(pg_catalog.jsonb_agg(pg_catalog.jsonb_build_object(
           'entry', case when x.obj is null then
                      pg_catalog.jsonb_build_object('key', pg_catalog.split_part(pg_catalog.rtrim(x.name, '/'), '/', -1), 'name', x.name)
                    else
                      pg_catalog.jsonb_build_object('name', x.name, 'id', (x.obj).id, 'updated_at', app.iso((x.obj).updated_at),
                        'created_at', app.iso((x.obj).created_at), 'last_accessed_at', app.iso((x.obj).updated_at),
                        'metadata', private.storage_object_metadata(x.obj))
                    end,
           'folder', x.obj is null,
           'key', pg_catalog.jsonb_build_array(x.rank, x.value, x.name)) order by x.n), '[]'::jsonb)
    into rows
    from numbered x
   where x.n <= page_size + 1;
  more := pg_catalog.jsonb_array_length(rows) > page_size;
  if more then
    last_entry := rows->(page_size - 1);
    rows := rows - page_size;
  end if;
  -- nextCursor and nextCursorKey only when there is a next page.
  return pg_catalog.jsonb_strip_nulls(pg_catalog.jsonb_build_object(
    'hasNext', more,
    'nextCursor', case when more then private.storage_base64url(pg_catalog.convert_to(
      pg_catalog.jsonb_build_object('c', sort, 'd', descending, 'k', last_entry->'key')::text, 'UTF8')) end,
    'nextCursorKey', case when more then last_entry->'key'->>2 end,
    'folders', coalesce((select pg_catalog.jsonb_agg(r->'entry') from pg_catalog.jsonb_array_elements(rows) r where (r->>'folder')::boolean), '[]'::jsonb),
    'objects', coalesce((select pg_catalog.jsonb_agg(r->'entry') from pg_catalog.jsonb_array_elements(rows) r where not (r->>'folder')::boolean), '[]'::jsonb)));
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
       and (u.owner_id = auth.uid() or (u.owner_id is null and private.storage_operator())) and u.expires_at > now();
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
        route || b.id || '/' || private.storage_url_path(object_name) || '?token=' || private.storage_token(pg_catalog.jsonb_strip_nulls(pg_catalog.jsonb_build_object(
          'scope', 'download', 'url', b.id || '/' || object_name, 'sub', caller, 'operator', case when caller is null then true end,
          'transform', storage_sign.transform)),
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
  token := private.storage_token(pg_catalog.jsonb_strip_nulls(pg_catalog.jsonb_build_object('scope', 'upload', 'url', b.id || '/' || storage_sign_upload.name,
    'sub', caller, 'operator', case when caller is null then true end, 'upsert', coalesce(storage_sign_upload.upsert, false))), 7200);
  return pg_catalog.jsonb_build_object('url', '/object/upload/sign/' || b.id || '/' || private.storage_url_path(storage_sign_upload.name) || '?token=' || token,
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
  if caller is null and not private.storage_operator() then
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
  token_digest bytea := identity.token_hash(storage_upload_begin_signed.token);
  started record;
begin
  -- Once: the token's digest is kept until it expires. A second upload waits
  -- for the first's transaction here, then finds it.
  insert into app.storage_signed_uploads (token_hash, expires_at)
    values (token_digest, pg_catalog.to_timestamp((claims->>'exp')::bigint))
    on conflict (token_hash) do nothing;
  if not found then
    raise exception 'The resource already exists' using errcode = 'PT409', hint = 'signed_url_used';
  end if;
  select * into started from private.storage_upload_start((claims->>'sub')::uuid, storage_upload_begin_signed.bucket_id,
    storage_upload_begin_signed.name, coalesce((claims->>'upsert')::boolean, false), storage_upload_begin_signed.declared_size, 'signed');
  update app.storage_uploads u set signed_token_hash = token_digest where u.id = started.upload_id;
  return query select started.upload_id, started.storage_key, started.file_size_limit, started.allowed_mime_types, started.images;
end;
$function$;

CREATE OR REPLACE FUNCTION private.storage_bucket_limits_check(file_size_limit bigint, allowed_mime_types text[], images boolean)
 RETURNS void
 LANGUAGE plpgsql
 IMMUTABLE
 SET search_path TO 'pg_catalog'
AS $function$
begin
  if storage_bucket_limits_check.file_size_limit is not null and storage_bucket_limits_check.file_size_limit not between 1 and 5368709120 then
    raise exception 'file_size_limit must be 1 byte to 5 GB' using errcode = 'PT400', hint = 'invalid_bucket_limits';
  end if;
  if storage_bucket_limits_check.allowed_mime_types is not null and (
       cardinality(storage_bucket_limits_check.allowed_mime_types) not between 1 and 50
       or exists (select from pg_catalog.unnest(storage_bucket_limits_check.allowed_mime_types) t
                   where t is null or t !~ '^[a-z0-9][a-z0-9!#$&^_.+-]{0,126}/([a-z0-9][a-z0-9!#$&^_.+-]{0,126}|\*)$')) then
    raise exception 'allowed_mime_types must be 1 to 50 types such as image/png or image/*' using errcode = 'PT400', hint = 'invalid_bucket_limits';
  end if;
  if storage_bucket_limits_check.images and storage_bucket_limits_check.allowed_mime_types is not null
     and not storage_bucket_limits_check.allowed_mime_types <@ array['image/*', 'image/jpeg', 'image/png', 'image/webp', 'image/avif', 'image/gif'] then
    raise exception 'an image bucket takes image/* or image/jpeg, png, webp, avif, gif only' using errcode = 'PT400', hint = 'invalid_bucket_limits';
  end if;
end;
$function$;

CREATE OR REPLACE FUNCTION private.storage_builtin_buckets()
 RETURNS text[]
 LANGUAGE sql
 IMMUTABLE
 SET search_path TO 'pg_catalog'
AS $function$
    select array['avatars', 'community-images', 'event-images', 'attachments']
  $function$;

CREATE OR REPLACE FUNCTION private.storage_default_size_limit()
 RETURNS bigint
 LANGUAGE sql
 IMMUTABLE
 SET search_path TO 'pg_catalog'
AS $function$
    select 52428800::bigint
  $function$;

CREATE OR REPLACE FUNCTION private.storage_folder_owned(bucket_id text, name text, user_id uuid)
 RETURNS boolean
 LANGUAGE sql
 STABLE SECURITY DEFINER
 SET search_path TO 'pg_catalog'
AS $function$
    select case when storage_folder_owned.user_id is null then private.storage_operator()
    else coalesce((
      select case b.folder_owner
               when 'user' then f.id = storage_folder_owned.user_id
               when 'community' then private.is_community_manager(f.id, storage_folder_owned.user_id)
               when 'event' then exists (select from app.events e
                                          where e.id = f.id and private.is_community_manager(e.community_id, storage_folder_owned.user_id))
             end
        from app.storage_buckets b, (select private.storage_folder_id(storage_folder_owned.name) as id) f
       where b.id = storage_folder_owned.bucket_id and f.id is not null), false)
    end
  $function$;

CREATE OR REPLACE FUNCTION private.storage_operator()
 RETURNS boolean
 LANGUAGE sql
 STABLE
 SET search_path TO 'pg_catalog'
AS $function$
    select coalesce(auth.jwt()->>'role', '') = 'service_role' and auth.uid() is null
  $function$;

CREATE OR REPLACE FUNCTION private.storage_operator_only()
 RETURNS void
 LANGUAGE plpgsql
 STABLE
 SET search_path TO 'pg_catalog'
AS $function$
begin
  if not private.storage_operator() then
    raise exception 'Access denied: only the service-role key manages buckets' using errcode = 'PT403', hint = 'storage_access_denied';
  end if;
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
  -- The signer's credentials ended after it was signed (private.storage_signed_urls_end: a password set or
  -- changed, a global sign-out), or the account is gone.
  -- The operator's (signed with the service-role key: no user) end only with exp.
  if claims->>'sub' is null and claims->'operator' = 'true'::jsonb then
    return claims;
  end if;
  select u.signed_urls_valid_after into valid_after from app.storage_usage u where u.user_id = (claims->>'sub')::uuid;
  if valid_after is not null and (claims->>'iat')::numeric <= extract(epoch from valid_after)
     or not exists (select from identity.users u where u.id = (claims->>'sub')::uuid) then
    raise exception 'The signed URL has expired' using errcode = 'PT400', hint = 'signature_expired';
  end if;
  return claims;
end;
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
  if u.owner_id is not null and not private.storage_folder_owned(u.bucket_id, u.name, u.owner_id) then
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
  reserved bigint;
  quota bigint;
  per_minute integer;
  open_uploads integer;
  oldest_open timestamptz;
  w app.storage_usage;
  started app.storage_uploads;
begin
  perform private.storage_check_name(storage_upload_start.name);
  if storage_upload_start.owner_id is not null
     and not private.storage_folder_owned(b.id, storage_upload_start.name, storage_upload_start.owner_id) then
    raise exception 'Access denied: you may not write %/%', b.id, storage_upload_start.name using errcode = 'PT403', hint = 'storage_access_denied';
  end if;
  select * into existing from app.storage_objects o where o.bucket_id = b.id and o.name = storage_upload_start.name;
  if existing.id is not null and not storage_upload_start.upsert then
    raise exception 'The resource already exists' using errcode = 'PT409', hint = 'object_exists';
  end if;
  if storage_upload_start.declared_size > b.file_size_limit then
    raise exception 'The object exceeded the maximum allowed size' using errcode = 'PT413', hint = 'object_too_large';
  end if;
  if storage_upload_start.owner_id is null then
    -- The operator's: no quota, rate or count of uploads under way.
    insert into app.storage_uploads as u (bucket_id, name, owner_id, upsert, kind, storage_key, declared_size, expires_at)
      values (b.id, storage_upload_start.name, null, storage_upload_start.upsert, storage_upload_start.kind,
              'objects/' || gen_random_uuid(), storage_upload_start.declared_size,
              now() + case storage_upload_start.kind when 'resumable' then interval '24 hours' else interval '1 hour' end)
      returning u.* into started;
    return query select started.id, started.storage_key, b.file_size_limit, b.allowed_mime_types, b.images;
    return;
  end if;
  -- The owner's usage row, locked: one owner's uploads begin one at a time,
  -- so what the others reserved is counted right. The upload is counted in
  -- the minute's window (a refused upload does not count: its transaction
  -- rolls back).
  insert into app.storage_usage as s (user_id, window_start, window_uploads)
    values (storage_upload_start.owner_id, now(), 1)
    on conflict (user_id) do update
      set window_start = case when s.window_start is null or s.window_start <= now() - interval '1 minute' then now() else s.window_start end,
          window_uploads = case when s.window_start is null or s.window_start <= now() - interval '1 minute' then 1 else s.window_uploads + 1 end
    returning s.* into w;
  -- The quota: what is stored, plus what the owner's uploads under way
  -- reserved (their declared sizes: a resumable upload's Upload-Length, a
  -- body's Content-Length), plus this one; an object this one replaces
  -- frees its bytes. The finish checks again with the real size.
  quota := private.storage_quota_bytes(storage_upload_start.owner_id);
  select coalesce(sum(u.declared_size), 0) into reserved
    from app.storage_uploads u where u.owner_id = storage_upload_start.owner_id and u.expires_at > now();
  if w.bytes + reserved + coalesce(storage_upload_start.declared_size, 0)
       - (case when existing.owner_id = storage_upload_start.owner_id then existing.size else 0 end) > quota
     or (storage_upload_start.declared_size is null and w.bytes + reserved >= quota) then
    raise exception 'Storage quota exceeded: % of % bytes used, % reserved by uploads under way', w.bytes, quota, reserved
      using errcode = 'PT413', hint = 'quota_exceeded';
  end if;
  -- Uploads per minute (a fixed window per user).
  per_minute := coalesce(w.uploads_per_minute,
    (select s.storage_uploads_per_minute from app.profiles p join app.subscription_plans s on s.id = p.subscription_type
      where p.id = storage_upload_start.owner_id),
    30);
  if w.window_uploads > per_minute then
    raise exception 'Too many uploads: at most % a minute', per_minute using errcode = 'PT429', hint = 'too_many_uploads',
      detail = json_build_object('retry_after', greatest(1, ceil(extract(epoch from w.window_start + interval '1 minute' - now())))::integer)::text;
  end if;
  -- Resumable uploads open at once (each holds staged bytes until it finishes, is cancelled or expires).
  if storage_upload_start.kind = 'resumable' then
    select count(*), min(u.expires_at) into open_uploads, oldest_open
      from app.storage_uploads u
     where u.owner_id = storage_upload_start.owner_id and u.kind = 'resumable' and u.expires_at > now();
    if open_uploads >= private.storage_open_uploads_max() then
      raise exception 'Too many resumable uploads under way: at most %; finish or cancel one', private.storage_open_uploads_max()
        using errcode = 'PT429', hint = 'too_many_open_uploads',
              detail = json_build_object('retry_after', greatest(1, ceil(extract(epoch from oldest_open - now())))::integer)::text;
    end if;
  end if;
  insert into app.storage_uploads as u (bucket_id, name, owner_id, upsert, kind, storage_key, declared_size, expires_at)
    values (b.id, storage_upload_start.name, storage_upload_start.owner_id, storage_upload_start.upsert, storage_upload_start.kind,
            'objects/' || gen_random_uuid(), storage_upload_start.declared_size,
            now() + case storage_upload_start.kind when 'resumable' then interval '24 hours' else interval '1 hour' end)
    returning u.* into started;
  return query select started.id, started.storage_key, b.file_size_limit, b.allowed_mime_types, b.images;
end;
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
    raise exception 'The object exceeded the maximum allowed size' using errcode = 'PT413', hint = 'object_too_large';
  end if;
  if not private.storage_type_allowed(b, new.content_type) or (b.images and new.width is null) then
    raise exception 'mime type % is not supported', new.content_type using errcode = 'PT415', hint = 'invalid_mime_type';
  end if;
  return new;
end;
$function$;

COMMENT ON FUNCTION "api"."storage_bucket_create"(text, boolean, bigint, text[]) IS 'POST /storage/v1/bucket (the operator only: the service-role key): a bucket, public or private, with a size limit in bytes (null: private.storage_default_size_limit()) and the types it takes (null: any). Its users write under their own id (`{user id}/...`, folder_owner user); an operator changes that in SQL (app.storage_buckets.folder_owner). PT403 storage_access_denied for anyone else, PT400 invalid_bucket_name or invalid_bucket_limits, PT409 bucket_exists.';

COMMENT ON FUNCTION "api"."storage_bucket_delete"(text) IS 'DELETE /storage/v1/bucket/{id} (the operator only): deletes an empty bucket (no object, no upload under way: empty it first). The four built-in buckets (private.storage_builtin_buckets) stay: PT409 bucket_builtin. PT403 storage_access_denied, PT404 bucket_not_found, PT409 bucket_not_empty.';

COMMENT ON FUNCTION "api"."storage_bucket_empty"(text) IS 'POST /storage/v1/bucket/{id}/empty (the operator only): deletes every object of the bucket in one transaction (their bytes are collected later). PT403 storage_access_denied, PT404 bucket_not_found.';

COMMENT ON FUNCTION "api"."storage_bucket_update"(text, jsonb) IS 'PUT /storage/v1/bucket/{id} (the operator only): changes what `changes` names of public, file_size_limit (bytes; null: the default) and allowed_mime_types (null: any; an image bucket keeps to image types). PT403 storage_access_denied, PT404 bucket_not_found, PT400 invalid_bucket_limits.';

COMMENT ON FUNCTION "api"."storage_objects_list_v2"(text, text, integer, text, boolean, text, text) IS 'POST /storage/v1/object/list-v2/{bucket} (supabase-js `listV2`): a page of at most max_rows (1 to 1,000) objects whose full names start with prefix, with with_delimiter the folders directly under it instead of what they hold; by name (folders among objects) or by created_at or updated_at (folders first), asc or desc; the next page after cursor (opaque, as nextCursor gave it). Only in folders the caller owns (row-level security). PT404 bucket_not_found, PT400 bad_request (a cursor not made here, or for another order).';

COMMENT ON FUNCTION "private"."storage_bucket_limits_check"(bigint, text[], boolean) IS 'PT400 invalid_bucket_limits unless a bucket''s limits are sound: 1 byte to 5 GB; 1 to 50 lower-case types or type/* patterns; an image bucket''s, image types only.';

COMMENT ON FUNCTION "private"."storage_builtin_buckets"() IS 'The buckets the migrations make, which the service uses (avatars, community and event images, attachments): they cannot be deleted.';

COMMENT ON FUNCTION "private"."storage_default_size_limit"() IS 'The size limit of a bucket made or changed without one: 50 MB (Supabase Storage''s default).';

COMMENT ON FUNCTION "private"."storage_folder_owned"(text, text, uuid) IS 'THE storage rule: whether the user owns the object''s first folder in the bucket: user buckets, the folder named by their id; community buckets, a community they manage; event buckets, an event of a community they manage. Owners write (and, in private buckets, read); it is the row-level security of app.storage_objects. No user (null): true for the operator only (private.storage_operator: the service-role key), who owns every folder.';

COMMENT ON FUNCTION "private"."storage_operator"() IS 'Whether the request is the operator''s: it runs with the claims the gateway gives the service-role key on /storage/v1 (role service_role, no user), as Postgres role service_role. The operator passes the storage rule (private.storage_folder_owned) and row-level security (the role bypasses it), never the checks of bucket, path, size and type.';

COMMENT ON FUNCTION "private"."storage_operator_only"() IS 'PT403 storage_access_denied unless the request is the operator''s (private.storage_operator): the bucket API.';

COMMENT ON FUNCTION "private"."storage_upload_start"(uuid, text, text, boolean, bigint, text) IS 'Begins an upload for owner_id (the caller, or the signer of a signed upload URL): the bucket, the path, the owner''s right to write it, an existing object (without upsert), the declared size against the bucket''s limit and against the quota together with what the owner''s uploads under way reserved (their declared sizes, held until they finish, are given up or expire), the upload rate, and at most private.storage_open_uploads_max() resumable uploads open, before a byte is read (owner_id null: the operator''s upload, which only the path, the bucket and the size limit hold); registers it under a fresh byte-store key (expiring after 1 hour, 24 for resumable uploads). PT413 quota_exceeded, PT429 too_many_uploads or too_many_open_uploads (detail: retry_after).';

COMMENT ON TABLE "app"."storage_uploads" IS 'Uploads under way: the key their bytes are written to before the object exists. One that expires (cut off, gateway killed) has its bytes collected. owner_id null: the operator''s (the service-role key), which no rule of folders, quota or rate holds.';

REVOKE ALL ON FUNCTION "api"."storage_bucket_create"(text, boolean, bigint, text[]) FROM PUBLIC;

GRANT EXECUTE ON FUNCTION "api"."storage_bucket_create"(text, boolean, bigint, text[]) TO "authenticated";

GRANT EXECUTE ON FUNCTION "api"."storage_bucket_create"(text, boolean, bigint, text[]) TO "service_role";

REVOKE ALL ON FUNCTION "api"."storage_bucket_delete"(text) FROM PUBLIC;

GRANT EXECUTE ON FUNCTION "api"."storage_bucket_delete"(text) TO "authenticated";

GRANT EXECUTE ON FUNCTION "api"."storage_bucket_delete"(text) TO "service_role";

REVOKE ALL ON FUNCTION "api"."storage_bucket_empty"(text) FROM PUBLIC;

GRANT EXECUTE ON FUNCTION "api"."storage_bucket_empty"(text) TO "authenticated";

GRANT EXECUTE ON FUNCTION "api"."storage_bucket_empty"(text) TO "service_role";

REVOKE ALL ON FUNCTION "api"."storage_bucket_get"(text) FROM "service_role";

GRANT EXECUTE ON FUNCTION "api"."storage_bucket_get"(text) TO "service_role";

REVOKE ALL ON FUNCTION "api"."storage_bucket_update"(text, jsonb) FROM PUBLIC;

GRANT EXECUTE ON FUNCTION "api"."storage_bucket_update"(text, jsonb) TO "authenticated";

GRANT EXECUTE ON FUNCTION "api"."storage_bucket_update"(text, jsonb) TO "service_role";

REVOKE ALL ON FUNCTION "api"."storage_buckets_list"() FROM "service_role";

GRANT EXECUTE ON FUNCTION "api"."storage_buckets_list"() TO "service_role";

REVOKE ALL ON FUNCTION "api"."storage_object_copy_begin"(text, text, text, text, boolean) FROM "service_role";

GRANT EXECUTE ON FUNCTION "api"."storage_object_copy_begin"(text, text, text, text, boolean) TO "service_role";

REVOKE ALL ON FUNCTION "api"."storage_object_get"(text, text, boolean) FROM "service_role";

GRANT EXECUTE ON FUNCTION "api"."storage_object_get"(text, text, boolean) TO "service_role";

REVOKE ALL ON FUNCTION "api"."storage_object_move"(text, text, text, text) FROM "service_role";

GRANT EXECUTE ON FUNCTION "api"."storage_object_move"(text, text, text, text) TO "service_role";

REVOKE ALL ON FUNCTION "api"."storage_object_signed"(text, text, text) FROM "service_role";

GRANT EXECUTE ON FUNCTION "api"."storage_object_signed"(text, text, text) TO "service_role";

REVOKE ALL ON FUNCTION "api"."storage_objects_list"(text, text, integer, integer, text, text, text) FROM "service_role";

GRANT EXECUTE ON FUNCTION "api"."storage_objects_list"(text, text, integer, integer, text, text, text) TO "service_role";

REVOKE ALL ON FUNCTION "api"."storage_objects_list_v2"(text, text, integer, text, boolean, text, text) FROM PUBLIC;

GRANT EXECUTE ON FUNCTION "api"."storage_objects_list_v2"(text, text, integer, text, boolean, text, text) TO "authenticated";

GRANT EXECUTE ON FUNCTION "api"."storage_objects_list_v2"(text, text, integer, text, boolean, text, text) TO "service_role";

REVOKE ALL ON FUNCTION "api"."storage_objects_remove"(text, text[]) FROM "service_role";

GRANT EXECUTE ON FUNCTION "api"."storage_objects_remove"(text, text[]) TO "service_role";

REVOKE ALL ON FUNCTION "api"."storage_resumable_upload"(uuid) FROM "service_role";

GRANT EXECUTE ON FUNCTION "api"."storage_resumable_upload"(uuid) TO "service_role";

REVOKE ALL ON FUNCTION "api"."storage_sign"(text, text[], integer, jsonb) FROM "service_role";

GRANT EXECUTE ON FUNCTION "api"."storage_sign"(text, text[], integer, jsonb) TO "service_role";

REVOKE ALL ON FUNCTION "api"."storage_sign_upload"(text, text, boolean) FROM "service_role";

GRANT EXECUTE ON FUNCTION "api"."storage_sign_upload"(text, text, boolean) TO "service_role";

REVOKE ALL ON FUNCTION "api"."storage_upload_begin"(text, text, boolean, bigint, text) FROM "service_role";

GRANT EXECUTE ON FUNCTION "api"."storage_upload_begin"(text, text, boolean, bigint, text) TO "service_role";

REVOKE ALL ON FUNCTION "api"."storage_upload_begin_signed"(text, text, text, bigint) FROM "service_role";

GRANT EXECUTE ON FUNCTION "api"."storage_upload_begin_signed"(text, text, text, bigint) TO "service_role";

REVOKE ALL ON FUNCTION "app"."iso"(timestamp with time zone) FROM "service_role";

GRANT EXECUTE ON FUNCTION "app"."iso"(timestamp with time zone) TO "service_role";

REVOKE ALL ON FUNCTION "private"."storage_base64url"(bytea) FROM "authenticated";

GRANT EXECUTE ON FUNCTION "private"."storage_base64url"(bytea) TO "authenticated";

REVOKE ALL ON FUNCTION "private"."storage_base64url"(bytea) FROM "service_role";

GRANT EXECUTE ON FUNCTION "private"."storage_base64url"(bytea) TO "service_role";

REVOKE ALL ON FUNCTION "private"."storage_base64url_decode"(text) FROM "authenticated";

GRANT EXECUTE ON FUNCTION "private"."storage_base64url_decode"(text) TO "authenticated";

REVOKE ALL ON FUNCTION "private"."storage_base64url_decode"(text) FROM "service_role";

GRANT EXECUTE ON FUNCTION "private"."storage_base64url_decode"(text) TO "service_role";

REVOKE ALL ON FUNCTION "private"."storage_bucket"(text) FROM "service_role";

GRANT EXECUTE ON FUNCTION "private"."storage_bucket"(text) TO "service_role";

REVOKE ALL ON FUNCTION "private"."storage_bucket_limits_check"(bigint, text[], boolean) FROM PUBLIC;

REVOKE ALL ON FUNCTION "private"."storage_builtin_buckets"() FROM PUBLIC;

REVOKE ALL ON FUNCTION "private"."storage_check_name"(text) FROM "service_role";

GRANT EXECUTE ON FUNCTION "private"."storage_check_name"(text) TO "service_role";

REVOKE ALL ON FUNCTION "private"."storage_default_size_limit"() FROM PUBLIC;

REVOKE ALL ON FUNCTION "private"."storage_folder_owned"(text, text, uuid) FROM "service_role";

GRANT EXECUTE ON FUNCTION "private"."storage_folder_owned"(text, text, uuid) TO "service_role";

REVOKE ALL ON FUNCTION "private"."storage_object_json"(app.storage_objects) FROM "service_role";

GRANT EXECUTE ON FUNCTION "private"."storage_object_json"(app.storage_objects) TO "service_role";

REVOKE ALL ON FUNCTION "private"."storage_object_metadata"(app.storage_objects) FROM "service_role";

GRANT EXECUTE ON FUNCTION "private"."storage_object_metadata"(app.storage_objects) TO "service_role";

REVOKE ALL ON FUNCTION "private"."storage_operator"() FROM PUBLIC;

GRANT EXECUTE ON FUNCTION "private"."storage_operator"() TO "authenticated";

GRANT EXECUTE ON FUNCTION "private"."storage_operator"() TO "service_role";

REVOKE ALL ON FUNCTION "private"."storage_operator_only"() FROM PUBLIC;

REVOKE ALL ON SCHEMA "private" FROM "service_role";

GRANT USAGE ON SCHEMA "private" TO "service_role";

REVOKE ALL ("bucket_id") ON TABLE "app"."storage_objects" FROM "service_role";

GRANT UPDATE ("bucket_id") ON TABLE "app"."storage_objects" TO "service_role";

REVOKE ALL ("name") ON TABLE "app"."storage_objects" FROM "service_role";

GRANT UPDATE ("name") ON TABLE "app"."storage_objects" TO "service_role";

REVOKE ALL ON TABLE "app"."storage_objects" FROM "service_role";

GRANT UPDATE (bucket_id), UPDATE (name) ON TABLE app.storage_objects TO service_role;

GRANT DELETE, SELECT ON TABLE "app"."storage_objects" TO "service_role";

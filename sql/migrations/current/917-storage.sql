-- Made by `npm run db -- areas --diff` from sql/areas/storage.sql: the statements that make
-- the migrated database what that file states. Each run writes it again:
-- edit the area file, not this one. Table changes go in a file of this
-- folder numbered below 900.

-- Bodies are checked once every function exists (the check validated them all).
set local check_function_bodies = off;

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
  return pg_catalog.jsonb_build_object('url', '/object/upload/sign/' || b.id || '/' || private.storage_url_path(storage_sign_upload.name) || '?token=' || token,
                                       'token', token);
end;
$function$;

set local check_function_bodies to default;

comment on function api.storage_sign(text,text[],integer,jsonb) is 'POST /storage/v1/object/sign/{bucket}[/{path}]: a signed download URL (valid expires_in seconds; the path percent-encoded where a URL needs it) for each path the caller may read, with the transformation to apply, if any; an `error` for the others. PT400 for an expiry outside 1 s to a year; PT404 bucket_not_found.';

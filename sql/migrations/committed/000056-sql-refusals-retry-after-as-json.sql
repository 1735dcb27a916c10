--! Previous: sha1:61a93f22a16f77acdb8b3aae0448a13a2aadb7cd
--! Hash: sha1:c0ee48f609d0561bc156d6786e6552cf8c58c38e
--! Message: sql-refusals-retry-after-as-json

--! split: 915-idempotency.sql
-- Made by `npm run db -- areas --diff` from sql/areas/idempotency.sql: the statements that make
-- the migrated database what that file states. Each run writes it again:
-- edit the area file, not this one. Table changes go in a file of this
-- folder numbered below 900.

-- Bodies are checked once every function exists (the check validated them all).
set local check_function_bodies = off;

CREATE OR REPLACE FUNCTION api.idempotency_claim(key text, request_hash text)
 RETURNS jsonb
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog'
AS $function$
declare
  me uuid := auth.uid();
  caller_credential bytea := private.idempotency_credential();
  key_digest bytea;
  request_digest bytea;
  existing app.idempotency_keys;
begin
  if me is null then
    raise exception 'sign in first' using errcode = 'PT401', hint = 'unauthorized';
  end if;
  if key is null or key !~ '^[ -~]{1,255}$' then
    raise exception 'Idempotency-Key must be 1 to 255 printable ASCII characters' using errcode = 'PT400', hint = 'bad_request';
  end if;
  if request_hash is null or request_hash !~ '^[0-9a-f]{64}$' then
    raise exception 'request_hash must be a SHA-256 in hex' using errcode = 'PT400', hint = 'bad_request';
  end if;
  key_digest := extensions.digest(key, 'sha256');
  request_digest := decode(request_hash, 'hex');
  -- Held until this transaction ends; another request of the credential with
  -- the key, on any replica, is answered 409 at once instead of waiting.
  if not pg_try_advisory_xact_lock(hashtextextended(
           'idempotency ' || me::text || ' ' || encode(caller_credential, 'hex') || ' ' || encode(key_digest, 'hex'), 0)) then
    raise exception 'a request with this Idempotency-Key is still being processed'
      using errcode = 'PT409', hint = 'idempotency_key_in_progress', detail = '{"retry_after": 1}';
  end if;
  -- A new statement, a new snapshot: whoever held the lock before has committed or rolled back.
  -- The credential's own record, or one made before credentials were recorded (empty).
  select k.* into existing from app.idempotency_keys k
   where k.user_id = me and k.credential in (caller_credential, '\x'::bytea) and k.key_hash = key_digest
   order by k.credential desc
   limit 1;
  if existing.user_id is not null then
    if existing.created_at > now() - private.idempotency_key_lifetime() then
      if existing.credential = '\x'::bytea then
        raise exception 'this Idempotency-Key was used before keys were held per credential: use a new key'
          using errcode = 'PT422', hint = 'idempotency_key_reused';
      end if;
      if existing.request_hash <> request_digest then
        raise exception 'this Idempotency-Key was used for another request (method, path or body)'
          using errcode = 'PT422', hint = 'idempotency_key_reused';
      end if;
      return jsonb_build_object(
        'status', existing.status,
        'answer', convert_from(extensions.decrypt_iv(substring(existing.answer from 17),
                                                     private.idempotency_answer_key(me, caller_credential, key),
                                                     substring(existing.answer for 16), 'aes-cbc/pad:pkcs'), 'UTF8')::jsonb);
    end if;
    delete from app.idempotency_keys k
     where k.user_id = me and k.credential = existing.credential and k.key_hash = key_digest;
  end if;
  insert into app.idempotency_keys (user_id, credential, key_hash, request_hash)
    values (me, caller_credential, key_digest, request_digest);
  return null;
end;
$function$;

set local check_function_bodies to default;

--! split: 917-storage.sql
-- Made by `npm run db -- areas --diff` from sql/areas/storage.sql: the statements that make
-- the migrated database what that file states. Each run writes it again:
-- edit the area file, not this one. Table changes go in a file of this
-- folder numbered below 900.

-- Bodies are checked once every function exists (the check validated them all).
set local check_function_bodies = off;

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
      detail = json_build_object('retry_after', greatest(1, ceil(extract(epoch from w.window_start + interval '1 minute' - now())))::integer)::text;
  end if;
  insert into app.storage_uploads as u (bucket_id, name, owner_id, upsert, kind, storage_key, declared_size, expires_at)
    values (b.id, storage_upload_start.name, storage_upload_start.owner_id, storage_upload_start.upsert, storage_upload_start.kind,
            'objects/' || gen_random_uuid(), storage_upload_start.declared_size,
            now() + case storage_upload_start.kind when 'resumable' then interval '24 hours' else interval '1 hour' end)
    returning u.* into started;
  return query select started.id, started.storage_key, b.file_size_limit, b.allowed_mime_types, b.images;
end;
$function$;

set local check_function_bodies to default;

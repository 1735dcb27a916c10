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
    raise exception 'The signed upload URL was used already' using errcode = 'PT409', hint = 'signed_url_used';
  end if;
  select * into started from private.storage_upload_start((claims->>'sub')::uuid, storage_upload_begin_signed.bucket_id,
    storage_upload_begin_signed.name, coalesce((claims->>'upsert')::boolean, false), storage_upload_begin_signed.declared_size, 'signed');
  update app.storage_uploads u set signed_token_hash = token_digest where u.id = started.upload_id;
  return query select started.upload_id, started.storage_key, started.file_size_limit, started.allowed_mime_types, started.images;
end;
$function$;

CREATE OR REPLACE FUNCTION private.storage_backup_lock_id()
 RETURNS bigint
 LANGUAGE sql
 IMMUTABLE
 SET search_path TO 'pg_catalog'
AS $function$
    select 4871232390914563012::bigint
  $function$;

CREATE OR REPLACE FUNCTION private.storage_garbage_done(storage_keys text[], failures jsonb DEFAULT NULL::jsonb)
 RETURNS void
 LANGUAGE sql
 SET search_path TO 'pg_catalog'
AS $function$
    delete from app.storage_garbage g
     where g.storage_key = any (storage_garbage_done.storage_keys)
       and not (coalesce(storage_garbage_done.failures, '{}'::jsonb) ? g.storage_key);
    -- A version's transformations went with its bytes.
    delete from app.storage_renders r
     where r.storage_key = any (storage_garbage_done.storage_keys)
       and not (coalesce(storage_garbage_done.failures, '{}'::jsonb) ? r.storage_key);
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
      -- Nothing while a backup copies the stored files (private.storage_backup_lock_id).
      select g.storage_key from app.storage_garbage g
       where (select pg_try_advisory_xact_lock_shared(private.storage_backup_lock_id()))
         and g.collect_after <= now()
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

CREATE OR REPLACE FUNCTION private.storage_open_uploads_max()
 RETURNS integer
 LANGUAGE sql
 IMMUTABLE
 SET search_path TO 'pg_catalog'
AS $function$
    select 10
  $function$;

CREATE OR REPLACE FUNCTION private.storage_render_begin(storage_key text, variant text, client_ip text, misses_per_minute integer, variants_per_object integer)
 RETURNS text[]
 LANGUAGE plpgsql
 SET search_path TO 'pg_catalog'
AS $function$
declare
  counted app.storage_render_misses;
  evicted text[];
begin
  -- Transformations made per client address, in fixed one-minute windows (a
  -- refused one is not counted: its transaction rolls back).
  if storage_render_begin.client_ip is not null then
    insert into app.storage_render_misses as m (client_ip, window_start, misses)
      values (storage_render_begin.client_ip, now(), 1)
      on conflict on constraint storage_render_misses_pkey do update
        set window_start = case when m.window_start <= now() - interval '1 minute' then now() else m.window_start end,
            misses = case when m.window_start <= now() - interval '1 minute' then 1 else m.misses + 1 end
      returning m.* into counted;
    if counted.misses > storage_render_begin.misses_per_minute then
      raise exception 'Too many image transformations: at most % a minute', storage_render_begin.misses_per_minute
        using errcode = 'PT429', hint = 'too_many_renders',
              detail = json_build_object('retry_after',
                         greatest(1, ceil(extract(epoch from counted.window_start + interval '1 minute' - now())))::integer)::text;
    end if;
  end if;
  insert into app.storage_renders (storage_key, variant) values (storage_render_begin.storage_key, storage_render_begin.variant)
    on conflict on constraint storage_renders_pkey do nothing;
  -- The version's oldest transformations past the bound go (their bytes: the
  -- gateway deletes them now, and app.storage_garbage holds them until then).
  with gone as (
    delete from app.storage_renders r
     where r.storage_key = storage_render_begin.storage_key
       and r.variant in (select x.variant from app.storage_renders x
                          where x.storage_key = storage_render_begin.storage_key
                          order by x.created_at desc, x.variant = storage_render_begin.variant desc, x.variant
                          offset greatest(storage_render_begin.variants_per_object, 1))
    returning private.storage_render_key(r.storage_key, r.variant) as key
  ), kept as (
    insert into app.storage_garbage (storage_key, collect_after) select g.key, now() from gone g on conflict do nothing
  )
  select coalesce(pg_catalog.array_agg(g.key), '{}') into evicted from gone g;
  return evicted;
end;
$function$;

CREATE OR REPLACE FUNCTION private.storage_render_key(storage_key text, variant text)
 RETURNS text
 LANGUAGE sql
 IMMUTABLE
 SET search_path TO 'pg_catalog'
AS $function$
    select 'renders/' || pg_catalog.regexp_replace(storage_render_key.storage_key, '^objects/', '') || '/' || storage_render_key.variant
  $function$;

CREATE OR REPLACE FUNCTION private.storage_render_misses_prune()
 RETURNS integer
 LANGUAGE sql
 SET search_path TO 'pg_catalog'
AS $function$
    with gone as (
      delete from app.storage_render_misses m where m.window_start <= now() - interval '1 minute' returning 1
    )
    select count(*)::integer from gone
  $function$;

CREATE OR REPLACE FUNCTION private.storage_render_stored(storage_key text, variant text, size bigint, budget_bytes bigint)
 RETURNS text[]
 LANGUAGE plpgsql
 SET search_path TO 'pg_catalog'
AS $function$
declare
  evicted text[];
begin
  -- One total at a time: every gateway's records take turns here.
  perform pg_advisory_xact_lock(pg_catalog.hashtextextended('app.storage_renders', 0));
  update app.storage_renders r set size = storage_render_stored.size
   where r.storage_key = storage_render_stored.storage_key and r.variant = storage_render_stored.variant;
  if not found then
    -- Evicted while it was being made: its bytes go at once.
    evicted := array[private.storage_render_key(storage_render_stored.storage_key, storage_render_stored.variant)];
    insert into app.storage_garbage (storage_key, collect_after) values (evicted[1], now()) on conflict do nothing;
    return evicted;
  end if;
  -- Past the budget, the oldest go (newest first, each counted with those newer than it).
  with ranked as (
    select r.storage_key, r.variant,
           sum(coalesce(r.size, 0)) over (order by r.created_at desc, r.storage_key desc, r.variant desc) as running
      from app.storage_renders r
  ), gone as (
    delete from app.storage_renders r
     using ranked k
     where k.running > storage_render_stored.budget_bytes
       and r.storage_key = k.storage_key and r.variant = k.variant
    returning private.storage_render_key(r.storage_key, r.variant) as key
  ), kept as (
    insert into app.storage_garbage (storage_key, collect_after) select g.key, now() from gone g on conflict do nothing
  )
  select coalesce(pg_catalog.array_agg(g.key), '{}') into evicted from gone g;
  return evicted;
end;
$function$;

CREATE OR REPLACE FUNCTION private.storage_signed_urls_end(user_id uuid)
 RETURNS void
 LANGUAGE sql
 SET search_path TO 'pg_catalog'
AS $function$
    insert into app.storage_usage as u (user_id, signed_urls_valid_after) values (storage_signed_urls_end.user_id, now())
      on conflict on constraint storage_usage_pkey do update set signed_urls_valid_after = now();
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
  select u.signed_urls_valid_after into valid_after from app.storage_usage u where u.user_id = (claims->>'sub')::uuid;
  if valid_after is not null and (claims->>'iat')::numeric <= extract(epoch from valid_after)
     or not exists (select from identity.users u where u.id = (claims->>'sub')::uuid) then
    raise exception 'The signed URL has expired' using errcode = 'PT400', hint = 'signature_expired';
  end if;
  return claims;
end;
$function$;

CREATE OR REPLACE FUNCTION private.storage_upload_abort(upload_id uuid, storage_key text)
 RETURNS void
 LANGUAGE sql
 SET search_path TO 'pg_catalog'
AS $function$
    with gone as (
      delete from app.storage_uploads u where u.id = storage_upload_abort.upload_id returning u.signed_token_hash
    )
    -- The signed upload URL it began with may be used again.
    delete from app.storage_signed_uploads t where t.token_hash in (select g.signed_token_hash from gone g);
    -- Never the bytes of a visible object (a finish whose answer was lost may have committed).
    insert into app.storage_garbage (storage_key, collect_after)
      select storage_upload_abort.storage_key, now()
       where not exists (select from app.storage_objects o where o.storage_key = storage_upload_abort.storage_key)
      on conflict do nothing;
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

CREATE OR REPLACE FUNCTION private.storage_uploads_expire(max_rows integer DEFAULT 1000)
 RETURNS integer
 LANGUAGE sql
 SET search_path TO 'pg_catalog'
AS $function$
    with gone as (
      delete from app.storage_uploads u
       where u.id in (select x.id from app.storage_uploads x where x.expires_at <= now()
                       order by x.expires_at limit storage_uploads_expire.max_rows for update skip locked)
      returning u.storage_key, u.signed_token_hash
    ), tokens as (
      -- Given back (the upload did not finish), or past the token's own expiry.
      delete from app.storage_signed_uploads t
       where t.token_hash in (select g.signed_token_hash from gone g)
          or t.token_hash in (select x.token_hash from app.storage_signed_uploads x where x.expires_at <= now()
                               limit storage_uploads_expire.max_rows)
    ), kept as (
      insert into app.storage_garbage (storage_key, collect_after)
        select g.storage_key, now() from gone g
         where not exists (select from app.storage_objects o where o.storage_key = g.storage_key)
        on conflict do nothing
    )
    select count(*)::integer from gone
  $function$;

set local check_function_bodies to default;

comment on function api.storage_sign(text,text[],integer,jsonb) is 'POST /storage/v1/object/sign/{bucket}[/{path}]: a signed download URL (valid expires_in seconds; the path percent-encoded where a URL needs it) for each path the caller may read, with the transformation to apply, if any; an `error` for the others. PT400 for an expiry outside 1 s to a year; PT404 bucket_not_found.';

comment on function api.storage_upload_begin_signed(text,text,text,bigint) is 'PUT /storage/v1/object/upload/sign/{bucket}/{path}?token=: an upload through a signed upload URL, as the user who signed it (their right to write the path, quota and rate are checked again). A token uploads once: PT409 signed_url_used when an upload began with it already (one refused or cut off gives it back: private.storage_upload_abort). PT400 invalid_signature or signature_expired, and the refusals of api.storage_upload_begin.';

comment on function private.storage_backup_lock_id() is 'The advisory lock a backup (npm run admin -- backup) holds, in its session, from before its dump''s snapshot until it has copied the files the dump lists: private.storage_garbage_take takes no key meanwhile, so no byte of an object the dump lists is deleted before it is copied.';

comment on function private.storage_garbage_done(text[],jsonb) is 'Forgets the keys whose bytes were deleted (and the records of their transformations, deleted with them); records the error of those that failed (failures: key → message), which are tried again later.';

comment on function private.storage_garbage_take(integer) is 'A batch of byte-store keys to delete (the storage_collect job), each put off with back-off in case the job dies; private.storage_garbage_done forgets them once deleted. None while a backup holds private.storage_backup_lock_id.';

comment on function private.storage_open_uploads_max() is 'How many resumable uploads one user may have open at once (not finished, cancelled or expired): 10.';

comment on function private.storage_render_begin(text,text,text,integer,integer) is 'A transformation not in the cache, about to be made (the gateway calls it, as its own role): counts it for the client address (PT429 too_many_renders past misses_per_minute in the current minute, detail retry_after), records it, and evicts the object version''s oldest transformations past variants_per_object. Returns the byte-store keys evicted (also put in app.storage_garbage), for the gateway to delete now.';

comment on function private.storage_render_key(text,text) is 'The byte-store key of a transformation: renders/<uuid of the version>/<variant> (gateway/storage/byte-store.ts renderKey).';

comment on function private.storage_render_misses_prune() is 'Forgets the transformation counts of client addresses whose minute is over (the storage_collect job). Returns how many.';

comment on function private.storage_render_stored(text,text,bigint,bigint) is 'A transformation stored (the gateway calls it, as its own role): records its size, then evicts the oldest transformations while all of them together are more than budget_bytes. Returns the byte-store keys evicted (also put in app.storage_garbage), for the gateway to delete now; the transformation itself when it was evicted while being made.';

comment on function private.storage_signed_urls_end(uuid) is 'Ends every signed download and upload URL the user made until now (private.storage_token_claims refuses a token issued at or before signed_urls_valid_after): a password set or changed, every session ended at once (a global sign-out), the account deleted.';

comment on function private.storage_upload_abort(uuid,text) is 'An upload that will not finish (refused, cut off, cancelled): forgets it (the quota it reserved is free again, and the signed upload URL it began with may be used again), and its key goes to app.storage_garbage unless an object uses it.';

comment on function private.storage_upload_start(uuid,text,text,boolean,bigint,text) is 'Begins an upload for owner_id (the caller, or the signer of a signed upload URL): the bucket, the path, the owner''s right to write it, an existing object (without upsert), the declared size against the bucket''s limit and against the quota together with what the owner''s uploads under way reserved (their declared sizes, held until they finish, are given up or expire), the upload rate, and at most private.storage_open_uploads_max() resumable uploads open, before a byte is read; registers it under a fresh byte-store key (expiring after 1 hour, 24 for resumable uploads). PT413 quota_exceeded, PT429 too_many_uploads or too_many_open_uploads (detail: retry_after).';

comment on function private.storage_uploads_expire(integer) is 'Uploads past their expiry (cut off, or their gateway killed): forgotten (a signed upload URL they began with given back), their keys to app.storage_garbage; used signed upload URLs past their own expiry forgotten. Returns how many uploads (the storage_collect job).';

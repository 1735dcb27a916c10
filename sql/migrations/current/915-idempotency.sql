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

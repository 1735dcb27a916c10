-- =============================================================================
-- Idempotency-Key records
-- =============================================================================
-- An Idempotency-Key on a POST, PATCH or DELETE makes a retry safe. The
-- gateway claims the key (api.idempotency_claim) and stores the answer
-- (api.idempotency_store) in the request's own transaction, so the record and
-- the request's effect commit together; a request that fails or rolls back
-- leaves no record. Per caller and key: a key held by another transaction now
-- is PT409; a key answered in the last 24 hours replays the same request's
-- answer (PTRPL, api.idempotency_replay) and refuses another request (PT422);
-- a claimed key cannot commit without its answer (a deferred trigger). The row
-- holds the key's SHA-256 and the answer encrypted with a key the database
-- never keeps; records are pruned after 24 hours.
--
-- Code: gateway/http/idempotency.ts
-- pgTAP: supabase/tests/idempotency.test.sql
--
-- Its tables (created and altered by the migrations; their comments, row-level
-- security, policies, grants and triggers are below):
--   app.idempotency_keys
--
-- The current definition of every function, view, policy, trigger, grant and
-- comment of this area. To change a rule: edit it here, then
-- `npm run db -- areas --diff` writes its migration (docs/dba.md, "Changing a
-- rule"). CI (`npm run db -- areas --check`) fails while this file and the
-- migrated database disagree. `npm run db -- areas --write` renders all below
-- `-- Code:` again from a freshly migrated database.
-- =============================================================================

-- -----------------------------------------------------------------------------
-- Functions of api: what the gateway and the MCP server call, as the request's
-- role
-- -----------------------------------------------------------------------------

CREATE OR REPLACE FUNCTION api.idempotency_claim(key text, request_hash text)
 RETURNS void
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog'
AS $function$
declare
  me uuid := auth.uid();
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
  -- Held until this transaction ends; another request with the key, on any
  -- replica, is answered 409 at once instead of waiting.
  if not pg_try_advisory_xact_lock(hashtextextended('idempotency ' || me::text || ' ' || encode(key_digest, 'hex'), 0)) then
    raise exception 'a request with this Idempotency-Key is still being processed'
      using errcode = 'PT409', hint = 'idempotency_key_in_progress';
  end if;
  -- A new statement, a new snapshot: whoever held the lock before has committed or rolled back.
  select k.* into existing from app.idempotency_keys k where k.user_id = me and k.key_hash = key_digest;
  if existing.user_id is not null then
    if existing.created_at > now() - private.idempotency_key_lifetime() then
      if existing.request_hash = request_digest then
        raise exception 'this request was answered before' using errcode = 'PTRPL', hint = 'idempotent_replay';
      end if;
      raise exception 'this Idempotency-Key was used for another request (method, path or body)'
        using errcode = 'PT422', hint = 'idempotency_key_reused';
    end if;
    delete from app.idempotency_keys k where k.user_id = me and k.key_hash = key_digest;
  end if;
  insert into app.idempotency_keys (user_id, key_hash, request_hash) values (me, key_digest, request_digest);
end;
$function$;
comment on function api.idempotency_claim(text,text) is 'Claims an Idempotency-Key for the caller in the request''s transaction, before the route''s call: PT409 idempotency_key_in_progress while another transaction holds it; PTRPL idempotent_replay when the same request (request_hash: SHA-256 of method, path and body, hex) was answered in the last 24 hours; PT422 idempotency_key_reused for another request.';
grant execute on function api.idempotency_claim(text,text) to authenticated;

CREATE OR REPLACE FUNCTION api.idempotency_replay(key text, request_hash text)
 RETURNS TABLE(status integer, answer jsonb)
 LANGUAGE sql
 STABLE SECURITY DEFINER
 SET search_path TO 'pg_catalog'
AS $function$
    select k.status,
           convert_from(extensions.decrypt_iv(substring(k.answer from 17), private.idempotency_answer_key(k.user_id, idempotency_replay.key),
                                              substring(k.answer for 16), 'aes-cbc/pad:pkcs'), 'UTF8')::jsonb
      from app.idempotency_keys k
     where k.user_id = auth.uid()
       and k.key_hash = extensions.digest(idempotency_replay.key, 'sha256')
       and k.request_hash = decode(idempotency_replay.request_hash, 'hex')
       and k.status is not null
       and k.created_at > now() - private.idempotency_key_lifetime()
  $function$;
comment on function api.idempotency_replay(text,text) is 'The stored answer (status, {headers, body}) of the caller''s Idempotency-Key for this request (request_hash), when the claim said idempotent_replay; no row when it is gone.';
grant execute on function api.idempotency_replay(text,text) to authenticated;

CREATE OR REPLACE FUNCTION api.idempotency_store(key text, status integer, answer jsonb)
 RETURNS void
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog'
AS $function$
declare
  me uuid := auth.uid();
  iv bytea := extensions.gen_random_bytes(16);
begin
  update app.idempotency_keys k
     set status = idempotency_store.status,
         answer = iv || extensions.encrypt_iv(convert_to(idempotency_store.answer::text, 'UTF8'),
                                              private.idempotency_answer_key(me, idempotency_store.key), iv, 'aes-cbc/pad:pkcs')
   where k.user_id = me and k.key_hash = extensions.digest(idempotency_store.key, 'sha256') and k.status is null;
  if not found then
    raise exception 'no idempotency key was claimed for this answer';
  end if;
end;
$function$;
comment on function api.idempotency_store(text,integer,jsonb) is 'Stores the answer (status and {headers, body}) of the request that claimed the Idempotency-Key in this transaction, right before COMMIT; the answer is encrypted with a key derived from the caller and the idempotency key.';
grant execute on function api.idempotency_store(text,integer,jsonb) to authenticated;

-- -----------------------------------------------------------------------------
-- Functions of private: internal helpers and trigger functions (request roles
-- run only those granted here)
-- -----------------------------------------------------------------------------

CREATE OR REPLACE FUNCTION private.idempotency_answer_key(user_id uuid, key text)
 RETURNS bytea
 LANGUAGE sql
 IMMUTABLE
 SET search_path TO 'pg_catalog'
AS $function$ select extensions.digest('idempotency answer ' || user_id::text || ' ' || key, 'sha256') $function$;
comment on function private.idempotency_answer_key(uuid,text) is 'The AES-256 key of a stored answer: derived from the caller and the idempotency key, never stored.';

CREATE OR REPLACE FUNCTION private.idempotency_key_lifetime()
 RETURNS interval
 LANGUAGE sql
 IMMUTABLE
AS $function$ select interval '24 hours' $function$;
comment on function private.idempotency_key_lifetime() is 'How long an idempotency key and its answer are kept: 24 hours.';

CREATE OR REPLACE FUNCTION private.idempotency_keys_prune(max_rows integer DEFAULT 10000)
 RETURNS integer
 LANGUAGE sql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog'
AS $function$
    with gone as (
      delete from app.idempotency_keys k
       where (k.user_id, k.key_hash) in (
               select o.user_id, o.key_hash from app.idempotency_keys o
                where o.created_at < now() - private.idempotency_key_lifetime()
                order by o.created_at
                limit max_rows)
      returning 1)
    select count(*)::integer from gone
  $function$;
comment on function private.idempotency_keys_prune(integer) is 'Deletes idempotency keys older than 24 hours, at most max_rows (oldest first); returns how many. The gateway runs it with the change-log prune; a background worker may call it instead.';

CREATE OR REPLACE FUNCTION private.tg_idempotency_keys__answered()
 RETURNS trigger
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog'
AS $function$
begin
  if exists (select from app.idempotency_keys k
              where k.user_id = new.user_id and k.key_hash = new.key_hash and k.status is null) then
    raise exception 'an idempotency key would be kept without its answer';
  end if;
  return null;
end;
$function$;
comment on function private.tg_idempotency_keys__answered() is 'Deferred constraint trigger: a transaction that claimed an idempotency key cannot commit without storing its answer.';

-- -----------------------------------------------------------------------------
-- Tables: comments, row-level security, policies, grants, triggers
-- -----------------------------------------------------------------------------

-- app.idempotency_keys
comment on table app.idempotency_keys is 'Idempotency keys of the last 24 hours, per caller: the key''s SHA-256, the request''s SHA-256 (method, path, body), the status and the answer (encrypted with a key derived from the caller and the idempotency key). Written only in the transaction of the request they answer. Not granted to request roles.';
alter table app.idempotency_keys enable row level security;
drop trigger if exists _900_answered on app.idempotency_keys;
CREATE CONSTRAINT TRIGGER _900_answered AFTER INSERT ON app.idempotency_keys DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION private.tg_idempotency_keys__answered();

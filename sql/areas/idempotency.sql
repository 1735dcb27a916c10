-- =============================================================================
-- Idempotency-Key records
-- =============================================================================
-- An Idempotency-Key on a POST, PATCH or DELETE makes a retry safe. The
-- gateway claims the key (api.idempotency_claim) and stores the answer
-- (api.idempotency_store) in the request's own transaction, so the record and
-- the request's effect commit together; a request that fails or rolls back
-- leaves no record. Per caller and key: a key held by another transaction now
-- is PT409; a key answered in the last 48 hours replays the same request's
-- answer (PTRPL, api.idempotency_replay) and refuses another request (PT422);
-- a claimed key cannot commit without its answer (a deferred trigger). The row
-- holds the key's SHA-256 and the answer encrypted with a key the database
-- never keeps; records are pruned after 48 hours (a phone that sent a write, lost
-- the answer and stayed offline a day still gets it replayed).
--
-- Code: gateway/http/idempotency.ts
-- pgTAP: supabase/tests/idempotency.test.sql
--
-- The whole source of this area, after the areas before it in
-- sql/areas/areas.json: types, tables, indexes, triggers, policies, the api
-- functions, the helpers. To change it: edit it here, then
-- `npm run db -- areas --diff` writes the migration (docs/dba.md).
-- =============================================================================

-- =============================================================================
-- Tables
-- =============================================================================

CREATE TABLE app.idempotency_keys (
    user_id uuid NOT NULL,
    key_hash bytea NOT NULL,
    request_hash bytea NOT NULL,
    status integer,
    answer bytea,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    credential bytea NOT NULL,
    CONSTRAINT idempotency_keys_status_check CHECK (((status IS NULL) OR ((status >= 200) AND (status <= 499)))),
    CONSTRAINT idempotency_keys_pkey PRIMARY KEY (user_id, credential, key_hash),
    CONSTRAINT idempotency_keys_user_id_fkey FOREIGN KEY (user_id) REFERENCES identity.users(id) ON DELETE CASCADE
);
COMMENT ON TABLE app.idempotency_keys IS 'Idempotency keys of the last 48 hours, per user and credential (at most 1,000 a user): the key''s SHA-256, the request''s SHA-256 (method, path, body), the status of a success and the answer (encrypted with a key derived from the user, the credential and the idempotency key). Written only in the transaction of the request they answer. Not granted to request roles.';
COMMENT ON COLUMN app.idempotency_keys.credential IS 'SHA-256 of the credential the key belongs to (private.idempotency_credential); empty for records made before credentials were recorded (replayed to nobody).';
ALTER TABLE app.idempotency_keys ENABLE ROW LEVEL SECURITY;

CREATE TABLE app.idempotency_callers (
    user_id uuid NOT NULL,
    records integer NOT NULL,
    CONSTRAINT idempotency_callers_pkey PRIMARY KEY (user_id),
    CONSTRAINT idempotency_callers_user_id_fkey FOREIGN KEY (user_id) REFERENCES identity.users(id) ON DELETE CASCADE
);
COMMENT ON TABLE app.idempotency_callers IS 'How many answered idempotency keys each user has (app.idempotency_keys), kept by api.idempotency_store and the prune for the per-caller cap; counted again whenever the store trims. Not granted to request roles.';
ALTER TABLE app.idempotency_callers ENABLE ROW LEVEL SECURITY;

-- =============================================================================
-- Indexes
-- =============================================================================

CREATE INDEX idempotency_keys_created_idx ON app.idempotency_keys USING btree (created_at);
CREATE INDEX idempotency_keys_user_created_idx ON app.idempotency_keys USING btree (user_id, created_at);

-- =============================================================================
-- Triggers
-- =============================================================================

CREATE CONSTRAINT TRIGGER _900_answered AFTER INSERT ON app.idempotency_keys DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION private.tg_idempotency_keys__answered();

-- =============================================================================
-- Functions of api: what the gateway and the MCP server call, as the request's role
-- =============================================================================

CREATE FUNCTION api.idempotency_claim(key text, request_hash text) RETURNS jsonb
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog'
    AS $_$
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
$_$;

COMMENT ON FUNCTION api.idempotency_claim(key text, request_hash text) IS 'Claims an Idempotency-Key for the caller''s credential (private.idempotency_credential) in the request''s transaction, before the route''s call, and returns null; or, when the credential sent the same request (request_hash: SHA-256 of method, path and body, hex) in the last 48 hours, returns its stored answer {status, answer: {headers, body}}, which the gateway sends only if the route does not refuse the caller now. PT409 idempotency_key_in_progress while another transaction holds the key; PT422 idempotency_key_reused for another request.';
GRANT EXECUTE ON FUNCTION api.idempotency_claim(key text, request_hash text) TO authenticated;

CREATE FUNCTION api.idempotency_store(key text, status integer, answer jsonb) RETURNS void
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog'
    AS $$
declare
  me uuid := auth.uid();
  caller_credential bytea := private.idempotency_credential();
  iv bytea := extensions.gen_random_bytes(16);
  kept integer;
begin
  if status is null or status not between 200 and 399 then
    raise exception 'only a success is stored for an idempotency key (a refusal changed nothing: its retry runs again)';
  end if;
  update app.idempotency_keys k
     set status = idempotency_store.status,
         answer = iv || extensions.encrypt_iv(convert_to(idempotency_store.answer::text, 'UTF8'),
                                              private.idempotency_answer_key(me, caller_credential, idempotency_store.key), iv, 'aes-cbc/pad:pkcs')
   where k.user_id = me and k.credential = caller_credential
     and k.key_hash = extensions.digest(idempotency_store.key, 'sha256') and k.status is null;
  if not found then
    -- The request deleted the caller's account (its claim went with it): its
    -- credentials have ended, so no retry can reach a record; none is kept.
    if not exists (select from identity.users u where u.id = me) then
      return;
    end if;
    raise exception 'no idempotency key was claimed for this answer';
  end if;
  -- The cap. The counter's row is locked from here to COMMIT, which goes out
  -- with this statement: the caller's answers are counted one at a time.
  insert into app.idempotency_callers as c (user_id, records) values (me, 1)
    on conflict (user_id) do update set records = c.records + 1
    returning c.records into kept;
  if kept > private.idempotency_keys_per_caller() then
    delete from app.idempotency_keys k
     where k.user_id = me
       and (k.credential, k.key_hash) in (select o.credential, o.key_hash from app.idempotency_keys o
                                           where o.user_id = me
                                           order by o.created_at desc
                                           offset private.idempotency_keys_per_caller() - 100);
    update app.idempotency_callers c
       set records = (select count(*) from app.idempotency_keys k where k.user_id = me)
     where c.user_id = me;
  end if;
end;
$$;

COMMENT ON FUNCTION api.idempotency_store(key text, status integer, answer jsonb) IS 'Stores the answer (a success: status 200-399, and {headers, body}) of the request that claimed the Idempotency-Key in this transaction, right before COMMIT; the answer is encrypted with a key derived from the user, the credential and the idempotency key. A refusal is not stored: the gateway rolls its transaction back, the claim with it. Counts the caller''s answers; past private.idempotency_keys_per_caller() deletes the caller''s oldest 100. Nothing is kept when the request deleted the caller''s account.';
GRANT EXECUTE ON FUNCTION api.idempotency_store(key text, status integer, answer jsonb) TO authenticated;

-- =============================================================================
-- Helpers (private, app, identity): internal helpers and trigger functions; request roles run only those granted here
-- =============================================================================

CREATE FUNCTION private.idempotency_credential() RETURNS bytea
    LANGUAGE sql STABLE
    SET search_path TO 'pg_catalog'
    AS $$
    select extensions.digest(
             case
               when nullif(c ->> 'token_id', '') is not null
                 then 'api token ' || (c ->> 'token_id') || ' community ' || coalesce(nullif(c ->> 'token_community_id', ''), 'none')
               when nullif(c ->> 'session_id', '') is not null
                 then 'session ' || (c ->> 'session_id')
               else 'access token of ' || coalesce(c ->> 'sub', '')
             end, 'sha256')
      from (select auth.jwt() as c) claims
  $$;
COMMENT ON FUNCTION private.idempotency_credential() IS 'The credential of the request (request.jwt.claims), as an idempotency record holds it: an API token''s id and community scope, else an access token''s session, else (an access token without a session) its user; SHA-256.';


CREATE FUNCTION private.idempotency_key_lifetime() RETURNS interval
    LANGUAGE sql IMMUTABLE
    AS $$ select interval '48 hours' $$;
COMMENT ON FUNCTION private.idempotency_key_lifetime() IS 'How long an idempotency key and its answer are kept: 48 hours, so that a write replayed after a day offline keeps its key.';


CREATE FUNCTION private.idempotency_answer_key(user_id uuid, credential bytea, key text) RETURNS bytea
    LANGUAGE sql IMMUTABLE
    SET search_path TO 'pg_catalog'
    AS $$ select extensions.digest('idempotency answer ' || user_id::text || ' ' || encode(credential, 'hex') || ' ' || key, 'sha256') $$;

COMMENT ON FUNCTION private.idempotency_answer_key(user_id uuid, credential bytea, key text) IS 'The AES-256 key of a stored answer: derived from the user, the credential and the idempotency key, never stored.';


CREATE FUNCTION private.idempotency_keys_per_caller() RETURNS integer
    LANGUAGE sql IMMUTABLE
    AS $$ select 1000 $$;
COMMENT ON FUNCTION private.idempotency_keys_per_caller() IS 'How many answered idempotency keys a caller (a user, all their credentials together) keeps: 1,000; the answer that would pass it first deletes the caller''s oldest 100.';


CREATE FUNCTION private.tg_idempotency_keys__answered() RETURNS trigger
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog'
    AS $$
begin
  if exists (select from app.idempotency_keys k
              where k.user_id = new.user_id and k.credential = new.credential and k.key_hash = new.key_hash
                and k.status is null) then
    raise exception 'an idempotency key would be kept without its answer';
  end if;
  return null;
end;
$$;
COMMENT ON FUNCTION private.tg_idempotency_keys__answered() IS 'Deferred constraint trigger: a transaction that claimed an idempotency key cannot commit without storing its answer.';


CREATE FUNCTION private.idempotency_keys_prune(max_rows integer DEFAULT 10000) RETURNS integer
    LANGUAGE sql SECURITY DEFINER
    SET search_path TO 'pg_catalog'
    AS $$
    with gone as (
      delete from app.idempotency_keys k
       where (k.user_id, k.credential, k.key_hash) in (
               select o.user_id, o.credential, o.key_hash from app.idempotency_keys o
                where o.created_at < now() - private.idempotency_key_lifetime()
                order by o.created_at
                limit max_rows)
      returning k.user_id),
    per_user as (select g.user_id, count(*)::integer as n from gone g group by g.user_id),
    counted as (
      update app.idempotency_callers c set records = greatest(c.records - p.n, 0)
        from per_user p where c.user_id = p.user_id
      returning 1)
    select coalesce(sum(p.n), 0)::integer from per_user p
  $$;

COMMENT ON FUNCTION private.idempotency_keys_prune(max_rows integer) IS 'Deletes idempotency keys older than 48 hours, at most max_rows (oldest first), and counts them off their callers; returns how many. The background worker''s crontab runs it.';

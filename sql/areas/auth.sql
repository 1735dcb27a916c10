-- =============================================================================
-- Accounts and sign-in: passwords, attempts, sessions, refresh tokens, throttling
-- =============================================================================
-- Accounts and signing in. Passwords are hashed and compared by the gateway
-- and the MCP process (bcrypt, off the database's CPU); every rule around them
-- is here:
--
--   sign in = private.password_attempt_start (one transaction): throttling
--             is checked first; it hands out the account's hash, or a dummy
--             hash at the same cost for an unknown e-mail or an account
--             without a password, with a single-use attempt valid 60 s
--           + the process compares the password
--           + private.auth_login_finish (or private.oauth_request_approve),
--             through private.password_attempt_finish: the outcome is counted
--             and a success becomes a session (or an OAuth code)
--
-- Failures are counted per e-mail and client, per e-mail across clients and per
-- client address (private.auth_failures); attempts still being checked count
-- too. Both tables are UNLOGGED: a sign-in writes no WAL for them, and its
-- first transaction (which writes nothing else) commits without a WAL flush;
-- a crash or failover of the primary forgets them (the counts start again,
-- sign-ins being checked then answer expired). Refresh tokens are random, stored as SHA-256, rotated on every use; a
-- rotated token presented again ends its whole session. Logout ends a session
-- and with it every access token of it (private.check_session, checked in each
-- request's transaction), streams included (NOTIFY session_ended).
-- private.end_credentials ends everything of an account at once (a password
-- reset). identity.hash_password (pgcrypto) stays for operators in psql; both
-- hash formats verify.
--
-- Code: gateway/auth/sign-in.ts, gateway/auth/sessions.ts, gateway/auth/api/,
--   gateway/auth/v1/, gateway/core/auth/passwords.ts
-- pgTAP: supabase/tests/auth.test.sql,
--   supabase/tests/auth.password-doors.test.sql
--
-- The whole source of this area, after the areas before it in
-- sql/areas/areas.json: types, tables, indexes, triggers, policies, the api
-- functions, the helpers. To change it: edit it here, then
-- `npm run db -- areas --diff` writes the migration (docs/dba.md).
-- =============================================================================

-- =============================================================================
-- Types
-- =============================================================================

CREATE TYPE api.auth_refresh_result AS (
	status text,
	user_id uuid,
	email text,
	refresh_token text,
	session_id uuid
);

CREATE TYPE api.auth_session AS (
	user_id uuid,
	email text,
	refresh_token text,
	session_id uuid
);

CREATE TYPE api.auth_user AS (
	user_id uuid,
	email text
);

-- =============================================================================
-- Tables
-- =============================================================================

CREATE TABLE identity.users (
    id uuid DEFAULT gen_random_uuid() NOT NULL,
    email text,
    password_hash text,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    updated_at timestamp with time zone DEFAULT now() NOT NULL,
    user_metadata jsonb DEFAULT '{}'::jsonb NOT NULL,
    is_anonymous boolean DEFAULT false NOT NULL,
    app_metadata jsonb DEFAULT '{}'::jsonb NOT NULL,
    CONSTRAINT users_app_metadata_object CHECK ((jsonb_typeof(app_metadata) = 'object'::text)),
    CONSTRAINT users_guest_has_no_email CHECK ((is_anonymous = (email IS NULL))),
    CONSTRAINT users_email_is_normalised CHECK ((email = lower(btrim(email)))),
    CONSTRAINT users_email_shape CHECK (((length(email) <= 320) AND (email ~ '^[^@\s]+@[^@\s]+$'::text))),
    CONSTRAINT users_pkey PRIMARY KEY (id)
);
COMMENT ON TABLE identity.users IS 'Sign-in identities. password_hash is null for accounts that cannot sign in yet.';
COMMENT ON COLUMN identity.users.email IS 'Lower-case e-mail address; unique. Null for a guest (is_anonymous).';
COMMENT ON COLUMN identity.users.is_anonymous IS 'A guest (POST /auth/v1/signup without e-mail: supabase-js signInAnonymously): no e-mail, no password; private.require_full_account refuses it what only a full account may do; it becomes a full account, same id, when it sets an e-mail and a password (api.auth_guest_convert); unconverted, it is deleted after a while (private.guests_prune).';
COMMENT ON COLUMN identity.users.app_metadata IS 'What the service (its operators, with the service-role key) says about the user: a JSON object of at most 16 KB set only through PUT /auth/v1/admin/users/{id} (admin.user_update), answered as the User object''s app_metadata with provider and providers, and carried in access tokens (claim app_metadata) for rules to read (private.app_metadata()).';
COMMENT ON COLUMN identity.users.user_metadata IS 'What the user says about themselves through Supabase Auth''s API (`data` of sign-up and PUT /auth/v1/user): a JSON object of at most 16 KB, answered as the User object''s user_metadata. Never read by a rule.';
ALTER TABLE identity.users ENABLE ROW LEVEL SECURITY;
GRANT SELECT(id) ON TABLE identity.users TO authenticated;
GRANT SELECT(email) ON TABLE identity.users TO authenticated;
GRANT SELECT(created_at) ON TABLE identity.users TO authenticated;
GRANT SELECT(updated_at) ON TABLE identity.users TO authenticated;

CREATE TABLE identity.refresh_tokens (
    id bigint GENERATED ALWAYS AS IDENTITY NOT NULL,
    token_hash bytea NOT NULL,
    user_id uuid,
    session_id uuid NOT NULL,
    parent_id bigint,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    expires_at timestamp with time zone NOT NULL,
    revoked_at timestamp with time zone,
    revoked_reason text,
    user_agent text,
    ip text,
    CONSTRAINT refresh_tokens_revocation_complete CHECK (((revoked_at IS NULL) = (revoked_reason IS NULL))),
    CONSTRAINT refresh_tokens_revoked_reason_check CHECK ((revoked_reason = ANY (ARRAY['rotated'::text, 'reused'::text, 'logout'::text]))),
    CONSTRAINT refresh_tokens_pkey PRIMARY KEY (id),
    CONSTRAINT refresh_tokens_token_hash_key UNIQUE (token_hash),
    CONSTRAINT refresh_tokens_parent_id_fkey FOREIGN KEY (parent_id) REFERENCES identity.refresh_tokens(id) ON DELETE SET NULL
);
ALTER TABLE ONLY identity.refresh_tokens
    ADD CONSTRAINT refresh_tokens_user_id_fkey FOREIGN KEY (user_id) REFERENCES identity.users(id) ON DELETE SET NULL NOT VALID;
COMMENT ON TABLE identity.refresh_tokens IS 'Refresh tokens (hashed). All tokens descending from one login share session_id (the family). A deleted account''s tokens stay, revoked and without it (user_id null), until pruned.';
COMMENT ON COLUMN identity.refresh_tokens.user_agent IS 'The User-Agent of the sign-in or refresh that made this token (at most 512 characters); shown to the account''s owner in its list of sessions.';
COMMENT ON COLUMN identity.refresh_tokens.ip IS 'The client address of the sign-in or refresh that made this token; shown to the account''s owner in its list of sessions.';
ALTER TABLE identity.refresh_tokens ENABLE ROW LEVEL SECURITY;

CREATE TABLE identity.recovery_sessions (
    session_id uuid NOT NULL,
    user_id uuid NOT NULL,
    expires_at timestamp with time zone NOT NULL,
    CONSTRAINT recovery_sessions_pkey PRIMARY KEY (session_id),
    CONSTRAINT recovery_sessions_user_id_fkey FOREIGN KEY (user_id) REFERENCES identity.users(id) ON DELETE CASCADE
);
COMMENT ON TABLE identity.recovery_sessions IS 'Sessions a password recovery link started (api.auth_recovery_verify): each may set the password once without the current one until expires_at (one hour).';
ALTER TABLE identity.recovery_sessions ENABLE ROW LEVEL SECURITY;

CREATE UNLOGGED TABLE private.auth_failures (
    scope text NOT NULL,
    key text NOT NULL,
    failed_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT auth_failures_scope_check CHECK ((scope = ANY (ARRAY['email'::text, 'email_client'::text, 'ip'::text, 'refresh'::text, 'verify'::text, 'password_set'::text, 'email_link'::text, 'guest'::text])))
);
COMMENT ON TABLE private.auth_failures IS 'Failed sign-ins (per e-mail and client address, per e-mail, per client IP), failed refresh/verify attempts (per client IP), requests at the doors that set a password (password_set, per client IP) at the doors that e-mail a link (email_link, per client IP) and guest sign-ins (guest, per client IP), for throttling.';

CREATE UNLOGGED TABLE private.password_attempts (
    attempt_hash bytea NOT NULL,
    door text NOT NULL,
    email_key text NOT NULL,
    client_ip text,
    user_id uuid,
    hash_digest bytea,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    expires_at timestamp with time zone NOT NULL,
    CONSTRAINT password_attempts_door_check CHECK ((door = ANY (ARRAY['login'::text, 'oauth_consent'::text, 'reauthenticate'::text]))),
    CONSTRAINT password_attempts_pkey PRIMARY KEY (attempt_hash),
    CONSTRAINT password_attempts_user_id_fkey FOREIGN KEY (user_id) REFERENCES identity.users(id) ON DELETE CASCADE
);
COMMENT ON TABLE private.password_attempts IS 'Sign-ins whose password is being checked by a process (private.password_attempt_start): single-use, 60 seconds; they count as failures in the throttling until their outcome is recorded.';
ALTER TABLE private.password_attempts ENABLE ROW LEVEL SECURITY;

-- =============================================================================
-- Indexes
-- =============================================================================

CREATE UNIQUE INDEX users_email_key ON identity.users USING btree (email);
CREATE INDEX refresh_tokens_ended_session_idx ON identity.refresh_tokens USING btree (session_id) WHERE (revoked_reason = ANY (ARRAY['logout'::text, 'reused'::text]));
CREATE INDEX refresh_tokens_session_idx ON identity.refresh_tokens USING btree (session_id);
CREATE INDEX refresh_tokens_user_idx ON identity.refresh_tokens USING btree (user_id);
CREATE INDEX recovery_sessions_user_id_idx ON identity.recovery_sessions USING btree (user_id);
CREATE INDEX auth_failures_age ON private.auth_failures USING btree (failed_at);
CREATE INDEX auth_failures_key ON private.auth_failures USING btree (scope, key, failed_at);
CREATE INDEX password_attempts_client ON private.password_attempts USING btree (client_ip);
CREATE INDEX password_attempts_email ON private.password_attempts USING btree (email_key);

-- =============================================================================
-- Triggers
-- =============================================================================

CREATE TRIGGER _100_set_updated_at BEFORE UPDATE ON identity.users FOR EACH ROW EXECUTE FUNCTION private.tg__set_updated_at();
CREATE TRIGGER _900_storage_purge AFTER DELETE ON identity.users FOR EACH ROW EXECUTE FUNCTION private.tg_users__storage_purge();
CREATE TRIGGER _900_notify_session_ended AFTER UPDATE ON identity.refresh_tokens REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION private.tg_refresh_tokens__notify_session_ended();

-- =============================================================================
-- Policies
-- =============================================================================

CREATE POLICY "Users can read their own identity" ON identity.users FOR SELECT TO authenticated USING ((id = ( SELECT auth.uid() AS uid)));

-- =============================================================================
-- Functions of api: what the gateway and the MCP server call, as the request's role
-- =============================================================================

CREATE FUNCTION api.auth_register(email text, password_hash text, name text DEFAULT NULL::text) RETURNS SETOF api.auth_user
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog'
    AS $$
declare
  new_user uuid;
begin
  if auth_register.password_hash is null then
    raise exception 'password_hash must be a bcrypt hash of cost 10 or more' using errcode = 'PT400', hint = 'invalid_password_hash';
  end if;
  new_user := private.create_account_with_hash(auth_register.email, auth_register.password_hash, auth_register.name);
  return query select u.id, u.email from identity.users u where u.id = new_user;
end;
$$;

COMMENT ON FUNCTION api.auth_register(email text, password_hash text, name text) IS 'POST /api/auth/register and /signup: creates user, profile and node with the bcrypt hash the gateway made of the password (name optional; without one it is derived and private). PT409 (hint email_taken) for a duplicate e-mail; PT400 invalid_password_hash.';
GRANT EXECUTE ON FUNCTION api.auth_register(email text, password_hash text, name text) TO anon;
GRANT EXECUTE ON FUNCTION api.auth_register(email text, password_hash text, name text) TO authenticated;

CREATE FUNCTION api.auth_refresh_throttled(refresh_token text, client_ip text, max_failures_per_ip integer, window_seconds integer, user_agent text DEFAULT NULL::text) RETURNS TABLE(status text, retry_after integer, user_id uuid, email text, new_refresh_token text, session_id uuid)
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog'
    AS $$
declare
  wait integer := case when client_ip is null then 0
                       else private.auth_throttle_wait('refresh', client_ip, max_failures_per_ip, window_seconds) end;
  result api.auth_refresh_result;
begin
  if wait > 0 then
    return query select 'throttled'::text, wait, null::uuid, null::text, null::text, null::uuid;
    return;
  end if;
  select * into strict result from api.auth_refresh(auth_refresh_throttled.refresh_token, auth_refresh_throttled.user_agent, auth_refresh_throttled.client_ip);
  if result.status <> 'ok' and client_ip is not null then
    perform private.auth_throttle_record('refresh', client_ip);
  end if;
  return query select result.status, 0, result.user_id, result.email, result.refresh_token, result.session_id;
end;
$$;

COMMENT ON FUNCTION api.auth_refresh_throttled(refresh_token text, client_ip text, max_failures_per_ip integer, window_seconds integer, user_agent text) IS 'POST /api/auth/refresh with throttling: api.auth_refresh, but a client IP with too many failed refreshes gets status throttled (retry_after seconds).';
GRANT EXECUTE ON FUNCTION api.auth_refresh_throttled(refresh_token text, client_ip text, max_failures_per_ip integer, window_seconds integer, user_agent text) TO anon;
GRANT EXECUTE ON FUNCTION api.auth_refresh_throttled(refresh_token text, client_ip text, max_failures_per_ip integer, window_seconds integer, user_agent text) TO authenticated;

CREATE FUNCTION api.auth_logout(refresh_token text) RETURNS boolean
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog'
    AS $$
declare
  family uuid;
begin
  select t.session_id into family
    from identity.refresh_tokens t
    where t.token_hash = identity.token_hash(auth_logout.refresh_token);
  if family is null then
    raise exception 'invalid refresh token' using errcode = 'PT401', hint = 'invalid_refresh_token';
  end if;
  update identity.refresh_tokens t
    set revoked_at = now(), revoked_reason = 'logout'
    where t.session_id = family and t.revoked_at is null;
  return true;
end;
$$;

COMMENT ON FUNCTION api.auth_logout(refresh_token text) IS 'POST /api/auth/logout: ends the session of the refresh token (revokes its family). PT401 for an unknown token.';
GRANT EXECUTE ON FUNCTION api.auth_logout(refresh_token text) TO anon;
GRANT EXECUTE ON FUNCTION api.auth_logout(refresh_token text) TO authenticated;

CREATE FUNCTION api.auth_verify_wait(client_ip text, max_failures_per_ip integer, window_seconds integer) RETURNS integer
    LANGUAGE sql STABLE SECURITY DEFINER
    SET search_path TO 'pg_catalog'
    AS $$
  select private.auth_throttle_wait('verify', client_ip, max_failures_per_ip, window_seconds);
$$;

COMMENT ON FUNCTION api.auth_verify_wait(client_ip text, max_failures_per_ip integer, window_seconds integer) IS 'POST /api/auth/verify: seconds the client IP must wait after too many invalid tokens (0: go ahead).';
GRANT EXECUTE ON FUNCTION api.auth_verify_wait(client_ip text, max_failures_per_ip integer, window_seconds integer) TO anon;
GRANT EXECUTE ON FUNCTION api.auth_verify_wait(client_ip text, max_failures_per_ip integer, window_seconds integer) TO authenticated;

CREATE FUNCTION api.auth_verify_failed(client_ip text) RETURNS void
    LANGUAGE sql SECURITY DEFINER
    SET search_path TO 'pg_catalog'
    AS $$
  select private.auth_throttle_record('verify', client_ip);
$$;

COMMENT ON FUNCTION api.auth_verify_failed(client_ip text) IS 'POST /api/auth/verify: counts an invalid token against the client IP.';
GRANT EXECUTE ON FUNCTION api.auth_verify_failed(client_ip text) TO anon;
GRANT EXECUTE ON FUNCTION api.auth_verify_failed(client_ip text) TO authenticated;

CREATE FUNCTION api.auth_verify() RETURNS SETOF api.auth_user
    LANGUAGE plpgsql STABLE
    SET search_path TO 'pg_catalog'
    AS $$
begin
  return query select u.id, u.email from identity.users u where u.id = auth.uid();
  if not found then
    raise exception 'token does not belong to an existing user' using errcode = 'PT401', hint = 'invalid_token';
  end if;
end;
$$;
COMMENT ON FUNCTION api.auth_verify() IS 'POST /api/auth/verify: the user of the current (already signature-checked) token, PT401 if it no longer exists.';
GRANT EXECUTE ON FUNCTION api.auth_verify() TO authenticated;

CREATE FUNCTION api.auth_recovery_password_set(password_hash text) RETURNS jsonb
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog'
    AS $$
declare
  me uuid := private.account_caller();
  current_session uuid := private.account_session();
begin
  if not private.password_hash_valid(auth_recovery_password_set.password_hash) then
    raise exception 'password_hash must be a bcrypt hash of cost 10 or more' using errcode = 'PT400', hint = 'invalid_password_hash';
  end if;
  delete from identity.recovery_sessions s
   where s.session_id = current_session and s.user_id = me and s.expires_at > now();
  if not found then
    raise exception 'Current password required when setting new password.' using errcode = 'PT400', hint = 'current_password_required';
  end if;
  update identity.users u set password_hash = auth_recovery_password_set.password_hash, updated_at = now() where u.id = me;
  -- As a password change: every other session ends; this one stays. Signed storage URLs end.
  update identity.refresh_tokens r set revoked_at = now(), revoked_reason = 'logout'
   where r.user_id = me and r.revoked_at is null and r.session_id <> current_session;
  perform private.storage_signed_urls_end(me);
  return private.auth_user_object(me);
end;
$$;

COMMENT ON FUNCTION api.auth_recovery_password_set(password_hash text) IS 'PUT /auth/v1/user {password} without the current password: allowed once, within the hour, in a session a recovery link started (api.auth_recovery_verify); sets the bcrypt hash the gateway made and ends every other session and every signed storage URL. PT400 current_password_required in any other session; PT400 invalid_password_hash.';
GRANT EXECUTE ON FUNCTION api.auth_recovery_password_set(password_hash text) TO authenticated;

CREATE FUNCTION api.auth_recovery_verify(token text, user_agent text DEFAULT NULL::text, client_ip text DEFAULT NULL::text) RETURNS TABLE(user_id uuid, email text, refresh_token text, session_id uuid)
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog'
    AS $$
declare
  link identity.password_tokens := private.password_link(auth_recovery_verify.token, true);
  started record;
begin
  update identity.password_tokens t set used_at = now() where t.user_id = link.user_id and t.used_at is null;
  -- Whoever held the account before holds nothing of it now (as a set-password link does).
  perform private.end_credentials(link.user_id);
  -- The person has claimed the account: the agent that created it no longer owns it; it joins what it was handed to.
  perform private.agent_member_claim(link.user_id);
  select * into started from private.start_session(link.user_id, auth_recovery_verify.user_agent, auth_recovery_verify.client_ip);
  delete from identity.recovery_sessions s where s.user_id = link.user_id;
  insert into identity.recovery_sessions (session_id, user_id, expires_at) values (started.session_id, link.user_id, now() + interval '1 hour');
  return query select u.id, u.email, started.refresh_token, started.session_id from identity.users u where u.id = link.user_id;
end;
$$;

COMMENT ON FUNCTION api.auth_recovery_verify(token text, user_agent text, client_ip text) IS 'POST /auth/v1/verify type=recovery: the token of a set-password link (POST /api/auth/recover, /auth/v1/recover) signs its account in: the link is used up, every credential of the account ends (as a set-password link does), and a new session may set the password without the current one within the hour (api.auth_recovery_password_set). PT400 invalid_link.';
GRANT EXECUTE ON FUNCTION api.auth_recovery_verify(token text, user_agent text, client_ip text) TO anon;
GRANT EXECUTE ON FUNCTION api.auth_recovery_verify(token text, user_agent text, client_ip text) TO authenticated;

CREATE FUNCTION api.auth_refresh(refresh_token text, user_agent text DEFAULT NULL::text, client_ip text DEFAULT NULL::text) RETURNS SETOF api.auth_refresh_result
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog'
    AS $$
declare
  presented identity.refresh_tokens;
  next_token text := identity.new_token();
begin
  select * into presented
    from identity.refresh_tokens t
    where t.token_hash = identity.token_hash(auth_refresh.refresh_token)
    for update;

  if presented.id is null then
    return query select 'invalid'::text, null::uuid, null::text, null::text, null::uuid;
    return;
  end if;

  if presented.revoked_at is not null then
    if presented.revoked_reason = 'rotated' then
      update identity.refresh_tokens t
        set revoked_at = now(), revoked_reason = 'reused'
        where t.session_id = presented.session_id and t.revoked_at is null;
      return query select 'reused'::text, null::uuid, null::text, null::text, null::uuid;
    else
      return query select 'revoked'::text, null::uuid, null::text, null::text, null::uuid;
    end if;
    return;
  end if;

  if presented.expires_at <= now() then
    return query select 'expired'::text, null::uuid, null::text, null::text, null::uuid;
    return;
  end if;

  update identity.refresh_tokens t
    set revoked_at = now(), revoked_reason = 'rotated'
    where t.id = presented.id;
  insert into identity.refresh_tokens (token_hash, user_id, session_id, parent_id, expires_at, user_agent, ip)
    values (identity.token_hash(next_token), presented.user_id, presented.session_id, presented.id,
            now() + interval '30 days', left(auth_refresh.user_agent, 512), left(auth_refresh.client_ip, 100));

  return query
    select 'ok'::text, u.id, u.email, next_token, presented.session_id
      from identity.users u where u.id = presented.user_id;
end;
$$;

COMMENT ON FUNCTION api.auth_refresh(refresh_token text, user_agent text, client_ip text) IS 'POST /api/auth/refresh: rotates a refresh token (the new one records user_agent and client_ip, shown in the owner''s list of sessions). Status ok, invalid, expired, revoked, or reused (the family is then revoked).';
GRANT EXECUTE ON FUNCTION api.auth_refresh(refresh_token text, user_agent text, client_ip text) TO anon;
GRANT EXECUTE ON FUNCTION api.auth_refresh(refresh_token text, user_agent text, client_ip text) TO authenticated;

CREATE FUNCTION api.auth_user() RETURNS jsonb
    LANGUAGE plpgsql STABLE SECURITY DEFINER
    SET search_path TO 'pg_catalog'
    AS $$
declare
  me uuid := auth.uid();
  found_user jsonb;
begin
  select private.auth_user_object(u.id) into found_user from identity.users u where u.id = me;
  if found_user is null then
    raise exception 'token does not belong to an existing user' using errcode = 'PT401', hint = 'invalid_token';
  end if;
  return found_user;
end;
$$;
COMMENT ON FUNCTION api.auth_user() IS 'GET /auth/v1/user: the caller as Supabase Auth''s User object (private.auth_user_object). PT401 invalid_token if the account no longer exists.';
GRANT EXECUTE ON FUNCTION api.auth_user() TO authenticated;

CREATE FUNCTION api.auth_user_metadata_update(data jsonb) RETURNS jsonb
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog'
    AS $$
declare
  me uuid := private.account_caller();
begin
  perform private.user_metadata_merge(me, auth_user_metadata_update.data);
  return private.auth_user_object(me);
end;
$$;

COMMENT ON FUNCTION api.auth_user_metadata_update(data jsonb) IS 'PUT /auth/v1/user {data}: merges data into the caller''s user_metadata as Supabase Auth does (a key set to null is removed; at most 16 KB, else PT422 validation_error) and answers the User object. Only the access token of a sign-in (private.account_caller: PT403 forbidden for an API token or an agent).';
GRANT EXECUTE ON FUNCTION api.auth_user_metadata_update(data jsonb) TO authenticated;

CREATE FUNCTION api.auth_user_update(password_proof text, email_proof text, password_hash text, new_email text, public_url text, data jsonb) RETURNS jsonb
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog'
    AS $$
begin
  -- One transaction: every change or none (a refusal of any undoes the others).
  -- The e-mail change first: a password change consumes every proof of the account.
  if auth_user_update.new_email is not null then
    perform api.account_email_change(auth_user_update.email_proof, auth_user_update.new_email, auth_user_update.public_url);
  end if;
  if auth_user_update.password_hash is not null then
    if auth_user_update.password_proof is null then
      perform api.auth_recovery_password_set(auth_user_update.password_hash);
    else
      perform api.account_password_change(auth_user_update.password_proof, auth_user_update.password_hash);
    end if;
  end if;
  return api.auth_user_metadata_update(coalesce(auth_user_update.data, '{}'::jsonb));
end;
$$;

COMMENT ON FUNCTION api.auth_user_update(password_proof text, email_proof text, password_hash text, new_email text, public_url text, data jsonb) IS 'PUT /auth/v1/user: every change at once or none, in one transaction, each by the account''s own rules: new_email as api.account_email_change (with email_proof), password_hash as api.account_password_change (with password_proof) or, without a proof, api.auth_recovery_password_set (a recovery session), then data merged as api.auth_user_metadata_update; answers the User object. Their refusals (PT401 invalid_credentials, PT400 current_password_required, PT422, PT429 rate_limited) undo every change.';
GRANT EXECUTE ON FUNCTION api.auth_user_update(password_proof text, email_proof text, password_hash text, new_email text, public_url text, data jsonb) TO authenticated;

CREATE FUNCTION api.auth_guest_sign_in(client_ip text, max_per_ip integer, window_seconds integer, user_agent text DEFAULT NULL::text, data jsonb DEFAULT NULL::jsonb) RETURNS TABLE(status text, retry_after integer, user_id uuid, email text, refresh_token text, session_id uuid)
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog'
    AS $$
declare
  wait integer;
  guest uuid;
  new_node uuid;
  started record;
begin
  if client_ip is not null then
    -- Sign-ins of one address take turns, so a burst cannot slip past the count.
    perform pg_advisory_xact_lock(hashtextextended('auth_failures:guest:' || client_ip, 0));
    wait := private.auth_throttle_wait('guest', client_ip, max_per_ip, window_seconds);
    if wait > 0 then
      return query select 'throttled'::text, wait, null::uuid, null::text, null::text, null::uuid;
      return;
    end if;
    perform private.auth_throttle_record('guest', client_ip);
  end if;
  insert into identity.users (email, password_hash, is_anonymous) values (null, null, true) returning id into guest;
  insert into app.nodes (kind) values ('user') returning id into new_node;
  -- A derived (private) name until the guest chooses one.
  insert into app.profiles (id, name, name_source, node_id) values (guest, 'guest', 'email', new_node);
  if auth_guest_sign_in.data is not null then
    perform private.user_metadata_merge(guest, auth_guest_sign_in.data);
  end if;
  select * into started from private.start_session(guest, auth_guest_sign_in.user_agent, auth_guest_sign_in.client_ip);
  return query select 'ok'::text, 0, guest, null::text, started.refresh_token, started.session_id;
end;
$$;

COMMENT ON FUNCTION api.auth_guest_sign_in(client_ip text, max_per_ip integer, window_seconds integer, user_agent text, data jsonb) IS 'POST /auth/v1/signup without e-mail (supabase-js signInAnonymously): a new guest (identity.users.is_anonymous: no e-mail, no password; a profile with a private derived name; data merged into user_metadata) and its session. Counted per client address: status throttled (retry_after seconds) past max_per_ip sign-ins in window_seconds, else ok.';
GRANT EXECUTE ON FUNCTION api.auth_guest_sign_in(client_ip text, max_per_ip integer, window_seconds integer, user_agent text, data jsonb) TO anon;
GRANT EXECUTE ON FUNCTION api.auth_guest_sign_in(client_ip text, max_per_ip integer, window_seconds integer, user_agent text, data jsonb) TO authenticated;

CREATE FUNCTION api.auth_guest_convert(email text, password_hash text, data jsonb DEFAULT NULL::jsonb) RETURNS jsonb
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog'
    AS $$
declare
  me uuid := private.account_caller();
  normalised text;
begin
  perform from identity.users u where u.id = me and u.is_anonymous for update;
  if not found then
    raise exception 'only a guest account is converted' using errcode = 'PT403', hint = 'forbidden';
  end if;
  if not private.password_hash_valid(auth_guest_convert.password_hash) then
    raise exception 'password_hash must be a bcrypt hash of cost 10 or more' using errcode = 'PT400', hint = 'invalid_password_hash';
  end if;
  normalised := private.account_email_check(auth_guest_convert.email);
  begin
    update identity.users u
       set email = normalised, password_hash = auth_guest_convert.password_hash, is_anonymous = false, updated_at = now()
     where u.id = me;
  exception when unique_violation then
    raise exception 'an account with this email already exists' using errcode = 'PT409', hint = 'email_taken';
  end;
  update app.profiles p set name = split_part(normalised, '@', 1) where p.id = me and p.name_source = 'email';
  if auth_guest_convert.data is not null then
    perform private.user_metadata_merge(me, auth_guest_convert.data);
  end if;
  return private.auth_user_object(me);
end;
$$;

COMMENT ON FUNCTION api.auth_guest_convert(email text, password_hash text, data jsonb) IS 'PUT /auth/v1/user {email, password} of a guest (supabase-js updateUser): the guest becomes a full account with this e-mail and the bcrypt hash the gateway made of the password, keeping its id and everything it made (its derived name follows the address; data merged into user_metadata); answers the User object. PT403 forbidden for a caller that is not a guest (or an API token); PT400 invalid_email, invalid_password_hash; PT409 email_taken.';
GRANT EXECUTE ON FUNCTION api.auth_guest_convert(email text, password_hash text, data jsonb) TO authenticated;

-- =============================================================================
-- Helpers (private, app, identity): internal helpers and trigger functions; request roles run only those granted here
-- =============================================================================

CREATE FUNCTION private.create_account_with_hash(email text, password_hash text, name text DEFAULT NULL::text) RETURNS uuid
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog'
    AS $_$
#variable_conflict use_column
declare
  normalised_email text := lower(btrim(create_account_with_hash.email));
  chosen_name text := nullif(btrim(create_account_with_hash.name), '');
  new_user_id uuid;
  new_node_id uuid;
begin
  if normalised_email is null or normalised_email !~ '^[^@\s]+@[^@\s]+$' then
    raise exception 'invalid email address' using errcode = 'PT400', hint = 'invalid_email';
  end if;
  if create_account_with_hash.password_hash is not null
     and not private.password_hash_valid(create_account_with_hash.password_hash) then
    raise exception 'password_hash must be a bcrypt hash of cost 10 or more' using errcode = 'PT400', hint = 'invalid_password_hash';
  end if;
  if chosen_name is not null and length(chosen_name) > 200 then
    raise exception 'name must be at most 200 characters' using errcode = 'PT400', hint = 'invalid_name';
  end if;

  insert into identity.users (email, password_hash)
    values (normalised_email, create_account_with_hash.password_hash)
    on conflict (email) do nothing
    returning id into new_user_id;
  if new_user_id is null then
    raise exception 'an account with this email already exists' using errcode = 'PT409', hint = 'email_taken';
  end if;

  insert into app.nodes (kind) values ('user') returning id into new_node_id;
  insert into app.profiles (id, name, name_source, node_id)
    values (new_user_id,
            coalesce(chosen_name, split_part(normalised_email, '@', 1)),
            case when chosen_name is null then 'email' else 'chosen' end,
            new_node_id);
  return new_user_id;
end;
$_$;

COMMENT ON FUNCTION private.create_account_with_hash(email text, password_hash text, name text) IS 'Creates a user (a bcrypt hash made by the process, or no password when null), their node and profile. Without a name the name is derived from the e-mail (name_source email, private). PT400 invalid_email / invalid_password_hash / invalid_name; PT409 when the e-mail is taken.';


CREATE FUNCTION private.password_hash_valid(password_hash text) RETURNS boolean
    LANGUAGE sql IMMUTABLE
    AS $_$
    select coalesce(password_hash OPERATOR(pg_catalog.~) '^\$2[aby]\$(1[0-9]|2[0-9]|3[01])\$[./A-Za-z0-9]{53}$', false)
  $_$;

COMMENT ON FUNCTION private.password_hash_valid(password_hash text) IS 'True for a bcrypt hash ($2a$/$2b$/$2y$) of cost 10 to 31: what account creation and set-password accept.';


CREATE FUNCTION private.auth_throttle_wait(scope text, key text, max_failures integer, window_seconds integer) RETURNS integer
    LANGUAGE plpgsql STABLE SECURITY DEFINER
    SET search_path TO 'pg_catalog'
    AS $$
declare
  failures bigint;
  oldest timestamptz;
begin
  select count(*), min(f.failed_at) into failures, oldest
    from private.auth_failures f
   where f.scope = auth_throttle_wait.scope
     and f.key = auth_throttle_wait.key
     and f.failed_at > now() - make_interval(secs => window_seconds);
  if failures < max_failures then
    return 0;
  end if;
  return greatest(1, ceil(extract(epoch from oldest + make_interval(secs => window_seconds) - now())))::integer;
end;
$$;

COMMENT ON FUNCTION private.auth_throttle_wait(scope text, key text, max_failures integer, window_seconds integer) IS 'Seconds until `key` may try again (0: now): it has max_failures failures of `scope` within the window (1 when max_failures is 0 or less and there are none).';


CREATE FUNCTION private.auth_throttle_record(scope text, key text) RETURNS void
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog'
    AS $$
begin
  -- Old failures are deleted by private.auth_failures_prune (the worker's crontab).
  insert into private.auth_failures (scope, key) values (auth_throttle_record.scope, auth_throttle_record.key);
end;
$$;

COMMENT ON FUNCTION private.auth_throttle_record(scope text, key text) IS 'Counts one failure of `scope` for `key`.';


CREATE FUNCTION private.auth_failures_prune(batch integer DEFAULT 10000) RETURNS integer
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog'
    AS $$
declare
  gone integer;
begin
  -- LOGIN_FAILURE_WINDOW_SECONDS is at most a day: older failures count nowhere.
  delete from private.auth_failures f
   where f.ctid = any (array(select a.ctid from private.auth_failures a
                              where a.failed_at < now() - interval '1 day'
                              limit auth_failures_prune.batch));
  get diagnostics gone = row_count;
  return gone;
end;
$$;

COMMENT ON FUNCTION private.auth_failures_prune(batch integer) IS 'Deletes failed sign-in counts older than any throttling window (a day), at most `batch` a call; returns how many. The worker runs it every 10 minutes.';


CREATE FUNCTION identity.token_hash(token text) RETURNS bytea
    LANGUAGE sql IMMUTABLE STRICT
    AS $$
    select extensions.digest(token, 'sha256')
  $$;



CREATE FUNCTION private.auth_user_object(user_id uuid) RETURNS jsonb
    LANGUAGE sql STABLE
    SET search_path TO 'pg_catalog'
    AS $$
    select case when u.is_anonymous then
             -- A guest as Supabase Auth answers one: no address, no identity, no provider.
             jsonb_build_object(
               'id', u.id, 'aud', 'authenticated', 'role', 'authenticated', 'email', '', 'phone', '',
               'last_sign_in_at', app.iso(s.last_sign_in_at), 'app_metadata', u.app_metadata,
               'user_metadata', u.user_metadata, 'identities', '[]'::jsonb,
               'created_at', app.iso(u.created_at), 'updated_at', app.iso(u.updated_at), 'is_anonymous', true)
           else
           jsonb_build_object(
             'id', u.id, 'aud', 'authenticated', 'role', 'authenticated', 'email', u.email, 'phone', '',
             'email_confirmed_at', app.iso(u.created_at), 'confirmed_at', app.iso(u.created_at),
             'last_sign_in_at', app.iso(s.last_sign_in_at),
             'app_metadata', u.app_metadata || jsonb_build_object('provider', 'email', 'providers', jsonb_build_array('email')),
             'user_metadata', u.user_metadata,
             'identities', jsonb_build_array(jsonb_build_object(
               'identity_id', u.id, 'id', u.id, 'user_id', u.id, 'provider', 'email', 'email', u.email,
               'identity_data', jsonb_build_object('sub', u.id, 'email', u.email, 'email_verified', true, 'phone_verified', false),
               'last_sign_in_at', app.iso(s.last_sign_in_at), 'created_at', app.iso(u.created_at), 'updated_at', app.iso(u.updated_at))),
             'created_at', app.iso(u.created_at), 'updated_at', app.iso(u.updated_at), 'is_anonymous', false)
        || coalesce((select jsonb_build_object('new_email', l.new_email, 'email_change_sent_at', app.iso(l.created_at))
                       from identity.account_links l
                      where l.user_id = u.id and l.purpose = 'email_change' and l.used_at is null and l.expires_at > now()
                      order by l.created_at desc limit 1), '{}'::jsonb)
           end
      from identity.users u
      cross join lateral (select max(r.created_at) as last_sign_in_at from identity.refresh_tokens r
                           where r.user_id = u.id and r.parent_id is null) s
     where u.id = auth_user_object.user_id
  $$;

COMMENT ON FUNCTION private.auth_user_object(user_id uuid) IS 'A user as Supabase Auth''s User object: id, aud, role, email, email_confirmed_at (the account''s creation: sign-up needs no confirmation here), last_sign_in_at (its latest sign-in), app_metadata (the operators'' keys, and provider email), user_metadata, one email identity, created_at, updated_at, is_anonymous false; new_email and email_change_sent_at while an e-mail change waits for its link. A guest (is_anonymous) as Supabase Auth answers one: email empty, no confirmation times, no identity, app_metadata only the operators'' keys (no provider), is_anonymous true.';


CREATE FUNCTION private.access_token_claims(user_id uuid) RETURNS jsonb
    LANGUAGE sql STABLE
    SET search_path TO 'pg_catalog'
    AS $$
    select jsonb_build_object(
             'app_metadata', case when u.is_anonymous then u.app_metadata
                                  else u.app_metadata || jsonb_build_object('provider', 'email', 'providers', jsonb_build_array('email')) end,
             'user_metadata', u.user_metadata,
             'is_anonymous', u.is_anonymous)
      from identity.users u
     where u.id = access_token_claims.user_id
  $$;

COMMENT ON FUNCTION private.access_token_claims(user_id uuid) IS 'The claims of a user''s access token besides those of its session (sub, email, session_id): app_metadata, user_metadata and is_anonymous (true for a guest) as Supabase Auth carries them, the same as the User object (private.auth_user_object). Read by the processes when they sign a token (gateway/auth/sessions.ts); what is added to every access token is added here.';


CREATE FUNCTION private.app_metadata() RETURNS jsonb
    LANGUAGE sql STABLE SECURITY DEFINER
    SET search_path TO 'pg_catalog'
    AS $$
    select coalesce(auth.jwt() -> 'app_metadata',
                    (select u.app_metadata from identity.users u where u.id = auth.uid()),
                    '{}'::jsonb)
  $$;

COMMENT ON FUNCTION private.app_metadata() IS 'The caller''s app_metadata, for rules and policies: as its access token carries it (claim app_metadata, as signed when the token was issued), or the account''s own for a credential that carries none (an API token, an OAuth token on /mcp); {} for anon.';
GRANT EXECUTE ON FUNCTION private.app_metadata() TO anon;
GRANT EXECUTE ON FUNCTION private.app_metadata() TO authenticated;


CREATE FUNCTION private.password_link(token text, for_update boolean DEFAULT false) RETURNS identity.password_tokens
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog'
    AS $$
declare
  link identity.password_tokens;
begin
  if for_update then
    select * into link from identity.password_tokens t where t.token_hash = identity.token_hash(password_link.token) for update;
  else
    select * into link from identity.password_tokens t where t.token_hash = identity.token_hash(password_link.token);
  end if;
  if link.id is null or link.used_at is not null or link.expires_at <= now() then
    raise exception 'this link is not valid or has expired' using errcode = 'PT400', hint = 'invalid_link';
  end if;
  return link;
end;
$$;

COMMENT ON FUNCTION private.password_link(token text, for_update boolean) IS 'The set-password link of a token while it is usable (not used, replaced or expired), locked when for_update; PT400 invalid_link otherwise.';


CREATE FUNCTION private.end_credentials(user_id uuid) RETURNS void
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog'
    AS $$
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
  perform private.storage_signed_urls_end(end_credentials.user_id);
end;
$$;

COMMENT ON FUNCTION private.end_credentials(user_id uuid) IS 'Ends every credential of a user: sessions, API tokens, OAuth tokens and pending codes, MCP sessions, the calendar feed URL, signed storage URLs (a password set through a set-password link calls it; a re-hash at sign-in does not).';


CREATE FUNCTION private.start_session(user_id uuid, user_agent text DEFAULT NULL::text, client_ip text DEFAULT NULL::text) RETURNS TABLE(refresh_token text, session_id uuid)
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog'
    AS $$
declare
  token text := identity.new_token();
  new_session uuid := gen_random_uuid();
begin
  insert into identity.refresh_tokens (token_hash, user_id, session_id, expires_at, user_agent, ip)
    values (identity.token_hash(token), start_session.user_id, new_session, now() + interval '30 days',
            left(start_session.user_agent, 512), left(start_session.client_ip, 100));
  return query select token, new_session;
end;
$$;

COMMENT ON FUNCTION private.start_session(user_id uuid, user_agent text, client_ip text) IS 'Starts a session (a refresh-token family) for the user: its first refresh token, valid 30 days, with the User-Agent and client address of the sign-in (shown in the owner''s list of sessions).';


CREATE FUNCTION identity.new_token() RETURNS text
    LANGUAGE sql
    AS $$
    select pg_catalog.rtrim(pg_catalog.translate(pg_catalog.encode(extensions.gen_random_bytes(32), 'base64'), '+/', '-_'), '=')
  $$;


CREATE FUNCTION private.metadata_merged(current_value jsonb, data jsonb, what text) RETURNS jsonb
    LANGUAGE plpgsql IMMUTABLE
    SET search_path TO 'pg_catalog'
    AS $$
declare
  merged jsonb;
begin
  if jsonb_typeof(metadata_merged.data) is distinct from 'object' then
    raise exception 'data must be a JSON object' using errcode = 'PT422', hint = 'validation_error';
  end if;
  -- Supabase Auth's merge: each key given replaces its value; a key given as null is removed.
  merged := (select coalesce(jsonb_object_agg(e.key, e.value), '{}'::jsonb)
               from jsonb_each(coalesce(metadata_merged.current_value, '{}'::jsonb) || metadata_merged.data) e
              where e.value <> 'null'::jsonb);
  if octet_length(merged::text) > 16384 then
    raise exception '% may hold at most 16 KB', metadata_merged.what using errcode = 'PT422', hint = 'validation_error';
  end if;
  return merged;
end;
$$;

COMMENT ON FUNCTION private.metadata_merged(current_value jsonb, data jsonb, what text) IS 'current_value with data merged as Supabase Auth merges user_metadata and app_metadata: each key given replaces its value, a key given as null is removed; at most 16 KB (else PT422 validation_error naming what); data not an object: PT422.';


CREATE FUNCTION private.user_metadata_merge(user_id uuid, data jsonb) RETURNS void
    LANGUAGE sql
    SET search_path TO 'pg_catalog'
    AS $$
    update identity.users u
       set user_metadata = private.metadata_merged(u.user_metadata, user_metadata_merge.data, 'user_metadata'), updated_at = now()
     where u.id = user_metadata_merge.user_id
  $$;

COMMENT ON FUNCTION private.user_metadata_merge(user_id uuid, data jsonb) IS 'Merges data into a user''s user_metadata (private.metadata_merged: PT422 validation_error for more than 16 KB or data not an object). The one merge of PUT /auth/v1/user and the admin user functions.';


CREATE FUNCTION private.tg_users__storage_purge() RETURNS trigger
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog'
    AS $$
begin
  perform private.storage_purge_enqueue('user', old.id);
  return null;
end;
$$;
COMMENT ON FUNCTION private.tg_users__storage_purge() IS 'Trigger: an account deleted, the objects of its storage folder are deleted by a storage_purge job.';


CREATE FUNCTION private.tg_refresh_tokens__notify_session_ended() RETURNS trigger
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog'
    AS $$
-- new_rows is the statement's transition table (see the trigger below).
-- @plpgsql_check_options: newtable = new_rows
begin
  perform pg_notify('session_ended', s.session_id::text)
     from (select distinct n.session_id from new_rows n where n.revoked_reason in ('logout', 'reused')) s;
  return null;
end;
$$;
COMMENT ON FUNCTION private.tg_refresh_tokens__notify_session_ended() IS 'Trigger: NOTIFY session_ended with the id of every session a statement ended (logout or reuse).';


CREATE FUNCTION identity.hash_password(password text) RETURNS text
    LANGUAGE sql STRICT
    SET search_path TO 'pg_catalog'
    AS $$
    select extensions.crypt(
      encode(extensions.digest(password, 'sha256'), 'base64'),
      extensions.gen_salt('bf', 10)
    )
  $$;

COMMENT ON FUNCTION identity.hash_password(password text) IS 'bcrypt (cost 10) of the SHA-256 of the password.';


CREATE FUNCTION private.account_email_check(email text) RETURNS text
    LANGUAGE plpgsql STABLE
    SET search_path TO 'pg_catalog'
    AS $_$
declare
  normalised text := lower(btrim(account_email_check.email));
begin
  if normalised is null or normalised !~ '^[^@\s]+@[^@\s]+$' then
    raise exception 'invalid email address' using errcode = 'PT400', hint = 'invalid_email';
  end if;
  if exists (select from identity.users u where u.email = normalised) then
    raise exception 'an account with this email already exists' using errcode = 'PT409', hint = 'email_taken';
  end if;
  return normalised;
end;
$_$;

COMMENT ON FUNCTION private.account_email_check(email text) IS 'The normalised e-mail of a new account: PT400 invalid_email, PT409 email_taken (the same refusals as private.create_account_with_hash).';


CREATE FUNCTION private.auth_login_finish(attempt text, matched boolean, new_hash text, user_agent text DEFAULT NULL::text, client_ip text DEFAULT NULL::text) RETURNS TABLE(status text, user_id uuid, user_email text, refresh_token text, session_id uuid)
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog'
    AS $$
declare
  checked record;
begin
  select * into strict checked from private.password_attempt_finish('login', attempt, matched, new_hash);
  if checked.status <> 'ok' then
    -- Not raised: a failure must be counted, so this transaction commits.
    return query select checked.status, null::uuid, null::text, null::text, null::uuid;
    return;
  end if;
  return query
    select 'ok'::text, u.id, u.email, s.refresh_token, s.session_id
      from identity.users u
     cross join lateral private.start_session(u.id, auth_login_finish.user_agent, auth_login_finish.client_ip) s
     where u.id = checked.user_id;
end;
$$;

COMMENT ON FUNCTION private.auth_login_finish(attempt text, matched boolean, new_hash text, user_agent text, client_ip text) IS 'POST /api/auth/login, after the gateway compared the password with the hash of private.password_attempt_start: status ok (a session: refresh_token, session_id; user_agent and client_ip are recorded with it), invalid (counted) or expired.';


CREATE FUNCTION private.check_session(session_id uuid) RETURNS boolean
    LANGUAGE plpgsql STABLE SECURITY DEFINER
    SET search_path TO 'pg_catalog'
    AS $$
begin
  if private.session_ended(check_session.session_id) then
    raise exception 'the session of this access token has ended' using errcode = 'PT401', hint = 'session_ended';
  end if;
  return true;
end;
$$;

COMMENT ON FUNCTION private.check_session(session_id uuid) IS 'True unless the session (an access token''s session_id claim) was ended by logout or refresh-token reuse: then PT401 (hint session_ended). Null (no session): true.';
GRANT EXECUTE ON FUNCTION private.check_session(session_id uuid) TO anon;
GRANT EXECUTE ON FUNCTION private.check_session(session_id uuid) TO authenticated;
GRANT EXECUTE ON FUNCTION private.check_session(session_id uuid) TO service_role;

CREATE FUNCTION private.create_account(email text, password text, name text DEFAULT NULL::text) RETURNS uuid
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog'
    AS $$
begin
  if create_account.password is not null and length(create_account.password) < 8 then
    raise exception 'password must be at least 8 characters' using errcode = 'PT400', hint = 'weak_password';
  end if;
  return private.create_account_with_hash(
    create_account.email,
    case when create_account.password is not null then identity.hash_password(create_account.password) end,
    create_account.name);
end;
$$;

COMMENT ON FUNCTION private.create_account(email text, password text, name text) IS 'Creates a user with a clear password hashed here with pgcrypto (operators: admin.create_user), or none when null; otherwise as private.create_account_with_hash. PT400 weak_password under 8 characters.';


CREATE FUNCTION private.password_attempt_finish(door text, attempt text, matched boolean, new_hash text) RETURNS TABLE(status text, user_id uuid)
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog'
    AS $$
declare
  a private.password_attempts;
  client_key text;
  account identity.users;
begin
  delete from private.password_attempts p
   where p.attempt_hash = identity.token_hash(password_attempt_finish.attempt) and p.door = password_attempt_finish.door
  returning p.* into a;
  if a.attempt_hash is null then
    return query select 'expired'::text, null::uuid;
    return;
  end if;
  client_key := a.email_key || ' ' || coalesce(a.client_ip, 'unknown');
  if matched then
    -- The account still has the hash that was checked (a password set in
    -- between makes this attempt fail).
    select u.* into account from identity.users u
     where u.id = a.user_id and extensions.digest(u.password_hash, 'sha256') = a.hash_digest
     for update;
  end if;
  if account.id is null then
    perform private.auth_throttle_record('email_client', client_key);
    perform private.auth_throttle_record('email', a.email_key);
    if a.client_ip is not null then
      perform private.auth_throttle_record('ip', a.client_ip);
    end if;
    return query select 'invalid'::text, null::uuid;
    return;
  end if;
  if a.expires_at <= now() then
    return query select 'expired'::text, null::uuid;
    return;
  end if;

  delete from private.auth_failures f where f.scope = 'email_client' and f.key = client_key;
  if new_hash is not null and private.password_hash_valid(new_hash)
     and private.password_hash_cost(new_hash) > private.password_hash_cost(account.password_hash) then
    update identity.users u set password_hash = new_hash where u.id = account.id;
  end if;
  return query select 'ok'::text, account.id;
end;
$$;

COMMENT ON FUNCTION private.password_attempt_finish(door text, attempt text, matched boolean, new_hash text) IS 'Second half of a sign-in: consumes the attempt and records whether the process found the password right. status ok (user_id; the failures of that e-mail from that client are cleared; new_hash, a bcrypt hash of a higher cost, replaces the stored one), invalid (counted per e-mail and client, per e-mail and per client address; also when the account''s password changed since the start) or expired (the attempt is unknown, used, or older than 60 seconds).';


CREATE FUNCTION private.password_attempt_start(door text, email text, client_ip text, bcrypt_cost integer, max_failures_per_email_client integer, max_failures_per_email integer, max_failures_per_ip integer, window_seconds integer) RETURNS TABLE(status text, retry_after integer, attempt text, password_hash text, rehash boolean)
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog'
    AS $$
declare
  email_key text := lower(btrim(coalesce(password_attempt_start.email, '')));
  wait integer;
  account_id uuid;
  account_hash text;
  new_attempt text := identity.new_token();
begin
  if door not in ('login', 'oauth_consent', 'reauthenticate') then
    raise exception 'unknown door %', door using errcode = 'PT400', hint = 'invalid_door';
  end if;
  -- Attempts for one e-mail take turns, so a burst cannot slip past the count.
  perform pg_advisory_xact_lock(hashtextextended('auth_failures:email:' || email_key, 0));
  wait := private.sign_in_wait(email_key, client_ip, max_failures_per_email_client, max_failures_per_email,
                               max_failures_per_ip, window_seconds);
  if wait > 0 then
    return query select 'throttled'::text, wait, null::text, null::text, false;
    return;
  end if;

  select u.id, u.password_hash into account_id, account_hash
    from identity.users u where u.email = email_key and u.password_hash is not null;
  insert into private.password_attempts (attempt_hash, door, email_key, client_ip, user_id, hash_digest, expires_at)
    values (identity.token_hash(new_attempt), door, email_key, client_ip, account_id,
            extensions.digest(account_hash, 'sha256'), now() + interval '60 seconds');
  -- Now and then, forget attempts no process finished (a process that stopped).
  if random() < 0.01 then
    delete from private.password_attempts a where a.expires_at < now() - interval '1 hour';
  end if;
  return query
    select 'check'::text, 0, new_attempt,
           coalesce(account_hash, private.password_dummy_hash(bcrypt_cost)),
           coalesce(private.password_hash_cost(account_hash) < bcrypt_cost, false);
end;
$$;

COMMENT ON FUNCTION private.password_attempt_start(door text, email text, client_ip text, bcrypt_cost integer, max_failures_per_email_client integer, max_failures_per_email integer, max_failures_per_ip integer, window_seconds integer) IS 'First half of a sign-in (door login or oauth_consent; reauthenticate: a signed-in user''s password check, private.reauthenticate_start), run by the processes'' own role: status throttled (retry_after seconds; nothing to check) or check: the hash to compare the password with (the account''s, or a dummy at bcrypt_cost for an unknown e-mail), whether to re-hash it (its cost is below bcrypt_cost), and the single-use attempt to finish with.';


CREATE FUNCTION private.password_dummy_hash(bcrypt_cost integer) RETURNS text
    LANGUAGE sql IMMUTABLE
    AS $_$
    select '$2a$' OPERATOR(pg_catalog.||) pg_catalog.lpad(greatest(10, least(31, bcrypt_cost))::pg_catalog.text, 2, '0')
           OPERATOR(pg_catalog.||) '$' OPERATOR(pg_catalog.||) 'CwTycUXWue0Thq9StjUM0uJ8.ly9B7Ys2t6MfmbsV8RnQEh8EPLAa'
  $_$;

COMMENT ON FUNCTION private.password_dummy_hash(bcrypt_cost integer) IS 'The fixed bcrypt hash an unknown e-mail (or an account without a password) is compared against, at the given cost (10 to 31).';


CREATE FUNCTION private.password_hash_cost(password_hash text) RETURNS integer
    LANGUAGE sql IMMUTABLE
    AS $_$
    select (pg_catalog.regexp_match(password_hash, '^\$2[abxy]\$(\d\d)\$'))[1]::pg_catalog.int4
  $_$;

COMMENT ON FUNCTION private.password_hash_cost(password_hash text) IS 'The cost of a bcrypt hash; null when it is not one.';


CREATE FUNCTION private.password_set_start(door text, client_ip text, max_per_ip integer, window_seconds integer, email text DEFAULT NULL::text, link_token text DEFAULT NULL::text) RETURNS TABLE(status text, retry_after integer, error_state text, error_hint text, error_message text)
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog'
    AS $$
declare
  wait integer;
  refused_state text;
  refused_hint text;
  refused_message text;
begin
  if door not in ('register', 'set_password') then
    raise exception 'unknown door %', door using errcode = 'PT400', hint = 'invalid_door';
  end if;
  if client_ip is not null then
    -- Requests of one address take turns, so a burst cannot slip past the count.
    perform pg_advisory_xact_lock(hashtextextended('auth_failures:password_set:' || client_ip, 0));
    wait := private.auth_throttle_wait('password_set', client_ip, max_per_ip, window_seconds);
    if wait > 0 then
      return query select 'throttled'::text, wait, null::text, null::text, null::text;
      return;
    end if;
    perform private.auth_throttle_record('password_set', client_ip);
  end if;
  -- What can be checked without the password. A refusal is answered, not
  -- raised: the request stays counted.
  begin
    if door = 'register' then
      perform private.account_email_check(password_set_start.email);
    else
      perform private.password_link(password_set_start.link_token);
    end if;
  exception when sqlstate 'PT400' or sqlstate 'PT409' then
    get stacked diagnostics refused_state = returned_sqlstate, refused_hint = pg_exception_hint, refused_message = message_text;
    return query select 'refused'::text, 0, refused_state, refused_hint, refused_message;
    return;
  end;
  return query select 'hash'::text, 0, null::text, null::text, null::text;
end;
$$;

COMMENT ON FUNCTION private.password_set_start(door text, client_ip text, max_per_ip integer, window_seconds integer, email text, link_token text) IS 'First step of a door that sets a password (door register: POST /api/auth/register and /signup with email; set_password: POST /api/auth/set-password with link_token), before the process hashes it, run by the processes'' own role: counts the request per client address and answers status throttled (retry_after seconds: more than max_per_ip in window_seconds), refused (error_state, error_hint and error_message: what the door''s function would raise, invalid_email, email_taken or invalid_link) or hash.';


CREATE FUNCTION private.session_ended(session_id uuid) RETURNS boolean
    LANGUAGE plpgsql STABLE SECURITY DEFINER
    SET search_path TO 'pg_catalog'
    AS $$
begin
  return session_ended.session_id is not null and (
    exists (
      select from identity.refresh_tokens t
       where t.session_id = session_ended.session_id
         and t.revoked_reason in ('logout', 'reused'))
    or exists (
      select from app.api_tokens k
       where k.id = session_ended.session_id
         and (not k.active or k.expires_at <= now())));
end;
$$;

COMMENT ON FUNCTION private.session_ended(session_id uuid) IS 'Whether a credential has ended: a session (an access token''s session_id claim) ended by logout or refresh-token reuse, or an API token (its id) deactivated or expired. Null: false. PL/pgSQL so that its plans are kept (a SQL function is planned on every call before PostgreSQL 18).';


CREATE FUNCTION private.sessions_ended(session_ids uuid[]) RETURNS SETOF uuid
    LANGUAGE sql STABLE SECURITY DEFINER
    SET search_path TO 'pg_catalog'
    AS $$
    select distinct t.session_id
      from identity.refresh_tokens t
     where t.session_id = any (sessions_ended.session_ids)
       and t.revoked_reason in ('logout', 'reused')
    union
    select k.id
      from app.api_tokens k
     where k.id = any (sessions_ended.session_ids)
       and (not k.active or k.expires_at <= now())
  $$;

COMMENT ON FUNCTION private.sessions_ended(session_ids uuid[]) IS 'The credentials among session_ids that have ended: sessions ended by logout or refresh-token reuse, API tokens deactivated or expired.';


CREATE FUNCTION private.sessions_prune(batch integer DEFAULT 1000) RETURNS integer
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog'
    AS $$
declare
  gone integer;
begin
  -- A session (a refresh-token family) with no usable token left (every token
  -- rotated, revoked or expired) whose newest token is more than two days old:
  -- its access tokens (at most ACCESS_TOKEN_TTL, a day at most, after the
  -- newest refresh) have all expired, so nothing asks private.session_ended
  -- about it any more.
  with ended as (
    select t.session_id
      from identity.refresh_tokens t
     group by t.session_id
    having bool_and(t.revoked_at is not null or t.expires_at <= now())
       and max(t.created_at) < now() - interval '2 days'
     limit sessions_prune.batch)
  delete from identity.refresh_tokens t using ended e where t.session_id = e.session_id;
  get diagnostics gone = row_count;
  return gone;
end;
$$;

COMMENT ON FUNCTION private.sessions_prune(batch integer) IS 'Deletes the refresh tokens of ended sessions (no usable token, newest older than two days), at most `batch` sessions a call; returns how many tokens. The worker runs it hourly.';


CREATE FUNCTION private.sign_in_wait(email_key text, client_ip text, max_failures_per_email_client integer, max_failures_per_email integer, max_failures_per_ip integer, window_seconds integer) RETURNS integer
    LANGUAGE plpgsql STABLE
    SET search_path TO 'pg_catalog'
    AS $$
declare
  open_email integer;
  open_email_client integer;
  open_ip integer := 0;
begin
  select count(*), count(*) filter (where a.client_ip is not distinct from sign_in_wait.client_ip)
    into open_email, open_email_client
    from private.password_attempts a
   where a.email_key = sign_in_wait.email_key and a.expires_at > now();
  if client_ip is not null then
    select count(*) into open_ip from private.password_attempts a
     where a.client_ip = sign_in_wait.client_ip and a.expires_at > now();
  end if;
  return greatest(
    private.auth_throttle_wait('email_client', email_key || ' ' || coalesce(client_ip, 'unknown'),
                               max_failures_per_email_client - open_email_client, window_seconds),
    private.auth_throttle_wait('email', email_key, max_failures_per_email - open_email, window_seconds),
    case when client_ip is null then 0
         else private.auth_throttle_wait('ip', client_ip, max_failures_per_ip - open_ip, window_seconds) end);
end;
$$;

COMMENT ON FUNCTION private.sign_in_wait(email_key text, client_ip text, max_failures_per_email_client integer, max_failures_per_email integer, max_failures_per_ip integer, window_seconds integer) IS 'Seconds until a sign-in for this e-mail from this client may be checked (0: now): failed sign-ins within the window and attempts still being checked, per e-mail and client, per e-mail and per client address, against their limits.';


CREATE FUNCTION private.user_node_by_email(email text) RETURNS uuid
    LANGUAGE plpgsql STABLE
    SET search_path TO 'pg_catalog'
    AS $$
declare
  found_user uuid;
  found_node uuid;
begin
  select u.id, p.node_id into found_user, found_node
    from identity.users u
    left join app.profiles p on p.id = u.id
    where u.email = lower(btrim(user_node_by_email.email));
  if found_user is null then
    raise exception 'no user with email %', email using errcode = 'P0002';
  end if;
  if found_node is null then
    raise exception 'user % has no node', email using errcode = 'PT400', hint = 'user_has_no_node';
  end if;
  return found_node;
end;
$$;



CREATE FUNCTION private.require_full_account() RETURNS void
    LANGUAGE plpgsql STABLE SECURITY DEFINER
    SET search_path TO 'pg_catalog'
    AS $$
begin
  if exists (select from identity.users u where u.id = auth.uid() and u.is_anonymous) then
    raise exception 'a guest cannot do this: sign up with an e-mail address and a password first'
      using errcode = 'PT403', hint = 'forbidden';
  end if;
end;
$$;

COMMENT ON FUNCTION private.require_full_account() IS 'The one check of what a guest (identity.users.is_anonymous) may not do: PT403 forbidden when the caller is a guest; nothing otherwise (anon callers are refused by the rules themselves). Called by api.api_token_create and api.webhook_create (the OAuth consent form needs a password, which a guest has not). Read from the table, so a guest converted a moment ago is a full account at once, whatever its access token says.';
GRANT EXECUTE ON FUNCTION private.require_full_account() TO authenticated;


CREATE FUNCTION private.guests_prune(older_than interval, batch integer DEFAULT 100) RETURNS integer
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog'
    AS $$
declare
  guest uuid;
  gone integer := 0;
begin
  for guest in
    select u.id from identity.users u
     where u.is_anonymous and u.created_at < now() - guests_prune.older_than
     order by u.created_at
     limit guests_prune.batch
     for update skip locked
  loop
    begin
      perform private.account_delete(guest);
      gone := gone + 1;
    exception when sqlstate 'PT409' then
      -- The only manager of a community (made one by a manager): kept until it is not.
      null;
    end;
  end loop;
  return gone;
end;
$$;

COMMENT ON FUNCTION private.guests_prune(older_than interval, batch integer) IS 'Deletes guests (identity.users.is_anonymous) made more than older_than ago and never converted, as an account deletion does (private.account_delete: memberships, check-ins, sessions, everything of theirs), at most `batch` a call; returns how many. A guest that is the only manager of a community stays. The worker runs it hourly (GUEST_RETENTION_DAYS).';

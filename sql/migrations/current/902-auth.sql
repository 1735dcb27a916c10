-- Made by `npm run db -- areas --diff` from sql/areas/auth.sql: the statements that make
-- the migrated database what that file states. Each run writes it again:
-- edit the area file, not this one. Table changes go in a file of this
-- folder numbered below 900.

drop function if exists api.auth_refresh(text);

drop function if exists api.auth_refresh_throttled(text,text,integer,integer);

drop function if exists private.auth_login_finish(text,boolean,text);

drop function if exists private.start_session(uuid);

-- Bodies are checked once every function exists (the check validated them all).
set local check_function_bodies = off;

CREATE OR REPLACE FUNCTION api.auth_refresh(refresh_token text, user_agent text DEFAULT NULL::text, client_ip text DEFAULT NULL::text)
 RETURNS SETOF api.auth_refresh_result
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog'
AS $function$
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
$function$;

CREATE OR REPLACE FUNCTION api.auth_refresh_throttled(refresh_token text, client_ip text, max_failures_per_ip integer, window_seconds integer, user_agent text DEFAULT NULL::text)
 RETURNS TABLE(status text, retry_after integer, user_id uuid, email text, new_refresh_token text, session_id uuid)
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog'
AS $function$
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
$function$;

CREATE OR REPLACE FUNCTION private.auth_login_finish(attempt text, matched boolean, new_hash text, user_agent text DEFAULT NULL::text, client_ip text DEFAULT NULL::text)
 RETURNS TABLE(status text, user_id uuid, user_email text, refresh_token text, session_id uuid)
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog'
AS $function$
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
$function$;

CREATE OR REPLACE FUNCTION private.password_attempt_start(door text, email text, client_ip text, bcrypt_cost integer, max_failures_per_email_client integer, max_failures_per_email integer, max_failures_per_ip integer, window_seconds integer)
 RETURNS TABLE(status text, retry_after integer, attempt text, password_hash text, rehash boolean)
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog'
AS $function$
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
$function$;

CREATE OR REPLACE FUNCTION private.start_session(user_id uuid, user_agent text DEFAULT NULL::text, client_ip text DEFAULT NULL::text)
 RETURNS TABLE(refresh_token text, session_id uuid)
 LANGUAGE plpgsql
 SET search_path TO 'pg_catalog'
AS $function$
declare
  token text := identity.new_token();
  new_session uuid := gen_random_uuid();
begin
  insert into identity.refresh_tokens (token_hash, user_id, session_id, expires_at, user_agent, ip)
    values (identity.token_hash(token), start_session.user_id, new_session, now() + interval '30 days',
            left(start_session.user_agent, 512), left(start_session.client_ip, 100));
  return query select token, new_session;
end;
$function$;

set local check_function_bodies to default;

grant execute on function api.auth_refresh(text,text,text) to anon, authenticated;

grant execute on function api.auth_refresh_throttled(text,text,integer,integer,text) to anon, authenticated;

comment on column identity.refresh_tokens.ip is 'The client address of the sign-in or refresh that made this token; shown to the account''s owner in its list of sessions.';

comment on column identity.refresh_tokens.user_agent is 'The User-Agent of the sign-in or refresh that made this token (at most 512 characters); shown to the account''s owner in its list of sessions.';

comment on function api.auth_refresh(text,text,text) is 'POST /api/auth/refresh: rotates a refresh token (the new one records user_agent and client_ip, shown in the owner''s list of sessions). Status ok, invalid, expired, revoked, or reused (the family is then revoked).';

comment on function api.auth_refresh_throttled(text,text,integer,integer,text) is 'POST /api/auth/refresh with throttling: api.auth_refresh, but a client IP with too many failed refreshes gets status throttled (retry_after seconds).';

comment on function private.auth_login_finish(text,boolean,text,text,text) is 'POST /api/auth/login, after the gateway compared the password with the hash of private.password_attempt_start: status ok (a session: refresh_token, session_id; user_agent and client_ip are recorded with it), invalid (counted) or expired.';

comment on function private.password_attempt_start(text,text,text,integer,integer,integer,integer,integer) is 'First half of a sign-in (door login or oauth_consent; reauthenticate: a signed-in user''s password check, private.reauthenticate_start), run by the processes'' own role: status throttled (retry_after seconds; nothing to check) or check: the hash to compare the password with (the account''s, or a dummy at bcrypt_cost for an unknown e-mail), whether to re-hash it (its cost is below bcrypt_cost), and the single-use attempt to finish with.';

comment on function private.start_session(uuid,text,text) is 'Starts a session (a refresh-token family) for the user: its first refresh token, valid 30 days, with the User-Agent and client address of the sign-in (shown in the owner''s list of sessions).';

comment on table identity.refresh_tokens is 'Refresh tokens (hashed). All tokens descending from one login share session_id (the family). A deleted account''s tokens stay, revoked and without it (user_id null), until pruned.';

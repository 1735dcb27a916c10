--! Previous: sha1:90e1f4e5aa3d23e39a836f44512d2d90ae2d9dbc
--! Hash: sha1:8dbf7556920eab78e3b4e812b123de7fcee0eb2f
--! Message: password-hashing

--! split: 300-password-hashing.sql
--------------------------------------------------------------------------------
-- Passwords are hashed and verified in the gateway and the MCP process, not
-- in Postgres (issue 25)
--
-- bcrypt (pgcrypto) cost the database 65 ms of CPU per sign-in: Postgres is
-- the one shared engine, the processes in front of it scale out. The
-- processes now hash and verify (bcrypt, the same format: $2a$/$2b$, the
-- password reduced with SHA-256 and base64 first, as identity.hash_password
-- does); every rule stays here:
--
--   sign in = private.password_attempt_start   (one transaction)
--             the process verifies the password against the hash it got
--             private.auth_login_finish / private.oauth_request_approve
--                                                (one transaction; both go
--                                                 through private.password_attempt_finish)
--
-- The start checks the throttling (before the password is compared) and
-- hands out the account's hash, or, for an unknown e-mail or an account
-- without a password, a fixed dummy hash at the configured cost (so both
-- take the same path and time), with an attempt: a random single-use token,
-- kept hashed, bound to the e-mail, the client, the account and the hash it
-- handed out, valid for 60 seconds. The finish consumes the attempt and
-- records the outcome: a failure is counted (per e-mail and client, per
-- e-mail, per client address: private.auth_failures); a success ends in a
-- session (login) or a code (OAuth) and, when the process re-hashed a hash
-- below the configured cost, stores the new one. A password changed between
-- the two makes the attempt fail. Attempts still being checked count as
-- failures in the throttling, so a burst of parallel guesses cannot slip
-- past the count while the hashes are being compared.
--
-- Both functions are private: only the processes' own database role runs
-- them (a hash is never reachable by a request role).
--
-- Account creation (api.auth_register) and set-password (api.auth_set_password)
-- take a bcrypt hash made by the process; admin.create_user (psql) still
-- hashes with pgcrypto. Both formats verify.
--------------------------------------------------------------------------------

-- A bcrypt hash as the processes store it: $2a$, $2b$ or $2y$, cost 10 to 31.
-- (These small helpers have no search_path of their own and qualify every
-- name, so that they are inlined: see "The sign-in's own SQL" below.)
create or replace function private.password_hash_valid(password_hash text) returns boolean
  language sql immutable
  as $$
    select coalesce(password_hash OPERATOR(pg_catalog.~) '^\$2[aby]\$(1[0-9]|2[0-9]|3[01])\$[./A-Za-z0-9]{53}$', false)
  $$;
comment on function private.password_hash_valid(text) is
  'True for a bcrypt hash ($2a$/$2b$/$2y$) of cost 10 to 31: what account creation and set-password accept.';
revoke all on function private.password_hash_valid(text) from public;

-- The cost of a bcrypt hash (null when it is not one).
create or replace function private.password_hash_cost(password_hash text) returns integer
  language sql immutable
  as $$
    select (pg_catalog.regexp_match(password_hash, '^\$2[abxy]\$(\d\d)\$'))[1]::pg_catalog.int4
  $$;
comment on function private.password_hash_cost(text) is 'The cost of a bcrypt hash; null when it is not one.';
revoke all on function private.password_hash_cost(text) from public;

-- ---------------------------------------------------------------------------
-- Account creation and set-password take a hash
-- ---------------------------------------------------------------------------

create or replace function private.create_account_with_hash(email text, password_hash text, name text default null)
  returns uuid
  language plpgsql
  set search_path = pg_catalog
  as $$
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
$$;
comment on function private.create_account_with_hash(text, text, text) is
  'Creates a user (a bcrypt hash made by the process, or no password when null), their node and profile. Without a name the name '
  'is derived from the e-mail (name_source email, private). PT400 invalid_email / invalid_password_hash / invalid_name; PT409 when the e-mail is taken.';
revoke all on function private.create_account_with_hash(text, text, text) from public;

-- The clear-password form, for operators in psql (admin.create_user) and the
-- pgTAP fixtures: hashes with pgcrypto.
create or replace function private.create_account(email text, password text, name text default null)
  returns uuid
  language plpgsql
  set search_path = pg_catalog
  as $$
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
comment on function private.create_account(text, text, text) is
  'Creates a user with a clear password hashed here with pgcrypto (operators: admin.create_user), or none when null; '
  'otherwise as private.create_account_with_hash. PT400 weak_password under 8 characters.';

drop function if exists api.auth_register(text, text, text);
create function api.auth_register(email text, password_hash text, name text default null)
  returns setof api.auth_user
  language plpgsql volatile
  security definer
  set search_path = pg_catalog
  as $$
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
comment on function api.auth_register(text, text, text) is
  'POST /api/auth/register and /signup: creates user, profile and node with the bcrypt hash the gateway made of the password '
  '(name optional; without one it is derived and private). PT409 (hint email_taken) for a duplicate e-mail; PT400 invalid_password_hash.';
revoke all on function api.auth_register(text, text, text) from public;
grant execute on function api.auth_register(text, text, text) to anon, authenticated;

drop function if exists api.auth_set_password(text, text);
create function api.auth_set_password(token text, password_hash text)
  returns table (user_id uuid, email text)
  language plpgsql volatile
  security definer
  set search_path = pg_catalog
  as $$
declare
  link identity.password_tokens;
begin
  select * into link from identity.password_tokens t
   where t.token_hash = identity.token_hash(auth_set_password.token)
   for update;
  if link.id is null or link.used_at is not null or link.expires_at <= now() then
    raise exception 'this link is not valid or has expired' using errcode = 'PT400', hint = 'invalid_link';
  end if;
  if not private.password_hash_valid(auth_set_password.password_hash) then
    raise exception 'password_hash must be a bcrypt hash of cost 10 or more' using errcode = 'PT400', hint = 'invalid_password_hash';
  end if;

  update identity.password_tokens t set used_at = now()
   where t.user_id = link.user_id and t.used_at is null;
  update identity.users u set password_hash = auth_set_password.password_hash
   where u.id = link.user_id;
  -- Whoever held the account before holds nothing of it now.
  perform private.end_credentials(link.user_id);
  -- The person has claimed the account: the agent that created it no longer owns it.
  delete from app.agent_members a where a.member_id = link.user_id;
  return query select u.id, u.email from identity.users u where u.id = link.user_id;
end;
$$;
comment on function api.auth_set_password(text, text) is
  'Sets the password (a bcrypt hash the gateway made) of a set-password link''s account, uses the link up, ends every credential of '
  'the account (sessions, API tokens, OAuth grants, MCP sessions) and ends an agent''s ownership of it. PT400 invalid_link / invalid_password_hash.';
revoke all on function api.auth_set_password(text, text) from public;
grant execute on function api.auth_set_password(text, text) to anon, authenticated;

-- ---------------------------------------------------------------------------
-- Sign-in attempts
-- ---------------------------------------------------------------------------

create table if not exists private.password_attempts (
  attempt_hash bytea primary key,
  door         text not null check (door in ('login', 'oauth_consent')),
  email_key    text not null,
  client_ip    text,
  user_id      uuid references identity.users (id) on delete cascade,
  hash_digest  bytea,
  created_at   timestamptz not null default now(),
  expires_at   timestamptz not null
);
comment on table private.password_attempts is
  'Sign-ins whose password is being checked by a process (private.password_attempt_start): single-use, 60 seconds; '
  'they count as failures in the throttling until their outcome is recorded.';
-- Reached only through the functions below (no grants): row-level security without policies.
alter table private.password_attempts enable row level security;
create index if not exists password_attempts_email on private.password_attempts (email_key);
create index if not exists password_attempts_client on private.password_attempts (client_ip);

-- Seconds until `key` may try again counting `in_flight` attempts as
-- failures: private.auth_throttle_wait with that many fewer allowed.
create or replace function private.sign_in_wait(
  email_key text,
  client_ip text,
  max_failures_per_email_client integer,
  max_failures_per_email integer,
  max_failures_per_ip integer,
  window_seconds integer
)
  returns integer
  language plpgsql stable
  set search_path = pg_catalog
  as $$
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
comment on function private.sign_in_wait(text, text, integer, integer, integer, integer) is
  'Seconds until a sign-in for this e-mail from this client may be checked (0: now): failed sign-ins within the window and '
  'attempts still being checked, per e-mail and client, per e-mail and per client address, against their limits.';
revoke all on function private.sign_in_wait(text, text, integer, integer, integer, integer) from public;

-- The hash an unknown e-mail is compared against: a bcrypt hash of nothing
-- anyone knows, at the configured cost, so the comparison costs the same.
create or replace function private.password_dummy_hash(bcrypt_cost integer) returns text
  language sql immutable
  as $$
    select '$2a$' OPERATOR(pg_catalog.||) pg_catalog.lpad(greatest(10, least(31, bcrypt_cost))::pg_catalog.text, 2, '0')
           OPERATOR(pg_catalog.||) '$' OPERATOR(pg_catalog.||) 'CwTycUXWue0Thq9StjUM0uJ8.ly9B7Ys2t6MfmbsV8RnQEh8EPLAa'
  $$;
comment on function private.password_dummy_hash(integer) is
  'The fixed bcrypt hash an unknown e-mail (or an account without a password) is compared against, at the given cost (10 to 31).';
revoke all on function private.password_dummy_hash(integer) from public;

drop function if exists private.password_attempt_start(text, text, text, integer, integer, integer, integer, integer);
create function private.password_attempt_start(
  door text,
  email text,
  client_ip text,
  bcrypt_cost integer,
  max_failures_per_email_client integer,
  max_failures_per_email integer,
  max_failures_per_ip integer,
  window_seconds integer
)
  returns table (status text, retry_after integer, attempt text, password_hash text, rehash boolean)
  language plpgsql volatile
  security definer
  set search_path = pg_catalog
  as $$
declare
  email_key text := lower(btrim(coalesce(password_attempt_start.email, '')));
  wait integer;
  account_id uuid;
  account_hash text;
  new_attempt text := identity.new_token();
begin
  if door not in ('login', 'oauth_consent') then
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
comment on function private.password_attempt_start(text, text, text, integer, integer, integer, integer, integer) is
  'First half of a sign-in (door login or oauth_consent), run by the processes'' own role: status throttled (retry_after seconds; '
  'nothing to check) or check: the hash to compare the password with (the account''s, or a dummy at bcrypt_cost for an unknown '
  'e-mail), whether to re-hash it (its cost is below bcrypt_cost), and the single-use attempt to finish with.';
revoke all on function private.password_attempt_start(text, text, text, integer, integer, integer, integer, integer) from public;

drop function if exists private.password_attempt_finish(text, text, boolean, text);
create function private.password_attempt_finish(door text, attempt text, matched boolean, new_hash text)
  returns table (status text, user_id uuid)
  language plpgsql volatile
  security definer
  set search_path = pg_catalog
  as $$
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
comment on function private.password_attempt_finish(text, text, boolean, text) is
  'Second half of a sign-in: consumes the attempt and records whether the process found the password right. status ok (user_id; '
  'the failures of that e-mail from that client are cleared; new_hash, a bcrypt hash of a higher cost, replaces the stored one), '
  'invalid (counted per e-mail and client, per e-mail and per client address; also when the account''s password changed since the '
  'start) or expired (the attempt is unknown, used, or older than 60 seconds).';
revoke all on function private.password_attempt_finish(text, text, boolean, text) from public;

-- ---------------------------------------------------------------------------
-- POST /api/auth/login
-- ---------------------------------------------------------------------------

drop function if exists private.auth_login_finish(text, boolean, text);
create function private.auth_login_finish(attempt text, matched boolean, new_hash text)
  returns table (status text, user_id uuid, user_email text, refresh_token text, session_id uuid)
  language plpgsql volatile
  security definer
  set search_path = pg_catalog
  as $$
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
     cross join lateral private.start_session(u.id) s
     where u.id = checked.user_id;
end;
$$;
comment on function private.auth_login_finish(text, boolean, text) is
  'POST /api/auth/login, after the gateway compared the password with the hash of private.password_attempt_start: '
  'status ok (a session: refresh_token, session_id), invalid (counted) or expired.';
revoke all on function private.auth_login_finish(text, boolean, text) from public;

-- The password is no longer checked in Postgres: the functions that did
-- (pgcrypto's bcrypt, 65 ms of the database's CPU each, callable by request
-- roles) are gone.
drop function if exists api.auth_login_throttled(text, text, text, integer, integer, integer, integer);
drop function if exists api.auth_login(text, text);
drop function if exists private.password_check_throttled(text, text, text, integer, integer, integer, integer);
drop function if exists identity.password_matches(text, text);

-- ---------------------------------------------------------------------------
-- The OAuth consent form (POST /oauth/consent), in the MCP process
-- ---------------------------------------------------------------------------

drop function if exists private.oauth_request_approve(text, text, text, text, integer, integer, integer, integer);
drop function if exists private.oauth_request_approve(text, text, boolean, text);
create function private.oauth_request_approve(request_token text, attempt text, matched boolean, new_hash text)
  returns table (status text, redirect_uri text, code text, state text)
  language plpgsql volatile
  set search_path = pg_catalog
  as $$
declare
  request identity.oauth_requests;
  checked record;
  new_code text := identity.new_token();
begin
  select * into strict checked from private.password_attempt_finish('oauth_consent', attempt, matched, new_hash);
  select r.* into request from identity.oauth_requests r
   where r.request_hash = identity.token_hash(request_token) and r.expires_at > now()
   for update;
  if request.request_hash is null then
    -- Not raised: the attempt's outcome (a failure is counted) is kept.
    return query select 'request_expired'::text, null::text, null::text, null::text;
    return;
  end if;
  if checked.status <> 'ok' then
    if checked.status = 'invalid' then
      if request.failures >= 4 then
        delete from identity.oauth_requests r where r.request_hash = request.request_hash;
      else
        update identity.oauth_requests r set failures = r.failures + 1 where r.request_hash = request.request_hash;
      end if;
    end if;
    return query select checked.status, null::text, null::text, null::text;
    return;
  end if;
  delete from identity.oauth_requests r where r.request_hash = request.request_hash;
  insert into identity.oauth_codes (code_hash, client_id, user_id, redirect_uri, code_challenge, scopes, resource, expires_at)
    values (identity.token_hash(new_code), request.client_id, checked.user_id, request.redirect_uri, request.code_challenge,
            request.scopes, request.resource, now() + interval '1 minute');
  return query select 'ok'::text, request.redirect_uri, new_code, request.state;
end;
$$;
comment on function private.oauth_request_approve(text, text, boolean, text) is
  'The consent form, after the MCP process compared the password with the hash of private.password_attempt_start (door oauth_consent): '
  'finishes the attempt (the login''s throttling) and turns the pending request into a single-use code. status ok (redirect_uri, code, '
  'state), invalid (counted; the request allows 5), expired (the attempt) or request_expired.';
revoke all on function private.oauth_request_approve(text, text, boolean, text) from public;

-- ---------------------------------------------------------------------------
-- The session check of every request (gateway/lib/db.ts), measured
-- ---------------------------------------------------------------------------
--
-- private.check_session runs in every request's settings statement. It cost
-- the database about 100 µs per request, more than BEGIN, the settings,
-- `select 1` and COMMIT together: private.session_ended was a SQL function
-- (security definer, with its own search_path), which PostgreSQL before 18
-- parses and plans again on every call. As PL/pgSQL its two lookups keep
-- their plans for the connection's life: about 25 µs.

create or replace function private.session_ended(session_id uuid) returns boolean
  language plpgsql stable
  security definer
  set search_path = pg_catalog
  as $$
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
comment on function private.session_ended(uuid) is
  'Whether a credential has ended: a session (an access token''s session_id claim) ended by logout or refresh-token reuse, '
  'or an API token (its id) deactivated or expired. Null: false. PL/pgSQL so that its plans are kept (a SQL function is planned on every call before PostgreSQL 18).';

-- GET /api/mobile/profile: the profile join is the route's only work. As a
-- PL/pgSQL function with its own search_path it cost about 15 µs more than
-- the join itself (the call, the search_path switched twice, the rows
-- copied through a tuplestore). A plain SQL function is inlined into the
-- statement that calls it and its plan kept with the prepared statement.
-- No row (an account deleted while its token lives) is the route's 404.
create or replace function api.profile_get() returns setof api.user_profile
  language sql stable
  as $$
    select p.id, u.email, p.name, s.is_premium, p.subscription_type,
           s.max_hats, p.node_id, p.created_at, p.updated_at
      from app.profiles p
      join identity.users u on u.id = p.id
      join app.subscription_plans s on s.id = p.subscription_type
  $$;
comment on function api.profile_get() is
  'GET /api/mobile/profile: the caller''s UserProfile (row-level security picks the row); no row when it is missing (the route''s 404). '
  'Inlined into the calling statement (plain SQL, no search_path of its own: every name is qualified).';

-- ---------------------------------------------------------------------------
-- The sign-in's own SQL, measured (npm run bench -- peak)
-- ---------------------------------------------------------------------------
--
-- Before PostgreSQL 18 a SQL function that cannot be inlined (one with its
-- own search_path, or security definer) is parsed and planned again on
-- every call. The helpers a sign-in calls a dozen times were such
-- functions: now the small ones have no search_path of their own (every
-- name in them is schema-qualified, and they are not security definer), so
-- they are inlined into the statements that call them and planned once with
-- them; the throttle count is PL/pgSQL (its query's plan is kept).

create or replace function identity.new_token() returns text
  language sql volatile
  as $$
    select pg_catalog.rtrim(pg_catalog.translate(pg_catalog.encode(extensions.gen_random_bytes(32), 'base64'), '+/', '-_'), '=')
  $$;

create or replace function identity.token_hash(token text) returns bytea
  language sql immutable strict
  as $$
    select extensions.digest(token, 'sha256')
  $$;

create or replace function private.auth_throttle_wait(scope text, key text, max_failures integer, window_seconds integer)
  returns integer
  language plpgsql stable
  security definer
  set search_path = pg_catalog
  as $$
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
comment on function private.auth_throttle_wait(text, text, integer, integer) is
  'Seconds until `key` may try again (0: now): it has max_failures failures of `scope` within the window (1 when max_failures is 0 or less and there are none).';

--! Previous: sha1:0bedc1eefcdf5eb03015c3c17495b07fbf8bff63
--! Hash: sha1:6853fec50ec524035052bbb6fe279e08807370a9
--! Message: auth-throttle

--! split: 500-auth-throttle.sql
-- Throttling of failed logins and of refresh/verify abuse (DESIGN.md:
-- LOGIN_MAX_FAILURES_PER_EMAIL, default 10 per 15 minutes, and
-- LOGIN_MAX_FAILURES_PER_IP, default 100 per 15 minutes; past either, 429
-- with Retry-After). Counted in Postgres so that every replica shares the
-- count. The limits come from the gateway's configuration as arguments.
--
-- A failure is one row; a key is over its limit while it has `max` failures
-- younger than the window, until the oldest of them leaves the window (that
-- wait is the Retry-After). An unknown e-mail counts exactly like a known one,
-- so the answers never tell whether an account exists.

create table if not exists private.auth_failures (
  scope text not null check (scope in ('email', 'ip', 'refresh', 'verify')),
  key text not null,
  failed_at timestamptz not null default now()
);
comment on table private.auth_failures is
  'Failed logins (per e-mail and per client IP) and failed refresh/verify attempts (per client IP), for throttling.';
create index if not exists auth_failures_key on private.auth_failures (scope, key, failed_at);
create index if not exists auth_failures_age on private.auth_failures (failed_at);

-- ---------------------------------------------------------------------------
-- Counting
-- ---------------------------------------------------------------------------

create or replace function private.auth_throttle_wait(scope text, key text, max_failures integer, window_seconds integer)
  returns integer
  language sql stable
  security definer
  set search_path = pg_catalog
  as $$
  select case
           when count(*) >= max_failures
             then greatest(1, ceil(extract(epoch from min(f.failed_at) + make_interval(secs => window_seconds) - now())))::integer
           else 0
         end
    from private.auth_failures f
   where f.scope = auth_throttle_wait.scope
     and f.key = auth_throttle_wait.key
     and f.failed_at > now() - make_interval(secs => window_seconds);
$$;
comment on function private.auth_throttle_wait(text, text, integer, integer) is
  'Seconds until `key` may try again (0: now): it has max_failures failures of `scope` within the window.';

create or replace function private.auth_throttle_record(scope text, key text)
  returns void
  language plpgsql volatile
  security definer
  set search_path = pg_catalog
  as $$
begin
  insert into private.auth_failures (scope, key) values (auth_throttle_record.scope, auth_throttle_record.key);
  -- Now and then, forget failures older than any window.
  if random() < 0.01 then
    delete from private.auth_failures f where f.failed_at < now() - interval '1 day';
  end if;
end;
$$;
comment on function private.auth_throttle_record(text, text) is 'Counts one failure of `scope` for `key`.';

-- ---------------------------------------------------------------------------
-- Login
-- ---------------------------------------------------------------------------

drop function if exists api.auth_login_throttled(text, text, text, integer, integer, integer);
create function api.auth_login_throttled(
  email text,
  password text,
  client_ip text,
  max_failures_per_email integer,
  max_failures_per_ip integer,
  window_seconds integer
)
  returns table (status text, retry_after integer, user_id uuid, user_email text, refresh_token text, session_id uuid)
  language plpgsql volatile
  security definer
  set search_path = pg_catalog
  as $$
declare
  email_key text := lower(btrim(auth_login_throttled.email));
  wait integer;
  session api.auth_session;
begin
  -- Attempts for one e-mail take turns, so a burst cannot slip past the count.
  perform pg_advisory_xact_lock(hashtextextended('auth_failures:email:' || email_key, 0));
  wait := greatest(
    private.auth_throttle_wait('email', email_key, max_failures_per_email, window_seconds),
    case when client_ip is null then 0
         else private.auth_throttle_wait('ip', client_ip, max_failures_per_ip, window_seconds) end);
  if wait > 0 then
    return query select 'throttled'::text, wait, null::uuid, null::text, null::text, null::uuid;
    return;
  end if;

  begin
    select * into strict session from api.auth_login(auth_login_throttled.email, auth_login_throttled.password);
  exception when sqlstate 'PT401' then
    -- Not re-raised: the failure must be counted, so this transaction commits.
    perform private.auth_throttle_record('email', email_key);
    if client_ip is not null then
      perform private.auth_throttle_record('ip', client_ip);
    end if;
    return query select 'invalid'::text, 0, null::uuid, null::text, null::text, null::uuid;
    return;
  end;

  delete from private.auth_failures f where f.scope = 'email' and f.key = email_key;
  return query select 'ok'::text, 0, session.user_id, session.email, session.refresh_token, session.session_id;
end;
$$;
comment on function api.auth_login_throttled(text, text, text, integer, integer, integer) is
  'POST /api/auth/login with throttling: status ok (a session), invalid (counted against the e-mail and the client IP) or throttled (retry_after seconds; the password is not checked).';
grant execute on function api.auth_login_throttled(text, text, text, integer, integer, integer) to anon, authenticated;

-- ---------------------------------------------------------------------------
-- Refresh and verify: failures per client IP
-- ---------------------------------------------------------------------------

drop function if exists api.auth_refresh_throttled(text, text, integer, integer);
create function api.auth_refresh_throttled(refresh_token text, client_ip text, max_failures_per_ip integer, window_seconds integer)
  returns table (status text, retry_after integer, user_id uuid, email text, new_refresh_token text, session_id uuid)
  language plpgsql volatile
  security definer
  set search_path = pg_catalog
  as $$
declare
  wait integer := case when client_ip is null then 0
                       else private.auth_throttle_wait('refresh', client_ip, max_failures_per_ip, window_seconds) end;
  result api.auth_refresh_result;
begin
  if wait > 0 then
    return query select 'throttled'::text, wait, null::uuid, null::text, null::text, null::uuid;
    return;
  end if;
  select * into strict result from api.auth_refresh(auth_refresh_throttled.refresh_token);
  if result.status <> 'ok' and client_ip is not null then
    perform private.auth_throttle_record('refresh', client_ip);
  end if;
  return query select result.status, 0, result.user_id, result.email, result.refresh_token, result.session_id;
end;
$$;
comment on function api.auth_refresh_throttled(text, text, integer, integer) is
  'POST /api/auth/refresh with throttling: api.auth_refresh, but a client IP with too many failed refreshes gets status throttled (retry_after seconds).';
grant execute on function api.auth_refresh_throttled(text, text, integer, integer) to anon, authenticated;

create or replace function api.auth_verify_wait(client_ip text, max_failures_per_ip integer, window_seconds integer)
  returns integer
  language sql stable
  security definer
  set search_path = pg_catalog
  as $$
  select private.auth_throttle_wait('verify', client_ip, max_failures_per_ip, window_seconds);
$$;
comment on function api.auth_verify_wait(text, integer, integer) is
  'POST /api/auth/verify: seconds the client IP must wait after too many invalid tokens (0: go ahead).';
grant execute on function api.auth_verify_wait(text, integer, integer) to anon, authenticated;

create or replace function api.auth_verify_failed(client_ip text)
  returns void
  language sql volatile
  security definer
  set search_path = pg_catalog
  as $$
  select private.auth_throttle_record('verify', client_ip);
$$;
comment on function api.auth_verify_failed(text) is 'POST /api/auth/verify: counts an invalid token against the client IP.';
grant execute on function api.auth_verify_failed(text) to anon, authenticated;

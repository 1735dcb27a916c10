--! Previous: sha1:d22f26899191ebeb26e2ccc13397987f89fbc39d
--! Hash: sha1:57c917f24ff5fab5029a56739ce0dcb8891ba0d4
--! Message: login-throttle

--! split: 027-login-throttle.sql
--------------------------------------------------------------------------------
-- Failed sign-ins are throttled on every door that checks a password
-- (issue 27, findings 1 and 8)
--
-- private.password_check_throttled is the one place a password is checked
-- for signing in: POST /api/auth/login (api.auth_login_throttled) and the
-- OAuth consent form (private.oauth_request_approve) both go through it, so
-- their failures are counted together. A failure is counted three times:
--   'email_client'  the e-mail and the client address together
--                   (LOGIN_MAX_FAILURES_PER_EMAIL, default 10 per window);
--   'email'         the e-mail across all clients: a much higher ceiling
--                   (LOGIN_MAX_FAILURES_PER_EMAIL_ALL_CLIENTS, default 100)
--                   against guessing spread over many addresses;
--   'ip'            the client address across all e-mails
--                   (LOGIN_MAX_FAILURES_PER_IP, default 100).
-- Past any of them the answer is 'throttled' with the seconds to wait, and
-- the password is not checked. So a stranger who knows an e-mail address
-- locks out only their own address for it: the owner, from a client that has
-- not failed for that e-mail, still signs in with the right password, unless
-- someone spent the all-clients ceiling from many addresses (the trade-off:
-- that ceiling protects the password and can, at that cost, lock the owner
-- out for the window). A success clears the failures of that e-mail from
-- that client only, never the all-clients count.
--------------------------------------------------------------------------------

alter table private.auth_failures drop constraint if exists auth_failures_scope_check;
-- Safe: private.auth_failures holds at most a day of failed sign-ins (older rows are deleted as failures arrive); the validating scan is short.
-- squawk-ignore constraint-missing-not-valid
alter table private.auth_failures add constraint auth_failures_scope_check
  check (scope in ('email', 'email_client', 'ip', 'refresh', 'verify'));
comment on table private.auth_failures is
  'Failed sign-ins (per e-mail and client address, per e-mail, per client IP) and failed refresh/verify attempts (per client IP), for throttling.';

create or replace function private.password_check_throttled(
  email text,
  password text,
  client_ip text,
  max_failures_per_email_client integer,
  max_failures_per_email integer,
  max_failures_per_ip integer,
  window_seconds integer
)
  returns table (status text, retry_after integer, user_id uuid)
  language plpgsql volatile
  security definer
  set search_path = pg_catalog
  as $$
declare
  email_key text := lower(btrim(coalesce(password_check_throttled.email, '')));
  client_key text := email_key || ' ' || coalesce(password_check_throttled.client_ip, 'unknown');
  wait integer;
  account identity.users;
begin
  -- Attempts for one e-mail take turns, so a burst cannot slip past the count.
  perform pg_advisory_xact_lock(hashtextextended('auth_failures:email:' || email_key, 0));
  wait := greatest(
    private.auth_throttle_wait('email_client', client_key, max_failures_per_email_client, window_seconds),
    private.auth_throttle_wait('email', email_key, max_failures_per_email, window_seconds),
    case when client_ip is null then 0
         else private.auth_throttle_wait('ip', client_ip, max_failures_per_ip, window_seconds) end);
  if wait > 0 then
    return query select 'throttled'::text, wait, null::uuid;
    return;
  end if;

  select u.* into account from identity.users u where u.email = email_key;
  -- Always compare (against a dummy hash when there is no account), so an
  -- unknown e-mail and a wrong password take the same path and time.
  if not identity.password_matches(password_check_throttled.password, account.password_hash) or account.id is null then
    perform private.auth_throttle_record('email_client', client_key);
    perform private.auth_throttle_record('email', email_key);
    if client_ip is not null then
      perform private.auth_throttle_record('ip', client_ip);
    end if;
    return query select 'invalid'::text, 0, null::uuid;
    return;
  end if;

  delete from private.auth_failures f where f.scope = 'email_client' and f.key = client_key;
  return query select 'ok'::text, 0, account.id;
end;
$$;
comment on function private.password_check_throttled(text, text, text, integer, integer, integer, integer) is
  'Checks an e-mail and password for signing in, throttled: status ok (user_id), invalid (counted per e-mail and client, '
  'per e-mail and per client IP; the caller must commit) or throttled (retry_after seconds; the password is not checked). '
  'Every door that checks a password calls it.';
revoke all on function private.password_check_throttled(text, text, text, integer, integer, integer, integer) from public;

-- ---------------------------------------------------------------------------
-- POST /api/auth/login
-- ---------------------------------------------------------------------------

drop function if exists api.auth_login_throttled(text, text, text, integer, integer, integer);
drop function if exists api.auth_login_throttled(text, text, text, integer, integer, integer, integer);
create function api.auth_login_throttled(
  email text,
  password text,
  client_ip text,
  max_failures_per_email_client integer,
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
  checked record;
begin
  select * into strict checked
    from private.password_check_throttled(auth_login_throttled.email, auth_login_throttled.password, client_ip,
                                          max_failures_per_email_client, max_failures_per_email, max_failures_per_ip,
                                          window_seconds);
  if checked.status <> 'ok' then
    -- Not raised: a failure must be counted, so this transaction commits.
    return query select checked.status, checked.retry_after, null::uuid, null::text, null::text, null::uuid;
    return;
  end if;
  return query
    select 'ok'::text, 0, u.id, u.email, s.refresh_token, s.session_id
      from identity.users u
     cross join lateral private.start_session(u.id) s
     where u.id = checked.user_id;
end;
$$;
comment on function api.auth_login_throttled(text, text, text, integer, integer, integer, integer) is
  'POST /api/auth/login: private.password_check_throttled, then a session: status ok (a session), invalid (counted) or throttled (retry_after seconds).';
grant execute on function api.auth_login_throttled(text, text, text, integer, integer, integer, integer) to anon, authenticated;

-- ---------------------------------------------------------------------------
-- The OAuth consent form (POST /oauth/consent)
-- ---------------------------------------------------------------------------

-- The user signs in and consents: the request becomes a code. Besides the
-- login throttling, a pending request allows 5 wrong passwords and is gone
-- after them. PT404 request_expired when unknown or expired.
drop function if exists private.oauth_request_approve(text, text, text);
drop function if exists private.oauth_request_approve(text, text, text, text, integer, integer, integer, integer);
create function private.oauth_request_approve(
  request_token text,
  email text,
  password text,
  client_ip text,
  max_failures_per_email_client integer,
  max_failures_per_email integer,
  max_failures_per_ip integer,
  window_seconds integer
)
  returns table (status text, retry_after integer, redirect_uri text, code text, state text)
  language plpgsql volatile
  set search_path = pg_catalog
  as $$
declare
  request identity.oauth_requests;
  checked record;
  new_code text := identity.new_token();
begin
  select r.* into request from identity.oauth_requests r
   where r.request_hash = identity.token_hash(request_token) and r.expires_at > now()
   for update;
  if request.request_hash is null then
    raise exception 'this authorization request has expired; start again from your application'
      using errcode = 'PT404', hint = 'request_expired';
  end if;
  select * into strict checked
    from private.password_check_throttled(oauth_request_approve.email, oauth_request_approve.password, client_ip,
                                          max_failures_per_email_client, max_failures_per_email, max_failures_per_ip,
                                          window_seconds);
  if checked.status = 'throttled' then
    return query select 'throttled'::text, checked.retry_after, null::text, null::text, null::text;
    return;
  end if;
  if checked.status <> 'ok' then
    if request.failures >= 4 then
      delete from identity.oauth_requests r where r.request_hash = request.request_hash;
    else
      update identity.oauth_requests r set failures = r.failures + 1 where r.request_hash = request.request_hash;
    end if;
    -- Commit the failure counts, then refuse: the caller answers after commit.
    return query select 'invalid'::text, 0, null::text, null::text, null::text;
    return;
  end if;
  delete from identity.oauth_requests r where r.request_hash = request.request_hash;
  insert into identity.oauth_codes (code_hash, client_id, user_id, redirect_uri, code_challenge, scopes, resource, expires_at)
    values (identity.token_hash(new_code), request.client_id, checked.user_id, request.redirect_uri, request.code_challenge,
            request.scopes, request.resource, now() + interval '1 minute');
  return query select 'ok'::text, 0, request.redirect_uri, new_code, request.state;
end;
$$;
comment on function private.oauth_request_approve(text, text, text, text, integer, integer, integer, integer) is
  'The consent form: signs the user in through private.password_check_throttled (the login''s throttling) and turns the pending request '
  'into a single-use code. status ok (redirect_uri, code, state), invalid (counted; the request allows 5) or throttled (retry_after seconds); '
  'PT404 request_expired.';

--! Previous: sha1:5c491f28725789b48bca4a7f40ef9258d8f3987a
--! Hash: sha1:167cd041def4939d92c10b3d17437523b9490e9a
--! Message: password-doors

--! split: 310-password-doors.sql
--------------------------------------------------------------------------------
-- The doors that set a password check what they can before the process
-- hashes it, and are throttled per client address
--
-- POST /api/auth/register and /signup hashed the password before finding
-- the e-mail taken, and POST /api/auth/set-password before finding the link
-- used up; none of them was throttled. 600 registrations of a taken address
-- from one client each cost a full bcrypt, and other people's sign-ins
-- waited behind them. Now each of these doors starts with
-- private.password_set_start, one transaction before any hashing:
--
--   * requests at these doors are counted per client address
--     (private.auth_failures, scope password_set, as the sign-in throttling
--     of migration 000027 counts, so the limit holds across replicas): past
--     PASSWORD_SET_MAX_PER_IP in the window, 'throttled' (the gateway's 429
--     with Retry-After), and nothing else is checked;
--   * the checks that need no password: the e-mail is valid and not taken
--     (register, signup), the link is valid (set-password). A refusal is
--     returned with its SQLSTATE, hint and message (not raised, so that the
--     request stays counted), exactly as the function that follows raises it;
--   * otherwise 'hash': the process hashes the password in the client's turn
--     (gateway/core/fair-queue.ts) and calls api.auth_register /
--     api.auth_set_password, which check again (a race between the two).
--------------------------------------------------------------------------------

alter table private.auth_failures drop constraint if exists auth_failures_scope_check;
-- Safe: private.auth_failures holds at most a day of rows (older ones are pruned every 10 minutes); the validating scan is short.
-- squawk-ignore constraint-missing-not-valid
alter table private.auth_failures add constraint auth_failures_scope_check
  check (scope in ('email', 'email_client', 'ip', 'refresh', 'verify', 'password_set'));
comment on table private.auth_failures is
  'Failed sign-ins (per e-mail and client address, per e-mail, per client IP), failed refresh/verify attempts (per client IP) and '
  'requests at the doors that set a password (password_set, per client IP), for throttling.';

-- The e-mail address a new account would get, or why it cannot.
create or replace function private.account_email_check(email text) returns text
  language plpgsql stable
  set search_path = pg_catalog
  as $$
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
$$;
comment on function private.account_email_check(text) is
  'The normalised e-mail of a new account: PT400 invalid_email, PT409 email_taken (the same refusals as private.create_account_with_hash).';
revoke all on function private.account_email_check(text) from public;

-- The usable set-password link a token names (locked when for_update), or PT400 invalid_link.
create or replace function private.password_link(token text, for_update boolean default false)
  returns identity.password_tokens
  language plpgsql volatile
  set search_path = pg_catalog
  as $$
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
comment on function private.password_link(text, boolean) is
  'The set-password link of a token while it is usable (not used, replaced or expired), locked when for_update; PT400 invalid_link otherwise.';
revoke all on function private.password_link(text, boolean) from public;

create or replace function api.auth_set_password(token text, password_hash text)
  returns table (user_id uuid, email text)
  language plpgsql volatile
  security definer
  set search_path = pg_catalog
  as $$
declare
  link identity.password_tokens := private.password_link(auth_set_password.token, true);
begin
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

drop function if exists private.password_set_start(text, text, integer, integer, text, text);
create function private.password_set_start(
  door text,
  client_ip text,
  max_per_ip integer,
  window_seconds integer,
  email text default null,
  link_token text default null
)
  returns table (status text, retry_after integer, error_state text, error_hint text, error_message text)
  language plpgsql volatile
  security definer
  set search_path = pg_catalog
  as $$
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
comment on function private.password_set_start(text, text, integer, integer, text, text) is
  'First step of a door that sets a password (door register: POST /api/auth/register and /signup with email; set_password: '
  'POST /api/auth/set-password with link_token), before the process hashes it, run by the processes'' own role: counts the request '
  'per client address and answers status throttled (retry_after seconds: more than max_per_ip in window_seconds), refused (error_state, '
  'error_hint and error_message: what the door''s function would raise, invalid_email, email_taken or invalid_link) or hash.';
revoke all on function private.password_set_start(text, text, integer, integer, text, text) from public;

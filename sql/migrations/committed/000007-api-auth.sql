--! Previous: sha1:04e3081d49265a3777d02c0e179098f2cc0e35fc
--! Hash: sha1:b48c02e37ac10343d0c23e5bbbccdd26a6bc1e11
--! Message: api-auth

--------------------------------------------------------------------------------
-- API: authentication
--
-- The gateway signs access tokens (JWTs); everything that touches a password
-- or a refresh token happens here. These functions are security definer
-- because anonymous callers must reach identity.users; each one fixes its
-- search_path and does one narrow thing.
--------------------------------------------------------------------------------

create type api.auth_user as (user_id uuid, email text);
create type api.auth_session as (user_id uuid, email text, refresh_token text, session_id uuid);
create type api.auth_refresh_result as (
  status text, user_id uuid, email text, refresh_token text, session_id uuid
);

create function api.auth_register(email text, password text)
  returns setof api.auth_user
  language plpgsql volatile
  security definer
  set search_path = pg_catalog
  as $$
declare
  new_user uuid := private.create_account(auth_register.email, auth_register.password);
begin
  return query select u.id, u.email from identity.users u where u.id = new_user;
end;
$$;
comment on function api.auth_register(text, text) is
  'POST /api/auth/register and /signup: creates user, profile and node. PT409 (hint email_taken) for a duplicate e-mail.';
grant execute on function api.auth_register(text, text) to anon, authenticated;

-- A login session: the first refresh token of a new family.
create function private.start_session(user_id uuid)
  returns table (refresh_token text, session_id uuid)
  language plpgsql volatile
  set search_path = pg_catalog
  as $$
declare
  token text := identity.new_token();
  new_session uuid := gen_random_uuid();
begin
  insert into identity.refresh_tokens (token_hash, user_id, session_id, expires_at)
    values (identity.token_hash(token), start_session.user_id, new_session, now() + interval '30 days');
  return query select token, new_session;
end;
$$;

create function api.auth_login(email text, password text)
  returns setof api.auth_session
  language plpgsql volatile
  security definer
  set search_path = pg_catalog
  as $$
declare
  account identity.users;
begin
  select * into account from identity.users u where u.email = lower(btrim(auth_login.email));
  -- Always compare (against a dummy hash when there is no account), so an
  -- unknown e-mail and a wrong password take the same path and time.
  if not identity.password_matches(password, account.password_hash) or account.id is null then
    raise exception 'invalid email or password' using errcode = 'PT401', hint = 'invalid_credentials';
  end if;
  return query
    select account.id, account.email, s.refresh_token, s.session_id
      from private.start_session(account.id) s;
end;
$$;
comment on function api.auth_login(text, text) is
  'POST /api/auth/login: checks the password and opens a session (first refresh token). PT401 otherwise.';
grant execute on function api.auth_login(text, text) to anon, authenticated;

-- Refresh does not raise on a bad token: a reused (already rotated) token
-- revokes its whole family, and that revocation must commit. The gateway turns
-- any status but 'ok' into 401.
create function api.auth_refresh(refresh_token text)
  returns setof api.auth_refresh_result
  language plpgsql volatile
  security definer
  set search_path = pg_catalog
  as $$
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
  insert into identity.refresh_tokens (token_hash, user_id, session_id, parent_id, expires_at)
    values (identity.token_hash(next_token), presented.user_id, presented.session_id, presented.id,
            now() + interval '30 days');

  return query
    select 'ok'::text, u.id, u.email, next_token, presented.session_id
      from identity.users u where u.id = presented.user_id;
end;
$$;
comment on function api.auth_refresh(text) is
  'POST /api/auth/refresh: rotates a refresh token. Status ok, invalid, expired, revoked, or reused (the family is then revoked).';
grant execute on function api.auth_refresh(text) to anon, authenticated;

create function api.auth_logout(refresh_token text) returns boolean
  language plpgsql volatile
  security definer
  set search_path = pg_catalog
  as $$
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
comment on function api.auth_logout(text) is
  'POST /api/auth/logout: ends the session of the refresh token (revokes its family). PT401 for an unknown token.';
grant execute on function api.auth_logout(text) to anon, authenticated;

create function api.auth_verify()
  returns setof api.auth_user
  language plpgsql stable
  set search_path = pg_catalog
  as $$
begin
  return query select u.id, u.email from identity.users u where u.id = auth.uid();
  if not found then
    raise exception 'token does not belong to an existing user' using errcode = 'PT401', hint = 'invalid_token';
  end if;
end;
$$;
comment on function api.auth_verify() is
  'POST /api/auth/verify: the user of the current (already signature-checked) token, PT401 if it no longer exists.';
grant execute on function api.auth_verify() to authenticated;

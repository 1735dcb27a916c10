--! Previous: sha1:20b722a6b9e896851d3e2f015dfd34c21397a1da
--! Hash: sha1:9106ed77cf4ae2b86a1aa152662df81d56a8f20b
--! Message: supabase-auth-wire-api

--! split: 100-user-metadata.sql
-- Supabase Auth's user_metadata (PUT /auth/v1/user {data}, POST /auth/v1/signup
-- {data}): a column of the one user table, not a second store of users.
alter table identity.users add column if not exists user_metadata jsonb not null default '{}'::jsonb;

--! split: 101-recovery-sessions.sql
-- A session started by a password recovery link (POST /auth/v1/verify
-- type=recovery): within its hour, the password may be set once without the
-- current one (PUT /auth/v1/user), as in Supabase Auth's recovery session.
create table if not exists identity.recovery_sessions (
  session_id uuid primary key,
  user_id uuid not null references identity.users (id) on delete cascade,
  expires_at timestamptz not null
);
create index if not exists recovery_sessions_user_id_idx on identity.recovery_sessions (user_id);

--! split: 901-auth.sql
-- Made by `npm run db -- areas --diff` from sql/areas/auth.sql: the statements that make
-- the migrated database what that file states. Each run writes it again:
-- edit the area file, not this one. Table changes go in a file of this
-- folder numbered below 900.

-- Bodies are checked once every function exists (the check validated them all).
set local check_function_bodies = off;

CREATE OR REPLACE FUNCTION api.auth_recovery_password_set(password_hash text)
 RETURNS jsonb
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog'
AS $function$
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
  -- As a password change: every other session ends; this one stays.
  update identity.refresh_tokens r set revoked_at = now(), revoked_reason = 'logout'
   where r.user_id = me and r.revoked_at is null and r.session_id <> current_session;
  return private.auth_user_object(me);
end;
$function$;

CREATE OR REPLACE FUNCTION api.auth_recovery_verify(token text, user_agent text DEFAULT NULL::text, client_ip text DEFAULT NULL::text)
 RETURNS TABLE(user_id uuid, email text, refresh_token text, session_id uuid)
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog'
AS $function$
declare
  link identity.password_tokens := private.password_link(auth_recovery_verify.token, true);
  started record;
begin
  update identity.password_tokens t set used_at = now() where t.user_id = link.user_id and t.used_at is null;
  -- Whoever held the account before holds nothing of it now (as a set-password link does).
  perform private.end_credentials(link.user_id);
  delete from app.agent_members a where a.member_id = link.user_id;
  select * into started from private.start_session(link.user_id, auth_recovery_verify.user_agent, auth_recovery_verify.client_ip);
  delete from identity.recovery_sessions s where s.user_id = link.user_id;
  insert into identity.recovery_sessions (session_id, user_id, expires_at) values (started.session_id, link.user_id, now() + interval '1 hour');
  return query select u.id, u.email, started.refresh_token, started.session_id from identity.users u where u.id = link.user_id;
end;
$function$;

CREATE OR REPLACE FUNCTION api.auth_user()
 RETURNS jsonb
 LANGUAGE plpgsql
 STABLE SECURITY DEFINER
 SET search_path TO 'pg_catalog'
AS $function$
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
$function$;

CREATE OR REPLACE FUNCTION api.auth_user_metadata_update(data jsonb)
 RETURNS jsonb
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog'
AS $function$
declare
  me uuid := private.account_caller();
  merged jsonb;
begin
  if jsonb_typeof(auth_user_metadata_update.data) is distinct from 'object' then
    raise exception 'data must be a JSON object' using errcode = 'PT422', hint = 'validation_error';
  end if;
  -- Supabase Auth's merge: each key given replaces its value; a key given as null is removed.
  select u.user_metadata || auth_user_metadata_update.data into merged
    from identity.users u where u.id = me;
  merged := (select coalesce(jsonb_object_agg(e.key, e.value), '{}'::jsonb)
               from jsonb_each(merged) e where e.value <> 'null'::jsonb);
  if octet_length(merged::text) > 16384 then
    raise exception 'user_metadata may hold at most 16 KB' using errcode = 'PT422', hint = 'validation_error';
  end if;
  update identity.users u set user_metadata = merged, updated_at = now() where u.id = me;
  return private.auth_user_object(me);
end;
$function$;

CREATE OR REPLACE FUNCTION api.auth_user_update(password_proof text, email_proof text, password_hash text, new_email text, public_url text, data jsonb)
 RETURNS jsonb
 LANGUAGE plpgsql
 SET search_path TO 'pg_catalog'
AS $function$
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
$function$;

CREATE OR REPLACE FUNCTION private.auth_user_object(user_id uuid)
 RETURNS jsonb
 LANGUAGE sql
 STABLE
 SET search_path TO 'pg_catalog'
AS $function$
    select jsonb_build_object(
             'id', u.id, 'aud', 'authenticated', 'role', 'authenticated', 'email', u.email, 'phone', '',
             'email_confirmed_at', app.iso(u.created_at), 'confirmed_at', app.iso(u.created_at),
             'last_sign_in_at', app.iso(s.last_sign_in_at),
             'app_metadata', jsonb_build_object('provider', 'email', 'providers', jsonb_build_array('email')),
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
      from identity.users u
      cross join lateral (select max(r.created_at) as last_sign_in_at from identity.refresh_tokens r
                           where r.user_id = u.id and r.parent_id is null) s
     where u.id = auth_user_object.user_id
  $function$;

set local check_function_bodies to default;

alter table identity.recovery_sessions enable row level security, no force row level security;

grant execute on function api.auth_recovery_password_set(text) to authenticated;

grant execute on function api.auth_recovery_verify(text,text,text) to anon, authenticated;

grant execute on function api.auth_user() to authenticated;

grant execute on function api.auth_user_metadata_update(jsonb) to authenticated;

grant execute on function api.auth_user_update(text,text,text,text,text,jsonb) to authenticated;

comment on column identity.users.user_metadata is 'What the user says about themselves through Supabase Auth''s API (`data` of sign-up and PUT /auth/v1/user): a JSON object of at most 16 KB, answered as the User object''s user_metadata. Never read by a rule.';

comment on function api.auth_recovery_password_set(text) is 'PUT /auth/v1/user {password} without the current password: allowed once, within the hour, in a session a recovery link started (api.auth_recovery_verify); sets the bcrypt hash the gateway made and ends every other session. PT400 current_password_required in any other session; PT400 invalid_password_hash.';

comment on function api.auth_recovery_verify(text,text,text) is 'POST /auth/v1/verify type=recovery: the token of a set-password link (POST /api/auth/recover, /auth/v1/recover) signs its account in: the link is used up, every credential of the account ends (as a set-password link does), and a new session may set the password without the current one within the hour (api.auth_recovery_password_set). PT400 invalid_link.';

comment on function api.auth_user() is 'GET /auth/v1/user: the caller as Supabase Auth''s User object (private.auth_user_object). PT401 invalid_token if the account no longer exists.';

comment on function api.auth_user_metadata_update(jsonb) is 'PUT /auth/v1/user {data}: merges data into the caller''s user_metadata as Supabase Auth does (a key set to null is removed; at most 16 KB, else PT422 validation_error) and answers the User object. Only the access token of a sign-in (private.account_caller: PT403 forbidden for an API token or an agent).';

comment on function api.auth_user_update(text,text,text,text,text,jsonb) is 'PUT /auth/v1/user: every change at once or none, in one transaction, each by the account''s own rules: new_email as api.account_email_change (with email_proof), password_hash as api.account_password_change (with password_proof) or, without a proof, api.auth_recovery_password_set (a recovery session), then data merged as api.auth_user_metadata_update; answers the User object. Their refusals (PT401 invalid_credentials, PT400 current_password_required, PT422, PT429 rate_limited) undo every change.';

comment on function private.auth_user_object(uuid) is 'A user as Supabase Auth''s User object: id, aud, role, email, email_confirmed_at (the account''s creation: sign-up needs no confirmation here), last_sign_in_at (its latest sign-in), app_metadata.provider email, user_metadata, one email identity, created_at, updated_at; new_email and email_change_sent_at while an e-mail change waits for its link.';

comment on table identity.recovery_sessions is 'Sessions a password recovery link started (api.auth_recovery_verify): each may set the password once without the current one until expires_at (one hour).';

--! split: 903-account.sql
-- Made by `npm run db -- areas --diff` from sql/areas/account.sql: the statements that make
-- the migrated database what that file states. Each run writes it again:
-- edit the area file, not this one. Table changes go in a file of this
-- folder numbered below 900.

-- Bodies are checked once every function exists (the check validated them all).
set local check_function_bodies = off;

CREATE OR REPLACE FUNCTION api.account_sign_out(scope text)
 RETURNS jsonb
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog'
AS $function$
declare
  me uuid := private.account_caller();
  current_session uuid := private.account_session();
  ended integer;
begin
  if account_sign_out.scope not in ('global', 'local', 'others') then
    raise exception 'scope must be global, local or others' using errcode = 'PT422', hint = 'validation_error';
  end if;
  with gone as (
    update identity.refresh_tokens r set revoked_at = now(), revoked_reason = 'logout'
     where r.user_id = me and r.revoked_at is null
       and case account_sign_out.scope when 'global' then true
                                       when 'local' then r.session_id = current_session
                                       else r.session_id <> current_session end
    returning r.session_id)
  select count(distinct g.session_id) into ended from gone g;
  return jsonb_build_object('sessions_ended', ended);
end;
$function$;

set local check_function_bodies to default;

grant execute on function api.account_sign_out(text) to authenticated;

comment on function api.account_sign_out(text) is 'POST /auth/v1/logout?scope=: ends the calling session (local), every session of the caller (global) or all but the calling one (others): their refresh tokens, access tokens and streams at once; returns how many. PT422 validation_error for another scope; PT403 forbidden for an API token or an agent.';

--! split: 919-admin.sql
-- Made by `npm run db -- areas --diff` from sql/areas/admin.sql: the statements that make
-- the migrated database what that file states. Each run writes it again:
-- edit the area file, not this one. Table changes go in a file of this
-- folder numbered below 900.

-- Bodies are checked once every function exists (the check validated them all).
set local check_function_bodies = off;

CREATE OR REPLACE FUNCTION admin.user_delete(user_id uuid)
 RETURNS jsonb
 LANGUAGE plpgsql
 SET search_path TO 'pg_catalog'
AS $function$
begin
  if not exists (select from identity.users u where u.id = user_delete.user_id) then
    raise exception 'User not found' using errcode = 'PT404', hint = 'not_found';
  end if;
  return private.account_delete(user_delete.user_id);
end;
$function$;

CREATE OR REPLACE FUNCTION admin.user_get(user_id uuid)
 RETURNS jsonb
 LANGUAGE plpgsql
 STABLE
 SET search_path TO 'pg_catalog'
AS $function$
begin
  if not exists (select from identity.users u where u.id = user_get.user_id) then
    raise exception 'User not found' using errcode = 'PT404', hint = 'not_found';
  end if;
  return private.auth_user_object(user_get.user_id);
end;
$function$;

CREATE OR REPLACE FUNCTION admin.users_list(page integer, per_page integer)
 RETURNS jsonb
 LANGUAGE plpgsql
 STABLE
 SET search_path TO 'pg_catalog'
AS $function$
begin
  if users_list.page < 1 or users_list.per_page < 1 or users_list.per_page > 1000 then
    raise exception 'page must be 1 or more and per_page 1 to 1000' using errcode = 'PT400', hint = 'validation_error';
  end if;
  return jsonb_build_object(
    'users', coalesce((
      select jsonb_agg(private.auth_user_object(u.id) order by u.created_at, u.id)
        from (select x.id, x.created_at from identity.users x
               order by x.created_at, x.id
               offset (users_list.page - 1)::bigint * users_list.per_page limit users_list.per_page) u), '[]'::jsonb),
    'total', (select count(*) from identity.users));
end;
$function$;

set local check_function_bodies to default;

comment on function admin.user_delete(uuid) is 'DELETE /auth/v1/admin/users/{id} (the service-role key): deletes the account as admin.delete_user does (private.account_delete: refused, PT409 last_manager_of_communities, while it is the only manager of a community). PT404 not_found for an unknown id.';

comment on function admin.user_get(uuid) is 'GET /auth/v1/admin/users/{id} (the service-role key): the account as Supabase Auth''s User object (private.auth_user_object). PT404 not_found for an unknown id.';

comment on function admin.users_list(integer,integer) is 'GET /auth/v1/admin/users (the service-role key): a page of the accounts as Supabase Auth''s User objects, oldest first, and how many there are (total). PT400 validation_error for a page below 1 or per_page outside 1-1000.';

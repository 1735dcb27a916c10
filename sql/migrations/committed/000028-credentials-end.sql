--! Previous: sha1:57c917f24ff5fab5029a56739ce0dcb8891ba0d4
--! Hash: sha1:5ee05148fecf60a3ae488d4e3615d1d7404cf2a0
--! Message: credentials-end

--! split: 1-current.sql
-- Enter migration here

--! split: 028-credentials-end.sql
--------------------------------------------------------------------------------
-- Credentials end everywhere at once (issue 27, findings 2, 3, 4, 5 and 8)
--
--  * A password reset (api.auth_set_password) ends every session, API token,
--    OAuth grant (access and refresh tokens, codes not yet exchanged) and MCP
--    session of the account, and ends an agent's ownership of the account
--    (the person has claimed it).
--  * An API token's permissions govern every path it is presented on, /mcp
--    included: api.api_token_authenticate says whether the path matches, and
--    every MCP tool checks again that the calling token still matches /mcp
--    and is live (private.mcp_agent).
--  * A token that is deactivated (DELETE /api/docs/tokens/{id}, a password
--    reset) or deleted ends its open streams: the same NOTIFY session_ended
--    that logout sends for a session, with the token's id; a stream opened
--    with a token is watched under the token's id, and closed by a timer at
--    the token's expires_at (api.api_token_authenticate returns it).
--    private.session_ended (and sessions_ended) answer for a session id or an
--    API token id: one mechanism for both.
--  * create_member for an e-mail that already has an account answers as for a
--    new account (a member object with fresh ids); the person gets a link
--    (at most 5 an hour per account, with the recovery e-mails); the agent
--    gains no access to the account.
--------------------------------------------------------------------------------

-- ---------------------------------------------------------------------------
-- Streams end with their credential
-- ---------------------------------------------------------------------------

create or replace function private.session_ended(session_id uuid)
  returns boolean
  language sql stable security definer
  set search_path = pg_catalog
  as $$
    select session_ended.session_id is not null and (
      exists (
        select from identity.refresh_tokens t
         where t.session_id = session_ended.session_id
           and t.revoked_reason in ('logout', 'reused'))
      or exists (
        select from app.api_tokens k
         where k.id = session_ended.session_id
           and (not k.active or k.expires_at <= now())))
  $$;
comment on function private.session_ended(uuid) is
  'Whether a credential has ended: a session (an access token''s session_id claim) ended by logout or refresh-token reuse, '
  'or an API token (its id) deactivated or expired. Null: false.';
revoke all on function private.session_ended(uuid) from public;

create or replace function private.sessions_ended(session_ids uuid[]) returns setof uuid
  language sql stable
  security definer
  set search_path = pg_catalog
  as $$
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
comment on function private.sessions_ended(uuid[]) is
  'The credentials among session_ids that have ended: sessions ended by logout or refresh-token reuse, API tokens deactivated or expired.';

create or replace function private.tg_api_tokens__notify_ended() returns trigger
  language plpgsql volatile
  set search_path = pg_catalog
  as $$
begin
  perform pg_notify('session_ended', old.id::text);
  return null;
end;
$$;
comment on function private.tg_api_tokens__notify_ended() is
  'Trigger: NOTIFY session_ended with the id of an API token that was deactivated or deleted (its streams end).';

drop trigger if exists _900_notify_token_ended on app.api_tokens;
create trigger _900_notify_token_ended after update of active on app.api_tokens
  for each row when (old.active and not new.active)
  execute function private.tg_api_tokens__notify_ended();
drop trigger if exists _900_notify_token_deleted on app.api_tokens;
create trigger _900_notify_token_deleted after delete on app.api_tokens
  for each row when (old.active)
  execute function private.tg_api_tokens__notify_ended();

-- The token's expiry, for the gateway to end its streams on time.
drop function if exists api.api_token_authenticate(text, text);
drop type if exists api.api_token_identity;
create function api.api_token_authenticate(secret text, request_path text)
  returns table (token_id uuid, user_id uuid, community_id uuid, path_allowed boolean, expires_at timestamptz)
  language plpgsql volatile
  security definer
  set search_path = pg_catalog
  as $$
declare
  used app.api_tokens;
begin
  update app.api_tokens t
     set usage_count = t.usage_count + 1,
         last_used_at = greatest(t.last_used_at, clock_timestamp())
   where t.token_hash = extensions.digest(coalesce(secret, ''), 'sha256')
     and t.active
     and (t.expires_at is null or t.expires_at > clock_timestamp())
  returning t.* into used;
  if used.id is null then
    raise exception 'invalid, inactive or expired API token' using errcode = 'PT401', hint = 'invalid_token';
  end if;
  return query select used.id, used.user_id, used.community_id,
                      private.api_token_path_allowed(used.permissions, request_path), used.expires_at;
end;
$$;
comment on function api.api_token_authenticate(text, text) is
  'Authenticates an API token secret for a request path (every path, /mcp included): PT401 (invalid_token) when unknown, inactive or expired; '
  'otherwise counts the use (usage_count, last_used_at) and returns the owner, the community scope, whether a permission pattern matches the path, and the expiry.';
grant execute on function api.api_token_authenticate(text, text) to anon, authenticated;

-- ---------------------------------------------------------------------------
-- A password reset ends everything the account had given out
-- ---------------------------------------------------------------------------

create or replace function private.end_credentials(user_id uuid) returns void
  language plpgsql volatile
  set search_path = pg_catalog
  as $$
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
end;
$$;
comment on function private.end_credentials(uuid) is
  'Ends every credential of a user: sessions, API tokens, OAuth tokens and pending codes, MCP sessions (a password reset calls it).';
revoke all on function private.end_credentials(uuid) from public;

create or replace function api.auth_set_password(token text, password text)
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
  if auth_set_password.password is null or length(auth_set_password.password) < 8 then
    raise exception 'password must be at least 8 characters' using errcode = 'PT400', hint = 'weak_password';
  end if;

  update identity.password_tokens t set used_at = now()
   where t.user_id = link.user_id and t.used_at is null;
  update identity.users u set password_hash = identity.hash_password(auth_set_password.password)
   where u.id = link.user_id;
  -- Whoever held the account before holds nothing of it now.
  perform private.end_credentials(link.user_id);
  -- The person has claimed the account: the agent that created it no longer owns it.
  delete from app.agent_members a where a.member_id = link.user_id;
  return query select u.id, u.email from identity.users u where u.id = link.user_id;
end;
$$;
comment on function api.auth_set_password(text, text) is
  'Sets the password of a set-password link''s account, uses the link up, ends every credential of the account (sessions, API tokens, '
  'OAuth grants, MCP sessions) and ends an agent''s ownership of it. PT400 invalid_link / weak_password.';
grant execute on function api.auth_set_password(text, text) to anon, authenticated;

-- ---------------------------------------------------------------------------
-- The agent interface
-- ---------------------------------------------------------------------------

-- The agent: the signed-in user. A community-scoped API token is refused, and
-- so is an API token that no longer matches /mcp or has ended (the MCP server
-- refuses both first, with 403 and 401).
create or replace function private.mcp_agent() returns uuid
  language plpgsql stable
  security definer
  set search_path = pg_catalog
  as $$
declare
  agent uuid := auth.uid();
  token uuid := nullif(auth.jwt() ->> 'token_id', '')::uuid;
begin
  if agent is null then
    raise exception 'a personal credential is required' using errcode = 'PT401', hint = 'unauthorized';
  end if;
  if nullif(auth.jwt() ->> 'token_community_id', '') is not null then
    raise exception 'community-scoped tokens cannot use the agent interface; use a personal token'
      using errcode = 'PT403', hint = 'community_scope_violation';
  end if;
  if token is not null and not exists (
    select from app.api_tokens t
     where t.id = token and t.user_id = agent and t.active
       and (t.expires_at is null or t.expires_at > now())
       and private.api_token_path_allowed(t.permissions, '/mcp')
  ) then
    raise exception 'this API token''s permissions do not include /mcp' using errcode = 'PT403', hint = 'forbidden';
  end if;
  return agent;
end;
$$;
comment on function private.mcp_agent() is
  'The calling agent (auth.uid()); PT401 when signed out, PT403 for a community-scoped token or an API token whose permissions do not match /mcp (or that has ended).';
grant execute on function private.mcp_agent() to authenticated;

-- create_member: an account with no password, the signup data on its node, a
-- set-password e-mail queued. No password ever passes through the agent.
-- An e-mail that already has an account gets the same answer as a new one
-- (fresh ids that name nothing; the agent's data is not stored on the
-- account) and the person gets a link, at most 5 an hour per account
-- together with recovery e-mails. Only a member this agent created and that
-- is still unclaimed is answered as itself.
create or replace function api.mcp_member_create(email text, name text, data jsonb, public_url text) returns jsonb
  language plpgsql volatile
  security definer
  set search_path = pg_catalog
  as $$
declare
  agent uuid := private.mcp_agent();
  normalised_email text := lower(btrim(mcp_member_create.email));
  chosen_name text := nullif(btrim(mcp_member_create.name), '');
  existing identity.users;
  new_member uuid;
  recent_links integer;
begin
  if data is not null and jsonb_typeof(data) <> 'object' then
    raise exception 'data must be an object' using errcode = 'PT400', hint = 'invalid_arguments';
  end if;
  perform private.agent_quota_take('create_member');
  -- Creators of one e-mail (agents, platform registrations) take turns.
  perform pg_advisory_xact_lock(hashtextextended('identity.users:' || coalesce(normalised_email, ''), 0));
  select u.* into existing from identity.users u where u.email = normalised_email;
  if existing.id is null then
    new_member := private.create_account(mcp_member_create.email, null, mcp_member_create.name);
    update app.nodes n set data = coalesce(mcp_member_create.data, '{}')
      from app.profiles p
     where p.id = new_member and n.id = p.node_id;
    insert into app.agent_members (member_id, agent_id) values (new_member, agent);
    perform private.queue_password_email(new_member, 'invite', public_url);
    return private.mcp_member_json(new_member) || jsonb_build_object('set_password_email', 'queued');
  end if;

  -- The account exists. The same checks a new account would get.
  if chosen_name is not null and length(chosen_name) > 200 then
    raise exception 'name must be at most 200 characters' using errcode = 'PT400', hint = 'invalid_name';
  end if;
  select count(*) into recent_links
    from app.email_outbox o
   where o.user_id = existing.id and o.purpose in ('invite', 'recover')
     and o.created_at > now() - interval '1 hour';
  if recent_links < 5 then
    perform private.queue_password_email(existing.id,
                                         case when existing.password_hash is null then 'invite' else 'recover' end,
                                         public_url);
  end if;
  if exists (select from app.agent_members a where a.member_id = existing.id and a.agent_id = agent) then
    return private.mcp_member_json(existing.id) || jsonb_build_object('set_password_email', 'queued');
  end if;
  return jsonb_build_object(
    'id', gen_random_uuid(),
    'node_id', gen_random_uuid(),
    'email', normalised_email,
    'name', coalesce(chosen_name, split_part(normalised_email, '@', 1)),
    'data', coalesce(mcp_member_create.data, '{}'),
    'attributes', '{}'::jsonb,
    'password_set', false,
    'communities', '[]'::jsonb,
    'created_at', app.iso(now()),
    'updated_at', app.iso(now()),
    'set_password_email', 'queued');
end;
$$;
comment on function api.mcp_member_create(text, text, jsonb, text) is
  'MCP create_member: a password-less account (user, profile, node with data), owned by the calling agent; queues the set-password e-mail. '
  'An e-mail that has an account is answered the same way (fresh ids, nothing of the account) and its owner gets a link. PT429 rate_limited.';
grant execute on function api.mcp_member_create(text, text, jsonb, text) to authenticated;

-- Accounts claimed before this rule: a member who has set a password is no
-- longer the agent's.
delete from app.agent_members a
 using identity.users u
 where u.id = a.member_id and u.password_hash is not null;

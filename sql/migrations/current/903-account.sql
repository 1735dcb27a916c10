-- Made by `npm run db -- areas --diff` from sql/areas/account.sql: the statements that make
-- the migrated database what that file states. Each run writes it again:
-- edit the area file, not this one. Table changes go in a file of this
-- folder numbered below 900.

drop function if exists api.account_delete_request(text,text);

-- Bodies are checked once every function exists (the check validated them all).
set local check_function_bodies = off;

CREATE OR REPLACE FUNCTION api.account_delete_request(email text, public_url text, client_ip text, max_per_ip integer, window_seconds integer)
 RETURNS void
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog'
AS $function$
begin
  -- The same work whether or not the account exists: the lookup and the e-mail are a job's.
  perform private.email_link_enqueue('delete_account', account_delete_request.email, account_delete_request.public_url,
                                     account_delete_request.client_ip, account_delete_request.max_per_ip, account_delete_request.window_seconds);
end;
$function$;

CREATE OR REPLACE FUNCTION api.account_password_change(reauthentication text, password_hash text)
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
  if not private.password_hash_valid(account_password_change.password_hash) then
    raise exception 'password_hash must be a bcrypt hash of cost 10 or more' using errcode = 'PT400', hint = 'invalid_password_hash';
  end if;
  perform private.reauthenticated(me, account_password_change.reauthentication);
  update identity.users u set password_hash = account_password_change.password_hash where u.id = me;
  -- Every other session: its refresh tokens, access tokens and streams.
  with gone as (
    update identity.refresh_tokens r set revoked_at = now(), revoked_reason = 'logout'
     where r.user_id = me and r.revoked_at is null and r.session_id <> current_session
    returning r.session_id)
  select count(distinct g.session_id) into ended from gone g;
  -- OAuth grants: access and refresh tokens, and codes not exchanged yet.
  update identity.oauth_tokens o set revoked_at = now() where o.user_id = me and o.revoked_at is null;
  delete from identity.oauth_codes c where c.user_id = me and c.used_at is null;
  -- Proofs and e-mailed links made with the old password.
  delete from identity.reauthentications r where r.user_id = me;
  -- Signed storage URLs the account made (whoever holds one keeps no access).
  perform private.storage_signed_urls_end(me);
  return jsonb_build_object(
    'sessions_ended', ended,
    'api_tokens', (select count(*) from app.api_tokens t where t.user_id = me and t.active
                     and (t.expires_at is null or t.expires_at > now())));
end;
$function$;

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
  -- Signing out everywhere ends the signed storage URLs the account made too.
  if account_sign_out.scope = 'global' then
    perform private.storage_signed_urls_end(me);
  end if;
  return jsonb_build_object('sessions_ended', ended);
end;
$function$;

CREATE OR REPLACE FUNCTION private.account_delete(user_id uuid)
 RETURNS jsonb
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog'
AS $function$
declare
  account identity.users;
  node uuid;
  sole jsonb;
  member_of uuid[];
  sole_count integer;
begin
  -- One deletion of an account at a time; a second one finds nothing.
  select * into account from identity.users u where u.id = account_delete.user_id for update;
  if account.id is null then
    raise exception 'no such account' using errcode = 'P0002';
  end if;
  select p.node_id into node from app.profiles p where p.id = account.id;

  if node is not null then
    -- The node first: a membership being added (it holds a key-share lock on
    -- the node) commits before this goes on, or waits for it and then fails.
    perform from app.nodes n where n.id = node for update;
    -- The communities it manages, locked in id order (their membership
    -- changes take the same lock, private.tg_community_members__keep_a_manager),
    -- then each counted afresh: a community keeps a manager.
    perform from app.communities c
      where c.id in (select m.community_id from app.community_members m
                      where m.member_node_id = node and m.role = 'manager')
      order by c.id
      for update;
    select jsonb_agg(jsonb_build_object('id', c.id, 'name', c.name) order by c.name, c.id), count(*)
      into sole, sole_count
      from app.communities c
      join app.community_members m on m.community_id = c.id and m.member_node_id = node and m.role = 'manager'
     where not exists (select from app.community_members o
                        where o.community_id = c.id and o.role = 'manager' and o.member_node_id <> node);
    if sole_count > 0 then
      raise exception 'the account is the only manager of % %: make another member a manager first',
                      sole_count, case when sole_count = 1 then 'community' else 'communities' end
        using errcode = 'PT409', hint = 'last_manager_of_communities',
              detail = jsonb_build_object('communities', sole)::text;
    end if;
    member_of := array(select m.community_id from app.community_members m where m.member_node_id = node order by m.community_id);
    -- Integrators: member.deleted, ids only (member.left is not sent for these).
    perform private.webhook_member_deleted(account.id, node, account.email);
  end if;

  -- Every credential ends first, so that open streams and channels close at
  -- once (NOTIFY session_ended). The refresh tokens outlive the account
  -- without it (user_id set null by the delete below), so the sessions' access
  -- tokens stay refused until they expire.
  perform private.end_credentials(account.id);
  update identity.refresh_tokens r set user_agent = null, ip = null where r.user_id = account.id;
  -- What no foreign key ties to the account.
  delete from private.agent_tool_usage a where a.agent_id = account.id;
  -- What agents were answered about the address (placeholders) and the communities they handed it to.
  delete from app.agent_member_joins j
   where j.member_id = account.id
      or j.member_id in (select x.id from app.agent_member_placeholders x where x.email = account.email);
  delete from app.agent_member_placeholders x where x.email = account.email;
  delete from private.password_attempts a where a.email_key = account.email;
  delete from private.auth_failures f
   where (f.scope = 'email' and f.key = account.email)
      or (f.scope = 'email_client' and left(f.key, length(account.email) + 1) = account.email || ' ');
  -- Stored files: a job deletes them (and their bytes).
  perform private.account_files_delete(account.id);
  -- The node: memberships (member counts fall now, in this transaction),
  -- connections on both sides, what agents recorded on it.
  delete from app.nodes n where n.id = node;
  -- The account: identity, profile, hats, check-ins, event registrations,
  -- tasks, links and deals, API tokens and their test results, OAuth grants,
  -- set-password and account links, the calendar feed, MCP sessions and tool
  -- calls, agent ownership both ways, idempotency records, mail not sent.
  delete from identity.users u where u.id = account.id;
  return jsonb_build_object('user_id', account.id, 'node_id', node, 'communities_left', coalesce(cardinality(member_of), 0));
end;
$function$;

set local check_function_bodies to default;

grant execute on function api.account_delete_request(text,text,text,integer,integer) to anon, authenticated;

comment on function api.account_delete_request(text,text,text,integer,integer) is 'POST /account/delete (the web page): queues the job that e-mails the account with this address a single-use deletion link (1 hour; at most 5 an hour per account; private.email_link_send); does and answers the same whether or not the account exists. PT429 rate_limited past max_per_ip requests of the client address in window_seconds.';

comment on function api.account_password_change(text,text) is 'POST /api/mobile/account/password: once the current password was checked again (reauthentication), sets the new one (a bcrypt hash the process made) and ends every other session of the account, every OAuth grant (tokens and pending codes) and every signed storage URL it made; the calling session, the API tokens and the calendar feed stay. Returns sessions_ended and how many active API tokens the account has. PT400 invalid_password_hash; PT401 invalid_credentials without a valid proof; PT403 forbidden for an API token or an agent.';

comment on function api.account_sign_out(text) is 'POST /auth/v1/logout?scope=: ends the calling session (local), every session of the caller (global, which also ends every signed storage URL the caller made) or all but the calling one (others): their refresh tokens, access tokens and streams at once; returns how many. PT422 validation_error for another scope; PT403 forbidden for an API token or an agent.';

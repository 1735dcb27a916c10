--! Previous: sha1:c0ee48f609d0561bc156d6786e6552cf8c58c38e
--! Hash: sha1:d2ecdca374e1dd0b3ac2adbe06037ca9dd5f8bee
--! Message: storage-limits-account-links-operator-round

--! split: 100-storage-signed-uploads-once.sql
--------------------------------------------------------------------------------
-- A signed upload URL uploads one object, once (security review round 5).
--
-- The digest of each token that began an upload is kept until the token
-- expires: another upload with it is refused. An upload through it that is
-- refused or cut off gives the token back (its row goes with the upload).
--
-- Re-runnable (graphile-migrate applies current/ again on every change).
--------------------------------------------------------------------------------

create table if not exists app.storage_signed_uploads (
  -- identity.token_hash of the token (SHA-256).
  token_hash  bytea primary key,
  -- The token's own expiry: after it the row is pruned (the token is refused anyway).
  expires_at  timestamptz not null,
  used_at     timestamptz not null default now()
);
comment on table app.storage_signed_uploads is
  'Signed upload URLs used (or in use): the digest of each token that began an upload, until the token expires, so that it uploads once.';
create index if not exists storage_signed_uploads_expires_idx on app.storage_signed_uploads (expires_at);
alter table app.storage_signed_uploads enable row level security;

-- The token an upload through a signed upload URL began with (given back if the upload does not finish).
alter table app.storage_uploads add column if not exists signed_token_hash bytea;

--! split: 101-storage-render-cache.sql
--------------------------------------------------------------------------------
-- The cache of image transformations, bounded (security review round 5).
--
-- Every transformation kept in the byte store (renders/<uuid>/<variant>) has
-- a row here, recorded before it is made: the rules of
-- private.storage_render_begin and _stored keep at most a number of them per
-- object version and a total size (the oldest go first), and count the
-- transformations each client address has made in the current minute.
--
-- Re-runnable (graphile-migrate applies current/ again on every change).
--------------------------------------------------------------------------------

create table if not exists app.storage_renders (
  -- The object version's bytes (objects/<uuid>) the transformation is of.
  storage_key  text collate "C" not null,
  -- Its name among the version's transformations (images.ts renderVariant).
  variant      text collate "C" not null,
  -- Bytes; null while it is being made.
  size         bigint,
  created_at   timestamptz not null default now(),
  constraint storage_renders_pkey primary key (storage_key, variant)
);
comment on table app.storage_renders is
  'Transformations kept in the byte store (renders/...): per object version and in all at most what the gateway''s configuration says, the oldest evicted first.';
create index if not exists storage_renders_created_idx on app.storage_renders (created_at);
alter table app.storage_renders enable row level security;

create table if not exists app.storage_render_misses (
  client_ip     text primary key,
  window_start  timestamptz not null,
  misses        integer not null
);
comment on table app.storage_render_misses is
  'Transformations made (not served from the cache) per client address in its current one-minute window.';
alter table app.storage_render_misses enable row level security;

--! split: 102-auth-email-link-throttle.sql
--------------------------------------------------------------------------------
-- The doors that e-mail a link to whoever has an address (recover, the
-- deletion page) are counted per client address like the doors that set a
-- password (security review round 5): they now answer before anything is
-- looked up and queue a job, so a flood must not fill the job queue.
--------------------------------------------------------------------------------

alter table private.auth_failures drop constraint if exists auth_failures_scope_check;
-- Safe: private.auth_failures holds at most a day of rows (older ones are pruned every 10 minutes); the validating scan is short.
-- squawk-ignore constraint-missing-not-valid
alter table private.auth_failures add constraint auth_failures_scope_check
  check (scope in ('email', 'email_client', 'ip', 'refresh', 'verify', 'password_set', 'email_link'));
comment on table private.auth_failures is
  'Failed sign-ins (per e-mail and client address, per e-mail, per client IP), failed refresh/verify attempts (per client IP), '
  'requests at the doors that set a password (password_set, per client IP) and at the doors that e-mail a link (email_link, per client IP), for throttling.';

--! split: 103-agent-member-placeholders.sql
--------------------------------------------------------------------------------
-- Nothing an agent is told says whether an e-mail has an account (security
-- review round 5): create_member for an address that has one (and is not the
-- agent's own member) gives the agent a placeholder member, which the member
-- tools answer as they answer a member it created; it reaches no account.
-- An agent's member joins a community only when the person claims the
-- account (sets a password): until then the join waits here, for a member
-- and a placeholder alike, so no community changes before then.
--
-- Re-runnable (graphile-migrate applies current/ again on every change).
--------------------------------------------------------------------------------

create table if not exists app.agent_member_placeholders (
  -- The ids the agent was given (they name no account and no node).
  id          uuid primary key default gen_random_uuid(),
  node_id     uuid not null default gen_random_uuid(),
  agent_id    uuid not null references identity.users (id) on delete cascade,
  -- The address the agent gave (lower case), which has an account.
  email       text not null,
  name        text not null,
  data        jsonb not null default '{}',
  attributes  jsonb not null default '{}' constraint agent_member_placeholders_attributes_check check (jsonb_typeof(attributes) = 'object'),
  created_at  timestamptz not null default now(),
  updated_at  timestamptz not null default now(),
  constraint agent_member_placeholders_agent_email_key unique (agent_id, email)
);
comment on table app.agent_member_placeholders is
  'What create_member answered an agent for an address that already had an account: a member object answered as a created member is (get_member, set_member_attributes, add_member_to_community), which reaches no account.';
create index if not exists agent_member_placeholders_email_idx on app.agent_member_placeholders (email);
alter table app.agent_member_placeholders enable row level security;

create table if not exists app.agent_member_joins (
  -- An agent member's user id (app.agent_members), or a placeholder's id.
  member_id     uuid not null,
  community_id  uuid not null references app.communities (id) on delete cascade,
  agent_id      uuid not null references identity.users (id) on delete cascade,
  created_at    timestamptz not null default now(),
  constraint agent_member_joins_pkey primary key (member_id, community_id)
);
comment on table app.agent_member_joins is
  'Communities an agent handed its member to (add_member_to_community): the member joins them when the person claims the account.';
create index if not exists agent_member_joins_agent_idx on app.agent_member_joins (agent_id);
alter table app.agent_member_joins enable row level security;

--! split: 104-webhook-delivery-url.sql
--------------------------------------------------------------------------------
-- A delivery goes to the URL its endpoint had when it was queued, never to one
-- the endpoint was changed to (security review round 5): after a URL change,
-- `recover` sent every old failed delivery to the new URL, so a manager could
-- aim a burst of them at a third party. And `recover` is counted per endpoint
-- (at most 10,000 deliveries an hour).
--
-- Re-runnable (graphile-migrate applies current/ again on every change).
--------------------------------------------------------------------------------

alter table app.webhook_deliveries add column if not exists url text;
comment on column app.webhook_deliveries.url is
  'The endpoint''s URL when the delivery was queued (set on insert): it is sent there only; once the endpoint''s URL changes, it is not sent (nor recovered or replayed) to the new one.';
-- Deliveries queued before: the URL their endpoint has now (pruned after 30 days, so a bounded update).
update app.webhook_deliveries d set url = e.url
  from app.webhook_endpoints e
 where e.id = d.endpoint_id and d.url is null;

alter table app.webhook_endpoints add column if not exists recover_window_start timestamptz;
alter table app.webhook_endpoints add column if not exists recovered_in_window integer not null default 0;
comment on column app.webhook_endpoints.recovered_in_window is
  'Deliveries sent again by `recover` since recover_window_start (an hour''s window): at most 10,000 an hour per endpoint.';

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
  -- As a password change: every other session ends; this one stays. Signed storage URLs end.
  update identity.refresh_tokens r set revoked_at = now(), revoked_reason = 'logout'
   where r.user_id = me and r.revoked_at is null and r.session_id <> current_session;
  perform private.storage_signed_urls_end(me);
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
  -- The person has claimed the account: the agent that created it no longer owns it; it joins what it was handed to.
  perform private.agent_member_claim(link.user_id);
  select * into started from private.start_session(link.user_id, auth_recovery_verify.user_agent, auth_recovery_verify.client_ip);
  delete from identity.recovery_sessions s where s.user_id = link.user_id;
  insert into identity.recovery_sessions (session_id, user_id, expires_at) values (started.session_id, link.user_id, now() + interval '1 hour');
  return query select u.id, u.email, started.refresh_token, started.session_id from identity.users u where u.id = link.user_id;
end;
$function$;

CREATE OR REPLACE FUNCTION private.end_credentials(user_id uuid)
 RETURNS void
 LANGUAGE plpgsql
 SET search_path TO 'pg_catalog'
AS $function$
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
$function$;

set local check_function_bodies to default;

comment on function api.auth_recovery_password_set(text) is 'PUT /auth/v1/user {password} without the current password: allowed once, within the hour, in a session a recovery link started (api.auth_recovery_verify); sets the bcrypt hash the gateway made and ends every other session and every signed storage URL. PT400 current_password_required in any other session; PT400 invalid_password_hash.';

--! split: 902-passwords.sql
-- Made by `npm run db -- areas --diff` from sql/areas/passwords.sql: the statements that make
-- the migrated database what that file states. Each run writes it again:
-- edit the area file, not this one. Table changes go in a file of this
-- folder numbered below 900.

drop function if exists api.auth_recover(text,text);

-- Bodies are checked once every function exists (the check validated them all).
set local check_function_bodies = off;

CREATE OR REPLACE FUNCTION api.auth_recover(email text, public_url text, client_ip text, max_per_ip integer, window_seconds integer)
 RETURNS void
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog'
AS $function$
begin
  -- The request does the same work whether or not the account exists: the
  -- lookup and the e-mail are a job's (private.email_link_send).
  perform private.email_link_enqueue('recover', auth_recover.email, auth_recover.public_url,
                                     auth_recover.client_ip, auth_recover.max_per_ip, auth_recover.window_seconds);
end;
$function$;

CREATE OR REPLACE FUNCTION api.auth_set_password(token text, password_hash text)
 RETURNS TABLE(user_id uuid, email text)
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog'
AS $function$
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
  -- The person has claimed the account: the agent that created it no longer owns it; it joins what it was handed to.
  perform private.agent_member_claim(link.user_id);
  return query select u.id, u.email from identity.users u where u.id = link.user_id;
end;
$function$;

CREATE OR REPLACE FUNCTION private.email_link_enqueue(kind text, email text, public_url text, client_ip text, max_per_ip integer, window_seconds integer)
 RETURNS void
 LANGUAGE plpgsql
 SET search_path TO 'pg_catalog'
AS $function$
declare
  wait integer;
  address text := lower(btrim(email_link_enqueue.email));
begin
  if email_link_enqueue.kind not in ('recover', 'delete_account') then
    raise exception 'unknown link kind %', email_link_enqueue.kind using errcode = '22023';
  end if;
  if email_link_enqueue.client_ip is not null then
    -- Requests of one address take turns, so a burst cannot slip past the count.
    perform pg_advisory_xact_lock(hashtextextended('auth_failures:email_link:' || email_link_enqueue.client_ip, 0));
    wait := private.auth_throttle_wait('email_link', email_link_enqueue.client_ip, email_link_enqueue.max_per_ip, email_link_enqueue.window_seconds);
    if wait > 0 then
      raise exception 'too many e-mailed links asked for from this address, try again later'
        using errcode = 'PT429', hint = 'rate_limited', detail = jsonb_build_object('retry_after', wait)::text;
    end if;
    perform private.auth_throttle_record('email_link', email_link_enqueue.client_ip);
  end if;
  -- Nothing here reads whether the address has an account. One job per
  -- address and kind waits at a time (a repeat replaces it).
  perform private.enqueue_job('email_link',
    jsonb_build_object('kind', email_link_enqueue.kind, 'email', address, 'public_url', email_link_enqueue.public_url),
    max_attempts => 5, job_key => 'email_link:' || email_link_enqueue.kind || ':' || address);
end;
$function$;

CREATE OR REPLACE FUNCTION private.email_link_send(kind text, email text, public_url text)
 RETURNS void
 LANGUAGE plpgsql
 SET search_path TO 'pg_catalog'
AS $function$
declare
  account_id uuid;
begin
  select u.id into account_id from identity.users u where u.email = lower(btrim(email_link_send.email));
  if account_id is null then
    return;
  end if;
  if email_link_send.kind = 'recover' then
    -- At most 5 links an hour per account, so the address cannot be flooded through this door.
    if (select count(*) from app.email_outbox o
         where o.user_id = account_id and o.purpose = 'recover'
           and o.created_at > now() - interval '1 hour') < 5 then
      perform private.queue_password_email(account_id, 'recover', email_link_send.public_url);
    end if;
  elsif email_link_send.kind = 'delete_account' then
    perform private.account_delete_link_queue(account_id, email_link_send.public_url);
  else
    raise exception 'unknown link kind %', email_link_send.kind using errcode = '22023';
  end if;
end;
$function$;

set local check_function_bodies to default;

grant execute on function api.auth_recover(text,text,text,integer,integer) to anon, authenticated;

comment on function api.auth_recover(text,text,text,integer,integer) is 'POST /api/auth/recover and /auth/v1/recover: queues the job that e-mails a set-password link when the account exists (at most 5 an hour; private.email_link_send); does and answers the same either way. PT429 rate_limited past max_per_ip requests of the client address in window_seconds (detail: retry_after).';

comment on function private.email_link_enqueue(text,text,text,text,integer,integer) is 'The request half of a door that e-mails a link to whoever has an address (kind recover: POST /api/auth/recover, /auth/v1/recover; delete_account: POST /account/delete): counts the request per client address (PT429 rate_limited past max_per_ip in window_seconds, detail retry_after) and queues the email_link job, the same whether or not an account has the address; the job (private.email_link_send) looks it up.';

comment on function private.email_link_send(text,text,text) is 'The email_link job (gateway/jobs/mail.ts), after the request answered: when an account has the address, queues its e-mail (kind recover: a set-password link, at most 5 an hour; delete_account: a deletion link, private.account_delete_link_queue); nothing otherwise.';

--! split: 903-account.sql
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

--! split: 912-agents.sql
-- Made by `npm run db -- areas --diff` from sql/areas/agents.sql: the statements that make
-- the migrated database what that file states. Each run writes it again:
-- edit the area file, not this one. Table changes go in a file of this
-- folder numbered below 900.

drop function if exists private.mcp_own_member(uuid);

-- Bodies are checked once every function exists (the check validated them all).
set local check_function_bodies = off;

CREATE OR REPLACE FUNCTION api.mcp_member_add_to_community(member_id uuid, community_id uuid)
 RETURNS jsonb
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog'
AS $function$
declare
  member uuid;
  community app.communities;
  asked timestamptz;
  added boolean := true;
begin
  perform private.mcp_agent();
  member := private.mcp_member_of_agent(mcp_member_add_to_community.member_id);
  community := private.mcp_managed_community(mcp_member_add_to_community.community_id);
  perform private.agent_quota_take('add_member_to_community');
  if exists (select from app.agent_members a join app.profiles p on p.id = a.member_id where a.member_id = member and p.node_id is null) then
    raise exception 'the member has no node' using errcode = 'PT409', hint = 'user_has_no_node';
  end if;
  -- The member joins when the person claims the account (private.agent_member_claim):
  -- until then nothing of the community changes, for a member and a placeholder alike.
  insert into app.agent_member_joins as j (member_id, community_id, agent_id)
    values (member, community.id, auth.uid())
    on conflict on constraint agent_member_joins_pkey do nothing
    returning j.created_at into asked;
  if asked is null then
    added := false;
    select j.created_at into asked from app.agent_member_joins j where j.member_id = member and j.community_id = community.id;
  end if;
  return jsonb_build_object(
    'member_id', member,
    'community_id', community.id,
    'role', 'member',
    'joined_at', app.iso(asked),
    'added', added,
    'member_count', (select c.member_count from app.communities c where c.id = community.id));
end;
$function$;

CREATE OR REPLACE FUNCTION api.mcp_member_create(email text, name text, data jsonb, public_url text)
 RETURNS jsonb
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog'
AS $function$
declare
  agent uuid := private.mcp_agent();
  normalised_email text := lower(btrim(mcp_member_create.email));
  chosen_name text := nullif(btrim(mcp_member_create.name), '');
  existing identity.users;
  new_member uuid;
  placeholder uuid;
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
  -- Anyone else's account: a placeholder, which the member tools answer as
  -- they answer a member the agent created (the same placeholder again for
  -- the same address), and which reaches no account.
  insert into app.agent_member_placeholders as p (agent_id, email, name, data)
    values (agent, normalised_email, coalesce(chosen_name, split_part(normalised_email, '@', 1)), coalesce(mcp_member_create.data, '{}'))
    on conflict on constraint agent_member_placeholders_agent_email_key do update set email = excluded.email
    returning p.id into placeholder;
  return private.mcp_member_json(placeholder) || jsonb_build_object('set_password_email', 'queued');
end;
$function$;

CREATE OR REPLACE FUNCTION api.mcp_member_get(member_id uuid)
 RETURNS jsonb
 LANGUAGE plpgsql
 STABLE SECURITY DEFINER
 SET search_path TO 'pg_catalog'
AS $function$
begin
  perform private.mcp_agent();
  return private.mcp_member_json(private.mcp_member_of_agent(mcp_member_get.member_id, false));
end;
$function$;

CREATE OR REPLACE FUNCTION api.mcp_member_set_attributes(member_id uuid, attributes jsonb)
 RETURNS jsonb
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog'
AS $function$
declare
  member uuid;
  removed text[];
begin
  perform private.mcp_agent();
  if attributes is null or jsonb_typeof(attributes) <> 'object' then
    raise exception 'attributes must be an object' using errcode = 'PT400', hint = 'invalid_arguments';
  end if;
  member := private.mcp_member_of_agent(mcp_member_set_attributes.member_id);
  perform private.agent_quota_take('set_member_attributes');
  removed := array(select k.key from jsonb_each(mcp_member_set_attributes.attributes) k where k.value = 'null'::jsonb);
  update app.agent_members a
     set attributes = (a.attributes || mcp_member_set_attributes.attributes) - removed
   where a.member_id = member;
  update app.agent_member_placeholders p
     set attributes = (p.attributes || mcp_member_set_attributes.attributes) - removed
   where p.id = member;
  return private.mcp_member_json(member);
end;
$function$;

CREATE OR REPLACE FUNCTION private.agent_member_claim(user_id uuid)
 RETURNS void
 LANGUAGE plpgsql
 SET search_path TO 'pg_catalog'
AS $function$
declare
  node uuid;
begin
  -- The communities an agent handed the member to: joined now.
  select p.node_id into node from app.profiles p where p.id = agent_member_claim.user_id;
  if node is not null then
    insert into app.community_members (community_id, member_node_id, role)
      select j.community_id, node, 'member' from app.agent_member_joins j where j.member_id = agent_member_claim.user_id
      on conflict on constraint community_members_pkey do nothing;
  end if;
  delete from app.agent_member_joins j where j.member_id = agent_member_claim.user_id;
  -- The agent that created it no longer owns it.
  delete from app.agent_members a where a.member_id = agent_member_claim.user_id;
end;
$function$;

CREATE OR REPLACE FUNCTION private.mcp_member_json(member_id uuid)
 RETURNS jsonb
 LANGUAGE sql
 STABLE SECURITY DEFINER
 SET search_path TO 'pg_catalog'
AS $function$
    -- The communities it was handed to (and, for members added before joins
    -- waited for the claim, those its node is in), of those the caller manages.
    with handed as (
      select c.id, c.name, 'member'::text as role, j.created_at as joined_at
        from app.agent_member_joins j join app.communities c on c.id = j.community_id
       where j.member_id = mcp_member_json.member_id
      union
      select c.id, c.name, cm.role, cm.joined_at
        from app.profiles p
        join app.community_members cm on cm.member_node_id = p.node_id
        join app.communities c on c.id = cm.community_id
       where p.id = mcp_member_json.member_id
    ), communities as (
      select coalesce(jsonb_agg(jsonb_build_object('community_id', h.id, 'name', h.name, 'role', h.role, 'joined_at', app.iso(h.joined_at))
                                order by h.joined_at, h.id), '[]') as list
        from handed h
       where exists (select from app.community_members mine
                      where mine.community_id = h.id and mine.role = 'manager'
                        and mine.member_node_id = app.my_node_id())
    )
    select jsonb_build_object(
      'id', p.id,
      'node_id', p.node_id,
      'email', u.email,
      'name', p.name,
      'data', coalesce(n.data, '{}'),
      'attributes', a.attributes,
      'password_set', u.password_hash is not null,
      'communities', (select list from communities),
      'created_at', app.iso(a.created_at),
      'updated_at', app.iso(a.updated_at))
    from app.agent_members a
    join app.profiles p on p.id = a.member_id
    join identity.users u on u.id = a.member_id
    left join app.nodes n on n.id = p.node_id
   where a.member_id = mcp_member_json.member_id
    union all
    select jsonb_build_object(
      'id', x.id,
      'node_id', x.node_id,
      'email', x.email,
      'name', x.name,
      'data', x.data,
      'attributes', x.attributes,
      'password_set', false,
      'communities', (select list from communities),
      'created_at', app.iso(x.created_at),
      'updated_at', app.iso(x.updated_at))
    from app.agent_member_placeholders x
   where x.id = mcp_member_json.member_id
  $function$;

CREATE OR REPLACE FUNCTION private.mcp_member_of_agent(member_ref uuid, for_update boolean DEFAULT true)
 RETURNS uuid
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog'
AS $function$
declare
  found_member uuid;
begin
  if for_update then
    select a.member_id into found_member
      from app.agent_members a
      join app.profiles p on p.id = a.member_id
     where (a.member_id = member_ref or p.node_id = member_ref) and a.agent_id = auth.uid()
     limit 1
     for update of a;
    if found_member is null then
      select x.id into found_member
        from app.agent_member_placeholders x
       where (x.id = member_ref or x.node_id = member_ref) and x.agent_id = auth.uid()
       limit 1
       for update;
    end if;
  else
    select a.member_id into found_member
      from app.agent_members a
      join app.profiles p on p.id = a.member_id
     where (a.member_id = member_ref or p.node_id = member_ref) and a.agent_id = auth.uid()
     limit 1;
    if found_member is null then
      select x.id into found_member
        from app.agent_member_placeholders x
       where (x.id = member_ref or x.node_id = member_ref) and x.agent_id = auth.uid()
       limit 1;
    end if;
  end if;
  if found_member is null then
    raise exception 'member not found' using errcode = 'PT404', hint = 'not_found';
  end if;
  return found_member;
end;
$function$;

set local check_function_bodies to default;

drop trigger if exists _100_set_updated_at on app.agent_member_placeholders;
CREATE TRIGGER _100_set_updated_at BEFORE UPDATE ON app.agent_member_placeholders FOR EACH ROW EXECUTE FUNCTION private.tg__set_updated_at();

grant execute on function private.mcp_member_of_agent(uuid,boolean) to authenticated;

comment on function api.mcp_member_add_to_community(uuid,uuid) is 'MCP add_member_to_community: hands a member the caller created to a community the caller manages; the member joins it when the person claims the account (sets a password: private.agent_member_claim), so the community, its member count and its roster do not change before then. joined_at: when it was asked. PT404 not_found for either; PT409 user_has_no_node; PT429 rate_limited.';

comment on function api.mcp_member_create(text,text,jsonb,text) is 'MCP create_member: a password-less account (user, profile, node with data), owned by the calling agent; queues the set-password e-mail. An e-mail that has an account (not the agent''s own member) is answered the same way with a placeholder member (app.agent_member_placeholders: ids that name nothing, which the member tools answer as they answer a created member), and its owner gets a link. PT429 rate_limited.';

comment on function api.mcp_member_get(uuid) is 'MCP get_member: a member the caller created (user id or node id; a placeholder alike): profile, signup data, attributes, the communities it was handed to. PT404 not_found otherwise.';

comment on function api.mcp_member_set_attributes(uuid,jsonb) is 'MCP set_member_attributes: merges attributes (top-level keys; null removes a key) onto a member the caller created (or a placeholder). PT404 not_found; PT429 rate_limited.';

comment on function private.agent_member_claim(uuid) is 'The person claimed the account (set a password through a set-password or recovery link): it joins the communities its agent handed it to, and the agent no longer owns it (every member tool answers not_found for it).';

comment on function private.mcp_member_json(uuid) is 'The Agent-interface member object of a member an agent created, or of a placeholder in the same shape: id, node_id, email, name, data, attributes, password_set, communities (handed to, or joined; of those the caller manages), timestamps.';

comment on function private.mcp_member_of_agent(uuid,boolean) is 'The id of the member (by user id or node id) the signed-in agent created, or of its placeholder (by its id or node id), locked when for_update; PT404 not_found otherwise (another agent''s, a claimed account, an unknown id).';

--! split: 916-webhooks.sql
-- Made by `npm run db -- areas --diff` from sql/areas/webhooks.sql: the statements that make
-- the migrated database what that file states. Each run writes it again:
-- edit the area file, not this one. Table changes go in a file of this
-- folder numbered below 900.

-- Bodies are checked once every function exists (the check validated them all).
set local check_function_bodies = off;

CREATE OR REPLACE FUNCTION api.webhook_delivery_replay(id uuid, delivery_id uuid)
 RETURNS jsonb
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog'
AS $function$
declare
  target app.webhook_endpoints := private.webhook_endpoint_of_caller(webhook_delivery_replay.id, false);
  replayed app.webhook_deliveries;
begin
  if not target.active then
    raise exception 'the webhook is not active' using errcode = 'PT409', hint = 'webhook_inactive';
  end if;
  select * into replayed from app.webhook_deliveries d
   where d.id = webhook_delivery_replay.delivery_id and d.endpoint_id = target.id;
  if replayed.id is null then
    raise exception 'delivery not found' using errcode = 'PT404', hint = 'delivery_not_found';
  end if;
  if replayed.url is distinct from target.url then
    raise exception 'the delivery was queued for an earlier URL of the endpoint: it is not sent to the new one'
      using errcode = 'PT409', hint = 'webhook_url_changed';
  end if;
  -- A new round of attempts now (retries counted afresh), same webhook-id.
  update app.webhook_deliveries d
     set status = 'pending', next_attempt_at = now(), round_base = d.attempts
   where d.id = replayed.id
  returning * into replayed;
  update app.webhook_endpoints e set backoff_until = null where e.id = target.id and e.backoff_until is not null;
  perform private.webhook_schedule(target.id);
  return private.webhook_delivery_json(replayed);
end;
$function$;

CREATE OR REPLACE FUNCTION api.webhook_recover(id uuid, since timestamp with time zone, until timestamp with time zone DEFAULT NULL::timestamp with time zone)
 RETURNS jsonb
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog'
AS $function$
declare
  -- Locked: one endpoint's recoveries take turns, so the hour's count holds.
  target app.webhook_endpoints := private.webhook_endpoint_of_caller(webhook_recover.id, true);
  recovered integer;
  remaining integer;
  window_start timestamptz;
  allowed integer;
begin
  if not target.active then
    raise exception 'the webhook is not active' using errcode = 'PT409', hint = 'webhook_inactive';
  end if;
  if since is null then
    raise exception 'since is required' using errcode = 'PT422', hint = 'validation_error';
  end if;
  -- At most 10,000 deliveries sent again an hour per endpoint.
  window_start := case when target.recover_window_start > now() - interval '1 hour' then target.recover_window_start else now() end;
  allowed := 10000 - case when window_start = target.recover_window_start then target.recovered_in_window else 0 end;
  if allowed <= 0 then
    raise exception 'at most 10,000 deliveries are recovered an hour per endpoint, try again later'
      using errcode = 'PT429', hint = 'rate_limited',
            detail = jsonb_build_object('retry_after', greatest(1, ceil(extract(epoch from window_start + interval '1 hour' - now())))::integer)::text;
  end if;
  -- The failed deliveries queued in [since, until) for the URL the endpoint
  -- has now (never those queued for an earlier one), oldest first, at most
  -- 10,000 a call: each a new round of attempts now, same webhook-id and
  -- body. They are sent oldest first, before anything queued after them.
  update app.webhook_deliveries d
     set status = 'pending', next_attempt_at = now(), round_base = d.attempts
   where d.id = any (array(
           select w.id from app.webhook_deliveries w
            where w.endpoint_id = target.id and w.status = 'failed' and w.url = target.url
              and w.created_at >= webhook_recover.since
              and (webhook_recover.until is null or w.created_at < webhook_recover.until)
            order by w.created_at, w.id
            limit allowed));
  get diagnostics recovered = row_count;
  select count(*) into remaining from app.webhook_deliveries w
   where w.endpoint_id = target.id and w.status = 'failed' and w.url = target.url
     and w.created_at >= webhook_recover.since
     and (webhook_recover.until is null or w.created_at < webhook_recover.until);
  update app.webhook_endpoints e
     set recover_window_start = window_start,
         recovered_in_window = case when window_start = target.recover_window_start then e.recovered_in_window else 0 end + recovered,
         backoff_until = case when recovered > 0 then null else e.backoff_until end
   where e.id = target.id;
  if recovered > 0 then
    perform private.webhook_schedule(target.id);
  end if;
  return jsonb_build_object('recovered', recovered, 'remaining', remaining);
end;
$function$;

CREATE OR REPLACE FUNCTION api.webhook_update(id uuid, patch jsonb)
 RETURNS jsonb
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog'
AS $function$
declare
  target app.webhook_endpoints := private.webhook_endpoint_of_caller(webhook_update.id, true);
  new_url text;
  new_events text[];
  new_description text;
  new_active boolean;
  extra text;
begin
  if jsonb_typeof(patch) is distinct from 'object' then
    raise exception 'the body must be an object' using errcode = 'PT422', hint = 'validation_error';
  end if;
  select k into extra from jsonb_object_keys(patch) k where k not in ('url', 'events', 'active', 'description') limit 1;
  if extra is not null then
    raise exception 'unknown field %', extra using errcode = 'PT422', hint = 'validation_error';
  end if;
  if patch ? 'url' then
    if jsonb_typeof(patch -> 'url') is distinct from 'string' then
      raise exception 'url must be a string' using errcode = 'PT422', hint = 'validation_error';
    end if;
    new_url := patch ->> 'url';
  end if;
  if patch ? 'events' then
    if jsonb_typeof(patch -> 'events') is distinct from 'array'
       or exists (select from jsonb_array_elements(patch -> 'events') v where jsonb_typeof(v) <> 'string') then
      raise exception 'events must be an array of event types' using errcode = 'PT422', hint = 'validation_error';
    end if;
    new_events := array(select distinct v from jsonb_array_elements_text(patch -> 'events') v order by v);
  end if;
  if patch ? 'active' then
    if jsonb_typeof(patch -> 'active') is distinct from 'boolean' then
      raise exception 'active must be true or false' using errcode = 'PT422', hint = 'validation_error';
    end if;
    new_active := (patch ->> 'active')::boolean;
  end if;
  if patch ? 'description' and jsonb_typeof(patch -> 'description') not in ('string', 'null') then
    raise exception 'description must be a string or null' using errcode = 'PT422', hint = 'validation_error';
  end if;
  new_description := nullif(btrim(patch ->> 'description'), '');
  perform private.webhook_check(new_url, new_events, new_description);

  update app.webhook_endpoints e
     set url = coalesce(new_url, e.url),
         events = coalesce(new_events, e.events),
         active = coalesce(new_active, e.active),
         description = case when patch ? 'description' then new_description else e.description end,
         disabled_reason = case when coalesce(new_active, e.active) then null else e.disabled_reason end,
         updated_at = now()
   where e.id = target.id
  returning * into target;
  -- What waits for the old URL does not follow the new one: it fails (and is
  -- never recovered or replayed to the new URL).
  update app.webhook_deliveries w
     set status = 'failed', next_attempt_at = null, last_error = 'the endpoint''s URL changed after it was queued'
   where w.endpoint_id = target.id and w.status in ('pending', 'retrying') and w.url is distinct from target.url;
  return private.webhook_endpoint_json(target);
end;
$function$;

CREATE OR REPLACE FUNCTION private.webhook_delivery_next(endpoint_id uuid)
 RETURNS TABLE(delivery_id uuid, url text, secrets text[], webhook_id text, body text, attempt integer)
 LANGUAGE plpgsql
 SET search_path TO 'pg_catalog'
AS $function$
declare
  e app.webhook_endpoints;
  d app.webhook_deliveries;
begin
  select * into e from app.webhook_endpoints w where w.id = webhook_delivery_next.endpoint_id;
  if e.id is null then
    return;
  end if;
  if not e.active then
    -- A paused or turned-off endpoint: what was waiting fails (replay it once it is on again).
    update app.webhook_deliveries w
       set status = 'failed', next_attempt_at = null, last_error = 'endpoint inactive'
     where w.endpoint_id = e.id and w.status in ('pending', 'retrying');
    return;
  end if;
  -- Backing off: nothing is sent before backoff_until (the deliveries keep their attempts).
  if e.backoff_until > clock_timestamp() then
    return;
  end if;
  -- The oldest due delivery: in the order of the changes. One queued for an
  -- earlier URL of the endpoint (a change that raced the URL's) fails instead.
  loop
    select * into d from app.webhook_deliveries w
     where w.endpoint_id = e.id and w.status in ('pending', 'retrying') and w.next_attempt_at <= clock_timestamp()
     order by w.created_at, w.id
     limit 1
     for update;
    if d.id is null then
      return;
    end if;
    exit when d.url is not distinct from e.url;
    update app.webhook_deliveries w
       set status = 'failed', next_attempt_at = null, last_error = 'the endpoint''s URL changed after it was queued'
     where w.id = d.id;
  end loop;
  update app.webhook_deliveries w set attempts = w.attempts + 1 where w.id = d.id returning * into d;
  return query select d.id, e.url,
                      array_remove(array[e.secret, case when e.previous_secret_expires_at > now() then e.previous_secret end], null),
                      private.webhook_message_id(d.id), private.webhook_body(d)::text, d.attempts;
end;
$function$;

CREATE OR REPLACE FUNCTION private.webhook_delivery_url()
 RETURNS trigger
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog'
AS $function$
begin
  if new.url is null then
    select e.url into new.url from app.webhook_endpoints e where e.id = new.endpoint_id;
  end if;
  return new;
end;
$function$;

set local check_function_bodies to default;

drop trigger if exists _100_url on app.webhook_deliveries;
CREATE TRIGGER _100_url BEFORE INSERT ON app.webhook_deliveries FOR EACH ROW EXECUTE FUNCTION private.webhook_delivery_url();

comment on function api.webhook_delivery_replay(uuid,uuid) is 'POST /api/v1/platform/webhooks/{id}/deliveries/{delivery_id}/replay: sends the delivery again now (ending a back-off), with the same webhook-id and body, to the URL it was queued for. PT404 webhook_not_found / delivery_not_found; PT403; PT409 webhook_inactive, or webhook_url_changed for a delivery queued for an earlier URL of the endpoint.';

comment on function api.webhook_recover(uuid,timestamp with time zone,timestamp with time zone) is 'POST /api/v1/platform/webhooks/{id}/recover: sends again every failed delivery queued for the endpoint''s current URL at or after since (and before until), oldest first, ending a back-off; at most 10,000 deliveries an hour per endpoint ({recovered, remaining}: call again while remaining > 0). PT404; PT403; PT409 webhook_inactive; PT422 without since; PT429 rate_limited past the hour''s 10,000 (detail: retry_after).';

comment on function api.webhook_update(uuid,jsonb) is 'PATCH /api/v1/platform/webhooks/{id}: changes url, events, active and description (the keys given). A new url: what waits for the old one fails (deliveries go to the URL they were queued for only). PT404 webhook_not_found; PT403; PT422.';

comment on function private.webhook_delivery_next(uuid) is 'The webhook_deliver task, holding the endpoint''s lock: its oldest due delivery (URL, the secrets that sign it, webhook-id, body) with one more attempt counted; nothing when none is due, the endpoint backs off or is gone (inactive: its waiting deliveries fail). A delivery queued for an earlier URL of the endpoint fails instead of being sent.';

comment on function private.webhook_delivery_url() is 'Trigger: a delivery records the URL its endpoint has when it is queued; it is sent there only.';

--! split: 917-storage.sql
-- Made by `npm run db -- areas --diff` from sql/areas/storage.sql: the statements that make
-- the migrated database what that file states. Each run writes it again:
-- edit the area file, not this one. Table changes go in a file of this
-- folder numbered below 900.

-- Bodies are checked once every function exists (the check validated them all).
set local check_function_bodies = off;

CREATE OR REPLACE FUNCTION api.storage_sign(bucket_id text, names text[], expires_in integer, transform jsonb DEFAULT NULL::jsonb)
 RETURNS jsonb
 LANGUAGE plpgsql
 STABLE SECURITY DEFINER
 SET search_path TO 'pg_catalog'
AS $function$
declare
  caller uuid := auth.uid();
  b app.storage_buckets := private.storage_bucket(storage_sign.bucket_id);
  result jsonb := '[]'::jsonb;
  object_name text;
  readable boolean;
  route text := case when storage_sign.transform is null then '/object/sign/' else '/render/image/sign/' end;
begin
  if storage_sign.expires_in is null or storage_sign.expires_in not between 1 and 31536000 then
    raise exception 'expiresIn must be 1 to 31536000 seconds' using errcode = 'PT400', hint = 'bad_request';
  end if;
  foreach object_name in array storage_sign.names loop
    readable := (b.public or private.storage_folder_owned(b.id, object_name, caller))
                and exists (select from app.storage_objects o where o.bucket_id = b.id and o.name = object_name);
    result := result || pg_catalog.jsonb_build_array(pg_catalog.jsonb_build_object(
      'path', object_name,
      'error', case when readable then null else 'Either the object does not exist or you do not have access to it' end,
      'signedURL', case when readable then
        route || b.id || '/' || private.storage_url_path(object_name) || '?token=' || private.storage_token(pg_catalog.jsonb_strip_nulls(pg_catalog.jsonb_build_object(
          'scope', 'download', 'url', b.id || '/' || object_name, 'sub', caller, 'transform', storage_sign.transform)),
          storage_sign.expires_in) end));
  end loop;
  return result;
end;
$function$;

CREATE OR REPLACE FUNCTION api.storage_sign_upload(bucket_id text, name text, upsert boolean)
 RETURNS jsonb
 LANGUAGE plpgsql
 STABLE SECURITY DEFINER
 SET search_path TO 'pg_catalog'
AS $function$
declare
  caller uuid := auth.uid();
  b app.storage_buckets := private.storage_bucket(storage_sign_upload.bucket_id);
  token text;
begin
  perform private.storage_check_name(storage_sign_upload.name);
  if not private.storage_folder_owned(b.id, storage_sign_upload.name, caller) then
    raise exception 'Access denied: you may not write %/%', b.id, storage_sign_upload.name using errcode = 'PT403', hint = 'storage_access_denied';
  end if;
  token := private.storage_token(pg_catalog.jsonb_build_object('scope', 'upload', 'url', b.id || '/' || storage_sign_upload.name,
    'sub', caller, 'upsert', coalesce(storage_sign_upload.upsert, false)), 7200);
  return pg_catalog.jsonb_build_object('url', '/object/upload/sign/' || b.id || '/' || private.storage_url_path(storage_sign_upload.name) || '?token=' || token,
                                       'token', token);
end;
$function$;

CREATE OR REPLACE FUNCTION api.storage_upload_begin_signed(bucket_id text, name text, token text, declared_size bigint)
 RETURNS TABLE(upload_id uuid, storage_key text, file_size_limit bigint, allowed_mime_types text[], images boolean)
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog'
AS $function$
declare
  claims jsonb := private.storage_token_claims(storage_upload_begin_signed.token, 'upload',
    storage_upload_begin_signed.bucket_id || '/' || storage_upload_begin_signed.name);
  token_digest bytea := identity.token_hash(storage_upload_begin_signed.token);
  started record;
begin
  -- Once: the token's digest is kept until it expires. A second upload waits
  -- for the first's transaction here, then finds it.
  insert into app.storage_signed_uploads (token_hash, expires_at)
    values (token_digest, pg_catalog.to_timestamp((claims->>'exp')::bigint))
    on conflict (token_hash) do nothing;
  if not found then
    raise exception 'The signed upload URL was used already' using errcode = 'PT409', hint = 'signed_url_used';
  end if;
  select * into started from private.storage_upload_start((claims->>'sub')::uuid, storage_upload_begin_signed.bucket_id,
    storage_upload_begin_signed.name, coalesce((claims->>'upsert')::boolean, false), storage_upload_begin_signed.declared_size, 'signed');
  update app.storage_uploads u set signed_token_hash = token_digest where u.id = started.upload_id;
  return query select started.upload_id, started.storage_key, started.file_size_limit, started.allowed_mime_types, started.images;
end;
$function$;

CREATE OR REPLACE FUNCTION private.storage_backup_lock_id()
 RETURNS bigint
 LANGUAGE sql
 IMMUTABLE
 SET search_path TO 'pg_catalog'
AS $function$
    select 4871232390914563012::bigint
  $function$;

CREATE OR REPLACE FUNCTION private.storage_garbage_done(storage_keys text[], failures jsonb DEFAULT NULL::jsonb)
 RETURNS void
 LANGUAGE sql
 SET search_path TO 'pg_catalog'
AS $function$
    delete from app.storage_garbage g
     where g.storage_key = any (storage_garbage_done.storage_keys)
       and not (coalesce(storage_garbage_done.failures, '{}'::jsonb) ? g.storage_key);
    -- A version's transformations went with its bytes.
    delete from app.storage_renders r
     where r.storage_key = any (storage_garbage_done.storage_keys)
       and not (coalesce(storage_garbage_done.failures, '{}'::jsonb) ? r.storage_key);
    update app.storage_garbage g set last_error = left(storage_garbage_done.failures->>g.storage_key, 1000)
     where coalesce(storage_garbage_done.failures, '{}'::jsonb) ? g.storage_key;
  $function$;

CREATE OR REPLACE FUNCTION private.storage_garbage_take(max_rows integer DEFAULT 200)
 RETURNS TABLE(storage_key text)
 LANGUAGE sql
 SET search_path TO 'pg_catalog'
AS $function$
    -- A key an object uses again (a finish whose answer was lost) is not garbage.
    with used as (
      delete from app.storage_garbage g
       where g.collect_after <= now() and exists (select from app.storage_objects o where o.storage_key = g.storage_key)
    ), due as (
      -- Nothing while a backup copies the stored files (private.storage_backup_lock_id).
      select g.storage_key from app.storage_garbage g
       where (select pg_try_advisory_xact_lock_shared(private.storage_backup_lock_id()))
         and g.collect_after <= now()
         and not exists (select from app.storage_objects o where o.storage_key = g.storage_key)
       order by g.collect_after
       limit storage_garbage_take.max_rows
       for update skip locked
    )
    update app.storage_garbage g
       set attempts = g.attempts + 1,
           collect_after = now() + least(interval '1 hour', interval '1 minute' * power(2, g.attempts))
      from due d where g.storage_key = d.storage_key
    returning g.storage_key
  $function$;

CREATE OR REPLACE FUNCTION private.storage_open_uploads_max()
 RETURNS integer
 LANGUAGE sql
 IMMUTABLE
 SET search_path TO 'pg_catalog'
AS $function$
    select 10
  $function$;

CREATE OR REPLACE FUNCTION private.storage_render_begin(storage_key text, variant text, client_ip text, misses_per_minute integer, variants_per_object integer)
 RETURNS text[]
 LANGUAGE plpgsql
 SET search_path TO 'pg_catalog'
AS $function$
declare
  counted app.storage_render_misses;
  evicted text[];
begin
  -- Transformations made per client address, in fixed one-minute windows (a
  -- refused one is not counted: its transaction rolls back).
  if storage_render_begin.client_ip is not null then
    insert into app.storage_render_misses as m (client_ip, window_start, misses)
      values (storage_render_begin.client_ip, now(), 1)
      on conflict on constraint storage_render_misses_pkey do update
        set window_start = case when m.window_start <= now() - interval '1 minute' then now() else m.window_start end,
            misses = case when m.window_start <= now() - interval '1 minute' then 1 else m.misses + 1 end
      returning m.* into counted;
    if counted.misses > storage_render_begin.misses_per_minute then
      raise exception 'Too many image transformations: at most % a minute', storage_render_begin.misses_per_minute
        using errcode = 'PT429', hint = 'too_many_renders',
              detail = json_build_object('retry_after',
                         greatest(1, ceil(extract(epoch from counted.window_start + interval '1 minute' - now())))::integer)::text;
    end if;
  end if;
  insert into app.storage_renders (storage_key, variant) values (storage_render_begin.storage_key, storage_render_begin.variant)
    on conflict on constraint storage_renders_pkey do nothing;
  -- The version's oldest transformations past the bound go (their bytes: the
  -- gateway deletes them now, and app.storage_garbage holds them until then).
  with gone as (
    delete from app.storage_renders r
     where r.storage_key = storage_render_begin.storage_key
       and r.variant in (select x.variant from app.storage_renders x
                          where x.storage_key = storage_render_begin.storage_key
                          order by x.created_at desc, x.variant = storage_render_begin.variant desc, x.variant
                          offset greatest(storage_render_begin.variants_per_object, 1))
    returning private.storage_render_key(r.storage_key, r.variant) as key
  ), kept as (
    insert into app.storage_garbage (storage_key, collect_after) select g.key, now() from gone g on conflict do nothing
  )
  select coalesce(pg_catalog.array_agg(g.key), '{}') into evicted from gone g;
  return evicted;
end;
$function$;

CREATE OR REPLACE FUNCTION private.storage_render_key(storage_key text, variant text)
 RETURNS text
 LANGUAGE sql
 IMMUTABLE
 SET search_path TO 'pg_catalog'
AS $function$
    select 'renders/' || pg_catalog.regexp_replace(storage_render_key.storage_key, '^objects/', '') || '/' || storage_render_key.variant
  $function$;

CREATE OR REPLACE FUNCTION private.storage_render_misses_prune()
 RETURNS integer
 LANGUAGE sql
 SET search_path TO 'pg_catalog'
AS $function$
    with gone as (
      delete from app.storage_render_misses m where m.window_start <= now() - interval '1 minute' returning 1
    )
    select count(*)::integer from gone
  $function$;

CREATE OR REPLACE FUNCTION private.storage_render_stored(storage_key text, variant text, size bigint, budget_bytes bigint)
 RETURNS text[]
 LANGUAGE plpgsql
 SET search_path TO 'pg_catalog'
AS $function$
declare
  evicted text[];
begin
  -- One total at a time: every gateway's records take turns here.
  perform pg_advisory_xact_lock(pg_catalog.hashtextextended('app.storage_renders', 0));
  update app.storage_renders r set size = storage_render_stored.size
   where r.storage_key = storage_render_stored.storage_key and r.variant = storage_render_stored.variant;
  if not found then
    -- Evicted while it was being made: its bytes go at once.
    evicted := array[private.storage_render_key(storage_render_stored.storage_key, storage_render_stored.variant)];
    insert into app.storage_garbage (storage_key, collect_after) values (evicted[1], now()) on conflict do nothing;
    return evicted;
  end if;
  -- Past the budget, the oldest go (newest first, each counted with those newer than it).
  with ranked as (
    select r.storage_key, r.variant,
           sum(coalesce(r.size, 0)) over (order by r.created_at desc, r.storage_key desc, r.variant desc) as running
      from app.storage_renders r
  ), gone as (
    delete from app.storage_renders r
     using ranked k
     where k.running > storage_render_stored.budget_bytes
       and r.storage_key = k.storage_key and r.variant = k.variant
    returning private.storage_render_key(r.storage_key, r.variant) as key
  ), kept as (
    insert into app.storage_garbage (storage_key, collect_after) select g.key, now() from gone g on conflict do nothing
  )
  select coalesce(pg_catalog.array_agg(g.key), '{}') into evicted from gone g;
  return evicted;
end;
$function$;

CREATE OR REPLACE FUNCTION private.storage_signed_urls_end(user_id uuid)
 RETURNS void
 LANGUAGE sql
 SET search_path TO 'pg_catalog'
AS $function$
    insert into app.storage_usage as u (user_id, signed_urls_valid_after) values (storage_signed_urls_end.user_id, now())
      on conflict on constraint storage_usage_pkey do update set signed_urls_valid_after = now();
  $function$;

CREATE OR REPLACE FUNCTION private.storage_token_claims(token text, scope text, url text)
 RETURNS jsonb
 LANGUAGE plpgsql
 STABLE SECURITY DEFINER
 SET search_path TO 'pg_catalog'
AS $function$
declare
  parts text[] := pg_catalog.string_to_array(coalesce(storage_token_claims.token, ''), '.');
  claims jsonb;
  valid_after timestamptz;
begin
  if cardinality(parts) <> 3
     or parts[3] is distinct from private.storage_base64url(extensions.hmac(pg_catalog.convert_to(parts[1] || '.' || parts[2], 'UTF8'),
                                     (select k.secret from private.storage_signing_keys k), 'sha256')) then
    raise exception 'Invalid signature' using errcode = 'PT400', hint = 'invalid_signature';
  end if;
  claims := pg_catalog.convert_from(private.storage_base64url_decode(parts[2]), 'UTF8')::jsonb;
  if claims->>'scope' is distinct from storage_token_claims.scope or claims->>'url' is distinct from storage_token_claims.url then
    raise exception 'Invalid signature' using errcode = 'PT400', hint = 'invalid_signature';
  end if;
  if (claims->>'exp')::bigint <= extract(epoch from now()) then
    raise exception 'The signed URL has expired' using errcode = 'PT400', hint = 'signature_expired';
  end if;
  -- The signer's credentials ended after it was signed (private.storage_signed_urls_end: a password set or
  -- changed, a global sign-out), or the account is gone.
  select u.signed_urls_valid_after into valid_after from app.storage_usage u where u.user_id = (claims->>'sub')::uuid;
  if valid_after is not null and (claims->>'iat')::numeric <= extract(epoch from valid_after)
     or not exists (select from identity.users u where u.id = (claims->>'sub')::uuid) then
    raise exception 'The signed URL has expired' using errcode = 'PT400', hint = 'signature_expired';
  end if;
  return claims;
end;
$function$;

CREATE OR REPLACE FUNCTION private.storage_upload_abort(upload_id uuid, storage_key text)
 RETURNS void
 LANGUAGE sql
 SET search_path TO 'pg_catalog'
AS $function$
    with gone as (
      delete from app.storage_uploads u where u.id = storage_upload_abort.upload_id returning u.signed_token_hash
    )
    -- The signed upload URL it began with may be used again.
    delete from app.storage_signed_uploads t where t.token_hash in (select g.signed_token_hash from gone g);
    -- Never the bytes of a visible object (a finish whose answer was lost may have committed).
    insert into app.storage_garbage (storage_key, collect_after)
      select storage_upload_abort.storage_key, now()
       where not exists (select from app.storage_objects o where o.storage_key = storage_upload_abort.storage_key)
      on conflict do nothing;
  $function$;

CREATE OR REPLACE FUNCTION private.storage_upload_start(owner_id uuid, bucket_id text, name text, upsert boolean, declared_size bigint, kind text)
 RETURNS TABLE(upload_id uuid, storage_key text, file_size_limit bigint, allowed_mime_types text[], images boolean)
 LANGUAGE plpgsql
 SET search_path TO 'pg_catalog'
AS $function$
declare
  b app.storage_buckets := private.storage_bucket(storage_upload_start.bucket_id);
  existing app.storage_objects;
  reserved bigint;
  quota bigint;
  per_minute integer;
  open_uploads integer;
  oldest_open timestamptz;
  w app.storage_usage;
  started app.storage_uploads;
begin
  perform private.storage_check_name(storage_upload_start.name);
  if not private.storage_folder_owned(b.id, storage_upload_start.name, storage_upload_start.owner_id) then
    raise exception 'Access denied: you may not write %/%', b.id, storage_upload_start.name using errcode = 'PT403', hint = 'storage_access_denied';
  end if;
  select * into existing from app.storage_objects o where o.bucket_id = b.id and o.name = storage_upload_start.name;
  if existing.id is not null and not storage_upload_start.upsert then
    raise exception 'The resource already exists' using errcode = 'PT409', hint = 'object_exists';
  end if;
  if storage_upload_start.declared_size > b.file_size_limit then
    raise exception 'The object exceeded the maximum allowed size (% bytes)', b.file_size_limit
      using errcode = 'PT413', hint = 'object_too_large';
  end if;
  -- The owner's usage row, locked: one owner's uploads begin one at a time,
  -- so what the others reserved is counted right. The upload is counted in
  -- the minute's window (a refused upload does not count: its transaction
  -- rolls back).
  insert into app.storage_usage as s (user_id, window_start, window_uploads)
    values (storage_upload_start.owner_id, now(), 1)
    on conflict (user_id) do update
      set window_start = case when s.window_start is null or s.window_start <= now() - interval '1 minute' then now() else s.window_start end,
          window_uploads = case when s.window_start is null or s.window_start <= now() - interval '1 minute' then 1 else s.window_uploads + 1 end
    returning s.* into w;
  -- The quota: what is stored, plus what the owner's uploads under way
  -- reserved (their declared sizes: a resumable upload's Upload-Length, a
  -- body's Content-Length), plus this one; an object this one replaces
  -- frees its bytes. The finish checks again with the real size.
  quota := private.storage_quota_bytes(storage_upload_start.owner_id);
  select coalesce(sum(u.declared_size), 0) into reserved
    from app.storage_uploads u where u.owner_id = storage_upload_start.owner_id and u.expires_at > now();
  if w.bytes + reserved + coalesce(storage_upload_start.declared_size, 0)
       - (case when existing.owner_id = storage_upload_start.owner_id then existing.size else 0 end) > quota
     or (storage_upload_start.declared_size is null and w.bytes + reserved >= quota) then
    raise exception 'Storage quota exceeded: % of % bytes used, % reserved by uploads under way', w.bytes, quota, reserved
      using errcode = 'PT413', hint = 'quota_exceeded';
  end if;
  -- Uploads per minute (a fixed window per user).
  per_minute := coalesce(w.uploads_per_minute,
    (select s.storage_uploads_per_minute from app.profiles p join app.subscription_plans s on s.id = p.subscription_type
      where p.id = storage_upload_start.owner_id),
    30);
  if w.window_uploads > per_minute then
    raise exception 'Too many uploads: at most % a minute', per_minute using errcode = 'PT429', hint = 'too_many_uploads',
      detail = json_build_object('retry_after', greatest(1, ceil(extract(epoch from w.window_start + interval '1 minute' - now())))::integer)::text;
  end if;
  -- Resumable uploads open at once (each holds staged bytes until it finishes, is cancelled or expires).
  if storage_upload_start.kind = 'resumable' then
    select count(*), min(u.expires_at) into open_uploads, oldest_open
      from app.storage_uploads u
     where u.owner_id = storage_upload_start.owner_id and u.kind = 'resumable' and u.expires_at > now();
    if open_uploads >= private.storage_open_uploads_max() then
      raise exception 'Too many resumable uploads under way: at most %; finish or cancel one', private.storage_open_uploads_max()
        using errcode = 'PT429', hint = 'too_many_open_uploads',
              detail = json_build_object('retry_after', greatest(1, ceil(extract(epoch from oldest_open - now())))::integer)::text;
    end if;
  end if;
  insert into app.storage_uploads as u (bucket_id, name, owner_id, upsert, kind, storage_key, declared_size, expires_at)
    values (b.id, storage_upload_start.name, storage_upload_start.owner_id, storage_upload_start.upsert, storage_upload_start.kind,
            'objects/' || gen_random_uuid(), storage_upload_start.declared_size,
            now() + case storage_upload_start.kind when 'resumable' then interval '24 hours' else interval '1 hour' end)
    returning u.* into started;
  return query select started.id, started.storage_key, b.file_size_limit, b.allowed_mime_types, b.images;
end;
$function$;

CREATE OR REPLACE FUNCTION private.storage_uploads_expire(max_rows integer DEFAULT 1000)
 RETURNS integer
 LANGUAGE sql
 SET search_path TO 'pg_catalog'
AS $function$
    with gone as (
      delete from app.storage_uploads u
       where u.id in (select x.id from app.storage_uploads x where x.expires_at <= now()
                       order by x.expires_at limit storage_uploads_expire.max_rows for update skip locked)
      returning u.storage_key, u.signed_token_hash
    ), tokens as (
      -- Given back (the upload did not finish), or past the token's own expiry.
      delete from app.storage_signed_uploads t
       where t.token_hash in (select g.signed_token_hash from gone g)
          or t.token_hash in (select x.token_hash from app.storage_signed_uploads x where x.expires_at <= now()
                               limit storage_uploads_expire.max_rows)
    ), kept as (
      insert into app.storage_garbage (storage_key, collect_after)
        select g.storage_key, now() from gone g
         where not exists (select from app.storage_objects o where o.storage_key = g.storage_key)
        on conflict do nothing
    )
    select count(*)::integer from gone
  $function$;

set local check_function_bodies to default;

comment on function api.storage_sign(text,text[],integer,jsonb) is 'POST /storage/v1/object/sign/{bucket}[/{path}]: a signed download URL (valid expires_in seconds; the path percent-encoded where a URL needs it) for each path the caller may read, with the transformation to apply, if any; an `error` for the others. PT400 for an expiry outside 1 s to a year; PT404 bucket_not_found.';

comment on function api.storage_upload_begin_signed(text,text,text,bigint) is 'PUT /storage/v1/object/upload/sign/{bucket}/{path}?token=: an upload through a signed upload URL, as the user who signed it (their right to write the path, quota and rate are checked again). A token uploads once: PT409 signed_url_used when an upload began with it already (one refused or cut off gives it back: private.storage_upload_abort). PT400 invalid_signature or signature_expired, and the refusals of api.storage_upload_begin.';

comment on function private.storage_backup_lock_id() is 'The advisory lock a backup (npm run admin -- backup) holds, in its session, from before its dump''s snapshot until it has copied the files the dump lists: private.storage_garbage_take takes no key meanwhile, so no byte of an object the dump lists is deleted before it is copied.';

comment on function private.storage_garbage_done(text[],jsonb) is 'Forgets the keys whose bytes were deleted (and the records of their transformations, deleted with them); records the error of those that failed (failures: key → message), which are tried again later.';

comment on function private.storage_garbage_take(integer) is 'A batch of byte-store keys to delete (the storage_collect job), each put off with back-off in case the job dies; private.storage_garbage_done forgets them once deleted. None while a backup holds private.storage_backup_lock_id.';

comment on function private.storage_open_uploads_max() is 'How many resumable uploads one user may have open at once (not finished, cancelled or expired): 10.';

comment on function private.storage_render_begin(text,text,text,integer,integer) is 'A transformation not in the cache, about to be made (the gateway calls it, as its own role): counts it for the client address (PT429 too_many_renders past misses_per_minute in the current minute, detail retry_after), records it, and evicts the object version''s oldest transformations past variants_per_object. Returns the byte-store keys evicted (also put in app.storage_garbage), for the gateway to delete now.';

comment on function private.storage_render_key(text,text) is 'The byte-store key of a transformation: renders/<uuid of the version>/<variant> (gateway/storage/byte-store.ts renderKey).';

comment on function private.storage_render_misses_prune() is 'Forgets the transformation counts of client addresses whose minute is over (the storage_collect job). Returns how many.';

comment on function private.storage_render_stored(text,text,bigint,bigint) is 'A transformation stored (the gateway calls it, as its own role): records its size, then evicts the oldest transformations while all of them together are more than budget_bytes. Returns the byte-store keys evicted (also put in app.storage_garbage), for the gateway to delete now; the transformation itself when it was evicted while being made.';

comment on function private.storage_signed_urls_end(uuid) is 'Ends every signed download and upload URL the user made until now (private.storage_token_claims refuses a token issued at or before signed_urls_valid_after): a password set or changed, every session ended at once (a global sign-out), the account deleted.';

comment on function private.storage_upload_abort(uuid,text) is 'An upload that will not finish (refused, cut off, cancelled): forgets it (the quota it reserved is free again, and the signed upload URL it began with may be used again), and its key goes to app.storage_garbage unless an object uses it.';

comment on function private.storage_upload_start(uuid,text,text,boolean,bigint,text) is 'Begins an upload for owner_id (the caller, or the signer of a signed upload URL): the bucket, the path, the owner''s right to write it, an existing object (without upsert), the declared size against the bucket''s limit and against the quota together with what the owner''s uploads under way reserved (their declared sizes, held until they finish, are given up or expire), the upload rate, and at most private.storage_open_uploads_max() resumable uploads open, before a byte is read; registers it under a fresh byte-store key (expiring after 1 hour, 24 for resumable uploads). PT413 quota_exceeded, PT429 too_many_uploads or too_many_open_uploads (detail: retry_after).';

comment on function private.storage_uploads_expire(integer) is 'Uploads past their expiry (cut off, or their gateway killed): forgotten (a signed upload URL they began with given back), their keys to app.storage_garbage; used signed upload URLs past their own expiry forgotten. Returns how many uploads (the storage_collect job).';

--! split: 919-admin.sql
-- Made by `npm run db -- areas --diff` from sql/areas/admin.sql: the statements that make
-- the migrated database what that file states. Each run writes it again:
-- edit the area file, not this one. Table changes go in a file of this
-- folder numbered below 900.

-- Bodies are checked once every function exists (the check validated them all).
set local check_function_bodies = off;

CREATE OR REPLACE FUNCTION admin.storage_collect(due_now boolean DEFAULT false)
 RETURNS integer
 LANGUAGE plpgsql
 SET search_path TO 'pg_catalog'
AS $function$
declare
  due integer;
begin
  -- The bytes of deleted and replaced objects wait 10 minutes (collect_after),
  -- for downloads under way; due_now skips that wait and any retry back-off.
  if storage_collect.due_now then
    update app.storage_garbage g set collect_after = now() where g.collect_after > now();
  end if;
  select count(*)::integer into due from app.storage_garbage g where g.collect_after <= now();
  -- The job worker that has the byte store deletes them, now rather than at its next minute.
  perform private.enqueue_job('storage_collect', '{}'::jsonb, job_key => 'cron_storage_collect');
  return due;
end;
$function$;

CREATE OR REPLACE FUNCTION admin.user_update(user_id uuid, email text DEFAULT NULL::text, password_hash text DEFAULT NULL::text, user_metadata jsonb DEFAULT NULL::jsonb)
 RETURNS jsonb
 LANGUAGE plpgsql
 SET search_path TO 'pg_catalog'
AS $function$
declare
  current_email text;
begin
  select u.email into current_email from identity.users u where u.id = user_update.user_id for update;
  if not found then
    raise exception 'User not found' using errcode = 'PT404', hint = 'not_found';
  end if;
  -- One transaction: every change or none.
  if user_update.email is not null and lower(btrim(user_update.email)) is distinct from current_email then
    -- The operator's change needs no link: the address is the account's at once (PT400 invalid_email, PT409 email_taken).
    update identity.users u set email = private.account_email_check(user_update.email), updated_at = now()
     where u.id = user_update.user_id
     returning u.email into current_email;
    -- A name derived from the old address (private) is derived from the new one: no trace of the old address stays.
    update app.profiles p set name = split_part(current_email, '@', 1)
     where p.id = user_update.user_id and p.name_source = 'email';
  end if;
  if user_update.password_hash is not null then
    if not private.password_hash_valid(user_update.password_hash) then
      raise exception 'password_hash must be a bcrypt hash of cost 10 or more' using errcode = 'PT400', hint = 'invalid_password_hash';
    end if;
    update identity.users u set password_hash = user_update.password_hash, updated_at = now() where u.id = user_update.user_id;
    -- As Supabase Auth does when an operator sets a password: every session of the account ends (and its signed storage URLs).
    update identity.refresh_tokens r set revoked_at = now(), revoked_reason = 'logout'
     where r.user_id = user_update.user_id and r.revoked_at is null;
    perform private.storage_signed_urls_end(user_update.user_id);
  end if;
  if user_update.user_metadata is not null then
    perform private.user_metadata_merge(user_update.user_id, user_update.user_metadata);
  end if;
  return private.auth_user_object(user_update.user_id);
end;
$function$;

set local check_function_bodies to default;

comment on function admin.storage_collect(boolean) is 'Has a job worker collect storage garbage now (the storage_collect job, queued at once): the bytes of deleted and replaced objects, expired uploads. due_now: also the bytes still in their 10-minute grace period (collect_after) or retry back-off. Returns how many byte-store keys are due.';

comment on function admin.user_update(uuid,text,text,jsonb) is 'PUT /auth/v1/admin/users/{id} (the service-role key): every change at once or none. email becomes the account''s address at once (no link; a name derived from the old address is derived from the new one; PT400 invalid_email, PT409 email_taken); password_hash (a bcrypt hash the gateway made) replaces the password and ends every session of the account and its signed storage URLs; user_metadata is merged as PUT /auth/v1/user merges it. Answers the User object; PT404 not_found for an unknown id.';

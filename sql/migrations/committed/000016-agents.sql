--! Previous: sha1:5a1285a78eef7c2ea8d0199286118ca0f902b392
--! Hash: sha1:babaab1ab359b81d529789731b46ac9599bc3b47
--! Message: agents

--! split: 300-mcp-tools.sql
--------------------------------------------------------------------------------
-- Agent interface (MCP): the nine tools
--
-- The agent is the user who owns the credential (a personal API token or an
-- OAuth access token); every tool is one api.mcp_* function called as that
-- user. Scoping rules (spec section 4, "Agent interface"):
--   1. a tool reaches only communities the caller manages; any other id, and
--      an unknown one, is the same PT404 (hint not_found);
--   2. a member created by another agent is invisible (the same PT404).
-- Members an agent creates are ordinary accounts with no password (they set
-- one through the set-password e-mail); app.agent_members records which agent
-- created them and the attributes the agent merged; the signup `data` lives on
-- the member's node (app.nodes.data).
-- Write tools are limited per agent per hour (private.agent_tool_limits; a
-- DBA changes a limit there); the count is of successful calls in the last
-- hour (a sliding window), serialised per agent and tool, so it holds under
-- parallel calls and across replicas.
--------------------------------------------------------------------------------

alter table app.nodes add column if not exists data jsonb;
comment on column app.nodes.data is 'Free-form data attached to a node: the signup data an agent collected for a member it created.';

create table if not exists app.agent_members (
  member_id  uuid primary key references app.profiles (id) on delete cascade,
  agent_id   uuid not null references identity.users (id) on delete cascade,
  attributes jsonb not null default '{}' check (jsonb_typeof(attributes) = 'object'),
  created_at timestamptz not null default now(),
  updated_at timestamptz not null default now()
);
comment on table app.agent_members is
  'Members created through the agent interface: which agent (user) created them, and the attributes it merged.';
create index if not exists agent_members_agent_idx on app.agent_members (agent_id, created_at);

drop trigger if exists _100_set_updated_at on app.agent_members;
create trigger _100_set_updated_at before update on app.agent_members
  for each row execute function private.tg__set_updated_at();

alter table app.agent_members enable row level security;
grant select on app.agent_members to authenticated;
drop policy if exists "Agents see the members they created" on app.agent_members;
create policy "Agents see the members they created" on app.agent_members
  for select to authenticated
  using (agent_id = (select auth.uid()));

--------------------------------------------------------------------------------
-- Per-agent limits of the write tools
--------------------------------------------------------------------------------

create table if not exists private.agent_tool_limits (
  tool     text primary key,
  per_hour integer not null check (per_hour >= 0)
);
comment on table private.agent_tool_limits is
  'How many successful calls of a write tool one agent may make per hour (spec section 8). Tools not listed are unlimited.';
insert into private.agent_tool_limits (tool, per_hour) values
  ('create_member', 20),
  ('add_member_to_community', 60),
  ('set_member_attributes', 120)
  on conflict (tool) do nothing;

create table if not exists private.agent_tool_usage (
  agent_id  uuid not null,
  tool      text not null,
  called_at timestamptz not null default clock_timestamp()
);
comment on table private.agent_tool_usage is 'One row per counted tool call of the last hour (older rows are pruned as calls arrive).';
create index if not exists agent_tool_usage_idx on private.agent_tool_usage (agent_id, tool, called_at);

-- Counts one call of `tool` by the caller, or raises PT429 (hint rate_limited)
-- when the caller already made the hour's allowance. The advisory lock
-- serialises one agent's calls of one tool (across processes), so parallel
-- calls cannot all see the same count. The row belongs to the tool call's
-- transaction: a call that fails is not counted.
create or replace function private.agent_quota_take(tool text) returns void
  language plpgsql volatile
  security definer
  set search_path = pg_catalog
  as $$
declare
  agent uuid := auth.uid();
  allowance integer;
  used integer;
  oldest timestamptz;
begin
  select l.per_hour into allowance from private.agent_tool_limits l where l.tool = agent_quota_take.tool;
  if allowance is null then
    return;
  end if;
  perform pg_advisory_xact_lock(hashtextextended('agent_quota:' || agent::text || ':' || agent_quota_take.tool, 0));
  delete from private.agent_tool_usage u
   where u.agent_id = agent and u.tool = agent_quota_take.tool and u.called_at <= now() - interval '1 hour';
  select count(*), min(u.called_at) into used, oldest
    from private.agent_tool_usage u
   where u.agent_id = agent and u.tool = agent_quota_take.tool;
  if used >= allowance then
    raise exception '% is limited to % calls per hour; retry in % seconds', tool, allowance,
      greatest(1, ceil(extract(epoch from (oldest + interval '1 hour' - now()))))::integer
      using errcode = 'PT429', hint = 'rate_limited';
  end if;
  insert into private.agent_tool_usage (agent_id, tool) values (agent, agent_quota_take.tool);
end;
$$;
comment on function private.agent_quota_take(text) is
  'Counts one call of a limited write tool for the signed-in agent; PT429 rate_limited past private.agent_tool_limits in the last hour.';
grant execute on function private.agent_quota_take(text) to authenticated;

--------------------------------------------------------------------------------
-- Helpers
--------------------------------------------------------------------------------

-- The agent: the signed-in user. A community-scoped API token is refused
-- here too (the MCP server refuses it first, with 403).
create or replace function private.mcp_agent() returns uuid
  language plpgsql stable
  set search_path = pg_catalog
  as $$
declare
  agent uuid := auth.uid();
begin
  if agent is null then
    raise exception 'a personal credential is required' using errcode = 'PT401', hint = 'unauthorized';
  end if;
  if nullif(auth.jwt()->>'token_community_id', '') is not null then
    raise exception 'community-scoped tokens cannot use the agent interface; use a personal token'
      using errcode = 'PT403', hint = 'community_scope_violation';
  end if;
  return agent;
end;
$$;
grant execute on function private.mcp_agent() to authenticated;

-- The community, when the caller manages it; otherwise (unknown id included)
-- the same PT404.
create or replace function private.mcp_managed_community(community_id uuid) returns app.communities
  language plpgsql stable
  security definer
  set search_path = pg_catalog
  as $$
declare
  found_community app.communities;
begin
  select c.* into found_community
    from app.communities c
    join app.community_members m on m.community_id = c.id
   where c.id = mcp_managed_community.community_id
     and m.member_node_id = app.my_node_id()
     and m.role = 'manager';
  if found_community.id is null then
    raise exception 'community not found' using errcode = 'PT404', hint = 'not_found';
  end if;
  return found_community;
end;
$$;
comment on function private.mcp_managed_community(uuid) is
  'The community if the signed-in user manages it; PT404 not_found otherwise (unknown and unmanaged look the same).';
grant execute on function private.mcp_managed_community(uuid) to authenticated;

-- The member (user id, or the member's node id) when the caller created it;
-- otherwise the same PT404. Locks the row for the write tools.
create or replace function private.mcp_own_member(member_ref uuid) returns app.agent_members
  language plpgsql volatile
  security definer
  set search_path = pg_catalog
  as $$
declare
  found_member app.agent_members;
begin
  select a.* into found_member
    from app.agent_members a
    join app.profiles p on p.id = a.member_id
   where (a.member_id = member_ref or p.node_id = member_ref)
     and a.agent_id = auth.uid()
   limit 1
   for update of a;
  if found_member.member_id is null then
    raise exception 'member not found' using errcode = 'PT404', hint = 'not_found';
  end if;
  return found_member;
end;
$$;
comment on function private.mcp_own_member(uuid) is
  'The agent-created member (by user id or node id) if the signed-in agent created it; PT404 not_found otherwise.';
grant execute on function private.mcp_own_member(uuid) to authenticated;

-- The Agent-interface member: profile, signup data, attributes, and its
-- memberships in communities the calling agent manages.
create or replace function private.mcp_member_json(member_id uuid) returns jsonb
  language sql stable
  security definer
  set search_path = pg_catalog
  as $$
    select jsonb_build_object(
      'id', p.id,
      'node_id', p.node_id,
      'email', u.email,
      'name', p.name,
      'data', coalesce(n.data, '{}'),
      'attributes', a.attributes,
      'password_set', u.password_hash is not null,
      'communities', (
        select coalesce(jsonb_agg(jsonb_build_object('community_id', c.id, 'name', c.name, 'role', cm.role,
                                                     'joined_at', app.iso(cm.joined_at))
                                  order by cm.joined_at, c.id), '[]')
          from app.community_members cm
          join app.communities c on c.id = cm.community_id
         where cm.member_node_id = p.node_id
           and exists (select from app.community_members mine
                        where mine.community_id = c.id and mine.role = 'manager'
                          and mine.member_node_id = app.my_node_id())),
      'created_at', app.iso(a.created_at),
      'updated_at', app.iso(a.updated_at))
    from app.agent_members a
    join app.profiles p on p.id = a.member_id
    join identity.users u on u.id = a.member_id
    left join app.nodes n on n.id = p.node_id
   where a.member_id = mcp_member_json.member_id
  $$;
comment on function private.mcp_member_json(uuid) is
  'The Agent-interface member object: id, node_id, email, name, data, attributes, password_set, communities (managed by the caller), timestamps.';
grant execute on function private.mcp_member_json(uuid) to authenticated;

-- The community profile a managing agent sees.
create or replace function private.mcp_community_json(c app.communities) returns jsonb
  language sql stable
  security definer
  set search_path = pg_catalog
  as $$
    select app.community_json(c) || jsonb_build_object(
      'node_id', c.node_id,
      'is_sandbox', c.is_sandbox,
      'is_draft', c.is_draft,
      'accepts_handoffs', c.accepts_handoffs,
      'managers', (
        select coalesce(jsonb_agg(jsonb_build_object('id', m.member_node_id, 'name', app.node_display_name(m.member_node_id))
                                  order by m.joined_at, m.member_node_id), '[]')
          from app.community_members m
         where m.community_id = c.id and m.role = 'manager'))
  $$;
comment on function private.mcp_community_json(app.communities) is
  'A community as community_profile shows it: public fields, node_id, flags (sandbox, draft, accepts_handoffs) and managers.';
grant execute on function private.mcp_community_json(app.communities) to authenticated;

--------------------------------------------------------------------------------
-- The tools
--------------------------------------------------------------------------------

-- community_profile
create or replace function api.mcp_community_profile(community_id uuid) returns jsonb
  language plpgsql stable
  set search_path = pg_catalog
  as $$
begin
  perform private.mcp_agent();
  return private.mcp_community_json(private.mcp_managed_community(community_id));
end;
$$;
comment on function api.mcp_community_profile(uuid) is
  'MCP community_profile: profile, member count, managers, tags, sandbox/draft flags of a community the caller manages. PT404 not_found otherwise.';
grant execute on function api.mcp_community_profile(uuid) to authenticated;

-- list_community_events: upcoming (and ongoing) soonest first, past most
-- recent first; at most 100 of each.
create or replace function api.mcp_community_events(community_id uuid, public_url text) returns jsonb
  language plpgsql stable
  set search_path = pg_catalog
  as $$
declare
  community app.communities;
begin
  perform private.mcp_agent();
  community := private.mcp_managed_community(community_id);
  return jsonb_build_object(
    'community_id', community.id,
    'upcoming', (
      select coalesce(jsonb_agg(item order by starts_at, id), '[]') from (
        select e.starts_at, e.id,
               private.event_json(e, public_url) || jsonb_build_object('status', private.event_status(e.starts_at, e.ends_at)) as item
          from app.events e
         where e.community_id = community.id
           and private.event_effective_end(e.starts_at, e.ends_at) >= now()
         order by e.starts_at, e.id
         limit 100) upcoming),
    'past', (
      select coalesce(jsonb_agg(item order by starts_at desc, id), '[]') from (
        select e.starts_at, e.id,
               private.event_json(e, public_url) || jsonb_build_object('status', 'past') as item
          from app.events e
         where e.community_id = community.id
           and private.event_effective_end(e.starts_at, e.ends_at) < now()
         order by e.starts_at desc, e.id
         limit 100) past));
end;
$$;
comment on function api.mcp_community_events(uuid, text) is
  'MCP list_community_events: upcoming/ongoing (soonest first) and past (latest first) events of a managed community, 100 of each at most, with status.';
grant execute on function api.mcp_community_events(uuid, text) to authenticated;

-- get_event: by id or node id, only in a community the caller manages.
create or replace function api.mcp_event_get(event_id uuid, public_url text) returns jsonb
  language plpgsql stable
  set search_path = pg_catalog
  as $$
declare
  found_event app.events;
begin
  perform private.mcp_agent();
  select e.* into found_event
    from app.events e
   where (e.id = event_id or e.node_id = event_id)
     and exists (select from app.community_members m
                  where m.community_id = e.community_id and m.role = 'manager'
                    and m.member_node_id = app.my_node_id())
   limit 1;
  if found_event.id is null then
    raise exception 'event not found' using errcode = 'PT404', hint = 'not_found';
  end if;
  return private.event_json(found_event, public_url)
         || jsonb_build_object('status', private.event_status(found_event.starts_at, found_event.ends_at),
                               'community_id', found_event.community_id);
end;
$$;
comment on function api.mcp_event_get(uuid, text) is
  'MCP get_event: one event (id or node id) of a community the caller manages, with status. PT404 not_found otherwise.';
grant execute on function api.mcp_event_get(uuid, text) to authenticated;

-- search_onboarding_communities: the caller's managed communities that accept
-- hand-offs, by name.
create or replace function api.mcp_onboarding_communities() returns jsonb
  language plpgsql stable
  security definer
  set search_path = pg_catalog
  as $$
begin
  perform private.mcp_agent();
  return jsonb_build_object('communities', (
    select coalesce(jsonb_agg(private.mcp_community_json(c) order by lower(c.name), c.id), '[]')
      from app.communities c
      join app.community_members m on m.community_id = c.id
     where m.member_node_id = app.my_node_id() and m.role = 'manager' and c.accepts_handoffs));
end;
$$;
comment on function api.mcp_onboarding_communities() is
  'MCP search_onboarding_communities: the communities the caller manages that accept onboarding hand-offs, by name.';
grant execute on function api.mcp_onboarding_communities() to authenticated;

-- get_member
create or replace function api.mcp_member_get(member_id uuid) returns jsonb
  language plpgsql stable
  security definer
  set search_path = pg_catalog
  as $$
declare
  agent uuid := private.mcp_agent();
  found_member uuid;
begin
  select a.member_id into found_member
    from app.agent_members a
    join app.profiles p on p.id = a.member_id
   where (a.member_id = mcp_member_get.member_id or p.node_id = mcp_member_get.member_id)
     and a.agent_id = agent
   limit 1;
  if found_member is null then
    raise exception 'member not found' using errcode = 'PT404', hint = 'not_found';
  end if;
  return private.mcp_member_json(found_member);
end;
$$;
comment on function api.mcp_member_get(uuid) is
  'MCP get_member: a member the caller created (user id or node id): profile, signup data, attributes. PT404 not_found otherwise.';
grant execute on function api.mcp_member_get(uuid) to authenticated;

-- create_member: an account with no password, the signup data on its node, a
-- set-password e-mail queued. No password ever passes through the agent.
create or replace function api.mcp_member_create(email text, name text, data jsonb, public_url text) returns jsonb
  language plpgsql volatile
  security definer
  set search_path = pg_catalog
  as $$
declare
  agent uuid := private.mcp_agent();
  new_member uuid;
begin
  if data is not null and jsonb_typeof(data) <> 'object' then
    raise exception 'data must be an object' using errcode = 'PT400', hint = 'invalid_arguments';
  end if;
  perform private.agent_quota_take('create_member');
  new_member := private.create_account(email, null, name);
  update app.nodes n set data = coalesce(mcp_member_create.data, '{}')
    from app.profiles p
   where p.id = new_member and n.id = p.node_id;
  insert into app.agent_members (member_id, agent_id) values (new_member, agent);
  perform private.queue_password_email(new_member, 'invite', public_url);
  return private.mcp_member_json(new_member) || jsonb_build_object('set_password_email', 'queued');
end;
$$;
comment on function api.mcp_member_create(text, text, jsonb, text) is
  'MCP create_member: a password-less account (user, profile, node with data), owned by the calling agent; queues the set-password e-mail. PT409 email_taken; PT429 rate_limited.';
grant execute on function api.mcp_member_create(text, text, jsonb, text) to authenticated;

-- set_member_attributes: merges top-level keys; a null value removes the key.
create or replace function api.mcp_member_set_attributes(member_id uuid, attributes jsonb) returns jsonb
  language plpgsql volatile
  security definer
  set search_path = pg_catalog
  as $$
declare
  member app.agent_members;
begin
  perform private.mcp_agent();
  if attributes is null or jsonb_typeof(attributes) <> 'object' then
    raise exception 'attributes must be an object' using errcode = 'PT400', hint = 'invalid_arguments';
  end if;
  member := private.mcp_own_member(member_id);
  perform private.agent_quota_take('set_member_attributes');
  update app.agent_members a
     set attributes = (a.attributes || mcp_member_set_attributes.attributes)
                      - array(select k.key from jsonb_each(mcp_member_set_attributes.attributes) k where k.value = 'null'::jsonb)
   where a.member_id = member.member_id;
  return private.mcp_member_json(member.member_id);
end;
$$;
comment on function api.mcp_member_set_attributes(uuid, jsonb) is
  'MCP set_member_attributes: merges attributes (top-level keys; null removes a key) onto a member the caller created. PT404 not_found; PT429 rate_limited.';
grant execute on function api.mcp_member_set_attributes(uuid, jsonb) to authenticated;

-- add_member_to_community: under the caller's manager authority (a user can
-- only join as themselves through row-level security; this function inserts
-- the membership as its owner after checking the authority). Adding a member
-- who already belongs is not an error (`added` false).
create or replace function api.mcp_member_add_to_community(member_id uuid, community_id uuid) returns jsonb
  language plpgsql volatile
  security definer
  set search_path = pg_catalog
  as $$
declare
  member app.agent_members;
  community app.communities;
  member_node uuid;
  joined timestamptz;
  added boolean := true;
  member_role text := 'member';
begin
  perform private.mcp_agent();
  member := private.mcp_own_member(member_id);
  community := private.mcp_managed_community(community_id);
  perform private.agent_quota_take('add_member_to_community');
  select p.node_id into member_node from app.profiles p where p.id = member.member_id;
  if member_node is null then
    raise exception 'the member has no node' using errcode = 'PT409', hint = 'user_has_no_node';
  end if;
  insert into app.community_members as m (community_id, member_node_id, role)
    values (community.id, member_node, 'member')
    on conflict on constraint community_members_pkey do nothing
    returning m.joined_at into joined;
  if joined is null then
    added := false;
    select m.joined_at, m.role into joined, member_role
      from app.community_members m
     where m.community_id = community.id and m.member_node_id = member_node;
  end if;
  return jsonb_build_object(
    'member_id', member.member_id,
    'community_id', community.id,
    'role', member_role,
    'joined_at', app.iso(joined),
    'added', added,
    'member_count', (select c.member_count from app.communities c where c.id = community.id));
end;
$$;
comment on function api.mcp_member_add_to_community(uuid, uuid) is
  'MCP add_member_to_community: joins a member the caller created to a community the caller manages. PT404 not_found for either; PT429 rate_limited.';
grant execute on function api.mcp_member_add_to_community(uuid, uuid) to authenticated;

-- set_onboarding_opt_in
create or replace function api.mcp_community_set_onboarding(community_id uuid, accepts_handoffs boolean) returns jsonb
  language plpgsql volatile
  security definer
  set search_path = pg_catalog
  as $$
declare
  community app.communities;
begin
  perform private.mcp_agent();
  if accepts_handoffs is null then
    raise exception 'accepts_handoffs must be true or false' using errcode = 'PT400', hint = 'invalid_arguments';
  end if;
  community := private.mcp_managed_community(community_id);
  update app.communities c set accepts_handoffs = mcp_community_set_onboarding.accepts_handoffs
   where c.id = community.id
   returning c.* into community;
  return private.mcp_community_json(community);
end;
$$;
comment on function api.mcp_community_set_onboarding(uuid, boolean) is
  'MCP set_onboarding_opt_in: opts a community the caller manages in or out of onboarding hand-offs. PT404 not_found otherwise.';
grant execute on function api.mcp_community_set_onboarding(uuid, boolean) to authenticated;

--! split: 310-mcp-transport.sql
--------------------------------------------------------------------------------
-- Agent interface (MCP): request admission, sessions and the audit log
--
-- Everything an MCP process must remember between requests lives here, so
-- any replica serves any request:
--   * the per-IP request count (fixed one-minute windows; spec: 120 per
--     minute per IP on /mcp);
--   * sessions: the id handed out at `initialize`, whose user it belongs to
--     and what the client said about itself; a session ends with DELETE /mcp
--     or after a day without requests;
--   * the audit log: every tool call with caller, tool, arguments (secrets
--     redacted), outcome and duration; the caller reads their own, an
--     operator everyone's (admin.mcp_tool_calls).
-- The MCP server calls the private.* functions here as the database owner
-- (one statement each, outside the request's transaction).
--------------------------------------------------------------------------------

create table if not exists private.mcp_request_counts (
  client_ip    text not null,
  window_start timestamptz not null,
  requests     integer not null,
  primary key (client_ip, window_start)
);
comment on table private.mcp_request_counts is 'Requests to /mcp (and the OAuth endpoints) per client IP per minute.';

create table if not exists private.mcp_sessions (
  id               uuid primary key default gen_random_uuid(),
  user_id          uuid not null references identity.users (id) on delete cascade,
  client_name      text,
  client_version   text,
  protocol_version text,
  created_at       timestamptz not null default now(),
  last_seen_at     timestamptz not null default now(),
  ended_at         timestamptz
);
comment on table private.mcp_sessions is 'MCP sessions (Mcp-Session-Id), shared by every MCP process.';
create index if not exists mcp_sessions_user_idx on private.mcp_sessions (user_id);

-- How long a session lives without requests.
create or replace function private.mcp_session_idle_limit() returns interval
  language sql immutable
  set search_path = pg_catalog
  as $$
    select interval '24 hours'
  $$;

-- Admission of one request: counts it against the client IP's minute and, when
-- the request names a session, says whose live session it is (null when the
-- session is unknown, ended or idle too long). Touches the session at most
-- once a minute.
create or replace function private.mcp_admit(client_ip text, per_minute integer, session_id uuid default null)
  returns table (allowed boolean, request_limit integer, remaining integer, reset_at timestamptz, session_user_id uuid)
  language plpgsql volatile
  set search_path = pg_catalog
  as $$
declare
  this_window timestamptz := date_trunc('minute', now());
  counted integer;
  owner uuid;
begin
  insert into private.mcp_request_counts as r (client_ip, window_start, requests)
    values (mcp_admit.client_ip, this_window, 1)
    on conflict on constraint mcp_request_counts_pkey do update set requests = r.requests + 1
    returning r.requests into counted;
  if mcp_admit.session_id is not null then
    update private.mcp_sessions s
       set last_seen_at = case when s.last_seen_at < now() - interval '1 minute' then now() else s.last_seen_at end
     where s.id = mcp_admit.session_id
       and s.ended_at is null
       and s.last_seen_at > now() - private.mcp_session_idle_limit()
    returning s.user_id into owner;
  end if;
  return query select counted <= per_minute, per_minute, greatest(per_minute - counted, 0),
                      this_window + interval '1 minute', owner;
end;
$$;
comment on function private.mcp_admit(text, integer, uuid) is
  'Counts a request of a client IP (per-minute window) and returns whether it is within per_minute, plus the owner of the named live session.';

create or replace function private.mcp_session_open(user_id uuid, client_name text, client_version text, protocol_version text)
  returns uuid
  language sql volatile
  set search_path = pg_catalog
  as $$
    insert into private.mcp_sessions (user_id, client_name, client_version, protocol_version)
      values (user_id, left(client_name, 200), left(client_version, 100), left(protocol_version, 20))
      returning id
  $$;
comment on function private.mcp_session_open(uuid, text, text, text) is 'Starts an MCP session for a user (at initialize); returns its id.';

create or replace function private.mcp_session_end(session_id uuid, user_id uuid) returns boolean
  language sql volatile
  set search_path = pg_catalog
  as $$
    with ended as (
      update private.mcp_sessions s set ended_at = now()
       where s.id = mcp_session_end.session_id and s.user_id = mcp_session_end.user_id and s.ended_at is null
      returning 1)
    select exists (select from ended)
  $$;
comment on function private.mcp_session_end(uuid, uuid) is 'Ends a live session of the user (DELETE /mcp); false when there is none.';

--------------------------------------------------------------------------------
-- Audit log
--------------------------------------------------------------------------------

create table if not exists app.mcp_tool_calls (
  id              bigint generated always as identity primary key,
  user_id         uuid not null references identity.users (id) on delete cascade,
  credential_kind text not null check (credential_kind in ('api_token', 'oauth')),
  credential_id   uuid,
  client_id       text,
  session_id      uuid,
  tool            text not null,
  arguments       jsonb,
  outcome         text not null,
  error_message   text,
  duration_ms     numeric(12, 3) not null check (duration_ms >= 0),
  called_at       timestamptz not null default now()
);
comment on table app.mcp_tool_calls is
  'Every MCP tool call: who (user and credential), which tool, arguments (secrets redacted), outcome (ok or the error code), duration.';
comment on column app.mcp_tool_calls.client_id is 'The OAuth client (for OAuth access tokens).';
create index if not exists mcp_tool_calls_user_idx on app.mcp_tool_calls (user_id, id desc);

alter table app.mcp_tool_calls enable row level security;
grant select on app.mcp_tool_calls to authenticated;
drop policy if exists "Users read their own agent's tool calls" on app.mcp_tool_calls;
create policy "Users read their own agent's tool calls" on app.mcp_tool_calls
  for select to authenticated
  using (user_id = (select auth.uid()));

-- Values under keys that look like secrets are replaced, at any depth.
create or replace function private.redact_secrets(value jsonb) returns jsonb
  language plpgsql immutable
  set search_path = pg_catalog
  as $$
begin
  if value is null then
    return null;
  end if;
  case jsonb_typeof(value)
    when 'object' then
      return coalesce((
        select jsonb_object_agg(e.key,
                 case when e.key ~* '(pass(word)?|secret|token|credential|api[_-]?key|authori[sz]ation|cookie)'
                      then '"[redacted]"'::jsonb
                      else private.redact_secrets(e.value) end)
          from jsonb_each(value) e), '{}'::jsonb);
    when 'array' then
      return coalesce((select jsonb_agg(private.redact_secrets(e.value) order by e.ordinality)
                         from jsonb_array_elements(value) with ordinality e), '[]'::jsonb);
    else
      return value;
  end case;
end;
$$;
comment on function private.redact_secrets(jsonb) is 'The JSON value with every value under a secret-looking key (password, token, secret, ...) replaced by "[redacted]".';

create or replace function private.mcp_record_call(
  user_id uuid, credential_kind text, credential_id uuid, client_id text, session_id uuid,
  tool text, arguments jsonb, outcome text, error_message text, duration_ms numeric
) returns void
  language sql volatile
  set search_path = pg_catalog
  as $$
    insert into app.mcp_tool_calls (user_id, credential_kind, credential_id, client_id, session_id, tool, arguments,
                                    outcome, error_message, duration_ms)
      values (user_id, credential_kind, credential_id, left(client_id, 200), session_id, left(tool, 100),
              private.redact_secrets(arguments), left(outcome, 100), left(error_message, 1000), greatest(duration_ms, 0))
  $$;
comment on function private.mcp_record_call(uuid, text, uuid, text, uuid, text, jsonb, text, text, numeric) is
  'Records one MCP tool call in the audit log (arguments redacted).';

create or replace function private.mcp_call_json(c app.mcp_tool_calls) returns jsonb
  language sql stable
  set search_path = pg_catalog
  as $$
    select jsonb_build_object('id', c.id, 'tool', c.tool, 'arguments', c.arguments, 'outcome', c.outcome,
                              'error_message', c.error_message, 'duration_ms', c.duration_ms,
                              'credential_kind', c.credential_kind, 'credential_id', c.credential_id,
                              'client_id', c.client_id, 'session_id', c.session_id, 'called_at', app.iso(c.called_at))
  $$;
grant execute on function private.mcp_call_json(app.mcp_tool_calls) to authenticated;

-- GET /api/docs/agent-calls: the caller's agent's tool calls, newest first;
-- `before_id` pages back.
create or replace function api.mcp_tool_calls_mine(page_limit integer default 50, before_id bigint default null) returns jsonb
  language plpgsql stable
  set search_path = pg_catalog
  as $$
begin
  if page_limit is null or page_limit < 1 or page_limit > 100 then
    raise exception 'limit must be between 1 and 100' using errcode = 'PT400', hint = 'invalid_limit';
  end if;
  return jsonb_build_object('data', (
    select coalesce(jsonb_agg(private.mcp_call_json(c) order by c.id desc), '[]')
      from (select * from app.mcp_tool_calls t
             where t.user_id = auth.uid() and (before_id is null or t.id < before_id)
             order by t.id desc
             limit page_limit) c));
end;
$$;
comment on function api.mcp_tool_calls_mine(integer, bigint) is
  'GET /api/docs/agent-calls: the tool calls made with the caller''s credentials through the agent interface, newest first.';
grant execute on function api.mcp_tool_calls_mine(integer, bigint) to authenticated;

create or replace function admin.mcp_tool_calls(email text default null, max_rows integer default 100)
  returns table (id bigint, called_at timestamptz, user_email text, tool text, outcome text, duration_ms numeric,
                 credential_kind text, arguments jsonb, error_message text)
  language sql stable
  set search_path = pg_catalog
  as $$
    select c.id, c.called_at, u.email, c.tool, c.outcome, c.duration_ms, c.credential_kind, c.arguments, c.error_message
      from app.mcp_tool_calls c
      join identity.users u on u.id = c.user_id
     where mcp_tool_calls.email is null or u.email = lower(btrim(mcp_tool_calls.email))
     order by c.id desc
     limit max_rows
  $$;
comment on function admin.mcp_tool_calls(text, integer) is
  'The latest MCP tool calls (of one user when email is given): who, which tool, outcome, duration, arguments.';

--------------------------------------------------------------------------------
-- Pruning (every MCP process runs it periodically; safe from every replica)
--------------------------------------------------------------------------------

create or replace function private.mcp_prune() returns void
  language sql volatile
  set search_path = pg_catalog
  as $$
    delete from private.mcp_request_counts where window_start < now() - interval '5 minutes';
    delete from private.mcp_sessions
     where coalesce(ended_at, last_seen_at + private.mcp_session_idle_limit()) < now() - interval '7 days';
    delete from private.agent_tool_usage where called_at < now() - interval '1 hour';
  $$;
comment on function private.mcp_prune() is 'Deletes expired request counts, long-dead sessions and stale quota rows.';

--! split: 320-oauth.sql
--------------------------------------------------------------------------------
-- OAuth 2.0 for the agent interface: clients, authorization codes, tokens
--
-- Authorization code + PKCE (S256) with dynamic client registration, as MCP
-- clients do it. The MCP process runs the HTTP side (the MCP SDK's auth
-- router) and calls these functions as the database owner; nothing here is
-- granted to request roles. Every secret (client secret, pending-request id,
-- code, access and refresh token) is stored only as its SHA-256.
--   * a pending authorization request lives 10 minutes, allows 5 wrong
--     passwords, and is consumed by approval or denial;
--   * a code lives 1 minute and is single-use (a second use revokes what the
--     first one issued);
--   * access tokens live `access_ttl` seconds; refresh tokens 30 days and
--     rotate; presenting a rotated refresh token revokes the whole family.
--------------------------------------------------------------------------------

create table if not exists identity.oauth_clients (
  client_id                text primary key,
  client_secret_hash       bytea,
  client_secret_expires_at bigint not null default 0,
  client_id_issued_at      bigint not null,
  metadata                 jsonb not null check (jsonb_typeof(metadata) = 'object'),
  created_at               timestamptz not null default now()
);
comment on table identity.oauth_clients is 'OAuth clients registered dynamically (RFC 7591). metadata holds what the client registered, never the secret.';
alter table identity.oauth_clients enable row level security;

create table if not exists identity.oauth_requests (
  request_hash   bytea primary key,
  client_id      text not null references identity.oauth_clients (client_id) on delete cascade,
  redirect_uri   text not null,
  code_challenge text not null,
  state          text,
  scopes         text[] not null,
  resource       text,
  failures       integer not null default 0,
  expires_at     timestamptz not null
);
comment on table identity.oauth_requests is 'Authorization requests waiting for the user to sign in and consent.';
alter table identity.oauth_requests enable row level security;

create table if not exists identity.oauth_codes (
  code_hash      bytea primary key,
  client_id      text not null references identity.oauth_clients (client_id) on delete cascade,
  user_id        uuid not null references identity.users (id) on delete cascade,
  redirect_uri   text not null,
  code_challenge text not null,
  scopes         text[] not null,
  resource       text,
  family_id      uuid not null default gen_random_uuid(),
  expires_at     timestamptz not null,
  used_at        timestamptz
);
comment on table identity.oauth_codes is 'Authorization codes (hashed), single-use.';
alter table identity.oauth_codes enable row level security;

create table if not exists identity.oauth_tokens (
  id         uuid primary key default gen_random_uuid(),
  token_hash bytea not null unique,
  kind       text not null check (kind in ('access', 'refresh')),
  client_id  text not null references identity.oauth_clients (client_id) on delete cascade,
  user_id    uuid not null references identity.users (id) on delete cascade,
  family_id  uuid not null,
  scopes     text[] not null,
  resource   text,
  created_at timestamptz not null default now(),
  expires_at timestamptz not null,
  revoked_at timestamptz
);
comment on table identity.oauth_tokens is 'OAuth access and refresh tokens (hashed). One family per authorization; rotation keeps the family.';
create index if not exists oauth_tokens_family_idx on identity.oauth_tokens (family_id);
create index if not exists oauth_tokens_user_idx on identity.oauth_tokens (user_id);
alter table identity.oauth_tokens enable row level security;

-- Volatile, not immutable: a function that raises must never be folded into
-- a plan at planning time (plpgsql_check found that it was).
create or replace function private.oauth_invalid_grant(message text) returns void
  language plpgsql volatile
  set search_path = pg_catalog
  as $$
begin
  raise exception '%', message using errcode = 'PT400', hint = 'invalid_grant';
end;
$$;

--------------------------------------------------------------------------------
-- Clients
--------------------------------------------------------------------------------

create or replace function private.oauth_client_register(client_id text, client_secret text, client_secret_expires_at bigint,
                                                         client_id_issued_at bigint, metadata jsonb)
  returns void
  language sql volatile
  set search_path = pg_catalog
  as $$
    insert into identity.oauth_clients (client_id, client_secret_hash, client_secret_expires_at, client_id_issued_at, metadata)
      values (client_id, identity.token_hash(client_secret), coalesce(client_secret_expires_at, 0), client_id_issued_at,
              metadata - 'client_secret' - 'client_id' - 'client_id_issued_at' - 'client_secret_expires_at')
  $$;
comment on function private.oauth_client_register(text, text, bigint, bigint, jsonb) is
  'Stores a dynamically registered client (secret hashed; null for public clients).';

create or replace function private.oauth_client_get(client_id text)
  returns table (metadata jsonb, has_secret boolean, client_secret_expires_at bigint, client_id_issued_at bigint)
  language sql stable
  set search_path = pg_catalog
  as $$
    select c.metadata, c.client_secret_hash is not null, c.client_secret_expires_at, c.client_id_issued_at
      from identity.oauth_clients c
     where c.client_id = oauth_client_get.client_id
  $$;
comment on function private.oauth_client_get(text) is 'A registered client''s metadata and whether it has a secret.';

create or replace function private.oauth_client_secret_matches(client_id text, client_secret text) returns boolean
  language sql stable
  set search_path = pg_catalog
  as $$
    select coalesce((
      select c.client_secret_hash is null
             or (c.client_secret_hash = identity.token_hash(coalesce(client_secret, ''))
                 and (c.client_secret_expires_at = 0 or c.client_secret_expires_at > extract(epoch from now())))
        from identity.oauth_clients c
       where c.client_id = oauth_client_secret_matches.client_id), false)
  $$;
comment on function private.oauth_client_secret_matches(text, text) is
  'True for a public client, or a confidential client presenting its (unexpired) secret.';

--------------------------------------------------------------------------------
-- Authorization: pending request → sign-in and consent → code
--------------------------------------------------------------------------------

create or replace function private.oauth_request_begin(client_id text, redirect_uri text, code_challenge text, state text,
                                                       scopes text[], resource text)
  returns text
  language plpgsql volatile
  set search_path = pg_catalog
  as $$
declare
  token text := identity.new_token();
begin
  delete from identity.oauth_requests r where r.expires_at < now();
  insert into identity.oauth_requests (request_hash, client_id, redirect_uri, code_challenge, state, scopes, resource, expires_at)
    values (identity.token_hash(token), client_id, redirect_uri, code_challenge, state, scopes, resource,
            now() + interval '10 minutes');
  return token;
end;
$$;
comment on function private.oauth_request_begin(text, text, text, text, text[], text) is
  'Keeps a validated authorization request until the user consents; returns the request''s secret id (for the consent form).';

create or replace function private.oauth_request_get(request_token text)
  returns table (client_id text, client_name text, client_uri text, redirect_uri text, scopes text[], state text)
  language sql stable
  set search_path = pg_catalog
  as $$
    select r.client_id, c.metadata->>'client_name', c.metadata->>'client_uri', r.redirect_uri, r.scopes, r.state
      from identity.oauth_requests r
      join identity.oauth_clients c on c.client_id = r.client_id
     where r.request_hash = identity.token_hash(request_token) and r.expires_at > now()
  $$;
comment on function private.oauth_request_get(text) is 'A pending authorization request (for the consent page); no row when unknown or expired.';

-- The user signs in and consents: the request becomes a code (PT401
-- invalid_credentials for a wrong e-mail or password; after 5 the request is
-- gone; PT404 request_expired when unknown or expired).
create or replace function private.oauth_request_approve(request_token text, email text, password text)
  returns table (redirect_uri text, code text, state text)
  language plpgsql volatile
  set search_path = pg_catalog
  as $$
declare
  request identity.oauth_requests;
  account identity.users;
  new_code text := identity.new_token();
begin
  select r.* into request from identity.oauth_requests r
   where r.request_hash = identity.token_hash(request_token) and r.expires_at > now()
   for update;
  if request.request_hash is null then
    raise exception 'this authorization request has expired; start again from your application'
      using errcode = 'PT404', hint = 'request_expired';
  end if;
  select u.* into account from identity.users u where u.email = lower(btrim(oauth_request_approve.email));
  if not identity.password_matches(password, account.password_hash) then
    if request.failures >= 4 then
      delete from identity.oauth_requests r where r.request_hash = request.request_hash;
    else
      update identity.oauth_requests r set failures = r.failures + 1 where r.request_hash = request.request_hash;
    end if;
    -- Commit the failure count, then refuse: the caller raises after commit.
    return query select null::text, null::text, null::text;
    return;
  end if;
  delete from identity.oauth_requests r where r.request_hash = request.request_hash;
  insert into identity.oauth_codes (code_hash, client_id, user_id, redirect_uri, code_challenge, scopes, resource, expires_at)
    values (identity.token_hash(new_code), request.client_id, account.id, request.redirect_uri, request.code_challenge,
            request.scopes, request.resource, now() + interval '1 minute');
  return query select request.redirect_uri, new_code, request.state;
end;
$$;
comment on function private.oauth_request_approve(text, text, text) is
  'Signs the user in (e-mail and password) and turns the pending request into a single-use code. A row of nulls means wrong credentials (counted); PT404 request_expired.';

create or replace function private.oauth_request_deny(request_token text)
  returns table (redirect_uri text, state text)
  language sql volatile
  set search_path = pg_catalog
  as $$
    delete from identity.oauth_requests r
     where r.request_hash = identity.token_hash(request_token) and r.expires_at > now()
    returning r.redirect_uri, r.state
  $$;
comment on function private.oauth_request_deny(text) is 'The user declined: forgets the request and returns where to send the error.';

--------------------------------------------------------------------------------
-- Tokens
--------------------------------------------------------------------------------

-- A code presented again after its use: revoke what its first use issued
-- (RFC 6749 10.5). Returns whether it did.
create or replace function private.oauth_code_reused(code text) returns boolean
  language sql volatile
  set search_path = pg_catalog
  as $$
    with revoked as (
      update identity.oauth_tokens t set revoked_at = now()
        from identity.oauth_codes c
       where c.code_hash = identity.token_hash(code) and c.used_at is not null
         and t.family_id = c.family_id and t.revoked_at is null
      returning 1)
    select exists (select from revoked)
  $$;

-- The PKCE challenge of a live code of the client; null (after revoking what
-- a reused code issued) otherwise. Failures are answered with null rather
-- than raised, so that the revocation commits.
create or replace function private.oauth_code_challenge(client_id text, code text) returns text
  language plpgsql volatile
  set search_path = pg_catalog
  as $$
declare
  challenge text;
begin
  select c.code_challenge into challenge from identity.oauth_codes c
   where c.code_hash = identity.token_hash(code) and c.client_id = oauth_code_challenge.client_id
     and c.used_at is null and c.expires_at > now();
  if challenge is null then
    perform private.oauth_code_reused(code);
  end if;
  return challenge;
end;
$$;
comment on function private.oauth_code_challenge(text, text) is
  'The PKCE challenge of a live code of the client; null when unknown, expired or used (a used code''s tokens are revoked).';

create or replace function private.oauth_issue_tokens(client_id text, user_id uuid, family_id uuid, scopes text[], resource text,
                                                      access_ttl integer)
  returns table (access_token text, refresh_token text, expires_in integer, scope text)
  language plpgsql volatile
  set search_path = pg_catalog
  as $$
declare
  access text := 'cboa_' || identity.new_token();
  refresh text := 'cbor_' || identity.new_token();
begin
  insert into identity.oauth_tokens (token_hash, kind, client_id, user_id, family_id, scopes, resource, expires_at) values
    (identity.token_hash(access), 'access', client_id, user_id, family_id, scopes, resource,
     now() + make_interval(secs => access_ttl)),
    (identity.token_hash(refresh), 'refresh', client_id, user_id, family_id, scopes, resource, now() + interval '30 days');
  return query select access, refresh, access_ttl, array_to_string(scopes, ' ');
end;
$$;
comment on function private.oauth_issue_tokens(text, uuid, uuid, text[], text, integer) is
  'Issues an access token and a refresh token of one family (tests use it to mint tokens directly).';

create or replace function private.oauth_code_exchange(client_id text, code text, redirect_uri text, resource text, access_ttl integer)
  returns table (access_token text, refresh_token text, expires_in integer, scope text)
  language plpgsql volatile
  set search_path = pg_catalog
  as $$
declare
  grant_row identity.oauth_codes;
begin
  update identity.oauth_codes c set used_at = now()
   where c.code_hash = identity.token_hash(code) and c.client_id = oauth_code_exchange.client_id
     and c.used_at is null and c.expires_at > now()
  returning c.* into grant_row;
  if grant_row.code_hash is null then
    -- No rows: invalid_grant (a reused code's tokens are revoked, and that commits).
    perform private.oauth_code_reused(code);
    return;
  end if;
  if redirect_uri is not null and redirect_uri <> grant_row.redirect_uri then
    perform private.oauth_invalid_grant('redirect_uri does not match the authorization request');
  end if;
  if resource is not null and grant_row.resource is not null and resource <> grant_row.resource then
    perform private.oauth_invalid_grant('resource does not match the authorization request');
  end if;
  return query select * from private.oauth_issue_tokens(grant_row.client_id, grant_row.user_id, grant_row.family_id,
                                                        grant_row.scopes, coalesce(grant_row.resource, resource), access_ttl);
end;
$$;
comment on function private.oauth_code_exchange(text, text, text, text, integer) is
  'Exchanges a code (single use; PKCE checked before) for tokens. No row when unknown, expired or reused; PT400 invalid_grant when mismatched.';

create or replace function private.oauth_token_refresh(client_id text, presented_token text, scopes text[], resource text, access_ttl integer)
  returns table (access_token text, refresh_token text, expires_in integer, scope text)
  language plpgsql volatile
  set search_path = pg_catalog
  as $$
-- `resource` is part of the OAuth provider's call; a refreshed token keeps the
-- resource of its grant, so the argument is not used.
-- @plpgsql_check_options: extra_warnings = false
declare
  old identity.oauth_tokens;
begin
  select t.* into old from identity.oauth_tokens t
   where t.token_hash = identity.token_hash(presented_token) and t.kind = 'refresh'
     and t.client_id = oauth_token_refresh.client_id
   for update;
  if old.id is null or old.expires_at <= now() then
    perform private.oauth_invalid_grant('invalid refresh token');
  end if;
  if old.revoked_at is not null then
    -- Reuse of a rotated token: revoke the family and answer no row (the revocation commits).
    update identity.oauth_tokens t set revoked_at = now() where t.family_id = old.family_id and t.revoked_at is null;
    return;
  end if;
  if scopes is not null and cardinality(scopes) > 0 and not scopes <@ old.scopes then
    raise exception 'requested scopes exceed the original grant' using errcode = 'PT400', hint = 'invalid_scope';
  end if;
  update identity.oauth_tokens t set revoked_at = now() where t.id = old.id;
  return query select * from private.oauth_issue_tokens(old.client_id, old.user_id, old.family_id,
                                                        coalesce(nullif(scopes, '{}'), old.scopes), old.resource, access_ttl);
end;
$$;
comment on function private.oauth_token_refresh(text, text, text[], text, integer) is
  'Rotates a refresh token. No row when a rotated one is presented again (the family is revoked); PT400 invalid_grant / invalid_scope.';

create or replace function private.oauth_token_authenticate(access_token text)
  returns table (token_id uuid, user_id uuid, client_id text, scopes text[], resource text, expires_at timestamptz)
  language plpgsql stable
  set search_path = pg_catalog
  as $$
begin
  return query
    select t.id, t.user_id, t.client_id, t.scopes, t.resource, t.expires_at
      from identity.oauth_tokens t
     where t.token_hash = identity.token_hash(access_token) and t.kind = 'access'
       and t.revoked_at is null and t.expires_at > now();
  if not found then
    raise exception 'invalid or expired access token' using errcode = 'PT401', hint = 'invalid_token';
  end if;
end;
$$;
comment on function private.oauth_token_authenticate(text) is 'The owner, client and scopes of a live OAuth access token; PT401 invalid_token otherwise.';

create or replace function private.oauth_token_revoke(client_id text, token text) returns void
  language sql volatile
  set search_path = pg_catalog
  as $$
    update identity.oauth_tokens t set revoked_at = now()
     where t.revoked_at is null
       and t.family_id in (select r.family_id from identity.oauth_tokens r
                            where r.token_hash = identity.token_hash(token) and r.client_id = oauth_token_revoke.client_id)
  $$;
comment on function private.oauth_token_revoke(text, text) is 'Revokes the token''s whole family (RFC 7009); unknown tokens are ignored.';

create or replace function private.oauth_prune() returns void
  language sql volatile
  set search_path = pg_catalog
  as $$
    delete from identity.oauth_requests where expires_at < now();
    delete from identity.oauth_codes where expires_at < now() - interval '1 day';
    delete from identity.oauth_tokens where expires_at < now() - interval '1 day';
  $$;
comment on function private.oauth_prune() is 'Deletes expired pending requests, codes and tokens.';

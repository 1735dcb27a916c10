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

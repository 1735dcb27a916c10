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

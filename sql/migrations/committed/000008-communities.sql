--! Previous: sha1:b48c02e37ac10343d0c23e5bbbccdd26a6bc1e11
--! Hash: sha1:7beef671cab0df5addaca452b33bab89df96b115
--! Message: communities

--------------------------------------------------------------------------------
-- Communities and memberships: rules and API
--
-- Visibility (row-level security):
--   * communities are readable by everyone, signed in or not (name,
--     description, tags, counts: nothing personal);
--   * membership rows are readable by signed-in users (a community's member
--     list shows member node ids, names and roles, never e-mails);
--   * a user creates and deletes only their own membership, as `member`;
--     managers are made by operators (admin.add_manager).
-- Rules:
--   * member_count is kept by the trigger of 000005 in the same transaction;
--   * the last manager cannot leave: a trigger locks the community row and
--     counts the other managers, so two managers leaving at once cannot both
--     succeed;
--   * join needs the caller's node; joining twice or leaving when not a member
--     is PT400; an unknown community is PT404.
-- Lists are ordered stably (documented per function) and paginated by
-- limit/offset; app.pagination() builds the pagination object.
--------------------------------------------------------------------------------

create extension if not exists pg_trgm with schema extensions;

--------------------------------------------------------------------------------
-- Helpers usable by request roles
--------------------------------------------------------------------------------

-- The caller's user node (null when signed out or when the user has none).
create function app.my_node_id() returns uuid
  language sql stable
  security definer
  set search_path = pg_catalog
  as $$
    select p.node_id from app.profiles p where p.id = auth.uid()
  $$;
comment on function app.my_node_id() is 'The node id of the signed-in user, or null.';
grant execute on function app.my_node_id() to anon, authenticated;

-- Timestamps in JSON exactly as the rest of the API writes them (UTC, ms, Z).
create function app.iso(ts timestamptz) returns text
  language sql immutable
  set search_path = pg_catalog
  as $$
    select to_char(ts at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')
  $$;
comment on function app.iso(timestamptz) is 'ISO 8601 in UTC with milliseconds, as the gateway writes timestamps.';
grant execute on function app.iso(timestamptz) to anon, authenticated;

-- The pagination object of spec section 2 (DESIGN.md: page = offset/limit + 1).
create function app.pagination(total_count bigint, page_limit integer, page_offset integer) returns jsonb
  language sql immutable
  set search_path = pg_catalog
  as $$
    select jsonb_build_object(
      'total_count', total_count,
      'page', page_offset / page_limit + 1,
      'page_size', page_limit,
      'total_pages', ceil(total_count::numeric / page_limit)::integer
    )
  $$;
comment on function app.pagination(bigint, integer, integer) is 'The pagination object: total_count, page, page_size, total_pages.';
grant execute on function app.pagination(bigint, integer, integer) to anon, authenticated;

-- A LIKE pattern that matches `needle` literally anywhere (%, _ and \ escaped).
create function app.contains_pattern(needle text) returns text
  language sql immutable strict
  set search_path = pg_catalog
  as $$
    select '%' || replace(replace(replace(needle, '\', '\\'), '%', '\%'), '_', '\_') || '%'
  $$;
comment on function app.contains_pattern(text) is 'LIKE pattern for a literal substring match.';
grant execute on function app.contains_pattern(text) to anon, authenticated;

-- The public fields of a community, as every community payload starts.
create function app.community_json(c app.communities) returns jsonb
  language sql stable
  set search_path = pg_catalog
  as $$
    select jsonb_build_object(
      'id', c.id, 'name', c.name, 'description', c.description, 'tags', to_jsonb(c.tags),
      'member_count', c.member_count, 'created_at', app.iso(c.created_at), 'updated_at', app.iso(c.updated_at))
  $$;
comment on function app.community_json(app.communities) is
  'id, name, description, tags, member_count, created_at, updated_at of a community (CommunityListItem''s common part).';
grant execute on function app.community_json(app.communities) to anon, authenticated;

create function app.check_page(page_limit integer, page_offset integer) returns void
  language plpgsql immutable
  set search_path = pg_catalog
  as $$
begin
  if page_limit is null or page_limit < 1 or page_limit > 100 then
    raise exception 'limit must be between 1 and 100' using errcode = 'PT400', hint = 'invalid_limit';
  end if;
  if page_offset is null or page_offset < 0 then
    raise exception 'offset must be 0 or more' using errcode = 'PT400', hint = 'invalid_offset';
  end if;
end;
$$;

--------------------------------------------------------------------------------
-- Search text: name, description and tags, kept by a trigger and served by a
-- trigram index (case-insensitive substring match stays fast as data grows).
--------------------------------------------------------------------------------

alter table app.communities add column search_text text not null default '';

create function private.tg_communities__search_text() returns trigger
  language plpgsql volatile
  set search_path = pg_catalog
  as $$
begin
  -- chr(31) (unit separator) keeps a query from matching across two fields.
  new.search_text := lower(concat_ws(chr(31), new.name, new.description, array_to_string(new.tags, chr(31))));
  return new;
end;
$$;

create trigger _200_search_text before insert or update of name, description, tags on app.communities
  for each row execute function private.tg_communities__search_text();

-- Fill search_text for existing rows without touching their updated_at.
alter table app.communities disable trigger _100_set_updated_at;
update app.communities set name = name;
alter table app.communities enable trigger _100_set_updated_at;

create index communities_search_trgm on app.communities using gin (search_text extensions.gin_trgm_ops);
create index communities_name_order on app.communities (lower(name), id);
create index community_members_roster on app.community_members (community_id, role, joined_at, member_node_id);

--------------------------------------------------------------------------------
-- The last manager stays
--------------------------------------------------------------------------------

create function private.tg_community_members__keep_a_manager() returns trigger
  language plpgsql volatile
  security definer
  set search_path = pg_catalog
  as $$
declare
  community_found boolean;
begin
  if old.role <> 'manager' or (tg_op = 'UPDATE' and new.role = 'manager') then
    return coalesce(new, old);
  end if;
  -- Serialise membership changes of this community, then count afresh.
  perform from app.communities c where c.id = old.community_id for update;
  community_found := found;
  if community_found and not exists (
    select from app.community_members m
    where m.community_id = old.community_id and m.role = 'manager' and m.member_node_id <> old.member_node_id
  ) then
    raise exception 'the last manager cannot leave the community' using errcode = 'PT400', hint = 'last_manager';
  end if;
  return coalesce(new, old);
end;
$$;
comment on function private.tg_community_members__keep_a_manager() is
  'Trigger: refuses to remove or demote the last manager of a community (PT400). Deleting the community itself is allowed.';

create trigger _100_keep_a_manager before delete or update of role on app.community_members
  for each row execute function private.tg_community_members__keep_a_manager();

--------------------------------------------------------------------------------
-- Row-level security
--------------------------------------------------------------------------------

grant select (id, node_id, name, description, tags, member_count, is_sandbox, is_draft, accepts_handoffs, created_at, updated_at, search_text)
  on app.communities to anon, authenticated;
grant usage on schema app to anon;
create policy "Communities are public" on app.communities
  for select to anon, authenticated
  using (true);

grant select, delete, insert (community_id, member_node_id) on app.community_members to authenticated;
create policy "Memberships are visible to signed-in users" on app.community_members
  for select to authenticated
  using (true);
create policy "Users join communities as themselves" on app.community_members
  for insert to authenticated
  with check (member_node_id = (select app.my_node_id()) and role = 'member');
create policy "Users leave communities as themselves" on app.community_members
  for delete to authenticated
  using (member_node_id = (select app.my_node_id()));

-- Other users' profiles stay private (RLS: own row only); member lists show
-- a member's display name through this one narrow function.
create function app.node_display_name(node_id uuid) returns text
  language sql stable
  security definer
  set search_path = pg_catalog
  as $$
    select p.name from app.profiles p where p.node_id = node_display_name.node_id
  $$;
comment on function app.node_display_name(uuid) is 'The display name of a user node (profile name), and nothing else.';
grant execute on function app.node_display_name(uuid) to authenticated;

--------------------------------------------------------------------------------
-- API
--------------------------------------------------------------------------------

-- GET /api/mobile/communities: the caller's communities, newest membership
-- first (joined_at desc, then community id).
create function api.communities_mine(page_limit integer default 50, page_offset integer default 0) returns jsonb
  language plpgsql stable
  set search_path = pg_catalog
  as $$
declare
  me uuid := app.my_node_id();
  total bigint;
  items jsonb;
begin
  perform app.check_page(page_limit, page_offset);
  select count(*) into total from app.community_members m where m.member_node_id = me;
  select coalesce(jsonb_agg(item order by ord), '[]') into items from (
    select row_number() over (order by m.joined_at desc, c.id) as ord,
           app.community_json(c) || jsonb_build_object('joined_at', app.iso(m.joined_at), 'role', m.role) as item
      from app.community_members m
      join app.communities c on c.id = m.community_id
      where m.member_node_id = me
      order by m.joined_at desc, c.id
      limit page_limit offset page_offset
  ) page;
  return jsonb_build_object('data', items, 'pagination', app.pagination(total, page_limit, page_offset));
end;
$$;
comment on function api.communities_mine(integer, integer) is
  'GET /api/mobile/communities: the caller''s communities with joined_at and role; newest membership first.';
grant execute on function api.communities_mine(integer, integer) to authenticated;

-- GET /api/mobile/communities/search: all communities whose name, description
-- or a tag contains q (case-insensitive, literally); by name, then id.
create function api.communities_search(q text, page_limit integer default 50, page_offset integer default 0) returns jsonb
  language plpgsql stable
  set search_path = pg_catalog
  as $$
declare
  me uuid := app.my_node_id();
  pattern text := app.contains_pattern(lower(q));
  total bigint;
  items jsonb;
begin
  if q is null or length(q) < 1 then
    raise exception 'q is required' using errcode = 'PT400', hint = 'invalid_query';
  end if;
  perform app.check_page(page_limit, page_offset);
  -- One scan: the page and the total together (the total only needs its own
  -- query when the page is empty, e.g. an offset past the end).
  with page as (
    select c.id, count(*) over () as total, row_number() over (order by lower(c.name), c.id) as ord
      from app.communities c
      where c.search_text like pattern
      order by lower(c.name), c.id
      limit page_limit offset page_offset
  )
  select coalesce(jsonb_agg(app.community_json(c) || jsonb_build_object(
           'is_member', m.role is not null, 'is_manager', coalesce(m.role = 'manager', false)
         ) order by n.ord), '[]'),
         max(n.total)
    into items, total
    from page n
    join app.communities c on c.id = n.id
    left join app.community_members m on m.community_id = c.id and m.member_node_id = me;
  if total is null then
    select count(*) into total from app.communities c where c.search_text like pattern;
  end if;
  return jsonb_build_object('data', items, 'pagination', app.pagination(total, page_limit, page_offset));
end;
$$;
comment on function api.communities_search(text, integer, integer) is
  'GET /api/mobile/communities/search: substring search of name, description and tags with is_member/is_manager; by name.';
grant execute on function api.communities_search(text, integer, integer) to authenticated;

-- GET /api/mobile/communities/{id}: CommunityDetail.
create function api.community_get(community_id uuid) returns jsonb
  language plpgsql stable
  set search_path = pg_catalog
  as $$
declare
  me uuid := app.my_node_id();
  result jsonb;
begin
  select app.community_json(c) || jsonb_build_object(
           'managers', (
             select coalesce(jsonb_agg(jsonb_build_object('id', mm.member_node_id, 'name', app.node_display_name(mm.member_node_id))
                                       order by mm.joined_at, mm.member_node_id), '[]')
               from app.community_members mm
               where mm.community_id = c.id and mm.role = 'manager'),
           'is_member', m.role is not null,
           'is_manager', coalesce(m.role = 'manager', false),
           'joined_at', app.iso(m.joined_at),
           'user_role', m.role
         )
    into result
    from app.communities c
    left join app.community_members m on m.community_id = c.id and m.member_node_id = me
    where c.id = community_get.community_id;
  if result is null then
    raise exception 'community not found' using errcode = 'PT404', hint = 'community_not_found';
  end if;
  return result;
end;
$$;
comment on function api.community_get(uuid) is
  'GET /api/mobile/communities/{id}: the community with its managers and the caller''s membership. PT404 when unknown.';
grant execute on function api.community_get(uuid) to authenticated;

-- GET /api/mobile/communities/{id}/members: managers first, then by joined_at.
create function api.community_members(community_id uuid, page_limit integer default 50, page_offset integer default 0) returns jsonb
  language plpgsql stable
  set search_path = pg_catalog
  as $$
declare
  total bigint;
  items jsonb;
begin
  perform app.check_page(page_limit, page_offset);
  if not exists (select from app.communities c where c.id = community_members.community_id) then
    raise exception 'community not found' using errcode = 'PT404', hint = 'community_not_found';
  end if;
  select count(*) into total from app.community_members m where m.community_id = community_members.community_id;
  select coalesce(jsonb_agg(item order by ord), '[]') into items from (
    select row_number() over (order by (m.role = 'manager') desc, m.joined_at, m.member_node_id) as ord,
           jsonb_build_object('id', m.member_node_id, 'role', m.role, 'joined_at', app.iso(m.joined_at),
                              'name', app.node_display_name(m.member_node_id)) as item
      from app.community_members m
      where m.community_id = community_members.community_id
      order by (m.role = 'manager') desc, m.joined_at, m.member_node_id
      limit page_limit offset page_offset
  ) page;
  return jsonb_build_object('data', items, 'pagination', app.pagination(total, page_limit, page_offset));
end;
$$;
comment on function api.community_members(uuid, integer, integer) is
  'GET /api/mobile/communities/{id}/members: member node ids, names, roles and joined_at; managers first, then oldest members.';
grant execute on function api.community_members(uuid, integer, integer) to authenticated;

create function app.require_community(community_id uuid) returns void
  language plpgsql stable
  set search_path = pg_catalog
  as $$
begin
  if not exists (select from app.communities c where c.id = require_community.community_id) then
    raise exception 'community not found' using errcode = 'PT404', hint = 'community_not_found';
  end if;
end;
$$;
grant execute on function app.require_community(uuid), app.check_page(integer, integer) to authenticated;

create function app.require_my_node() returns uuid
  language plpgsql stable
  set search_path = pg_catalog
  as $$
declare
  me uuid := app.my_node_id();
begin
  if me is null then
    raise exception 'user has no node' using errcode = 'PT400', hint = 'user_has_no_node';
  end if;
  return me;
end;
$$;
grant execute on function app.require_my_node() to authenticated;

-- POST /api/mobile/communities/{id}/join
create function api.community_join(community_id uuid) returns jsonb
  language plpgsql volatile
  set search_path = pg_catalog
  as $$
declare
  me uuid;
  joined timestamptz;
  new_count integer;
begin
  perform app.require_community(community_id);
  me := app.require_my_node();
  insert into app.community_members as m (community_id, member_node_id)
    values (community_join.community_id, me)
    on conflict on constraint community_members_pkey do nothing
    returning m.joined_at into joined;
  if joined is null then
    raise exception 'already a member of this community' using errcode = 'PT400', hint = 'already_member';
  end if;
  select c.member_count into new_count from app.communities c where c.id = community_join.community_id;
  return jsonb_build_object('member_count', new_count, 'role', 'member', 'joined_at', app.iso(joined));
end;
$$;
comment on function api.community_join(uuid) is
  'POST /api/mobile/communities/{id}/join: the caller joins as member. PT404 unknown community; PT400 already a member or no node.';
grant execute on function api.community_join(uuid) to authenticated;

-- POST /api/mobile/communities/{id}/leave
create function api.community_leave(community_id uuid) returns jsonb
  language plpgsql volatile
  set search_path = pg_catalog
  as $$
declare
  me uuid;
  left_node uuid;
  new_count integer;
begin
  perform app.require_community(community_id);
  me := app.require_my_node();
  delete from app.community_members m
    where m.community_id = community_leave.community_id and m.member_node_id = me
    returning m.member_node_id into left_node;
  if left_node is null then
    raise exception 'not a member of this community' using errcode = 'PT400', hint = 'not_a_member';
  end if;
  select c.member_count into new_count from app.communities c where c.id = community_leave.community_id;
  return jsonb_build_object('member_count', new_count);
end;
$$;
comment on function api.community_leave(uuid) is
  'POST /api/mobile/communities/{id}/leave: the caller leaves. PT404 unknown community; PT400 not a member, no node, or last manager.';
grant execute on function api.community_leave(uuid) to authenticated;

-- GET /api/community/{community_id}: public fields only, nothing about members.
create function api.community_public(community_id uuid) returns jsonb
  language plpgsql stable
  set search_path = pg_catalog
  as $$
declare
  result jsonb;
begin
  select app.community_json(c)
    into result
    from app.communities c
    where c.id = community_public.community_id;
  if result is null then
    raise exception 'community not found' using errcode = 'PT404', hint = 'community_not_found';
  end if;
  return result;
end;
$$;
comment on function api.community_public(uuid) is
  'GET /api/community/{id} (no credential): name, description, tags, member_count and timestamps. PT404 when unknown.';
grant execute on function api.community_public(uuid) to anon, authenticated;

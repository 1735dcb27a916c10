--! Previous: sha1:babaab1ab359b81d529789731b46ac9599bc3b47
--! Hash: sha1:0bedc1eefcdf5eb03015c3c17495b07fbf8bff63
--! Message: list-sql

--! split: 400-list-sql.sql
--------------------------------------------------------------------------------
-- List SQL: set-based, with inlinable per-row helpers (issue 11)
--
-- The lists were slow for reasons that are per row, not per query: every
-- timestamp went through app.iso() and every community through
-- app.community_json(), SQL functions that carried a SET clause and so could
-- not be inlined (each call a function call with a GUC save and restore);
-- every upcoming event ran private.event_json(), a PL/pgSQL function with two
-- queries of its own (the hosting community, and whether the caller manages
-- it, through app.my_node_id() each time).
--
-- Now the per-row helpers are SQL functions without SET (the planner inlines
-- them into the calling query: plain expressions per row), the Event object
-- is built from its parts by one inlinable function (private.event_object),
-- and api.events_upcoming reads the caller's memberships once and joins.
-- Same results, same order, same rules.
--------------------------------------------------------------------------------

-- Timestamps in JSON exactly as the rest of the API writes them (UTC, ms, Z).
-- Stable (to_char is) and without SET so that it is inlined where it is used.
create or replace function app.iso(ts timestamptz) returns text
  language sql stable
  as $$
    select pg_catalog.to_char(pg_catalog.timezone('UTC', ts), 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')
  $$;
comment on function app.iso(timestamptz) is 'ISO 8601 in UTC with milliseconds, as the gateway writes timestamps (inlined by the planner).';

-- The public fields of a community, as every community payload starts
-- (inlinable: no SET).
create or replace function app.community_json(c app.communities) returns jsonb
  language sql stable
  as $$
    select pg_catalog.jsonb_build_object(
      'id', c.id, 'name', c.name, 'description', c.description, 'tags', pg_catalog.to_jsonb(c.tags),
      'member_count', c.member_count, 'created_at', app.iso(c.created_at), 'updated_at', app.iso(c.updated_at))
  $$;
comment on function app.community_json(app.communities) is
  'id, name, description, tags, member_count, created_at, updated_at of a community (CommunityListItem''s common part; inlined by the planner).';

--------------------------------------------------------------------------------
-- Events
--------------------------------------------------------------------------------

-- The Event object of spec section 2 from its parts: the event row, the
-- hosting community's node id, whether the caller manages that community
-- (can_sync and external_platforms are present only then) and PUBLIC_URL.
-- Plain SQL without SET: inlined into the query that lists events.
create or replace function private.event_object(e app.events, community_node_id uuid, caller_manages boolean, public_url text)
  returns jsonb
  language sql stable
  as $$
    select pg_catalog.jsonb_build_object(
             'id', e.id,
             'title', e.title,
             'date', app.iso(e.starts_at),
             'community_node_id', community_node_id,
             'shortlink', e.shortlink,
             'deeplink_path', '/l/event/' || e.shortlink,
             'deeplink_url', pg_catalog.rtrim(public_url, '/') || '/l/event/' || e.shortlink,
             'public_url', '/e/' || e.shortlink,
             'public_full_url', pg_catalog.rtrim(public_url, '/') || '/e/' || e.shortlink,
             'description', e.description,
             'end_time', app.iso(e.ends_at),
             'event_url', e.event_url,
             'image_path', e.image_path,
             'location', e.location,
             'node_id', e.node_id,
             'platform_a_url', e.platform_a_url,
             'platform_b_url', e.platform_b_url,
             'platform_c_url', e.platform_c_url)
           operator(pg_catalog.||)
           case when caller_manages then pg_catalog.jsonb_build_object(
             'can_sync', true,
             'external_platforms', pg_catalog.to_jsonb(pg_catalog.array_remove(array[
               case when e.platform_a_url is not null then 'platform_a' end,
               case when e.platform_b_url is not null then 'platform_b' end,
               case when e.platform_c_url is not null then 'platform_c' end
             ], null)))
           else '{}'::jsonb end
  $$;
comment on function private.event_object(app.events, uuid, boolean, text) is
  'The Event object (spec section 2) from the event, its community''s node id, whether the caller manages that community, and PUBLIC_URL.';
grant execute on function private.event_object(app.events, uuid, boolean, text) to authenticated;

-- One event as the signed-in caller may see it (event_get, check-ins, the
-- realtime feed): looks up the community and the caller's role, then builds
-- the object with private.event_object.
create or replace function private.event_json(e app.events, public_url text) returns jsonb
  language plpgsql stable
  security definer
  set search_path = pg_catalog
  as $$
declare
  community_node uuid;
begin
  select c.node_id into community_node from app.communities c where c.id = e.community_id;
  return private.event_object(e, community_node, exists (
    select from app.community_members m
     where m.community_id = e.community_id
       and m.role = 'manager'
       and m.member_node_id = app.my_node_id()), public_url);
end;
$$;
comment on function private.event_json(app.events, text) is
  'The Event object (spec section 2) as the signed-in caller may see it; public_url is PUBLIC_URL.';

drop function if exists private.caller_memberships();

-- GET /api/mobile/events/upcoming as one JSON array. The caller's memberships
-- are read in the same query (joined once, not looked up per event), and the
-- Event object is built inline (private.event_object is inlined). PL/pgSQL
-- for its cached plan.
create or replace function api.events_upcoming_page(public_url text)
  returns json
  language plpgsql stable
  set search_path = pg_catalog
  as $$
begin
  return (
    select coalesce(json_agg(u.event order by u.starts_at, u.id), '[]'::json)
      from (
        select private.event_object(e, c.node_id, m.role = 'manager', events_upcoming_page.public_url) as event,
               e.starts_at, e.id
          from app.community_members m
          join app.events e on e.community_id = m.community_id
          join app.communities c on c.id = e.community_id
         where m.member_node_id = (select app.my_node_id())
           and private.event_effective_end(e.starts_at, e.ends_at) >= now()
         order by e.starts_at, e.id
         limit 100
      ) u);
end;
$$;
comment on function api.events_upcoming_page(text) is
  'GET /api/mobile/events/upcoming: the JSON array of the events of the caller''s communities whose effective end is not past, soonest first, at most 100.';
grant execute on function api.events_upcoming_page(text) to authenticated;

-- The same list as rows (the realtime stream starts from it).
create or replace function api.events_upcoming(public_url text)
  returns setof jsonb
  language sql stable
  set search_path = pg_catalog
  as $$
    select u.event::jsonb from json_array_elements(api.events_upcoming_page(events_upcoming.public_url)) with ordinality as u(event, n)
     order by u.n
  $$;
comment on function api.events_upcoming(text) is
  'The events of api.events_upcoming_page as rows, soonest first.';

--------------------------------------------------------------------------------
-- Communities
--------------------------------------------------------------------------------

-- GET /api/mobile/communities/{id}/members: managers first, then by joined_at.
-- One scan for the page and the total (count(*) over ()); the total needs
-- its own count only when the page is empty (an offset past the end).
create or replace function api.community_members(community_id uuid, page_limit integer default 50, page_offset integer default 0) returns jsonb
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
  select coalesce(jsonb_agg(jsonb_build_object('id', p.member_node_id, 'role', p.role, 'joined_at', app.iso(p.joined_at),
                                               'name', app.node_display_name(p.member_node_id))
                            order by p.is_manager desc, p.joined_at, p.member_node_id), '[]'),
         max(p.total)
    into items, total
    from (
      select m.member_node_id, m.role, m.joined_at, m.role = 'manager' as is_manager, count(*) over () as total
        from app.community_members m
       where m.community_id = community_members.community_id
       order by (m.role = 'manager') desc, m.joined_at, m.member_node_id
       limit page_limit offset page_offset
    ) p;
  if total is null then
    select count(*) into total from app.community_members m where m.community_id = community_members.community_id;
  end if;
  return jsonb_build_object('data', items, 'pagination', app.pagination(total, page_limit, page_offset));
end;
$$;

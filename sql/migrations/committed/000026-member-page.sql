--! Previous: sha1:20e7421558de0c6d7bb551149fab437fa6d44545
--! Hash: sha1:d22f26899191ebeb26e2ccc13397987f89fbc39d
--! Message: member-page

--! split: 026-member-page.sql
--------------------------------------------------------------------------------
-- A page of members without reading the whole roster (issue 11, the list SQL).
--
-- After 000024 a page of 50 members still took 3.4x a plain select of its
-- rows. Measured piece by piece (the gateway bench's community of 121, and
-- one of 202 members):
--   * the name-privacy rule evaluated auth.uid() (which parses the request's
--     claims JSON) in a subquery per member, and looked up the caller's
--     managed communities again for every member: now the caller and the
--     communities the caller manages are read once per call;
--   * the total came from count(*) over () on the page query, which read and
--     sorted every member of the community to return 50: the total is now
--     the community's member_count (kept by the membership trigger of 000005
--     in the same transaction, and read in the same snapshot), and the page
--     is read in the order of the roster index (community_id, role,
--     joined_at, member_node_id), stopping after the page.
-- Result on PG18: 1.6 ms -> 1.1 ms for a page of 50, 2.3x the plain select.
--------------------------------------------------------------------------------

-- The display names that the caller may see, of many user nodes at once.
-- (PL/pgSQL: its query plan is kept between calls; a SQL function that
-- cannot be inlined is planned again at every call.)
create or replace function app.node_display_names(node_ids uuid[])
  returns table (node_id uuid, name text)
  language plpgsql stable security definer
  set search_path = pg_catalog
  as $$
declare
  caller constant uuid := auth.uid();
  -- the communities the caller manages: their members' names are visible to the caller
  managed constant uuid[] := array(
    select mine.community_id
      from app.community_members mine
      join app.profiles me on me.node_id = mine.member_node_id
     where me.id = caller
       and mine.role = 'manager');
begin
  return query
    select p.node_id, p.name
      from app.profiles p
     where p.node_id = any(node_display_names.node_ids)
       and (p.name_source = 'chosen'
            or p.id = caller
            or exists (
              select
                from app.community_members theirs
               where theirs.member_node_id = p.node_id
                 and theirs.community_id = any(managed)));
end;
$$;
comment on function app.node_display_names(uuid[]) is
  'The display names (profile names) of these user nodes that the caller may see: a name chosen by its user, the caller''s own, or a member of a community the caller manages. Nodes whose name the caller may not see are left out. The one definition of name privacy (node_display_name is it for one node).';

create or replace function api.community_members(community_id uuid, page_limit integer default 50, page_offset integer default 0)
  returns jsonb
  language plpgsql stable
  set search_path = pg_catalog
  as $$
declare
  total bigint;
  items jsonb;
begin
  perform app.check_page(page_limit, page_offset);
  select c.member_count into total from app.communities c where c.id = community_members.community_id;
  if not found then
    raise exception 'community not found' using errcode = 'PT404', hint = 'community_not_found';
  end if;
  with page as (
    -- Managers first, then by joining time: 'manager' sorts before 'member'
    -- (the only two roles, see the check on app.community_members.role), so
    -- ordering by role follows the roster index and stops after the page.
    select m.member_node_id, m.role, m.joined_at
      from app.community_members m
     where m.community_id = community_members.community_id
     order by m.role, m.joined_at, m.member_node_id
     limit page_limit offset page_offset
  ),
  -- the names of the page's members, in one call of the privacy rule
  names as (
    select n.node_id, n.name from app.node_display_names(array(select p.member_node_id from page p)) n
  )
  select coalesce(jsonb_agg(jsonb_build_object('id', p.member_node_id, 'role', p.role, 'joined_at', app.iso(p.joined_at),
                                               'name', n.name)
                            order by p.role, p.joined_at, p.member_node_id), '[]')
    into items
    from page p
    left join names n on n.node_id = p.member_node_id;
  return jsonb_build_object('data', items, 'pagination', app.pagination(total, page_limit, page_offset));
end;
$$;

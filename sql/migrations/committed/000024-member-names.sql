--! Previous: sha1:005f86b6a26a7c58eaf02aa316d6e3bef07901d4
--! Hash: sha1:13cee61c1b6bd92382416504bb5f9eac37b30ded
--! Message: member-names

--! split: 024-member-names.sql
--------------------------------------------------------------------------------
-- Member names for a page at once (issue 11, the list SQL).
--
-- api.community_members called app.node_display_name once per member: a
-- SECURITY DEFINER function, so each of the 50 rows of a page paid a
-- function call with its own search_path switch and lookups. Measured with
-- the gateway bench's list SQL once its community really held a page of 50
-- members (before, it measured a community of one): 5.7 ms, 11x a plain
-- select of the same rows. The privacy rule now reads a set of nodes at
-- once, app.node_display_names, which the page calls once (1.7 ms, 3.4x);
-- app.node_display_name (used by the other callers) is that rule for one
-- node.
--------------------------------------------------------------------------------

-- The display names that the caller may see, of many user nodes at once.
-- (PL/pgSQL: its query plan is kept between calls; a SQL function that
-- cannot be inlined is planned again at every call.)
create or replace function app.node_display_names(node_ids uuid[])
  returns table (node_id uuid, name text)
  language plpgsql stable security definer
  set search_path = pg_catalog
  as $$
begin
  return query
    select p.node_id, p.name
      from app.profiles p
     where p.node_id = any(node_display_names.node_ids)
       and (p.name_source = 'chosen'
            or p.id = auth.uid()
            or exists (
              select
                from app.community_members theirs
                join app.community_members mine on mine.community_id = theirs.community_id
                join app.profiles me on me.node_id = mine.member_node_id
               where theirs.member_node_id = p.node_id
                 and mine.role = 'manager'
                 and me.id = auth.uid()));
end;
$$;
comment on function app.node_display_names(uuid[]) is
  'The display names (profile names) of these user nodes that the caller may see: a name chosen by its user, the caller''s own, or a member of a community the caller manages. Nodes whose name the caller may not see are left out. The one definition of name privacy (node_display_name is it for one node).';
revoke all on function app.node_display_names(uuid[]) from public;
grant execute on function app.node_display_names(uuid[]) to authenticated;

create or replace function app.node_display_name(node_id uuid)
  returns text
  language sql stable
  set search_path = pg_catalog
  as $$
    select n.name from app.node_display_names(array[node_display_name.node_id]) n
  $$;

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
  if not exists (select from app.communities c where c.id = community_members.community_id) then
    raise exception 'community not found' using errcode = 'PT404', hint = 'community_not_found';
  end if;
  with page as (
    select m.member_node_id, m.role, m.joined_at, m.role = 'manager' as is_manager, count(*) over () as total
      from app.community_members m
     where m.community_id = community_members.community_id
     order by (m.role = 'manager') desc, m.joined_at, m.member_node_id
     limit page_limit offset page_offset
  ),
  -- the names of the page's members, in one call of the privacy rule
  names as (
    select n.node_id, n.name from app.node_display_names(array(select p.member_node_id from page p)) n
  )
  select coalesce(jsonb_agg(jsonb_build_object('id', p.member_node_id, 'role', p.role, 'joined_at', app.iso(p.joined_at),
                                               'name', n.name)
                            order by p.is_manager desc, p.joined_at, p.member_node_id), '[]'),
         max(p.total)
    into items, total
    from page p
    left join names n on n.node_id = p.member_node_id;
  if total is null then
    select count(*) into total from app.community_members m where m.community_id = community_members.community_id;
  end if;
  return jsonb_build_object('data', items, 'pagination', app.pagination(total, page_limit, page_offset));
end;
$$;

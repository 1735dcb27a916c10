-- Communities: joining and leaving through the api functions (with their
-- refusals), what a member and an outsider see, search, its trigram index and
-- paging limits, a page of members and the names it shows, the name rule for
-- one node and for a set of nodes, row-level security on memberships, the
-- member count, and the rule that a community always keeps a manager,
-- whatever path removes or demotes one.
begin;
select plan(66);

select tests.create_user('boss');
select tests.create_user('deputy');
select tests.create_user('member');
select tests.create_user('other');
select tests.create_user('nodeless');
-- A word no other community has, so that searches see only this test's.
select set_config('tests.word', 'kayak' || substr(md5(gen_random_uuid()::text), 1, 10), true);
select set_config('tests.community', admin.create_community('Managed ' || current_setting('tests.word'), 'Paddling', '{water}',
  tests.email('boss'))::text, true);
create function pg_temp.community() returns uuid language sql stable as $$ select current_setting('tests.community')::uuid $$;
grant execute on function pg_temp.community() to public;

-- Joining and leaving ------------------------------------------------------

select tests.authenticate_as('member');
select is(
  api.community_join(pg_temp.community()) - 'joined_at', '{"member_count": 2, "role": "member"}'::jsonb,
  'community_join: the caller joins as a member; the count includes the manager');
select throws_ok(
  format('select api.community_join(%L)', pg_temp.community()),
  'PT400', 'already a member of this community', 'community_join: twice is PT400');
select throws_ok(
  format('select api.community_join(%L)', gen_random_uuid()),
  'PT404', 'community not found', 'community_join: an unknown community is PT404');
select is(
  (select r - 'joined_at' - 'created_at' - 'updated_at' - 'id' from api.community_get(pg_temp.community()) r),
  jsonb_build_object('name', 'Managed ' || current_setting('tests.word'), 'description', 'Paddling', 'tags', array['water'],
                     'member_count', 2, 'is_member', true, 'is_manager', false, 'user_role', 'member', 'image_url', null,
                     'managers', jsonb_build_array(jsonb_build_object('id', tests.node_id('boss'), 'name', 'boss'))),
  'community_get: the community, its managers and the caller''s membership');
select throws_ok(
  format('select api.community_get(%L)', gen_random_uuid()),
  'PT404', 'community not found', 'community_get: an unknown community is PT404');
select is(
  (select jsonb_path_query_array(r, '$.data[*].id') from api.communities_mine(50, 0) r),
  jsonb_build_array(pg_temp.community()), 'communities_mine: the communities the caller belongs to');

select tests.authenticate_as('other');
select lives_ok(format('select api.community_join(%L)', pg_temp.community()), 'another user joins');
reset role;
-- distinct joining times (one transaction has one now()): member first, manager last
update app.community_members set joined_at = joined_at - interval '2 minutes' where member_node_id = tests.node_id('member');
update app.community_members set joined_at = joined_at - interval '1 minute' where member_node_id = tests.node_id('other');

select tests.authenticate_as('member');
select is(
  (select jsonb_path_query_array(r, '$.data[*].id') from api.community_members(pg_temp.community(), 50, 0) r),
  jsonb_build_array(tests.node_id('boss'), tests.node_id('member'), tests.node_id('other')),
  'community_members: the manager first, then members by joining time');
select is(
  (select r -> 'pagination' from api.community_members(pg_temp.community(), 2, 2) r),
  '{"total_count": 3, "page": 2, "page_size": 2, "total_pages": 2}'::jsonb,
  'community_members: the second page of two');
select throws_ok(
  format('select api.community_members(%L, 0, 0)', pg_temp.community()),
  'PT400', 'limit must be between 1 and 100', 'community_members: a page of 0 is PT400');
select throws_ok(
  format('select api.community_members(%L, 101, 0)', pg_temp.community()),
  'PT400', 'limit must be between 1 and 100', 'community_members: a page of 101 is PT400');
select throws_ok(
  format('select api.community_members(%L, 10, -1)', pg_temp.community()),
  'PT400', 'offset must be 0 or more', 'community_members: a negative offset is PT400');

-- Row-level security on memberships: only as oneself, only as a member.
select throws_ok(
  format('insert into app.community_members (community_id, member_node_id) values (%L, %L)', pg_temp.community(), tests.node_id('deputy')),
  '42501', 'new row violates row-level security policy for table "community_members"',
  'a user cannot add someone else to a community');
select throws_ok(
  $$update app.community_members set role = 'manager' where member_node_id = tests.node_id('member')$$,
  '42501', 'permission denied for table community_members', 'a member cannot promote themselves');
delete from app.community_members where member_node_id = tests.node_id('other');
reset role;
select is(
  (select count(*)::int from app.community_members where member_node_id = tests.node_id('other') and community_id = pg_temp.community()),
  1, 'a user cannot remove someone else (the delete matched no row)');

select tests.authenticate_as('member');
select is(api.community_leave(pg_temp.community()), '{"member_count": 2}'::jsonb, 'community_leave: the count follows');
select throws_ok(
  format('select api.community_leave(%L)', pg_temp.community()),
  'PT400', 'not a member of this community', 'community_leave: not a member is PT400');
select tests.authenticate_as('boss');
select throws_ok(
  format('select api.community_leave(%L)', pg_temp.community()),
  'PT400', 'the last manager cannot leave the community', 'community_leave: the last manager cannot leave');
reset role;
update app.profiles set node_id = null where id = tests.user_id('nodeless');
select tests.authenticate_as('nodeless');
select throws_ok(
  format('select api.community_join(%L)', pg_temp.community()),
  'PT400', 'user has no node', 'community_join: a user without a node is PT400');

-- Search and the public record ---------------------------------------------

select tests.authenticate_as('deputy');
select is(
  (select r -> 'data' -> 0 ->> 'id' || ' ' || (r -> 'data' -> 0 ->> 'is_member') || ' ' || (r -> 'pagination' ->> 'total_count')
     from api.communities_search(upper(current_setting('tests.word')), 10, 0) r),
  pg_temp.community() || ' false 1', 'communities_search: case-insensitive substring of the name, with is_member');
select throws_ok($$select api.communities_search('', 10, 0)$$, 'PT400', 'q is required', 'communities_search: an empty q is PT400');
select is(
  (select (r -> 'pagination' ->> 'total_count')::int from api.communities_search(current_setting('tests.word') || '%', 10, 0) r),
  0, 'communities_search: % in q is a literal character, not a wildcard');
reset role;
update app.communities set description = 'Now with canoes ' || current_setting('tests.word') || 'x' where id = pg_temp.community();
select tests.authenticate_as('deputy');
select is(
  (select (r -> 'pagination' ->> 'total_count')::int from api.communities_search(current_setting('tests.word') || 'x', 10, 0) r),
  1, 'communities_search: the search text follows a changed description (trigger)');

select tests.authenticate_as_anon();
select is(
  (select array(select jsonb_object_keys(api.community_public(pg_temp.community())) order by 1)),
  array['created_at', 'description', 'id', 'image_url', 'member_count', 'name', 'tags', 'updated_at'],
  'community_public (no credential): only the public fields');
select throws_ok(
  format('select api.community_public(%L)', gen_random_uuid()), 'PT404', 'community not found', 'community_public: unknown is PT404');
select throws_ok(
  $$select count(*) from app.community_members$$, '42501', 'permission denied for table community_members',
  'anonymous callers read no memberships');
select throws_ok(
  format('select api.community_join(%L)', pg_temp.community()), '42501', 'permission denied for function community_join',
  'anonymous callers cannot join');
reset role;

-- The last manager, whatever the path --------------------------------------

select throws_ok(
  $$delete from app.community_members where community_id = pg_temp.community()$$,
  'PT400', 'the last manager cannot leave the community', 'deleting the last manager is refused');
select throws_ok(
  $$update app.community_members set role = 'member' where community_id = pg_temp.community()$$,
  'PT400', 'the last manager cannot leave the community', 'demoting the last manager is refused');

select admin.add_manager(pg_temp.community(), tests.email('deputy'));
select lives_ok(
  $$update app.community_members set role = 'member'
     where community_id = pg_temp.community() and member_node_id = tests.node_id('boss')$$,
  'with a second manager, the first may step down');
select throws_ok(
  $$delete from app.community_members where community_id = pg_temp.community() and member_node_id = tests.node_id('deputy')$$,
  'PT400', 'the last manager cannot leave the community', 'but then the second is the last one');
select is(
  (select member_count from app.communities where id = pg_temp.community()),
  (select count(*)::int from app.community_members where community_id = pg_temp.community()),
  'member_count is the number of memberships (trigger)');
select lives_ok(
  $$delete from app.communities where id = pg_temp.community()$$,
  'deleting the whole community is allowed');

-- Join and leave, alone in a community without a manager -----------------------

select tests.create_user('joiner');
select set_config('tests.plain', admin.create_community('Plain ' || current_setting('tests.word'))::text, true);
select tests.authenticate_as('joiner');
select is(
  api.community_join(current_setting('tests.plain')::uuid) - 'joined_at', '{"member_count": 1, "role": "member"}'::jsonb,
  'community_join: member_count 1 and role member, returned with the membership');
select throws_ok(
  format('select api.community_join(%L)', current_setting('tests.plain')),
  'PT400', 'already a member of this community', 'community_join twice: PT400 already_member');
select is(
  api.community_leave(current_setting('tests.plain')::uuid), '{"member_count": 0}'::jsonb,
  'community_leave: member_count back to 0');
select throws_ok(
  format('select api.community_leave(%L)', current_setting('tests.plain')),
  'PT400', 'not a member of this community', 'community_leave when not a member: PT400 not_a_member');
select throws_ok(
  format('select api.community_join(%L)', gen_random_uuid()), 'PT404', null, 'community_join of an unknown community is PT404');
reset role;

-- The last manager: deleting the community takes its memberships -------------------

select set_config('tests.doomed', admin.create_community('Doomed', null, '{}', tests.email('joiner'))::text, true);
select throws_ok(
  format('delete from app.community_members where community_id = %L', current_setting('tests.doomed')),
  'PT400', 'the last manager cannot leave the community', 'the only manager cannot be deleted (last_manager)');
delete from app.communities where id = current_setting('tests.doomed')::uuid;
select is(
  (select count(*)::int from app.community_members where community_id = current_setting('tests.doomed')::uuid), 0,
  'deleting the community deletes its memberships, the last manager''s too');

-- Row-level security on memberships ------------------------------------------------

select tests.create_user('rls_alice');
select tests.create_user('rls_bob');
select set_config('tests.rls', admin.create_community('Row level ' || current_setting('tests.word'))::text, true);
select tests.authenticate_as('rls_alice');
select throws_ok(
  format('insert into app.community_members (community_id, member_node_id) values (%L, %L)', current_setting('tests.rls'), tests.node_id('rls_bob')),
  '42501', null, 'a user cannot add someone else to a community');
select throws_ok(
  format('insert into app.community_members (community_id, member_node_id, role) values (%L, %L, %L)',
         current_setting('tests.rls'), tests.node_id('rls_alice'), 'manager'),
  '42501', null, 'nor make themselves a manager');
select tests.authenticate_as('rls_bob');
select api.community_join(current_setting('tests.rls')::uuid);
select tests.authenticate_as('rls_alice');
with gone as (delete from app.community_members where community_id = current_setting('tests.rls')::uuid returning 1)
select set_config('tests.deleted', (select count(*)::text from gone), true);
select is(current_setting('tests.deleted'), '0', 'nor remove someone else (no row is deleted)');
reset role;

-- Names: private when derived from the e-mail ---------------------------------------

select tests.create_user_named_by_email('n_alice');
select tests.create_user_named_by_email('n_bob');
select tests.authenticate_as('n_alice');
select is((select count(*)::int from app.profiles where id = tests.user_id('n_bob')), 0, 'another user''s profile row stays private');
select is(app.node_display_name(tests.node_id('n_bob')), null, 'and a name derived from their e-mail is not shown');
select tests.authenticate_as('n_bob');
select is(app.node_display_name(tests.node_id('n_bob')), split_part(tests.email('n_bob'), '@', 1), 'but the user sees their own');
select api.profile_update('Bob B.');
select tests.authenticate_as('n_alice');
select is(app.node_display_name(tests.node_id('n_bob')), 'Bob B.', 'a name the user chose is shown to others');

reset role;
select tests.create_user_named_by_email('s_alice');
select tests.create_user_named_by_email('s_bob');
select tests.create_user_named_by_email('s_carol');
select tests.authenticate_as('s_carol');
select api.profile_update('Carol C.');
select tests.authenticate_as('s_alice');
select set_config('tests.set', array[tests.node_id('s_alice'), tests.node_id('s_bob'), tests.node_id('s_carol')]::text, true);
select is(
  (select jsonb_object_agg(node_id, name) from app.node_display_names(current_setting('tests.set')::uuid[])),
  jsonb_build_object(tests.node_id('s_alice'), split_part(tests.email('s_alice'), '@', 1), tests.node_id('s_carol'), 'Carol C.'),
  'node_display_names: the same rule for a set of nodes, leaving out the names the caller may not see');
select is(app.node_display_name(tests.node_id(u)),
          (select name from app.node_display_names(current_setting('tests.set')::uuid[]) where node_id = tests.node_id(u)),
          'node_display_name agrees with node_display_names for ' || u)
  from unnest(array['s_alice', 's_bob', 's_carol']) u;

reset role;
select tests.create_user_named_by_email('m_manager');
select tests.create_user_named_by_email('m_member');
select tests.create_user_named_by_email('m_elsewhere');
select set_config('tests.managed', admin.create_community('Managed names', null, '{}', tests.email('m_manager'))::text, true);
select set_config('tests.elsewhere', admin.create_community('Other names')::text, true);
select tests.authenticate_as('m_member');
select api.community_join(current_setting('tests.managed')::uuid);
select tests.authenticate_as('m_elsewhere');
select api.community_join(current_setting('tests.elsewhere')::uuid);
select tests.authenticate_as('m_manager');
select api.community_join(current_setting('tests.elsewhere')::uuid);
select is(
  (select jsonb_object_agg(node_id, name)
     from app.node_display_names(array[tests.node_id('m_manager'), tests.node_id('m_member'), tests.node_id('m_elsewhere')])),
  jsonb_build_object(tests.node_id('m_manager'), split_part(tests.email('m_manager'), '@', 1),
                     tests.node_id('m_member'), split_part(tests.email('m_member'), '@', 1)),
  'a manager sees the names of the members of the communities they manage, and only of those');
reset role;

-- A page of members ------------------------------------------------------------------

select tests.create_user_named_by_email('p_manager');
select set_config('tests.paged', admin.create_community('Paged', null, '{}', tests.email('p_manager'))::text, true);
select tests.create_user_named_by_email('p_' || i) from generate_series(0, 3) i;
select tests.authenticate_as('p_0');
select api.community_join(current_setting('tests.paged')::uuid);
select tests.authenticate_as('p_1');
select api.community_join(current_setting('tests.paged')::uuid);
select tests.authenticate_as('p_2');
select api.community_join(current_setting('tests.paged')::uuid);
select tests.authenticate_as('p_3');
select api.community_join(current_setting('tests.paged')::uuid);
reset role;
-- distinct joining times, oldest first
update app.community_members m set joined_at = now() - make_interval(mins => 10 - i)
  from generate_series(0, 3) i
 where m.community_id = current_setting('tests.paged')::uuid and m.member_node_id = tests.node_id('p_' || i);
create function pg_temp.members_page(page_limit int, page_offset int) returns jsonb language sql as $$
  select api.community_members(current_setting('tests.paged')::uuid, page_limit, page_offset)
$$;
grant execute on function pg_temp.members_page(int, int) to public;
select tests.authenticate_as('p_manager');
select is(
  (select jsonb_agg(jsonb_build_array(m ->> 'id', m ->> 'role')) from jsonb_array_elements(pg_temp.members_page(3, 0) -> 'data') m),
  jsonb_build_array(jsonb_build_array(tests.node_id('p_manager'), 'manager'), jsonb_build_array(tests.node_id('p_0'), 'member'),
                    jsonb_build_array(tests.node_id('p_1'), 'member')),
  'community_members: managers first, then by joining time');
select is(
  (select jsonb_agg(m -> 'name') from jsonb_array_elements(pg_temp.members_page(3, 0) -> 'data') m),
  jsonb_build_array(split_part(tests.email('p_manager'), '@', 1), split_part(tests.email('p_0'), '@', 1), split_part(tests.email('p_1'), '@', 1)),
  'the manager of the community sees every member''s name (derived from their e-mail here)');
select is(
  pg_temp.members_page(3, 0) -> 'pagination', '{"total_count": 5, "page": 1, "page_size": 3, "total_pages": 2}'::jsonb,
  'the total is member_count');
select is(
  (select jsonb_agg(m -> 'id') from jsonb_array_elements(pg_temp.members_page(3, 3) -> 'data') m),
  jsonb_build_array(tests.node_id('p_2'), tests.node_id('p_3')), 'the next page follows on');
select is(pg_temp.members_page(3, 6) -> 'data', '[]'::jsonb, 'and the page after the last is empty');
reset role;
select is((select member_count from app.communities where id = current_setting('tests.paged')::uuid), 5, 'member_count is 5');
select tests.authenticate_as('p_1');
select is(
  (select jsonb_agg(m -> 'name') from jsonb_array_elements(pg_temp.members_page(5, 0) -> 'data') m),
  jsonb_build_array(null, null, split_part(tests.email('p_1'), '@', 1), null, null),
  'a member sees no e-mail-derived name but their own');
select tests.authenticate_as('p_manager');
select throws_ok(
  format('select api.community_members(%L, 5, 0)', gen_random_uuid()), 'PT404', null, 'community_members of an unknown community is PT404');
reset role;

-- Search and paging helpers --------------------------------------------------------

select is(
  jsonb_build_object(
    'a', '50% off' like app.contains_pattern('0%'), 'b', '50 off' like app.contains_pattern('0%'),
    'c', 'a_b' like app.contains_pattern('_'), 'd', 'ab' like app.contains_pattern('_'),
    'e', E'a\\b' like app.contains_pattern(E'\\')),
  '{"a": true, "b": false, "c": true, "d": false, "e": true}'::jsonb,
  'app.contains_pattern matches %, _ and \ literally');
select is(
  jsonb_build_object('a', app.pagination(7, 3, 0), 'b', app.pagination(7, 3, 6), 'c', app.pagination(0, 50, 0), 'd', app.pagination(7, 3, 4)),
  '{"a": {"total_count": 7, "page": 1, "page_size": 3, "total_pages": 3},
    "b": {"total_count": 7, "page": 3, "page_size": 3, "total_pages": 3},
    "c": {"total_count": 0, "page": 1, "page_size": 50, "total_pages": 0},
    "d": {"total_count": 7, "page": 2, "page_size": 3, "total_pages": 3}}'::jsonb,
  'app.pagination follows docs/api/conventions.md#pagination');

select set_config('tests.original', admin.create_community('Original')::text, true);
update app.communities set description = 'Now with Kayaks', tags = array['paddle'] where id = current_setting('tests.original')::uuid;
select is(
  (select search_text from app.communities where id = current_setting('tests.original')::uuid),
  concat_ws(chr(31), 'original', 'now with kayaks', 'paddle'),
  'search_text follows name, description and tag changes (lower case, joined by unit separators)');
create function pg_temp.plan_of(query text) returns text language plpgsql as $$
declare
  line text;
  plan text := '';
begin
  for line in execute 'explain ' || query loop
    plan := plan || line || E'\n';
  end loop;
  return plan;
end $$;
set local enable_seqscan = off;
select matches(
  pg_temp.plan_of($$select id from app.communities where search_text like '%kayak%'$$), 'communities_search_trgm',
  'the trigram index serves the search');
set local enable_seqscan = on;

select tests.authenticate_as('joiner');
select throws_ok($$select api.communities_mine(0, 0)$$, 'PT400', null, 'paging limits are enforced in SQL: communities_mine with limit 0 is PT400');
select throws_ok($$select api.communities_search('x', 10, -1)$$, 'PT400', null, 'communities_search with a negative offset is PT400');
reset role;

select * from finish();
rollback;

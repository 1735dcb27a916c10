-- Communities: joining and leaving through the api functions (with their
-- refusals), what a member and an outsider see, search and paging limits,
-- row-level security on memberships, the member count, and the rule that a
-- community always keeps a manager, whatever path removes or demotes one.
begin;
select plan(33);

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
                     'member_count', 2, 'is_member', true, 'is_manager', false, 'user_role', 'member',
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
  array['created_at', 'description', 'id', 'member_count', 'name', 'tags', 'updated_at'],
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

select * from finish();
rollback;

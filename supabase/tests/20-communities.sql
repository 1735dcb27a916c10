-- A community always keeps a manager, whatever path removes or demotes one.
begin;
select plan(5);

select tests.create_user('boss');
select tests.create_user('deputy');
select set_config('tests.community', admin.create_community('Managed', null, '{}',
  (select email from identity.users where id = tests.user_id('boss')))::text, true);

select throws_ok(
  $$delete from app.community_members where community_id = current_setting('tests.community')::uuid$$,
  'PT400', null, 'deleting the last manager is refused');
select throws_ok(
  $$update app.community_members set role = 'member' where community_id = current_setting('tests.community')::uuid$$,
  'PT400', null, 'demoting the last manager is refused');

select admin.add_manager(current_setting('tests.community')::uuid,
  (select email from identity.users where id = tests.user_id('deputy')));
select lives_ok(
  $$update app.community_members set role = 'member'
     where community_id = current_setting('tests.community')::uuid
       and member_node_id = (select node_id from app.profiles where id = tests.user_id('boss'))$$,
  'with a second manager, the first may step down');
select throws_ok(
  $$delete from app.community_members
     where community_id = current_setting('tests.community')::uuid
       and member_node_id = (select node_id from app.profiles where id = tests.user_id('deputy'))$$,
  'PT400', null, 'but then the second is the last one');
select lives_ok(
  $$delete from app.communities where id = current_setting('tests.community')::uuid$$,
  'deleting the whole community is allowed');

select * from finish();
rollback;

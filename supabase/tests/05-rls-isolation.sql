-- Row-level security: two signed-in users never see or change each other's
-- private rows, whatever query they write; credentials, private tables and
-- operator functions are out of reach. (Each area's file tests its own
-- tables too; 01-catalog-guards.sql checks that every table has RLS.)
begin;
select plan(15);

select tests.create_user('alice');
select tests.create_user('bob');

select tests.authenticate_as('alice');
select api.task_create('alice''s task');
select api.hat_create('alice''s hat', 'social');

select tests.authenticate_as('bob');
select api.task_create('bob''s task');
select is((select count(*)::int from app.tasks), 1, 'bob sees one task: his own');
select is((select meta->>'title' from app.tasks), 'bob''s task', 'and it is his');
select is((select count(*)::int from app.hats), 0, 'bob sees none of alice''s hats');
select is((select count(*)::int from app.profiles where id = tests.user_id('alice')), 0, 'bob cannot read alice''s profile row');

select is((select count(*)::int from identity.users), 1, 'bob reads one identity, his own');
select throws_ok($$select password_hash from identity.users$$, '42501', 'permission denied for table users', 'nobody reads a password hash');
select throws_ok($$select count(*) from identity.refresh_tokens$$, '42501', 'permission denied for table refresh_tokens', 'nor refresh tokens');
select throws_ok($$select count(*) from private.auth_failures$$, '42501', 'permission denied for table auth_failures', 'nor the private tables');
select throws_ok(format('select admin.set_subscription(%L, %L)', 'x@example.test', 'premium'), '42501', 'permission denied for schema admin',
  'nor call an operator function');

update app.tasks set meta = meta || '{"title": "hijacked"}' where created_by = tests.user_id('alice');
delete from app.tasks where created_by = tests.user_id('alice');
select throws_ok(
  $$insert into app.hats (user_id, name, hat_type) values (tests.user_id('alice'), 'planted', 'social')$$,
  '42501', null, 'bob cannot create a hat for alice');

reset role;
select tests.clear_authentication();
select tests.authenticate_as('alice');
select is((select meta->>'title' from app.tasks), 'alice''s task', 'bob''s update and delete did not touch alice''s task');
select is((select count(*)::int from app.hats), 1, 'alice still has her one hat');
select is((select count(*)::int from app.tasks where created_by = tests.user_id('bob')), 0, 'alice sees none of bob''s tasks');

select tests.authenticate_as_anon();
select throws_ok($$select count(*) from app.tasks$$, '42501', null, 'anonymous callers cannot read tasks at all');

reset role;
select is((select count(*)::int from app.tasks where created_by in (tests.user_id('alice'), tests.user_id('bob'))), 2,
  'the superuser sees both tasks');

select * from finish();
rollback;

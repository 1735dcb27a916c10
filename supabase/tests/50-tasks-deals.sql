-- Task rules: the status machine (trigger and transition functions) and the
-- refusal of links that would make a cycle.
begin;
select plan(11);

select tests.create_user('alice');
insert into app.tasks (created_by, meta)
select tests.user_id('alice'), jsonb_build_object('title', t, 'status', s)
  from (values ('p', 'pending'), ('i', 'in_progress'), ('c', 'completed'),
               ('a', 'pending'), ('b', 'pending'), ('x', 'pending')) v(t, s);

-- The status guard holds for any update path (here: the table owner).
select throws_ok(
  $$update app.tasks set meta = meta || '{"status": "pending"}' where created_by = tests.user_id('alice') and meta->>'title' = 'i'$$,
  'PT422', null, 'in_progress -> pending is refused');
select throws_ok(
  $$update app.tasks set meta = meta || '{"status": "in_progress"}' where created_by = tests.user_id('alice') and meta->>'title' = 'c'$$,
  'PT422', null, 'completed -> in_progress is refused');
select throws_ok(
  $$insert into app.tasks (created_by, meta) values (tests.user_id('alice'), '{"status": "done"}')$$,
  '23514', null, 'a status outside the enum is a check violation');

select tests.authenticate_as('alice');
select is(
  (select t.meta->>'status' from app.tasks t1, api.task_start(t1.id) t where t1.created_by = tests.user_id('alice') and t1.meta->>'title' = 'p'),
  'in_progress', 'task_start: pending -> in_progress');
select throws_ok(
  format('select api.task_start(%L)', (select id from app.tasks where created_by = tests.user_id('alice') and meta->>'title' = 'p')),
  'PT422', 'task must be pending to start', 'task_start refuses a task that is not pending');
select is(
  (select t.meta->>'status' from app.tasks t1, api.task_complete(t1.id) t where t1.created_by = tests.user_id('alice') and t1.meta->>'title' = 'p'),
  'completed', 'task_complete: in_progress -> completed');

-- Cycles: a -> b, then b -> a and a -> a are refused; a -> x is fine.
select lives_ok(
  format('select api.task_link(%L, %L)', (select id from app.tasks where created_by = tests.user_id('alice') and meta->>'title' = 'a'), (select id from app.tasks where created_by = tests.user_id('alice') and meta->>'title' = 'b')),
  'a -> b links');
select throws_ok(
  format('select api.task_link(%L, %L)', (select id from app.tasks where created_by = tests.user_id('alice') and meta->>'title' = 'b'), (select id from app.tasks where created_by = tests.user_id('alice') and meta->>'title' = 'a')),
  'PT422', null, 'b -> a would close a cycle: refused');
select throws_ok(
  format('select api.task_link(%L, %L)', (select id from app.tasks where created_by = tests.user_id('alice') and meta->>'title' = 'a'), (select id from app.tasks where created_by = tests.user_id('alice') and meta->>'title' = 'a')),
  'PT422', null, 'a task cannot depend on itself');
select lives_ok(
  format('select api.task_link(%L, %L)', (select id from app.tasks where created_by = tests.user_id('alice') and meta->>'title' = 'b'), (select id from app.tasks where created_by = tests.user_id('alice') and meta->>'title' = 'x')),
  'b -> x links');
reset role;
select is(
  private.task_link_would_cycle((select id from app.tasks where created_by = tests.user_id('alice') and meta->>'title' = 'x'), (select id from app.tasks where created_by = tests.user_id('alice') and meta->>'title' = 'a')),
  true, 'x -> a would cycle through a -> b -> x');

select * from finish();
rollback;

-- Tasks and deals: the status machine (a trigger, so it holds for any update
-- path) and the transition functions, what PATCH may change, paging limits,
-- links that would make a cycle, chains, one transaction for complete-and-link,
-- who may delete, and deals: one per user and company, kept by a trigger,
-- moved on by starting and completing their current task, and continued by
-- complete_and_link.
begin;
select plan(55);

select tests.create_user('alice');
select tests.create_user('bob');
insert into app.tasks (created_by, meta)
select tests.user_id('alice'), jsonb_build_object('title', t, 'status', s)
  from (values ('p', 'pending'), ('i', 'in_progress'), ('c', 'completed'),
               ('a', 'pending'), ('b', 'pending'), ('x', 'pending')) v(t, s);
-- alice's task by title (row-level security or not)
create function pg_temp.task(title text) returns uuid language sql stable as $$
  select id from app.tasks where created_by = tests.user_id('alice') and meta->>'title' = title
$$;
grant execute on function pg_temp.task(text) to public;

-- The status machine ----------------------------------------------------------

-- The status guard holds for any update path (here: the table owner).
select throws_ok(
  $$update app.tasks set meta = meta || '{"status": "pending"}' where id = pg_temp.task('i')$$,
  'PT422', 'invalid status transition', 'in_progress -> pending is refused, whoever updates');
select throws_ok(
  $$update app.tasks set meta = meta || '{"status": "in_progress"}' where id = pg_temp.task('c')$$,
  'PT422', 'invalid status transition', 'completed -> in_progress is refused');
select throws_ok(
  $$insert into app.tasks (created_by, meta) values (tests.user_id('alice'), '{"status": "done"}')$$,
  '23514', null, 'a status outside the enum is a check violation');
select throws_ok(
  $$insert into app.tasks (created_by, meta) values (tests.user_id('alice'), '[]')$$,
  '23514', null, 'a meta that is not an object is a check violation');

select tests.authenticate_as('alice');
select is(
  (select meta->>'status' from api.task_start(pg_temp.task('p'))), 'in_progress', 'task_start: pending -> in_progress');
select throws_ok(
  format('select api.task_start(%L)', pg_temp.task('p')),
  'PT422', 'task must be pending to start', 'task_start refuses a task that is not pending');
select is(
  (select meta->>'status' from api.task_complete(pg_temp.task('p'))), 'completed', 'task_complete: in_progress -> completed');
select throws_ok(
  format('select api.task_complete(%L)', pg_temp.task('c')),
  'PT422', 'invalid status transition', 'task_complete refuses a completed task');
select throws_ok(
  format('select api.task_start(%L)', gen_random_uuid()), 'PT404', 'task not found', 'task_start: an unknown task is PT404');

-- Creating, changing, listing -----------------------------------------------

select is(
  (select meta from api.task_create('call Acme', deal_context => '{"company": "Acme", "deal_value": 5}')),
  '{"title": "call Acme", "status": "pending", "deal_context": {"company": "Acme", "deal_value": 5}}'::jsonb,
  'task_create: pending by default; null fields are left out');
select throws_ok(
  $$select api.task_create('t', null, 'done')$$,
  'PT422', 'status must be one of pending, in_progress, completed', 'task_create: an unknown status is PT422');
select throws_ok(
  $$select api.task_create('t', deal_context => '["Acme"]')$$,
  'PT422', 'deal_context must be an object', 'task_create: a deal_context that is not an object is PT422');
select is(
  (select meta from api.task_update(pg_temp.task('a'), '{"title": "A", "description": "first"}')),
  '{"title": "A", "status": "pending", "description": "first"}'::jsonb, 'task_update: merges title and description');
select is(
  (select meta from api.task_update(pg_temp.task('A'), '{"description": null}')),
  '{"title": "A", "status": "pending"}'::jsonb, 'task_update: null removes a key');
select throws_ok(
  format('select api.task_update(%L, %L)', pg_temp.task('A'), '{"status": "completed"}'),
  'PT422', 'status cannot be changed with PATCH; use start or complete', 'task_update: status is refused');
select throws_ok(
  format('select api.task_update(%L, %L)', pg_temp.task('A'), '{"created_by": "someone"}'),
  'PT422', 'only title, description and deal_context can be changed', 'task_update: other keys are refused');
select throws_ok(
  format('select api.task_update(%L, %L)', gen_random_uuid(), '{"title": "x"}'),
  'PT404', 'task not found', 'task_update: an unknown task is PT404');
select is(
  (select array_agg(meta->>'title' order by meta->>'title') from api.tasks_list('completed')),
  array['c', 'p'], 'tasks_list: filtered by status');
select throws_ok($$select api.tasks_list(null, 0, 20)$$, 'PT422', 'page must be at least 1', 'tasks_list: page 0 is PT422');
select throws_ok($$select api.tasks_list(null, 1, 101)$$, 'PT422', 'limit must be between 1 and 100', 'tasks_list: 101 per page is PT422');

-- Links, cycles, chains ------------------------------------------------------

-- Cycles: a -> b, then b -> a and a -> a are refused; b -> x is fine.
select lives_ok(format('select api.task_link(%L, %L)', pg_temp.task('A'), pg_temp.task('b')), 'a -> b links');
select throws_ok(
  format('select api.task_link(%L, %L)', pg_temp.task('b'), pg_temp.task('A')),
  'PT422', 'linking these tasks would create a circular dependency', 'b -> a would close a cycle: refused');
select throws_ok(
  format('select api.task_link(%L, %L)', pg_temp.task('A'), pg_temp.task('A')),
  'PT422', 'a task cannot be linked to itself (circular dependency)', 'a task cannot depend on itself');
select lives_ok(format('select api.task_link(%L, %L)', pg_temp.task('b'), pg_temp.task('x')), 'b -> x links');
select is(
  (select meta->>'title' from api.task_next(pg_temp.task('b'))), 'x', 'task_next: the destination of the link out');
select is(
  (select meta->>'title' from api.task_previous(pg_temp.task('b'))), 'A', 'task_previous: the origin of the link in');
select is(
  (select array_agg(meta->>'title') from api.task_chain(pg_temp.task('A'), 'forward', 5)),
  array['A', 'b', 'x'], 'task_chain: the task, then nearest first');
select throws_ok(
  format('select api.task_chain(%L, %L, 5)', pg_temp.task('A'), 'up'),
  'PT422', 'direction must be forward or backward', 'task_chain: an unknown direction is PT422');
select throws_ok(
  format('select api.task_chain(%L, %L, 1001)', pg_temp.task('A'), 'forward'),
  'PT422', 'depth must be at most 1000', 'task_chain: depth is capped at 1000');
reset role;
select is(
  private.task_link_would_cycle(pg_temp.task('x'), pg_temp.task('A')),
  true, 'x -> a would cycle through a -> b -> x');

-- complete_and_link is one transaction: a failure leaves no new task, no link.
select tests.authenticate_as('alice');
select throws_ok(
  format('select api.task_complete_and_link(%L, %L)', pg_temp.task('c'), 'next'),
  'PT422', 'invalid status transition', 'complete_and_link on a completed task is PT422');
select is((select count(*)::int from app.tasks where meta->>'title' = 'next'), 0, 'and made no next task');

-- Another user's tasks --------------------------------------------------------

select set_config('tests.x', pg_temp.task('x')::text, true);
select tests.authenticate_as('bob');
select set_config('tests.bob_task', (select id::text from api.task_create('bob''s')), true);
select throws_ok(
  format('select api.task_delete(%L)', current_setting('tests.x')),
  'PT403', 'only the creator of a task can delete it', 'task_delete: another user''s task is PT403');
select throws_ok(
  format('select api.task_link(%L, %L)', current_setting('tests.bob_task'), current_setting('tests.x')),
  'PT404', 'destination task not found', 'task_link: another user''s task is not found');
select throws_ok(
  format('select api.task_get(%L)', current_setting('tests.x')), 'PT404', 'task not found', 'task_get: nor readable');

-- Deals -----------------------------------------------------------------------

select tests.authenticate_as('alice');
select api.task_create('follow up', deal_context => '{"company": " ACME ", "deal_value": 8}');
select is(
  (select meta from api.deals_list()),
  '{"company": "Acme", "deal_value": 8, "next_action": "call Acme"}'::jsonb || jsonb_build_object('current_task_id', (select id from app.tasks where meta->>'title' = 'call Acme')),
  'one deal per company (case-insensitive): the first task is current, the latest deal_value kept');
select set_config('tests.deal', (select id::text from api.deals_list()), true);
select lives_ok(format('select api.deal_start_task(%L)', current_setting('tests.deal')), 'deal_start_task');
select is(
  (select meta->>'status' from app.tasks where meta->>'title' = 'call Acme'), 'in_progress', 'deal_start_task: starts the current task');
select is(
  (select d.meta->>'next_action' from api.deal_complete_task(current_setting('tests.deal')::uuid, 'send offer') d),
  'send offer', 'deal_complete_task: the new next action');
select is(
  (select meta->>'status' from app.tasks where meta->>'title' = 'call Acme'), 'completed', 'deal_complete_task: completes the current task');
select is(
  (select t.meta from api.deal_get(current_setting('tests.deal')::uuid) d join app.tasks t on t.id = (d.meta->>'current_task_id')::uuid),
  '{"title": "send offer", "status": "pending", "deal_context": {"company": "Acme", "deal_value": 5}}'::jsonb,
  'the next action is the deal''s current task, pending, with the completed task''s deal context');
select throws_ok(
  format('select api.deal_start_task(%L)', gen_random_uuid()), 'PT404', 'deal not found', 'deal_start_task: an unknown deal is PT404');
select is(
  (select array_agg(meta->>'title' order by meta->>'title') from api.tasks_search('acm')),
  array['call Acme', 'follow up', 'send offer'], 'tasks_search: by company, case-insensitive');
select throws_ok($$select api.tasks_search('  ')$$, 'PT422', 'company is required', 'tasks_search: a company is required');

-- complete_and_link continues the deal: the next task carries the company and
-- the deal's present value, and takes over when the completed task was current.
-- alice's Acme deal: current task 'send offer' (its deal_value 5); a patch of
-- 'follow up' (same company, not current) makes the deal's value 13.
select api.task_update((select id from app.tasks where meta->>'title' = 'follow up'), '{"deal_context": {"deal_value": 13}}');
select set_config('tests.negotiate',
  (select id::text from api.task_complete_and_link((select id from app.tasks where meta->>'title' = 'send offer'), 'negotiate')
    where meta->>'title' = 'negotiate'), true);
select is(
  (select meta from app.tasks where id = current_setting('tests.negotiate')::uuid),
  '{"title": "negotiate", "status": "pending", "deal_context": {"company": "Acme", "deal_value": 13}}'::jsonb,
  'complete_and_link: the next task carries the company, with the deal''s present deal_value');
select is(
  (select meta from api.deal_get(current_setting('tests.deal')::uuid)),
  jsonb_build_object('company', 'Acme', 'deal_value', 13, 'current_task_id', current_setting('tests.negotiate')::uuid, 'next_action', 'negotiate'),
  'complete_and_link on the deal''s current task: the next task is current, its title the next action');
select lives_ok(format('select api.deal_start_task(%L)', current_setting('tests.deal')), 'deal_start_task then starts the new current task');
select is(
  (select meta->>'status' from app.tasks where id = current_setting('tests.negotiate')::uuid), 'in_progress', 'and it is in progress');
select lives_ok(
  format('select api.deal_complete_task(%L, %L)', current_setting('tests.deal'), 'close'),
  'deal_complete_task then completes it and moves on');
select is(
  (select meta->>'next_action' from api.deal_get(current_setting('tests.deal')::uuid)), 'close', 'to the next action given');
select is(
  (select meta->>'status' from app.tasks where id = current_setting('tests.negotiate')::uuid), 'completed', 'the continued task is completed');
select api.task_complete_and_link((select id from app.tasks where meta->>'title' = 'follow up'), 'follow up again');
select is(
  (select meta -> 'deal_context' from app.tasks where meta->>'title' = 'follow up again'),
  '{"company": " ACME ", "deal_value": 13}'::jsonb,
  'complete_and_link on another task of the company: the next task carries the company too');
select is(
  (select meta - 'deal_value' from api.deal_get(current_setting('tests.deal')::uuid)),
  jsonb_build_object('company', 'Acme', 'current_task_id', (select id from app.tasks where meta->>'title' = 'close'), 'next_action', 'close'),
  'but the deal''s open current task stays current');
select is(
  (select meta from api.task_complete_and_link(pg_temp.task('x'), 'after x') where meta->>'title' = 'after x'),
  '{"title": "after x", "status": "pending"}'::jsonb,
  'complete_and_link on a task without a company: no deal_context');

select tests.authenticate_as('bob');
select throws_ok(
  format('select api.deal_get(%L)', current_setting('tests.deal')), 'PT404', 'deal not found', 'deal_get: another user''s deal is not found');

select * from finish();
rollback;

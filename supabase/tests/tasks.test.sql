-- Tasks and deals: the status machine (a trigger, so it holds for any update
-- path) and the transition functions, what PATCH may change, paging limits,
-- links that would make a cycle, chains, one transaction for complete-and-link,
-- who may delete, and deals: one per user and company, kept by a trigger,
-- moved on by starting and completing their current task, and continued by
-- complete_and_link.
begin;
select plan(120);

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

-- The status guard, for every pair ---------------------------------------------

reset role;
select tests.create_user('guard');
insert into app.tasks (created_by, meta)
select tests.user_id('guard'), jsonb_build_object('title', f || '-' || t, 'status', f)
  from (values ('in_progress', 'pending'), ('completed', 'pending'), ('completed', 'in_progress'),
               ('pending', 'in_progress'), ('pending', 'completed'), ('in_progress', 'completed')) v(f, t);
select is(
  tests.error_of(format('update app.tasks set meta = meta || jsonb_build_object(%L, %L) where created_by = %L and meta->>%L = %L',
                        'status', split_part(pair, '-', 2), tests.user_id('guard'), 'title', pair)),
  case when pair in ('pending-in_progress', 'pending-completed', 'in_progress-completed') then 'no error'
       else 'PT422 invalid_status_transition' end,
  'status ' || replace(pair, '-', ' -> ') || ': ' ||
  case when pair in ('pending-in_progress', 'pending-completed', 'in_progress-completed') then 'allowed' else 'refused by the guard, whoever updates' end)
  from unnest(array['in_progress-pending', 'completed-pending', 'completed-in_progress',
                    'pending-in_progress', 'pending-completed', 'in_progress-completed']) pair;
select throws_ok(
  $$insert into app.tasks (created_by, meta) values (tests.user_id('guard'), '{}')$$,
  '23514', null, 'a task without a status is a check violation');

-- The transition functions' refusals, with their hints ------------------------------

select tests.create_user('t_alice');
select tests.create_user('t_bob');
insert into app.tasks (created_by, meta) values
  (tests.user_id('t_alice'), '{"title": "p", "status": "pending"}'),
  (tests.user_id('t_alice'), '{"title": "c", "status": "completed"}'),
  (tests.user_id('t_alice'), '{"title": "a", "status": "pending"}'),
  (tests.user_id('t_alice'), '{"title": "b", "status": "pending"}'),
  (tests.user_id('t_bob'), '{"title": "b1", "status": "pending"}');
create function pg_temp.t_task(owner text, title text) returns uuid language sql stable as $$
  select id from app.tasks where created_by = tests.user_id(owner) and meta->>'title' = title
$$;
grant execute on function pg_temp.t_task(text, text) to public;
select tests.authenticate_as('t_alice');
select is(tests.error_of($$select api.task_start('00000000-0000-4000-8000-000000000000')$$), 'PT404 task_not_found',
  'task_start of an unknown task: PT404 task_not_found');
select is(split_part(tests.error_of($$select api.task_complete('00000000-0000-4000-8000-000000000000')$$), ' ', 1), 'PT404',
  'task_complete of an unknown task: PT404');
select throws_ok(format('select api.task_start(%L)', pg_temp.t_task('t_alice', 'c')), 'PT422', 'task must be pending to start',
  'task_start of a completed task');
select throws_ok(format('select api.task_complete(%L)', pg_temp.t_task('t_alice', 'c')), 'PT422', 'invalid status transition',
  'task_complete of a completed task');
select is((select meta->>'status' from api.task_start(pg_temp.t_task('t_alice', 'p'))), 'in_progress', 'task_start of a pending task');
select is(split_part(tests.error_of(format('select api.task_complete_and_link(%L, %L)', pg_temp.t_task('t_alice', 'c'), 'next')), ' ', 1), 'PT422',
  'complete_and_link of a completed task is PT422');
select is(
  (select jsonb_build_object('tasks', (select count(*) from app.tasks), 'links', (select count(*) from app.task_transitions))),
  '{"tasks": 4, "links": 0}'::jsonb, 'and leaves no new task and no link (one transaction)');
select lives_ok(format('select api.task_link(%L, %L)', pg_temp.t_task('t_alice', 'a'), pg_temp.t_task('t_alice', 'b')), 'a -> b');
select is(tests.error_of(format('select api.task_link(%L, %L)', pg_temp.t_task('t_alice', 'b'), pg_temp.t_task('t_alice', 'a'))),
  'PT422 circular_dependency', 'task_link b -> a: PT422 circular_dependency');
select is(split_part(tests.error_of(format('select api.task_link(%L, %L)', pg_temp.t_task('t_alice', 'a'), pg_temp.t_task('t_alice', 'a'))), ' ', 1),
  'PT422', 'task_link a -> a: PT422');
select is(tests.error_of(format('select api.task_link(%L, %L)', pg_temp.t_task('t_alice', 'a'), '00000000-0000-4000-8000-000000000000')),
  'PT404 destination_task_not_found', 'task_link to an unknown task: PT404 destination_task_not_found');
select throws_ok(format('select api.task_chain(%L, %L, 5)', pg_temp.t_task('t_alice', 'a'), 'up'), 'PT422', null, 'task_chain: direction up is PT422');
select throws_ok(format('select api.task_chain(%L, %L, 0)', pg_temp.t_task('t_alice', 'a'), 'forward'), 'PT422', null, 'task_chain: depth 0 is PT422');

-- Another user's tasks: row-level security and the functions ----------------------

reset role;
insert into app.tasks (created_by, meta) values (tests.user_id('t_alice'), '{"status": "pending", "deal_context": {"company": "Acme"}}');
select tests.authenticate_as('t_bob');
select is(
  jsonb_build_object(
    'tasks', (select count(*) from app.tasks where created_by = tests.user_id('t_alice')),
    'links', (select count(*) from app.task_transitions where created_by = tests.user_id('t_alice')),
    'deals', (select count(*) from app.deals where created_by = tests.user_id('t_alice'))),
  '{"tasks": 0, "links": 0, "deals": 0}'::jsonb, 'a user reads none of another user''s tasks, links and deals');
reset role;
select set_config('tests.a_task', pg_temp.t_task('t_alice', 'a')::text, true);
select set_config('tests.b1', pg_temp.t_task('t_bob', 'b1')::text, true);
select tests.authenticate_as('t_alice');
select is((select count(*)::int from app.tasks), 5, 'and their own, all of them');
select tests.authenticate_as('t_bob');
select throws_ok(
  format('insert into app.task_transitions (created_by, origin_id, destination_id) values (%L, %L, %L)',
         tests.user_id('t_bob'), current_setting('tests.b1'), current_setting('tests.a_task')),
  '42501', null, 'a user cannot link to another user''s task');
select throws_ok(
  format('insert into app.tasks (created_by, meta) values (%L, %L)', tests.user_id('t_alice'), '{"status": "pending"}'),
  '42501', null, 'nor create a task for them');
with changed as (update app.tasks set meta = meta || '{"title": "mine"}' where id = current_setting('tests.a_task')::uuid returning 1)
select is((select count(*)::int from changed), 0, 'nor change their task');
with deleted as (delete from app.tasks where id = current_setting('tests.a_task')::uuid returning 1)
select is((select count(*)::int from deleted), 0, 'nor delete it');
select throws_ok(
  format('select api.task_link(%L, %L)', current_setting('tests.b1'), current_setting('tests.a_task')),
  'PT404', null, 'task_link to another user''s task is PT404');
select throws_ok(format('select api.task_delete(%L)', current_setting('tests.a_task')), 'PT403', null, 'task_delete of another user''s task is PT403');
select throws_ok($$select api.task_delete('00000000-0000-4000-8000-000000000000')$$, 'PT404', null, 'task_delete of no task is PT404');
select tests.authenticate_as('t_alice');
select api.task_delete(current_setting('tests.a_task')::uuid);
reset role;
select is((select count(*)::int from app.tasks where id = current_setting('tests.a_task')::uuid), 0, 'task_delete by the creator deletes the task');

-- Cycle detection ------------------------------------------------------------------

select tests.create_user('cyc');
insert into app.tasks (created_by, meta)
select tests.user_id('cyc'), jsonb_build_object('title', t, 'status', 'pending') from unnest(array['a', 'b', 'c', 'd', 'x']) t;
insert into app.task_transitions (created_by, origin_id, destination_id)
values (tests.user_id('cyc'), pg_temp.t_task('cyc', 'a'), pg_temp.t_task('cyc', 'b')),
       (tests.user_id('cyc'), pg_temp.t_task('cyc', 'b'), pg_temp.t_task('cyc', 'c')),
       (tests.user_id('cyc'), pg_temp.t_task('cyc', 'a'), pg_temp.t_task('cyc', 'd'));
select is(private.task_link_would_cycle(pg_temp.t_task('cyc', f), pg_temp.t_task('cyc', t)), expected,
          'task_link_would_cycle ' || f || ' -> ' || t || ': ' || expected)
  from (values ('c', 'a', true), ('b', 'a', true), ('d', 'a', true), ('a', 'a', true),
               ('a', 'c', false), ('d', 'b', false), ('c', 'd', false), ('x', 'a', false)) v(f, t, expected);

-- Chains over branching graphs -------------------------------------------------------

-- A ladder of 40 diamonds (2^40 paths): a0 -> b0, a0 -> c0, b0 -> a1, c0 -> a1, ... a40.
select tests.create_user('chain_user');
insert into app.tasks (created_by, meta)
select tests.user_id('chain_user'), jsonb_build_object('title', t, 'status', 'pending')
  from (select 'a' || i as t from generate_series(0, 40) i
        union all select p || i from generate_series(0, 39) i, unnest(array['b', 'c']) p) titles;
insert into app.task_transitions (created_by, origin_id, destination_id, inserted_at)
select tests.user_id('chain_user'), pg_temp.t_task('chain_user', o), pg_temp.t_task('chain_user', d), now() + (4 * i + k) * interval '1 ms'
  from generate_series(0, 39) i,
       lateral (values ('a' || i, 'b' || i, 1), ('a' || i, 'c' || i, 2), ('b' || i, 'a' || (i + 1), 3), ('c' || i, 'a' || (i + 1), 4)) e(o, d, k);
select tests.authenticate_as('chain_user');
select set_config('tests.t0', clock_timestamp()::text, true);
select set_config('tests.chain',
  (select jsonb_agg(c.meta->>'title' order by c.ordinality) from api.task_chain(pg_temp.t_task('chain_user', 'a0'), 'forward', 1000) with ordinality c)::text, true);
select cmp_ok(clock_timestamp() - current_setting('tests.t0')::timestamptz, '<', interval '5 seconds',
  'task_chain walks the 40 diamonds in under 5 seconds (once per task, not once per path)');
select is(jsonb_array_length(current_setting('tests.chain')::jsonb), 121, 'every task of the ladder');
select is((select count(distinct t)::int from jsonb_array_elements_text(current_setting('tests.chain')::jsonb) t), 121, 'each once');
select is(
  (select jsonb_agg(t order by n) from jsonb_array_elements_text(current_setting('tests.chain')::jsonb) with ordinality x(t, n) where n <= 6),
  '["a0", "b0", "c0", "a1", "b1", "c1"]'::jsonb, 'nearest first');
select is(
  (select jsonb_agg(c.meta->>'title' order by c.ordinality) from api.task_chain(pg_temp.t_task('chain_user', 'a40'), 'backward', 3) with ordinality c),
  '["a40", "b39", "c39", "a39", "b38", "c38"]'::jsonb, 'backward, to depth 3');
reset role;

-- A ladder of 4000 tasks (i -> i+1, i -> i+2: 2^n paths) is walked once per task.
select tests.create_user('ladder');
select tests.create_user('ladder_other');
insert into app.tasks (created_by, meta, inserted_at)
select tests.user_id('ladder'), jsonb_build_object('title', 't' || i, 'status', 'pending'), now() + make_interval(secs => i)
  from generate_series(0, 3999) i;
create temp table ladder_ids as
  select (meta->>'title') as title, substr(meta->>'title', 2)::int as idx, id
    from app.tasks where created_by = tests.user_id('ladder');
grant select on ladder_ids to public;
insert into app.task_transitions (created_by, origin_id, destination_id, inserted_at)
select tests.user_id('ladder'), o.id, d.id, now() + make_interval(secs => 2 * (o.idx + 1) + s)
  from ladder_ids o, (values (1), (2)) step(s), ladder_ids d
 where d.idx = o.idx + s;
select tests.authenticate_as('ladder');
select set_config('tests.walk',
  (select jsonb_agg(jsonb_build_array(w.id, w.steps)) from private.task_chain_walk((select id from ladder_ids where idx = 0), true, 1000) w)::text, true);
select is(jsonb_array_length(current_setting('tests.walk')::jsonb), 2001, 'task_chain_walk over the 4000-task ladder at depth 1000: 2001 tasks');
select is((select count(distinct w ->> 0)::int from jsonb_array_elements(current_setting('tests.walk')::jsonb) w), 2001, 'each once');
select is(
  (select count(*)::int from jsonb_array_elements(current_setting('tests.walk')::jsonb) w join ladder_ids l on l.id = (w ->> 0)::uuid
    where (w ->> 1)::int <> ceil(l.idx / 2.0)),
  0, 'with breadth-first distances: task i is ceil(i/2) links from task 0');
select is((select count(*)::int from api.task_chain((select id from ladder_ids where idx = 3999), 'backward', 1000)), 2001,
  'task_chain backward from the last task: 2001 tasks');
select is(
  (select jsonb_agg(c.meta->>'title' order by c.ordinality) from api.task_chain((select id from ladder_ids where idx = 100), 'forward', 2) with ordinality c),
  '["t100", "t101", "t102", "t103", "t104"]'::jsonb, 'task_chain forward, depth 2');
select is(split_part(tests.error_of(format('select * from api.task_chain(%L, %L, %s)', (select id from ladder_ids where idx = 0), 'forward', depth)), ' ', 1),
          'PT422', 'task_chain depth ' || depth || ' is PT422 (depth is 1..1000)')
  from unnest(array[0, 1001, 2147483647]) depth;
reset role;
select is(private.task_chain_max_depth(), 1000, 'task_chain_max_depth() is 1000');

-- Walks only from the caller's own task, along their own links.
select tests.authenticate_as('ladder_other');
select is((select count(*)::int from private.task_chain_walk((select id from ladder_ids where idx = 3995), true, 10)), 0,
  'task_chain_walk from another user''s task finds nothing');
reset role;
insert into app.tasks (created_by, meta) values (tests.user_id('ladder_other'), '{"title": "foreign", "status": "pending"}');
-- A link someone else made (only an operator could) is not followed.
insert into app.task_transitions (created_by, origin_id, destination_id)
values (tests.user_id('ladder_other'), (select id from ladder_ids where idx = 3999), pg_temp.t_task('ladder_other', 'foreign'));
select tests.authenticate_as('ladder');
select is(
  (select array_agg(w.id order by w.id) from private.task_chain_walk((select id from ladder_ids where idx = 3995), true, 10) w),
  (select array_agg(id order by id) from ladder_ids where idx >= 3995),
  'task_chain_walk follows only the caller''s own links');
reset role;

-- Sizes are bounded in the tables themselves ------------------------------------------

select throws_ok(
  format('update app.tasks set meta = meta || jsonb_build_object(%L, repeat(%L, 140000)) where id = %L', 'x', 'x', (select id from ladder_ids where idx = 0)),
  '23514', null, 'task meta is bounded whatever writes it');
select throws_ok(
  format('insert into app.task_transitions (created_by, origin_id, destination_id, meta) values (%L, %L, %L, jsonb_build_object(%L, repeat(%L, 33000)))',
         tests.user_id('ladder'), (select id from ladder_ids where idx = 1), (select id from ladder_ids where idx = 0), 'x', 'x'),
  '23514', null, 'and a link''s meta');

-- Deals: the trigger ---------------------------------------------------------------------

select tests.create_user('dealer');
insert into app.tasks (created_by, meta) values (tests.user_id('dealer'), '{"status":"pending","title":"one","deal_context":{"company":"Acme","deal_value":5}}');
insert into app.tasks (created_by, meta) values (tests.user_id('dealer'), '{"status":"pending","title":"two","deal_context":{"company":" ACME "}}');
insert into app.tasks (created_by, meta) values (tests.user_id('dealer'), '{"status":"pending","title":"three","deal_context":{"company":"acme","deal_value":8}}');
select is(
  (select jsonb_agg(jsonb_build_object('company', company, 'value', deal_value, 'next_action', next_action)) from app.deals where created_by = tests.user_id('dealer')),
  '[{"company": "Acme", "value": 8, "next_action": "one"}]'::jsonb,
  'one deal per user and company (case-insensitive), keeping the latest deal_value');

-- If-Match: a write on a stale version is refused, nothing written -------------
-- (One transaction has one now(): a version older than it is made by inserting
-- the row with an older updated_at; the trigger sets it only on update.)

reset role;
insert into app.tasks (created_by, meta, updated_at)
values (tests.user_id('alice'), '{"status": "pending", "title": "versioned"}', now() - interval '1 hour');
create function pg_temp.detail_of(query text) returns jsonb language plpgsql as $$
declare
  detail text;
begin
  execute query;
  return null;
exception when others then
  get stacked diagnostics detail = pg_exception_detail;
  return detail::jsonb;
end;
$$;
grant execute on function pg_temp.detail_of(text) to public;
select set_config('tests.v0', api.etag(now() - interval '1 hour'), true);
select tests.authenticate_as('alice');
select is((select meta->>'title' from api.task_update(pg_temp.task('versioned'), '{"title": "versioned"}', array[current_setting('tests.v0')])),
          'versioned', 'task_update with the current version (If-Match) writes');
select is(tests.error_of(format('select api.task_update(%L, %L, array[%L])', pg_temp.task('versioned'), '{"description": "stale"}', current_setting('tests.v0'))),
          'PT412 precondition_failed', 'task_update with a version no longer current: PT412 precondition_failed');
select is(pg_temp.detail_of(format('select api.task_update(%L, %L, array[%L])', pg_temp.task('versioned'), '{"description": "stale"}', current_setting('tests.v0'))),
          jsonb_build_object('etag', api.etag(now()),
                             'current', (select private.task_json(t) from app.tasks t where t.id = pg_temp.task('versioned'))),
          '... its detail is the current version and the current task, as GET answers it');
select is((select meta ? 'description' from app.tasks where id = pg_temp.task('versioned')), false, '... and nothing was written');
select is(tests.error_of(format('select api.task_update(%L, %L, array[%L])', pg_temp.task('versioned'), '{"title": "weak"}', 'W/' || api.etag(now()))),
          'PT412 precondition_failed', 'a weak tag never matches (strong comparison)');
select is((select meta->>'title' from api.task_update(pg_temp.task('versioned'), '{"title": "any"}', array['*'])), 'any', '* matches any version');
select is(tests.error_of(format('select api.task_delete(%L, array[%L])', pg_temp.task('any'), current_setting('tests.v0'))),
          'PT412 precondition_failed', 'task_delete with a stale version: PT412, the task stays');
select set_config('tests.any', pg_temp.task('any')::text, true);
select tests.authenticate_as('bob');
select is(tests.error_of(format('select api.task_update(%L, %L, array[%L])', current_setting('tests.any'), '{"title": "x"}', api.etag(now()))),
          'PT404 task_not_found', 'another user''s task with its current version: PT404, as without If-Match');

select * from finish();
rollback;

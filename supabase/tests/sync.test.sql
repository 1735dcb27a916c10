-- Sync: the shapes of GET /sync/v1/shape. A snapshot holds the caller's rows
-- only, with the head it is consistent with; changes after a position are
-- judged per row (insert, update, delete); joining and leaving a community
-- bring its events in and take them out; another user's rows never appear.
begin;
select plan(9);

select tests.create_user('syncer');
select tests.create_user('other');
select set_config('tests.c', admin.create_community('Synced')::text, true);
select admin.create_event(current_setting('tests.c')::uuid, 'Soon', now() + interval '1 day');

select tests.authenticate_as('other');
select api.task_create('Theirs', null, 'pending', null);
reset role;

select tests.authenticate_as('syncer');
select is((select count(*)::integer from api.sync_snapshot('tasks', 'https://x.test') s where s.id is not null), 0,
          'a snapshot of tasks holds none of another user''s');
select ok((select bool_and(s.head is not null) from api.sync_snapshot('tasks', 'https://x.test') s),
          'the snapshot carries the head it is consistent with');
select set_config('tests.start', (select max(head)::text from api.sync_snapshot('events', 'https://x.test')), true);
select set_config('tests.task', (select t.id::text from api.task_create('Mine', null, 'pending', null) t), true);
select is((select array_agg(m.operation order by m.change_id) from api.sync_changes('tasks', current_setting('tests.start')::bigint, 'https://x.test') m where m.id is not null),
          array['insert'], 'a new task is an insert');
select set_config('tests.after_insert', (select max(change_id)::text from api.sync_changes('tasks', current_setting('tests.start')::bigint, 'https://x.test')), true);
select api.task_update(current_setting('tests.task')::uuid, '{"title": "Mine too"}');
select is((select array_agg(m.operation || ':' || (m.value -> 'meta' ->> 'title')) from api.sync_changes('tasks', current_setting('tests.after_insert')::bigint, 'https://x.test') m where m.id is not null),
          array['update:Mine too'], 'a changed task is an update with its new fields');
select api.community_join(current_setting('tests.c')::uuid);
select is((select array_agg(m.operation || ':' || (m.value ->> 'title')) from api.sync_changes('events', current_setting('tests.start')::bigint, 'https://x.test') m where m.id is not null),
          array['insert:Soon'], 'joining a community brings its events in as inserts');
select set_config('tests.joined', (select max(change_id)::text from api.sync_changes('events', current_setting('tests.start')::bigint, 'https://x.test')), true);
select api.community_leave(current_setting('tests.c')::uuid);
select is((select array_agg(m.operation) from api.sync_changes('events', current_setting('tests.joined')::bigint, 'https://x.test') m where m.id is not null),
          array['delete'], 'leaving it takes them out as deletes');
select api.task_delete(current_setting('tests.task')::uuid);
select is((select array_agg(m.operation) from api.sync_changes('tasks', current_setting('tests.after_insert')::bigint, 'https://x.test') m where m.id is not null),
          array['delete'], 'a deleted task is a delete');
select throws_ok($$select * from api.sync_changes('secrets', 0, 'https://x.test')$$, 'PT400', null, 'an unknown shape is refused');
reset role;
select is((select count(*)::integer from private.sync_audience('tasks', current_setting('tests.start')::bigint, 9000000000000000,
                                                              array[tests.user_id('other')])), 0,
          'another user is not in the audience of my task changes');

select * from finish();
rollback;

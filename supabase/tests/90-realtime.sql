-- Realtime: the change log of events and memberships, how a range of it reads
-- for one user (the upcoming-events stream: inserts, updates, deletes of the
-- events of their communities, joining and leaving expanded to the
-- community's events), the snapshot / resume / reset answer of opening a
-- stream, the per-user cap on open streams, and the raw rows of
-- postgres_changes. Everything happens in this transaction, so the log
-- entries read here are this test's own (ids from private.change_log_position).
begin;
select plan(24);

select tests.create_user('watcher');
select tests.create_user('stranger');
select set_config('tests.mine', admin.create_community('Watched')::text, true);
select set_config('tests.theirs', admin.create_community('Unwatched')::text, true);
select set_config('tests.joined_later', admin.create_community('Joined later')::text, true);
select admin.create_event(current_setting('tests.joined_later')::uuid, 'Second', now() + interval '2 days');
select admin.create_event(current_setting('tests.joined_later')::uuid, 'First', now() + interval '1 day');
select admin.create_event(current_setting('tests.joined_later')::uuid, 'Past', now() - interval '1 day');
select tests.authenticate_as('watcher');
select api.community_join(current_setting('tests.mine')::uuid);
reset role;

-- The caller's messages after a change id, as "operation:title" in order.
create function pg_temp.seen_by(after_id bigint) returns text[] language sql as $$
  select coalesce(array_agg(m.operation || ':' || (m.event ->> 'title') order by m.change_id), '{}')
    from api.event_stream_changes(after_id, 9000000000000000, 'https://app.example.test') m
$$;
grant execute on function pg_temp.seen_by(bigint) to public;
select set_config('tests.start', (select head::text from private.change_log_position()), true);

-- The stream of upcoming events, change by change ---------------------------

select set_config('tests.event', admin.create_event(current_setting('tests.mine')::uuid, 'A', now() + interval '1 day')::text, true);
select admin.create_event(current_setting('tests.theirs')::uuid, 'Not mine', now() + interval '1 day');
update app.events set title = 'A2' where id = current_setting('tests.event')::uuid;
delete from app.events where id = current_setting('tests.event')::uuid;

select tests.authenticate_as('watcher');
select is(
  pg_temp.seen_by(current_setting('tests.start')::bigint), array['insert:A', 'update:A2', 'delete:A2'],
  'event_stream_changes: insert, update and delete of an event of the caller''s community; nothing of others');
select is(
  (select m.event -> '__sync_meta' ->> 'operation' || ' ' || (m.event -> '__sync_meta' ->> 'table')
     from api.event_stream_changes(current_setting('tests.start')::bigint, 9000000000000000, 'https://x.test') m order by m.change_id limit 1),
  'insert events', 'each message carries __sync_meta');
select ok(
  (select bool_and(m.event ->> 'deeplink_url' like 'https://app.example.test/l/event/%')
     from api.event_stream_changes(current_setting('tests.start')::bigint, 9000000000000000, 'https://app.example.test') m),
  'the events are built on the public URL given');
select tests.authenticate_as('stranger');
select is(pg_temp.seen_by(current_setting('tests.start')::bigint), '{}'::text[], 'a user in none of the communities sees nothing');

-- Moving an event out of the caller's communities, or into the past, is a delete.
reset role;
select set_config('tests.start', (select head::text from private.change_log_position()), true);
select set_config('tests.moving', admin.create_event(current_setting('tests.mine')::uuid, 'M', now() + interval '1 day')::text, true);
update app.events set community_id = current_setting('tests.theirs')::uuid where id = current_setting('tests.moving')::uuid;
update app.events set community_id = current_setting('tests.mine')::uuid where id = current_setting('tests.moving')::uuid;
update app.events set starts_at = now() - interval '3 hours' where id = current_setting('tests.moving')::uuid;
select tests.authenticate_as('watcher');
select is(
  pg_temp.seen_by(current_setting('tests.start')::bigint), array['insert:M', 'delete:M', 'insert:M', 'delete:M'],
  'moved away: a delete; back: an insert; into the past (ended): a delete');

-- Joining expands to the community's upcoming events, soonest first; leaving to deletes.
reset role;
select set_config('tests.start', (select head::text from private.change_log_position()), true);
select tests.authenticate_as('watcher');
select api.community_join(current_setting('tests.joined_later')::uuid);
select is(
  pg_temp.seen_by(current_setting('tests.start')::bigint), array['insert:First', 'insert:Second'],
  'joining: the community''s upcoming events arrive as inserts, soonest first (not the past one)');
select set_config('tests.joined', (select head::text from private.change_log_position()), true);
select api.community_leave(current_setting('tests.joined_later')::uuid);
select is(
  pg_temp.seen_by(current_setting('tests.joined')::bigint), array['delete:First', 'delete:Second'],
  'leaving: they go as deletes');
select tests.authenticate_as('stranger');
select is(pg_temp.seen_by(current_setting('tests.start')::bigint), '{}'::text[], 'others'' memberships are nothing to a user');
reset role;
select set_config('tests.start', (select head::text from private.change_log_position()), true);
update app.community_members set role = role where community_id = current_setting('tests.mine')::uuid;
select is_empty(
  $$select id from app.change_log where id > current_setting('tests.start')::bigint and record_id = current_setting('tests.mine')::uuid$$,
  'a membership update that changes nothing is not logged');

-- The log itself: ids in order, not readable by request roles, pruned ranges refused.
select is(
  (select array_agg(operation order by id) from app.change_log where record_id = current_setting('tests.event')::uuid),
  array['insert', 'update', 'delete'], 'the log holds each insert, update and delete of an event, in id order');
select tests.authenticate_as('watcher');
select throws_ok(
  $$select count(*) from app.change_log$$, '42501', 'permission denied for table change_log', 'request roles cannot read the change log directly');
select throws_ok(
  $$select * from api.event_stream_changes(-1, 0, 'https://x.test')$$,
  'PT410', 'the changes after -1 are no longer kept', 'a range starting before what the log keeps is PT410');

-- Opening a stream ------------------------------------------------------------

select tests.authenticate_as('watcher');
select is(
  (select mode || ' ' || (last_event_id = (select head from private.change_log_position())) || ' ' || jsonb_typeof(events)
     from api.event_stream_open('pgtap', null, 'https://x.test', 60)),
  'snapshot true array', 'event_stream_open without last_event_id: a snapshot, consistent with the log head');
select is(
  (select jsonb_path_query_array(events, '$[*].title') from api.event_stream_open('pgtap', null, 'https://x.test', 60)),
  (select jsonb_path_query_array(api.events_upcoming_page('https://x.test')::jsonb, '$[*].title')),
  'the snapshot is the upcoming events of GET /upcoming');
select is(
  (select mode || ' ' || (events is null) from api.event_stream_open('pgtap', current_setting('tests.start')::bigint, 'https://x.test', 60)),
  'resume true', 'a last_event_id the log holds: resume from it');
select is(
  (select mode from api.event_stream_open('pgtap', (select head from private.change_log_position()) + 1000000, 'https://x.test', 60)),
  'reset', 'an id the log does not hold: reset, with a snapshot');
select lives_ok($$select api.event_stream_open('pgtap', null, 'https://x.test', 60)$$, 'a fifth open stream');
select throws_ok(
  $$select api.event_stream_open('pgtap', null, 'https://x.test', 60)$$,
  'PT429', 'too many open streams: at most 5 per user', 'the sixth open stream of a user is refused (PT429)');
select throws_ok(
  $$select api.realtime_connect('pgtap', 60)$$,
  'PT429', 'too many open streams: at most 5 per user', 'websockets count against the same cap');
reset role;
update app.event_streams set expires_at = now() - interval '1 second'
 where id = (select id from app.event_streams where user_id = tests.user_id('watcher') limit 1);
select tests.authenticate_as('watcher');
select lives_ok($$select api.realtime_connect('pgtap', 60)$$, 'an expired stream no longer counts');

select tests.authenticate_as('stranger');
select is((select count(*)::int from app.event_streams), 0, 'row-level security: a user sees none of another''s streams');
select throws_ok(
  $$delete from app.event_streams$$, '42501', 'permission denied for table event_streams', 'and cannot close them');
select tests.authenticate_as_anon();
select throws_ok(
  $$select api.event_stream_open('pgtap', null, 'https://x.test', 60)$$,
  '42501', 'permission denied for function event_stream_open', 'anonymous callers cannot open a stream');

-- postgres_changes: raw rows ----------------------------------------------------

reset role;
select set_config('tests.start', (select head::text from private.change_log_position()), true);
select set_config('tests.raw', admin.create_event(current_setting('tests.theirs')::uuid, 'Raw', now() + interval '1 day')::text, true);
update app.events set title = 'Raw 2' where id = current_setting('tests.raw')::uuid;
delete from app.events where id = current_setting('tests.raw')::uuid;
select tests.authenticate_as('stranger');
select results_eq(
  $$select type, record ->> 'title', old_record ->> 'id'
      from api.realtime_event_changes(current_setting('tests.start')::bigint, 9000000000000000)
     where coalesce(record ->> 'id', old_record ->> 'id') = current_setting('tests.raw')
     order by change_id$$,
  $$values ('INSERT', 'Raw', null), ('UPDATE', 'Raw 2', current_setting('tests.raw')), ('DELETE', null, current_setting('tests.raw'))$$,
  'realtime_event_changes: INSERT, UPDATE, DELETE rows; a delete carries only the primary key');

select * from finish();
rollback;

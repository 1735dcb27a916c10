-- Realtime: the change log of events and memberships, how a range of it reads
-- for one user (the upcoming-events stream: inserts, updates, deletes of the
-- events of their communities, moves in and out, joining and leaving expanded
-- to the community's events), who is read for a range, the fan-out of a range
-- to everyone at once (one row per view), the snapshot / resume / reset
-- answer of opening a stream alone and in batches, the per-user cap on open
-- streams, pruning with its watermark, the raw rows of postgres_changes and
-- the supabase_realtime publication. Everything happens in this transaction,
-- so the log entries read here are this test's own (ids from
-- private.change_log_position).
begin;
select plan(89);

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

-- More of the stream, change by change ------------------------------------------

reset role;
select set_config('tests.url', 'https://app.example.com', true);
select tests.create_user_named_by_email('rt_user');
select set_config('tests.rt_c', admin.create_community('Realtime ordered')::text, true);
insert into app.community_members (community_id, member_node_id) values (current_setting('tests.rt_c')::uuid, tests.node_id('rt_user'));
select set_config('tests.start', (select head::text from private.change_log_position()), true);
select set_config('tests.ordered', admin.create_event(current_setting('tests.rt_c')::uuid, 'A', now() + interval '1 day')::text, true);
update app.events set title = 'A2' where id = current_setting('tests.ordered')::uuid;
delete from app.events where id = current_setting('tests.ordered')::uuid;
select tests.authenticate_as('rt_user');
select is(
  (select array_agg(m.change_id order by m.ordinality)
     from api.event_stream_changes(current_setting('tests.start')::bigint, 9000000000000000, current_setting('tests.url')) with ordinality m),
  (select array_agg(m.change_id order by m.change_id)
     from api.event_stream_changes(current_setting('tests.start')::bigint, 9000000000000000, current_setting('tests.url')) m),
  'event_stream_changes answers in change id order');
select is(
  (select jsonb_typeof(m.event -> '__sync_meta' -> 'timestamp')
     from api.event_stream_changes(current_setting('tests.start')::bigint, 9000000000000000, current_setting('tests.url')) m order by m.change_id limit 1),
  'string', 'and __sync_meta carries the timestamp of the change');

-- An event moved out of the caller's communities, or into the past, is a delete; back again, an insert.
reset role;
select set_config('tests.elsewhere', admin.create_community('Realtime elsewhere')::text, true);
select set_config('tests.m', admin.create_event(current_setting('tests.rt_c')::uuid, 'M', now() + interval '1 day')::text, true);
select set_config('tests.start', (select head::text from private.change_log_position()), true);
update app.events set community_id = current_setting('tests.elsewhere')::uuid where id = current_setting('tests.m')::uuid;
update app.events set title = 'M elsewhere' where id = current_setting('tests.m')::uuid;
update app.events set community_id = current_setting('tests.rt_c')::uuid, title = 'M' where id = current_setting('tests.m')::uuid;
update app.events set starts_at = now() - interval '3 hours' where id = current_setting('tests.m')::uuid;
update app.events set title = 'M past' where id = current_setting('tests.m')::uuid;
update app.events set starts_at = now() + interval '1 hour' where id = current_setting('tests.m')::uuid;
select tests.authenticate_as('rt_user');
select is(
  pg_temp.seen_by(current_setting('tests.start')::bigint), array['delete:M', 'insert:M', 'delete:M', 'insert:M past'],
  'moved away: a delete; changed elsewhere: nothing; back: an insert; ended: a delete; changed while past: nothing; upcoming again: an insert');

-- Joining, then becoming a manager: inserts (one change), then updates with the sync fields.
reset role;
select tests.create_user_named_by_email('rt_joiner');
select tests.create_user_named_by_email('rt_stranger');
select set_config('tests.rt_j', admin.create_community('Realtime joined')::text, true);
select admin.create_event(current_setting('tests.rt_j')::uuid, 'Second', now() + interval '2 days');
select admin.create_event(current_setting('tests.rt_j')::uuid, 'First', now() + interval '1 day');
select admin.create_event(current_setting('tests.rt_j')::uuid, 'Past', now() - interval '1 day');
select set_config('tests.start', (select head::text from private.change_log_position()), true);
insert into app.community_members (community_id, member_node_id) values (current_setting('tests.rt_j')::uuid, tests.node_id('rt_stranger'));
insert into app.community_members (community_id, member_node_id) values (current_setting('tests.rt_j')::uuid, tests.node_id('rt_joiner'));
update app.community_members set role = 'manager' where community_id = current_setting('tests.rt_j')::uuid and member_node_id = tests.node_id('rt_joiner');
select tests.authenticate_as('rt_joiner');
create temp table joined_messages as
  select m.*, row_number() over (order by m.change_id, m.ordinality) as n
    from api.event_stream_changes(current_setting('tests.start')::bigint, 9000000000000000, current_setting('tests.url')) with ordinality m;
select is(
  (select array_agg(operation || ':' || (event ->> 'title') order by n) from joined_messages),
  array['insert:First', 'insert:Second', 'update:First', 'update:Second'],
  'joining: inserts of the upcoming events, soonest first; made manager: updates');
select is((select event -> 'can_sync' from joined_messages where n = 3), 'true'::jsonb, 'a manager''s messages carry the sync fields');
select is((select count(distinct change_id)::int from joined_messages where n <= 2), 1, 'the inserts of one join share its change id');
reset role;
update app.community_members set role = 'manager' where community_id = current_setting('tests.rt_j')::uuid and member_node_id = tests.node_id('rt_stranger');
select set_config('tests.before', (select head::text from private.change_log_position()), true);
delete from app.community_members where community_id = current_setting('tests.rt_j')::uuid and member_node_id = tests.node_id('rt_joiner');
select tests.authenticate_as('rt_joiner');
select is(pg_temp.seen_by(current_setting('tests.before')::bigint), array['delete:First', 'delete:Second'], 'leaving: deletes');
select tests.authenticate_as('rt_stranger');
select is(pg_temp.seen_by(current_setting('tests.before')::bigint), '{}'::text[], 'another''s leaving is nothing to a member');
reset role;

-- Who is read for a range ---------------------------------------------------------

select tests.create_user_named_by_email('aud_a');
select tests.create_user_named_by_email('aud_b');
select tests.create_user_named_by_email('aud_c');
select tests.create_user_named_by_email('aud_joiner');
select set_config('tests.aud_a', admin.create_community('Audience A')::text, true);
select set_config('tests.aud_b', admin.create_community('Audience B')::text, true);
select set_config('tests.aud_c', admin.create_community('Audience C')::text, true);
insert into app.community_members (community_id, member_node_id) values
  (current_setting('tests.aud_a')::uuid, tests.node_id('aud_a')),
  (current_setting('tests.aud_b')::uuid, tests.node_id('aud_b')),
  (current_setting('tests.aud_c')::uuid, tests.node_id('aud_c'));
select set_config('tests.aud_event', admin.create_event(current_setting('tests.aud_a')::uuid, 'Event', now() + interval '1 day')::text, true);
select set_config('tests.start', (select head::text from private.change_log_position()), true);
update app.events set community_id = current_setting('tests.aud_b')::uuid where id = current_setting('tests.aud_event')::uuid;
insert into app.community_members (community_id, member_node_id) values (current_setting('tests.aud_c')::uuid, tests.node_id('aud_joiner'));
create temp table audience as
  select id from private.event_stream_audience(current_setting('tests.start')::bigint, (select head from private.change_log_position())) as id;
select ok(
  (select array_agg(id) from audience) @> array[tests.user_id('aud_a'), tests.user_id('aud_b'), tests.user_id('aud_joiner')],
  'event_stream_audience: the members of every community an event change touches, and users whose membership changed');
select ok(not exists (select from audience where id = tests.user_id('aud_c')), 'and no one else');
create temp table aud_messages (who text, n int);
grant insert on aud_messages to public;
select tests.authenticate_as('aud_a');
insert into aud_messages select 'aud_a', count(*) from api.event_stream_changes(current_setting('tests.start')::bigint, 9000000000000000, current_setting('tests.url'));
select tests.authenticate_as('aud_b');
insert into aud_messages select 'aud_b', count(*) from api.event_stream_changes(current_setting('tests.start')::bigint, 9000000000000000, current_setting('tests.url'));
select tests.authenticate_as('aud_c');
insert into aud_messages select 'aud_c', count(*) from api.event_stream_changes(current_setting('tests.start')::bigint, 9000000000000000, current_setting('tests.url'));
select tests.authenticate_as('aud_joiner');
insert into aud_messages select 'aud_joiner', count(*) from api.event_stream_changes(current_setting('tests.start')::bigint, 9000000000000000, current_setting('tests.url'));
reset role;
select is_empty(
  $$select who from aud_messages where n > 0 and tests.user_id(who) not in (select id from audience)$$,
  'everyone who gets a message is in the audience');

-- The snapshot is GET /upcoming with __sync_meta ---------------------------------------

select tests.create_user_named_by_email('snap_user');
select set_config('tests.snap_c', admin.create_community('Snapshot')::text, true);
insert into app.community_members (community_id, member_node_id) values (current_setting('tests.snap_c')::uuid, tests.node_id('snap_user'));
select admin.create_event(current_setting('tests.snap_c')::uuid, 'Snap', now() + interval '1 day');
select tests.authenticate_as('snap_user');
select set_config('tests.opened', (select to_jsonb(o) from api.event_stream_open('test', null, current_setting('tests.url'), 60) o)::text, true);
select is(
  (select jsonb_agg(e - '__sync_meta' order by n) from jsonb_array_elements(current_setting('tests.opened')::jsonb -> 'events') with ordinality x(e, n)),
  (select jsonb_agg(e order by n) from api.events_upcoming(current_setting('tests.url')) with ordinality x(e, n)),
  'the snapshot is what GET /upcoming gives, event for event');
select is(
  (current_setting('tests.opened')::jsonb -> 'events' -> 0 -> '__sync_meta') - 'timestamp', '{"operation": "insert", "table": "events"}'::jsonb,
  'each with __sync_meta insert');
select set_config('tests.now', (select head::text from private.change_log_position()), true);
select is(
  (select to_jsonb(o) from api.event_stream_open('test', current_setting('tests.now')::bigint, current_setting('tests.url'), 60) o) - 'stream_id',
  jsonb_build_object('mode', 'resume', 'last_event_id', current_setting('tests.now')::bigint, 'events', null),
  'resuming from an id the log holds: that id, no events');
reset role;

-- postgres_changes rows, more closely; the supabase_realtime publication ------------------

select set_config('tests.start', (select head::text from private.change_log_position()), true);
select set_config('tests.raw2', admin.create_event(current_setting('tests.rt_c')::uuid, 'Raw', now() + interval '1 day')::text, true);
select tests.authenticate_as('rt_user');
select is(
  (select jsonb_build_object('title', record ->> 'title', 'community_id', record ->> 'community_id', 'old_record', old_record)
     from api.realtime_event_changes(current_setting('tests.start')::bigint, 9000000000000000)
    where record ->> 'id' = current_setting('tests.raw2')),
  jsonb_build_object('title', 'Raw', 'community_id', current_setting('tests.rt_c'), 'old_record', null),
  'realtime_event_changes: an insert carries the row and no old record');
select matches(
  (select commit_timestamp::text from api.realtime_event_changes(current_setting('tests.start')::bigint, 9000000000000000)
    where record ->> 'id' = current_setting('tests.raw2')),
  '^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{6}Z$', 'commit_timestamp: UTC, to the microsecond, as Supabase Realtime writes it');
reset role;
select is(admin.publish_events_to_supabase_realtime(), false, 'publish_events_to_supabase_realtime does nothing where the publication is missing');
savepoint publication;
create publication supabase_realtime;
select is(array[admin.publish_events_to_supabase_realtime(), admin.publish_events_to_supabase_realtime()], array[true, true],
  'and adds app.events where it exists (again: still true)');
select is(
  (select jsonb_agg(jsonb_build_object('schemaname', schemaname, 'tablename', tablename)) from pg_publication_tables where pubname = 'supabase_realtime'),
  '[{"schemaname": "app", "tablename": "events"}]'::jsonb, 'the publication holds app.events alone');
rollback to savepoint publication;

-- The fan-out: one read for everyone ------------------------------------------------------

select tests.create_user_named_by_email('fan_' || i) from generate_series(1, 4) i;
select tests.create_user_named_by_email('fan_manager');
select set_config('tests.fan', admin.create_community('Fan-out')::text, true);
insert into app.community_members (community_id, member_node_id)
  select current_setting('tests.fan')::uuid, tests.node_id('fan_' || i) from generate_series(1, 4) i;
insert into app.community_members (community_id, member_node_id, role) values (current_setting('tests.fan')::uuid, tests.node_id('fan_manager'), 'manager');
select set_config('tests.viewed', admin.create_event(current_setting('tests.fan')::uuid, 'Viewed', now() + interval '1 day')::text, true);
select set_config('tests.start', (select head::text from private.change_log_position()), true);
update app.events set title = 'Viewed 2', platform_a_url = 'https://a.example.com/e' where id = current_setting('tests.viewed')::uuid;
create temp table fanned as
  select * from private.event_stream_fanout(current_setting('tests.start')::bigint, (select head from private.change_log_position()), current_setting('tests.url'));
select is((select count(*)::int from fanned), 2, 'event_stream_fanout: one row per distinct view (members, managers)');
select is((select user_ids from fanned where tests.user_id('fan_manager') = any(user_ids)), array[tests.user_id('fan_manager')], 'the manager''s row is the manager''s');
select is(
  (select array(select u from unnest(user_ids) u order by u) from fanned where not tests.user_id('fan_manager') = any(user_ids)),
  (select array_agg(tests.user_id('fan_' || i) order by tests.user_id('fan_' || i)) from generate_series(1, 4) i),
  'the members share the other');
select is(
  (select jsonb_build_object('title', event -> 'title', 'can_sync', event -> 'can_sync', 'external_platforms', event -> 'external_platforms')
     from fanned where tests.user_id('fan_manager') = any(user_ids)),
  '{"title": "Viewed 2", "can_sync": true, "external_platforms": ["platform_a"]}'::jsonb, 'the manager''s payload has the sync fields');
select ok((select not (event ? 'can_sync') from fanned where not tests.user_id('fan_manager') = any(user_ids)), 'the members'' has none');
select is(
  (select (event -> '__sync_meta') - 'timestamp' from fanned where not tests.user_id('fan_manager') = any(user_ids)),
  '{"operation": "update", "table": "events"}'::jsonb, 'and both say what changed');

select tests.create_user_named_by_email('only_one');
select tests.create_user_named_by_email('only_two');
select set_config('tests.only', admin.create_community('Only')::text, true);
insert into app.community_members (community_id, member_node_id) values
  (current_setting('tests.only')::uuid, tests.node_id('only_one')), (current_setting('tests.only')::uuid, tests.node_id('only_two'));
select set_config('tests.start', (select head::text from private.change_log_position()), true);
select admin.create_event(current_setting('tests.only')::uuid, 'Only', now() + interval '1 day');
select is(
  (select jsonb_agg(user_ids) from private.event_stream_fanout(current_setting('tests.start')::bigint, (select head from private.change_log_position()),
                                                              current_setting('tests.url'), array[tests.user_id('only_two')])),
  jsonb_build_array(jsonb_build_array(tests.user_id('only_two'))), 'only_users restricts the answer');
select set_config('request.jwt.claims', '{"role":"service_role"}', true);
select count(*) from private.event_stream_fanout(current_setting('tests.start')::bigint, (select head from private.change_log_position()), current_setting('tests.url'));
select is(current_setting('request.jwt.claims', true), '{"role":"service_role"}', 'and the caller''s claims are left as they were');
select set_config('request.jwt.claims', '', true);
select tests.authenticate_as('only_one');
select throws_ok(
  format('select * from private.event_stream_fanout(0, 1, %L)', current_setting('tests.url')), '42501', null,
  'event_stream_fanout is not callable by request roles');
reset role;
select is(
  (select prorows from pg_proc where oid = 'private.change_log_position()'::regprocedure), 1::real,
  'opening a stream is planned without JIT: change_log_position estimates one row');
select ok(
  (select 'jit=off' = any(proconfig) from pg_proc where oid = 'api.event_stream_open(text, bigint, text, integer)'::regprocedure),
  'and event_stream_open runs with jit off');

-- Streams opened in batches --------------------------------------------------------------

create function pg_temp.open_batch(requests jsonb) returns jsonb language sql as $$
  select private.event_streams_open('sql-batch-test', current_setting('tests.url'), 60, requests)
$$;
-- Events without the per-open timestamp of __sync_meta.
create function pg_temp.without_timestamp(events jsonb) returns jsonb language sql immutable as $$
  select coalesce(jsonb_agg((e - '__sync_meta') || jsonb_build_object('meta', (e -> '__sync_meta') - 'timestamp') order by n), '[]')
    from jsonb_array_elements(events) with ordinality x(e, n)
$$;
grant execute on function pg_temp.without_timestamp(jsonb) to public;
select set_config('tests.batch', admin.create_community('Batch')::text, true);
select set_config('tests.batch_other', admin.create_community('Batch other')::text, true);
select admin.create_event(current_setting('tests.batch')::uuid, 'Shared', now() + interval '1 day');
select admin.create_event(current_setting('tests.batch')::uuid, 'Later', now() + interval '2 days', now() + interval '2 days 3 hours');
select admin.create_event(current_setting('tests.batch_other')::uuid, 'Elsewhere', now() + interval '1 day');
select tests.create_user_named_by_email(u) from unnest(array['b_a', 'b_b', 'b_manager', 'b_outsider']) u;
insert into app.community_members (community_id, member_node_id, role) values
  (current_setting('tests.batch')::uuid, tests.node_id('b_a'), 'member'),
  (current_setting('tests.batch')::uuid, tests.node_id('b_b'), 'member'),
  (current_setting('tests.batch')::uuid, tests.node_id('b_manager'), 'manager');
select set_config('tests.opened', pg_temp.open_batch(
  (select jsonb_agg(jsonb_build_object('user_id', tests.user_id(u)) order by n) from unnest(array['b_a', 'b_b', 'b_manager', 'b_outsider']) with ordinality x(u, n)))::text, true);
create temp table batch as
  select n, s, (s ->> 'view')::int as view, u
    from jsonb_array_elements(current_setting('tests.opened')::jsonb -> 'streams') with ordinality x(s, n)
    join unnest(array['b_a', 'b_b', 'b_manager', 'b_outsider']) with ordinality y(u, m) on m = n;
grant select on batch to public;
select is((select count(*)::int from batch), 4, 'event_streams_open: one answer per request');
select is((select view from batch where n = 1), (select view from batch where n = 2), 'users whose memberships are the same share one snapshot');
select is((select count(distinct view)::int from batch), 3, 'three views: member, manager, nobody');
select is(jsonb_array_length(current_setting('tests.opened')::jsonb -> 'views'), 3, 'three snapshots');
select is(
  (select count(*)::int from batch where s ->> 'mode' = 'snapshot' and (s -> 'last_event_id') = current_setting('tests.opened')::jsonb -> 'head'), 4,
  'each a snapshot at the head the batch read');
select tests.authenticate_as('b_a');
select is(pg_temp.without_timestamp(current_setting('tests.opened')::jsonb -> 'views' -> (select view from batch where n = 1)),
          (select pg_temp.without_timestamp(events) from api.event_stream_open('sql-single', null, current_setting('tests.url'), 60)),
          'each user''s view is what api.event_stream_open gives them alone: a member');
select tests.authenticate_as('b_b');
select is(pg_temp.without_timestamp(current_setting('tests.opened')::jsonb -> 'views' -> (select view from batch where n = 2)),
          (select pg_temp.without_timestamp(events) from api.event_stream_open('sql-single', null, current_setting('tests.url'), 60)),
          'another member');
select tests.authenticate_as('b_manager');
select is(pg_temp.without_timestamp(current_setting('tests.opened')::jsonb -> 'views' -> (select view from batch where n = 3)),
          (select pg_temp.without_timestamp(events) from api.event_stream_open('sql-single', null, current_setting('tests.url'), 60)),
          'the manager');
select tests.authenticate_as('b_outsider');
select is(pg_temp.without_timestamp(current_setting('tests.opened')::jsonb -> 'views' -> (select view from batch where n = 4)),
          (select pg_temp.without_timestamp(events) from api.event_stream_open('sql-single', null, current_setting('tests.url'), 60)),
          'someone in no community');
reset role;
select is(
  (select jsonb_path_query_array(current_setting('tests.opened')::jsonb -> 'views' -> (select view from batch where n = 3), '$[*].title')),
  '["Shared", "Later"]'::jsonb, 'the manager''s view: the community''s upcoming events, soonest first');
select is(current_setting('tests.opened')::jsonb -> 'views' -> (select view from batch where n = 3) -> 0 -> 'can_sync', 'true'::jsonb,
  'with the manager fields');
select is(current_setting('tests.opened')::jsonb -> 'views' -> (select view from batch where n = 1) -> 0 -> 'can_sync', null,
  'which a member''s view has not');
select is(current_setting('tests.opened')::jsonb -> 'views' -> (select view from batch where n = 4), '[]'::jsonb, 'nobody''s view is empty');
select is(
  (select array_agg(user_id order by user_id) from app.event_streams where id in (select (s ->> 'stream_id')::uuid from batch)),
  (select array_agg(tests.user_id(u) order by tests.user_id(u)) from unnest(array['b_a', 'b_b', 'b_manager', 'b_outsider']) u),
  'every stream is registered, for its user');

select tests.create_user_named_by_email('b_resumer');
select set_config('tests.now', (select head::text from private.change_log_position()), true);
select set_config('tests.opened', pg_temp.open_batch(jsonb_build_array(
  jsonb_build_object('user_id', tests.user_id('b_resumer'), 'last_event_id', current_setting('tests.now')::bigint),
  jsonb_build_object('user_id', tests.user_id('b_resumer'), 'last_event_id', current_setting('tests.now')::bigint + 1000000),
  jsonb_build_object('user_id', tests.user_id('b_resumer'))))::text, true);
select is(
  (current_setting('tests.opened')::jsonb -> 'streams' -> 0) - 'stream_id',
  jsonb_build_object('mode', 'resume', 'last_event_id', current_setting('tests.now')::bigint, 'view', null),
  'a Last-Event-ID the log holds resumes');
select is(
  jsonb_build_array(current_setting('tests.opened')::jsonb -> 'streams' -> 1 -> 'mode', current_setting('tests.opened')::jsonb -> 'streams' -> 1 -> 'last_event_id'),
  jsonb_build_array('reset', current_setting('tests.opened')::jsonb -> 'head'), 'one it does not resets, at the head');
select is(
  jsonb_build_array(current_setting('tests.opened')::jsonb -> 'streams' -> 2 -> 'mode', current_setting('tests.opened')::jsonb -> 'streams' -> 2 -> 'last_event_id'),
  jsonb_build_array('snapshot', current_setting('tests.opened')::jsonb -> 'head'), 'none: a snapshot at the head');

select tests.create_user_named_by_email('b_capped');
select tests.create_user_named_by_email('b_uncapped');
select tests.authenticate_as('b_capped');
select private.event_stream_register('sql-batch-test', 'sse', 60);
reset role;
select set_config('tests.opened', pg_temp.open_batch(
  (select jsonb_agg(jsonb_build_object('user_id', tests.user_id(u)) order by n)
     from unnest(array['b_capped', 'b_capped', 'b_capped', 'b_uncapped', 'b_capped', 'b_capped', 'b_capped']) with ordinality x(u, n)))::text, true);
select is(
  (select jsonb_agg(coalesce(s ->> 'error', 'ok') order by n) from jsonb_array_elements(current_setting('tests.opened')::jsonb -> 'streams') with ordinality x(s, n)),
  '["ok", "ok", "ok", "ok", "ok", "too_many_streams", "too_many_streams"]'::jsonb,
  'the cap of 5 counts live streams and earlier elements of the batch; only the rest are refused');
select is(current_setting('tests.opened')::jsonb -> 'streams' -> 5 ->> 'message', 'too many open streams: at most 5 per user', 'with the cap''s message');
select is((select count(*)::int from app.event_streams where user_id = tests.user_id('b_capped')), 5, 'five streams of that user');
select is(
  (select count(distinct s ->> 'stream_id')::int from jsonb_array_elements(current_setting('tests.opened')::jsonb -> 'streams') s where s ? 'stream_id'),
  5, 'each with its own id');

select tests.create_user_named_by_email('b_plain');
select tests.create_user_named_by_email('b_ended');
select set_config('tests.session', gen_random_uuid()::text, true);
insert into identity.refresh_tokens (user_id, session_id, token_hash, expires_at, revoked_at, revoked_reason)
values (tests.user_id('b_ended'), current_setting('tests.session')::uuid, extensions.gen_random_bytes(16), now() + interval '1 day', now(), 'logout');
select set_config('tests.opened', pg_temp.open_batch(jsonb_build_array(
  jsonb_build_object('user_id', tests.user_id('b_ended'), 'session_id', current_setting('tests.session')),
  jsonb_build_object('user_id', gen_random_uuid()),
  jsonb_build_object('user_id', tests.user_id('b_plain'), 'session_id', gen_random_uuid())))::text, true);
select is(current_setting('tests.opened')::jsonb -> 'streams' -> 0,
  '{"error": "session_ended", "message": "the session of this access token has ended"}'::jsonb, 'an ended session is refused, alone');
select is(current_setting('tests.opened')::jsonb -> 'streams' -> 1 ->> 'error', 'no_profile', 'and a user without a profile');
select is(current_setting('tests.opened')::jsonb -> 'streams' -> 2 ->> 'mode', 'snapshot', 'the others of the batch open');
select is((select count(*)::int from app.event_streams where user_id = tests.user_id('b_ended')), 0, 'nothing is registered for the ended session');

select is(
  (select jsonb_agg(jsonb_build_array(n, stream_id is null) order by n)
     from private.event_streams_register('sql-batch-test', 'sse', 60, array[tests.user_id('b_plain'), null, tests.user_id('b_plain')])),
  '[[1, false], [2, true], [3, false]]'::jsonb, 'event_streams_register answers one element per request, null for a null one, in order');
select tests.authenticate_as('b_plain');
select throws_ok(
  format('select private.event_streams_open(%L, %L, 60, %L)', 'x', current_setting('tests.url'), jsonb_build_array(jsonb_build_object('user_id', tests.user_id('b_plain')))),
  '42501', null, 'event_streams_open is not callable by signed-in users');
reset role;

-- Pruning, with its watermark (in a savepoint: the log is every test's) -------------------------

select tests.create_user_named_by_email('pruner');
savepoint pruning;
select admin.create_event(current_setting('tests.rt_c')::uuid, 'Pruned', now() + interval '1 day');
select set_config('tests.pruned', (select max(id)::text from app.change_log), true);
-- Make the newest entry old, and prune: everything up to it goes, and the watermark says so.
update app.change_log set changed_at = now() - interval '3 days' where id = current_setting('tests.pruned')::bigint;
select admin.prune_change_log('1 day');
select is((select pruned_through from private.change_log_position()), current_setting('tests.pruned')::bigint, 'prune_change_log: the watermark is the newest pruned id');
select is((select count(*)::int from app.change_log where id <= current_setting('tests.pruned')::bigint), 0, 'every entry up to it is gone');
select is(admin.prune_change_log('1 day'), 0::bigint, 'pruning again (as another replica would) removes nothing');
select is((select pruned_through from private.change_log_position()), current_setting('tests.pruned')::bigint, 'and leaves the watermark');
select is(split_part(tests.error_of(format('select * from private.event_stream_fanout(%s, %s, %L)',
            current_setting('tests.pruned')::bigint - 1, current_setting('tests.pruned'), current_setting('tests.url'))), ' ', 1),
  'PT410', 'event_stream_fanout of a range starting below the watermark is PT410');
select tests.authenticate_as('pruner');
select is((select mode from api.event_stream_open('test', current_setting('tests.pruned')::bigint - 1, current_setting('tests.url'), 60)), 'reset',
  'a Last-Event-ID below the watermark resets');
select is((select mode from api.event_stream_open('test', current_setting('tests.pruned')::bigint, current_setting('tests.url'), 60)), 'resume',
  'the watermark itself resumes');
select is(tests.error_of(format('select * from api.event_stream_changes(%s, %s, %L)',
            current_setting('tests.pruned')::bigint - 1, current_setting('tests.pruned'), current_setting('tests.url'))),
  'PT410 last_event_id_expired', 'event_stream_changes below it: PT410 last_event_id_expired');
reset role;
rollback to savepoint pruning;

select * from finish();
rollback;

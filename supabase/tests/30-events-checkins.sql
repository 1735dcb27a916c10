-- Events and check-ins: event status and the venue concurrency window at
-- their edges (date - 2h <= moment <= effective end + 2h, where an event
-- without end_time ends 2 hours after its date), reading events, checking in
-- and out of events and venues through the api functions with their
-- refusals, and row-level security on check-ins.
begin;
select plan(40);

-- Status and window, at the edges -------------------------------------------

select is(private.event_status('2030-01-01T18:00:00Z', '2030-01-01T20:30:00Z', '2030-01-01T17:59:59.999999Z'), 'upcoming', 'status: upcoming just before the date');
select is(private.event_status('2030-01-01T18:00:00Z', '2030-01-01T20:30:00Z', '2030-01-01T18:00:00Z'), 'ongoing', 'status: ongoing from the date');
select is(private.event_status('2030-01-01T18:00:00Z', '2030-01-01T20:30:00Z', '2030-01-01T20:30:00Z'), 'ongoing', 'status: ongoing up to the end, inclusive');
select is(private.event_status('2030-01-01T18:00:00Z', '2030-01-01T20:30:00Z', '2030-01-01T20:30:00.000001Z'), 'past', 'status: past just after the end');
select is(private.event_status('2030-01-01T18:00:00Z', null, '2030-01-01T20:00:00.000001Z'), 'past', 'status: without end_time, past 2 hours after the date');

select set_config('tests.venue', admin.create_venue('Window Hall')::text, true);
select set_config('tests.community', admin.create_community('Window club')::text, true);
select set_config('tests.event', admin.create_event(current_setting('tests.community')::uuid, 'timed',
  '2030-02-01T18:00:00Z', '2030-02-01T20:00:00Z', current_setting('tests.venue')::uuid)::text, true);

create function pg_temp.at_venue(moment text) returns uuid[] language sql as $$
  select coalesce(array_agg(id), '{}') from private.venue_concurrent_events(current_setting('tests.venue')::uuid, moment::timestamptz)
$$;

select is(pg_temp.at_venue('2030-02-01T15:59:59.999999Z'), '{}'::uuid[], 'window: just before start - 2h: not concurrent');
select is(pg_temp.at_venue('2030-02-01T16:00:00Z'), array[current_setting('tests.event')::uuid], 'window: exactly start - 2h: concurrent');
select is(pg_temp.at_venue('2030-02-01T22:00:00Z'), array[current_setting('tests.event')::uuid], 'window: exactly end + 2h: concurrent');
select is(pg_temp.at_venue('2030-02-01T22:00:00.000001Z'), '{}'::uuid[], 'window: just after end + 2h: not concurrent');

select set_config('tests.open_ended', admin.create_event(current_setting('tests.community')::uuid, 'open',
  '2030-03-01T18:00:00Z', null, current_setting('tests.venue')::uuid)::text, true);
select is(pg_temp.at_venue('2030-03-01T22:00:00Z'), array[current_setting('tests.open_ended')::uuid], 'window: no end_time: concurrent until date + 4h');
select is(pg_temp.at_venue('2030-03-01T22:00:00.000001Z'), '{}'::uuid[], 'window: no end_time: not after date + 4h');
select is(
  (select count(*)::int from private.venue_concurrent_events(admin.create_venue('Elsewhere'), '2030-02-01T19:00:00Z')),
  0, 'window: another venue has none of these events');

select throws_ok(
  $$select admin.create_event(current_setting('tests.community')::uuid, 'backwards', '2030-02-01T18:00:00Z', '2030-02-01T17:00:00Z')$$,
  'PT400', null, 'admin.create_event: an end before the date is refused');
select throws_ok(
  $$update app.events set ends_at = starts_at - interval '1 second' where id = current_setting('tests.event')::uuid$$,
  '23514', null, 'an end before the date is a check violation, whatever the path');

-- Reading events ------------------------------------------------------------

select tests.create_user('host');
select tests.create_user('guest');
select tests.create_user('stranger');
select admin.add_manager(current_setting('tests.community')::uuid, tests.email('host'));
-- An event happening now at a venue of its own, so that venue check-ins find it.
select set_config('tests.venue_now', admin.create_venue('Now Hall')::text, true);
select set_config('tests.now_event', admin.create_event(current_setting('tests.community')::uuid, 'now',
  now() + interval '1 hour', null, current_setting('tests.venue_now')::uuid)::text, true);
select set_config('tests.now_node', (select node_id::text from app.events where id = current_setting('tests.now_event')::uuid), true);
select set_config('tests.now_shortlink', (select shortlink from app.events where id = current_setting('tests.now_event')::uuid), true);

select tests.authenticate_as('guest');
select is(
  api.event_get(current_setting('tests.now_node')::uuid, 'https://app.example.test'),
  api.event_get(current_setting('tests.now_event')::uuid, 'https://app.example.test'),
  'event_get: by node id as by id');
select is(
  api.event_get(current_setting('tests.now_event')::uuid, 'https://app.example.test/') ->> 'deeplink_url',
  'https://app.example.test/l/event/' || current_setting('tests.now_shortlink'),
  'event_get: links are built on the public URL');
select ok(
  not (api.event_get(current_setting('tests.now_event')::uuid, 'https://x.test') ? 'can_sync'),
  'event_get: a user who does not manage the community sees no sync fields');
select throws_ok(
  format('select api.event_get(%L, %L)', gen_random_uuid(), 'https://x.test'),
  'PT404', 'event not found', 'event_get: an unknown event is PT404');
select tests.authenticate_as('host');
select is(
  api.event_get(current_setting('tests.now_event')::uuid, 'https://x.test') -> 'can_sync', 'true'::jsonb,
  'event_get: a manager of the community sees can_sync');

select tests.authenticate_as_anon();
select is(
  api.event_public(current_setting('tests.now_shortlink'), 'https://x.test') ->> 'id', current_setting('tests.now_event'),
  'event_public (no credential): the event by its shortlink');
select throws_ok(
  $$select api.event_public('nOsUcH00', 'https://x.test')$$, 'PT404', 'event not found', 'event_public: an unknown shortlink is PT404');
select throws_ok(
  format('select api.event_get(%L, %L)', current_setting('tests.now_event'), 'https://x.test'),
  '42501', 'permission denied for function event_get', 'anonymous callers cannot call event_get');
select is(
  (select location from api.link_venue_checkin(current_setting('tests.venue_now')::uuid)),
  '/l/checkin/event/' || current_setting('tests.now_node'),
  'link_venue_checkin: one event at the venue now: its check-in link');
select throws_ok(
  format('select api.link_venue_checkin(%L)', current_setting('tests.venue')),
  'PT404', 'no event is taking place at this venue now', 'link_venue_checkin: none now is PT404');

-- Checking in and out -------------------------------------------------------

select tests.authenticate_as('guest');
select set_config('tests.guest_hat', (select id::text from api.hat_create('guest hat', 'social')), true);
select is(
  (select created from api.event_checkin(current_setting('tests.now_event')::uuid, current_setting('tests.guest_hat')::uuid)),
  true, 'event_checkin: the first check-in is created');
select is(
  (select created::text || ' ' || (checkin ->> 'hat_id') from api.event_checkin(current_setting('tests.now_node')::uuid)),
  'false ' || current_setting('tests.guest_hat'), 'event_checkin: again (by node id) returns the current one');
select throws_ok(
  format('select api.event_checkin(%L)', gen_random_uuid()), 'PT404', 'event not found', 'event_checkin: an unknown event is PT404');
select is(
  (select jsonb_path_query_array(checkins, '$[*].event_id') from api.checkins_current()),
  jsonb_build_array(current_setting('tests.now_event')), 'checkins_current: the open check-in');
select lives_ok(format('select api.event_checkout(%L)', current_setting('tests.now_event')), 'event_checkout');
select throws_ok(
  format('select api.event_checkout(%L)', current_setting('tests.now_event')),
  'PT404', 'you are not checked in to this event', 'event_checkout: not checked in is PT404');
select is((select checkins from api.checkins_current()), '[]'::jsonb, 'checkins_current: none after checking out');
select api.venue_checkin(current_setting('tests.venue')::uuid, current_setting('tests.guest_hat')::uuid);

select tests.authenticate_as('stranger');
select throws_ok(
  format('select api.event_checkin(%L, %L)', current_setting('tests.now_event'), current_setting('tests.guest_hat')),
  'PT422', 'hat_id is not one of your hats', 'event_checkin: with someone else''s hat is PT422');
select throws_ok(
  format('select api.venue_checkin(%L, null)', current_setting('tests.venue_now')),
  'PT422', 'hat_id must be one of your hats', 'venue_checkin: a hat is required');
select set_config('tests.stranger_hat', (select id::text from api.hat_create('stranger hat', 'social')), true);
select throws_ok(
  format('select api.venue_checkin(%L, %L)', gen_random_uuid(), current_setting('tests.stranger_hat')),
  'PT404', 'venue not found', 'venue_checkin: an unknown venue is PT404');
select is(
  (select type || ' ' || (checkin ->> 'event_id') from api.venue_checkin(current_setting('tests.venue_now')::uuid, current_setting('tests.stranger_hat')::uuid)),
  'event ' || current_setting('tests.now_event'), 'venue_checkin: one event at the venue now: checked in to it');
select is(
  (select type || ' ' || (checkin ->> 'venue_id') from api.venue_checkin(current_setting('tests.venue')::uuid, current_setting('tests.stranger_hat')::uuid)),
  'venue ' || current_setting('tests.venue'), 'venue_checkin: no event there now: checked in to the venue');
select throws_ok(
  format('select api.venue_checkout(%L)', current_setting('tests.venue_now')),
  'PT404', 'you are not checked in at this venue', 'venue_checkout: not checked in at that venue is PT404');

-- Row-level security: only one's own check-ins.
select is((select count(*)::int from app.checkins), 2, 'a user reads their own check-ins only');
select throws_ok(
  format('insert into app.checkins (user_id, event_id) values (%L, %L)', tests.user_id('guest'), current_setting('tests.now_event')),
  '42501', 'new row violates row-level security policy for table "checkins"', 'a user cannot check someone else in');
update app.checkins set checked_out_at = now() where user_id = tests.user_id('guest');
reset role;
select is(
  (select count(*)::int from app.checkins where user_id = tests.user_id('guest') and checked_out_at is null), 1,
  'nor check someone else out (the update matched no row)');

select * from finish();
rollback;

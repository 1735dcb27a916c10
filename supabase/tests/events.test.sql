-- Events and check-ins: event status and the venue concurrency window at
-- their edges (date - 2h <= moment <= effective end + 2h, where an event
-- without end_time ends 2 hours after its date), whatever the session's time
-- zone; reading events; checking in and out of events and venues through the
-- api functions with their refusals; the check-in rows whatever inserts them
-- (one current per user and place, to an event or a venue, the user's own
-- hat); row-level security on check-ins; and an event's time zone (checked,
-- spelled as the tz database does, else the venue's, the community's, the
-- service default).
begin;
select plan(88);

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

-- An event made by the operator function, then its zone (a statement cannot see the row it makes).
create function pg_temp.new_event_zone(community text) returns text language plpgsql as $$
declare
  made uuid := admin.create_event(community::uuid, 'zoned', '2030-05-01T18:00:00Z');
begin
  return (select e.timezone from app.events e where e.id = made);
end;
$$;

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

-- More edges: the middle, the end without end_time, the session time zone -----------

select is(private.event_status('2030-01-01T18:00:00Z', '2030-01-01T20:30:00Z', '2030-01-01T19:00:00Z'), 'ongoing', 'status: ongoing in between');
select is(private.event_status('2030-01-01T18:00:00Z', null, '2030-01-01T20:00:00Z'), 'ongoing', 'status: without end_time, ongoing until 2 hours after the date');
select is(private.event_effective_end('2030-01-01T18:00:00Z', null), '2030-01-01T20:00:00Z'::timestamptz, 'effective end without end_time: date + 2 hours');
set local timezone = 'America/New_York';
select is(private.event_effective_end('2030-03-10T01:30:00Z', null), '2030-03-10T03:30:00Z'::timestamptz,
  'effective end: 2 hours later in absolute time, across the New York DST change (the session time zone does not matter)');
reset timezone;
select is(pg_temp.at_venue('2030-02-01T19:00:00Z'), array[current_setting('tests.event')::uuid], 'window: during the event: concurrent');
select is(pg_temp.at_venue('2030-02-01T21:59:00Z'), array[current_setting('tests.event')::uuid], 'window: ended 1h59m ago: concurrent');
select is(pg_temp.at_venue('2030-02-01T22:01:00Z'), '{}'::uuid[], 'window: ended 2h01m ago: not concurrent');
select is(pg_temp.at_venue('2030-03-01T21:59:00Z'), array[current_setting('tests.open_ended')::uuid], 'window: no end_time: concurrent 3h59m after the date');

select set_config('tests.busy_venue', admin.create_venue('Busy Hall')::text, true);
select set_config('tests.other_venue', admin.create_venue('Other Hall')::text, true);
select set_config('tests.later', admin.create_event(current_setting('tests.community')::uuid, 'later', '2030-02-03T19:00:00Z', null, current_setting('tests.busy_venue')::uuid)::text, true);
select set_config('tests.sooner', admin.create_event(current_setting('tests.community')::uuid, 'sooner', '2030-02-03T18:00:00Z', null, current_setting('tests.busy_venue')::uuid)::text, true);
select admin.create_event(current_setting('tests.community')::uuid, 'elsewhere', '2030-02-03T18:00:00Z', null, current_setting('tests.other_venue')::uuid);
select admin.create_event(current_setting('tests.community')::uuid, 'nowhere', '2030-02-03T18:00:00Z');
select is(
  (select array_agg(id) from private.venue_concurrent_events(current_setting('tests.busy_venue')::uuid, '2030-02-03T18:30:00Z')),
  array[current_setting('tests.sooner')::uuid, current_setting('tests.later')::uuid],
  'window: only the events at that venue, soonest first');

-- Check-in rows, whatever inserts them ----------------------------------------------

select tests.create_user('ci_user');
select tests.create_user('ci_other');
select set_config('tests.ci_event', admin.create_event(current_setting('tests.community')::uuid, 'rows', '2030-03-01T18:00:00Z')::text, true);
select set_config('tests.ci_venue', admin.create_venue('Row Hall')::text, true);
insert into app.checkins (user_id, event_id) values (tests.user_id('ci_user'), current_setting('tests.ci_event')::uuid);
select throws_ok(
  $$insert into app.checkins (user_id, event_id) values (tests.user_id('ci_user'), current_setting('tests.ci_event')::uuid)$$,
  '23505', null, 'at most one current check-in per user and event');
insert into app.checkins (user_id, venue_node_id) values (tests.user_id('ci_user'), current_setting('tests.ci_venue')::uuid);
select throws_ok(
  $$insert into app.checkins (user_id, venue_node_id) values (tests.user_id('ci_user'), current_setting('tests.ci_venue')::uuid)$$,
  '23505', null, 'and per user and venue');
update app.checkins set checked_out_at = now() where user_id = tests.user_id('ci_user');
select lives_ok(
  $$insert into app.checkins (user_id, event_id) values (tests.user_id('ci_user'), current_setting('tests.ci_event')::uuid)$$,
  'checked-out rows do not count: the user checks in to the event again');
select lives_ok(
  $$insert into app.checkins (user_id, venue_node_id) values (tests.user_id('ci_user'), current_setting('tests.ci_venue')::uuid)$$,
  'and to the venue again');
select throws_ok(
  $$insert into app.checkins (user_id) values (tests.user_id('ci_other'))$$,
  '23514', null, 'a check-in is to an event or a venue: not neither');
select throws_ok(
  $$insert into app.checkins (user_id, event_id, venue_node_id) values (tests.user_id('ci_other'), current_setting('tests.ci_event')::uuid, current_setting('tests.ci_venue')::uuid)$$,
  '23514', null, 'nor both');
insert into app.hats (user_id, name, hat_type) values (tests.user_id('ci_other'), 'theirs', 'social');
select is(
  tests.error_of(format('insert into app.checkins (user_id, event_id, hat_id) values (%L, %L, %L)', tests.user_id('ci_user'),
    admin.create_event(current_setting('tests.community')::uuid, 'hats', '2030-03-03T18:00:00Z'),
    (select id from app.hats where user_id = tests.user_id('ci_other') and name = 'theirs'))),
  'PT422 invalid_hat', 'the hat must be the user''s own, whatever inserts the row (PT422 invalid_hat)');

-- event_checkin is idempotent; event_checkout keeps the row ----------------------------

select tests.create_user('ci_twice');
select set_config('tests.twice', admin.create_event(current_setting('tests.community')::uuid, 'twice', '2030-03-04T18:00:00Z')::text, true);
select tests.authenticate_as('ci_twice');
select set_config('tests.first', (select jsonb_build_object('created', created, 'id', checkin ->> 'id')::text from api.event_checkin(current_setting('tests.twice')::uuid)), true);
select set_config('tests.second', (select jsonb_build_object('created', created, 'id', checkin ->> 'id')::text from api.event_checkin(current_setting('tests.twice')::uuid)), true);
select is(current_setting('tests.first')::jsonb -> 'created', 'true'::jsonb, 'event_checkin: the first check-in is created');
select is(current_setting('tests.second')::jsonb -> 'created', 'false'::jsonb, 'the second is not');
select is(current_setting('tests.second')::jsonb -> 'id', current_setting('tests.first')::jsonb -> 'id', 'and is the same check-in');
select api.event_checkout(current_setting('tests.twice')::uuid);
reset role;
select is(
  (select jsonb_agg(checked_out_at is not null) from app.checkins where user_id = tests.user_id('ci_twice')),
  '[true]'::jsonb, 'event_checkout keeps the row, checked out');
select tests.authenticate_as('ci_twice');
select is(tests.error_of(format('select api.event_checkout(%L)', current_setting('tests.twice'))), 'PT404 not_checked_in',
  'checking out again: PT404 not_checked_in');

-- Offline check-ins: the phone's time, at the edges of its bounds ------------------------
-- tests.event runs 2030-02-01 18:00 to 20:00: its window is 16:00 to 22:00.

create function pg_temp.device_error(device text, as_of text) returns text language sql as $$
  select tests.error_of(format('select private.checkin_device_time((select e from app.events e where e.id = %L), %L::timestamptz, %L::timestamptz)',
                               current_setting('tests.event'), device, as_of))
$$;
select is(private.checkin_device_time((select e from app.events e where e.id = current_setting('tests.event')::uuid), null, '2030-02-01T19:00:00Z'),
          null, 'device time: none stays none');
select is(pg_temp.device_error('2030-02-01T18:30:00Z', '2030-02-01T19:00:00Z'), 'no error', 'device time: in the window, before the server: kept');
select is(pg_temp.device_error('2030-02-01T19:05:00Z', '2030-02-01T19:00:00Z'), 'no error', 'device time: 5 minutes ahead of the server (skew): kept');
select is(pg_temp.device_error('2030-02-01T19:05:00.000001Z', '2030-02-01T19:00:00Z'), 'PT422 checkin_time_in_future',
          'device time: more than 5 minutes ahead: PT422 checkin_time_in_future');
select is(pg_temp.device_error('2030-02-01T17:00:00Z', '2030-02-02T17:00:00Z'), 'no error', 'device time: exactly 24 hours old: kept');
select is(pg_temp.device_error('2030-02-01T16:59:59.999999Z', '2030-02-02T17:00:00Z'), 'PT422 checkin_time_too_old',
          'device time: more than 24 hours old: PT422 checkin_time_too_old');
select is(pg_temp.device_error('2030-02-01T16:00:00Z', '2030-02-01T16:01:00Z'), 'no error', 'device time: at the start of the window (date - 2h): kept');
select is(pg_temp.device_error('2030-02-01T15:59:59.999999Z', '2030-02-01T16:01:00Z'), 'PT422 checkin_time_outside_event',
          'device time: just before the window: PT422 checkin_time_outside_event');
select is(pg_temp.device_error('2030-02-01T22:00:00Z', '2030-02-01T22:01:00Z'), 'no error', 'device time: at the end of the window (end + 2h): kept');
select is(pg_temp.device_error('2030-02-01T22:00:00.000001Z', '2030-02-01T22:01:00Z'), 'PT422 checkin_time_outside_event',
          'device time: just after the window: PT422 checkin_time_outside_event');

reset role;
select tests.create_user('ci_offline');
select set_config('tests.offline_event', admin.create_event(current_setting('tests.community')::uuid, 'offline', now() - interval '1 hour')::text, true);
select tests.authenticate_as('ci_offline');
select is((select checkin ->> 'device_checked_in_at' from api.event_checkin(current_setting('tests.offline_event')::uuid, checked_in_at => now() - interval '20 minutes')),
          app.iso(now() - interval '20 minutes'), 'event_checkin keeps the phone''s time as device_checked_in_at');
select is(tests.error_of(format('select api.event_checkin(%L, checked_in_at => now() - interval ''3 hours'')', current_setting('tests.twice'))),
          'PT422 checkin_time_outside_event', 'event_checkin refuses a time outside the event''s window');
reset role;
select throws_ok(format('insert into app.checkins (user_id, event_id, device_checked_in_at) values (%L, %L, now() - interval ''25 hours'')',
                        tests.user_id('ci_twice'), current_setting('tests.offline_event')),
                 '23514', 'new row for relation "checkins" violates check constraint "checkins_device_time_bounded"',
                 'whatever inserts the row, a device time more than 24 hours before the server''s is refused');

-- Row-level security between two users ------------------------------------------------

reset role;
select tests.create_user('ci_alice');
select tests.create_user('ci_bob');
select set_config('tests.shared', admin.create_event(current_setting('tests.community')::uuid, 'shared', '2030-04-01T18:00:00Z')::text, true);
select tests.authenticate_as('ci_alice');
select api.event_checkin(current_setting('tests.shared')::uuid);
select tests.authenticate_as('ci_bob');
select api.event_checkin(current_setting('tests.shared')::uuid);
select tests.authenticate_as('ci_alice');
select is(
  (select array_agg(user_id) from app.checkins where event_id = current_setting('tests.shared')::uuid),
  array[tests.user_id('ci_alice')], 'a user reads only their own check-ins of an event');
select throws_ok(
  format('insert into app.checkins (user_id, event_id) values (%L, %L)', tests.user_id('ci_bob'), current_setting('tests.shared')),
  '42501', null, 'and cannot check someone else in');
with changed as (update app.checkins set checked_out_at = now() where user_id = tests.user_id('ci_bob') returning 1)
select is((select count(*)::int from changed), 0, 'nor out');
reset role;

-- Time zones -------------------------------------------------------------------

select is(private.time_zone_name('europe/PARIS'), 'Europe/Paris', 'a zone is spelled as pg_timezone_names spells it');
select is(tests.error_of($$select private.time_zone_name('Mars/Olympus_Mons')$$), 'PT422 invalid_timezone', 'an unknown zone is PT422 invalid_timezone');
select is(tests.error_of($$select private.time_zone_name('posixrules')$$), 'PT422 invalid_timezone', 'nor are the tz database''s internals (posixrules, posix/, right/) zones');
select is((select count(*)::int from pg_timezone_names z where z.name !~ '^(posix|right)/' and z.name not in ('Factory', 'localtime', 'posixrules')
             and not exists (select from private.time_zones t where t.name = z.name)), 0,
          'the copy holds every zone of pg_timezone_names');
select set_config('tests.tz_community', admin.create_community('Zoned club')::text, true);
select set_config('tests.tz_venue', admin.create_venue('Zoned hall')::text, true);
select is(pg_temp.new_event_zone(current_setting('tests.tz_community')),
          'UTC', 'an event without a zone anywhere: the service default (UTC unless DEFAULT_TIMEZONE says otherwise)');
select private.service_setting_set('default_timezone', 'Asia/Tokyo');
select is(pg_temp.new_event_zone(current_setting('tests.tz_community')),
          'Asia/Tokyo', '... DEFAULT_TIMEZONE, as the gateway records it at start');
select is(admin.set_community_timezone(current_setting('tests.tz_community')::uuid, 'america/new_york'), 'America/New_York', 'an operator sets a community''s zone');
select is(pg_temp.new_event_zone(current_setting('tests.tz_community')),
          'America/New_York', 'an event of a community with a zone takes it');
select admin.set_venue_timezone(current_setting('tests.tz_venue')::uuid, 'Europe/Lisbon');
select set_config('tests.tz_event', admin.create_event(current_setting('tests.tz_community')::uuid, 'at the hall', '2030-05-01T18:00:00Z', null,
                                                       current_setting('tests.tz_venue')::uuid)::text, true);
select is((select timezone from app.events where id = current_setting('tests.tz_event')::uuid), 'Europe/Lisbon', 'a venue''s zone wins over the community''s');
update app.events set timezone = null where id = current_setting('tests.tz_event')::uuid;
select is((select timezone from app.events where id = current_setting('tests.tz_event')::uuid), 'Europe/Lisbon', 'set to null, the zone is the venue''s again');
select is(tests.error_of(format('update app.events set timezone = %L where id = %L', 'Nowhere/Land', current_setting('tests.tz_event'))),
          'PT422 invalid_timezone', 'whatever writes the row, an unknown zone is refused');
select private.service_setting_set('default_timezone', 'UTC');

select * from finish();
rollback;

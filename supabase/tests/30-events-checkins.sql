-- The venue concurrency window: date - 2h <= moment <= effective end + 2h,
-- where an event without end_time ends 2 hours after its date.
begin;
select plan(7);

select set_config('tests.venue', admin.create_venue('Window Hall')::text, true);
select set_config('tests.community', admin.create_community('Window club')::text, true);
select set_config('tests.event', admin.create_event(current_setting('tests.community')::uuid, 'timed',
  '2030-02-01T18:00:00Z', '2030-02-01T20:00:00Z', current_setting('tests.venue')::uuid)::text, true);

create function pg_temp.at_venue(moment text) returns uuid[] language sql as $$
  select coalesce(array_agg(id), '{}') from private.venue_concurrent_events(current_setting('tests.venue')::uuid, moment::timestamptz)
$$;

select is(pg_temp.at_venue('2030-02-01T15:59:59.999999Z'), '{}'::uuid[], 'just before start - 2h: not concurrent');
select is(pg_temp.at_venue('2030-02-01T16:00:00Z'), array[current_setting('tests.event')::uuid], 'exactly start - 2h: concurrent');
select is(pg_temp.at_venue('2030-02-01T22:00:00Z'), array[current_setting('tests.event')::uuid], 'exactly end + 2h: concurrent');
select is(pg_temp.at_venue('2030-02-01T22:00:00.000001Z'), '{}'::uuid[], 'just after end + 2h: not concurrent');

select set_config('tests.open_ended', admin.create_event(current_setting('tests.community')::uuid, 'open',
  '2030-03-01T18:00:00Z', null, current_setting('tests.venue')::uuid)::text, true);
select is(pg_temp.at_venue('2030-03-01T22:00:00Z'), array[current_setting('tests.open_ended')::uuid], 'no end_time: concurrent until date + 4h');
select is(pg_temp.at_venue('2030-03-01T22:00:00.000001Z'), '{}'::uuid[], 'no end_time: not after date + 4h');
select is(
  (select count(*)::int from private.venue_concurrent_events(admin.create_venue('Elsewhere'), '2030-02-01T19:00:00Z')),
  0, 'another venue has none of these events');

select * from finish();
rollback;

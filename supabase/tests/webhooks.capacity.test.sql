-- Webhook capacity: an endpoint backs off after 3 failed attempts in a row
-- (nothing is sent to it before backoff_until; the pause starts at the
-- schedule's first delay and doubles, at most an hour and the schedule's last
-- delay), a success, a ping or a replay ends it, and a sender that lets go of
-- its community's slot wakes the community's endpoint that waited longest.
-- (Two senders competing for the slots need two sessions:
-- test/sql/webhook-slots.test.ts.)
begin;
select plan(17);

select tests.create_user('cap_owner');
select set_config('tests.community', admin.create_community('Capacity club', null, '{}', tests.email('cap_owner'))::text, true);
with e as (insert into app.webhook_endpoints (community_id, url, events, secret)
             values (current_setting('tests.community')::uuid, 'https://hooks.example.test/cap', '{event.created}', private.webhook_new_secret())
             returning id)
select set_config('tests.hook', e.id::text, true) from e;
create function pg_temp.queue(n integer) returns void
  language sql as $$
    insert into app.webhook_deliveries (endpoint_id, event_type, payload)
    select current_setting('tests.hook')::uuid, 'event.created', jsonb_build_object('n', g) from generate_series(1, n) g
  $$;
create function pg_temp.fail() returns text
  language sql as $$
    select private.webhook_delivery_finish(n.delivery_id, n.attempt, null, 'no answer from the endpoint', null, array[60, 600]::float8[])
      from private.webhook_delivery_next(current_setting('tests.hook')::uuid) n
  $$;
create function pg_temp.endpoint() returns app.webhook_endpoints
  language sql as $$ select * from app.webhook_endpoints where id = current_setting('tests.hook')::uuid $$;

-- The pause ---------------------------------------------------------------------------

select is(array[private.webhook_backoff_seconds(2, array[60, 600]::float8[]), private.webhook_backoff_seconds(3, array[60, 600]::float8[]),
                private.webhook_backoff_seconds(4, array[60, 600]::float8[]), private.webhook_backoff_seconds(8, array[60, 600]::float8[]),
                private.webhook_backoff_seconds(9, array[5, 36000]::float8[]), private.webhook_backoff_seconds(30, array[5, 36000]::float8[])],
  array[null, 60, 120, 600, 320, 3600]::float8[],
  'no pause before the third failure; then the first delay, doubled each time, at most the last delay and an hour');

-- Three failures in a row --------------------------------------------------------------

select pg_temp.queue(5);
select is(array[pg_temp.fail(), pg_temp.fail()], array['retrying', 'retrying'], 'two failed attempts (two deliveries)');
select ok((pg_temp.endpoint()).consecutive_failures = 2 and (pg_temp.endpoint()).backoff_until is null,
  'count as two failures in a row, no back-off yet');
select is(pg_temp.fail(), 'retrying', 'a third');
select ok((pg_temp.endpoint()).backoff_until between clock_timestamp() + interval '55 seconds' and clock_timestamp() + interval '61 seconds',
  'starts a back-off of the first retry delay');
select is((select count(*)::int from private.webhook_delivery_next(current_setting('tests.hook')::uuid)), 0,
  'during which nothing is sent, though two deliveries were never tried');
select is((select array_agg(attempts order by created_at, id) from app.webhook_deliveries where endpoint_id = current_setting('tests.hook')::uuid),
  array[1, 1, 1, 0, 0], 'the waiting deliveries spend no attempt');
select ok(not private.webhook_due(current_setting('tests.hook')::uuid), 'the endpoint is not due');
select ok(private.webhook_endpoint_reschedule(current_setting('tests.hook')::uuid) >= (pg_temp.endpoint()).backoff_until,
  'its next job is not before the back-off ends');
select ok((private.webhook_endpoint_json(pg_temp.endpoint()) ->> 'backoff_until') is not null, 'the endpoint object shows it');

-- A ping ends it, a success resets the count -------------------------------------------

select tests.authenticate_as('cap_owner');
select api.webhook_ping(current_setting('tests.hook')::uuid);
reset role;
select ok((pg_temp.endpoint()).backoff_until is null and private.webhook_due(current_setting('tests.hook')::uuid),
  'a manager''s ping ends the back-off: the endpoint is due now');
select is(pg_temp.fail(), 'retrying', 'a fourth failure in a row...');
select ok((pg_temp.endpoint()).backoff_until >= clock_timestamp() + interval '119 seconds', '...pauses twice as long');
update app.webhook_endpoints set backoff_until = null where id = current_setting('tests.hook')::uuid;
select is((select private.webhook_delivery_finish(n.delivery_id, n.attempt, 200, null, 'ok', array[60, 600]::float8[])
             from private.webhook_delivery_next(current_setting('tests.hook')::uuid) n), 'succeeded', 'a success');
select ok((pg_temp.endpoint()).consecutive_failures = 0 and (pg_temp.endpoint()).backoff_until is null,
  'ends the run of failures');

-- Letting go of a slot wakes the community's longest waiting endpoint ---------------------

with e as (insert into app.webhook_endpoints (community_id, url, events, secret, waiting_since)
             values (current_setting('tests.community')::uuid, 'https://hooks.example.test/waiting', '{event.created}',
                     private.webhook_new_secret(), now() - interval '5 seconds'),
                    (current_setting('tests.community')::uuid, 'https://hooks.example.test/later', '{event.created}',
                     private.webhook_new_secret(), now())
             returning id, url)
select set_config('tests.waiting', (select id::text from e where url like '%/waiting'), true);
select is((select status from private.webhook_send_begin(current_setting('tests.hook')::uuid, 2)), 'sending', 'a sender takes a slot');
select is(private.webhook_send_end(current_setting('tests.hook')::uuid, current_setting('tests.community')::uuid, 1)::text,
  current_setting('tests.waiting'), 'and, letting go, wakes the endpoint that has waited longest (a job now)');

select * from finish();
rollback;

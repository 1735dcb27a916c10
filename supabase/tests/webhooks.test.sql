-- Webhooks: who may manage a community's endpoints (as for the platform
-- endpoints), what an endpoint may hold, the outbox (a delivery and its job
-- written in the transaction of the change, nothing for a rolled-back one),
-- what the payloads carry, the retry schedule, the endpoint turned off after
-- 20 failed deliveries, rotation and replay; the sequence each body carries,
-- the delivery list's filters and recovering what failed since a time.
begin;
select plan(52);

select tests.create_user('hooks_owner');
select tests.create_user('hooks_other');
select tests.create_user('hooks_joiner');
select set_config('tests.community', admin.create_community('Hook club', null, '{}', tests.email('hooks_owner'))::text, true);
select set_config('tests.elsewhere', admin.create_community('Other hook club', null, '{}', tests.email('hooks_other'))::text, true);
create function pg_temp.deliveries(endpoint text) returns setof app.webhook_deliveries
  language sql as $$ select * from app.webhook_deliveries where endpoint_id = endpoint::uuid order by created_at, id $$;
create function pg_temp.jobs_of(endpoint text) returns bigint
  language sql as $$ select count(*) from graphile_worker.jobs where key = 'webhook:' || endpoint $$;

-- Who may manage endpoints ----------------------------------------------------

select tests.authenticate_as('hooks_owner');
select set_config('tests.created', api.webhook_create(current_setting('tests.community')::uuid, 'https://hooks.example.test/in',
  array['event.created', 'event.updated', 'event.deleted', 'member.joined', 'member.left'], 'CRM')::text, true);
select set_config('tests.hook', current_setting('tests.created')::jsonb ->> 'id', true);
select ok(current_setting('tests.created')::jsonb ->> 'secret' ~ '^whsec_[A-Za-z0-9+/]+=*$'
          and length(decode(substr(current_setting('tests.created')::jsonb ->> 'secret', 7), 'base64')) >= 24,
  'webhook_create: a manager registers an endpoint; its secret is whsec_ + base64 of at least 24 bytes');
select is(current_setting('tests.created')::jsonb ->> 'active', 'true', 'the endpoint is active');
select ok(not (api.webhooks_list(current_setting('tests.community')::uuid) -> 0 ? 'secret'), 'webhooks_list shows no secret');
select throws_ok(
  format($$select api.webhook_create(%L, 'https://x.example.test', array['event.exploded'])$$, current_setting('tests.community')),
  'PT422', null, 'an unknown event type is PT422');
select throws_ok(
  format($$select api.webhook_create(%L, 'ftp://x.example.test', array['event.created'])$$, current_setting('tests.community')),
  'PT422', 'url must be an http(s) URL of at most 2000 characters', 'a URL that is not http(s) is PT422');
select set_config('tests.scoped_elsewhere', (select token_value from api.api_token_create('elsewhere', array['/api/v1/*'], null,
                                     current_setting('tests.community')::uuid)), true);

select tests.authenticate_as('hooks_other');
select throws_ok(
  format($$select api.webhook_create(%L, 'https://x.example.test', array['event.created'])$$, current_setting('tests.community')),
  'PT403', 'not authorized to manage this community', 'a manager of another community may not register one (PT403)');
select throws_ok(format('select api.webhooks_list(%L)', current_setting('tests.community')),
  'PT403', 'not authorized to manage this community', 'nor list them');
select throws_ok(format($$select api.webhook_update(%L, '{"active": false}')$$, current_setting('tests.hook')),
  'PT403', 'not authorized to manage this community', 'nor change one');
select throws_ok(format('select api.webhook_deliveries(%L)', current_setting('tests.hook')),
  'PT403', 'not authorized to manage this community', 'nor read its deliveries');
select throws_ok(format('select api.webhook_rotate_secret(%L)', gen_random_uuid()),
  'PT404', 'webhook not found', 'an unknown id is PT404');
reset role;
select admin.add_manager(current_setting('tests.elsewhere')::uuid, tests.email('hooks_owner'));
select tests.authenticate_as('hooks_owner');
select set_config('tests.elsewhere_token', (select token_value from api.api_token_create('other', array['/api/v1/*'], null,
                                     current_setting('tests.elsewhere')::uuid)), true);
select tests.authenticate_with_api_token(current_setting('tests.elsewhere_token'), '/api/v1/platform/webhooks');
select throws_ok(format('select api.webhooks_list(%L)', current_setting('tests.community')),
  'PT403', 'this API token is scoped to another community', 'a token scoped to another community may not (PT403)');
select tests.authenticate_with_api_token(current_setting('tests.scoped_elsewhere'), '/api/v1/platform/webhooks');
select lives_ok(format('select api.webhooks_list(%L)', current_setting('tests.community')),
  'a token scoped to the community may list its endpoints');
select tests.authenticate_as_anon();
select throws_ok(format('select api.webhooks_list(%L)', current_setting('tests.community')),
  '42501', 'permission denied for function webhooks_list', 'anonymous callers cannot use the webhook functions');
select tests.authenticate_as('hooks_owner');
select throws_ok('select count(*) from app.webhook_endpoints', '42501', 'permission denied for table webhook_endpoints',
  'a signed-in user cannot read endpoints (their secrets) directly');
select throws_ok('select count(*) from app.webhook_deliveries', '42501', 'permission denied for table webhook_deliveries',
  'nor deliveries');

-- The outbox: a delivery and its job, in the transaction of the change -------

reset role;
select set_config('tests.event', admin.create_event(current_setting('tests.community')::uuid, 'Hook night', now() + interval '2 days')::text, true);
select is((select count(*)::int from pg_temp.deliveries(current_setting('tests.hook')) where event_type = 'event.created'), 1,
  'creating an event queues one event.created delivery');
select is(pg_temp.jobs_of(current_setting('tests.hook')), 1::bigint, 'and the endpoint''s job');
select is((select payload -> 'data' ->> 'id' from pg_temp.deliveries(current_setting('tests.hook')) where event_type = 'event.created'),
  current_setting('tests.event'), 'whose data is the Event object');
select is((select payload -> 'data' ->> 'can_sync' from pg_temp.deliveries(current_setting('tests.hook')) where event_type = 'event.created'),
  'true', 'as the community''s managers see it');
select is((select payload ->> 'type' from pg_temp.deliveries(current_setting('tests.hook')) where event_type = 'event.created'),
  'event.created', 'the payload names its type');

savepoint before_change;
update app.events set title = 'Changed in a rolled-back transaction' where id = current_setting('tests.event')::uuid;
rollback to savepoint before_change;
select is((select count(*)::int from pg_temp.deliveries(current_setting('tests.hook')) where event_type = 'event.updated'), 0,
  'a change rolled back leaves no delivery');
select is(pg_temp.jobs_of(current_setting('tests.hook')), 1::bigint, 'and no job');

update app.events set title = title where id = current_setting('tests.event')::uuid;
select is((select count(*)::int from pg_temp.deliveries(current_setting('tests.hook')) where event_type = 'event.updated'), 0,
  'an update that changes nothing an integrator sees sends nothing');
update app.events set title = 'Hook night, moved' where id = current_setting('tests.event')::uuid;
select is((select payload -> 'data' ->> 'title' from pg_temp.deliveries(current_setting('tests.hook')) where event_type = 'event.updated'),
  'Hook night, moved', 'a visible change sends event.updated with the new Event');
select is((select count(*)::int from app.webhook_deliveries d join app.webhook_endpoints e on e.id = d.endpoint_id
            where e.community_id = current_setting('tests.elsewhere')::uuid), 0,
  'nothing goes to endpoints of other communities');

select tests.authenticate_as('hooks_joiner');
select api.community_join(current_setting('tests.community')::uuid);
reset role;
select is((select payload -> 'data' -> 'member' ->> 'id' from pg_temp.deliveries(current_setting('tests.hook')) where event_type = 'member.joined'),
  tests.node_id('hooks_joiner')::text, 'joining sends member.joined with the member''s node id');
select ok((select payload::text not like '%@%' from pg_temp.deliveries(current_setting('tests.hook')) where event_type = 'member.joined'),
  'and no e-mail address');

-- After an attempt (the worker's side) ---------------------------------------

select set_config('tests.delivery', (select id::text from pg_temp.deliveries(current_setting('tests.hook')) where event_type = 'event.created'), true);
update app.webhook_deliveries set status = 'succeeded'
 where endpoint_id = current_setting('tests.hook')::uuid and id <> current_setting('tests.delivery')::uuid;
select is((select delivery_id::text || ' ' || attempt from private.webhook_delivery_next(current_setting('tests.hook')::uuid)),
  current_setting('tests.delivery') || ' 1', 'the sender takes the oldest due delivery and counts its first attempt');
select is(private.webhook_delivery_finish(current_setting('tests.delivery')::uuid, 1, 500, 'HTTP 500', 'oops', array[60, 120]::float8[]),
  'retrying', 'a 500 is retried');
select ok((select next_attempt_at between now() + interval '47 seconds' and clock_timestamp() + interval '73 seconds'
             from app.webhook_deliveries where id = current_setting('tests.delivery')::uuid),
  'after the first delay of the schedule, ±20 %');
select is((select count(*)::int from private.webhook_delivery_next(current_setting('tests.hook')::uuid)), 0,
  'a delivery waiting for its retry is not sent before');
select is(private.webhook_endpoint_reschedule(current_setting('tests.hook')::uuid),
  (select next_attempt_at from app.webhook_deliveries where id = current_setting('tests.delivery')::uuid),
  'the endpoint gets a job for that retry');
update app.webhook_deliveries set next_attempt_at = now() where id = current_setting('tests.delivery')::uuid;
select private.webhook_delivery_next(current_setting('tests.hook')::uuid);
select is(private.webhook_delivery_finish(current_setting('tests.delivery')::uuid, 2, 200, null, 'ok', array[60, 120]::float8[]),
  'succeeded', 'a 2xx succeeds');
select is((select count(*)::int from private.webhook_delivery_next(current_setting('tests.hook')::uuid)), 0,
  'a delivered delivery is not sent again');

-- Rotation: the previous secret signs too, for 24 hours
select tests.authenticate_as('hooks_owner');
select set_config('tests.rotated', api.webhook_rotate_secret(current_setting('tests.hook')::uuid)::text, true);
select api.webhook_delivery_replay(current_setting('tests.hook')::uuid, current_setting('tests.delivery')::uuid);
reset role;
select is((select secrets from private.webhook_delivery_next(current_setting('tests.hook')::uuid)),
  array[current_setting('tests.rotated')::jsonb ->> 'secret', current_setting('tests.created')::jsonb ->> 'secret'],
  'after a rotation (and a replay) a delivery is signed with the new and the previous secret');

select is(private.webhook_delivery_finish(current_setting('tests.delivery')::uuid, 3, 503, 'HTTP 503', null, '{}'),
  'failed', 'past the schedule a delivery has failed');

-- 20 failed deliveries turn the endpoint off and tell the managers
insert into app.webhook_deliveries (endpoint_id, event_type, payload, status, created_at)
  select current_setting('tests.hook')::uuid, 'event.updated', '{}', 'failed', clock_timestamp() from generate_series(1, 19);
with d as (insert into app.webhook_deliveries (endpoint_id, event_type, payload)
             values (current_setting('tests.hook')::uuid, 'event.updated', '{}') returning id)
select set_config('tests.last', d.id::text, true) from d;
select private.webhook_delivery_next(current_setting('tests.hook')::uuid);
select is(private.webhook_delivery_finish(current_setting('tests.last')::uuid, 1, null, 'ECONNREFUSED', null, '{}'), 'failed',
  'a 20th delivery fails');
select is((select active from app.webhook_endpoints where id = current_setting('tests.hook')::uuid), false,
  'an endpoint whose last 20 deliveries failed is turned off');
select is((select count(*)::int from app.email_outbox where purpose = 'webhook_disabled' and to_email = tests.email('hooks_owner')), 1,
  'and its community''s managers are e-mailed');
select tests.authenticate_as('hooks_owner');
select throws_ok(format('select api.webhook_ping(%L)', current_setting('tests.hook')),
  'PT409', 'the webhook is not active', 'an inactive endpoint is not pinged (PT409)');

-- Order, filters, recovery ----------------------------------------------------------

reset role;
select is((select count(*)::int from pg_temp.deliveries(current_setting('tests.hook')) d
            where d.sequence is not null and (private.webhook_body(d) ->> 'sequence')::bigint = d.sequence), 
          (select count(*)::int from pg_temp.deliveries(current_setting('tests.hook'))),
          'every body carries its delivery''s sequence');
select ok((select bool_and(x.sequence < x.next)
             from (select d.sequence, lead(d.sequence) over (order by d.created_at, d.id) as next
                     from pg_temp.deliveries(current_setting('tests.hook')) d) x
            where x.next is not null),
          'numbered in the order they were queued');
insert into app.webhook_deliveries (endpoint_id, event_type, payload, status, attempts, next_attempt_at, created_at)
  select current_setting('tests.hook')::uuid, 'event.created', '{"type": "event.created", "data": {}}', 'failed', 8, null,
         timestamptz '2020-01-01 00:00:00+00' + make_interval(secs => g)
    from generate_series(1, 10005) g;
update app.webhook_endpoints set active = true where id = current_setting('tests.hook')::uuid;
select tests.authenticate_as('hooks_owner');
select is((api.webhook_deliveries(current_setting('tests.hook')::uuid, 5, 0, 'failed', '2020-01-01T00:00:00Z', '2020-01-01T00:00:11Z')
           -> 'pagination' ->> 'total_count')::int, 10, 'the list filters by status and time ([since, until))');
select is(api.webhook_recover(current_setting('tests.hook')::uuid, '2020-01-01T00:00:00Z', '2020-01-02T00:00:00Z'), '{"recovered": 10000, "remaining": 5}'::jsonb,
  'webhook_recover: at most 10,000 a call, and how many are left');
reset role;
select is((select min(created_at) from app.webhook_deliveries where endpoint_id = current_setting('tests.hook')::uuid and status = 'failed'
            and created_at >= '2020-01-01'), timestamptz '2020-01-01 00:00:00+00' + interval '10001 seconds', '... the oldest first');
select tests.authenticate_as('hooks_owner');
select is(tests.error_of(format($$select api.webhook_recover(%L, '2020-01-01T00:00:00Z', '2020-01-02T00:00:00Z')$$, current_setting('tests.hook'))),
  'PT429 rate_limited', 'at most 10,000 recovered an hour per endpoint: the next call within the hour is PT429 rate_limited');
reset role;
update app.webhook_endpoints set recover_window_start = now() - interval '61 minutes' where id = current_setting('tests.hook')::uuid;
select tests.authenticate_as('hooks_owner');
select is(api.webhook_recover(current_setting('tests.hook')::uuid, '2020-01-01T00:00:00Z', '2020-01-02T00:00:00Z'), '{"recovered": 5, "remaining": 0}'::jsonb,
  'an hour later the next call takes the rest');
select is(tests.error_of(format('select api.webhook_recover(%L, null)', current_setting('tests.hook'))), 'PT422 validation_error',
  'since is required');
-- A URL change: what was queued for the old URL does not follow it.
reset role;
update app.webhook_deliveries set status = 'failed', next_attempt_at = null where endpoint_id = current_setting('tests.hook')::uuid;
update app.webhook_endpoints set recover_window_start = null, recovered_in_window = 0 where id = current_setting('tests.hook')::uuid;
select set_config('tests.old_delivery', (select d.id::text from pg_temp.deliveries(current_setting('tests.hook')) d limit 1), true);
select tests.authenticate_as('hooks_owner');
select lives_ok(format($$select api.webhook_update(%L, '{"url": "https://elsewhere.example.com/hook"}')$$, current_setting('tests.hook')),
  'the endpoint is aimed at another URL');
select is(api.webhook_recover(current_setting('tests.hook')::uuid, '2020-01-01T00:00:00Z', '2020-01-02T00:00:00Z'), '{"recovered": 0, "remaining": 0}'::jsonb,
  'webhook_recover: deliveries queued for the old URL are not sent to the new one');
select is(tests.error_of(format('select api.webhook_delivery_replay(%L, %L)', current_setting('tests.hook'), current_setting('tests.old_delivery'))),
  'PT409 webhook_url_changed', 'nor replayed to it: PT409 webhook_url_changed');
reset role;
insert into app.webhook_deliveries (endpoint_id, event_type, payload, created_at)
  values (current_setting('tests.hook')::uuid, 'event.created', '{"type": "event.created", "data": {}}', timestamptz '2030-01-01 00:00:00+00');
select is((select d.url from app.webhook_deliveries d where d.endpoint_id = current_setting('tests.hook')::uuid and d.created_at = '2030-01-01'),
  'https://elsewhere.example.com/hook', 'a delivery queued now records the URL the endpoint has now');

select * from finish();
rollback;

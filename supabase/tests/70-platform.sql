-- Platform integration: who may act for a community (a manager, with an
-- access token, a personal API token, or a token scoped to that community),
-- creating events idempotently by external id, venue matching, registering
-- attendees and checking them in by e-mail, and the anonymous forms endpoint.
begin;
select plan(31);

-- Creating a platform event takes the venue lock, then (inserting the event)
-- the change-log lock; so does this test, first, so that it cannot deadlock
-- with a platform request running at the same time.
select pg_advisory_xact_lock(hashtextextended('app.venues:platform', 0));

select tests.create_user('organiser');
select tests.create_user('member');
select set_config('tests.tag', substr(md5(gen_random_uuid()::text), 1, 10), true);
select set_config('tests.community', admin.create_community('Platform club', null, '{}', tests.email('organiser'))::text, true);
select set_config('tests.elsewhere', admin.create_community('Other club', null, '{}', tests.email('organiser'))::text, true);
select admin.add_manager(current_setting('tests.elsewhere')::uuid, tests.email('member'));
create function pg_temp.create_event(external_id text, community uuid default current_setting('tests.community')::uuid) returns jsonb
  language sql as $$
  select api.platform_event_create(community, 'platform_a', external_id, 'Launch', 'Doors at six', now() + interval '1 day',
                                   now() + interval '1 day 2 hours', 'https://a.example.test/e/1', null,
                                   'Hall ' || current_setting('tests.tag'), '5 High St', null, null)
$$;
grant execute on function pg_temp.create_event(text, uuid) to public;

-- Who may act for a community -----------------------------------------------

select tests.authenticate_as('organiser');
select set_config('tests.personal', (select token_value from api.api_token_create('personal', array['/api/v1/*'])), true);
select set_config('tests.scoped', (select token_value from api.api_token_create('scoped', array['/api/v1/*'], null,
                                     current_setting('tests.community')::uuid)), true);
select set_config('tests.scoped_elsewhere', (select token_value from api.api_token_create('elsewhere', array['/api/v1/*'], null,
                                     current_setting('tests.elsewhere')::uuid)), true);

select is(
  (select r ->> 'created' || ' ' || (r -> 'venue' ->> 'name') from pg_temp.create_event('ext-' || current_setting('tests.tag')) r),
  'true Hall ' || current_setting('tests.tag'), 'platform_event_create: a manager creates the event, and its venue');
select set_config('tests.event_node', pg_temp.create_event('ext-' || current_setting('tests.tag')) ->> 'event_node_id', true);
select is(
  (select count(*)::int from app.events where external_id = 'ext-' || current_setting('tests.tag')),
  1, 'platform_event_create: the same external id again makes no second event');
select is(
  pg_temp.create_event('ext-' || current_setting('tests.tag')) -> 'created', 'false'::jsonb, 'and answers created: false');

select tests.authenticate_with_api_token(current_setting('tests.personal'), '/api/v1/platform/events');
select is(
  pg_temp.create_event('ext-' || current_setting('tests.tag')) ->> 'event_node_id', current_setting('tests.event_node'),
  'a personal API token of a manager may act for the community');
select tests.authenticate_with_api_token(current_setting('tests.scoped'), '/api/v1/platform/events');
select is(
  pg_temp.create_event('ext-' || current_setting('tests.tag')) ->> 'event_node_id', current_setting('tests.event_node'),
  'so may a token scoped to that community');
select tests.authenticate_with_api_token(current_setting('tests.scoped_elsewhere'), '/api/v1/platform/events');
select throws_ok(
  $$select pg_temp.create_event('ext-' || current_setting('tests.tag'))$$,
  'PT403', 'this API token is scoped to another community', 'a token scoped to another community may not (PT403)');
select tests.authenticate_as('member');
select throws_ok(
  $$select pg_temp.create_event('other-' || current_setting('tests.tag'))$$,
  'PT403', 'not authorized to manage this community', 'a user who does not manage the community may not (PT403)');
select throws_ok(
  $$select pg_temp.create_event('other-' || current_setting('tests.tag'), gen_random_uuid())$$,
  'PT403', 'not authorized to manage this community', 'nor for an unknown community (PT403, not 404)');
select throws_ok(
  $$select pg_temp.create_event('ext-' || current_setting('tests.tag'), current_setting('tests.elsewhere')::uuid)$$,
  'PT422', 'this external event belongs to another community', 'an external id belongs to one community');
select tests.authenticate_as_anon();
select throws_ok(
  format('select api.platform_checkin(%L, %L)', current_setting('tests.event_node'), tests.email('member')),
  '42501', 'permission denied for function platform_checkin', 'anonymous callers cannot use the platform functions');

-- Refusals of event input ---------------------------------------------------

select tests.authenticate_as('organiser');
select throws_ok(
  format($$select api.platform_event_create(%L, 'platform_z', 'x', 'Title', null, now())$$, current_setting('tests.community')),
  'PT422', 'external_platform must be one of platform_a, platform_b, platform_c, platform_d', 'an unknown platform is PT422');
select throws_ok(
  format($$select api.platform_event_create(%L, 'platform_b', '', 'Title', null, now())$$, current_setting('tests.community')),
  'PT422', 'external_id must be 1 to 200 characters', 'an empty external id is PT422');
select throws_ok(
  format($$select api.platform_event_create(%L, 'platform_b', 'x', '  ', null, now())$$, current_setting('tests.community')),
  'PT422', 'title must be 1 to 300 characters', 'a blank title is PT422');
select throws_ok(
  format($$select api.platform_event_create(%L, 'platform_b', 'x', 'Title', null, now(), now() - interval '1 minute')$$, current_setting('tests.community')),
  'PT422', 'end_time must not be before date', 'an end before the date is PT422');
select throws_ok(
  format($$select api.platform_event_create(%L, 'platform_b', 'x', 'Title', null, now(), null, null, null, 'Hall', null, 1.5, null)$$, current_setting('tests.community')),
  'PT422', 'venue.latitude and venue.longitude go together', 'a latitude without longitude is PT422');
reset role;
select throws_ok(
  format($$with n as (insert into app.nodes (kind) values ('event') returning id)
           insert into app.events (node_id, community_id, title, starts_at, external_platform, external_id)
           select n.id, %L, 'dup', now(), 'platform_a', %L from n$$, current_setting('tests.elsewhere'), 'ext-' || current_setting('tests.tag')),
  '23505', null, 'the unique (external_platform, external_id) holds without the function too');

-- Venues are matched by name and address, any case -------------------------

select is(
  (private.platform_venue(upper('Hall ' || current_setting('tests.tag')), ' 5 high st ', null, null)).node_id,
  (select venue_node_id from app.events where node_id = current_setting('tests.event_node')::uuid),
  'platform_venue: the same name and address in another case is the same venue');
select isnt(
  (private.platform_venue('Hall ' || current_setting('tests.tag'), '6 High St', null, null)).node_id,
  (select venue_node_id from app.events where node_id = current_setting('tests.event_node')::uuid),
  'platform_venue: another address is another venue');

-- Attendees and check-ins by e-mail -------------------------------------------

select set_config('tests.attendee', 'Attendee-' || current_setting('tests.tag') || '@Example.TEST', true);
select tests.authenticate_as('organiser');
select is(
  api.platform_attendee_register(current_setting('tests.event_node')::uuid, current_setting('tests.attendee'), null) - 'data',
  '{"created": true}'::jsonb, 'platform_attendee_register: registers the attendee for the event');
select is(
  api.platform_attendee_register(current_setting('tests.event_node')::uuid, current_setting('tests.attendee'), null) -> 'data' -> 'user_created',
  'false'::jsonb, 'again: the account exists, nothing new is registered');
select throws_ok(
  format('select api.platform_attendee_register(%L, %L)', gen_random_uuid(), current_setting('tests.attendee')),
  'PT404', 'event not found', 'platform_attendee_register: an unknown event is PT404');
select throws_ok(
  format('select api.platform_attendee_register(%L, %L)', current_setting('tests.event_node'), 'not-an-address'),
  'PT422', 'email must be an e-mail address', 'platform_attendee_register: an invalid e-mail is PT422');
select is(
  (select r ->> 'created' || ' ' || (r -> 'data' ->> 'already_checked_in')
     from api.platform_checkin(current_setting('tests.event_node')::uuid, current_setting('tests.attendee')) r),
  'true false', 'platform_checkin: checks the attendee in');
select is(
  (select r ->> 'created' || ' ' || (r -> 'data' ->> 'already_checked_in')
     from api.platform_checkin(current_setting('tests.event_node')::uuid, upper(current_setting('tests.attendee'))) r),
  'false true', 'platform_checkin: again, the current check-in');
select throws_ok(
  format('select api.platform_checkin(%L, %L)', current_setting('tests.event_node'), 'nobody-' || current_setting('tests.tag') || '@example.test'),
  'PT404', 'user not found', 'platform_checkin: an unknown e-mail is PT404');
select tests.authenticate_as('member');
select throws_ok(
  format('select api.platform_checkin(%L, %L)', current_setting('tests.event_node'), current_setting('tests.attendee')),
  'PT403', 'not authorized to manage this community', 'platform_checkin: only for a manager of the event''s community');
reset role;
select is(
  (select u.password_hash is null from identity.users u where u.email = lower(current_setting('tests.attendee'))),
  true, 'a registered attendee has an account without a password');

-- Forms (anonymous) -----------------------------------------------------------

select tests.authenticate_as_anon();
select ok(api.form_submit('{"name": "Ada"}') > 0, 'form_submit: a JSON object is stored');
select throws_ok($$select api.form_submit('[1, 2]')$$, 'PT400', 'the form must be a JSON object', 'form_submit: an array is PT400');
select throws_ok($$select api.form_submit('{"a":')$$, 'PT400', 'the form must be a JSON object', 'form_submit: invalid JSON is PT400');
select throws_ok(
  format('select api.form_submit(%L)', jsonb_build_object('v', repeat('x', 65536))::text),
  'PT413', 'a form may be at most 64 KB', 'form_submit: more than 64 KB is PT413');

select * from finish();
rollback;

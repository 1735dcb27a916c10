-- Platform integration: who may act for a community (a manager, with an
-- access token, a personal API token, or a token scoped to that community;
-- private.platform_authorize claim by claim), creating events idempotently by
-- external id (and the unique constraint behind it), venue matching,
-- registering attendees and checking them in by e-mail, check-ins for a given
-- user, changing and cancelling events (by id or external id; what a repeated
-- create did not apply), and the anonymous forms endpoint with the operators'
-- list.
begin;
select plan(73);

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
  api.platform_attendee_register(current_setting('tests.event_node')::uuid, current_setting('tests.attendee'), null)
    #- '{data,user_id}' #- '{data,email}',
  '{"created": false, "data": {"user_created": true, "community_joined": true}}'::jsonb,
  'again: nothing new is registered; the answer is the first''s (the account this registration made)');
select set_config('tests.repeat_user',
  api.platform_attendee_register(current_setting('tests.event_node')::uuid, current_setting('tests.attendee'), null) -> 'data' ->> 'user_id', true);
select tests.clear_authentication();
reset role;
select is(
  current_setting('tests.repeat_user')::uuid,
  (select u.id from identity.users u where u.email = lower(current_setting('tests.attendee'))),
  'again: the repeat names the account the first made');
select is(
  (select (a.account_created, a.community_joined)::text from app.event_attendees a
     join identity.users u on u.id = a.user_id
    where u.email = lower(current_setting('tests.attendee'))),
  '(t,t)', 'the registration keeps what it did');
select tests.authenticate_as('organiser');
select is(
  api.platform_attendee_register(current_setting('tests.event_node')::uuid, tests.email('organiser'), null)
    -> 'data' -> 'user_id',
  'null'::jsonb, 'an account no registration made is never named');
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

-- private.platform_authorize, claim by claim ------------------------------------------------

reset role;
select tests.create_user('pa_manager');
select tests.create_user('pa_other');
select set_config('tests.pa_c', admin.create_community('Authorize', null, '{}', tests.email('pa_manager'))::text, true);
select set_config('tests.pa_second', admin.create_community('Authorize too', null, '{}', tests.email('pa_manager'))::text, true);
select set_config('tests.pa_token', gen_random_uuid()::text, true);
-- As the gateway sets the claims: the user, and for an API token its id and community scope.
create function pg_temp.authorize_as(who text, token_community text, with_token boolean, community uuid) returns text
  language plpgsql as $$
begin
  perform set_config('request.jwt.claims', (jsonb_build_object('role', 'authenticated', 'sub', tests.user_id(who))
    || case when with_token then jsonb_build_object('token_id', current_setting('tests.pa_token'), 'token_community_id', token_community) else '{}' end)::text, true);
  perform set_config('role', 'authenticated', true);
  return replace(split_part(tests.error_of(format('select private.platform_authorize(%L)', community)), ' ', 1), 'no', 'ok');
end $$;
select is(pg_temp.authorize_as(who, token_community, with_token, community), expected, description)
  from (values
    ('pa_manager', null, false, current_setting('tests.pa_c')::uuid, 'ok', 'a manager with an access token may act for the community'),
    ('pa_manager', null, true, current_setting('tests.pa_c')::uuid, 'ok', 'so may a manager''s personal API token'),
    ('pa_manager', current_setting('tests.pa_c'), true, current_setting('tests.pa_c')::uuid, 'ok', 'and a token scoped to that community'),
    ('pa_manager', current_setting('tests.pa_second'), true, current_setting('tests.pa_c')::uuid, 'PT403', 'not a token scoped to another one'),
    ('pa_other', null, false, current_setting('tests.pa_c')::uuid, 'PT403', 'nor someone who does not manage it'),
    ('pa_other', current_setting('tests.pa_c'), true, current_setting('tests.pa_c')::uuid, 'PT403', 'even with a token scoped to it'),
    ('pa_manager', null, false, gen_random_uuid(), 'PT403', 'an unknown community is PT403 too')) v(who, token_community, with_token, community, expected, description);
reset role;
select set_config('request.jwt.claims', '', true);
select tests.authenticate_as_anon();
select throws_ok(format('select api.platform_checkin(%L, %L)', gen_random_uuid(), 'a@b.c'), '42501', null, 'anonymous callers cannot check anyone in');
reset role;

-- private.platform_venue ------------------------------------------------------------------

create function pg_temp.venue(name text, address text, lat numeric default null, lng numeric default null) returns jsonb
  language sql as $$ select jsonb_build_object('node_id', v.node_id, 'location_id', v.location_id) from private.platform_venue(name, address, lat, lng) v $$;
select set_config('tests.hall', pg_temp.venue('Venue hall ' || current_setting('tests.tag'), ' 5 High St ', 10.123456, 20.654321)::text, true);
select is(jsonb_typeof(current_setting('tests.hall')::jsonb -> 'location_id'), 'number', 'platform_venue makes a venue with a location id');
select is(pg_temp.venue('VENUE HALL ' || current_setting('tests.tag'), '5 high st'), current_setting('tests.hall')::jsonb,
  'the same name and address, in another case and spacing, is the same venue');
select is(pg_temp.venue('Else ' || current_setting('tests.tag'), 'x', 10.1234565, 20.6543215), current_setting('tests.hall')::jsonb,
  'so are the same coordinates (to 1e-6) under another name');
select isnt(pg_temp.venue('Else ' || current_setting('tests.tag'), 'x', 10.12348, 20.654321) -> 'node_id', current_setting('tests.hall')::jsonb -> 'node_id',
  'coordinates further apart are another venue');
select set_config('tests.bare', pg_temp.venue('Bare ' || current_setting('tests.tag'), null)::text, true);
select is(pg_temp.venue('bare ' || current_setting('tests.tag'), ''), current_setting('tests.bare')::jsonb, 'a missing address matches a missing address');
select isnt(pg_temp.venue('Bare ' || current_setting('tests.tag'), 'Somewhere') -> 'node_id', current_setting('tests.bare')::jsonb -> 'node_id',
  'and only that');
select throws_ok(format('select private.platform_venue(%L, null, 1, null)', 'x ' || current_setting('tests.tag')), 'PT422', null,
  'a latitude without a longitude is PT422');
select throws_ok($$select private.platform_venue('  ', null, null, null)$$, 'PT422', null, 'a blank name is PT422');

-- The unique external id holds even without the function -------------------------------------

create function pg_temp.insert_external(with_id boolean) returns void language sql as $$
  with n as (insert into app.nodes (kind) values ('event') returning id)
  insert into app.events (node_id, community_id, title, starts_at, external_platform, external_id)
  select n.id, current_setting('tests.pa_c')::uuid, 'x', now(), 'platform_a', case when with_id then 'dup-' || current_setting('tests.pa_c') end from n
$$;
select pg_temp.insert_external(true);
select throws_ok($$select pg_temp.insert_external(true)$$, '23505', null, 'a second event with the same platform and external id is a unique violation');
select throws_ok($$select pg_temp.insert_external(false)$$, '23514', null, 'a platform without an external id is a check violation');

-- Check-ins for a given user ----------------------------------------------------------------------

select set_config('tests.ci_event', admin.create_event(current_setting('tests.pa_c')::uuid, 'ci', now() + interval '1 hour')::text, true);
create temporary table first_ci as select * from private.check_in_user(tests.user_id('pa_other'), current_setting('tests.ci_event')::uuid, null, null, null, null);
select is((select created from first_ci), true, 'check_in_user checks the user in');
select is(
  (select to_jsonb(c) from private.check_in_user(tests.user_id('pa_other'), current_setting('tests.ci_event')::uuid, null, null, null, null) c),
  (select jsonb_build_object('created', false, 'checkin', checkin) from first_ci), 'again: the same check-in, not created (idempotent)');
select tests.authenticate_as('pa_manager');
select throws_ok(
  format('select * from private.check_in_user(%L, %L, null, null, null, %L)', tests.user_id('pa_other'), current_setting('tests.ci_event'), 'public'),
  '42501', null, 'a request role cannot check someone else in');
select is((select created from private.check_in(current_setting('tests.ci_event')::uuid, null, null, null, null)), true,
  'but checks itself in');
reset role;

-- Changing and cancelling events --------------------------------------------------------------------

select tests.authenticate_as('organiser');
select set_config('tests.pe', (pg_temp.create_event('pe-' || current_setting('tests.tag')) ->> 'event_id'), true);
select is(
  (select r -> 'not_applied' from api.platform_event_create(current_setting('tests.community')::uuid, 'platform_a', 'pe-' || current_setting('tests.tag'),
     'Relaunch', 'Doors at six', now() + interval '3 days', null, null, null, null, null, null, null, 'Europe/Paris') r),
  '["title", "date", "timezone"]'::jsonb, 'a repeated create changes nothing and names the given values it did not apply');
select is((select title from app.events where id = current_setting('tests.pe')::uuid), 'Launch', '... the event is as it was');
select is(
  (select r ->> 'title' || ' ' || (r ->> 'sequence') || ' ' || (r ->> 'timezone')
     from api.platform_event_update(current_setting('tests.pe')::uuid, null, null, '{"title": " Relaunch ", "timezone": "europe/paris"}') r),
  'Relaunch 1 Europe/Paris', 'platform_event_update: the keys given, trimmed and spelled as stored; SEQUENCE one higher');
select is(
  (select r ->> 'sequence' from api.platform_event_update(null, 'platform_a', 'pe-' || current_setting('tests.tag'), '{"title": "Relaunch"}') r),
  '1', 'by external id; nothing changed: SEQUENCE as it was');
select is(tests.error_of(format('select api.platform_event_update(%L, null, null, %L)', current_setting('tests.pe'), '{"end_time": "2000-01-01T00:00:00Z"}')),
  'PT422 validation_error', 'an end before the date is PT422');
select is(tests.error_of(format('select api.platform_event_update(%L, null, null, %L)', current_setting('tests.pe'), '{"sequence": 99}')),
  'PT422 validation_error', 'an unknown key is PT422 (sequence cannot be written)');
select is(tests.error_of(format('select api.platform_event_update(%L, null, null, %L)', current_setting('tests.pe'), '{"date": "tomorrow"}')),
  'PT422 validation_error', 'a date that is not an instant with its offset is PT422');
select is(tests.error_of(format('select api.platform_event_update(%L, null, null, %L)', gen_random_uuid(), '{}')),
  'PT404 event_not_found', 'an unknown event is PT404');
reset role;
select tests.authenticate_with_api_token(current_setting('tests.scoped_elsewhere'), '/api/v1/platform/events');
select is(tests.error_of(format('select api.platform_event_update(%L, null, null, %L)', current_setting('tests.pe'), '{"title": "hijack"}')),
  'PT403 community_scope_violation', 'a token of another community may not change it');
select is(tests.error_of(format('select api.platform_event_delete(%L)', current_setting('tests.pe'))),
  'PT403 community_scope_violation', '... nor cancel it');
select tests.authenticate_with_api_token(current_setting('tests.scoped'), '/api/v1/platform/events');
select lives_ok(format('select api.platform_event_delete(null, %L, %L)', 'platform_a', 'pe-' || current_setting('tests.tag')),
  'a token of the community cancels it, by external id');
reset role;
select is((select sequence || ' ' || timezone from app.event_tombstones where event_id = current_setting('tests.pe')::uuid), '2 Europe/Paris',
  'a cancelled event leaves its tombstone (SEQUENCE one higher, its zone) for the calendars and the page');

-- Forms --------------------------------------------------------------------------------------------

select tests.authenticate_as_anon();
select set_config('tests.form1', api.form_submit('{"n":1}')::text, true);
select set_config('tests.form2', api.form_submit('{"n":2}')::text, true);
select throws_ok($$select api.form_submit('"x"')$$, 'PT400', null, 'form_submit: a string is PT400');
select throws_ok($$select * from admin.forms_list()$$, '42501', null, 'anonymous callers cannot list the forms');
reset role;
select is(
  (select array_agg(id order by ordinality) from admin.forms_list(10000, null) with ordinality where id in (current_setting('tests.form1')::bigint, current_setting('tests.form2')::bigint)),
  array[current_setting('tests.form2')::bigint, current_setting('tests.form1')::bigint], 'forms_list: newest first');
select is(
  (select jsonb_build_object('payload', payload, 'size_bytes', size_bytes) from admin.forms_list(10000, null) where id = current_setting('tests.form2')::bigint),
  '{"payload": {"n": 2}, "size_bytes": 7}'::jsonb, 'each with its payload and its size in bytes');
select is((select count(*)::int from admin.forms_list(10, now() + interval '1 hour')), 0, 'none since a moment to come');

select * from finish();
rollback;

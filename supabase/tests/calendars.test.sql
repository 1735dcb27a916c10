-- Calendars: the SEQUENCE an update raises (and only a real change), the
-- tombstone a delete leaves (listed as cancelled, one sequence higher, pruned
-- once no calendar lists it), the entry a calendar shows (UID at the
-- PUBLIC_URL host, the effective end, the public URL), the validators and the
-- 304 decision, the community feed's window, drafts (a draft community's
-- events are public nowhere: calendar, event page, deep links, check-in form,
-- venue link), the personal feed's token (hashed, rotated, revoked, ended by a
-- password set through a link, not by the re-hash of a sign-in), and what the
-- request roles can reach.
begin;
select plan(60);

-- Hosts ------------------------------------------------------------------------

select is(private.url_host('https://API.Example.com:8443/base/'), 'api.example.com', 'url_host: lower case, without port or path');
select is(private.url_host('http://localhost:3000'), 'localhost', 'url_host: localhost');
select is(private.url_host('http://user:pw@[::1]:3000/'), '[::1]', 'url_host: an IPv6 address in brackets, without user info');

-- SEQUENCE ---------------------------------------------------------------------

select set_config('tests.venue', admin.create_venue('Calendar Hall', '1 Main St')::text, true);
select set_config('tests.community', admin.create_community('Calendar club', 'Events of the club')::text, true);
select set_config('tests.event', admin.create_event(current_setting('tests.community')::uuid, 'Cal event',
  '2030-05-01T18:00:00Z', null, current_setting('tests.venue')::uuid, 'About it')::text, true);
select set_config('tests.shortlink', (select shortlink from app.events where id = current_setting('tests.event')::uuid), true);

create function pg_temp.seq() returns integer language sql as $$
  select sequence from app.events where id = current_setting('tests.event')::uuid
$$;

select is(pg_temp.seq(), 0, 'a new event has sequence 0');
update app.events set title = 'Cal event!' where id = current_setting('tests.event')::uuid;
select is(pg_temp.seq(), 1, 'an update raises it by one');
update app.events set ends_at = starts_at + interval '3 hours' where id = current_setting('tests.event')::uuid;
select is(pg_temp.seq(), 2, 'every update raises it');
update app.events set title = title where id = current_setting('tests.event')::uuid;
select is(pg_temp.seq(), 2, 'an update that changes nothing leaves it');
update app.events set sequence = 99 where id = current_setting('tests.event')::uuid;
select is(pg_temp.seq(), 2, 'sequence itself cannot be written');
update app.events set ends_at = null where id = current_setting('tests.event')::uuid;

-- The entry (read as the owner; what anon may call is checked below) ----------

create function pg_temp.entry() returns jsonb language sql as $$
  select calendar -> 'events' -> 0
    from api.calendar_event(current_setting('tests.shortlink'), 'https://Cal.Example.org/', 'f', null, null)
$$;
select is(pg_temp.entry() ->> 'uid', current_setting('tests.event') || '@cal.example.org', 'UID: the event id at the PUBLIC_URL host');
select is(pg_temp.entry() ->> 'start', '2030-05-01T18:00:00.000Z', 'start in UTC');
select is(pg_temp.entry() ->> 'end', '2030-05-01T20:00:00.000Z', 'no end_time: the effective end, 2 hours after the date');
select is(pg_temp.entry() ->> 'url', 'https://Cal.Example.org/e/' || current_setting('tests.shortlink'), 'URL: the public page');
select is(pg_temp.entry() ->> 'location', 'Calendar Hall, 1 Main St', 'LOCATION: venue name and address');
select is((pg_temp.entry() ->> 'sequence')::int, 3, 'SEQUENCE: as stored');
select is(pg_temp.entry() ->> 'status', 'CONFIRMED', 'STATUS: confirmed');
select is(
  (select calendar ->> 'name' from api.calendar_event(current_setting('tests.shortlink'), 'https://cal.example.org', 'f', null, null)),
  'Cal event!', 'the calendar of one event is named after it');

-- Validators and 304 ---------------------------------------------------------

select set_config('tests.etag', (select etag from api.calendar_event(current_setting('tests.shortlink'), 'https://cal.example.org', 'f', null, null)), true);
select matches(current_setting('tests.etag'), '^"[0-9a-f]{32}"$', 'an ETag is a quoted md5');
select is((select calendar is null from api.calendar_event(current_setting('tests.shortlink'), 'https://cal.example.org', 'f', array[current_setting('tests.etag')], null)),
  true, 'If-None-Match with the ETag: no calendar (304)');
select is((select calendar is null from api.calendar_event(current_setting('tests.shortlink'), 'https://cal.example.org', 'f', array['*'], null)),
  true, 'If-None-Match * : 304');
select is((select calendar is null from api.calendar_event(current_setting('tests.shortlink'), 'https://cal.example.org', 'f', array['"other"'], now() + interval '1 day')),
  false, 'another ETag: the calendar, whatever If-Modified-Since says');
select is((select calendar is null from api.calendar_event(current_setting('tests.shortlink'), 'https://cal.example.org', 'g', array[current_setting('tests.etag')], null)),
  false, 'another renderer format: another ETag');
select is((select calendar is null from api.calendar_event(current_setting('tests.shortlink'), 'https://other.example.org', 'f', array[current_setting('tests.etag')], null)),
  false, 'another PUBLIC_URL: another ETag');
select is(
  (select calendar is null from api.calendar_event(current_setting('tests.shortlink'), 'https://cal.example.org', 'f', null,
     (select last_modified from api.calendar_event(current_setting('tests.shortlink'), 'https://cal.example.org', 'f', null, null)))),
  true, 'If-Modified-Since at Last-Modified: 304');
select is(private.calendar_not_modified('"a"', '2030-01-01T00:00:00.9Z', null, '2030-01-01T00:00:00Z'), true,
  'If-Modified-Since compares whole seconds');
select is(private.calendar_not_modified('"a"', '2030-01-01T00:00:01Z', null, '2030-01-01T00:00:00Z'), false,
  'a later change is modified');

-- Deleting: the tombstone ------------------------------------------------------

delete from app.events where id = current_setting('tests.event')::uuid;
select is(
  (select (sequence, title, location) from app.event_tombstones where event_id = current_setting('tests.event')::uuid)::text,
  '(4,"Cal event!","Calendar Hall, 1 Main St")', 'a delete leaves a tombstone, one sequence higher, its location as shown');
select is(pg_temp.entry() ->> 'status', 'CANCELLED', 'the deleted event''s file: STATUS CANCELLED');
select is(pg_temp.entry() ->> 'uid', current_setting('tests.event') || '@cal.example.org', '... with the same UID');
select isnt(
  (select etag from api.calendar_event(current_setting('tests.shortlink'), 'https://cal.example.org', 'f', null, null)),
  current_setting('tests.etag'), '... and another ETag');

-- The community feed -----------------------------------------------------------

select admin.create_event(current_setting('tests.community')::uuid, 'Long ago', now() - interval '40 days');
select admin.create_event(current_setting('tests.community')::uuid, 'Last week', now() - interval '7 days');
select admin.create_event(current_setting('tests.community')::uuid, 'Next week', now() + interval '7 days');
select tests.authenticate_as_anon();
select is(
  (select array_agg(e ->> 'summary' || ':' || (e ->> 'status') order by e ->> 'start')
     from api.calendar_community(current_setting('tests.community')::uuid, 'https://cal.example.org', 'f', null, null) a,
          jsonb_array_elements(a.calendar -> 'events') e),
  array['Last week:CONFIRMED', 'Next week:CONFIRMED', 'Cal event!:CANCELLED'],
  'the community feed: events from 30 days ago on, and the deleted one as cancelled, soonest first');
select is(
  (select calendar ->> 'name' from api.calendar_community(current_setting('tests.community')::uuid, 'https://cal.example.org', 'f', null, null)),
  'Calendar club', 'the feed is named after the community');
select tests.clear_authentication();
reset role;
select admin.set_community_flags(current_setting('tests.community')::uuid, false, true);
select tests.authenticate_as_anon();
select throws_ok(
  $$select * from api.calendar_community(current_setting('tests.community')::uuid, 'https://cal.example.org', 'f', null, null)$$,
  'PT404', 'community not found', 'a draft community has no public calendar');
select throws_ok(
  $$select * from api.calendar_event('ZZZZZZZZ', 'https://cal.example.org', 'f', null, null)$$,
  'PT404', 'event not found', 'an unknown shortlink is PT404');

-- A draft community's events are public nowhere ------------------------------------

select tests.clear_authentication();
reset role;
select set_config('tests.draft', admin.create_community('Draft club')::text, true);
select admin.set_community_flags(current_setting('tests.draft')::uuid, false, true);
select set_config('tests.hidden', admin.create_event(current_setting('tests.draft')::uuid, 'Hidden', now() - interval '10 minutes',
  null, current_setting('tests.venue')::uuid)::text, true);
select set_config('tests.hidden_link', (select shortlink from app.events where id = current_setting('tests.hidden')::uuid), true);
select set_config('tests.hidden_node', (select node_id::text from app.events where id = current_setting('tests.hidden')::uuid), true);
select tests.authenticate_as_anon();
select throws_ok(
  $$select * from api.calendar_event(current_setting('tests.hidden_link'), 'https://cal.example.org', 'f', null, null)$$,
  'PT404', 'event not found', 'a draft community''s event: no .ics');
select throws_ok($$select api.event_page(current_setting('tests.hidden_link'), 'https://cal.example.org')$$,
  'PT404', 'event not found', 'no public event page');
select throws_ok($$select api.event_public(current_setting('tests.hidden_link'), 'https://cal.example.org')$$,
  'PT404', 'event not found', 'no public Event by shortlink');
select throws_ok($$select api.event_public_by_node(current_setting('tests.hidden_node')::uuid, 'https://cal.example.org')$$,
  'PT404', 'event not found', 'no web check-in form');
select throws_ok($$select api.link_event_shortlink(current_setting('tests.hidden_link'), null, 'app')$$,
  'PT404', 'event not found', 'no /l/event link');
select throws_ok($$select api.link_event_checkin(current_setting('tests.hidden_node')::uuid, null, 'app')$$,
  'PT404', 'event not found', 'no check-in link');
select throws_ok($$select * from api.link_venue_checkin(current_setting('tests.venue')::uuid)$$,
  'PT404', 'no event is taking place at this venue now', 'the venue link leaves it out');
select tests.clear_authentication();
reset role;
select admin.set_community_flags(current_setting('tests.draft')::uuid, false, false);
select tests.authenticate_as_anon();
select is(api.event_page(current_setting('tests.hidden_link'), 'https://cal.example.org') ->> 'title', 'Hidden',
  'published (no longer a draft): the event page shows it');
select is((select location from api.link_venue_checkin(current_setting('tests.venue')::uuid)),
  '/l/checkin/event/' || current_setting('tests.hidden_node'), 'and the venue link leads to it');

-- The personal feed ------------------------------------------------------------

select tests.clear_authentication();
reset role;
select tests.create_user('subscriber');
select admin.set_community_flags(current_setting('tests.community')::uuid, false, false);
insert into app.community_members (community_id, member_node_id) values (current_setting('tests.community')::uuid, tests.node_id('subscriber'));
select tests.authenticate_as('subscriber');
select set_config('tests.feed1', regexp_replace(api.calendar_feed_create('https://cal.example.org/') ->> 'url', '^https://cal\.example\.org/cal/(.*)\.ics$', '\1'), true);
select matches(current_setting('tests.feed1'), '^[A-Za-z0-9_-]{43}$', 'the feed URL holds a 43-character token');
select tests.authenticate_as_anon();
select is(
  (select array_agg(e ->> 'summary' || ':' || (e ->> 'status') order by e ->> 'start')
     from api.calendar_personal(current_setting('tests.feed1'), 'https://cal.example.org', 'f', null, null) a,
          jsonb_array_elements(a.calendar -> 'events') e),
  array['Next week:CONFIRMED', 'Cal event!:CANCELLED'],
  'the personal feed: the upcoming events of the owner''s communities (the deleted one cancelled), not the past ones');
select tests.authenticate_as('subscriber');
select set_config('tests.feed2', regexp_replace(api.calendar_feed_create('https://cal.example.org') ->> 'url', '^.*/cal/(.*)\.ics$', '\1'), true);
select tests.authenticate_as_anon();
select throws_ok(
  $$select * from api.calendar_personal(current_setting('tests.feed1'), 'https://cal.example.org', 'f', null, null)$$,
  'PT404', 'calendar not found', 'a new feed URL ends the previous one');
select lives_ok(
  $$select * from api.calendar_personal(current_setting('tests.feed2'), 'https://cal.example.org', 'f', null, null)$$,
  'the new one works');
select tests.clear_authentication();
reset role;
select is(
  (select array_agg(token_hash) from app.calendar_feeds where user_id = tests.user_id('subscriber')),
  array[extensions.digest(current_setting('tests.feed2'), 'sha256')], 'one feed per user, stored as the SHA-256 of its token');
-- A sign-in after BCRYPT_COST was raised re-hashes the password, as the processes do it:
-- the same password, a new hash; the feed stays.
select set_config('tests.attempt', (select attempt from private.password_attempt_start(
  'login', tests.email('subscriber'), '192.0.2.1', 11, 10, 100, 100, 900)), true);
select private.password_attempt_finish('login', current_setting('tests.attempt'), true,
  extensions.crypt(encode(extensions.digest('password-subscriber', 'sha256'), 'base64'), extensions.gen_salt('bf', 11)));
select matches((select password_hash from identity.users where id = tests.user_id('subscriber')), '^\$2a\$11\$',
  'a sign-in re-hashes the password at the higher cost');
select tests.authenticate_as_anon();
select lives_ok(
  $$select * from api.calendar_personal(current_setting('tests.feed2'), 'https://cal.example.org', 'f', null, null)$$,
  'a re-hash is no password change: the feed URL still works');
select tests.clear_authentication();
reset role;
insert into identity.password_tokens (token_hash, user_id, purpose, expires_at)
  values (identity.token_hash('link-for-subscriber'), tests.user_id('subscriber'), 'recover', now() + interval '1 hour');
select set_config('tests.new_hash', extensions.crypt('a new password', extensions.gen_salt('bf', 10)), true);
select tests.authenticate_as_anon();
select api.auth_set_password('link-for-subscriber', current_setting('tests.new_hash'));
select throws_ok(
  $$select * from api.calendar_personal(current_setting('tests.feed2'), 'https://cal.example.org', 'f', null, null)$$,
  'PT404', 'calendar not found', 'a password set through a link ends the feed URL');
select tests.authenticate_as('subscriber');
select set_config('tests.feed3', regexp_replace(api.calendar_feed_create('https://cal.example.org') ->> 'url', '^.*/cal/(.*)\.ics$', '\1'), true);
select lives_ok($$select api.calendar_feed_revoke()$$, 'revoking');
select tests.authenticate_as_anon();
select throws_ok(
  $$select * from api.calendar_personal(current_setting('tests.feed3'), 'https://cal.example.org', 'f', null, null)$$,
  'PT404', 'calendar not found', 'a revoked feed URL is PT404');

-- What request roles reach -----------------------------------------------------

select lives_ok(
  $$select * from api.calendar_event(current_setting('tests.shortlink'), 'https://cal.example.org', 'f', null, null)$$,
  'anon reads an event''s calendar');
select lives_ok(
  $$select * from api.calendar_community(current_setting('tests.community')::uuid, 'https://cal.example.org', 'f', null, null)$$,
  'anon reads a community''s calendar');
select throws_ok($$select * from app.calendar_feeds$$, '42501', null, 'anon cannot read the feeds table');
select throws_ok($$select api.calendar_feed_create('https://cal.example.org')$$, '42501', null, 'anon cannot create a feed');
select tests.authenticate_as('subscriber');
select throws_ok($$select * from app.event_tombstones$$, '42501', null, 'a signed-in user cannot read tombstones');

-- Pruning ------------------------------------------------------------------------

select tests.clear_authentication();
reset role;
insert into app.event_tombstones (event_id, community_id, shortlink, title, starts_at, sequence, created_at, timezone)
values (gen_random_uuid(), current_setting('tests.community')::uuid, 'OLDOLDOL', 'Very old', now() - interval '31 days 3 hours', 1, now() - interval '60 days', 'UTC');
select cmp_ok(private.event_tombstones_prune(), '>=', 1, 'pruning removes tombstones no calendar lists');
select is((select count(*)::int from app.event_tombstones where shortlink = 'OLDOLDOL'), 0, '... the old one is gone');
select is((select count(*)::int from app.event_tombstones where event_id = current_setting('tests.event')::uuid), 1, '... a listed one stays');

select * from finish();
rollback;

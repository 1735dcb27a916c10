-- The doors that set a password (register, signup, set-password) check what
-- needs no password, and count the request per client address, before the
-- process hashes it (private.password_set_start): a taken or invalid e-mail
-- and a used or unknown link are answered as the door's own function raises
-- them, past the limit the answer is throttled, and only the processes' own
-- role may run it.
begin;
select plan(18);

select tests.create_user('door_taken');
create function pg_temp.start(door text, ip text, max integer, email text default null, link text default null)
  returns table (status text, retry_after integer, error_state text, error_hint text, error_message text)
  language sql as $$ select * from private.password_set_start(door, ip, max, 900, email, link) $$;
create function pg_temp.counted(ip text) returns bigint
  language sql as $$ select count(*) from private.auth_failures where scope = 'password_set' and key = ip $$;

-- Register and signup -----------------------------------------------------------

select results_eq($$select status, error_state, error_hint, error_message from pg_temp.start('register', '192.0.2.50', 5, upper(tests.email('door_taken')))$$,
  $$values ('refused', 'PT409', 'email_taken', 'an account with this email already exists')$$,
  'a taken e-mail (any case) is refused as api.auth_register refuses it: no hash is made for it');
select results_eq($$select status, error_state, error_hint from pg_temp.start('register', '192.0.2.50', 5, 'not-an-email')$$,
  $$values ('refused', 'PT400', 'invalid_email')$$,
  'an invalid e-mail is refused');
select results_eq($$select status, error_state from pg_temp.start('register', '192.0.2.50', 5, 'door-new@example.test')$$,
  $$values ('hash', null::text)$$,
  'a free e-mail: hash it');
select is(pg_temp.counted('192.0.2.50'), 3::bigint, 'every request is counted against its address, refused ones too');
select results_eq($$select status from pg_temp.start('register', '192.0.2.50', 3, 'door-other@example.test')$$,
  $$values ('throttled')$$,
  'past the limit: throttled, before any check');
select ok((select retry_after from pg_temp.start('register', '192.0.2.50', 3, 'door-other@example.test')) between 1 and 900,
  'with the seconds to wait');
select is(pg_temp.counted('192.0.2.50'), 3::bigint, 'a throttled request is not counted');
select results_eq($$select status from pg_temp.start('register', '192.0.2.51', 3, 'door-other@example.test')$$,
  $$values ('hash')$$,
  'another address is not throttled');
select results_eq($$select count(*) filter (where status = 'hash') from generate_series(1, 4), pg_temp.start('register', null, 1, 'door-x@example.test')$$,
  $$values (4::bigint)$$,
  'a request without an address is not counted (as the sign-in throttling)');

-- Set-password ------------------------------------------------------------------

select private.queue_password_email(tests.user_id('door_taken'), 'recover', 'https://app.example.test');
select set_config('tests.link', substring((select link from app.email_outbox where user_id = tests.user_id('door_taken') order by created_at desc limit 1)
                                          from 'token=(.*)$'), true);
select results_eq($$select status from pg_temp.start('set_password', '192.0.2.52', 5, null, current_setting('tests.link'))$$,
  $$values ('hash')$$,
  'a usable link: hash the new password');
select results_eq($$select status, error_state, error_hint, error_message from pg_temp.start('set_password', '192.0.2.52', 5, null, 'no-such-link-token-at-all')$$,
  $$values ('refused', 'PT400', 'invalid_link', 'this link is not valid or has expired')$$,
  'an unknown link is refused as api.auth_set_password refuses it');
select lives_ok(format($$select api.auth_set_password(%L, extensions.crypt('x', extensions.gen_salt('bf', 10)))$$, current_setting('tests.link')),
  'the link sets the password');
select results_eq($$select status, error_hint from pg_temp.start('set_password', '192.0.2.52', 5, null, current_setting('tests.link'))$$,
  $$values ('refused', 'invalid_link')$$,
  'a used link is refused before any hash');
select throws_ok(format($$select api.auth_set_password(%L, extensions.crypt('x', extensions.gen_salt('bf', 10)))$$, current_setting('tests.link')),
  'PT400', 'this link is not valid or has expired', 'and api.auth_set_password still refuses it');
select is(pg_temp.counted('192.0.2.52'), 3::bigint, 'set-password requests are counted with the registrations of the address');

-- Who may run it --------------------------------------------------------------------

select throws_ok($$select * from private.password_set_start('login', '192.0.2.53', 5, 900)$$,
  'PT400', 'unknown door login', 'an unknown door is PT400');
select tests.authenticate_as_anon();
select throws_ok($$select * from private.password_set_start('register', '192.0.2.54', 5, 900, 'x@example.test')$$,
  '42501', null, 'a request role may not run it (it counts requests of any address)');
reset role;

-- The counters write no WAL per sign-in (a crash or failover forgets them).
select results_eq(
  $$select c.relname::text collate "C" from pg_class c where c.oid in ('private.auth_failures'::regclass, 'private.password_attempts'::regclass) and c.relpersistence = 'u' order by 1$$,
  $$values ('auth_failures'::text collate "C"), ('password_attempts'::text collate "C")$$,
  'the sign-in counters are unlogged tables');

select * from finish();
rollback;

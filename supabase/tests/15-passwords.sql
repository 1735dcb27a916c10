-- Passwords are compared by the processes; the rules around it are SQL
-- (issue 25): the throttling checked before the comparison and counted
-- after it, attempts in flight counted, single-use attempts bound to their
-- door and to the hash handed out, re-hashes stored only when they are
-- bcrypt hashes of a higher cost, and the hashes account creation and
-- set-password accept. The comparison itself is done here with pgcrypto, as
-- the process would do it.
begin;
select plan(16);

select tests.create_user('pia');
select set_config('tests.pia_client', tests.email('pia') || ' 192.0.2.20', true);

create function pg_temp.start(email text, ip text, per_email_client integer default 10, door text default 'login', cost integer default 10)
  returns table (status text, retry_after integer, attempt text, password_hash text, rehash boolean)
  language sql as $$
    select * from private.password_attempt_start(door, email, ip, cost, per_email_client, 100, 100, 900)
  $$;
create function pg_temp.failures(key text) returns bigint
  language sql as $$ select count(*) from private.auth_failures where scope = 'email_client' and auth_failures.key = failures.key $$;
create function pg_temp.matches(password text, hash text) returns boolean
  language sql as $$ select extensions.crypt(encode(extensions.digest(password, 'sha256'), 'base64'), hash) = hash $$;

-- The hashes the processes hand in.
select ok(private.password_hash_valid(extensions.crypt('x', extensions.gen_salt('bf', 10))), 'password_hash_valid: a pgcrypto hash of cost 10');
select ok(not private.password_hash_valid(extensions.crypt('x', extensions.gen_salt('bf', 6))), 'password_hash_valid: cost 6 is too cheap to store');
select ok(not private.password_hash_valid('correct horse') and not private.password_hash_valid(null), 'password_hash_valid: a clear password or nothing is not a hash');
select is(private.password_hash_cost(private.password_dummy_hash(12)), 12, 'the dummy hash has the configured cost');
select ok(not pg_temp.matches('', private.password_dummy_hash(10)) and not pg_temp.matches('password-pia', private.password_dummy_hash(10)),
  'no password matches the dummy hash');

-- Checked before, counted after.
create temporary table a1 as select * from pg_temp.start(tests.email('pia'), '192.0.2.20', 2);
select is(pg_temp.failures(current_setting('tests.pia_client')), 0::bigint, 'an attempt handed out is not yet a failure');
select ok(pg_temp.matches('password-pia', (select password_hash from a1)), 'the hash handed out is the account''s (pgcrypto compares it)');
create temporary table a2 as select * from pg_temp.start(tests.email('pia'), '192.0.2.20', 2);
select results_eq($$select status, attempt, password_hash from pg_temp.start(tests.email('pia'), '192.0.2.20', 2)$$,
  $$values ('throttled', null::text, null::text)$$,
  'two attempts in flight reach a limit of 2: the third is throttled and gets no hash');
select is((select status from private.auth_login_finish((select attempt from a1), false, null)), 'invalid', 'a wrong password is invalid');
select is(pg_temp.failures(current_setting('tests.pia_client')), 1::bigint, '...and counted once its outcome is recorded');

-- Bound to the door and to the hash.
select is((select status from private.oauth_request_approve('no such request', (select attempt from a2), true, null)), 'request_expired',
  'a login attempt finishes nothing at the consent form');
update identity.users set password_hash = identity.hash_password('another password') where id = tests.user_id('pia');
select is((select status from private.auth_login_finish((select attempt from a2), true, null)), 'invalid',
  'a password set between the halves makes the attempt fail');

-- Re-hashing.
update identity.users set password_hash = extensions.crypt(encode(extensions.digest('password-pia', 'sha256'), 'base64'), extensions.gen_salt('bf', 6))
 where id = tests.user_id('pia');
create temporary table a3 as select * from pg_temp.start(tests.email('pia'), '192.0.2.21');
select ok((select rehash from a3), 'a hash below the configured cost is to be re-hashed');
select set_config('tests.new_hash', extensions.crypt(encode(extensions.digest('password-pia', 'sha256'), 'base64'), extensions.gen_salt('bf', 10)), true);
select is((select status from private.auth_login_finish((select attempt from a3), true, current_setting('tests.new_hash'))), 'ok', 'the sign-in succeeds');
select is((select password_hash from identity.users where id = tests.user_id('pia')), current_setting('tests.new_hash'), '...and stores the re-hash');
select is((select status from private.auth_login_finish((select attempt from pg_temp.start(tests.email('pia'), '192.0.2.21')), true, 'not a hash')), 'ok',
  'a malformed re-hash does not stop the sign-in');

select * from finish();
rollback;

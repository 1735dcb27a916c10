-- Accounts and signing in (sql/areas/auth.sql). Passwords are compared by the
-- processes; the rules around it are SQL: accounts made in SQL (bcrypt, taken
-- e-mails, weak passwords, bad addresses), the throttling checked before the
-- comparison and counted after it, attempts in flight counted, single-use
-- attempts bound to their door and to the hash handed out and expiring after
-- 60 s, re-hashes stored only when they are bcrypt hashes of a higher cost,
-- the hashes account creation and set-password accept, what request roles
-- cannot reach, and refresh tokens (hashed, rotated, a reuse ending the
-- session). The comparison itself is done here with pgcrypto, as the process
-- would do it.
begin;
select plan(48);

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

-- Accounts made in SQL (admin.create_user, as psql would) -----------------------------

select set_config('tests.acc_email', 'acc-' || replace(gen_random_uuid()::text, '-', '') || '@example.test', true);
select set_config('tests.acc', admin.create_user(current_setting('tests.acc_email'), 'password123')::text, true);
select is(
  (select jsonb_build_object('email', u.email, 'name', p.name, 'subscription_type', p.subscription_type, 'kind', n.kind)
     from identity.users u join app.profiles p on p.id = u.id join app.nodes n on n.id = p.node_id where u.id = current_setting('tests.acc')::uuid),
  jsonb_build_object('email', current_setting('tests.acc_email'), 'name', split_part(current_setting('tests.acc_email'), '@', 1),
                     'subscription_type', 'basic', 'kind', 'user'),
  'create_account makes the user, their node and profile (named after the e-mail, on the basic plan)');
select matches((select password_hash from identity.users where id = current_setting('tests.acc')::uuid), '^\$2[abxy]\$10\$',
  'with a bcrypt hash of cost 10');
select ok((select position('password123' in password_hash) = 0 from identity.users where id = current_setting('tests.acc')::uuid),
  'which does not hold the password');
select is(tests.error_of(format('select admin.create_user(%L, %L)', upper(current_setting('tests.acc_email')), 'password123')), 'PT409 email_taken',
  'an e-mail taken (in any case) is PT409 email_taken');
select is(split_part(tests.error_of(format('select admin.create_user(%L, %L)', 'new-' || gen_random_uuid() || '@example.test', 'short')), ' ', 1), 'PT400',
  'a password shorter than 8 characters is PT400');
select is(split_part(tests.error_of($$select admin.create_user('nobody', 'password123')$$), ' ', 1), 'PT400', 'an address that is no e-mail is PT400');

-- Throttling is checked before (no hash handed out) and counted after -----------------------

select set_config('tests.th_email', 'th-' || replace(gen_random_uuid()::text, '-', '') || '@example.test', true);
select admin.create_user(current_setting('tests.th_email'), 'password123');
select set_config('tests.th_key', current_setting('tests.th_email') || ' 198.51.100.50', true);
create temporary table t1 as select * from pg_temp.start(current_setting('tests.th_email'), '198.51.100.50', 3);
select is(pg_temp.failures(current_setting('tests.th_key')), 0::bigint, 'an attempt handed out is not counted...');
select is((select status from private.auth_login_finish((select attempt from t1), false, null)), 'invalid', 'a wrong password');
select is(pg_temp.failures(current_setting('tests.th_key')), 1::bigint, '...it is counted when its outcome is recorded');
create temporary table ta as select * from pg_temp.start(current_setting('tests.th_email'), '198.51.100.50', 3);
create temporary table tb as select * from pg_temp.start(current_setting('tests.th_email'), '198.51.100.50', 3);
create temporary table tblocked as select * from pg_temp.start(current_setting('tests.th_email'), '198.51.100.50', 3);
select is(
  (select jsonb_build_object('status', status, 'attempt', attempt, 'password_hash', password_hash) from tblocked),
  '{"status": "throttled", "attempt": null, "password_hash": null}'::jsonb,
  'two attempts in flight and one failure reach the limit of 3: throttled, no hash');
select cmp_ok((select retry_after from tblocked), '>', 0, 'with the seconds to wait');
select is((select status from private.auth_login_finish((select attempt from ta), true, null)), 'ok', 'a success...');
select is(pg_temp.failures(current_setting('tests.th_key')), 0::bigint, '...clears this client''s failures');
select is((select status from pg_temp.start(current_setting('tests.th_email'), '198.51.100.50', 3)), 'check', 'so the next attempt is checked');
select status from private.auth_login_finish((select attempt from tb), false, null);

-- Request roles reach none of it -------------------------------------------------------------

select tests.authenticate_as_anon();
select throws_ok(
  format('select * from private.password_attempt_start(%L, %L, null, 10, 10, 100, 100, 900)', 'login', current_setting('tests.th_email')),
  '42501', null, 'anonymous callers cannot start an attempt (a hash never reaches a request role)');
select tests.authenticate_as('pia');
select throws_ok($$select * from private.auth_login_finish('x', true, null)$$, '42501', null, 'signed-in users cannot finish one');
select throws_ok($$select * from private.password_attempts$$, '42501', null, 'nor read the attempts');
reset role;

-- An attempt is single-use, belongs to its door, expires -------------------------------------

select set_config('tests.su_email', 'su-' || replace(gen_random_uuid()::text, '-', '') || '@example.test', true);
select set_config('tests.su', admin.create_user(current_setting('tests.su_email'), 'password123')::text, true);
create temporary table su as select * from pg_temp.start(current_setting('tests.su_email'), '198.51.100.51');
select is((select status from private.oauth_request_approve('no-such-request', (select attempt from su), true, null)), 'request_expired',
  'the consent form finishes nothing with a login attempt...');
select is(
  (select jsonb_build_object('status', status, 'user_id', user_id, 'refresh_token', jsonb_typeof(to_jsonb(refresh_token)), 'session_id', session_id is not null)
     from private.auth_login_finish((select attempt from su), true, null)),
  jsonb_build_object('status', 'ok', 'user_id', current_setting('tests.su')::uuid, 'refresh_token', 'string', 'session_id', true),
  '...and consumes none of it: the login succeeds, with a session');
select is((select status from private.auth_login_finish((select attempt from su), true, null)), 'expired', 'an attempt is used once');
select is((select status from private.auth_login_finish('never-handed-out', true, null)), 'expired', 'one never handed out is expired too');
select set_config('tests.pc_email', 'pc-' || replace(gen_random_uuid()::text, '-', '') || '@example.test', true);
select set_config('tests.pc', admin.create_user(current_setting('tests.pc_email'), 'password123')::text, true);
create temporary table pc as select * from pg_temp.start(current_setting('tests.pc_email'), '198.51.100.53');
update identity.users set password_hash = identity.hash_password('another password') where id = current_setting('tests.pc')::uuid;
select is((select status from private.auth_login_finish((select attempt from pc), true, null)), 'invalid',
  'a password set between the two halves makes the attempt fail...');
select is(pg_temp.failures(current_setting('tests.pc_email') || ' 198.51.100.53'), 1::bigint, '...and it is counted');
create temporary table old as select * from pg_temp.start(current_setting('tests.su_email'), '198.51.100.51');
update private.password_attempts set expires_at = now() - interval '1 second' where attempt_hash = identity.token_hash((select attempt from old));
select is((select status from private.auth_login_finish((select attempt from old), true, null)), 'expired', 'an attempt older than 60 s signs nobody in');

-- Refresh tokens ---------------------------------------------------------------------------------

-- A session, as a sign-in makes it (the process would compare the password: see above).
create function pg_temp.sign_in(email text) returns table (refresh_token text, session_id uuid)
  language sql as $$
    select f.refresh_token, f.session_id
      from private.auth_login_finish((select attempt from pg_temp.start(email, '198.51.100.52')), true, null) f
  $$;
create temporary table rt as select * from pg_temp.sign_in(current_setting('tests.su_email'));
grant select on rt to public;
select is((select count(*)::int from identity.refresh_tokens where session_id = (select session_id from rt)), 1, 'a session has one refresh token');
select ok(
  (select position(convert_to((select refresh_token from rt), 'UTF8') in token_hash) = 0 from identity.refresh_tokens where session_id = (select session_id from rt)),
  'stored only as its hash');
select tests.authenticate_as_anon();
create temporary table rotated as select * from api.auth_refresh((select refresh_token from rt));
select is((select status from rotated), 'ok', 'auth_refresh rotates the token');
select is((select status from api.auth_refresh((select refresh_token from rt))), 'reused', 'the rotated one again is a reuse');
select is((select status from api.auth_refresh((select refresh_token from rotated))), 'revoked', 'which revoked the whole family, its newest token too');
reset role;
select is((select count(*)::int from identity.refresh_tokens where session_id = (select session_id from rt) and revoked_at is null), 0,
  'no token of the session is left');
create temporary table rt2 as select * from pg_temp.sign_in(current_setting('tests.su_email'));
grant select on rt2 to public;
update identity.refresh_tokens set expires_at = now() - interval '1 second' where session_id = (select session_id from rt2);
select tests.authenticate_as_anon();
select is((select status from api.auth_refresh((select refresh_token from rt2))), 'expired', 'an expired token is expired');
select is((select status from api.auth_refresh('no-such-token')), 'invalid', 'an unknown one invalid');
reset role;

select * from finish();
rollback;

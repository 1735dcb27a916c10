-- Set-password links and the e-mail outbox (sql/areas/passwords.sql): a
-- recovery request queues the same job for an account and for an unknown
-- address (the job e-mails the account; at most 5 links an hour; requests
-- counted per client address), only the newest link working, a link that works once
-- with a bcrypt hash the process made, and setting a password ending the
-- account's sessions.
begin;
select plan(17);

select tests.create_user('forgetful');
-- The link of the newest e-mail to the user, and its token.
create function pg_temp.newest_link(identifier text) returns text language sql as $$
  select link from app.email_outbox where user_id = tests.user_id(identifier) order by created_at desc, id desc limit 1
$$;
create function pg_temp.token_of(link text) returns text language sql immutable as $$ select split_part(link, 'token=', 2) $$;
grant execute on function pg_temp.newest_link(text), pg_temp.token_of(text) to public;
-- The hash the gateway makes of 'new password' (bcrypt of its base64 SHA-256; pgcrypto here).
select set_config('tests.hash', extensions.crypt(encode(extensions.digest('new password', 'sha256'), 'base64'), extensions.gen_salt('bf', 10)), true);

-- Recovery ---------------------------------------------------------------------------------

select set_config('tests.nobody', 'nobody-' || gen_random_uuid() || '@example.test', true);
select tests.authenticate_as_anon();
select lives_ok(format('select api.auth_recover(%L, %L, %L, 100, 900)', upper(tests.email('forgetful')), 'https://app.example.test/', '203.0.113.1'),
  'auth_recover for an account (the address in any case)');
select lives_ok(format('select api.auth_recover(%L, %L, %L, 100, 900)', current_setting('tests.nobody'), 'https://app.example.test/', '203.0.113.1'),
  'and for an unknown address: the same answer');
reset role;
-- The request looks nothing up: the same job either way, no e-mail yet.
select is(
  (select jsonb_agg(jsonb_build_object('task', j.task_identifier, 'kind', p.payload->>'kind', 'public_url', p.payload->>'public_url') order by j.id)
     from graphile_worker.jobs j join graphile_worker._private_jobs p on p.id = j.id
    where j.key in ('email_link:recover:' || tests.email('forgetful'), 'email_link:recover:' || current_setting('tests.nobody'))),
  '[{"task": "email_link", "kind": "recover", "public_url": "https://app.example.test/"}, {"task": "email_link", "kind": "recover", "public_url": "https://app.example.test/"}]'::jsonb,
  'each request queues the same email_link job, whether or not the address has an account');
select is((select count(*)::int from app.email_outbox where user_id = tests.user_id('forgetful')), 0, 'and no e-mail is queued by the request itself');
-- The jobs run (private.email_link_send, as the email_link task does).
select private.email_link_send(p.payload->>'kind', p.payload->>'email', p.payload->>'public_url')
  from graphile_worker._private_jobs p where p.key in ('email_link:recover:' || tests.email('forgetful'), 'email_link:recover:' || current_setting('tests.nobody'));
select matches(pg_temp.newest_link('forgetful'), '^https://app\.example\.test/auth/set-password\?token=[A-Za-z0-9_-]{43}$',
  'the job e-mails the account a link to the set-password page of the public URL');
select is((select count(*)::int from app.email_outbox where to_email = current_setting('tests.nobody')), 0, 'and nothing to an unknown address');
select set_config('tests.first', pg_temp.token_of(pg_temp.newest_link('forgetful')), true);
select is(
  (select jsonb_build_object('purpose', purpose, 'to', to_email, 'subject', subject) from app.email_outbox where link = pg_temp.newest_link('forgetful')),
  jsonb_build_object('purpose', 'recover', 'to', tests.email('forgetful'), 'subject', 'Reset your password'), 'a recovery e-mail to the account''s address');
select is((select count(*)::int from identity.password_tokens where token_hash = identity.token_hash(current_setting('tests.first'))), 1,
  'the link''s token is stored as its hash');

select private.email_link_send('recover', tests.email('forgetful'), 'https://app.example.test') from generate_series(1, 6);
select is((select count(*)::int from app.email_outbox where user_id = tests.user_id('forgetful') and purpose = 'recover'), 5,
  'at most 5 recovery links an hour per account');
-- Requests per client address.
select tests.authenticate_as_anon();
select api.auth_recover('someone-' || i || '@example.test', 'https://app.example.test', '203.0.113.2', 3, 900) from generate_series(1, 3) i;
select is(tests.error_of($$select api.auth_recover('one-more@example.test', 'https://app.example.test', '203.0.113.2', 3, 900)$$), 'PT429 rate_limited',
  'past max_per_ip requests of one client address in the window: PT429 rate_limited');
reset role;
-- The newest link: the one whose token is not used up.
select set_config('tests.newest', (
  select pg_temp.token_of(o.link) from app.email_outbox o
    join identity.password_tokens t on t.token_hash = identity.token_hash(pg_temp.token_of(o.link))
   where o.user_id = tests.user_id('forgetful') and t.used_at is null), true);
insert into identity.refresh_tokens (user_id, session_id, token_hash, expires_at)
values (tests.user_id('forgetful'), gen_random_uuid(), extensions.gen_random_bytes(16), now() + interval '1 day');

-- Using a link -------------------------------------------------------------------------------

select tests.authenticate_as_anon();
select is(api.auth_password_link_valid(current_setting('tests.first')), false, 'only the newest link works');
select is(api.auth_password_link_valid(current_setting('tests.newest')), true, 'the newest does');
select is(tests.error_of(format('select api.auth_set_password(%L, %L)', current_setting('tests.newest'), 'new password')), 'PT400 invalid_password_hash',
  'a password in clear is refused: PT400 invalid_password_hash');
select is(
  (select user_id from api.auth_set_password(current_setting('tests.newest'), current_setting('tests.hash'))), tests.user_id('forgetful'),
  'auth_set_password sets the password of the link''s account');
select is(tests.error_of(format('select api.auth_set_password(%L, %L)', current_setting('tests.newest'), current_setting('tests.hash'))), 'PT400 invalid_link',
  'a link works once: PT400 invalid_link');
reset role;
select is((select password_hash from identity.users where id = tests.user_id('forgetful')), current_setting('tests.hash'), 'the new hash is stored');
select is((select count(*)::int from identity.refresh_tokens where user_id = tests.user_id('forgetful') and revoked_at is null), 0,
  'and every session of the account has ended');

select * from finish();
rollback;

-- E-mailed sign-in codes (identity.email_codes, supabase-js signInWithOtp):
-- a code and its link sign in once, within the hour; a newer code voids the
-- older; wrong codes are counted as failed sign-ins (per address and client,
-- per address, per client address) and throttled; the fifth voids the code;
-- an unknown address is answered as a wrong code.
begin;
select plan(12);

select tests.create_user('otp_owner');
create function pg_temp.verify(code text, ip text default '192.0.2.70', max integer default 10)
  returns table (status text, retry_after integer, user_id uuid)
  language sql as $$ select v.status, v.retry_after, v.user_id from api.auth_otp_verify(tests.email('otp_owner'), code, ip, null, max, 100, 100, 900) v $$;
create function pg_temp.code() returns text language sql as $$
  select substring(o.body_text from 'Your code: ([0-9]{6})') from app.email_outbox o
   where o.user_id = tests.user_id('otp_owner') and o.purpose = 'otp' order by o.created_at desc limit 1 $$;
create function pg_temp.link() returns text language sql as $$
  select substring(o.link from 'token=(.*)$') from app.email_outbox o
   where o.user_id = tests.user_id('otp_owner') and o.purpose = 'otp' order by o.created_at desc limit 1 $$;
create function pg_temp.wrong(code text) returns text language sql as $$ select lpad(((code::int + 1) % 1000000)::text, 6, '0') $$;

select private.email_link_send('otp', upper(tests.email('otp_owner')), 'https://example.test');
select ok(pg_temp.code() ~ '^[0-9]{6}$', 'the job e-mails the account a 6-digit code');
select ok(not exists (select from identity.email_codes c where c.code_hash = extensions.digest(pg_temp.code(), 'sha256')), 'only hashes are stored');
select results_eq($$select status, user_id from pg_temp.verify(pg_temp.code())$$, $$values ('ok', tests.user_id('otp_owner'))$$, 'the code signs in');
select results_eq($$select status from pg_temp.verify(pg_temp.code())$$, $$values ('invalid')$$, 'once');
select is(tests.error_of(format('select * from api.auth_magic_link_verify(%L)', pg_temp.link())), 'PT400 invalid_link', 'and its link went with it');

select private.email_link_send('otp', tests.email('otp_owner'), 'https://example.test');
select results_eq($$select count(*)::int from api.auth_magic_link_verify(pg_temp.link())$$, $$values (1)$$, 'a new link signs in');
select is(tests.error_of(format('select * from api.auth_magic_link_verify(%L)', pg_temp.link())), 'PT400 invalid_link', 'once');

select private.email_link_send('otp', tests.email('otp_owner'), 'https://example.test');
select results_eq($$select status from pg_temp.verify(pg_temp.wrong(pg_temp.code()), '192.0.2.71', 2) union all select status from pg_temp.verify(pg_temp.wrong(pg_temp.code()), '192.0.2.71', 2)$$,
  $$values ('invalid'), ('invalid')$$, 'wrong codes are invalid');
select results_eq($$select status from pg_temp.verify(pg_temp.code(), '192.0.2.71', 2)$$, $$values ('throttled')$$,
  'past the failures of the address from that client, even the right code waits');
select is((select count(*)::int from private.auth_failures where scope = 'email' and key = tests.email('otp_owner')), 3,
  'wrong codes count as failed sign-ins of the address (with the earlier replay)');
select results_eq($$select status from pg_temp.verify(pg_temp.wrong(pg_temp.code()), '192.0.2.72') union all select status from pg_temp.verify(pg_temp.wrong(pg_temp.code()), '192.0.2.73') union all select status from pg_temp.verify(pg_temp.wrong(pg_temp.code()), '192.0.2.74') union all select status from pg_temp.verify(pg_temp.code(), '192.0.2.75')$$,
  $$values ('invalid'), ('invalid'), ('invalid'), ('invalid')$$, 'the fifth wrong code voids the code: the right one is refused after it');
select results_eq($$select v.status from api.auth_otp_verify('nobody-otp@example.test', '123456', '192.0.2.76', null, 10, 100, 100, 900) v$$,
  $$values ('invalid')$$, 'an unknown address is answered as a wrong code');

select * from finish();
rollback;

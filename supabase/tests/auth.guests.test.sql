-- Guests (identity.users.is_anonymous, supabase-js signInAnonymously): a
-- guest sign-in is counted per client address; a guest has no e-mail and no
-- password and its tokens say is_anonymous (private.access_token_claims);
-- private.require_full_account refuses it API tokens; api.auth_guest_convert
-- makes it a full account, same id, once; private.guests_prune deletes the
-- old unconverted ones.
begin;
select plan(16);

select tests.create_user('guest_owner');
create function pg_temp.sign_in(ip text, max integer) returns table (status text, user_id uuid, session_id uuid)
  language sql as $$ select s.status, s.user_id, s.session_id from api.auth_guest_sign_in(ip, max, 3600) s $$;
create temp table guests (n int, user_id uuid, session_id uuid);
grant all on guests to anon, authenticated;
create temp table pw as select identity.hash_password('correct horse battery') as hash;
grant select on pw to authenticated;
create function pg_temp.act_as_guest(n int) returns void language plpgsql as $$
declare g record;
begin
  select * into strict g from guests where guests.n = act_as_guest.n;
  perform set_config('request.jwt.claims', jsonb_build_object('role', 'authenticated', 'sub', g.user_id, 'aud', 'authenticated',
                                                              'session_id', g.session_id, 'is_anonymous', true)::text, true);
  perform set_config('role', 'authenticated', true);
end $$;
grant execute on function pg_temp.sign_in(text, integer), pg_temp.act_as_guest(integer) to anon, authenticated;

select tests.authenticate_as_anon();
insert into guests select 1, s.user_id, s.session_id from pg_temp.sign_in('192.0.2.90', 2) s where s.status = 'ok';
insert into guests select 2, s.user_id, s.session_id from pg_temp.sign_in('192.0.2.90', 2) s where s.status = 'ok';
select is((select count(*) from guests), 2::bigint, 'anon signs in as a guest, twice from one address');
select results_eq($$select status from pg_temp.sign_in('192.0.2.90', 2)$$, $$values ('throttled')$$, 'the third from that address within the hour is throttled');
select results_eq($$select status from pg_temp.sign_in('192.0.2.91', 2)$$, $$values ('ok')$$, 'another address is not');
reset role;
select is((select private.access_token_claims(user_id) from guests where n = 1),
  '{"is_anonymous": true, "app_metadata": {}, "user_metadata": {}}'::jsonb, 'its access tokens carry is_anonymous, and no provider');
select results_eq($$select u.email, u.password_hash, u.is_anonymous from identity.users u join guests g on g.user_id = u.id where g.n = 1$$,
  $$values (null::text, null::text, true)$$, 'a guest has no e-mail and no password');
select is(tests.error_of($$insert into identity.users (email, is_anonymous) values ('x@example.test', true)$$), '23514',
  'a guest with an address (or an account without one) cannot exist');

-- What a guest may not do -------------------------------------------------------
select pg_temp.act_as_guest(1);
select is(tests.error_of($$select api.api_token_create('guest', array['/*'])$$), 'PT403 forbidden', 'a guest creates no API token');
select is(tests.error_of($$select private.require_full_account()$$), 'PT403 forbidden', 'private.require_full_account refuses a guest');
select tests.authenticate_as('guest_owner');
select is(tests.error_of($$select private.require_full_account()$$), 'no error', 'and lets a full account through');

-- Conversion ----------------------------------------------------------------------
select pg_temp.act_as_guest(1);
select is(tests.error_of(format($$select api.auth_guest_convert(%L, %L)$$, upper(tests.email('guest_owner')), (select hash from pw))),
  'PT409 email_taken', 'a guest cannot take an address in use (any case)');
select is((api.auth_guest_convert('Guest-One@Example.test', (select hash from pw), '{"nickname": "Ada"}')) ->> 'is_anonymous', 'false',
  'a guest becomes a full account');
reset role;
select results_eq($$select u.email, u.is_anonymous, u.user_metadata ->> 'nickname', p.name from identity.users u join app.profiles p on p.id = u.id join guests g on g.user_id = u.id where g.n = 1$$,
  $$values ('guest-one@example.test', false, 'Ada', 'guest-one')$$, 'same id, its address, its data, its derived name');
select is(private.access_token_claims((select user_id from guests where n = 1)) - 'user_metadata',
  '{"is_anonymous": false, "app_metadata": {"provider": "email", "providers": ["email"]}}'::jsonb, 'its next tokens say so');
select pg_temp.act_as_guest(1);
select is(tests.error_of($$select api.auth_guest_convert('again@example.test', (select hash from pw))$$), 'PT403 forbidden',
  'converted once only');
select is(tests.error_of($$select api.api_token_create('now allowed', array['/*'])$$), 'no error', 'and now it may create an API token');

-- Pruning -------------------------------------------------------------------------
reset role;
update identity.users u set created_at = now() - interval '40 days' where u.id in (select user_id from guests);
select private.guests_prune(interval '30 days', 1000);
select results_eq($$select g.n from guests g join identity.users u on u.id = g.user_id order by g.n$$, $$values (1)$$,
  'an old unconverted guest is pruned; the converted one stays');

select * from finish();
rollback;

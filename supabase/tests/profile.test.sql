-- Accounts, profiles and hats: registration and sign-in refusals, the
-- caller's profile and its name rules (a name derived from the e-mail stays
-- private), and the hats: types, the first one primary, row-level security
-- between users, and the hat limit of the user's plan, which holds for any
-- insert path and follows the plan.
begin;
select plan(43);

select set_config('tests.new_email', 'Reg-' || replace(gen_random_uuid()::text, '-', '') || '@Example.TEST', true);
-- The hash the gateway makes of 'correct horse' (bcrypt of its base64 SHA-256; pgcrypto here).
select set_config('tests.hash', extensions.crypt(encode(extensions.digest('correct horse', 'sha256'), 'base64'), extensions.gen_salt('bf', 10)), true);

-- Registration (anonymous callers): the gateway hands in a bcrypt hash -------

select tests.authenticate_as_anon();
select is(
  (select email from api.auth_register('  ' || current_setting('tests.new_email') || ' ', current_setting('tests.hash'), null)),
  lower(current_setting('tests.new_email')),
  'auth_register: the e-mail is stored trimmed and lower-case');
select throws_ok(
  format('select api.auth_register(%L, %L)', upper(current_setting('tests.new_email')), current_setting('tests.hash')),
  'PT409', 'an account with this email already exists', 'auth_register: the same e-mail in other case is taken (PT409)');
select throws_ok(
  $$select api.auth_register('clear-' || gen_random_uuid() || '@example.test', 'correct horse')$$,
  'PT400', 'password_hash must be a bcrypt hash of cost 10 or more', 'auth_register: a clear password is refused, never stored (PT400)');
select throws_ok(
  $$select api.auth_register('nopassword-' || gen_random_uuid() || '@example.test', null)$$,
  'PT400', 'password_hash must be a bcrypt hash of cost 10 or more', 'auth_register: no hash is refused (PT400)');
select throws_ok(
  $$select api.auth_register('not an address', current_setting('tests.hash'))$$,
  'PT400', 'invalid email address', 'auth_register: an invalid e-mail is refused (PT400)');
select throws_ok(
  $$select api.auth_register('longname-' || gen_random_uuid() || '@example.test', current_setting('tests.hash'), repeat('n', 201))$$,
  'PT400', 'name must be at most 200 characters', 'auth_register: a name over 200 characters is refused (PT400)');
select throws_ok(
  $$select * from private.password_attempt_start('login', current_setting('tests.new_email'), null, 10, 10, 100, 100, 900)$$,
  '42501', 'permission denied for schema private', 'a request role cannot start a sign-in (it would read a hash)');
select throws_ok(
  $$select api.profile_get()$$,
  '42501', 'permission denied for function profile_get', 'anonymous callers cannot read a profile');
reset role;

-- Sign-in, as the gateway runs it (its own role): start, compare, finish ---

create temporary table sign_in as
  select * from private.password_attempt_start('login', upper(current_setting('tests.new_email')), '192.0.2.10', 10, 10, 100, 100, 900);
select is(
  (select password_hash from sign_in), current_setting('tests.hash'),
  'password_attempt_start: the account''s hash to compare (the e-mail in any case)');
select is(
  (select password_hash from private.password_attempt_start('login', 'nobody-' || gen_random_uuid() || '@example.test', '192.0.2.10', 10, 10, 100, 100, 900)),
  private.password_dummy_hash(10),
  'password_attempt_start: an unknown e-mail gets the dummy hash at the configured cost');
select is(
  (select status from private.auth_login_finish(
     (select attempt from private.password_attempt_start('login', current_setting('tests.new_email'), '192.0.2.10', 10, 10, 100, 100, 900)),
     false, null)),
  'invalid', 'auth_login_finish: a password found wrong is invalid');
select set_config('tests.refresh', (select refresh_token from private.auth_login_finish((select attempt from sign_in), true, null)), true);
select isnt(current_setting('tests.refresh'), '', 'auth_login_finish: a password found right opens a session');
select is(
  (select status from private.auth_login_finish((select attempt from sign_in), true, null)),
  'expired', 'auth_login_finish: an attempt is used once');

-- Refresh tokens rotate; presenting a rotated one again revokes the session.
select tests.authenticate_as_anon();
select set_config('tests.rotated', (select refresh_token from api.auth_refresh(current_setting('tests.refresh'))), true);
select is(
  (select status from api.auth_refresh(current_setting('tests.refresh'))),
  'reused', 'auth_refresh: a rotated token again is reuse');
select is(
  (select status from api.auth_refresh(current_setting('tests.rotated'))),
  'revoked', 'auth_refresh: after a reuse the whole session is revoked');
reset role;

-- The caller's profile -----------------------------------------------------

select tests.create_user('alice');
select tests.create_user('bob');
-- carol signs up without a name: hers is derived from her e-mail, and private.
select set_config('tests.carol', private.create_account('carol-' || gen_random_uuid() || '@example.test', 'password-carol', null)::text, true);
select set_config('tests.carol_node', (select node_id::text from app.profiles where id = current_setting('tests.carol')::uuid), true);

select tests.authenticate_as('alice');
select results_eq(
  $$select email, subscription_type, max_hats, is_premium from api.profile_get()$$,
  $$values (tests.email('alice'), 'basic', 3, false)$$,
  'profile_get: the caller''s own profile, with the limits of the basic plan');
select is(
  (select name from api.profile_update('  Alice A.  ')), 'Alice A.', 'profile_update: the name is trimmed');
select throws_ok(
  $$select api.profile_update('   ')$$, 'PT422', 'name must be 1 to 200 characters', 'profile_update: a blank name is PT422');
select throws_ok(
  format('select api.profile_update(%L)', repeat('x', 201)), 'PT422', 'name must be 1 to 200 characters',
  'profile_update: a name over 200 characters is PT422');
select is(
  (select count(*)::int from app.profiles), 1, 'row-level security: a user reads one profile, their own');

select tests.authenticate_as('bob');
select is(app.node_display_name(tests.node_id('alice')), 'Alice A.', 'a chosen name is visible to other users');
select is(app.node_display_name(current_setting('tests.carol_node')::uuid), null, 'a name derived from the e-mail is not');
select tests.clear_authentication();
select set_config('request.jwt.claims', jsonb_build_object('role', 'authenticated', 'sub', current_setting('tests.carol'))::text, true);
select set_config('role', 'authenticated', true);
select is(app.node_display_name(current_setting('tests.carol_node')::uuid), split_part((select email from identity.users), '@', 1),
  'but its owner sees it');
select api.profile_update('Carol C.');
select tests.authenticate_as('bob');
select is(app.node_display_name(current_setting('tests.carol_node')::uuid), 'Carol C.', 'once chosen, it is visible to others');
reset role;

-- Hats ------------------------------------------------------------------------

select tests.create_user('hatter');
select tests.authenticate_as('hatter');
select results_eq(
  $$select id from api.hat_types_list()$$,
  array['professional', 'social', 'founder', 'investor', 'mentor', 'volunteer'],
  'hat_types_list: the six hat types in display order');
select throws_ok($$select api.hat_create('x', 'wizard')$$, 'PT422', 'unknown hat_type "wizard"', 'an unknown hat type is PT422');
select throws_ok($$select api.hat_create('   ', 'social')$$, '23514', null, 'a blank hat name is a check violation');
select lives_ok($$select api.hat_create('one', 'social', 'first')$$, 'first hat');
select lives_ok($$select api.hat_create('two', 'professional')$$, 'second hat');
select lives_ok($$select api.hat_create('three', 'founder')$$, 'third hat');
select set_eq(
  $$select name, is_primary from api.hats_list()$$,
  $$values ('one', true), ('two', false), ('three', false)$$,
  'the first hat is primary, the others are not');
select is((select name from api.hats_list() limit 1), 'one', 'hats_list puts the primary hat first');
select throws_ok($$select api.hat_create('four', 'social')$$, 'PT422', 'hat limit reached: the basic plan allows 3 hats',
  'a basic user cannot wear a fourth hat');

reset role;
select throws_ok(
  $$insert into app.hats (user_id, name, hat_type) values (tests.user_id('hatter'), 'owner', 'social')$$,
  'PT422', null, 'the limit holds for the table owner too (trigger, not API)');
insert into app.hats (user_id, name, hat_type, is_primary) values (tests.user_id('alice'), 'first', 'social', false);
insert into app.hats (user_id, name, hat_type, is_primary) values (tests.user_id('alice'), 'second', 'social', true);
select results_eq(
  $$select name, is_primary from app.hats where user_id = tests.user_id('alice') order by name$$,
  $$values ('first', true), ('second', false)$$,
  'the first hat is primary and only it, whatever the insert says (trigger)');

select admin.set_subscription(tests.email('hatter'), 'premium');
select tests.authenticate_as('hatter');
select results_eq(
  $$select subscription_type, max_hats, is_premium from api.profile_get()$$,
  $$values ('premium', 10, true)$$, 'premium: the plan''s limits show in the profile');
select lives_ok($$select api.hat_create('four', 'social')$$, 'premium: a fourth hat');
reset role;

-- Row-level security on hats and profiles, whatever the query asks for.
select tests.create_user('hat_alice');
select tests.create_user('hat_bob');
select tests.authenticate_as('hat_alice');
select api.hat_create('alice hat', 'social');
select tests.authenticate_as('hat_bob');
select api.hat_create('bob hat', 'social');
select tests.authenticate_as('hat_alice');
select is(
  (select array_agg(name) from app.hats where user_id in (tests.user_id('hat_alice'), tests.user_id('hat_bob'))),
  array['alice hat'], 'a user reads only their own hats');
select is(
  (select array_agg(id) from app.profiles where id in (tests.user_id('hat_alice'), tests.user_id('hat_bob'))),
  array[tests.user_id('hat_alice')], 'and only their own profile');
select throws_ok(
  $$insert into app.hats (user_id, name, hat_type) values (tests.user_id('hat_bob'), 'sneaky', 'social')$$,
  '42501', null, 'a user cannot create a hat for someone else');
reset role;

-- The limit follows the plan (in a savepoint: the plan is shared).
savepoint raised_plan;
update app.subscription_plans set max_hats = 4 where id = 'basic';
select lives_ok(
  $$insert into app.hats (user_id, name, hat_type) values (tests.user_id('bob'), 'b1', 'social'), (tests.user_id('bob'), 'b2', 'social'),
                                                        (tests.user_id('bob'), 'b3', 'social'), (tests.user_id('bob'), 'b4', 'social')$$,
  'raising the plan''s max_hats raises the limit of its users');
select throws_ok(
  $$insert into app.hats (user_id, name, hat_type) values (tests.user_id('bob'), 'b5', 'social')$$,
  'PT422', 'hat limit reached: the basic plan allows 4 hats', 'to the new number: a fifth hat is refused');
rollback to savepoint raised_plan;
select is((select max_hats from app.subscription_plans where id = 'basic'), 3, 'the basic plan is back at 3 hats');

select * from finish();
rollback;

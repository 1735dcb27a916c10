-- API tokens: permission patterns and how they match paths, creating a token
-- (the secret shown once, only its SHA-256 stored; the refusals, community
-- scope for managers only, no token minted with a token), authenticating a
-- secret (unknown, inactive and expired alike; the use counted; a path outside
-- the permissions, or a community-scoped token anywhere but the platform
-- endpoints, refused with its reason), row-level
-- security between users, deactivation, and the docs' live test gate.
begin;
select plan(84);

-- Patterns ------------------------------------------------------------------

select is(private.api_token_path_allowed(array['/api/mobile/profile'], '/api/mobile/profile'), true, 'an exact pattern matches its path');
select is(private.api_token_path_allowed(array['/api/mobile/profile'], '/api/mobile/profile/'), false, 'and nothing longer');
select is(private.api_token_path_allowed(array['/api/mobile/*'], '/api/mobile/tasks/1'), true, 'a prefix pattern matches below it');
select is(private.api_token_path_allowed(array['/api/mobile/*'], '/api/mobile'), false, 'but not the prefix without its slash');
select is(private.api_token_path_allowed(array['/api/docs/*', '/api/mobile/hats'], '/api/mobile/hats'), true, 'any of several patterns');
select is(private.api_token_path_allowed(array['/api/_obile'], '/api/mobile'), false, 'LIKE wildcards are literal characters');
select is(private.api_token_path_allowed(array['*'], null), false, 'a null path matches nothing');
select is(
  array(select p from unnest(array['*', '/', '/api/mobile/*', 'api/mobile', '/api/*/x', '/api/**', '/api mobile', '']) p
         where private.api_token_pattern_valid(p)),
  array['*', '/', '/api/mobile/*'], 'valid patterns: *, a path from /, a prefix ending in * (no inner *, no space)');

-- Creating ------------------------------------------------------------------

select tests.create_user('owner');
select tests.create_user('other');
select set_config('tests.community', admin.create_community('Token club', null, '{}', tests.email('owner'))::text, true);

select tests.authenticate_as('owner');
select set_config('tests.secret', token_value, true), set_config('tests.token', token ->> 'id', true)
  from api.api_token_create('  mobile  ', array['/api/mobile/*']);
select matches(current_setting('tests.secret'), '^cbk_[A-Za-z0-9]{40}$', 'the secret is cbk_ and 40 base62 characters');
select is(
  (select t - 'id' - 'created_at' from api.api_tokens_list() t),
  '{"name": "mobile", "permissions": ["/api/mobile/*"], "community_id": null, "expires_at": null, "active": true,
    "last_used_at": null, "usage_count": 0}'::jsonb,
  'api_tokens_list: the token (name trimmed), never its secret');
select throws_ok(
  $$select api.api_token_create('t', array[]::text[])$$,
  'PT422', 'permissions must list 1 to 50 path patterns', 'api_token_create: no permission is PT422');
select throws_ok(
  $$select api.api_token_create('t', array['no-slash'])$$,
  'PT422', 'each permission must be `*`, a path starting with / or a prefix ending in *', 'api_token_create: a malformed pattern is PT422');
select throws_ok(
  $$select api.api_token_create('t', array['/*'], now() - interval '1 second')$$,
  'PT422', 'expires_at must be in the future', 'api_token_create: an expiry in the past is PT422');
select throws_ok(
  $$select api.api_token_create('   ', array['/*'])$$,
  'PT422', 'name must be 1 to 200 characters', 'api_token_create: a blank name is PT422');
select is(
  (select token ->> 'community_id' from api.api_token_create('scoped', array['/*'], null, current_setting('tests.community')::uuid)),
  current_setting('tests.community'), 'a manager may scope a token to their community');
select set_config('tests.scoped_secret',
  (select token_value from api.api_token_create('scoped, everything', array['*'], null, current_setting('tests.community')::uuid)), true);

select tests.authenticate_as('other');
select throws_ok(
  format('select api.api_token_create(%L, %L, null, %L)', 'scoped', array['/*'], current_setting('tests.community')),
  'PT403', 'only a manager of the community can create a token for it', 'api_token_create: others may not (PT403)');
select set_config('tests.other_secret', (select token_value from api.api_token_create('other''s', array['/*'])), true);

select tests.authenticate_with_api_token(current_setting('tests.secret'), '/api/mobile/profile');
select throws_ok(
  $$select api.api_token_create('minted', array['/*'])$$,
  'PT403', 'API tokens are created with an access token, not with another API token', 'a token cannot mint tokens');

select tests.authenticate_as_anon();
select throws_ok(
  $$select api.api_token_create('anon', array['/*'])$$,
  '42501', 'permission denied for function api_token_create', 'anonymous callers cannot create tokens');

-- Authenticating (anonymous, as the gateway does before it knows the user) --

select is(
  (select (user_id = tests.user_id('owner'))::text || ' ' || path_allowed || ' ' || coalesce(community_id::text, 'no community')
     from api.api_token_authenticate(current_setting('tests.secret'), '/api/mobile/profile')),
  'true true no community', 'api_token_authenticate: the owner, and the path is allowed');
select is(
  (select path_allowed || ' ' || refusal from api.api_token_authenticate(current_setting('tests.secret'), '/api/docs/tokens')),
  'false forbidden', 'api_token_authenticate: a path outside the permissions is not (refusal forbidden)');
select is(
  (select path_allowed || ' ' || refusal from api.api_token_authenticate(current_setting('tests.scoped_secret'), '/api/mobile/profile')),
  'false community_scope_violation',
  'a community-scoped token, even with permission *, is refused off the platform endpoints (community_scope_violation)');
select is(
  (select refusal from api.api_token_authenticate(current_setting('tests.scoped_secret'), '/mcp')),
  'community_scope_violation', '... /mcp included');
select is(
  (select path_allowed::text || ' ' || coalesce(refusal, 'no refusal')
     from api.api_token_authenticate(current_setting('tests.scoped_secret'), '/api/v1/platform/webhooks/x/rotate_secret')),
  'true no refusal', 'it may call the platform endpoints (private.platform_authorize holds it to its community)');
select is(
  (select refusal from api.api_token_authenticate(current_setting('tests.scoped_secret'), '/API/V1/Platform/events')),
  null, '... spelled in any case, as the gateway routes them');
select throws_ok(
  $$select api.api_token_authenticate('cbk_' || repeat('A', 40), '/')$$,
  'PT401', 'invalid, inactive or expired API token', 'an unknown secret is PT401');
select throws_ok(
  $$select api.api_token_authenticate(null, '/')$$,
  'PT401', 'invalid, inactive or expired API token', 'no secret is PT401');
reset role;
select is(
  (select usage_count from app.api_tokens where id = current_setting('tests.token')::uuid), 3::bigint,
  'each authentication counts a use (three so far)');
select is(
  (select token_hash from app.api_tokens where id = current_setting('tests.token')::uuid),
  extensions.digest(current_setting('tests.secret'), 'sha256'), 'only the SHA-256 of the secret is stored');
update app.api_tokens set expires_at = now() - interval '1 millisecond' where id <> current_setting('tests.token')::uuid
   and user_id = tests.user_id('other');
select tests.authenticate_as_anon();
select throws_ok(
  format('select api.api_token_authenticate(%L, %L)', current_setting('tests.other_secret'), '/'),
  'PT401', 'invalid, inactive or expired API token', 'an expired token is PT401');
reset role;

-- Row-level security and deactivation -----------------------------------------

select tests.authenticate_as('other');
select is((select count(*)::int from api.api_tokens_list()), 1, 'api_tokens_list: only the caller''s own tokens');
select is((select count(*)::int from app.api_tokens), 1, 'row-level security: another user''s tokens are not readable');
select throws_ok(
  $$select token_hash from app.api_tokens$$, '42501', 'permission denied for table api_tokens', 'nobody reads a token hash');
select throws_ok(
  format('select api.api_token_deactivate(%L)', current_setting('tests.token')),
  'PT404', 'token not found', 'api_token_deactivate: another user''s token is not found');
update app.api_tokens set active = false where id = current_setting('tests.token')::uuid;
select tests.authenticate_as('owner');
select is(
  (select active from app.api_tokens where id = current_setting('tests.token')::uuid), true,
  'nor deactivated by a direct update (it matched no row)');
select is(
  api.api_token_deactivate(current_setting('tests.token')::uuid) ->> 'active', 'false', 'the owner deactivates it');
select is(
  api.api_token_deactivate(current_setting('tests.token')::uuid) ->> 'active', 'false', 'again: deactivating is idempotent');
select throws_ok(
  format('select api.api_token_authenticate(%L, %L)', current_setting('tests.secret'), '/api/mobile/profile'),
  'PT401', 'invalid, inactive or expired API token', 'an inactive token is PT401');
select throws_ok(
  $$update app.api_tokens set usage_count = 0$$, '42501', 'permission denied for table api_tokens',
  'only active is updatable by its owner');

-- The live test of the docs needs an API token ------------------------------

select throws_ok(
  format('select api.api_test_prepare(%L, %L, %L)', gen_random_uuid(), 'GET', '/api/mobile/profile'),
  'PT401', 'POST /api/docs/test must be called with an API token', 'api_test_prepare: an access token is not enough');
select set_config('tests.live_secret', (select token_value from api.api_token_create('live', array['/*'])), true);
select tests.authenticate_with_api_token(current_setting('tests.live_secret'), '/api/docs/test');
select throws_ok(
  format('select api.api_test_prepare(%L, %L, %L)', gen_random_uuid(), 'GET', '/api/mobile/profile'),
  'PT400', 'unknown endpoint_id', 'api_test_prepare: an unknown endpoint is PT400');

-- Every pattern case ----------------------------------------------------------------

reset role;
select is(private.api_token_path_allowed(patterns, path), allowed,
          format('%s allows %s: %s', patterns, path, allowed))
  from (values
    (array['/api/mobile/profile'], '/api/mobile/profile', true),
    (array['/api/mobile/profile'], '/api/mobile/profile/', false),
    (array['/api/mobile/profile'], '/api/mobile/profiles', false),
    (array['/api/mobile/*'], '/api/mobile/profile', true),
    (array['/api/mobile/*'], '/api/mobile/', true),
    (array['/api/mobile/*'], '/api/mobile', false),
    (array['/api/mobile*'], '/api/mobile', true),
    (array['/api/mob*'], '/api/mobile/tasks/1', true),
    (array['/api/docs/*', '/api/mobile/hats'], '/api/mobile/hats', true),
    (array['/api/docs/*', '/api/mobile/hats'], '/api/mobile/hat_types', false),
    (array['*'], '/anything', true),
    (array['/*'], '/api/mobile/profile', true),
    (array['/api/%'], '/api/mobile', false),
    (array['/api/_obile'], '/api/mobile', false)) v(patterns, path, allowed);
select is(private.api_token_pattern_valid(pattern), valid, format('pattern %L is valid: %s', left(pattern, 40), valid))
  from (values ('*', true), ('/', true), ('/api/mobile/*', true), ('/api/mobile/profile', true), ('api/mobile', false),
               ('/api/*/x', false), ('/api/**', false), ('/api mobile', false), ('', false), ('/' || repeat('a', 500), false)) v(pattern, valid);

-- A new token: the secret once, its SHA-256 stored ----------------------------------------

select tests.create_user('tok_alice');
select tests.create_user('tok_bob');
select tests.authenticate_as('tok_alice');
create temporary table alice_token as select * from api.api_token_create('t', array['/api/mobile/*']);
grant select on alice_token to public;
reset role;
select is((select token_hash from app.api_tokens where id = (select (token ->> 'id')::uuid from alice_token)),
  extensions.digest((select token_value from alice_token), 'sha256'), 'api_token_create stores the SHA-256 of the secret it returns');
select ok(
  (select position(substr((select token_value from alice_token), 5) in to_jsonb(t)::text) = 0 from app.api_tokens t
    where id = (select (token ->> 'id')::uuid from alice_token)),
  'and nothing of the secret itself');
select ok((select position(token_value in token::text) = 0 from alice_token), 'the token it returns does not carry the secret');
select is(
  (select count(distinct c)::int from regexp_split_to_table(
     (select replace(string_agg(private.new_api_token_secret(), ''), 'cbk_', '') from generate_series(1, 200)), '') c),
  62, 'secrets use the whole base62 alphabet');
select is(
  tests.error_of(format('insert into app.api_tokens (user_id, name, permissions, token_hash) values (%L, %L, %L, extensions.digest(%L, %L))',
                        tests.user_id('tok_alice'), 'x', array['nope'], 'x', 'sha256')),
  'PT422 invalid_permissions', 'a malformed pattern written directly to the table is refused (trigger)');
select tests.authenticate_as('tok_alice');
select throws_ok(
  format('select api.api_token_create(%L, %L, null, %L)', 't', array['/*'], gen_random_uuid()),
  'PT403', null, 'a token scoped to a community the caller does not manage (or that does not exist) is PT403');

-- Authenticating counts each use; refusals count nothing --------------------------------------

select tests.authenticate_as_anon();
select is(
  (select to_jsonb(a) from api.api_token_authenticate((select token_value from alice_token), '/api/mobile/profile') a),
  jsonb_build_object('token_id', (select token ->> 'id' from alice_token)::uuid, 'user_id', tests.user_id('tok_alice'),
                     'community_id', null, 'path_allowed', true, 'expires_at', null, 'refusal', null),
  'api_token_authenticate: the token, its owner, its scope, the path verdict and its expiry');
select is((select path_allowed || ' ' || refusal from api.api_token_authenticate((select token_value from alice_token), '/api/docs/tokens')), 'false forbidden',
  'a path outside its patterns is not allowed (refusal forbidden)');
reset role;
select is(
  (select jsonb_build_object('uses', usage_count, 'last_used', last_used_at is not null) from app.api_tokens
    where id = (select (token ->> 'id')::uuid from alice_token)),
  '{"uses": 2, "last_used": true}'::jsonb, 'and both uses are counted, with the time of the last');
select tests.authenticate_as('tok_alice');
create temporary table inactive_token as select * from api.api_token_create('inactive', array['/*']);
create temporary table expired_token as select * from api.api_token_create('expired', array['/*']);
grant select on inactive_token, expired_token to public;
reset role;
update app.api_tokens set active = false where id = (select (token ->> 'id')::uuid from inactive_token);
update app.api_tokens set expires_at = now() - interval '1 ms' where id = (select (token ->> 'id')::uuid from expired_token);
select tests.authenticate_as_anon();
select is(split_part(tests.error_of(format('select api.api_token_authenticate(%L, %L)', secret, '/api/mobile/profile')), ' ', 1), 'PT401',
          'PT401 for ' || what)
  from (values ('cbk_' || repeat('A', 40), 'an unknown secret'), ((select token_value from inactive_token), 'an inactive token'),
               ((select token_value from expired_token), 'an expired token'), ('', 'an empty secret')) v(secret, what);
reset role;
select is(
  (select array_agg(usage_count) from app.api_tokens where id in ((select (token ->> 'id')::uuid from inactive_token), (select (token ->> 'id')::uuid from expired_token))),
  array[0::bigint, 0::bigint], 'and counts nothing');

-- Row-level security and deactivation, between two users ---------------------------------------

select tests.authenticate_as('tok_bob');
select api.api_token_create('bob''s', array['/*']);
select is((select array_agg(user_id) from app.api_tokens), array[tests.user_id('tok_bob')], 'a user reads only their own tokens');
select is((select count(*)::int from api.api_tokens_list()), 1, 'and lists only those');
select is(split_part(tests.error_of(format('select api.api_token_deactivate(%L)', (select token ->> 'id' from alice_token))), ' ', 1), 'PT404',
  'deactivating another user''s token is PT404');
with sneaky as (update app.api_tokens set active = false where id = (select (token ->> 'id')::uuid from alice_token) returning id)
select is((select count(*)::int from sneaky), 0, 'and a direct update changes nothing');
select tests.authenticate_as('tok_alice');
select throws_ok($$select token_hash from app.api_tokens$$, '42501', null, 'nobody reads a hash, not even of their own tokens');
select is(
  (select jsonb_build_object('id', t ->> 'id', 'active', t -> 'active') from api.api_token_deactivate((select (token ->> 'id')::uuid from alice_token)) t),
  jsonb_build_object('id', (select token ->> 'id' from alice_token), 'active', false), 'the owner deactivates it');
reset role;

select * from finish();
rollback;

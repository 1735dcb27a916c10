-- Idempotency keys: claiming a key (per user and credential: a session, an
-- API token), storing the answer (a success only) in the same transaction,
-- the claim answering the stored answer to the same credential and request,
-- the refusal of another request, keys of other credentials of the user and
-- of two users (apart), a record older than credentials (answering nobody), the key's
-- shape, the answer stored only encrypted, the deferred check that a claimed
-- key never commits without its answer, the cap per caller, expiry after 24
-- hours and pruning, and what request roles reach. (A key held by another
-- transaction, 409, needs two sessions; the route's authorization before a
-- replay needs the gateway: the HTTP tests do both.)
begin;
select plan(36);

select tests.create_user('keeper');
select tests.create_user('other_keeper');
select tests.create_user('capped');
select tests.create_user('pruned');

select tests.authenticate_as('keeper');
select is(api.idempotency_claim('k1', repeat('a', 64)), null, 'a new key is claimed (null: nothing to replay)');
select lives_ok($$select api.idempotency_store('k1', 201, '{"headers": {"content-type": "application/json"}, "body": "{\"secret\":\"plaintext-marker\"}"}')$$,
  'its answer is stored');
select is(
  api.idempotency_claim('k1', repeat('a', 64)),
  jsonb_build_object('status', 201, 'answer', jsonb_build_object(
    'headers', jsonb_build_object('content-type', 'application/json'), 'body', '{"secret":"plaintext-marker"}')),
  'the same request again by the same credential: the stored answer (status, headers and body)');
select throws_ok($$select api.idempotency_claim('k1', repeat('b', 64))$$, 'PT422',
  'this Idempotency-Key was used for another request (method, path or body)', 'another request with the key: PT422');
select throws_ok($$select api.idempotency_store('k1', 200, '{}')$$, 'P0001', 'no idempotency key was claimed for this answer',
  'an answer is stored once, for a key claimed and not answered yet');

-- Keys are per credential ---------------------------------------------------------

select set_config('tests.keeper_token', (select token_value from api.api_token_create('keyed', array['/*'])), true);
select set_config('tests.keeper_session', gen_random_uuid()::text, true);
create function pg_temp.as_session() returns void language sql as $$
  select set_config('request.jwt.claims', jsonb_build_object('role', 'authenticated', 'sub', tests.user_id('keeper'),
    'session_id', current_setting('tests.keeper_session'))::text, true)
$$;
select pg_temp.as_session();
select is(api.idempotency_claim('k1', repeat('a', 64)), null,
  'an access token of a session does not see the key used without one: it claims k1 for itself');
select lives_ok($$select api.idempotency_store('k1', 200, '{"headers": {}, "body": "session"}')$$, '... and stores its own answer');
select tests.authenticate_with_api_token(current_setting('tests.keeper_token'), '/api/mobile/tasks');
select is(api.idempotency_claim('k1', repeat('a', 64)), null, 'an API token of the same user sees neither: its own k1');
select lives_ok($$select api.idempotency_store('k1', 202, '{"headers": {}, "body": "token"}')$$, '... with its own answer');
select is(api.idempotency_claim('k1', repeat('a', 64)) -> 'answer' ->> 'body', 'token', 'the token is answered its answer');
select pg_temp.as_session();
select is(api.idempotency_claim('k1', repeat('a', 64)) -> 'answer' ->> 'body', 'session',
  'and the session (any access token of it, refreshed ones too) its own');

-- Only successes are stored --------------------------------------------------------

select tests.authenticate_as('other_keeper');
select is(api.idempotency_claim('k1', repeat('a', 64)), null, 'another user sees nothing of the key and claims it for themselves');
select throws_ok($$select api.idempotency_store('k1', 422, '{"headers": {}, "body": "{}"}')$$, 'P0001',
  'only a success is stored for an idempotency key (a refusal changed nothing: its retry runs again)',
  'a refusal is not stored (the gateway rolls its transaction back, the claim with it)');

-- The key's shape ---------------------------------------------------------------

select throws_ok($$select api.idempotency_claim(repeat('x', 256), repeat('a', 64))$$, 'PT400', null, 'more than 255 characters: PT400');
select throws_ok($$select api.idempotency_claim('', repeat('a', 64))$$, 'PT400', null, 'an empty key: PT400');
select throws_ok($$select api.idempotency_claim(E'caf\u00e9', repeat('a', 64))$$, 'PT400', null, 'a character beyond printable ASCII: PT400');
select throws_ok($$select api.idempotency_claim('fine', 'not a hash')$$, 'PT400', null, 'a request hash that is no SHA-256: PT400');

-- A claim without its answer cannot commit ---------------------------------------

select tests.authenticate_as('keeper');
select is(api.idempotency_claim('k2', repeat('c', 64)), null, 'claiming k2 and storing nothing');
select throws_ok($$set constraints all immediate$$, 'P0001', 'an idempotency key would be kept without its answer',
  'the deferred check refuses to commit a key without its answer');
reset role;
delete from app.idempotency_keys where user_id = tests.user_id('keeper') and key_hash = extensions.digest('k2', 'sha256');

-- Stored encrypted -------------------------------------------------------------

select is(
  (select count(*)::int from app.idempotency_keys
    where user_id = tests.user_id('keeper') and position(convert_to('plaintext-marker', 'UTF8') in answer) > 0),
  0, 'the answer is not stored readable');
select is(
  (select key_hash from app.idempotency_keys where user_id = tests.user_id('keeper') and status = 201),
  extensions.digest('k1', 'sha256'), 'the key is stored as its SHA-256');
select is(
  (select credential from app.idempotency_keys where user_id = tests.user_id('keeper') and status = 200),
  extensions.digest('session ' || current_setting('tests.keeper_session'), 'sha256'), 'and the credential as the SHA-256 of the session');

-- A record older than credentials answers nobody ----------------------------------

update app.idempotency_keys set credential = '\x'::bytea where user_id = tests.user_id('keeper') and status = 201;
select tests.authenticate_as('keeper');
select throws_ok($$select api.idempotency_claim('k1', repeat('a', 64))$$, 'PT422', null,
  'a record without a credential (made before they were recorded) is replayed to nobody');
reset role;

-- The cap per caller ---------------------------------------------------------------

insert into app.idempotency_keys (user_id, key_hash, request_hash, status, answer, credential, created_at)
select tests.user_id('capped'), extensions.digest('old ' || i, 'sha256'), extensions.digest('x', 'sha256'), 200, '\x00',
       extensions.digest('some credential', 'sha256'), now() - make_interval(mins => i)
  from generate_series(1, private.idempotency_keys_per_caller()) i;
insert into app.idempotency_callers (user_id, records) values (tests.user_id('capped'), private.idempotency_keys_per_caller());
select tests.authenticate_as('capped');
select is(api.idempotency_claim('new', repeat('a', 64)), null, 'a caller at the cap (1,000 answers) still claims a new key');
select lives_ok($$select api.idempotency_store('new', 201, '{"headers": {}, "body": "{}"}')$$, '... and stores its answer');
reset role;
select is((select count(*)::int from app.idempotency_keys where user_id = tests.user_id('capped')), 900,
  'the answer past the cap deleted the caller''s oldest 100: 900 kept');
select is(
  (select count(*)::int from app.idempotency_keys
    where user_id = tests.user_id('capped')
      and key_hash in (select extensions.digest('old ' || i, 'sha256') from generate_series(900, 1000) i)),
  0, 'the oldest went');
select is(
  (select count(*)::int from app.idempotency_keys where user_id = tests.user_id('capped')
      and key_hash in (extensions.digest('old 1', 'sha256'), extensions.digest('new', 'sha256'))),
  2, 'the newest and the new one stay');
select is((select records from app.idempotency_callers where user_id = tests.user_id('capped')), 900, 'and the count is right again');
select is((select count(*)::int from app.idempotency_keys where user_id = tests.user_id('keeper')), 3,
  'another caller''s records are not touched');

-- Expiry and pruning -----------------------------------------------------------

select tests.authenticate_as('pruned');
select api.idempotency_claim('p1', repeat('a', 64));
select api.idempotency_store('p1', 200, '{"headers": {}, "body": "{}"}');
select api.idempotency_claim('p2', repeat('a', 64));
select api.idempotency_store('p2', 200, '{"headers": {}, "body": "{}"}');
reset role;
-- A day offline (30 hours): the key still holds, and the prune keeps it.
update app.idempotency_keys set created_at = now() - interval '30 hours' where user_id = tests.user_id('pruned');
select tests.authenticate_as('pruned');
select is(api.idempotency_claim('p1', repeat('a', 64)) ->> 'status', '200',
  'after 30 hours (a day offline) the same request still gets its stored answer');
reset role;
select private.idempotency_keys_prune();
select is((select count(*)::int from app.idempotency_keys where user_id = tests.user_id('pruned')), 2, '... and the prune keeps it');
update app.idempotency_keys set created_at = now() - interval '49 hours' where user_id in (tests.user_id('keeper'), tests.user_id('pruned'));
select tests.authenticate_as('keeper');
select is(api.idempotency_claim('k1', repeat('b', 64)), null, 'after 48 hours a key is claimed anew, for any request');
select tests.clear_authentication();
reset role;
insert into app.idempotency_keys (user_id, credential, key_hash, request_hash, status, answer, created_at)
values (tests.user_id('other_keeper'), extensions.digest('c', 'sha256'), extensions.digest('old', 'sha256'), extensions.digest('x', 'sha256'),
        200, '\x00', now() - interval '3 days');
select cmp_ok(private.idempotency_keys_prune(), '>=', 1, 'pruning removes keys older than 48 hours');
select is((select records from app.idempotency_callers where user_id = tests.user_id('pruned')), 0,
  '... and counts them off their caller (2 answers, none left)');

-- What request roles reach ------------------------------------------------------

select tests.authenticate_as_anon();
select throws_ok($$select api.idempotency_claim('k3', repeat('a', 64))$$, '42501', null, 'anon cannot claim keys');

select * from finish();
rollback;

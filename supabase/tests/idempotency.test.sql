-- Idempotency keys: claiming a key (per caller), storing the answer in the
-- same transaction, the replay of the same request and the refusal of
-- another one, keys of two users, the key's shape, the answer stored only
-- encrypted, the deferred check that a claimed key never commits without its
-- answer, expiry after 24 hours and pruning, and what request roles reach.
-- (A key held by another transaction, 409, needs two sessions: the HTTP
-- tests race real requests for it.)
begin;
select plan(21);

select tests.create_user('keeper');
select tests.create_user('other_keeper');

select tests.authenticate_as('keeper');
select lives_ok($$select api.idempotency_claim('k1', repeat('a', 64))$$, 'a new key is claimed');
select lives_ok($$select api.idempotency_store('k1', 201, '{"headers": {"content-type": "application/json"}, "body": "{\"secret\":\"plaintext-marker\"}"}')$$,
  'its answer is stored');
select is(
  (select jsonb_build_object('status', status, 'answer', answer) from api.idempotency_replay('k1', repeat('a', 64))),
  jsonb_build_object('status', 201, 'answer', jsonb_build_object(
    'headers', jsonb_build_object('content-type', 'application/json'), 'body', '{"secret":"plaintext-marker"}')),
  'the stored answer reads back: status, headers and body');
select throws_ok($$select api.idempotency_claim('k1', repeat('a', 64))$$, 'PTRPL', 'this request was answered before',
  'the same request again: PTRPL (the gateway replays the stored answer)');
select throws_ok($$select api.idempotency_claim('k1', repeat('b', 64))$$, 'PT422',
  'this Idempotency-Key was used for another request (method, path or body)', 'another request with the key: PT422');
select is_empty($$select * from api.idempotency_replay('k1', repeat('b', 64))$$, 'no stored answer for another request');
select throws_ok($$select api.idempotency_store('k1', 200, '{}')$$, 'P0001', 'no idempotency key was claimed for this answer',
  'an answer is stored once, for a key claimed and not answered yet');

-- Another user, the same key ----------------------------------------------------

select tests.authenticate_as('other_keeper');
select is_empty($$select * from api.idempotency_replay('k1', repeat('a', 64))$$, 'another user sees nothing of the key');
select lives_ok($$select api.idempotency_claim('k1', repeat('a', 64))$$, 'and claims it for themselves');
select lives_ok($$select api.idempotency_store('k1', 422, '{"headers": {}, "body": "{}"}')$$, 'a refusal is stored too');

-- The key's shape ---------------------------------------------------------------

select throws_ok($$select api.idempotency_claim(repeat('x', 256), repeat('a', 64))$$, 'PT400', null, 'more than 255 characters: PT400');
select throws_ok($$select api.idempotency_claim('', repeat('a', 64))$$, 'PT400', null, 'an empty key: PT400');
select throws_ok($$select api.idempotency_claim(E'caf\u00e9', repeat('a', 64))$$, 'PT400', null, 'a character beyond printable ASCII: PT400');
select throws_ok($$select api.idempotency_claim('fine', 'not a hash')$$, 'PT400', null, 'a request hash that is no SHA-256: PT400');

-- A claim without its answer cannot commit ---------------------------------------

select lives_ok($$select api.idempotency_claim('k2', repeat('c', 64))$$, 'claiming k2 and storing nothing');
select throws_ok($$set constraints all immediate$$, 'P0001', 'an idempotency key would be kept without its answer',
  'the deferred check refuses to commit a key without its answer');

-- Stored encrypted -------------------------------------------------------------

select tests.clear_authentication();
reset role;
select is(
  (select count(*)::int from app.idempotency_keys
    where user_id = tests.user_id('keeper') and position(convert_to('plaintext-marker', 'UTF8') in answer) > 0),
  0, 'the answer is not stored readable');
select is(
  (select key_hash from app.idempotency_keys where user_id = tests.user_id('keeper')),
  extensions.digest('k1', 'sha256'), 'the key is stored as its SHA-256');

-- Expiry and pruning -----------------------------------------------------------

update app.idempotency_keys set created_at = now() - interval '25 hours' where user_id = tests.user_id('keeper');
select tests.authenticate_as('keeper');
select lives_ok($$select api.idempotency_claim('k1', repeat('b', 64))$$, 'after 24 hours a key is claimed anew, for any request');
select tests.clear_authentication();
reset role;
insert into app.idempotency_keys (user_id, key_hash, request_hash, status, answer, created_at)
values (tests.user_id('other_keeper'), extensions.digest('old', 'sha256'), extensions.digest('x', 'sha256'), 200, '\x00', now() - interval '2 days');
select cmp_ok(private.idempotency_keys_prune(), '>=', 1, 'pruning removes keys older than 24 hours');

-- What request roles reach ------------------------------------------------------

select tests.authenticate_as_anon();
select throws_ok($$select api.idempotency_claim('k3', repeat('a', 64))$$, '42501', null, 'anon cannot claim keys');

select * from finish();
rollback;

-- Signing keys of access tokens (sql/areas/jwks.sql): the first key signs at
-- once, a new one waits as standby, rotation makes it current and keeps the
-- replaced one verifying for the token lifetime, revocation takes a key out
-- of the set, the current key cannot be revoked, only the current key's
-- private half is handed out, and no request role reaches any of it. Also
-- app_metadata (sql/areas/auth.sql): merged as user_metadata is, read by
-- rules from the claims or, for credentials without it, from the account.
begin;
select plan(17);

delete from identity.signing_keys;
create function pg_temp.jwk(kid text, private boolean default false) returns jsonb
  language sql as $$
    select jsonb_build_object('kty', 'EC', 'crv', 'P-256', 'x', 'x', 'y', 'y', 'kid', kid, 'alg', 'ES256')
           || case when private then jsonb_build_object('d', 'd') else '{}'::jsonb end
  $$;
create function pg_temp.add(kid text) returns void
  language sql as $$ select admin.signing_key_add(kid, 'ES256', pg_temp.jwk(kid), pg_temp.jwk(kid, true)) $$;

select pg_temp.add('k1');
select is((select status from identity.signing_keys where kid = 'k1'), 'current', 'signing_key_add: the first key signs at once');
select is(tests.error_of($$select admin.signing_key_add('k9', 'ES256', pg_temp.jwk('k9', true), pg_temp.jwk('k9', true))$$), '23514',
  'signing_key_add: a public JWK with a private part is refused');
select pg_temp.add('k2');
select is((select status from identity.signing_keys where kid = 'k2'), 'standby', 'signing_key_add: a later key waits as standby');
select is(tests.error_of($$select pg_temp.add('k3')$$), 'PT422 validation_error', 'signing_key_add: one standby key at a time');
select is(tests.error_of($$select admin.signing_key_revoke('k1')$$), 'PT422 validation_error', 'signing_key_revoke: not the current key');
select is(tests.error_of($$select admin.signing_key_revoke('nope')$$), 'PT404 not_found', 'signing_key_revoke: an unknown kid');
select is(array(select kid || ':' || status || ':' || (private_jwk is not null) from private.signing_keys_usable(3600)),
  array['k1:current:true', 'k2:standby:false'], 'signing_keys_usable: the current key with its private half, the standby without');

select is(admin.signing_key_rotate(), 'k2', 'signing_key_rotate: the standby key becomes current');
select is(array(select kid || ':' || status from private.signing_keys_usable(3600)),
  array['k2:current', 'k1:previous'], 'signing_keys_usable: the previous key verifies within the token lifetime');
select is(array(select kid from private.signing_keys_usable(0)), array['k2'], 'signing_keys_usable: not after it');
select is(tests.error_of($$select admin.signing_key_rotate()$$), 'PT404 not_found', 'signing_key_rotate: nothing to rotate to without a standby key');
select admin.signing_key_revoke('k1');
select is(array(select kid from private.signing_keys_usable(3600)), array['k2'], 'signing_key_revoke: a revoked key verifies nothing');

select tests.create_user('meta');
select tests.authenticate_as('meta');
select throws_ok($$select private_jwk from identity.signing_keys$$, '42501', null, 'a request role cannot read the keys');
select throws_ok($$select admin.signing_key_rotate()$$, '42501', null, 'a request role cannot rotate');
select tests.clear_authentication();
reset role;

select is(private.metadata_merged('{"a": 1, "b": 2}', '{"b": null, "c": 3}', 'app_metadata'), '{"a": 1, "c": 3}'::jsonb,
  'metadata_merged: a key given replaces, a null key is removed');
update identity.users set app_metadata = '{"plan": "pro"}' where id = tests.user_id('meta');
select tests.authenticate_as('meta');
select is(private.app_metadata(), '{"plan": "pro"}'::jsonb, 'app_metadata(): the account''s own, for claims that carry none');
select set_config('request.jwt.claims', (current_setting('request.jwt.claims')::jsonb || '{"app_metadata": {"plan": "free"}}')::text, true);
select is(private.app_metadata() ->> 'plan', 'free', 'app_metadata(): as the access token carries it');
select tests.clear_authentication();
reset role;

select * from finish();
rollback;

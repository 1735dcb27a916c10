-- Test helpers for the pgTAP tests in this folder (in the manner of
-- basejump's supabase_test_helpers), installed into schema `tests`. Runs first
-- (files run in name order) and is committed, not rolled back, so the other
-- files can use it. Runs with `npm run test:sql`, or `supabase test db`.
--
--   tests.create_user('alice')      a user with profile and node; returns its id
--   tests.create_user_named_by_email('alice')
--                                   the same, without a password, its name derived from the
--                                   e-mail address (private: shown to the user and to managers
--                                   of their communities only)
--   tests.user_id('alice')          that id again (in the same transaction)
--   tests.node_id('alice')          her node id (the id member lists and connections show)
--   tests.email('alice')            her e-mail address
--   tests.authenticate_as('alice')  act as alice: role authenticated + her JWT claims
--   tests.authenticate_with_api_token(secret)
--                                   act as the owner of an API token, with the claims the
--                                   gateway sets for it (token_id, token_community_id)
--   tests.authenticate_as_anon()    act as an anonymous request
--   tests.clear_authentication()    forget the claims (role anon); `reset role` to be the superuser again
--   tests.error_of(query)           runs the query: 'PT422 circular_dependency' (its SQLSTATE and
--                                   hint) when it fails, 'no error' when it does not
--
-- Identifiers are lower-case words ([a-z0-9_]); each run makes unique e-mails,
-- so tests can run on a database other tests use at the same time.

create schema if not exists tests;
grant usage on schema tests to anon, authenticated, service_role;

create or replace function tests.create_user(identifier text) returns uuid
  language plpgsql volatile
  set search_path = pg_catalog
  as $$
declare
  new_id uuid;
begin
  if identifier !~ '^[a-z0-9_]+$' then
    raise exception 'test user identifiers are [a-z0-9_]+, not %', identifier;
  end if;
  new_id := private.create_account(
    identifier || '-' || replace(gen_random_uuid()::text, '-', '') || '@example.test',
    'password-' || identifier, identifier);
  perform set_config('tests.user_' || identifier, new_id::text, true);
  perform set_config('tests.node_' || identifier, (select p.node_id::text from app.profiles p where p.id = new_id), true);
  perform set_config('tests.email_' || identifier, (select u.email from identity.users u where u.id = new_id), true);
  return new_id;
end;
$$;
comment on function tests.create_user(text) is 'Test helper: creates a user (account, profile, node) known as identifier for this transaction.';

create or replace function tests.create_user_named_by_email(identifier text) returns uuid
  language plpgsql volatile
  set search_path = pg_catalog
  as $$
declare
  new_id uuid;
begin
  if identifier !~ '^[a-z0-9_]+$' then
    raise exception 'test user identifiers are [a-z0-9_]+, not %', identifier;
  end if;
  new_id := private.create_account(identifier || '-' || replace(gen_random_uuid()::text, '-', '') || '@example.test', null, null);
  perform set_config('tests.user_' || identifier, new_id::text, true);
  perform set_config('tests.node_' || identifier, (select p.node_id::text from app.profiles p where p.id = new_id), true);
  perform set_config('tests.email_' || identifier, (select u.email from identity.users u where u.id = new_id), true);
  return new_id;
end;
$$;
comment on function tests.create_user_named_by_email(text) is
  'Test helper: creates a user (account without a password, profile, node) known as identifier, named after the e-mail address.';

create or replace function tests.user_id(identifier text) returns uuid
  language plpgsql stable
  set search_path = pg_catalog
  as $$
declare
  id text := current_setting('tests.user_' || identifier, true);
begin
  if coalesce(id, '') = '' then
    raise exception 'no test user %: call tests.create_user(%) first', identifier, quote_literal(identifier);
  end if;
  return id::uuid;
end;
$$;
comment on function tests.user_id(text) is 'Test helper: the id of the test user made by tests.create_user(identifier).';

create or replace function tests.node_id(identifier text) returns uuid
  language plpgsql stable
  set search_path = pg_catalog
  as $$
declare
  id text := current_setting('tests.node_' || identifier, true);
begin
  if coalesce(id, '') = '' then
    raise exception 'no test user %: call tests.create_user(%) first', identifier, quote_literal(identifier);
  end if;
  return id::uuid;
end;
$$;
comment on function tests.node_id(text) is 'Test helper: the node id of the test user made by tests.create_user(identifier).';

create or replace function tests.email(identifier text) returns text
  language plpgsql stable
  set search_path = pg_catalog
  as $$
declare
  address text := current_setting('tests.email_' || identifier, true);
begin
  if coalesce(address, '') = '' then
    raise exception 'no test user %: call tests.create_user(%) first', identifier, quote_literal(identifier);
  end if;
  return address;
end;
$$;
comment on function tests.email(text) is 'Test helper: the e-mail address of the test user made by tests.create_user(identifier).';

create or replace function tests.authenticate_as(identifier text) returns void
  language plpgsql volatile
  set search_path = pg_catalog
  as $$
begin
  perform set_config('request.jwt.claims',
    jsonb_build_object('role', 'authenticated', 'sub', tests.user_id(identifier), 'aud', 'authenticated')::text, true);
  perform set_config('role', 'authenticated', true);
end;
$$;
comment on function tests.authenticate_as(text) is 'Test helper: act as the test user, as the gateway does for a request (role authenticated, request.jwt.claims).';

create or replace function tests.authenticate_with_api_token(secret text, request_path text default '/')
  returns void
  language plpgsql volatile
  set search_path = pg_catalog
  as $$
declare
  token record;
begin
  -- As the gateway does: authenticate the secret (PT401 when it is not a live
  -- token), then run as its owner with the token's id and community scope.
  select * into strict token from api.api_token_authenticate(secret, request_path);
  perform set_config('request.jwt.claims', jsonb_build_object(
    'role', 'authenticated', 'sub', token.user_id, 'token_id', token.token_id,
    'token_community_id', token.community_id)::text, true);
  perform set_config('role', 'authenticated', true);
end;
$$;
comment on function tests.authenticate_with_api_token(text, text) is
  'Test helper: act as the owner of an API token, with the claims the gateway sets for a token-authenticated request.';

create or replace function tests.authenticate_as_anon() returns void
  language plpgsql volatile
  set search_path = pg_catalog
  as $$
begin
  perform set_config('request.jwt.claims', '{"role": "anon"}', true);
  perform set_config('role', 'anon', true);
end;
$$;
comment on function tests.authenticate_as_anon() is 'Test helper: act as an anonymous request.';

create or replace function tests.clear_authentication() returns void
  language plpgsql volatile
  set search_path = pg_catalog
  as $$
begin
  perform set_config('request.jwt.claims', '', true);
  perform set_config('role', 'anon', true);
end;
$$;
comment on function tests.clear_authentication() is 'Test helper: forget the claims and become anon (use `reset role` to be the superuser again).';

create or replace function tests.error_of(query text) returns text
  language plpgsql volatile
  as $$
declare
  state text;
  hint text;
begin
  execute query;
  return 'no error';
exception when others then
  get stacked diagnostics state = returned_sqlstate, hint = pg_exception_hint;
  return state || coalesce(' ' || nullif(hint, ''), '');
end;
$$;
comment on function tests.error_of(text) is
  'Test helper: the SQLSTATE and hint of the error the query raises (''PT422 circular_dependency''), or ''no error''; pgTAP''s throws_ok checks no hint.';

grant execute on all functions in schema tests to anon, authenticated, service_role;

-- The tests call pgTAP while acting as a request role. The migrations revoke
-- EXECUTE from PUBLIC on functions created later (alter default privileges),
-- which takes pgTAP's functions too when the extension is created after them
-- (as `supabase test db` does): grant pgTAP's own functions back.
do $$
declare
  pgtap_schema name := (select n.nspname from pg_catalog.pg_extension e
                          join pg_catalog.pg_namespace n on n.oid = e.extnamespace where e.extname = 'pgtap');
  f regprocedure;
begin
  if pgtap_schema is null then
    return; -- pgTAP loaded as a plain script (test/support/pgtap.ts grants it itself)
  end if;
  execute format('grant usage on schema %I to anon, authenticated, service_role', pgtap_schema);
  for f in
    select d.objid::regprocedure
      from pg_catalog.pg_depend d
      join pg_catalog.pg_extension e on e.oid = d.refobjid
     where e.extname = 'pgtap' and d.classid = 'pg_catalog.pg_proc'::regclass and d.deptype = 'e'
  loop
    execute format('grant execute on function %s to anon, authenticated, service_role', f);
  end loop;
end;
$$;

select plan(1);
select has_function('tests', 'create_user_named_by_email', array['text'], 'the test helpers are installed');
select * from finish();

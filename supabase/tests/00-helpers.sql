-- Test helpers for the pgTAP tests in this folder (in the manner of
-- basejump's supabase_test_helpers), installed into schema `tests`. Runs first
-- (files run in name order) and is committed, not rolled back, so the other
-- files can use it. Runs with `npm run test:sql`, or `supabase test db`.
--
--   tests.create_user('alice')      a user with profile and node; returns its id
--   tests.user_id('alice')          that id again (in the same transaction)
--   tests.authenticate_as('alice')  act as alice: role authenticated + her JWT claims
--   tests.authenticate_as_anon()    act as an anonymous request
--   tests.clear_authentication()    forget the claims (role anon); `reset role` to be the superuser again
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
  return new_id;
end;
$$;
comment on function tests.create_user(text) is 'Test helper: creates a user (account, profile, node) known as identifier for this transaction.';

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

grant execute on all functions in schema tests to anon, authenticated, service_role;

select plan(1);
select has_function('tests', 'authenticate_as', array['text'], 'the test helpers are installed');
select * from finish();

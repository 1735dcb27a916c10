-- Common ground (sql/areas/common.sql): the Supabase compatibility layer the
-- rules rely on (the request roles, auth.uid() and auth.jwt() reading the
-- request's claims), functions and columns out of reach of the roles not
-- granted them, and private.json_capped, which bounds what request records
-- keep (at most 16 KB of JSON text each, else a truncation marker).
begin;
select plan(24);

-- The compatibility layer --------------------------------------------------------

select is(
  (select array_agg(rolname::text order by rolname) from pg_roles where rolname in ('anon', 'authenticated', 'service_role', 'authenticator')),
  array['anon', 'authenticated', 'authenticator', 'service_role'], 'the Supabase roles exist');

select set_config('tests.someone', gen_random_uuid()::text, true);
select set_config('request.jwt.claims', jsonb_build_object('role', 'authenticated', 'sub', current_setting('tests.someone'), 'aud', 'authenticated')::text, true);
select set_config('role', 'authenticated', true);
select is(
  jsonb_build_object('uid', auth.uid(), 'role', auth.jwt() ->> 'role', 'who', current_user),
  jsonb_build_object('uid', current_setting('tests.someone'), 'role', 'authenticated', 'who', 'authenticated'),
  'auth.uid() and auth.jwt() read request.jwt.claims, as the gateway sets them');
select tests.authenticate_as_anon();
select is(jsonb_build_object('uid', auth.uid(), 'who', current_user), '{"uid": null, "who": "anon"}'::jsonb, 'an anonymous request has no uid');

-- Request roles run only what they were granted ----------------------------------------

select throws_ok($$select * from api.profile_get()$$, '42501', null, 'anonymous callers cannot call a function granted to signed-in users');
reset role;
select set_config('request.jwt.claims', jsonb_build_object('role', 'authenticated', 'sub', current_setting('tests.someone'), 'aud', 'authenticated')::text, true);
select set_config('role', 'authenticated', true);
select throws_ok($$select admin.create_user('x@example.com', 'password123')$$, '42501', null, 'signed-in users cannot call an operator function');
select throws_ok($$select password_hash from identity.users$$, '42501', null, 'nor read a password hash');
reset role;
select set_config('request.jwt.claims', '', true);

-- private.json_capped -----------------------------------------------------------------

select set_config('tests.small', jsonb_build_object('a', repeat('x', 16000), 'n', jsonb_build_array(1, 2, 3))::text, true);
select is(private.json_capped(current_setting('tests.small')::jsonb), current_setting('tests.small')::jsonb,
  'a value of at most 16 KB of JSON text is kept as it is');
select is(private.json_capped(null), null, 'null stays null');

select set_config('tests.large', jsonb_build_object('text', (select string_agg(md5(i::text), '') from generate_series(1, 1900) i))::text, true);
select set_config('tests.capped', private.json_capped(current_setting('tests.large')::jsonb)::text, true);
select is(current_setting('tests.capped')::jsonb -> 'truncated', 'true'::jsonb, 'a larger one is replaced by a marker: truncated');
select is((current_setting('tests.capped')::jsonb ->> 'bytes')::int, octet_length(current_setting('tests.large')::jsonb::text),
  'with the size of its JSON text in bytes');
select cmp_ok(octet_length(current_setting('tests.capped')::jsonb ->> 'preview'), '<=', 8192, 'and a preview of at most half the cap');
select is(left(current_setting('tests.large')::jsonb::text, length(current_setting('tests.capped')::jsonb ->> 'preview')),
  current_setting('tests.capped')::jsonb ->> 'preview', 'which is the start of its text');

create function pg_temp.capped_preview(ch text) returns jsonb language sql as $$
  select private.json_capped(jsonb_build_object('t', repeat(ch, 10000)), 1000)
$$;
select is(pg_temp.capped_preview(ch) -> 'truncated', 'true'::jsonb, 'a value of ' || ch || ' characters over the cap is truncated')
  from unnest(array['é', '€', '😀']) ch;
select cmp_ok(octet_length(pg_temp.capped_preview(ch) ->> 'preview'), '<=', 500, 'its preview stays within its bytes (' || ch || ')')
  from unnest(array['é', '€', '😀']) ch;
select cmp_ok(length(pg_temp.capped_preview(ch) ->> 'preview'), '>', 0, 'and is not empty (' || ch || ')')
  from unnest(array['é', '€', '😀']) ch;
select ok(position(U&'\FFFD' in pg_temp.capped_preview(ch) ->> 'preview') = 0, 'a multi-byte character is never cut (' || ch || ')')
  from unnest(array['é', '€', '😀']) ch;

select * from finish();
rollback;

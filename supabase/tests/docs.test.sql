-- Developer docs (sql/areas/docs.sql): private.sync_api_endpoints, what the
-- gateway calls at start with its route table (new routes added, unchanged
-- ones untouched, changed ones updated, missing ones deprecated, returning
-- ones revived with their id; duplicates counted once, methods upper-cased,
-- anything but an array refused), api.api_endpoints_list for anyone, and the
-- path patterns the docs' live test matches a path with. now() is fixed in
-- this transaction, so time is moved by ageing the rows between two syncs.
begin;
select plan(22);

create function pg_temp.endpoint(method text, path text, description text default 'd') returns jsonb
  language sql immutable as $$
    select jsonb_build_object('http_method', method, 'path', path, 'controller', 'Test',
                              'action', lower(method) || '_' || regexp_replace(path, '\W+', '_', 'g'),
                              'description', description, 'tags', jsonb_build_array('Test'))
  $$;
create function pg_temp.sync(endpoints jsonb) returns jsonb
  language sql as $$ select to_jsonb(s) from private.sync_api_endpoints(endpoints) s $$;
-- The test's endpoints, as the list shows them.
create function pg_temp.listed() returns jsonb
  language sql as $$
    select coalesce(jsonb_agg(to_jsonb(e) order by e.path, e.http_method), '[]')
      from (select http_method, path, description, deprecated, discovered_at, last_updated
              from app.api_endpoints where path like '/sqltest/%') e
  $$;
create function pg_temp.age_all() returns void
  language sql as $$
    update app.api_endpoints set discovered_at = discovered_at - interval '1 day', last_updated = last_updated - interval '1 day'
  $$;

-- Anyone reads the list; only the gateway's own role syncs -------------------------------

savepoint listing;
select pg_temp.sync((select jsonb_agg(pg_temp.endpoint('GET', '/sqltest/list/' || i)) from generate_series(1, 11) i));
select tests.authenticate_as_anon();
select is(jsonb_typeof(api.api_endpoints_list()), 'array', 'api_endpoints_list: anonymous callers read the list');
select cmp_ok(jsonb_array_length(api.api_endpoints_list()), '>', 10, 'all of it');
select throws_ok($$select private.sync_api_endpoints('[]'::jsonb)$$, '42501', null, 'but cannot sync it');
reset role;
rollback to savepoint listing;

-- Syncing ---------------------------------------------------------------------------------

select set_config('tests.before', (select count(*)::text from app.api_endpoints where not deprecated), true);
select is(
  pg_temp.sync(jsonb_build_array(pg_temp.endpoint('GET', '/sqltest/a'), pg_temp.endpoint('POST', '/sqltest/b/{id}'))),
  jsonb_build_object('added', 2, 'changed', 0, 'retired', current_setting('tests.before')::int, 'unchanged', 0),
  'new routes are added; routes no longer in the set (the gateway''s own here) are deprecated');
select is(
  (select jsonb_agg(jsonb_build_array(e -> 'http_method', e -> 'path', e -> 'deprecated')) from jsonb_array_elements(pg_temp.listed()) e),
  '[["GET", "/sqltest/a", false], ["POST", "/sqltest/b/{id}", false]]'::jsonb, 'both are listed, current');
select is(pg_temp.listed() -> 0 -> 'discovered_at', pg_temp.listed() -> 0 -> 'last_updated', 'discovered and updated at once');

select pg_temp.age_all();
select set_config('tests.aged', pg_temp.listed()::text, true);
select is(
  pg_temp.sync(jsonb_build_array(pg_temp.endpoint('GET', '/sqltest/a'), pg_temp.endpoint('POST', '/sqltest/b/{id}'))),
  '{"added": 0, "changed": 0, "retired": 0, "unchanged": 2}'::jsonb, 'the same set again: nothing moves');
select is(pg_temp.listed(), current_setting('tests.aged')::jsonb, 'not even a timestamp');

select is(
  pg_temp.sync(jsonb_build_array(pg_temp.endpoint('GET', '/sqltest/a'), pg_temp.endpoint('POST', '/sqltest/b/{id}', 'new words'))),
  '{"added": 0, "changed": 1, "retired": 0, "unchanged": 1}'::jsonb, 'a changed description is a change');
select is(pg_temp.listed() -> 1 ->> 'description', 'new words', 'which is stored');
select is(pg_temp.listed() -> 1 -> 'discovered_at', current_setting('tests.aged')::jsonb -> 1 -> 'discovered_at', 'discovered_at stays');
select cmp_ok((pg_temp.listed() -> 1 ->> 'last_updated')::timestamptz, '>', (current_setting('tests.aged')::jsonb -> 1 ->> 'last_updated')::timestamptz,
  'last_updated moves');
select is(pg_temp.listed() -> 0, current_setting('tests.aged')::jsonb -> 0, 'the unchanged one is untouched');

select set_config('tests.a_id', (select id::text from app.api_endpoints where path = '/sqltest/a'), true);
select pg_temp.age_all();
select is(
  (select jsonb_build_object('retired', s -> 'retired', 'unchanged', s -> 'unchanged')
     from pg_temp.sync(jsonb_build_array(pg_temp.endpoint('POST', '/sqltest/b/{id}', 'new words'))) s),
  '{"retired": 1, "unchanged": 1}'::jsonb, 'a route gone from the router is retired');
select is(
  (select jsonb_build_object('path', e -> 'path', 'deprecated', e -> 'deprecated') from jsonb_array_elements(pg_temp.listed()) e where e ->> 'path' = '/sqltest/a'),
  '{"path": "/sqltest/a", "deprecated": true}'::jsonb, 'deprecated');
select is(
  (select jsonb_build_object('changed', s -> 'changed', 'unchanged', s -> 'unchanged')
     from pg_temp.sync(jsonb_build_array(pg_temp.endpoint('GET', '/sqltest/a'), pg_temp.endpoint('POST', '/sqltest/b/{id}', 'new words'))) s),
  '{"changed": 1, "unchanged": 1}'::jsonb, 'and back: a change');
select is(
  (select jsonb_build_object('id', id, 'deprecated', deprecated) from app.api_endpoints where path = '/sqltest/a'),
  jsonb_build_object('id', current_setting('tests.a_id')::uuid, 'deprecated', false), 'revived, with the same id');

savepoint duplicates;
select is(
  pg_temp.sync(jsonb_build_array(pg_temp.endpoint('get', '/sqltest/dup'), pg_temp.endpoint('get', '/sqltest/dup'))) -> 'added',
  '1'::jsonb, 'a duplicate is counted once');
select is((select http_method from app.api_endpoints where path = '/sqltest/dup'), 'GET', 'methods are upper-cased');
rollback to savepoint duplicates;
select is(tests.error_of($$select private.sync_api_endpoints('{}'::jsonb)$$), 'PT400 invalid_endpoints', 'anything but an array is PT400 invalid_endpoints');
select is(split_part(tests.error_of(format('select private.sync_api_endpoints(%L::jsonb)', jsonb_build_array(pg_temp.endpoint('TRACE', '/sqltest/x')))), ' ', 1),
  '23514', 'a method the table does not allow is a check violation');

-- Path patterns -----------------------------------------------------------------------------

select is(
  jsonb_build_object(
    'task', private.endpoint_path_pattern('/api/mobile/tasks/{id}/chain'),
    'dotted', private.endpoint_path_pattern('/api/docs/openapi.json'),
    'ok', '/api/mobile/tasks/abc/chain' ~ private.endpoint_path_pattern('/api/mobile/tasks/{id}/chain'),
    'two_segments', '/api/mobile/tasks/a/b/chain' ~ private.endpoint_path_pattern('/api/mobile/tasks/{id}/chain'),
    'dot_is_literal', '/api/docs/openapiXjson' ~ private.endpoint_path_pattern('/api/docs/openapi.json'),
    'literal', '/llms.txt' ~ private.endpoint_path_pattern('/llms.txt')),
  jsonb_build_object('task', '^/api/mobile/tasks/[^/]+/chain$', 'dotted', '^/api/docs/openapi\.json$', 'ok', true,
                     'two_segments', false, 'dot_is_literal', false, 'literal', true),
  'endpoint_path_pattern: one segment per {parameter}, the rest literally');

select * from finish();
rollback;

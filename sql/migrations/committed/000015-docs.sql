--! Previous: sha1:754be32162a7595118e26368ed39b9d5f13537cd
--! Hash: sha1:5a1285a78eef7c2ea8d0199286118ca0f902b392
--! Message: docs

--! split: 200-docs.sql
--------------------------------------------------------------------------------
-- Developer docs: the API endpoints the gateway serves (discovered from its
-- router at every start) and, with the API tokens, the live test results.
--------------------------------------------------------------------------------

drop function if exists api.api_test_record(uuid, text, text, jsonb, jsonb, jsonb, integer, integer, jsonb, jsonb, text);
drop function if exists api.api_test_prepare(uuid, text, text);
drop function if exists private.endpoint_path_pattern(text);
drop function if exists api.api_endpoints_list();
drop function if exists private.sync_api_endpoints(jsonb);

-- One row per (method, path) the gateway has ever served. `path` is in the
-- OpenAPI form (/api/mobile/tasks/{id}); `controller` is the route's section,
-- `action` its operation name. A route no longer served stays, deprecated.
create table app.api_endpoints (
  id uuid primary key default gen_random_uuid(),
  http_method text not null check (http_method in ('GET', 'POST', 'PUT', 'DELETE', 'PATCH')),
  path text not null check (path ~ '^/' and length(path) <= 500),
  controller text not null check (length(controller) between 1 and 100),
  action text not null check (length(action) between 1 and 200),
  description text check (length(description) <= 2000),
  tags text[] not null default '{}',
  deprecated boolean not null default false,
  discovered_at timestamptz not null default now(),
  last_updated timestamptz not null default now(),
  unique (http_method, path)
);
comment on table app.api_endpoints is
  'The routes the gateway serves (GET /api/docs/endpoints), kept by private.sync_api_endpoints at every gateway start.';

alter table app.api_endpoints enable row level security;
create policy "Endpoints are readable by everyone" on app.api_endpoints
  for select to anon, authenticated using (true);
grant select on app.api_endpoints to anon, authenticated;

-- Called by the gateway at start with the routes its router serves:
-- [{http_method, path, controller, action, description, tags}, ...].
--   new route                  → inserted (discovered_at = last_updated = now)
--   known route, same fields   → untouched (discovered_at and last_updated kept)
--   known route, any change    → updated, last_updated = now (discovered_at kept)
--   deprecated route back      → deprecated = false, last_updated = now
--   known route not in the set → deprecated = true, last_updated = now
-- Replicas starting together take turns (advisory lock), so the result is that
-- of the last start.
-- The endpoints the gateway reported, one row per method and path.
create function private.api_endpoints_incoming(endpoints jsonb)
  returns table (http_method text, path text, controller text, action text, description text, tags text[])
  language sql immutable
  set search_path = pg_catalog
  as $$
    select distinct on (upper(e.http_method), e.path)
           upper(e.http_method), e.path, e.controller, e.action, e.description, coalesce(e.tags, '{}')
      from jsonb_to_recordset(endpoints)
           as e(http_method text, path text, controller text, action text, description text, tags text[])
     order by upper(e.http_method), e.path
  $$;

create function private.sync_api_endpoints(endpoints jsonb)
  returns table (added integer, changed integer, retired integer, unchanged integer)
  language plpgsql volatile security definer
  set search_path = pg_catalog
  as $$
declare
  total integer;
begin
  if endpoints is null or jsonb_typeof(endpoints) <> 'array' then
    raise exception 'endpoints must be a JSON array' using errcode = 'PT400', hint = 'invalid_endpoints';
  end if;
  perform pg_advisory_xact_lock(hashtextextended('app.api_endpoints', 0));

  select count(*) into total from private.api_endpoints_incoming(endpoints);

  with upserted as (
    insert into app.api_endpoints as a (http_method, path, controller, action, description, tags)
    select i.http_method, i.path, i.controller, i.action, i.description, i.tags from private.api_endpoints_incoming(endpoints) i
    on conflict (http_method, path) do update
      set controller = excluded.controller, action = excluded.action, description = excluded.description,
          tags = excluded.tags, deprecated = false, last_updated = now()
      where (a.controller, a.action, a.description, a.tags, a.deprecated)
            is distinct from (excluded.controller, excluded.action, excluded.description, excluded.tags, false)
    returning (a.xmax = 0) as is_new
  )
  select count(*) filter (where is_new), count(*) filter (where not is_new)
    into added, changed
    from upserted;

  update app.api_endpoints a
     set deprecated = true, last_updated = now()
   where not a.deprecated
     and not exists (select from private.api_endpoints_incoming(endpoints) i where i.http_method = a.http_method and i.path = a.path);
  get diagnostics retired = row_count;

  unchanged := total - added - changed;
  return next;
end;
$$;
comment on function private.sync_api_endpoints(jsonb) is
  'Upserts the routes the gateway serves: new ones inserted, changed ones get last_updated = now() (discovered_at kept), '
  'unchanged ones untouched, ones no longer served marked deprecated. Returns the counts.';

-- GET /api/docs/endpoints: every known endpoint as ApiEndpoint (spec section 2),
-- by path then method; deprecated ones included, flagged.
create function api.api_endpoints_list()
  returns jsonb
  language sql stable
  set search_path = pg_catalog
  as $$
    select coalesce(jsonb_agg(jsonb_build_object(
             'id', e.id, 'path', e.path, 'http_method', e.http_method, 'controller', e.controller,
             'action', e.action, 'description', e.description, 'tags', to_jsonb(e.tags),
             'deprecated', e.deprecated, 'discovered_at', app.iso(e.discovered_at),
             'last_updated', app.iso(e.last_updated))
           order by e.path, e.http_method), '[]'::jsonb)
      from app.api_endpoints e
  $$;
comment on function api.api_endpoints_list() is
  'GET /api/docs/endpoints: the endpoints the gateway serves (and deprecated ones, flagged) as ApiEndpoint objects.';
grant execute on function api.api_endpoints_list() to anon, authenticated;

--------------------------------------------------------------------------------
-- The live test executor (POST /api/docs/test): called with an API token, it
-- replays a request against the gateway with that token and records the
-- outcome here. The gateway asks api.api_test_prepare whether the request is
-- one it may replay, replays it, then records it with api.api_test_record.
--------------------------------------------------------------------------------

create table app.api_test_results (
  id uuid primary key default gen_random_uuid(),
  api_endpoint_id uuid not null references app.api_endpoints (id) on delete cascade,
  api_token_id uuid not null references app.api_tokens (id) on delete cascade,
  user_id uuid not null references identity.users (id) on delete cascade,
  request_method text not null check (request_method in ('GET', 'POST', 'PUT', 'DELETE', 'PATCH')),
  request_path text not null check (length(request_path) <= 2048),
  request_headers jsonb check (request_headers is null or jsonb_typeof(request_headers) = 'object'),
  request_params jsonb check (request_params is null or jsonb_typeof(request_params) = 'object'),
  request_payload jsonb check (request_payload is null or jsonb_typeof(request_payload) = 'object'),
  response_status integer not null check (response_status between 100 and 599),
  response_time_ms integer not null check (response_time_ms >= 0),
  response_headers jsonb check (response_headers is null or jsonb_typeof(response_headers) = 'object'),
  response_body jsonb,
  error_message text check (length(error_message) <= 2000),
  success boolean not null,
  executed_at timestamptz not null default now()
);
comment on table app.api_test_results is
  'ApiTestResult: one row per live test (POST /api/docs/test); the secret of the token is never stored, only its id.';
create index api_test_results_user_idx on app.api_test_results (user_id, executed_at desc);
create index api_test_results_token_idx on app.api_test_results (api_token_id);
create index api_test_results_endpoint_idx on app.api_test_results (api_endpoint_id);

alter table app.api_test_results enable row level security;
create policy "Test results are readable by their owner" on app.api_test_results
  for select to authenticated using (user_id = (select auth.uid()));
create policy "Test results are recorded by the owner of the token" on app.api_test_results
  for insert to authenticated
  with check (user_id = (select auth.uid())
              and api_token_id = nullif((select auth.jwt()) ->> 'token_id', '')::uuid);
grant select on app.api_test_results to authenticated;
grant insert (api_endpoint_id, api_token_id, user_id, request_method, request_path, request_headers, request_params,
              request_payload, response_status, response_time_ms, response_headers, response_body, error_message, success)
  on app.api_test_results to authenticated;

-- '/api/mobile/tasks/{id}' → '^/api/mobile/tasks/[^/]+$' (the rest matched literally).
create function private.endpoint_path_pattern(template text) returns text
  language sql immutable strict
  set search_path = pg_catalog
  as $$
    select '^' || replace(
                    regexp_replace(regexp_replace(template, '\{[^}/]+\}', chr(1), 'g'), '([^A-Za-z0-9_/\x01-])', '\\\1', 'g'),
                    chr(1), '[^/]+') || '$'
  $$;
comment on function private.endpoint_path_pattern(text) is
  'A regular expression for the concrete paths of an endpoint path template ({name} is one path segment).';
grant execute on function private.endpoint_path_pattern(text) to authenticated;

-- May the caller's token replay this request? The caller must be authenticated
-- with an API token (PT401 api_token_required); the endpoint must exist and be
-- served (PT400 unknown_endpoint / endpoint_deprecated); the method must be the
-- endpoint's (PT400 method_mismatch) and the path one of its concrete paths
-- (PT400 path_mismatch); the executor itself is never replayed (PT400 recursive_test).
create function api.api_test_prepare(endpoint_id uuid, method text, path text)
  returns void
  language plpgsql stable
  set search_path = pg_catalog
  as $$
declare
  endpoint app.api_endpoints;
begin
  if nullif(auth.jwt() ->> 'token_id', '') is null then
    raise exception 'POST /api/docs/test must be called with an API token' using errcode = 'PT401', hint = 'api_token_required';
  end if;
  select * into endpoint from app.api_endpoints e where e.id = api_test_prepare.endpoint_id;
  if endpoint.id is null then
    raise exception 'unknown endpoint_id' using errcode = 'PT400', hint = 'unknown_endpoint';
  end if;
  if endpoint.deprecated then
    raise exception 'the endpoint is no longer served' using errcode = 'PT400', hint = 'endpoint_deprecated';
  end if;
  if endpoint.http_method = 'POST' and endpoint.path = '/api/docs/test' then
    raise exception 'the live test executor cannot test itself' using errcode = 'PT400', hint = 'recursive_test';
  end if;
  if method is distinct from endpoint.http_method then
    raise exception 'method must be % for this endpoint', endpoint.http_method using errcode = 'PT400', hint = 'method_mismatch';
  end if;
  if path is null or path !~ private.endpoint_path_pattern(endpoint.path) then
    raise exception 'path must be a path of % (a value in place of each {parameter})', endpoint.path
      using errcode = 'PT400', hint = 'path_mismatch';
  end if;
end;
$$;
comment on function api.api_test_prepare(uuid, text, text) is
  'POST /api/docs/test, before the replay: PT401 without an API token; PT400 for an unknown or deprecated endpoint, '
  'another method, a path that is not one of the endpoint''s, or the executor itself.';
grant execute on function api.api_test_prepare(uuid, text, text) to authenticated;

-- Records a replay as the caller (row-level security: the caller's own token).
-- success: a status below 400 and no transport error.
create function api.api_test_record(
  endpoint_id uuid, method text, path text, request_headers jsonb, request_params jsonb, request_payload jsonb,
  response_status integer, response_time_ms integer, response_headers jsonb, response_body jsonb, error_message text)
  returns jsonb
  language sql volatile
  set search_path = pg_catalog
  as $$
    insert into app.api_test_results as r (
      api_endpoint_id, api_token_id, user_id, request_method, request_path, request_headers, request_params,
      request_payload, response_status, response_time_ms, response_headers, response_body, error_message, success)
    values (
      endpoint_id, nullif(auth.jwt() ->> 'token_id', '')::uuid, auth.uid(), method, path, request_headers, request_params,
      request_payload, response_status, response_time_ms, response_headers, response_body, error_message,
      response_status between 200 and 399 and error_message is null)
    returning jsonb_build_object('id', r.id, 'success', r.success, 'executed_at', app.iso(r.executed_at))
  $$;
comment on function api.api_test_record(uuid, text, text, jsonb, jsonb, jsonb, integer, integer, jsonb, jsonb, text) is
  'POST /api/docs/test, after the replay: records the ApiTestResult for the caller''s token; success = status < 400 and no error.';
grant execute on function api.api_test_record(uuid, text, text, jsonb, jsonb, jsonb, integer, integer, jsonb, jsonb, text)
  to authenticated;

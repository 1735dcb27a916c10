-- =============================================================================
-- Developer docs: discovered endpoints and live test results
-- =============================================================================
-- The endpoints the gateway serves, discovered from its route table at every
-- start (private.sync_api_endpoints: new ones added, changed ones updated,
-- missing ones deprecated, returning ones revived with their id), readable by
-- anyone; and the live test results of the docs' try-it executor, recorded and
-- read by their owner only, capped in size and pruned after 30 days.
--
-- Code: gateway/routes/docs.ts, gateway/routes/test-executor.ts
-- pgTAP: supabase/tests/docs.test.sql
--
-- Its tables (created and altered by the migrations; their comments, row-level
-- security, policies, grants and triggers are below):
--   app.api_endpoints, app.api_test_results
--
-- The current definition of every function, view, policy, trigger, grant and
-- comment of this area. To change a rule: edit it here, then
-- `npm run db -- areas --diff` writes its migration (docs/dba.md, "Changing a
-- rule"). CI (`npm run db -- areas --check`) fails while this file and the
-- migrated database disagree. `npm run db -- areas --write` renders all below
-- `-- Code:` again from a freshly migrated database.
-- =============================================================================

-- -----------------------------------------------------------------------------
-- Functions of api: what the gateway and the MCP server call, as the request's
-- role
-- -----------------------------------------------------------------------------

CREATE OR REPLACE FUNCTION api.api_endpoints_list()
 RETURNS jsonb
 LANGUAGE sql
 STABLE
 SET search_path TO 'pg_catalog'
AS $function$
    select coalesce(jsonb_agg(jsonb_build_object(
             'id', e.id, 'path', e.path, 'http_method', e.http_method, 'controller', e.controller,
             'action', e.action, 'description', e.description, 'tags', to_jsonb(e.tags),
             'deprecated', e.deprecated, 'discovered_at', app.iso(e.discovered_at),
             'last_updated', app.iso(e.last_updated))
           order by e.path, e.http_method), '[]'::jsonb)
      from app.api_endpoints e
  $function$;
comment on function api.api_endpoints_list() is 'GET /api/docs/endpoints: the endpoints the gateway serves (and deprecated ones, flagged) as ApiEndpoint objects.';
grant execute on function api.api_endpoints_list() to anon, authenticated;

CREATE OR REPLACE FUNCTION api.api_test_prepare(endpoint_id uuid, method text, path text)
 RETURNS void
 LANGUAGE plpgsql
 STABLE
 SET search_path TO 'pg_catalog'
AS $function$
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
$function$;
comment on function api.api_test_prepare(uuid,text,text) is 'POST /api/docs/test, before the replay: PT401 without an API token; PT400 for an unknown or deprecated endpoint, another method, a path that is not one of the endpoint''s, or the executor itself.';
grant execute on function api.api_test_prepare(uuid,text,text) to authenticated;

CREATE OR REPLACE FUNCTION api.api_test_record(endpoint_id uuid, method text, path text, request_headers jsonb, request_params jsonb, request_payload jsonb, response_status integer, response_time_ms integer, response_headers jsonb, response_body jsonb, error_message text)
 RETURNS jsonb
 LANGUAGE sql
 SET search_path TO 'pg_catalog'
AS $function$
    insert into app.api_test_results as r (
      api_endpoint_id, api_token_id, user_id, request_method, request_path, request_headers, request_params,
      request_payload, response_status, response_time_ms, response_headers, response_body, error_message, success)
    values (
      endpoint_id, nullif(auth.jwt() ->> 'token_id', '')::uuid, auth.uid(), method, path,
      private.json_capped(request_headers), private.json_capped(request_params), private.json_capped(request_payload),
      response_status, response_time_ms, private.json_capped(response_headers), private.json_capped(response_body),
      left(error_message, 2000),
      response_status between 200 and 399 and error_message is null)
    returning jsonb_build_object('id', r.id, 'success', r.success, 'executed_at', app.iso(r.executed_at))
  $function$;
comment on function api.api_test_record(uuid,text,text,jsonb,jsonb,jsonb,integer,integer,jsonb,jsonb,text) is 'POST /api/docs/test, after the replay: records the ApiTestResult for the caller''s token (each body capped at 16 KB, private.json_capped); success = status < 400 and no error.';
grant execute on function api.api_test_record(uuid,text,text,jsonb,jsonb,jsonb,integer,integer,jsonb,jsonb,text) to authenticated;

-- -----------------------------------------------------------------------------
-- Functions of private: internal helpers and trigger functions (request roles
-- run only those granted here)
-- -----------------------------------------------------------------------------

CREATE OR REPLACE FUNCTION private.api_endpoints_incoming(endpoints jsonb)
 RETURNS TABLE(http_method text, path text, controller text, action text, description text, tags text[])
 LANGUAGE sql
 IMMUTABLE
 SET search_path TO 'pg_catalog'
AS $function$
    select distinct on (upper(e.http_method), e.path)
           upper(e.http_method), e.path, e.controller, e.action, e.description, coalesce(e.tags, '{}')
      from jsonb_to_recordset(endpoints)
           as e(http_method text, path text, controller text, action text, description text, tags text[])
     order by upper(e.http_method), e.path
  $function$;

CREATE OR REPLACE FUNCTION private.endpoint_path_pattern(template text)
 RETURNS text
 LANGUAGE sql
 IMMUTABLE STRICT
 SET search_path TO 'pg_catalog'
AS $function$
    select '^' || replace(
                    regexp_replace(regexp_replace(template, '\{[^}/]+\}', chr(1), 'g'), '([^A-Za-z0-9_/\x01-])', '\\\1', 'g'),
                    chr(1), '[^/]+') || '$'
  $function$;
comment on function private.endpoint_path_pattern(text) is 'A regular expression for the concrete paths of an endpoint path template ({name} is one path segment).';
grant execute on function private.endpoint_path_pattern(text) to authenticated;

CREATE OR REPLACE FUNCTION private.sync_api_endpoints(endpoints jsonb)
 RETURNS TABLE(added integer, changed integer, retired integer, unchanged integer)
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog'
AS $function$
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
$function$;
comment on function private.sync_api_endpoints(jsonb) is 'Upserts the routes the gateway serves: new ones inserted, changed ones get last_updated = now() (discovered_at kept), unchanged ones untouched, ones no longer served marked deprecated. Returns the counts.';

-- -----------------------------------------------------------------------------
-- Tables: comments, row-level security, policies, grants, triggers
-- -----------------------------------------------------------------------------

-- app.api_endpoints
comment on table app.api_endpoints is 'The routes the gateway serves (GET /api/docs/endpoints), kept by private.sync_api_endpoints at every gateway start.';
alter table app.api_endpoints enable row level security;
drop policy if exists "Endpoints are readable by everyone" on app.api_endpoints;
create policy "Endpoints are readable by everyone" on app.api_endpoints
  as permissive for select to anon, authenticated
  using (true);
grant select on table app.api_endpoints to anon, authenticated;

-- app.api_test_results
comment on table app.api_test_results is 'ApiTestResult: one row per live test (POST /api/docs/test); the secret of the token is never stored, only its id.';
alter table app.api_test_results enable row level security;
drop policy if exists "Test results are readable by their owner" on app.api_test_results;
create policy "Test results are readable by their owner" on app.api_test_results
  as permissive for select to authenticated
  using ((user_id = ( SELECT auth.uid() AS uid)));
drop policy if exists "Test results are recorded by the owner of the token" on app.api_test_results;
create policy "Test results are recorded by the owner of the token" on app.api_test_results
  as permissive for insert to authenticated
  with check (((user_id = ( SELECT auth.uid() AS uid)) AND (api_token_id = (NULLIF((( SELECT auth.jwt() AS jwt) ->> 'token_id'::text), ''::text))::uuid)));
grant select, insert (api_endpoint_id, api_token_id, error_message, request_headers, request_method, request_params, request_path, request_payload, response_body, response_headers, response_status, response_time_ms, success, user_id) on table app.api_test_results to authenticated;

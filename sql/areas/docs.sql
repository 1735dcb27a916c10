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
-- The whole source of this area, after the areas before it in
-- sql/areas/areas.json: types, tables, indexes, triggers, policies, the api
-- functions, the helpers. To change it: edit it here, then
-- `npm run db -- areas --diff` writes the migration (docs/dba.md).
-- =============================================================================

-- =============================================================================
-- Tables
-- =============================================================================

CREATE TABLE app.api_endpoints (
    id uuid DEFAULT gen_random_uuid() NOT NULL,
    http_method text NOT NULL,
    path text NOT NULL,
    controller text NOT NULL,
    action text NOT NULL,
    description text,
    tags text[] DEFAULT '{}'::text[] NOT NULL,
    deprecated boolean DEFAULT false NOT NULL,
    discovered_at timestamp with time zone DEFAULT now() NOT NULL,
    last_updated timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT api_endpoints_action_check CHECK (((length(action) >= 1) AND (length(action) <= 200))),
    CONSTRAINT api_endpoints_controller_check CHECK (((length(controller) >= 1) AND (length(controller) <= 100))),
    CONSTRAINT api_endpoints_description_check CHECK ((length(description) <= 2000)),
    CONSTRAINT api_endpoints_http_method_check CHECK ((http_method = ANY (ARRAY['GET'::text, 'POST'::text, 'PUT'::text, 'DELETE'::text, 'PATCH'::text]))),
    CONSTRAINT api_endpoints_path_check CHECK (((path ~ '^/'::text) AND (length(path) <= 500))),
    CONSTRAINT api_endpoints_http_method_path_key UNIQUE (http_method, path),
    CONSTRAINT api_endpoints_pkey PRIMARY KEY (id)
);
COMMENT ON TABLE app.api_endpoints IS 'The routes the gateway serves (GET /api/docs/endpoints), kept by private.sync_api_endpoints at every gateway start.';
ALTER TABLE app.api_endpoints ENABLE ROW LEVEL SECURITY;
GRANT SELECT ON TABLE app.api_endpoints TO anon;
GRANT SELECT ON TABLE app.api_endpoints TO authenticated;

CREATE TABLE app.api_test_results (
    id uuid DEFAULT gen_random_uuid() NOT NULL,
    api_endpoint_id uuid NOT NULL,
    api_token_id uuid NOT NULL,
    user_id uuid NOT NULL,
    request_method text NOT NULL,
    request_path text NOT NULL,
    request_headers jsonb,
    request_params jsonb,
    request_payload jsonb,
    response_status integer NOT NULL,
    response_time_ms integer NOT NULL,
    response_headers jsonb,
    response_body jsonb,
    error_message text,
    success boolean NOT NULL,
    executed_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT api_test_results_error_message_check CHECK ((length(error_message) <= 2000)),
    CONSTRAINT api_test_results_request_headers_check CHECK (((request_headers IS NULL) OR (jsonb_typeof(request_headers) = 'object'::text))),
    CONSTRAINT api_test_results_request_method_check CHECK ((request_method = ANY (ARRAY['GET'::text, 'POST'::text, 'PUT'::text, 'DELETE'::text, 'PATCH'::text]))),
    CONSTRAINT api_test_results_request_params_check CHECK (((request_params IS NULL) OR (jsonb_typeof(request_params) = 'object'::text))),
    CONSTRAINT api_test_results_request_path_check CHECK ((length(request_path) <= 2048)),
    CONSTRAINT api_test_results_request_payload_check CHECK (((request_payload IS NULL) OR (jsonb_typeof(request_payload) = 'object'::text))),
    CONSTRAINT api_test_results_response_headers_check CHECK (((response_headers IS NULL) OR (jsonb_typeof(response_headers) = 'object'::text))),
    CONSTRAINT api_test_results_response_status_check CHECK (((response_status >= 100) AND (response_status <= 599))),
    CONSTRAINT api_test_results_response_time_ms_check CHECK ((response_time_ms >= 0)),
    CONSTRAINT api_test_results_pkey PRIMARY KEY (id),
    CONSTRAINT api_test_results_api_endpoint_id_fkey FOREIGN KEY (api_endpoint_id) REFERENCES app.api_endpoints(id) ON DELETE CASCADE,
    CONSTRAINT api_test_results_api_token_id_fkey FOREIGN KEY (api_token_id) REFERENCES app.api_tokens(id) ON DELETE CASCADE,
    CONSTRAINT api_test_results_user_id_fkey FOREIGN KEY (user_id) REFERENCES identity.users(id) ON DELETE CASCADE
);
COMMENT ON TABLE app.api_test_results IS 'ApiTestResult: one row per live test (POST /api/docs/test); the secret of the token is never stored, only its id.';
ALTER TABLE app.api_test_results ENABLE ROW LEVEL SECURITY;
GRANT SELECT ON TABLE app.api_test_results TO authenticated;
GRANT INSERT(api_endpoint_id) ON TABLE app.api_test_results TO authenticated;
GRANT INSERT(api_token_id) ON TABLE app.api_test_results TO authenticated;
GRANT INSERT(user_id) ON TABLE app.api_test_results TO authenticated;
GRANT INSERT(request_method) ON TABLE app.api_test_results TO authenticated;
GRANT INSERT(request_path) ON TABLE app.api_test_results TO authenticated;
GRANT INSERT(request_headers) ON TABLE app.api_test_results TO authenticated;
GRANT INSERT(request_params) ON TABLE app.api_test_results TO authenticated;
GRANT INSERT(request_payload) ON TABLE app.api_test_results TO authenticated;
GRANT INSERT(response_status) ON TABLE app.api_test_results TO authenticated;
GRANT INSERT(response_time_ms) ON TABLE app.api_test_results TO authenticated;
GRANT INSERT(response_headers) ON TABLE app.api_test_results TO authenticated;
GRANT INSERT(response_body) ON TABLE app.api_test_results TO authenticated;
GRANT INSERT(error_message) ON TABLE app.api_test_results TO authenticated;
GRANT INSERT(success) ON TABLE app.api_test_results TO authenticated;

-- =============================================================================
-- Indexes
-- =============================================================================

CREATE INDEX api_test_results_endpoint_idx ON app.api_test_results USING btree (api_endpoint_id);
CREATE INDEX api_test_results_executed_idx ON app.api_test_results USING btree (executed_at);
CREATE INDEX api_test_results_token_idx ON app.api_test_results USING btree (api_token_id);
CREATE INDEX api_test_results_user_idx ON app.api_test_results USING btree (user_id, executed_at DESC);

-- =============================================================================
-- Policies
-- =============================================================================

CREATE POLICY "Endpoints are readable by everyone" ON app.api_endpoints FOR SELECT TO anon, authenticated USING (true);

CREATE POLICY "Test results are readable by their owner" ON app.api_test_results FOR SELECT TO authenticated USING ((user_id = ( SELECT auth.uid() AS uid)));

CREATE POLICY "Test results are recorded by the owner of the token" ON app.api_test_results FOR INSERT TO authenticated WITH CHECK (((user_id = ( SELECT auth.uid() AS uid)) AND (api_token_id = (NULLIF((( SELECT auth.jwt() AS jwt) ->> 'token_id'::text), ''::text))::uuid)));

-- =============================================================================
-- Functions of api: what the gateway and the MCP server call, as the request's role
-- =============================================================================

CREATE FUNCTION api.api_endpoints_list() RETURNS jsonb
    LANGUAGE sql STABLE
    SET search_path TO 'pg_catalog'
    AS $$
    select coalesce(jsonb_agg(jsonb_build_object(
             'id', e.id, 'path', e.path, 'http_method', e.http_method, 'controller', e.controller,
             'action', e.action, 'description', e.description, 'tags', to_jsonb(e.tags),
             'deprecated', e.deprecated, 'discovered_at', app.iso(e.discovered_at),
             'last_updated', app.iso(e.last_updated))
           order by e.path, e.http_method), '[]'::jsonb)
      from app.api_endpoints e
  $$;
COMMENT ON FUNCTION api.api_endpoints_list() IS 'GET /api/docs/endpoints: the endpoints the gateway serves (and deprecated ones, flagged) as ApiEndpoint objects.';
GRANT EXECUTE ON FUNCTION api.api_endpoints_list() TO anon;
GRANT EXECUTE ON FUNCTION api.api_endpoints_list() TO authenticated;

CREATE FUNCTION api.api_test_prepare(endpoint_id uuid, method text, path text) RETURNS void
    LANGUAGE plpgsql STABLE
    SET search_path TO 'pg_catalog'
    AS $$
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

COMMENT ON FUNCTION api.api_test_prepare(endpoint_id uuid, method text, path text) IS 'POST /api/docs/test, before the replay: PT401 without an API token; PT400 for an unknown or deprecated endpoint, another method, a path that is not one of the endpoint''s, or the executor itself.';
GRANT EXECUTE ON FUNCTION api.api_test_prepare(endpoint_id uuid, method text, path text) TO authenticated;

CREATE FUNCTION api.api_test_record(endpoint_id uuid, method text, path text, request_headers jsonb, request_params jsonb, request_payload jsonb, response_status integer, response_time_ms integer, response_headers jsonb, response_body jsonb, error_message text) RETURNS jsonb
    LANGUAGE sql
    SET search_path TO 'pg_catalog'
    AS $$
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
  $$;

COMMENT ON FUNCTION api.api_test_record(endpoint_id uuid, method text, path text, request_headers jsonb, request_params jsonb, request_payload jsonb, response_status integer, response_time_ms integer, response_headers jsonb, response_body jsonb, error_message text) IS 'POST /api/docs/test, after the replay: records the ApiTestResult for the caller''s token (each body capped at 16 KB, private.json_capped); success = status < 400 and no error.';
GRANT EXECUTE ON FUNCTION api.api_test_record(endpoint_id uuid, method text, path text, request_headers jsonb, request_params jsonb, request_payload jsonb, response_status integer, response_time_ms integer, response_headers jsonb, response_body jsonb, error_message text) TO authenticated;

-- =============================================================================
-- Helpers (private, app, identity): internal helpers and trigger functions; request roles run only those granted here
-- =============================================================================

CREATE FUNCTION private.endpoint_path_pattern(template text) RETURNS text
    LANGUAGE sql IMMUTABLE STRICT
    SET search_path TO 'pg_catalog'
    AS $_$
    select '^' || replace(
                    regexp_replace(regexp_replace(template, '\{[^}/]+\}', chr(1), 'g'), '([^A-Za-z0-9_/\x01-])', '\\\1', 'g'),
                    chr(1), '[^/]+') || '$'
  $_$;

COMMENT ON FUNCTION private.endpoint_path_pattern(template text) IS 'A regular expression for the concrete paths of an endpoint path template ({name} is one path segment).';
GRANT EXECUTE ON FUNCTION private.endpoint_path_pattern(template text) TO authenticated;

CREATE FUNCTION private.api_endpoints_incoming(endpoints jsonb) RETURNS TABLE(http_method text, path text, controller text, action text, description text, tags text[])
    LANGUAGE sql IMMUTABLE
    SET search_path TO 'pg_catalog'
    AS $$
    select distinct on (upper(e.http_method), e.path)
           upper(e.http_method), e.path, e.controller, e.action, e.description, coalesce(e.tags, '{}')
      from jsonb_to_recordset(endpoints)
           as e(http_method text, path text, controller text, action text, description text, tags text[])
     order by upper(e.http_method), e.path
  $$;



CREATE FUNCTION private.sync_api_endpoints(endpoints jsonb) RETURNS TABLE(added integer, changed integer, retired integer, unchanged integer)
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog'
    AS $$
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

COMMENT ON FUNCTION private.sync_api_endpoints(endpoints jsonb) IS 'Upserts the routes the gateway serves: new ones inserted, changed ones get last_updated = now() (discovered_at kept), unchanged ones untouched, ones no longer served marked deprecated. Returns the counts.';

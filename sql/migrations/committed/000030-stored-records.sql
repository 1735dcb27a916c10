--! Previous: sha1:5e77352a23bd3decf2e293123efbabe4f64677cd
--! Hash: sha1:8da541995b5177801df5c6958ad125fbb039bd90
--! Message: stored-records

--! split: 1-current.sql
-- Enter migration here

--! split: 030-stored-records.sql
--------------------------------------------------------------------------------
-- What one caller can make the database keep is bounded (issue 27, finding 7)
--
-- The records of live tests (app.api_test_results) and of MCP tool calls
-- (app.mcp_tool_calls) keep request and response bodies. Each body is kept
-- whole up to 16 KB of JSON text; a larger one is replaced by a marker
-- object {"truncated": true, "bytes": <size of the JSON text>, "preview":
-- <its first 8 KB, as a string>}, so a stored body stays within about 16 KB
-- (the preview's escaping can at most double it). Records older than 30 days
-- are deleted by private.stored_records_prune(), which the MCP process runs
-- every minute with its other prunes (a batch of at most 10,000 rows of each
-- table per run).
--------------------------------------------------------------------------------

create or replace function private.json_capped(value jsonb, max_bytes integer default 16384) returns jsonb
  language plpgsql immutable
  set search_path = pg_catalog
  as $$
declare
  json_text text;
  size integer;
  preview text;
  preview_bytes integer := greatest(json_capped.max_bytes / 2, 0);
begin
  if value is null then
    return null;
  end if;
  json_text := value::text;
  size := octet_length(json_text);
  if size <= json_capped.max_bytes then
    return value;
  end if;
  preview := left(json_text, preview_bytes);
  -- Characters of several bytes: drop whole characters from the end (a
  -- character is at most 4 bytes, so a quarter of the excess at least, per
  -- step) until the bytes fit.
  while octet_length(preview) > preview_bytes loop
    preview := left(preview, length(preview) - ceil((octet_length(preview) - preview_bytes) / 4.0)::integer);
  end loop;
  return jsonb_build_object('truncated', true, 'bytes', size, 'preview', preview);
end;
$$;
comment on function private.json_capped(jsonb, integer) is
  'The value when its JSON text is at most max_bytes (default 16 KB); otherwise the marker {truncated: true, bytes, preview: the first max_bytes/2 bytes of its JSON text}.';

-- ---------------------------------------------------------------------------
-- Live test results
-- ---------------------------------------------------------------------------

create or replace function api.api_test_record(
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
      endpoint_id, nullif(auth.jwt() ->> 'token_id', '')::uuid, auth.uid(), method, path,
      private.json_capped(request_headers), private.json_capped(request_params), private.json_capped(request_payload),
      response_status, response_time_ms, private.json_capped(response_headers), private.json_capped(response_body),
      left(error_message, 2000),
      response_status between 200 and 399 and error_message is null)
    returning jsonb_build_object('id', r.id, 'success', r.success, 'executed_at', app.iso(r.executed_at))
  $$;
comment on function api.api_test_record(uuid, text, text, jsonb, jsonb, jsonb, integer, integer, jsonb, jsonb, text) is
  'POST /api/docs/test, after the replay: records the ApiTestResult for the caller''s token (each body capped at 16 KB, private.json_capped); '
  'success = status < 400 and no error.';
grant execute on function api.api_test_record(uuid, text, text, jsonb, jsonb, jsonb, integer, integer, jsonb, jsonb, text)
  to authenticated;
grant execute on function private.json_capped(jsonb, integer) to authenticated;

-- ---------------------------------------------------------------------------
-- MCP tool calls
-- ---------------------------------------------------------------------------

create or replace function private.mcp_record_call(
  user_id uuid, credential_kind text, credential_id uuid, client_id text, session_id uuid,
  tool text, arguments jsonb, outcome text, error_message text, duration_ms numeric
) returns void
  language sql volatile
  set search_path = pg_catalog
  as $$
    insert into app.mcp_tool_calls (user_id, credential_kind, credential_id, client_id, session_id, tool, arguments,
                                    outcome, error_message, duration_ms)
      values (user_id, credential_kind, credential_id, left(client_id, 200), session_id, left(tool, 100),
              private.json_capped(private.redact_secrets(arguments)), left(outcome, 100), left(error_message, 1000),
              greatest(duration_ms, 0))
  $$;
comment on function private.mcp_record_call(uuid, text, uuid, text, uuid, text, jsonb, text, text, numeric) is
  'Records one MCP tool call in the audit log (arguments redacted, then capped at 16 KB by private.json_capped).';

-- ---------------------------------------------------------------------------
-- Retention
-- ---------------------------------------------------------------------------

-- Safe: graphile-migrate runs the migration in one transaction, where CONCURRENTLY is impossible; these tables hold at most 30 days of records (pruned below); a DBA with a large one moves this index to a --! no-transaction migration.
-- squawk-ignore require-concurrent-index-creation
create index if not exists api_test_results_executed_idx on app.api_test_results (executed_at);
-- Safe: as above.
-- squawk-ignore require-concurrent-index-creation
create index if not exists mcp_tool_calls_called_idx on app.mcp_tool_calls (called_at);

create or replace function private.stored_records_prune(keep interval default '30 days', batch integer default 10000)
  returns integer
  language plpgsql volatile
  set search_path = pg_catalog
  as $$
declare
  tests integer;
  calls integer;
begin
  delete from app.api_test_results r
   where r.id in (select o.id from app.api_test_results o
                   where o.executed_at < now() - stored_records_prune.keep
                   limit stored_records_prune.batch);
  get diagnostics tests = row_count;
  delete from app.mcp_tool_calls c
   where c.id in (select o.id from app.mcp_tool_calls o
                   where o.called_at < now() - stored_records_prune.keep
                   limit stored_records_prune.batch);
  get diagnostics calls = row_count;
  return tests + calls;
end;
$$;
comment on function private.stored_records_prune(interval, integer) is
  'Deletes live test results and MCP tool-call records older than `keep` (30 days), at most `batch` rows of each table per call; returns how many. '
  'The MCP process calls it every minute.';

--------------------------------------------------------------------------------
-- Agent interface (MCP): request admission, sessions and the audit log
--
-- Everything an MCP process must remember between requests lives here, so
-- any replica serves any request:
--   * the per-IP request count (fixed one-minute windows; spec: 120 per
--     minute per IP on /mcp);
--   * sessions: the id handed out at `initialize`, whose user it belongs to
--     and what the client said about itself; a session ends with DELETE /mcp
--     or after a day without requests;
--   * the audit log: every tool call with caller, tool, arguments (secrets
--     redacted), outcome and duration; the caller reads their own, an
--     operator everyone's (admin.mcp_tool_calls).
-- The MCP server calls the private.* functions here as the database owner
-- (one statement each, outside the request's transaction).
--------------------------------------------------------------------------------

create table if not exists private.mcp_request_counts (
  client_ip    text not null,
  window_start timestamptz not null,
  requests     integer not null,
  primary key (client_ip, window_start)
);
comment on table private.mcp_request_counts is 'Requests to /mcp (and the OAuth endpoints) per client IP per minute.';

create table if not exists private.mcp_sessions (
  id               uuid primary key default gen_random_uuid(),
  user_id          uuid not null references identity.users (id) on delete cascade,
  client_name      text,
  client_version   text,
  protocol_version text,
  created_at       timestamptz not null default now(),
  last_seen_at     timestamptz not null default now(),
  ended_at         timestamptz
);
comment on table private.mcp_sessions is 'MCP sessions (Mcp-Session-Id), shared by every MCP process.';
create index if not exists mcp_sessions_user_idx on private.mcp_sessions (user_id);

-- How long a session lives without requests.
create or replace function private.mcp_session_idle_limit() returns interval
  language sql immutable
  set search_path = pg_catalog
  as $$
    select interval '24 hours'
  $$;

-- Admission of one request: counts it against the client IP's minute and, when
-- the request names a session, says whose live session it is (null when the
-- session is unknown, ended or idle too long). Touches the session at most
-- once a minute.
create or replace function private.mcp_admit(client_ip text, per_minute integer, session_id uuid default null)
  returns table (allowed boolean, request_limit integer, remaining integer, reset_at timestamptz, session_user_id uuid)
  language plpgsql volatile
  set search_path = pg_catalog
  as $$
declare
  this_window timestamptz := date_trunc('minute', now());
  counted integer;
  owner uuid;
begin
  insert into private.mcp_request_counts as r (client_ip, window_start, requests)
    values (mcp_admit.client_ip, this_window, 1)
    on conflict on constraint mcp_request_counts_pkey do update set requests = r.requests + 1
    returning r.requests into counted;
  if mcp_admit.session_id is not null then
    update private.mcp_sessions s
       set last_seen_at = case when s.last_seen_at < now() - interval '1 minute' then now() else s.last_seen_at end
     where s.id = mcp_admit.session_id
       and s.ended_at is null
       and s.last_seen_at > now() - private.mcp_session_idle_limit()
    returning s.user_id into owner;
  end if;
  return query select counted <= per_minute, per_minute, greatest(per_minute - counted, 0),
                      this_window + interval '1 minute', owner;
end;
$$;
comment on function private.mcp_admit(text, integer, uuid) is
  'Counts a request of a client IP (per-minute window) and returns whether it is within per_minute, plus the owner of the named live session.';

create or replace function private.mcp_session_open(user_id uuid, client_name text, client_version text, protocol_version text)
  returns uuid
  language sql volatile
  set search_path = pg_catalog
  as $$
    insert into private.mcp_sessions (user_id, client_name, client_version, protocol_version)
      values (user_id, left(client_name, 200), left(client_version, 100), left(protocol_version, 20))
      returning id
  $$;
comment on function private.mcp_session_open(uuid, text, text, text) is 'Starts an MCP session for a user (at initialize); returns its id.';

create or replace function private.mcp_session_end(session_id uuid, user_id uuid) returns boolean
  language sql volatile
  set search_path = pg_catalog
  as $$
    with ended as (
      update private.mcp_sessions s set ended_at = now()
       where s.id = mcp_session_end.session_id and s.user_id = mcp_session_end.user_id and s.ended_at is null
      returning 1)
    select exists (select from ended)
  $$;
comment on function private.mcp_session_end(uuid, uuid) is 'Ends a live session of the user (DELETE /mcp); false when there is none.';

--------------------------------------------------------------------------------
-- Audit log
--------------------------------------------------------------------------------

create table if not exists app.mcp_tool_calls (
  id              bigint generated always as identity primary key,
  user_id         uuid not null references identity.users (id) on delete cascade,
  credential_kind text not null check (credential_kind in ('api_token', 'oauth')),
  credential_id   uuid,
  client_id       text,
  session_id      uuid,
  tool            text not null,
  arguments       jsonb,
  outcome         text not null,
  error_message   text,
  duration_ms     numeric(12, 3) not null check (duration_ms >= 0),
  called_at       timestamptz not null default now()
);
comment on table app.mcp_tool_calls is
  'Every MCP tool call: who (user and credential), which tool, arguments (secrets redacted), outcome (ok or the error code), duration.';
comment on column app.mcp_tool_calls.client_id is 'The OAuth client (for OAuth access tokens).';
create index if not exists mcp_tool_calls_user_idx on app.mcp_tool_calls (user_id, id desc);

alter table app.mcp_tool_calls enable row level security;
grant select on app.mcp_tool_calls to authenticated;
drop policy if exists "Users read their own agent's tool calls" on app.mcp_tool_calls;
create policy "Users read their own agent's tool calls" on app.mcp_tool_calls
  for select to authenticated
  using (user_id = (select auth.uid()));

-- Values under keys that look like secrets are replaced, at any depth.
create or replace function private.redact_secrets(value jsonb) returns jsonb
  language plpgsql immutable
  set search_path = pg_catalog
  as $$
begin
  if value is null then
    return null;
  end if;
  case jsonb_typeof(value)
    when 'object' then
      return coalesce((
        select jsonb_object_agg(e.key,
                 case when e.key ~* '(pass(word)?|secret|token|credential|api[_-]?key|authori[sz]ation|cookie)'
                      then '"[redacted]"'::jsonb
                      else private.redact_secrets(e.value) end)
          from jsonb_each(value) e), '{}'::jsonb);
    when 'array' then
      return coalesce((select jsonb_agg(private.redact_secrets(e.value) order by e.ordinality)
                         from jsonb_array_elements(value) with ordinality e), '[]'::jsonb);
    else
      return value;
  end case;
end;
$$;
comment on function private.redact_secrets(jsonb) is 'The JSON value with every value under a secret-looking key (password, token, secret, ...) replaced by "[redacted]".';

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
              private.redact_secrets(arguments), left(outcome, 100), left(error_message, 1000), greatest(duration_ms, 0))
  $$;
comment on function private.mcp_record_call(uuid, text, uuid, text, uuid, text, jsonb, text, text, numeric) is
  'Records one MCP tool call in the audit log (arguments redacted).';

create or replace function private.mcp_call_json(c app.mcp_tool_calls) returns jsonb
  language sql stable
  set search_path = pg_catalog
  as $$
    select jsonb_build_object('id', c.id, 'tool', c.tool, 'arguments', c.arguments, 'outcome', c.outcome,
                              'error_message', c.error_message, 'duration_ms', c.duration_ms,
                              'credential_kind', c.credential_kind, 'credential_id', c.credential_id,
                              'client_id', c.client_id, 'session_id', c.session_id, 'called_at', app.iso(c.called_at))
  $$;
grant execute on function private.mcp_call_json(app.mcp_tool_calls) to authenticated;

-- GET /api/docs/agent-calls: the caller's agent's tool calls, newest first;
-- `before_id` pages back.
create or replace function api.mcp_tool_calls_mine(page_limit integer default 50, before_id bigint default null) returns jsonb
  language plpgsql stable
  set search_path = pg_catalog
  as $$
begin
  if page_limit is null or page_limit < 1 or page_limit > 100 then
    raise exception 'limit must be between 1 and 100' using errcode = 'PT400', hint = 'invalid_limit';
  end if;
  return jsonb_build_object('data', (
    select coalesce(jsonb_agg(private.mcp_call_json(c) order by c.id desc), '[]')
      from (select * from app.mcp_tool_calls t
             where t.user_id = auth.uid() and (before_id is null or t.id < before_id)
             order by t.id desc
             limit page_limit) c));
end;
$$;
comment on function api.mcp_tool_calls_mine(integer, bigint) is
  'GET /api/docs/agent-calls: the tool calls made with the caller''s credentials through the agent interface, newest first.';
grant execute on function api.mcp_tool_calls_mine(integer, bigint) to authenticated;

create or replace function admin.mcp_tool_calls(email text default null, max_rows integer default 100)
  returns table (id bigint, called_at timestamptz, user_email text, tool text, outcome text, duration_ms numeric,
                 credential_kind text, arguments jsonb, error_message text)
  language sql stable
  set search_path = pg_catalog
  as $$
    select c.id, c.called_at, u.email, c.tool, c.outcome, c.duration_ms, c.credential_kind, c.arguments, c.error_message
      from app.mcp_tool_calls c
      join identity.users u on u.id = c.user_id
     where mcp_tool_calls.email is null or u.email = lower(btrim(mcp_tool_calls.email))
     order by c.id desc
     limit max_rows
  $$;
comment on function admin.mcp_tool_calls(text, integer) is
  'The latest MCP tool calls (of one user when email is given): who, which tool, outcome, duration, arguments.';

--------------------------------------------------------------------------------
-- Pruning (every MCP process runs it periodically; safe from every replica)
--------------------------------------------------------------------------------

create or replace function private.mcp_prune() returns void
  language sql volatile
  set search_path = pg_catalog
  as $$
    delete from private.mcp_request_counts where window_start < now() - interval '5 minutes';
    delete from private.mcp_sessions
     where coalesce(ended_at, last_seen_at + private.mcp_session_idle_limit()) < now() - interval '7 days';
    delete from private.agent_tool_usage where called_at < now() - interval '1 hour';
  $$;
comment on function private.mcp_prune() is 'Deletes expired request counts, long-dead sessions and stale quota rows.';

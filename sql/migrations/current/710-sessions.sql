--------------------------------------------------------------------------------
-- Sessions end when they are ended (issue 14)
--
-- An access token carries the session_id of the login it came from. Logout
-- and refresh-token reuse revoke the session's refresh tokens with reason
-- 'logout' or 'reused'; from then on the session is ended and every request
-- with one of its access tokens is refused (PT401): the gateway calls
-- private.check_session in the statement that sets the request's claims, so
-- the check costs no extra round trip. The partial index holds ended
-- sessions only, so the check is one small index probe.
--
-- The revocation also notifies channel `session_ended` (payload: the
-- session id), on which every gateway process closes the session's SSE
-- streams and websockets.
--------------------------------------------------------------------------------

-- Safe: graphile-migrate runs the migration in one transaction, where CONCURRENTLY is impossible; the table is small (venues, or refresh tokens of ended sessions); a DBA with a large one moves this index to a --! no-transaction migration.
-- squawk-ignore require-concurrent-index-creation
create index if not exists refresh_tokens_ended_session_idx
  on identity.refresh_tokens (session_id)
  where revoked_reason in ('logout', 'reused');

drop function if exists private.raise_session_ended();
drop function if exists private.check_session(text);
create or replace function private.check_session(session_id uuid) returns boolean
  language plpgsql stable
  security definer
  set search_path = pg_catalog
  as $$
begin
  if check_session.session_id is not null and exists (
    select from identity.refresh_tokens t
     where t.session_id = check_session.session_id
       and t.revoked_reason in ('logout', 'reused')
  ) then
    raise exception 'the session of this access token has ended' using errcode = 'PT401', hint = 'session_ended';
  end if;
  return true;
end;
$$;
comment on function private.check_session(uuid) is
  'True unless the session (an access token''s session_id claim) was ended by logout or refresh-token reuse: then PT401 (hint session_ended). Null (no session): true.';
grant execute on function private.check_session(uuid) to anon, authenticated, service_role;

-- Which of the given sessions have ended (for a gateway re-checking its open
-- streams after its LISTEN connection was re-established).
create or replace function private.sessions_ended(session_ids uuid[]) returns setof uuid
  language sql stable
  security definer
  set search_path = pg_catalog
  as $$
    select distinct t.session_id
      from identity.refresh_tokens t
     where t.session_id = any (sessions_ended.session_ids)
       and t.revoked_reason in ('logout', 'reused')
  $$;
comment on function private.sessions_ended(uuid[]) is
  'The sessions among session_ids that logout or refresh-token reuse has ended.';

create or replace function private.tg_refresh_tokens__notify_session_ended() returns trigger
  language plpgsql volatile
  set search_path = pg_catalog
  as $$
-- new_rows is the statement's transition table (see the trigger below).
-- @plpgsql_check_options: newtable = new_rows
begin
  perform pg_notify('session_ended', s.session_id::text)
     from (select distinct n.session_id from new_rows n where n.revoked_reason in ('logout', 'reused')) s;
  return null;
end;
$$;
comment on function private.tg_refresh_tokens__notify_session_ended() is
  'Trigger: NOTIFY session_ended with the id of every session a statement ended (logout or reuse).';

drop trigger if exists _900_notify_session_ended on identity.refresh_tokens;
create trigger _900_notify_session_ended after update on identity.refresh_tokens
  referencing new table as new_rows
  for each statement execute function private.tg_refresh_tokens__notify_session_ended();

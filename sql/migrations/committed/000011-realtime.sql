--! Previous: sha1:be55dd413e16377fc3a882916b066327a0cd111e
--! Hash: sha1:47df0dca9220abbbaef74fcd8a93008956eebe25
--! Message: realtime

--------------------------------------------------------------------------------
-- Realtime feed of upcoming events (SSE stream and supabase-js subscriptions)
--
-- Builds on the change log of 000010 (app.change_log, ids in commit order,
-- NOTIFY on `event_changes` with ids only). The gateway LISTENs on one
-- connection per process and, after each notification, reads the log by id
-- range as each subscribed user through the functions below, so what a
-- stream shows is decided here:
--
--   api.event_stream_open       registers a stream (per-user cap, counted
--                               here so it holds across replicas) and answers
--                               with a snapshot, or the resume point
--   api.event_stream_changes    the messages of a range of changes for the
--                               caller: insert / update / delete as the caller
--                               sees them (their communities' events that have
--                               not ended), Event JSON with __sync_meta
--   api.realtime_event_changes  the same range as raw app.events rows for the
--                               supabase-js compatible websocket, filtered by
--                               row-level security like Supabase Realtime
--
-- Three things besides event rows can make an event appear in or leave a
-- caller's feed, and all three are written to the log, so a stream resumed
-- with Last-Event-ID replays them like any other change:
--   * the event ends (effective end passes): an 'expire' entry, written by
--     private.log_event_expiries(), which every gateway calls periodically
--     (exactly once per event: a watermark under the log's lock);
--   * the caller joins or leaves a community, or their role changes: the
--     membership is logged (table_name 'community_members') and expands into
--     one message per upcoming event of that community;
--   * the event moves to another community or its dates move: old and new row
--     are both logged (old_data), and visibility is judged for each.
--------------------------------------------------------------------------------

--------------------------------------------------------------------------------
-- The change log: old rows, expiries, memberships, pruning watermark
--------------------------------------------------------------------------------

alter table app.change_log add column old_data jsonb;
comment on column app.change_log.old_data is 'For an update: the row before it. Null otherwise.';
comment on column app.change_log.changed_at is
  'When the change took the log''s lock (clock time, so increasing with id); pruning is by this age.';
comment on table app.change_log is
  'Changes in commit order (id): app.events rows (insert, update, delete, and expire when an event ends) and '
  'app.community_members rows. Read by the realtime feed. Not granted to request roles.';

alter table app.change_log drop constraint change_log_operation_check;
alter table app.change_log add constraint change_log_operation_check
  check (operation in ('insert', 'update', 'delete', 'expire'));

create index change_log_changed_at_idx on app.change_log (changed_at);

-- One row. pruned_through: every id at or below it may be gone (a stream
-- resuming from an older id gets a fresh snapshot). expired_through: events
-- whose effective end is before it have their 'expire' entry.
create table app.change_log_state (
  singleton       boolean primary key default true check (singleton),
  pruned_through  bigint not null default 0,
  expired_through timestamptz not null default now()
);
comment on table app.change_log_state is
  'Watermarks of the change log: pruned_through (ids at or below may be gone), expired_through (expiries logged up to).';
alter table app.change_log_state enable row level security;
insert into app.change_log_state default values;

-- Every writer of the change log takes this one lock, held until commit, so
-- ids become visible in commit order (readers never see a gap fill in later).
create function private.lock_change_log() returns void
  language sql volatile
  set search_path = pg_catalog
  as $$
    select pg_advisory_xact_lock(hashtextextended('app.change_log', 0))
  $$;
comment on function private.lock_change_log() is
  'The lock every change-log writer holds until commit, so change ids appear in commit order.';

-- Appends one entry under that lock, stamped with the clock time taken after
-- the lock (so changed_at grows with id); returns its id.
create function private.append_change(operation text, table_name text, record_id uuid, row_data jsonb, old_data jsonb)
  returns bigint
  language plpgsql volatile
  set search_path = pg_catalog
  as $$
declare
  change_id bigint;
begin
  perform private.lock_change_log();
  insert into app.change_log as c (operation, table_name, record_id, row_data, old_data, changed_at)
    values (append_change.operation, append_change.table_name, append_change.record_id,
            append_change.row_data, append_change.old_data, clock_timestamp())
    returning c.id into change_id;
  return change_id;
end;
$$;
comment on function private.append_change(text, text, uuid, jsonb, jsonb) is
  'Appends a change-log entry under private.lock_change_log(); returns its id.';

-- Event changes: as before, plus the old row of an update.
create or replace function private.tg_events__log_change() returns trigger
  language plpgsql volatile
  security definer
  set search_path = pg_catalog
  as $$
declare
  changed record;
  change_id bigint;
begin
  if tg_op = 'DELETE' then
    changed := old;
  else
    changed := new;
  end if;
  change_id := private.append_change(lower(tg_op), tg_table_name, changed.id, to_jsonb(changed),
                                     case when tg_op = 'UPDATE' then to_jsonb(old) end);
  perform pg_notify('event_changes', json_build_object('id', change_id, 'event_id', changed.id)::text);
  return null;
end;
$$;
comment on function private.tg_events__log_change() is
  'Trigger: logs an event change (with the old row of an update) to app.change_log in commit order and NOTIFYs event_changes with {id, event_id}.';

-- Membership changes change which events a user's feed shows.
create function private.tg_community_members__log_change() returns trigger
  language plpgsql volatile
  security definer
  set search_path = pg_catalog
  as $$
declare
  changed record;
  change_id bigint;
begin
  if tg_op = 'DELETE' then
    changed := old;
  else
    changed := new;
  end if;
  if tg_op = 'UPDATE' and to_jsonb(old) = to_jsonb(new) then
    return null;
  end if;
  change_id := private.append_change(lower(tg_op), tg_table_name, changed.community_id, to_jsonb(changed),
                                     case when tg_op = 'UPDATE' then to_jsonb(old) end);
  perform pg_notify('event_changes', json_build_object('id', change_id, 'community_id', changed.community_id)::text);
  return null;
end;
$$;
comment on function private.tg_community_members__log_change() is
  'Trigger: logs a membership change to app.change_log (record_id = community) and NOTIFYs event_changes with {id, community_id}.';

create trigger _900_log_change after insert or update or delete on app.community_members
  for each row execute function private.tg_community_members__log_change();

-- Expiries: one 'expire' entry per event whose effective end passed since the
-- last call. An event is upcoming while now <= effective end, so the entry
-- for an event ending at E is written by the call whose window
-- [expired_through, clock) holds E. Calls and event changes take the same
-- lock, so a change logged while an event was still upcoming is always
-- followed (higher id) by its expiry. Safe to call from every replica.
create index events_effective_end_idx on app.events (private.event_effective_end(starts_at, ends_at));

create function private.log_event_expiries() returns bigint
  language plpgsql volatile
  set search_path = pg_catalog
  as $$
declare
  since timestamptz;
  upto timestamptz;
  logged bigint;
  last_id bigint;
begin
  perform private.lock_change_log();
  upto := clock_timestamp();
  select s.expired_through into since from app.change_log_state s for update;
  if upto <= since then
    return 0;
  end if;
  with expired as (
    insert into app.change_log (operation, table_name, record_id, row_data, changed_at)
    select 'expire', 'events', e.id, to_jsonb(e), upto
      from app.events e
     where private.event_effective_end(e.starts_at, e.ends_at) >= since
       and private.event_effective_end(e.starts_at, e.ends_at) < upto
     order by private.event_effective_end(e.starts_at, e.ends_at), e.id
    returning id
  )
  select count(*), max(id) into logged, last_id from expired;
  update app.change_log_state set expired_through = upto;
  if logged > 0 then
    perform pg_notify('event_changes', json_build_object('id', last_id, 'expired', logged)::text);
  end if;
  return logged;
end;
$$;
comment on function private.log_event_expiries() is
  'Logs an expire entry for every event whose effective end passed since the last call (exactly once, across replicas); returns how many. Called periodically by the gateway.';

-- Pruning deletes a prefix of ids (everything up to the newest entry older
-- than the interval) and records it, so "is this id still resumable" is one
-- comparison. Several replicas pruning at once only repeat the same delete.
create or replace function admin.prune_change_log(older_than interval default '30 days') returns bigint
  language plpgsql volatile
  set search_path = pg_catalog
  as $$
declare
  cutoff bigint;
  gone bigint;
begin
  select max(c.id) into cutoff from app.change_log c where c.changed_at < now() - older_than;
  if cutoff is null then
    return 0;
  end if;
  update app.change_log_state set pruned_through = greatest(pruned_through, cutoff);
  delete from app.change_log c where c.id <= cutoff;
  get diagnostics gone = row_count;
  return gone;
end;
$$;
comment on function admin.prune_change_log(interval) is
  'Deletes change-log entries up to the newest one older than the interval (default 30 days) and records the watermark; returns how many. The gateway calls it periodically (CHANGE_LOG_RETENTION_HOURS).';

-- Where the log stands, read in one snapshot: the newest id, and the
-- watermarks.
create function private.change_log_position()
  returns table (head bigint, pruned_through bigint, expired_through timestamptz)
  language sql stable
  security definer
  set search_path = pg_catalog
  as $$
    select greatest(s.pruned_through, coalesce((select max(c.id) from app.change_log c), 0)),
           s.pruned_through, s.expired_through
      from app.change_log_state s
  $$;
comment on function private.change_log_position() is
  'The newest change id (or the prune watermark when the log is empty), the prune watermark and the expiry watermark.';
grant execute on function private.change_log_position() to authenticated;

--------------------------------------------------------------------------------
-- Live streams: registrations and the per-user cap
--
-- Every open SSE stream and every websocket with a joined channel is a row
-- here; the gateway holding it refreshes expires_at (heartbeat) and deletes
-- it on close. Rows of a gateway that died stop counting when they expire.
-- The cap is counted here, under a per-user lock, so it holds across
-- replicas.
--------------------------------------------------------------------------------

create table app.event_streams (
  id         uuid primary key default gen_random_uuid(),
  user_id    uuid not null references app.profiles (id) on delete cascade,
  gateway    text not null check (length(gateway) between 1 and 100),
  kind       text not null check (kind in ('sse', 'websocket')),
  opened_at  timestamptz not null default now(),
  expires_at timestamptz not null
);
comment on table app.event_streams is
  'Open realtime connections (SSE streams, websockets), one row each; counted for the per-user cap while expires_at is in the future.';
create index event_streams_user_idx on app.event_streams (user_id, expires_at);
create index event_streams_expires_idx on app.event_streams (expires_at);

alter table app.event_streams enable row level security;
grant select, insert (user_id, gateway, kind, expires_at) on app.event_streams to authenticated;
create policy "Users can see their own streams" on app.event_streams
  for select to authenticated
  using (user_id = (select auth.uid()));
create policy "Users can open their own streams" on app.event_streams
  for insert to authenticated
  with check (user_id = (select auth.uid()));

create function private.max_event_streams() returns integer
  language sql immutable parallel safe
  set search_path = pg_catalog
  as $$
    select 5
  $$;
comment on function private.max_event_streams() is
  'How many realtime connections (SSE streams and websockets together) one user may hold open at once.';
grant execute on function private.max_event_streams() to authenticated;

create function private.event_stream_register(gateway text, kind text, ttl_seconds integer) returns uuid
  language plpgsql volatile
  set search_path = pg_catalog
  as $$
declare
  caller uuid := auth.uid();
  live integer;
  stream uuid;
begin
  if caller is null then
    raise exception 'not signed in' using errcode = 'PT401';
  end if;
  perform pg_advisory_xact_lock(hashtextextended('app.event_streams:' || caller::text, 0));
  select count(*) into live from app.event_streams s where s.user_id = caller and s.expires_at > now();
  if live >= private.max_event_streams() then
    raise exception 'too many open streams: at most % per user', private.max_event_streams()
      using errcode = 'PT429', hint = 'too_many_streams';
  end if;
  insert into app.event_streams as s (user_id, gateway, kind, expires_at)
    values (caller, event_stream_register.gateway, event_stream_register.kind,
            now() + make_interval(secs => greatest(ttl_seconds, 1)))
    returning s.id into stream;
  return stream;
end;
$$;
comment on function private.event_stream_register(text, text, integer) is
  'Registers a realtime connection of the caller for ttl_seconds (renewed by the gateway). PT429 too_many_streams past the cap.';
grant execute on function private.event_stream_register(text, text, integer) to authenticated;

-- Called by the gateway (as the owner) for the connections it holds.
create function private.event_streams_touch(ids uuid[], ttl_seconds integer) returns integer
  language plpgsql volatile
  set search_path = pg_catalog
  as $$
declare
  touched integer;
begin
  update app.event_streams s set expires_at = now() + make_interval(secs => greatest(ttl_seconds, 1))
   where s.id = any(ids);
  get diagnostics touched = row_count;
  delete from app.event_streams s where s.expires_at < now() - interval '1 hour';
  return touched;
end;
$$;
comment on function private.event_streams_touch(uuid[], integer) is
  'Heartbeat: extends the registrations a gateway still holds; drops registrations expired for an hour.';

create function private.event_streams_close(ids uuid[]) returns integer
  language sql volatile
  set search_path = pg_catalog
  as $$
    with gone as (delete from app.event_streams s where s.id = any(ids) returning 1)
    select count(*)::integer from gone
  $$;
comment on function private.event_streams_close(uuid[]) is 'Removes the registrations of closed connections.';

--------------------------------------------------------------------------------
-- SSE: GET /api/mobile/events/upcoming/stream
--------------------------------------------------------------------------------

create type api.event_stream_start as (stream_id uuid, mode text, last_event_id bigint, events jsonb);

-- Opens a stream: registers it (cap), then either resumes after
-- last_event_id (when the log still holds everything after it) or answers
-- with a snapshot: the caller's upcoming events (GET /upcoming's list) and the
-- change id it is consistent with, read in one statement. mode: 'resume',
-- 'snapshot' (no id given) or 'reset' (the id is older than the log keeps, or
-- unknown).
create function api.event_stream_open(gateway text, last_event_id bigint, public_url text, ttl_seconds integer)
  returns setof api.event_stream_start
  language plpgsql volatile
  set search_path = pg_catalog
  as $$
declare
  stream uuid := private.event_stream_register(gateway, 'sse', ttl_seconds);
  log_head bigint;
  log_pruned bigint;
begin
  if last_event_id is not null then
    select p.head, p.pruned_through into log_head, log_pruned from private.change_log_position() p;
    if last_event_id >= log_pruned and last_event_id <= log_head then
      return query select stream, 'resume'::text, last_event_id, null::jsonb;
      return;
    end if;
  end if;
  -- Events whose end is before expired_through have their expiry in the log
  -- at or below head: leave them out, as that entry says.
  return query
    select stream,
           case when last_event_id is null then 'snapshot' else 'reset' end,
           p.head,
           coalesce((
             select jsonb_agg(u.event || jsonb_build_object('__sync_meta', jsonb_build_object(
                      'operation', 'insert', 'table', 'events', 'timestamp', app.iso(now())))
                    order by u.ord)
               from api.events_upcoming(public_url) with ordinality as u(event, ord)
              where private.event_effective_end((u.event ->> 'date')::timestamptz, (u.event ->> 'end_time')::timestamptz)
                    >= greatest(now(), p.expired_through)
           ), '[]'::jsonb)
      from private.change_log_position() p;
end;
$$;
comment on function api.event_stream_open(text, bigint, text, integer) is
  'GET /api/mobile/events/upcoming/stream: registers the stream (PT429 too_many_streams past the cap) and returns the snapshot (upcoming events with __sync_meta, and the change id it is consistent with) or the resume point.';
grant execute on function api.event_stream_open(text, bigint, text, integer) to authenticated;

create type api.event_stream_message as (change_id bigint, operation text, event jsonb);

-- The messages of the changes after_id < id <= upto_id for the caller, in
-- change order (a membership change expands into one message per upcoming
-- event of the community, soonest first).
--
-- An event is in the caller's feed at a moment when it belongs to one of the
-- caller's communities and its effective end is not before that moment (the
-- rule of GET /upcoming). Each event change is judged at its own time
-- (changed_at) before and after: in before and after: update; only after:
-- insert; only before: delete; neither: nothing. An expiry is a delete. The
-- caller's communities are those of now (memberships have no history; their
-- changes are logged and expand as described above).
--
-- Security definer: it reads the log, which request roles cannot; the caller
-- comes from auth.uid() and the Event objects from private.event_json, as
-- for every other endpoint.
create function api.event_stream_changes(after_id bigint, upto_id bigint, public_url text)
  returns setof api.event_stream_message
  language plpgsql stable
  security definer
  set search_path = pg_catalog
  as $$
begin
  if after_id < (select s.pruned_through from app.change_log_state s) then
    raise exception 'the changes after % are no longer kept', after_id
      using errcode = 'PT410', hint = 'last_event_id_expired';
  end if;
  return query
    with mine as (
      select array(select private.caller_community_ids()) as communities,
             app.my_node_id() as node_id
    ),
    log as (
      select c.id, c.operation, c.table_name, c.changed_at, c.row_data, c.old_data
        from app.change_log c
       where c.id > after_id and c.id <= upto_id
    ),
    event_changes as (
      select l.id, l.operation, l.changed_at,
             jsonb_populate_record(null::app.events, l.row_data) as new_row,
             jsonb_populate_record(null::app.events, coalesce(l.old_data, l.row_data)) as old_row
        from log l
       where l.table_name = 'events'
    ),
    judged as (
      select ch.id, ch.changed_at, ch.new_row,
             case
               when ch.operation = 'insert' then false
               when ch.operation = 'expire' then (ch.old_row).community_id = any(m.communities)
               else (ch.old_row).community_id = any(m.communities)
                    and private.event_effective_end((ch.old_row).starts_at, (ch.old_row).ends_at) >= ch.changed_at
             end as was_in,
             ch.operation in ('insert', 'update')
               and (ch.new_row).community_id = any(m.communities)
               and private.event_effective_end((ch.new_row).starts_at, (ch.new_row).ends_at) >= ch.changed_at
               as is_in
        from event_changes ch, mine m
    ),
    event_messages as (
      select j.id, case when j.was_in and j.is_in then 'update' when j.is_in then 'insert' else 'delete' end as op,
             j.new_row as event_row, j.changed_at, 0::bigint as ord
        from judged j
       where j.was_in or j.is_in
    ),
    membership_changes as (
      select l.id, l.operation, l.changed_at, (l.row_data ->> 'community_id')::uuid as community_id, m.communities
        from log l, mine m
       where l.table_name = 'community_members'
         and (l.row_data ->> 'member_node_id')::uuid = m.node_id
    ),
    membership_messages as (
      select mc.id, mc.operation as op,
             e as event_row, mc.changed_at,
             row_number() over (partition by mc.id order by e.starts_at, e.id) as ord
        from membership_changes mc
        join app.events e
          on e.community_id = mc.community_id
         and private.event_effective_end(e.starts_at, e.ends_at) >= now()
       where (mc.operation <> 'delete') = (mc.community_id = any(mc.communities))
         -- an event changed later in this range gets its own message then
         and not exists (select from log l2 where l2.table_name = 'events' and l2.id > mc.id
                                             and (l2.row_data ->> 'id')::uuid = e.id)
    ),
    messages as (
      select * from event_messages
      union all
      select * from membership_messages
    )
    select ms.id, ms.op,
           private.event_json(ms.event_row, public_url) || jsonb_build_object('__sync_meta', jsonb_build_object(
             'operation', ms.op, 'table', 'events', 'timestamp', app.iso(ms.changed_at)))
      from messages ms
     order by ms.id, ms.ord;
end;
$$;
comment on function api.event_stream_changes(bigint, bigint, text) is
  'Messages of the upcoming-events stream for the changes after_id < id <= upto_id, as the caller sees them: (change_id, insert|update|delete, Event with __sync_meta). PT410 last_event_id_expired when after_id is older than the log keeps.';
grant execute on function api.event_stream_changes(bigint, bigint, text) to authenticated;

-- Who can get any message from a range of changes: the current members of
-- every community an event change touches (before and after it) and the
-- users whose memberships changed. The hub reads the range as each of them
-- and moves everyone else's streams past it without a query. A superset of
-- api.event_stream_changes' readers by construction (it needs a current
-- membership in one of those communities, or its own membership change).
-- PT410 like api.event_stream_changes when the range starts below the
-- prune watermark (then every stream is read and told).
create function private.event_stream_audience(after_id bigint, upto_id bigint)
  returns setof uuid
  language plpgsql stable
  security definer
  set search_path = pg_catalog
  as $$
begin
  if after_id < (select s.pruned_through from app.change_log_state s) then
    raise exception 'the changes after % are no longer kept', after_id
      using errcode = 'PT410', hint = 'last_event_id_expired';
  end if;
  return query
    with log as (
      select c.table_name, c.row_data, c.old_data
        from app.change_log c
       where c.id > after_id and c.id <= upto_id
    ),
    touched as (
      select (l.row_data ->> 'community_id')::uuid as community_id from log l where l.table_name = 'events'
      union
      select (l.old_data ->> 'community_id')::uuid from log l where l.table_name = 'events' and l.old_data is not null
    )
    select p.id
      from app.community_members m
      join app.profiles p on p.node_id = m.member_node_id
     where m.community_id in (select t.community_id from touched t)
    union
    select p.id
      from log l
      join app.profiles p on p.node_id = (l.row_data ->> 'member_node_id')::uuid
     where l.table_name = 'community_members';
end;
$$;
comment on function private.event_stream_audience(bigint, bigint) is
  'The users who may get a message of the upcoming stream from the changes after_id < id <= upto_id (a superset). Called by the gateway to skip everyone else. PT410 below the prune watermark.';

--------------------------------------------------------------------------------
-- supabase-js postgres_changes (the gateway's /realtime/v1/websocket)
--
-- Raw rows of app.events, as Supabase Realtime sends them: an insert or
-- update is delivered when the caller may read the row; a delete carries
-- only the primary key and is not filtered (as on Supabase, where RLS does not
-- apply to deletes). Expiries and memberships are not row changes of
-- app.events and are not sent here.
--
-- "May read" is one function, private.event_readable, used both by the row
-- -level-security policy of app.events and here on the row as it was at the
-- change (the row may be gone by the time the change is read, e.g. inserted
-- and deleted within one batch).
--------------------------------------------------------------------------------

-- No `set search_path` here, on purpose: it references nothing, and a SQL
-- function with a SET clause cannot be inlined, so the policy would call it
-- once per row (measured: upcoming list 7 ms → 20 ms). When the rule starts
-- reading tables, qualify every name and keep it inlinable.
create function private.event_readable(community_id uuid) returns boolean
  language sql stable
  as $$
    -- Any signed-in user may read every event (GET /api/mobile/events/{id});
    -- the policy below applies this to the authenticated role.
    select true
  $$;
comment on function private.event_readable(uuid) is
  'Whether the signed-in caller may read an event of the community (row-level security of app.events and the postgres_changes feed).';
grant execute on function private.event_readable(uuid) to authenticated;

alter policy "Events are visible to signed-in users" on app.events
  using (private.event_readable(community_id));

create function private.event_log_range(after_id bigint, upto_id bigint)
  returns table (id bigint, operation text, record_id uuid, changed_at timestamptz, row_data jsonb)
  language sql stable
  security definer
  set search_path = pg_catalog
  as $$
    select c.id, c.operation, c.record_id, c.changed_at,
           case when c.operation = 'delete' then null else c.row_data end
      from app.change_log c
     where c.id > after_id and c.id <= upto_id
       and c.table_name = 'events'
       and c.operation in ('insert', 'update', 'delete')
  $$;
comment on function private.event_log_range(bigint, bigint) is
  'Row changes of app.events in an id range (the row after an insert or update; nothing but the id for a delete).';
grant execute on function private.event_log_range(bigint, bigint) to authenticated;

create type api.realtime_change as (change_id bigint, type text, commit_timestamp text, record jsonb, old_record jsonb);

create function api.realtime_event_changes(after_id bigint, upto_id bigint)
  returns setof api.realtime_change
  language sql stable
  set search_path = pg_catalog
  as $$
    select l.id,
           upper(l.operation),
           to_char(l.changed_at at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"'),
           case when l.operation = 'delete' then null else l.row_data end,
           case when l.operation = 'insert' then null else jsonb_build_object('id', l.record_id) end
      from private.event_log_range(after_id, upto_id) l
     where l.operation = 'delete'
        or private.event_readable((l.row_data ->> 'community_id')::uuid)
     order by l.id
  $$;
comment on function api.realtime_event_changes(bigint, bigint) is
  'Row changes of app.events after_id < id <= upto_id that the caller may read (private.event_readable on the row as changed), for postgres_changes: (change_id, INSERT|UPDATE|DELETE, commit_timestamp, record, old_record with the primary key).';
grant execute on function api.realtime_event_changes(bigint, bigint) to authenticated;

create function api.realtime_connect(gateway text, ttl_seconds integer) returns uuid
  language sql volatile
  set search_path = pg_catalog
  as $$
    select private.event_stream_register(gateway, 'websocket', ttl_seconds)
  $$;
comment on function api.realtime_connect(text, integer) is
  '/realtime/v1/websocket: registers the caller''s websocket (first joined channel) under the same cap as SSE streams (PT429 too_many_streams).';
grant execute on function api.realtime_connect(text, integer) to authenticated;

create type api.realtime_column as (name text, type text);

create function api.realtime_columns() returns setof api.realtime_column
  language sql stable
  set search_path = pg_catalog
  as $$
    select a.attname::text, t.typname::text
      from pg_catalog.pg_attribute a
      join pg_catalog.pg_type t on t.oid = a.atttypid
     where a.attrelid = 'app.events'::regclass and a.attnum > 0 and not a.attisdropped
     order by a.attnum
  $$;
comment on function api.realtime_columns() is 'The columns of app.events with their type names, as postgres_changes messages list them.';
grant execute on function api.realtime_columns() to authenticated;

--------------------------------------------------------------------------------
-- Supabase: app.events in the supabase_realtime publication
--
-- On a Supabase project the publication exists and Supabase Realtime serves
-- postgres_changes for the tables in it; elsewhere there is nothing to do.
-- A function, so a DBA can call it again after creating the publication.
--------------------------------------------------------------------------------

create function admin.publish_events_to_supabase_realtime() returns boolean
  language plpgsql volatile
  set search_path = pg_catalog
  as $$
begin
  if not exists (select from pg_catalog.pg_publication p where p.pubname = 'supabase_realtime' and not p.puballtables) then
    return false;
  end if;
  if not exists (
    select from pg_catalog.pg_publication_tables t
     where t.pubname = 'supabase_realtime' and t.schemaname = 'app' and t.tablename = 'events'
  ) then
    alter publication supabase_realtime add table app.events;
  end if;
  return true;
end;
$$;
comment on function admin.publish_events_to_supabase_realtime() is
  'Adds app.events to the supabase_realtime publication where it exists (Supabase); returns whether it did or it was already there.';

select admin.publish_events_to_supabase_realtime();

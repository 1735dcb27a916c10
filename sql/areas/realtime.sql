-- =============================================================================
-- Realtime: the change log, the upcoming-events stream, postgres_changes
-- =============================================================================
-- The change log and the upcoming-events stream. Triggers write every change
-- of app.events and of memberships to app.change_log, with ids in commit order
-- (a writer takes the log's lock), and NOTIFY event_changes with ids only. Each
-- gateway LISTENs once and reads the log by id range:
--
--   api.event_stream_open / private.event_streams_open
--                              registers a stream (at most 5 per user, counted
--                              here so the cap holds across replicas) and
--                              answers with a snapshot, or the resume point
--   api.event_stream_changes   the messages of a range for the caller
--   private.event_stream_fanout  the same for every listening user at once (one
--                              row per change and view): what each user gets
--                              equals what the per-user path gives them
--   api.realtime_event_changes raw rows for the supabase-js websocket
--
-- An event that ends is an 'expire' entry (private.log_event_expiries, exactly
-- once per event); joining or leaving a community expands to that community's
-- upcoming events; a moved event is judged before and after. The log is pruned
-- with a watermark; a Last-Event-ID below it resets the stream.
--
-- Code: gateway/routes/stream.ts, gateway/realtime/hub.ts, gateway/realtime/opener.ts, gateway/realtime/websocket.ts
-- pgTAP: supabase/tests/realtime.test.sql
--
-- The whole source of this area, after the areas before it in
-- sql/areas/areas.json: types, tables, indexes, triggers, policies, the api
-- functions, the helpers. To change it: edit it here, then
-- `npm run db -- areas --diff` writes the migration (docs/dba.md).
-- =============================================================================

-- =============================================================================
-- Types
-- =============================================================================

CREATE TYPE api.event_stream_message AS (
	change_id bigint,
	operation text,
	event jsonb
);

CREATE TYPE api.event_stream_start AS (
	stream_id uuid,
	mode text,
	last_event_id bigint,
	events jsonb
);

CREATE TYPE api.realtime_change AS (
	change_id bigint,
	type text,
	commit_timestamp text,
	record jsonb,
	old_record jsonb
);

CREATE TYPE api.realtime_column AS (
	name text,
	type text
);

CREATE TYPE private.event_stream_delivery AS (
	change_id bigint,
	operation text,
	event jsonb,
	user_ids uuid[]
);
COMMENT ON TYPE private.event_stream_delivery IS 'One message of the upcoming stream and the users who get it (private.event_stream_fanout).';

-- =============================================================================
-- Tables
-- =============================================================================

CREATE TABLE app.change_log (
    id bigint GENERATED ALWAYS AS IDENTITY NOT NULL,
    operation text NOT NULL,
    table_name text NOT NULL,
    record_id uuid NOT NULL,
    changed_at timestamp with time zone DEFAULT now() NOT NULL,
    row_data jsonb NOT NULL,
    old_data jsonb,
    CONSTRAINT change_log_operation_check CHECK ((operation = ANY (ARRAY['insert'::text, 'update'::text, 'delete'::text, 'expire'::text]))),
    CONSTRAINT change_log_pkey PRIMARY KEY (id)
);
COMMENT ON TABLE app.change_log IS 'Changes in commit order (id): app.events rows (insert, update, delete, and expire when an event ends) and app.community_members rows. Read by the realtime feed. Not granted to request roles.';
COMMENT ON COLUMN app.change_log.changed_at IS 'When the change took the log''s lock (clock time, so increasing with id); pruning is by this age.';
COMMENT ON COLUMN app.change_log.row_data IS 'The row after the change (before it, for a delete).';
COMMENT ON COLUMN app.change_log.old_data IS 'For an update: the row before it. Null otherwise.';
ALTER TABLE app.change_log ENABLE ROW LEVEL SECURITY;

CREATE TABLE app.change_log_state (
    singleton boolean DEFAULT true NOT NULL,
    pruned_through bigint DEFAULT 0 NOT NULL,
    expired_through timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT change_log_state_singleton_check CHECK (singleton),
    CONSTRAINT change_log_state_pkey PRIMARY KEY (singleton)
);
COMMENT ON TABLE app.change_log_state IS 'Watermarks of the change log: pruned_through (ids at or below may be gone), expired_through (expiries logged up to).';
ALTER TABLE app.change_log_state ENABLE ROW LEVEL SECURITY;

CREATE TABLE app.event_streams (
    id uuid DEFAULT gen_random_uuid() NOT NULL,
    user_id uuid NOT NULL,
    gateway text NOT NULL,
    kind text NOT NULL,
    opened_at timestamp with time zone DEFAULT now() NOT NULL,
    expires_at timestamp with time zone NOT NULL,
    CONSTRAINT event_streams_gateway_check CHECK (((length(gateway) >= 1) AND (length(gateway) <= 100))),
    CONSTRAINT event_streams_kind_check CHECK ((kind = ANY (ARRAY['sse'::text, 'websocket'::text]))),
    CONSTRAINT event_streams_pkey PRIMARY KEY (id),
    CONSTRAINT event_streams_user_id_fkey FOREIGN KEY (user_id) REFERENCES app.profiles(id) ON DELETE CASCADE
);
COMMENT ON TABLE app.event_streams IS 'Open realtime connections (SSE streams, websockets), one row each; counted for the per-user cap while expires_at is in the future.';
ALTER TABLE app.event_streams ENABLE ROW LEVEL SECURITY;
GRANT SELECT ON TABLE app.event_streams TO authenticated;
GRANT INSERT(user_id) ON TABLE app.event_streams TO authenticated;
GRANT INSERT(gateway) ON TABLE app.event_streams TO authenticated;
GRANT INSERT(kind) ON TABLE app.event_streams TO authenticated;
GRANT INSERT(expires_at) ON TABLE app.event_streams TO authenticated;

-- =============================================================================
-- Indexes
-- =============================================================================

CREATE INDEX change_log_changed_at_idx ON app.change_log USING btree (changed_at);
CREATE INDEX change_log_record_idx ON app.change_log USING btree (table_name, record_id, id);
CREATE INDEX event_streams_expires_idx ON app.event_streams USING btree (expires_at);
CREATE INDEX event_streams_user_idx ON app.event_streams USING btree (user_id, expires_at);

-- =============================================================================
-- Policies
-- =============================================================================

CREATE POLICY "Users can open their own streams" ON app.event_streams FOR INSERT TO authenticated WITH CHECK ((user_id = ( SELECT auth.uid() AS uid)));

CREATE POLICY "Users can see their own streams" ON app.event_streams FOR SELECT TO authenticated USING ((user_id = ( SELECT auth.uid() AS uid)));

-- =============================================================================
-- Functions of api: what the gateway and the MCP server call, as the request's role
-- =============================================================================

CREATE FUNCTION api.event_stream_open(gateway text, last_event_id bigint, public_url text, ttl_seconds integer) RETURNS SETOF api.event_stream_start
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog'
    SET jit TO 'off'
    AS $$
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
  return query
    select stream,
           case when last_event_id is null then 'snapshot' else 'reset' end,
           p.head,
           private.event_snapshot(app.my_node_id(), event_stream_open.public_url, p.expired_through)
      from private.change_log_position() p;
end;
$$;

COMMENT ON FUNCTION api.event_stream_open(gateway text, last_event_id bigint, public_url text, ttl_seconds integer) IS 'GET /api/mobile/events/upcoming/stream: registers the stream (PT429 too_many_streams past the cap) and returns the snapshot (upcoming events with __sync_meta, and the change id it is consistent with) or the resume point.';
GRANT EXECUTE ON FUNCTION api.event_stream_open(gateway text, last_event_id bigint, public_url text, ttl_seconds integer) TO authenticated;

CREATE FUNCTION api.event_stream_changes(after_id bigint, upto_id bigint, public_url text) RETURNS SETOF api.event_stream_message
    LANGUAGE plpgsql STABLE SECURITY DEFINER
    SET search_path TO 'pg_catalog'
    SET jit TO 'off'
    AS $$
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

COMMENT ON FUNCTION api.event_stream_changes(after_id bigint, upto_id bigint, public_url text) IS 'Messages of the upcoming-events stream for the changes after_id < id <= upto_id, as the caller sees them: (change_id, insert|update|delete, Event with __sync_meta). PT410 last_event_id_expired when after_id is older than the log keeps.';
GRANT EXECUTE ON FUNCTION api.event_stream_changes(after_id bigint, upto_id bigint, public_url text) TO authenticated;

CREATE FUNCTION api.realtime_event_changes(after_id bigint, upto_id bigint) RETURNS SETOF api.realtime_change
    LANGUAGE sql STABLE
    SET search_path TO 'pg_catalog'
    AS $$
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

COMMENT ON FUNCTION api.realtime_event_changes(after_id bigint, upto_id bigint) IS 'Row changes of app.events after_id < id <= upto_id that the caller may read (private.event_readable on the row as changed), for postgres_changes: (change_id, INSERT|UPDATE|DELETE, commit_timestamp, record, old_record with the primary key).';
GRANT EXECUTE ON FUNCTION api.realtime_event_changes(after_id bigint, upto_id bigint) TO authenticated;

CREATE FUNCTION api.realtime_columns() RETURNS SETOF api.realtime_column
    LANGUAGE sql STABLE
    SET search_path TO 'pg_catalog'
    AS $$
    select a.attname::text, t.typname::text
      from pg_catalog.pg_attribute a
      join pg_catalog.pg_type t on t.oid = a.atttypid
     where a.attrelid = 'app.events'::regclass and a.attnum > 0 and not a.attisdropped
     order by a.attnum
  $$;
COMMENT ON FUNCTION api.realtime_columns() IS 'The columns of app.events with their type names, as postgres_changes messages list them.';
GRANT EXECUTE ON FUNCTION api.realtime_columns() TO authenticated;

CREATE FUNCTION api.realtime_connect(gateway text, ttl_seconds integer) RETURNS uuid
    LANGUAGE sql
    SET search_path TO 'pg_catalog'
    AS $$
    select private.event_stream_register(gateway, 'websocket', ttl_seconds)
  $$;

COMMENT ON FUNCTION api.realtime_connect(gateway text, ttl_seconds integer) IS '/realtime/v1/websocket: registers the caller''s websocket (first joined channel) under the same cap as SSE streams (PT429 too_many_streams).';
GRANT EXECUTE ON FUNCTION api.realtime_connect(gateway text, ttl_seconds integer) TO authenticated;

-- =============================================================================
-- Helpers (private, app, identity): internal helpers and trigger functions; request roles run only those granted here
-- =============================================================================

CREATE FUNCTION private.event_stream_register(gateway text, kind text, ttl_seconds integer) RETURNS uuid
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog'
    AS $$
declare
  caller uuid := auth.uid();
  stream uuid;
begin
  if caller is null then
    raise exception 'not signed in' using errcode = 'PT401';
  end if;
  select r.stream_id into stream
    from private.event_streams_register(gateway, kind, ttl_seconds, array[caller]) r;
  if stream is null then
    raise exception 'too many open streams: at most % per user', private.max_event_streams()
      using errcode = 'PT429', hint = 'too_many_streams';
  end if;
  return stream;
end;
$$;

COMMENT ON FUNCTION private.event_stream_register(gateway text, kind text, ttl_seconds integer) IS 'Registers a realtime connection of the caller for ttl_seconds (renewed by the gateway). PT429 too_many_streams past the cap.';
GRANT EXECUTE ON FUNCTION private.event_stream_register(gateway text, kind text, ttl_seconds integer) TO authenticated;

CREATE FUNCTION private.event_streams_register(gateway text, kind text, ttl_seconds integer, users uuid[]) RETURNS TABLE(n integer, stream_id uuid)
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog'
    AS $$
declare
  lock_key bigint;
begin
  for lock_key in
    select distinct hashtextextended('app.event_streams:' || u::text, 0) from unnest(users) u where u is not null order by 1
  loop
    perform pg_advisory_xact_lock(lock_key);
  end loop;
  return query
    with numbered as (
      select r.n::integer as n, r.user_id,
             row_number() over (partition by r.user_id order by r.n) as k
        from unnest(users) with ordinality as r(user_id, n)
    ),
    wanted as (
      select nb.n, nb.user_id, nb.k,
             nb.user_id is not null
               and coalesce((select count(*) from app.event_streams s
                              where s.user_id = nb.user_id and s.expires_at > now()), 0) + nb.k
                   <= private.max_event_streams() as fits
        from numbered nb
    ),
    registered as (
      insert into app.event_streams as s (user_id, gateway, kind, expires_at)
      select w.user_id, event_streams_register.gateway, event_streams_register.kind,
             now() + make_interval(secs => greatest(ttl_seconds, 1))
        from wanted w
       where w.fits
      returning s.id, s.user_id
    ),
    -- A user's new streams are alike: the k-th goes to the user's k-th element.
    given as (
      select g.id, g.user_id, row_number() over (partition by g.user_id) as k from registered g
    )
    select w.n, g.id from wanted w left join given g on g.user_id = w.user_id and g.k = w.k order by w.n;
end;
$$;

COMMENT ON FUNCTION private.event_streams_register(gateway text, kind text, ttl_seconds integer, users uuid[]) IS 'Registers a realtime connection for each element of users for ttl_seconds (renewed by the gateway): (n, stream_id) per element in order; stream_id null for a null element and past the per-user cap (private.max_event_streams, counting live streams and earlier elements).';
GRANT EXECUTE ON FUNCTION private.event_streams_register(gateway text, kind text, ttl_seconds integer, users uuid[]) TO authenticated;

CREATE FUNCTION private.max_event_streams() RETURNS integer
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    SET search_path TO 'pg_catalog'
    AS $$
    select 5
  $$;
COMMENT ON FUNCTION private.max_event_streams() IS 'How many realtime connections (SSE streams and websockets together) one user may hold open at once.';
GRANT EXECUTE ON FUNCTION private.max_event_streams() TO authenticated;

CREATE FUNCTION private.change_log_position() RETURNS TABLE(head bigint, pruned_through bigint, expired_through timestamp with time zone)
    LANGUAGE sql STABLE SECURITY DEFINER ROWS 1
    SET search_path TO 'pg_catalog'
    AS $$
    select greatest(s.pruned_through, coalesce((select max(c.id) from app.change_log c), 0)),
           s.pruned_through, s.expired_through
      from app.change_log_state s
  $$;
COMMENT ON FUNCTION private.change_log_position() IS 'The newest change id (or the prune watermark when the log is empty), the prune watermark and the expiry watermark.';
GRANT EXECUTE ON FUNCTION private.change_log_position() TO authenticated;

CREATE FUNCTION private.event_snapshot(member_node uuid, public_url text, expired_through timestamp with time zone) RETURNS jsonb
    LANGUAGE plpgsql STABLE
    SET search_path TO 'pg_catalog'
    AS $$
begin
  return (
    select coalesce(jsonb_agg(private.event_object(u.event, u.community_node_id, u.manages, event_snapshot.public_url)
                                || jsonb_build_object('__sync_meta', jsonb_build_object(
                                     'operation', 'insert', 'table', 'events', 'timestamp', app.iso(now())))
                              order by (u.event).starts_at, (u.event).id), '[]'::jsonb)
      from private.upcoming_events_of(event_snapshot.member_node) u
     -- Events whose end is before expired_through have their expiry in the
     -- log at or below head: leave them out, as that entry says.
     where private.event_effective_end((u.event).starts_at, (u.event).ends_at) >= greatest(now(), event_snapshot.expired_through));
end;
$$;

COMMENT ON FUNCTION private.event_snapshot(member_node uuid, public_url text, expired_through timestamp with time zone) IS 'The snapshot of an upcoming-events stream for the member with this node id: their upcoming events as Event JSON with __sync_meta insert, soonest first, without those whose end is before expired_through (the log holds their expiry). Read by api.event_stream_open and private.event_streams_open.';
GRANT EXECUTE ON FUNCTION private.event_snapshot(member_node uuid, public_url text, expired_through timestamp with time zone) TO authenticated;

CREATE FUNCTION private.event_log_range(after_id bigint, upto_id bigint) RETURNS TABLE(id bigint, operation text, record_id uuid, changed_at timestamp with time zone, row_data jsonb)
    LANGUAGE sql STABLE SECURITY DEFINER
    SET search_path TO 'pg_catalog'
    AS $$
    select c.id, c.operation, c.record_id, c.changed_at,
           case when c.operation = 'delete' then null else c.row_data end
      from app.change_log c
     where c.id > after_id and c.id <= upto_id
       and c.table_name = 'events'
       and c.operation in ('insert', 'update', 'delete')
  $$;

COMMENT ON FUNCTION private.event_log_range(after_id bigint, upto_id bigint) IS 'Row changes of app.events in an id range (the row after an insert or update; nothing but the id for a delete).';
GRANT EXECUTE ON FUNCTION private.event_log_range(after_id bigint, upto_id bigint) TO authenticated;

CREATE FUNCTION private.append_change(operation text, table_name text, record_id uuid, row_data jsonb, old_data jsonb) RETURNS bigint
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog'
    AS $$
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

COMMENT ON FUNCTION private.append_change(operation text, table_name text, record_id uuid, row_data jsonb, old_data jsonb) IS 'Appends a change-log entry under private.lock_change_log(); returns its id.';


CREATE FUNCTION private.event_stream_audience(after_id bigint, upto_id bigint) RETURNS SETOF uuid
    LANGUAGE plpgsql STABLE SECURITY DEFINER
    SET search_path TO 'pg_catalog'
    AS $$
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

COMMENT ON FUNCTION private.event_stream_audience(after_id bigint, upto_id bigint) IS 'The users who may get a message of the upcoming stream from the changes after_id < id <= upto_id (a superset). Called by the gateway to skip everyone else. PT410 below the prune watermark.';


CREATE FUNCTION private.event_stream_fanout(after_id bigint, upto_id bigint, public_url text, only_users uuid[] DEFAULT NULL::uuid[]) RETURNS SETOF private.event_stream_delivery
    LANGUAGE plpgsql SECURITY DEFINER ROWS 10
    SET search_path TO 'pg_catalog'
    SET jit TO 'off'
    AS $$
declare
  saved_claims text := current_setting('request.jwt.claims', true);
  movers uuid[];
  mover uuid;
  msg record;
begin
  if after_id < (select s.pruned_through from app.change_log_state s) then
    raise exception 'the changes after % are no longer kept', after_id
      using errcode = 'PT410', hint = 'last_event_id_expired';
  end if;

  -- The exceptions: users whose membership changed in the range.
  select coalesce(array_agg(distinct p.id), '{}') into movers
    from app.change_log c
    join app.profiles p on p.node_id = (c.row_data ->> 'member_node_id')::uuid
   where c.id > after_id and c.id <= upto_id
     and c.table_name = 'community_members'
     and (only_users is null or p.id = any(only_users));

  for msg in
    -- Everything that depends on the change alone is computed once per
    -- change, not once per member (a change may reach 10,000 users).
    with changes as (
      select c.id, c.operation, c.changed_at,
             jsonb_populate_record(null::app.events, c.row_data) as new_row,
             jsonb_populate_record(null::app.events, coalesce(c.old_data, c.row_data)) as old_row
        from app.change_log c
       where c.id > after_id and c.id <= upto_id
         and c.table_name = 'events'
    ),
    judged as (
      select ch.id, ch.changed_at, ch.new_row,
             (ch.old_row).community_id as old_community,
             (ch.new_row).community_id as new_community,
             -- in the feed of the old community's members before the change
             case
               when ch.operation = 'insert' then false
               when ch.operation = 'expire' then true
               else private.event_effective_end((ch.old_row).starts_at, (ch.old_row).ends_at) >= ch.changed_at
             end as was_shown,
             -- in the feed of the new community's members after it
             ch.operation in ('insert', 'update')
               and private.event_effective_end((ch.new_row).starts_at, (ch.new_row).ends_at) >= ch.changed_at
               as is_shown
        from changes ch
    ),
    -- Who gets a message: members of the (new) community, and members of
    -- the old one that are not in the new one (an event that moved). The
    -- view: private.event_json shows the manager fields to managers of the
    -- (new) row's community.
    audience as (
      select j.id, m.member_node_id, m.role = 'manager' as manager,
             j.was_shown and (j.old_community = j.new_community or exists (
               select from app.community_members o
                where o.community_id = j.old_community and o.member_node_id = m.member_node_id)) as was_in,
             j.is_shown as is_in
        from judged j
        join app.community_members m on m.community_id = j.new_community
       where j.was_shown or j.is_shown
      union all
      select j.id, m.member_node_id, false, true, false
        from judged j
        join app.community_members m on m.community_id = j.old_community
       where j.was_shown
         and j.old_community <> j.new_community
         and not exists (
               select from app.community_members n
                where n.community_id = j.new_community and n.member_node_id = m.member_node_id)
    ),
    views as (
      select a.id,
             case when a.was_in and a.is_in then 'update' when a.is_in then 'insert' else 'delete' end as op,
             array_agg(p.id) as user_ids
        from audience a
        join app.profiles p on p.node_id = a.member_node_id
       where (a.was_in or a.is_in)
         and (only_users is null or p.id = any(only_users))
         and p.id <> all(movers)
       group by 1, 2, a.manager
    )
    select v.id, v.op, v.user_ids, j.changed_at, j.new_row
      from views v
      join judged j on j.id = v.id
     order by v.id
  loop
    perform set_config('request.jwt.claims',
                       json_build_object('role', 'authenticated', 'sub', msg.user_ids[1])::text, true);
    return next (msg.id, msg.op,
                 private.event_json(msg.new_row, public_url) || jsonb_build_object('__sync_meta', jsonb_build_object(
                   'operation', msg.op, 'table', 'events', 'timestamp', app.iso(msg.changed_at))),
                 msg.user_ids)::private.event_stream_delivery;
  end loop;

  foreach mover in array movers loop
    perform set_config('request.jwt.claims', json_build_object('role', 'authenticated', 'sub', mover)::text, true);
    return query
      select m.change_id, m.operation, m.event, array[mover]
        from api.event_stream_changes(after_id, upto_id, public_url) m;
  end loop;

  perform set_config('request.jwt.claims', coalesce(saved_claims, ''), true);
end;
$$;

COMMENT ON FUNCTION private.event_stream_fanout(after_id bigint, upto_id bigint, public_url text, only_users uuid[]) IS 'Messages of the upcoming stream for the changes after_id < id <= upto_id for every user at once (or only_users): (change_id, insert|update|delete, Event with __sync_meta, user_ids), one row per change and view; each user gets what api.event_stream_changes gives them. Called by the gateway''s realtime hub. PT410 below the prune watermark.';


CREATE FUNCTION private.event_streams_close(ids uuid[]) RETURNS integer
    LANGUAGE sql
    SET search_path TO 'pg_catalog'
    AS $$
    with gone as (delete from app.event_streams s where s.id = any(ids) returning 1)
    select count(*)::integer from gone
  $$;

COMMENT ON FUNCTION private.event_streams_close(ids uuid[]) IS 'Removes the registrations of closed connections.';


CREATE FUNCTION private.event_streams_open(gateway text, public_url text, ttl_seconds integer, requests jsonb) RETURNS jsonb
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog'
    SET jit TO 'off'
    AS $$
declare
  users uuid[];
  refused text[];
  registered uuid[];
begin
  -- Each request judged once: an ended session or a missing profile (streams
  -- belong to profiles) refuses it; the others are registered.
  select coalesce(array_agg(r.user_id order by r.n), '{}'),
         coalesce(array_agg(case when private.session_ended(r.session_id) then 'session_ended'
                                 when not exists (select from app.profiles p where p.id = r.user_id) then 'no_profile'
                            end order by r.n), '{}')
    into users, refused
    from rows from (jsonb_to_recordset(requests) as (user_id uuid, session_id uuid)) with ordinality as r(user_id, session_id, n);
  -- Registered within the cap, one element per request (null: refused above or over the cap).
  select coalesce(array_agg(s.stream_id order by s.n), '{}')
    into registered
    from private.event_streams_register(gateway, 'sse', ttl_seconds,
           array(select case when x.why is null then x.u end
                   from unnest(users, refused) with ordinality as x(u, why, n) order by x.n)) s;

  return (
    with p as (
      select * from private.change_log_position()
    ),
    req as (
      select r.n::integer as n, r.user_id, r.last_event_id,
             coalesce(refused[r.n], case when registered[r.n] is null then 'too_many_streams' end) as error,
             registered[r.n] as stream_id
        from rows from (jsonb_to_recordset(requests) as (user_id uuid, last_event_id bigint))
             with ordinality as r(user_id, last_event_id, n)
    ),
    judged as (
      select req.n, req.user_id, req.stream_id, req.error,
             case
               when req.last_event_id is null then 'snapshot'
               when req.last_event_id >= p.pruned_through and req.last_event_id <= p.head then 'resume'
               else 'reset'
             end as mode,
             coalesce(case when req.last_event_id >= p.pruned_through and req.last_event_id <= p.head
                           then req.last_event_id end, p.head) as last_event_id
        from req, p
    ),
    -- What a snapshot depends on: the user's memberships and manager roles.
    keyed as (
      select j.n, pr.node_id,
             coalesce((select array_agg(m.community_id::text || case when m.role = 'manager' then '+' else '' end
                                        order by m.community_id)
                         from app.community_members m
                        where m.member_node_id = pr.node_id), '{}') as view_key
        from judged j
        join app.profiles pr on pr.id = j.user_id
       where j.error is null and j.mode <> 'resume'
    ),
    views as (
      select k.view_key, (array_agg(k.node_id))[1] as node_id,
             (row_number() over (order by k.view_key) - 1)::integer as view
        from keyed k
       group by k.view_key
    ),
    snapshots as (
      select v.view, private.event_snapshot(v.node_id, event_streams_open.public_url, p.expired_through) as events
        from views v, p
    )
    select jsonb_build_object(
             'head', p.head,
             'views', coalesce((select jsonb_agg(s.events order by s.view) from snapshots s), '[]'::jsonb),
             'streams', coalesce((
               select jsonb_agg(case when j.error is not null
                                     then jsonb_build_object('error', j.error, 'message', case j.error
                                            when 'session_ended' then 'the session of this access token has ended'
                                            when 'too_many_streams' then format('too many open streams: at most %s per user', private.max_event_streams())
                                            else 'the request conflicts with existing data' end)
                                     else jsonb_build_object('stream_id', j.stream_id, 'mode', j.mode,
                                                             'last_event_id', j.last_event_id, 'view', v.view) end
                                order by j.n)
                 from judged j
                 left join keyed k on k.n = j.n
                 left join views v on v.view_key = k.view_key), '[]'::jsonb))
      from p);
end;
$$;

COMMENT ON FUNCTION private.event_streams_open(gateway text, public_url text, ttl_seconds integer, requests jsonb) IS 'Opens a batch of upcoming-event streams for users whose access tokens the gateway verified: registers each within the per-user cap and returns {head, views: [snapshot...], streams: [{stream_id, mode, last_event_id, view} | {error}]}, one snapshot per distinct set of memberships. Each stream gets what api.event_stream_open gives its user. Called by the gateway''s stream opener.';


CREATE FUNCTION private.event_streams_touch(ids uuid[], ttl_seconds integer) RETURNS integer
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog'
    AS $$
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

COMMENT ON FUNCTION private.event_streams_touch(ids uuid[], ttl_seconds integer) IS 'Heartbeat: extends the registrations a gateway still holds; drops registrations expired for an hour.';


CREATE FUNCTION private.lock_change_log() RETURNS void
    LANGUAGE sql
    SET search_path TO 'pg_catalog'
    AS $$
    select pg_advisory_xact_lock(hashtextextended('app.change_log', 0))
  $$;
COMMENT ON FUNCTION private.lock_change_log() IS 'The lock every change-log writer holds until commit, so change ids appear in commit order.';


CREATE FUNCTION private.log_event_expiries() RETURNS bigint
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog'
    AS $$
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
COMMENT ON FUNCTION private.log_event_expiries() IS 'Logs an expire entry for every event whose effective end passed since the last call (exactly once, across replicas); returns how many. Called periodically by the gateway.';


CREATE FUNCTION private.tg_community_members__log_change() RETURNS trigger
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog'
    AS $$
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
COMMENT ON FUNCTION private.tg_community_members__log_change() IS 'Trigger: logs a membership change to app.change_log (record_id = community) and NOTIFYs event_changes with {id, community_id}.';


CREATE FUNCTION private.tg_events__log_change() RETURNS trigger
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog'
    AS $$
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
COMMENT ON FUNCTION private.tg_events__log_change() IS 'Trigger: logs an event change (with the old row of an update) to app.change_log in commit order and NOTIFYs event_changes with {id, event_id}.';

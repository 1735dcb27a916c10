-- =============================================================================
-- Sync: the caller's data as shapes for offline clients (ElectricSQL's HTTP shape protocol)
-- =============================================================================
-- GET /sync/v1/shape serves these functions (docs/sync.md). A shape is one
-- table of the caller's data, its rows exactly as REST answers them:
--
--   private.sync_rows      the rows of a shape as the caller sees them now,
--                          read through the REST functions (api.tasks_list's
--                          select, api.hats_list, api.connections_list, ...)
--                          and row-level security: the one rule set
--   api.sync_snapshot      the rows and the change-log position they are
--                          consistent with (one statement, one snapshot)
--   api.sync_changes       what changed for the caller after a position, up to
--                          the log's head: insert / update / delete per row,
--                          judged before (from the log) and after (now)
--   private.sync_audience  who among the waiting users a range can concern,
--                          so the gateway reads the changes of those only
--
-- Changes come from app.change_log (realtime area): events and memberships
-- were logged already; the triggers here log tasks, deals, hats, connections,
-- profiles and communities the same way (NOTIFY event_changes with ids only).
-- Joining a community brings its events as inserts, leaving takes them out as
-- deletes; an event whose end passes leaves by its expire entry.
--
-- Code: gateway/routes/sync.ts, gateway/realtime/shapes.ts
-- pgTAP: supabase/tests/sync.test.sql
--
-- The whole source of this area, after the areas before it in
-- sql/areas/areas.json: types, tables, indexes, triggers, policies, the api
-- functions, the helpers. To change it: edit it here, then
-- `npm run db -- areas --diff` writes the migration (docs/dba.md).
-- =============================================================================

-- =============================================================================
-- Types
-- =============================================================================

CREATE TYPE api.sync_message AS (
	change_id bigint,
	operation text,
	id uuid,
	value jsonb
);

CREATE TYPE api.sync_snapshot_row AS (
	head bigint,
	id uuid,
	value jsonb
);

-- =============================================================================
-- Triggers
-- =============================================================================

CREATE TRIGGER _910_sync_log_change AFTER INSERT OR DELETE OR UPDATE ON app.tasks FOR EACH ROW EXECUTE FUNCTION private.tg_sync__log_change();

CREATE TRIGGER _910_sync_log_change AFTER INSERT OR DELETE OR UPDATE ON app.deals FOR EACH ROW EXECUTE FUNCTION private.tg_sync__log_change();

CREATE TRIGGER _910_sync_log_change AFTER INSERT OR DELETE OR UPDATE ON app.hats FOR EACH ROW EXECUTE FUNCTION private.tg_sync__log_change();

CREATE TRIGGER _910_sync_log_change AFTER INSERT OR DELETE OR UPDATE ON app.connections FOR EACH ROW EXECUTE FUNCTION private.tg_sync__log_change();

CREATE TRIGGER _910_sync_log_change AFTER INSERT OR DELETE OR UPDATE ON app.profiles FOR EACH ROW EXECUTE FUNCTION private.tg_sync__log_change();

CREATE TRIGGER _910_sync_log_change AFTER INSERT OR DELETE OR UPDATE ON app.communities FOR EACH ROW EXECUTE FUNCTION private.tg_sync__log_change();

-- =============================================================================
-- Functions of api: what the gateway and the MCP server call, as the request's role
-- =============================================================================

CREATE FUNCTION api.sync_snapshot(shape text, public_url text) RETURNS SETOF api.sync_snapshot_row
    LANGUAGE sql STABLE
    SET search_path TO 'pg_catalog'
    AS $$
    select p.head, r.id, r.value
      from private.change_log_position() p
      left join private.sync_rows(sync_snapshot.shape, sync_snapshot.public_url) r on true
     order by r.id
  $$;

COMMENT ON FUNCTION api.sync_snapshot(shape text, public_url text) IS 'GET /sync/v1/shape (offset -1): the rows of the caller''s shape (private.sync_rows) and the change id they are consistent with (head, on every row; one row with a null id when the shape is empty). One statement, so the rows and the head are of one snapshot.';
GRANT EXECUTE ON FUNCTION api.sync_snapshot(shape text, public_url text) TO authenticated;

CREATE FUNCTION api.sync_changes(shape text, after_id bigint, public_url text) RETURNS SETOF api.sync_message
    LANGUAGE sql STABLE
    SET search_path TO 'pg_catalog'
    AS $$
    with pos as (
      select p.head from private.change_log_position() p
    ),
    log as (
      select l.* from pos, private.sync_log(sync_changes.shape, sync_changes.after_id, pos.head) l
    ),
    own_table as (
      select case sync_changes.shape when 'profile' then 'profiles' else sync_changes.shape end as name
    ),
    -- The caller's memberships that changed in the range: whether they were
    -- a member before it (the first entry: anything but an insert).
    moved as (
      select distinct on (l.record_id) l.record_id as community_id, l.operation <> 'insert' as was_member
        from log l
       where l.table_name = 'community_members'
       order by l.record_id, l.id
    ),
    moved_last as (
      select l.record_id as community_id, max(l.id) as change_id
        from log l
       where l.table_name = 'community_members'
       group by 1
    ),
    -- Rows of the shape's own table changed in the range: the first entry
    -- says how the row was before the range.
    firsts as (
      select distinct on (l.record_id) l.record_id, l.operation, l.changed_at,
             coalesce(l.old_data, l.row_data) as before_row
        from log l, own_table t
       where l.table_name = t.name
       order by l.record_id, l.id
    ),
    lasts as (
      select l.record_id, max(l.id) as change_id
        from log l, own_table t
       where l.table_name = t.name
       group by 1
    ),
    -- Rows touched by a membership change: a community's events (events), the
    -- community itself (communities).
    by_membership as (
      select x.record_id, x.community_id, ml.change_id
        from (select e.id as record_id, e.community_id
                from private.sync_community_events(array(select m.community_id from moved m)) e
               where sync_changes.shape = 'events'
              union all
              select m.community_id, m.community_id from moved m where sync_changes.shape = 'communities') x
        join moved_last ml on ml.community_id = x.community_id
    ),
    touched as (
      select k.record_id, max(k.change_id) as change_id
        from (select record_id, change_id from lasts union all select record_id, change_id from by_membership) k
       group by 1
    ),
    judged as (
      select t.record_id, t.change_id,
             case
               when f.record_id is not null and f.operation = 'insert' then false
               when sync_changes.shape = 'events' then
                 private.sync_was_member(coalesce((f.before_row ->> 'community_id')::uuid, bm.community_id),
                                         (select array_agg(m.community_id) from moved m where m.was_member),
                                         (select array_agg(m.community_id) from moved m where not m.was_member))
                 and (f.record_id is null or f.operation = 'expire'
                      or private.event_effective_end((f.before_row ->> 'starts_at')::timestamptz,
                                                     (f.before_row ->> 'ends_at')::timestamptz) >= f.changed_at)
               when sync_changes.shape = 'communities' then
                 private.sync_was_member(t.record_id,
                                         (select array_agg(m.community_id) from moved m where m.was_member),
                                         (select array_agg(m.community_id) from moved m where not m.was_member))
               else true
             end as was_visible
        from touched t
        left join firsts f on f.record_id = t.record_id
        left join (select distinct on (b.record_id) b.record_id, b.community_id from by_membership b
                    order by b.record_id) bm on bm.record_id = t.record_id
    ),
    now_rows as (
      select r.id, r.value
        from private.sync_rows(sync_changes.shape, sync_changes.public_url) r
       where r.id in (select t.record_id from touched t)
    )
    select j.change_id,
           case when j.was_visible and n.id is not null then 'update'
                when n.id is not null then 'insert'
                else 'delete' end,
           j.record_id,
           coalesce(n.value, jsonb_build_object('id', j.record_id))
      from judged j
      left join now_rows n on n.id = j.record_id
     where j.was_visible or n.id is not null
    union all
    -- The head the answer is consistent with: a row without an id, last.
    select pos.head, 'head', null::uuid, null::jsonb from pos
     order by 1, 3 nulls last
  $$;

COMMENT ON FUNCTION api.sync_changes(shape text, after_id bigint, public_url text) IS 'GET /sync/v1/shape (offset after a change id): what changed in the caller''s shape after after_id, up to the log''s head, one message per row (change_id of its last change, insert|update|delete, id, the row as REST answers it or {id} for a delete), then a head row (operation ''head'', no id). PT410 last_event_id_expired when after_id is older than the log keeps; PT400 for an unknown shape.';
GRANT EXECUTE ON FUNCTION api.sync_changes(shape text, after_id bigint, public_url text) TO authenticated;

-- =============================================================================
-- Helpers (private, app, identity): internal helpers and trigger functions; request roles run only those granted here
-- =============================================================================

CREATE FUNCTION private.sync_rows(shape text, public_url text) RETURNS TABLE(id uuid, value jsonb)
    LANGUAGE plpgsql STABLE
    SET search_path TO 'pg_catalog'
    AS $$
begin
  case shape
    when 'profile' then
      return query
        select p.id, to_jsonb(p) || jsonb_build_object('created_at', app.iso(p.created_at), 'updated_at', app.iso(p.updated_at))
          from api.profile_get() p;
    when 'hats' then
      return query
        select h.id, to_jsonb(h) || jsonb_build_object('created_at', app.iso(h.created_at))
          from api.hats_list() h;
    when 'communities' then
      return query
        select c.id, app.community_json(c) || jsonb_build_object('joined_at', app.iso(m.joined_at), 'role', m.role)
          from app.community_members m
          join app.communities c on c.id = m.community_id
         where m.member_node_id = app.my_node_id();
    when 'events' then
      return query
        select (u.event).id, private.event_object(u.event, u.community_node_id, u.manages, public_url)
          from private.synced_events_of(app.my_node_id()) u;
    when 'tasks' then
      return query
        select t.id, jsonb_build_object('id', t.id, 'created_by', t.created_by, 'inserted_at', app.iso(t.inserted_at),
                                        'updated_at', app.iso(t.updated_at), 'meta', t.meta)
          from app.tasks t;
    when 'deals' then
      return query
        select d.id, to_jsonb(d) from api.deals_list() d;
    when 'connections' then
      return query
        select c.id, to_jsonb(c) || jsonb_build_object('created_at', app.iso(c.created_at), 'updated_at', app.iso(c.updated_at))
          from api.connections_list() c;
    else
      raise exception 'unknown shape %', shape using errcode = 'PT400', hint = 'bad_request';
  end case;
end;
$$;

COMMENT ON FUNCTION private.sync_rows(shape text, public_url text) IS 'The rows of a shape as the caller sees them now, each with the fields REST answers (read through the REST functions and row-level security; timestamps as the gateway writes them): profile, hats, communities (mine, with joined_at and role), events (of my communities, not ended), tasks, deals, connections. PT400 for another name.';
GRANT EXECUTE ON FUNCTION private.sync_rows(shape text, public_url text) TO authenticated;

CREATE FUNCTION private.synced_events_of(member_node uuid) RETURNS TABLE(event app.events, community_node_id uuid, manages boolean)
    LANGUAGE sql STABLE
    SET search_path TO 'pg_catalog'
    AS $$
    select e, c.node_id, m.role = 'manager'
      from app.community_members m
      join app.events e on e.community_id = m.community_id
      join app.communities c on c.id = e.community_id
     where m.member_node_id = member_node
       and private.event_effective_end(e.starts_at, e.ends_at)
           >= greatest(now(), (select p.expired_through from private.change_log_position() p))
  $$;

COMMENT ON FUNCTION private.synced_events_of(member_node uuid) IS 'The events shape of a member: the events of their communities that have not ended (nor been logged as expired), with the community''s node id and whether they manage it. Unlike the upcoming list, not limited to 100.';
GRANT EXECUTE ON FUNCTION private.synced_events_of(member_node uuid) TO authenticated;

CREATE FUNCTION private.sync_log(shape text, after_id bigint, upto_id bigint) RETURNS TABLE(id bigint, operation text, table_name text, record_id uuid, changed_at timestamp with time zone, row_data jsonb, old_data jsonb)
    LANGUAGE plpgsql STABLE SECURITY DEFINER
    SET search_path TO 'pg_catalog'
    AS $$
declare
  me uuid := auth.uid();
  my_node uuid := app.my_node_id();
begin
  if shape not in ('profile', 'hats', 'communities', 'events', 'tasks', 'deals', 'connections') then
    raise exception 'unknown shape %', shape using errcode = 'PT400', hint = 'bad_request';
  end if;
  if after_id < (select s.pruned_through from app.change_log_state s) then
    raise exception 'the changes after % are no longer kept', after_id
      using errcode = 'PT410', hint = 'last_event_id_expired';
  end if;
  return query
    select c.id, c.operation, c.table_name, c.record_id, c.changed_at, c.row_data, c.old_data
      from app.change_log c
     where c.id > after_id and c.id <= upto_id
       and case
             when c.table_name = 'community_members' then
               shape in ('events', 'communities') and (c.row_data ->> 'member_node_id')::uuid = my_node
             when shape = 'events' then c.table_name = 'events'
             when shape = 'communities' then c.table_name = 'communities'
             when shape = 'tasks' then c.table_name = 'tasks' and (c.row_data ->> 'created_by')::uuid = me
             when shape = 'deals' then c.table_name = 'deals' and (c.row_data ->> 'created_by')::uuid = me
             when shape = 'hats' then c.table_name = 'hats' and (c.row_data ->> 'user_id')::uuid = me
             when shape = 'profile' then c.table_name = 'profiles' and c.record_id = me
             when shape = 'connections' then c.table_name = 'connections' and (c.row_data ->> 'owner_node_id')::uuid = my_node
             else false
           end
     order by c.id;
end;
$$;

COMMENT ON FUNCTION private.sync_log(shape text, after_id bigint, upto_id bigint) IS 'The change-log entries after_id < id <= upto_id that may concern the caller''s shape: their own rows (the owner column of the row), the caller''s memberships, and every event or community change (judged by api.sync_changes). PT410 last_event_id_expired below the prune watermark; PT400 for an unknown shape.';
GRANT EXECUTE ON FUNCTION private.sync_log(shape text, after_id bigint, upto_id bigint) TO authenticated;

CREATE FUNCTION private.sync_community_events(communities uuid[]) RETURNS TABLE(id uuid, community_id uuid)
    LANGUAGE sql STABLE SECURITY DEFINER
    SET search_path TO 'pg_catalog'
    AS $$
    select e.id, e.community_id
      from app.events e
     where e.community_id = any(communities)
       and private.event_effective_end(e.starts_at, e.ends_at)
           >= greatest(now(), (select s.expired_through from app.change_log_state s))
  $$;

COMMENT ON FUNCTION private.sync_community_events(communities uuid[]) IS 'The ids of the events shown in an events shape of these communities (not ended): those a join brings in and a leave takes out (api.sync_changes, for the caller''s changed memberships only).';
GRANT EXECUTE ON FUNCTION private.sync_community_events(communities uuid[]) TO authenticated;

CREATE FUNCTION private.sync_was_member(community uuid, was uuid[], was_not uuid[]) RETURNS boolean
    LANGUAGE sql STABLE
    SET search_path TO 'pg_catalog'
    AS $$
    select case
             when community = any(coalesce(was, '{}')) then true
             when community = any(coalesce(was_not, '{}')) then false
             else exists (select from app.community_members m
                           where m.community_id = community and m.member_node_id = app.my_node_id())
           end
  $$;

COMMENT ON FUNCTION private.sync_was_member(community uuid, was uuid[], was_not uuid[]) IS 'Whether the caller was a member of the community before a range of changes: as its first membership entry in the range says (was / was_not), else as now.';
GRANT EXECUTE ON FUNCTION private.sync_was_member(community uuid, was uuid[], was_not uuid[]) TO authenticated;

CREATE FUNCTION private.sync_audience(shape text, after_id bigint, upto_id bigint, users uuid[]) RETURNS SETOF uuid
    LANGUAGE sql STABLE SECURITY DEFINER
    SET search_path TO 'pg_catalog'
    AS $$
    with log as (
      select c.table_name, c.record_id, c.row_data, c.old_data
        from app.change_log c
       where c.id > after_id and c.id <= upto_id
    ),
    candidates as (
      select p.id
        from log l
        join app.profiles p on p.node_id = (l.row_data ->> 'member_node_id')::uuid
       where l.table_name = 'community_members' and shape in ('events', 'communities')
      union
      select p.id
        from app.community_members m
        join app.profiles p on p.node_id = m.member_node_id
       where shape = 'events'
         and m.community_id in (select (l.row_data ->> 'community_id')::uuid from log l where l.table_name = 'events'
                                union
                                select (l.old_data ->> 'community_id')::uuid from log l where l.table_name = 'events')
      union
      select p.id
        from app.community_members m
        join app.profiles p on p.node_id = m.member_node_id
       where shape = 'communities'
         and m.community_id in (select l.record_id from log l where l.table_name = 'communities')
      union
      select (l.row_data ->> 'created_by')::uuid from log l where shape in ('tasks', 'deals') and l.table_name = shape
      union
      select (l.row_data ->> 'user_id')::uuid from log l where shape = 'hats' and l.table_name = 'hats'
      union
      select l.record_id from log l where shape = 'profile' and l.table_name = 'profiles'
      union
      select p.id
        from log l
        join app.profiles p on p.node_id = (l.row_data ->> 'owner_node_id')::uuid
       where shape = 'connections' and l.table_name = 'connections'
    )
    select c.id from candidates c where c.id = any(users)
  $$;

COMMENT ON FUNCTION private.sync_audience(shape text, after_id bigint, upto_id bigint, users uuid[]) IS 'Which of these users a range of changes may concern for a shape (a superset: owners of changed rows, members of changed events'' and communities'' communities, users whose memberships changed). The gateway reads api.sync_changes for those only.';

CREATE FUNCTION private.tg_sync__log_change() RETURNS trigger
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog'
    AS $$
declare
  row_now jsonb := case when tg_op = 'DELETE' then to_jsonb(old) else to_jsonb(new) end;
  row_before jsonb := case when tg_op = 'UPDATE' then to_jsonb(old) end;
begin
  -- An update that changes nothing is no change.
  if row_now is not distinct from row_before then
    return null;
  end if;
  perform pg_notify('event_changes', json_build_object('id',
    private.append_change(lower(tg_op), tg_table_name, (row_now ->> 'id')::uuid, row_now, row_before))::text);
  return null;
end;
$$;
COMMENT ON FUNCTION private.tg_sync__log_change() IS 'Trigger: logs a change of a synced table (tasks, deals, hats, connections, profiles, communities) to app.change_log (record_id = the row''s id) and NOTIFYs event_changes with {id}.';

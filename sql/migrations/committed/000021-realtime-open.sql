--! Previous: sha1:63b7b6081f98bfd98f026c3a76d8e4aa58390b60
--! Hash: sha1:97cdf5fffb6e1aef524153decc6be0838a2544d9
--! Message: realtime-open

--! split: 021-realtime-open.sql
--------------------------------------------------------------------------------
-- Opening an event stream (issue 15): the snapshot built in one pass.
--
-- Measured on PostgreSQL 15 while 10,000 streams opened: api.event_stream_open
-- took 4.2 ms a call, 3.5 ms of it the snapshot. The snapshot took the JSON
-- array of api.events_upcoming_page, split it into rows, parsed each event
-- back into jsonb (api.events_upcoming), parsed each event's date and
-- end_time out of the JSON again to leave out expired ones, then added
-- __sync_meta to each. Now the upcoming-events rule is one row source,
-- private.my_upcoming_events (inlined by the planner), that both the list
-- and the snapshot read: the snapshot builds each event's jsonb once, with
-- its __sync_meta, from the table's own columns.
--------------------------------------------------------------------------------

-- The rule of GET /api/mobile/events/upcoming, as rows: the events of the
-- caller's communities whose effective end is not past, soonest first, at
-- most 100; with the community's node id and whether the caller manages it.
-- Plain SQL without SET, so the planner inlines it into its callers.
create or replace function private.my_upcoming_events()
  returns table (event app.events, community_node_id uuid, manages boolean)
  language sql stable
  as $$
    select e, c.node_id, m.role operator(pg_catalog.=) 'manager'
      from app.community_members m
      join app.events e on e.community_id operator(pg_catalog.=) m.community_id
      join app.communities c on c.id operator(pg_catalog.=) e.community_id
     where m.member_node_id operator(pg_catalog.=) (select app.my_node_id())
       and private.event_effective_end(e.starts_at, e.ends_at) operator(pg_catalog.>=) pg_catalog.now()
     order by e.starts_at, e.id
     limit 100
  $$;
comment on function private.my_upcoming_events() is
  'The signed-in caller''s upcoming events (their communities'' events whose effective end is not past), soonest first, at most 100, with the community''s node id and whether the caller manages it. The one definition of the upcoming list: api.events_upcoming_page and the stream snapshot read it.';
revoke all on function private.my_upcoming_events() from public;
grant execute on function private.my_upcoming_events() to authenticated;

create or replace function api.events_upcoming_page(public_url text)
  returns json
  language plpgsql stable
  set search_path = pg_catalog
  as $$
begin
  return (
    select coalesce(json_agg(private.event_object(u.event, u.community_node_id, u.manages, events_upcoming_page.public_url)
                             order by (u.event).starts_at, (u.event).id), '[]'::json)
      from private.my_upcoming_events() u);
end;
$$;

-- Registers the stream and returns the snapshot (or the resume point), as
-- before; head and the snapshot come from one statement, so they are
-- consistent with each other.
create or replace function api.event_stream_open(gateway text, last_event_id bigint, public_url text, ttl_seconds integer)
  returns setof api.event_stream_start
  language plpgsql
  set search_path = pg_catalog
  set jit = off
  as $$
declare
  stream uuid := private.event_stream_register(gateway, 'sse', ttl_seconds);
  log_head bigint;
  log_pruned bigint;
  meta jsonb;
begin
  if last_event_id is not null then
    select p.head, p.pruned_through into log_head, log_pruned from private.change_log_position() p;
    if last_event_id >= log_pruned and last_event_id <= log_head then
      return query select stream, 'resume'::text, last_event_id, null::jsonb;
      return;
    end if;
  end if;
  meta := jsonb_build_object('__sync_meta', jsonb_build_object(
            'operation', 'insert', 'table', 'events', 'timestamp', app.iso(now())));
  -- Events whose end is before expired_through have their expiry in the log
  -- at or below head: leave them out, as that entry says.
  return query
    select stream,
           case when last_event_id is null then 'snapshot' else 'reset' end,
           p.head,
           coalesce((
             select jsonb_agg(private.event_object(u.event, u.community_node_id, u.manages, event_stream_open.public_url) || meta
                              order by (u.event).starts_at, (u.event).id)
               from private.my_upcoming_events() u
              where private.event_effective_end((u.event).starts_at, (u.event).ends_at) >= greatest(now(), p.expired_through)
           ), '[]'::jsonb)
      from private.change_log_position() p;
end;
$$;

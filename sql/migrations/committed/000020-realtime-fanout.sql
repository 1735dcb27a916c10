--! Previous: sha1:32ff986fa730f5193a1db6e7285528a1e5763061
--! Hash: sha1:63b7b6081f98bfd98f026c3a76d8e4aa58390b60
--! Message: realtime-fanout

--! split: 800-realtime-fanout.sql
--------------------------------------------------------------------------------
-- Realtime at scale: one read per change, not one per user (issue 15)
--
-- The hub used to read every range of the change log once per subscribed
-- user (api.event_stream_changes as that user). Here the same rule is
-- evaluated once per range for everyone: private.event_stream_fanout returns
-- one row per (change, distinct view) with the users who get it, and the
-- gateway writes that one payload to every stream of those users.
--
-- A view is what private.event_json shows: the Event object as a member of
-- its community sees it, or as a manager (can_sync, external_platforms).
-- Each view's payload is private.event_json as one user of that view sees
-- it, so the Event object keeps one definition. Users whose membership
-- changed within the range are the exceptions: they are read alone through
-- api.event_stream_changes (the per-user path, also used to resume), which
-- expands a join or leave into one message per upcoming event. The SQL tests
-- check that both paths give every user the same messages.
--
-- Also: planner estimates that made opening a stream JIT-compile (a
-- set-returning function estimated at 1000 rows pushed the snapshot over
-- jit_above_cost).
--------------------------------------------------------------------------------

-- It returns one row: say so, so the plans that use it stay cheap.
alter function private.change_log_position() rows 1;

-- The snapshot reads api.events_upcoming (at most 100 rows, estimated 1000,
-- each calling private.event_json): no plan of this function is worth JIT.
alter function api.event_stream_open(text, bigint, text, integer) set jit = off;
alter function api.event_stream_changes(bigint, bigint, text) set jit = off;

drop function if exists private.event_stream_fanout(bigint, bigint, text, uuid[]);
drop type if exists private.event_stream_delivery;
create type private.event_stream_delivery as (change_id bigint, operation text, event jsonb, user_ids uuid[]);
comment on type private.event_stream_delivery is
  'One message of the upcoming stream and the users who get it (private.event_stream_fanout).';

-- The messages of the changes after_id < id <= upto_id for every user at
-- once: (change_id, insert|update|delete, Event with __sync_meta, user ids).
-- A user gets, in row order, exactly the messages api.event_stream_changes
-- gives them for the same range (same rule: each event change judged at its
-- time before and after, against the user's communities of now; an expiry is
-- a delete; a membership change of the user expands). only_users, when
-- given, restricts the answer to those users (a few streams catching up).
-- PT410 last_event_id_expired when after_id is below the prune watermark.
--
-- Called by the gateway as the owner (not granted to request roles). It
-- switches request.jwt.claims to one user of each view to build that view's
-- payload, and restores them before it returns.
create function private.event_stream_fanout(after_id bigint, upto_id bigint, public_url text,
                                             only_users uuid[] default null)
  returns setof private.event_stream_delivery
  language plpgsql volatile
  security definer
  set search_path = pg_catalog
  set jit = off
  rows 10
  as $$
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
comment on function private.event_stream_fanout(bigint, bigint, text, uuid[]) is
  'Messages of the upcoming stream for the changes after_id < id <= upto_id for every user at once (or only_users): '
  '(change_id, insert|update|delete, Event with __sync_meta, user_ids), one row per change and view; each user gets '
  'what api.event_stream_changes gives them. Called by the gateway''s realtime hub. PT410 below the prune watermark.';

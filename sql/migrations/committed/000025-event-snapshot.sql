--! Previous: sha1:13cee61c1b6bd92382416504bb5f9eac37b30ded
--! Hash: sha1:20e7421558de0c6d7bb551149fab437fa6d44545
--! Message: event-snapshot

--! split: 025-event-snapshot.sql
--------------------------------------------------------------------------------
-- The stream snapshot defined once (follows 000022 and 000023).
--
-- api.event_stream_open (one caller) and private.event_streams_open (a
-- batch, one snapshot per view) each built the snapshot with the same
-- expression: the upcoming list's events as Event JSON with __sync_meta
-- insert, leaving out events whose expiry the log already holds. It is now
-- private.event_snapshot, which both call inside the statement that reads
-- the log's head (a STABLE function sees that statement's snapshot, so head
-- and snapshot stay consistent).
--------------------------------------------------------------------------------

-- (PL/pgSQL, so its plan is kept between calls on PostgreSQL 15 too.)
create or replace function private.event_snapshot(member_node uuid, public_url text, expired_through timestamptz)
  returns jsonb
  language plpgsql stable
  set search_path = pg_catalog
  as $$
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
comment on function private.event_snapshot(uuid, text, timestamptz) is
  'The snapshot of an upcoming-events stream for the member with this node id: their upcoming events as Event JSON with __sync_meta insert, soonest first, without those whose end is before expired_through (the log holds their expiry). Read by api.event_stream_open and private.event_streams_open.';
revoke all on function private.event_snapshot(uuid, text, timestamptz) from public;
grant execute on function private.event_snapshot(uuid, text, timestamptz) to authenticated;

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

create or replace function private.event_streams_open(gateway text, public_url text, ttl_seconds integer, requests jsonb)
  returns jsonb
  language plpgsql security definer
  set search_path = pg_catalog
  set jit = off
  as $$
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

--! Previous: sha1:a4f22e80d7f6ff92bc15c93d6aa7087e68530999
--! Hash: sha1:005f86b6a26a7c58eaf02aa316d6e3bef07901d4
--! Message: realtime-open-judged-once

--! split: 023-realtime-open-judged-once.sql
--------------------------------------------------------------------------------
-- Batched stream opening, judged once per request (follows 000022).
--
-- private.event_streams_open looked at each request's session and profile
-- twice: before registering and again for the answer. A logout committed in
-- between would answer session_ended for a stream it had registered (held
-- against the cap until its registration expired). Now each request is
-- judged once, and private.event_streams_register takes one element per
-- request (null: nothing to register), so its answer lines up with the
-- requests without counting.
--------------------------------------------------------------------------------

-- As in 000022, and a null element registers nothing (its answer is null).
create or replace function private.event_streams_register(gateway text, kind text, ttl_seconds integer, users uuid[])
  returns table (n integer, stream_id uuid)
  language plpgsql
  set search_path = pg_catalog
  as $$
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
comment on function private.event_streams_register(text, text, integer, uuid[]) is
  'Registers a realtime connection for each element of users for ttl_seconds (renewed by the gateway): (n, stream_id) per element in order; stream_id null for a null element and past the per-user cap (private.max_event_streams, counting live streams and earlier elements).';

-- As in 000022, with each request judged once.
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
      select v.view,
             coalesce((
               select jsonb_agg(private.event_object(u.event, u.community_node_id, u.manages, event_streams_open.public_url)
                                  || jsonb_build_object('__sync_meta', jsonb_build_object(
                                       'operation', 'insert', 'table', 'events', 'timestamp', app.iso(now())))
                                order by (u.event).starts_at, (u.event).id)
                 from private.upcoming_events_of(v.node_id) u
                where private.event_effective_end((u.event).starts_at, (u.event).ends_at) >= greatest(now(), p.expired_through)
             ), '[]'::jsonb) as events
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

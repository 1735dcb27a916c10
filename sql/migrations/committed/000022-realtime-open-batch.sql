--! Previous: sha1:97cdf5fffb6e1aef524153decc6be0838a2544d9
--! Hash: sha1:a4f22e80d7f6ff92bc15c93d6aa7087e68530999
--! Message: realtime-open-batch

--! split: 022-realtime-open-batch.sql
--------------------------------------------------------------------------------
-- Opening event streams in batches (issue 15).
--
-- Measured while 10,000 streams opened (PostgreSQL 15, 2 cores): each open was
-- its own transaction (BEGIN, claims, api.event_stream_open, COMMIT), about
-- 1.8 ms of Postgres CPU and 0.8 ms of the gateway's thread; the same
-- opening without the database took 6.6 s instead of 19-23 s. The gateway
-- now sends the opens that arrive while one batch is in the database as the
-- next batch: private.event_streams_open registers them all (the per-user
-- cap counted in one pass), and builds each distinct snapshot once (users
-- whose memberships are the same see the same snapshot).
--
-- The rules stay where they were, each defined once:
--   the upcoming list       private.upcoming_events_of(node), which
--                           private.my_upcoming_events() reads for the caller
--   the per-user cap        private.event_streams_register(..., users), which
--                           private.event_stream_register() calls for the caller
--   an ended session        private.session_ended(), which
--                           private.check_session() raises on
--------------------------------------------------------------------------------

-- The upcoming list of one member, by their node: the events of their
-- communities whose effective end is not past, soonest first, at most 100.
-- Plain SQL without SET, so the planner inlines it into its callers.
create or replace function private.upcoming_events_of(member_node uuid)
  returns table (event app.events, community_node_id uuid, manages boolean)
  language sql stable
  as $$
    select e, c.node_id, m.role operator(pg_catalog.=) 'manager'
      from app.community_members m
      join app.events e on e.community_id operator(pg_catalog.=) m.community_id
      join app.communities c on c.id operator(pg_catalog.=) e.community_id
     where m.member_node_id operator(pg_catalog.=) member_node
       and private.event_effective_end(e.starts_at, e.ends_at) operator(pg_catalog.>=) pg_catalog.now()
     order by e.starts_at, e.id
     limit 100
  $$;
comment on function private.upcoming_events_of(uuid) is
  'The upcoming list of the member with this node id: their communities'' events whose effective end is not past, soonest first, at most 100, with the community''s node id and whether they manage it. The one definition of the upcoming list (my_upcoming_events reads it for the caller; event_streams_open for each view).';
revoke all on function private.upcoming_events_of(uuid) from public;
grant execute on function private.upcoming_events_of(uuid) to authenticated;

create or replace function private.my_upcoming_events()
  returns table (event app.events, community_node_id uuid, manages boolean)
  language sql stable
  as $$
    select u.event, u.community_node_id, u.manages from private.upcoming_events_of(app.my_node_id()) u
  $$;

-- An access token's session ended by logout or refresh-token reuse.
create or replace function private.session_ended(session_id uuid)
  returns boolean
  language sql stable security definer
  set search_path = pg_catalog
  as $$
    select session_ended.session_id is not null and exists (
      select from identity.refresh_tokens t
       where t.session_id = session_ended.session_id
         and t.revoked_reason in ('logout', 'reused'))
  $$;
comment on function private.session_ended(uuid) is
  'Whether the session (an access token''s session_id claim) was ended by logout or refresh-token reuse. Null (no session): false.';
revoke all on function private.session_ended(uuid) from public;

create or replace function private.check_session(session_id uuid)
  returns boolean
  language plpgsql stable security definer
  set search_path = pg_catalog
  as $$
begin
  if private.session_ended(check_session.session_id) then
    raise exception 'the session of this access token has ended' using errcode = 'PT401', hint = 'session_ended';
  end if;
  return true;
end;
$$;

-- Registers one realtime connection per element of `users` (a user may
-- appear more than once), each within the per-user cap: stream_id is null
-- for an element over it. Each user's streams are counted under that user's
-- lock; the locks are taken in one order, so concurrent batches cannot
-- deadlock.
create or replace function private.event_streams_register(gateway text, kind text, ttl_seconds integer, users uuid[])
  returns table (n integer, stream_id uuid)
  language plpgsql
  set search_path = pg_catalog
  as $$
declare
  lock_key bigint;
begin
  for lock_key in
    select distinct hashtextextended('app.event_streams:' || u::text, 0) from unnest(users) u order by 1
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
             coalesce((select count(*) from app.event_streams s
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
  'Registers a realtime connection for each element of users for ttl_seconds (renewed by the gateway): (n, stream_id) per element in order, stream_id null past the per-user cap (private.max_event_streams, counting live streams and earlier elements).';
revoke all on function private.event_streams_register(text, text, integer, uuid[]) from public;
grant execute on function private.event_streams_register(text, text, integer, uuid[]) to authenticated;

create or replace function private.event_stream_register(gateway text, kind text, ttl_seconds integer)
  returns uuid
  language plpgsql
  set search_path = pg_catalog
  as $$
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

-- Opens a batch of SSE streams of GET /api/mobile/events/upcoming/stream,
-- each as api.event_stream_open would for its user. `requests` is a JSON
-- array of {"user_id", "session_id", "last_event_id"} (the last two may be
-- null), from access tokens the gateway verified. Returns
--   {"head": <change id>,
--    "views": [<snapshot>, ...],       each a JSON array of Events with __sync_meta
--    "streams": [{"stream_id", "mode", "last_event_id", "view"} | {"error", "message"}, ...]}
-- with one element of "streams" per request, in order: mode "resume" (no
-- view), "snapshot" or "reset" with the index of its snapshot in "views"
-- (shared by users whose memberships are the same); or error
-- "session_ended", "too_many_streams" or "no_profile". Head and every
-- snapshot come from one statement, so they are consistent.
create or replace function private.event_streams_open(gateway text, public_url text, ttl_seconds integer, requests jsonb)
  returns jsonb
  language plpgsql security definer
  set search_path = pg_catalog
  set jit = off
  as $$
declare
  wanted uuid[];
  registered uuid[];
begin
  -- The users who may open: a live session and a profile (streams belong to profiles).
  select coalesce(array_agg(case when not private.session_ended(r.session_id)
                                  and exists (select from app.profiles p where p.id = r.user_id)
                                 then r.user_id end order by r.n), '{}')
    into wanted
    from rows from (jsonb_to_recordset(requests) as (user_id uuid, session_id uuid)) with ordinality as r(user_id, session_id, n);
  -- Registered within the cap, in request order (a null user registers nothing).
  select coalesce(array_agg(s.stream_id order by s.n), '{}')
    into registered
    from private.event_streams_register(gateway, 'sse', ttl_seconds, array_remove(wanted, null)) s;

  return (
    with p as (
      select * from private.change_log_position()
    ),
    req as (
      select r.n::integer as n, r.user_id, r.session_id, r.last_event_id,
             -- the k-th wanted user got the k-th registration
             case when wanted[r.n] is not null
                  then registered[(select count(*) from unnest(wanted[1:r.n]) w where w is not null)]
             end as stream_id
        from rows from (jsonb_to_recordset(requests) as (user_id uuid, session_id uuid, last_event_id bigint))
             with ordinality as r(user_id, session_id, last_event_id, n)
    ),
    judged as (
      select req.n, req.user_id, req.stream_id,
             case
               when private.session_ended(req.session_id) then 'session_ended'
               when not exists (select from app.profiles pr where pr.id = req.user_id) then 'no_profile'
               when req.stream_id is null then 'too_many_streams'
             end as error,
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
comment on function private.event_streams_open(text, text, integer, jsonb) is
  'Opens a batch of upcoming-event streams for users whose access tokens the gateway verified: registers each within the per-user cap and returns {head, views: [snapshot...], streams: [{stream_id, mode, last_event_id, view} | {error}]}, one snapshot per distinct set of memberships. Each stream gets what api.event_stream_open gives its user. Called by the gateway''s stream opener.';
revoke all on function private.event_streams_open(text, text, integer, jsonb) from public;

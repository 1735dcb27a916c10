--! Previous: sha1:167cd041def4939d92c10b3d17437523b9490e9a
--! Hash: sha1:60903798b282239fbd09bee8f8b55d384b605f0e
--! Message: webhook-capacity

--! split: 320-webhook-capacity.sql
--------------------------------------------------------------------------------
-- No community's webhooks stall anyone else's background work
--
-- A manager could register 20 endpoints that accept a connection and never
-- answer: each attempt then held one of the worker's slots for 10 s, retries
-- took slots again, and every other community's deliveries (and the
-- e-mails, which shared the runner) waited behind them. Now:
--
--   * a community's deliveries use at most `community_slots` senders at once
--     (WEBHOOK_COMMUNITY_CONCURRENCY, default 2), counted in Postgres across
--     every worker: private.webhook_send_begin takes one of the community's
--     numbered advisory locks next to the endpoint's lock, or, when all are
--     held, leaves the endpoint waiting (waiting_since) with a job 30 s later
--     at the latest; private.webhook_send_end lets go and wakes the
--     community's endpoint that has waited longest. A slot is never held by a
--     job that is not sending;
--   * an endpoint backs off after 3 consecutive failed attempts: no attempt
--     to it before backoff_until, a pause that starts at the first delay of
--     the retry schedule and doubles with each further failure (at most an
--     hour, and at most the schedule's last delay). Its deliveries wait
--     without spending attempts; a success ends the back-off, and so does a
--     manager's ping or replay;
--   * e-mail and the periodic jobs run on a runner of their own
--     (gateway/jobs/worker.ts), so webhook deliveries never delay them.
--------------------------------------------------------------------------------

alter table app.webhook_endpoints add column if not exists consecutive_failures integer not null default 0;
alter table app.webhook_endpoints add column if not exists backoff_until timestamptz;
alter table app.webhook_endpoints add column if not exists waiting_since timestamptz;
comment on column app.webhook_endpoints.consecutive_failures is
  'Failed attempts since the last success (any delivery); from the third on, the endpoint backs off.';
comment on column app.webhook_endpoints.backoff_until is
  'While the endpoint keeps failing: no attempt to it before this time (null: none).';
comment on column app.webhook_endpoints.waiting_since is
  'Since when the endpoint has deliveries waiting for one of its community''s sending slots (null: not waiting).';

-- The endpoint object: backoff_until is what a manager needs to see why nothing arrives.
create or replace function private.webhook_endpoint_json(e app.webhook_endpoints) returns jsonb
  language sql stable
  set search_path = pg_catalog
  as $$
    select jsonb_build_object(
      'id', e.id,
      'community_id', e.community_id,
      'url', e.url,
      'events', to_jsonb(e.events),
      'active', e.active,
      'description', e.description,
      'backoff_until', app.iso(case when e.backoff_until > now() then e.backoff_until end),
      'created_at', app.iso(e.created_at))
  $$;
comment on function private.webhook_endpoint_json(app.webhook_endpoints) is
  'The webhook endpoint object (never its secret); backoff_until only while the back-off lasts.';

--------------------------------------------------------------------------------
-- A community's share of the senders
--------------------------------------------------------------------------------

create or replace function private.webhook_community_slot_key(community_id uuid, slot integer) returns bigint
  language sql immutable
  set search_path = pg_catalog
  as $$
    select hashtextextended('app.webhook_communities:send:' || webhook_community_slot_key.community_id::text || ':'
                            || webhook_community_slot_key.slot::text, 0)
  $$;
comment on function private.webhook_community_slot_key(uuid, integer) is
  'The advisory lock key of one of a community''s sending slots.';

drop function if exists private.webhook_send_begin(uuid, integer);
create function private.webhook_send_begin(endpoint_id uuid, community_slots integer)
  returns table (status text, slot integer, community_id uuid)
  language plpgsql volatile
  set search_path = pg_catalog
  as $$
declare
  e app.webhook_endpoints;
begin
  select * into e from app.webhook_endpoints w where w.id = webhook_send_begin.endpoint_id;
  if e.id is null then
    return query select 'gone'::text, null::integer, null::uuid;
    return;
  end if;
  -- One sender per endpoint: another worker sends to it (and looks again after letting go).
  if not private.webhook_endpoint_try_lock(e.id) then
    return query select 'busy'::text, null::integer, e.community_id;
    return;
  end if;
  for i in 1 .. greatest(community_slots, 1) loop
    if pg_try_advisory_lock(private.webhook_community_slot_key(e.community_id, i)) then
      if e.waiting_since is not null then
        update app.webhook_endpoints w set waiting_since = null where w.id = e.id;
      end if;
      return query select 'sending'::text, i, e.community_id;
      return;
    end if;
  end loop;
  -- Every slot of the community is sending: wait to be woken by the next
  -- that lets go (private.webhook_send_end), or 30 s at the latest. Nothing
  -- of this job holds a worker meanwhile.
  perform private.webhook_endpoint_unlock(e.id);
  update app.webhook_endpoints w set waiting_since = coalesce(w.waiting_since, clock_timestamp()) where w.id = e.id;
  perform private.webhook_schedule(e.id, clock_timestamp() + interval '30 seconds', keep_earlier => true);
  return query select 'waiting'::text, null::integer, e.community_id;
end;
$$;
comment on function private.webhook_send_begin(uuid, integer) is
  'The webhook_deliver task, on its session: takes the endpoint''s sending lock and one of its community''s community_slots sending '
  'slots (WEBHOOK_COMMUNITY_CONCURRENCY; advisory locks, so the share holds across workers). status sending (slot: the one taken, of community_id), '
  'busy (another worker sends to the endpoint), waiting (the community''s slots are all in use: the endpoint waits, its job moved '
  '30 s later unless woken sooner) or gone.';
revoke all on function private.webhook_send_begin(uuid, integer) from public;

drop function if exists private.webhook_send_end(uuid, integer);
drop function if exists private.webhook_send_end(uuid, uuid, integer);
create function private.webhook_send_end(endpoint_id uuid, community_id uuid, slot integer) returns uuid
  language plpgsql volatile
  set search_path = pg_catalog
  as $$
declare
  woken uuid;
begin
  perform private.webhook_endpoint_unlock(webhook_send_end.endpoint_id);
  perform pg_advisory_unlock(private.webhook_community_slot_key(webhook_send_end.community_id, webhook_send_end.slot));
  -- The community's endpoint that has waited longest for a slot goes next.
  select e.id into woken from app.webhook_endpoints e
   where e.community_id = webhook_send_end.community_id and e.waiting_since is not null
     and e.id <> webhook_send_end.endpoint_id
   order by e.waiting_since, e.id
   limit 1;
  if woken is not null then
    perform private.webhook_schedule(woken);
  end if;
  return woken;
end;
$$;
comment on function private.webhook_send_end(uuid, uuid, integer) is
  'The webhook_deliver task, done sending: lets go of the endpoint''s lock and its community''s slot, and wakes (a job now) the '
  'community''s endpoint that has waited longest for a slot; returns it.';
revoke all on function private.webhook_send_end(uuid, uuid, integer) from public;

--------------------------------------------------------------------------------
-- Back-off after consecutive failed attempts
--------------------------------------------------------------------------------

create or replace function private.webhook_due(endpoint_id uuid) returns boolean
  language sql stable
  set search_path = pg_catalog
  as $$
    select exists (select from app.webhook_deliveries d
                    where d.endpoint_id = webhook_due.endpoint_id and d.status in ('pending', 'retrying')
                      and d.next_attempt_at <= clock_timestamp())
       and not exists (select from app.webhook_endpoints e
                        where e.id = webhook_due.endpoint_id and e.backoff_until > clock_timestamp())
  $$;
comment on function private.webhook_due(uuid) is
  'Whether a delivery of the endpoint is due and the endpoint is not backing off (checked again after letting go of its lock).';

create or replace function private.webhook_delivery_next(endpoint_id uuid)
  returns table (delivery_id uuid, url text, secrets text[], webhook_id text, body text, attempt integer)
  language plpgsql volatile
  set search_path = pg_catalog
  as $$
declare
  e app.webhook_endpoints;
  d app.webhook_deliveries;
begin
  select * into e from app.webhook_endpoints w where w.id = webhook_delivery_next.endpoint_id;
  if e.id is null then
    return;
  end if;
  if not e.active then
    -- A paused or turned-off endpoint: what was waiting fails (replay it once it is on again).
    update app.webhook_deliveries w
       set status = 'failed', next_attempt_at = null, last_error = 'endpoint inactive'
     where w.endpoint_id = e.id and w.status in ('pending', 'retrying');
    return;
  end if;
  -- Backing off: nothing is sent before backoff_until (the deliveries keep their attempts).
  if e.backoff_until > clock_timestamp() then
    return;
  end if;
  -- The oldest due delivery: in the order of the changes.
  select * into d from app.webhook_deliveries w
   where w.endpoint_id = e.id and w.status in ('pending', 'retrying') and w.next_attempt_at <= clock_timestamp()
   order by w.created_at, w.id
   limit 1
   for update;
  if d.id is null then
    return;
  end if;
  update app.webhook_deliveries w set attempts = w.attempts + 1 where w.id = d.id returning * into d;
  return query select d.id, e.url,
                      array_remove(array[e.secret, case when e.previous_secret_expires_at > now() then e.previous_secret end], null),
                      private.webhook_message_id(d.id), d.payload::text, d.attempts;
end;
$$;
comment on function private.webhook_delivery_next(uuid) is
  'The webhook_deliver task, holding the endpoint''s lock: its oldest due delivery (URL, the secrets that sign it, webhook-id, body) with '
  'one more attempt counted; nothing when none is due, the endpoint backs off or is gone (inactive: its waiting deliveries fail).';

create or replace function private.webhook_endpoint_reschedule(endpoint_id uuid) returns timestamptz
  language plpgsql volatile
  set search_path = pg_catalog
  as $$
declare
  next_at timestamptz;
begin
  -- The earliest retry, but not before the back-off ends.
  select greatest(min(d.next_attempt_at), (select e.backoff_until from app.webhook_endpoints e
                                            where e.id = webhook_endpoint_reschedule.endpoint_id))
    into next_at
    from app.webhook_deliveries d
   where d.endpoint_id = webhook_endpoint_reschedule.endpoint_id and d.status in ('pending', 'retrying');
  if next_at is not null then
    perform private.webhook_schedule(webhook_endpoint_reschedule.endpoint_id, next_at, keep_earlier => true);
  end if;
  return next_at;
end;
$$;
comment on function private.webhook_endpoint_reschedule(uuid) is
  'After sending: a job for the endpoint''s next retry (if a delivery waits for one), not before its back-off ends; returns when.';

-- The pause after the n-th consecutive failed attempt (n >= 3): the first
-- delay of the schedule, doubled with each further failure, at most an hour
-- and at most the schedule's last delay.
create or replace function private.webhook_backoff_seconds(failures integer, retry_delays double precision[])
  returns double precision
  language sql immutable
  set search_path = pg_catalog
  as $$
    select case when webhook_backoff_seconds.failures < 3 then null
                else least(coalesce(webhook_backoff_seconds.retry_delays[1], 5)
                             * power(2, least(webhook_backoff_seconds.failures - 3, 20)),
                           coalesce(webhook_backoff_seconds.retry_delays[cardinality(webhook_backoff_seconds.retry_delays)], 3600),
                           3600) end
  $$;
comment on function private.webhook_backoff_seconds(integer, double precision[]) is
  'How long an endpoint backs off after its n-th consecutive failed attempt: none before the third, then the first retry delay doubled '
  'with each failure, at most the last retry delay and at most an hour.';

create or replace function private.webhook_delivery_finish(delivery_id uuid, attempt integer, status_code integer,
                                                           error text, response_body text, retry_delays double precision[])
  returns text
  language plpgsql volatile
  set search_path = pg_catalog
  as $$
declare
  d app.webhook_deliveries;
  retry integer;
  delay double precision;
begin
  select * into d from app.webhook_deliveries w where w.id = webhook_delivery_finish.delivery_id for update;
  -- Gone, or another attempt began since (this outcome is stale).
  if d.id is null or d.attempts <> webhook_delivery_finish.attempt then
    return coalesce(d.status, 'gone');
  end if;
  if status_code between 200 and 299 then
    update app.webhook_deliveries w
       set status = 'succeeded', delivered_at = now(), next_attempt_at = null, last_status_code = status_code,
           last_error = null, last_response_body = left(response_body, 1024)
     where w.id = d.id;
    -- A success ends a run of failures (written only when there was one).
    update app.webhook_endpoints e set consecutive_failures = 0, backoff_until = null
     where e.id = d.endpoint_id and (e.consecutive_failures <> 0 or e.backoff_until is not null);
    return 'succeeded';
  end if;
  -- The endpoint's run of failures; from the third on it backs off.
  update app.webhook_endpoints e
     set consecutive_failures = e.consecutive_failures + 1,
         backoff_until = clock_timestamp()
                         + make_interval(secs => private.webhook_backoff_seconds(e.consecutive_failures + 1, retry_delays))
   where e.id = d.endpoint_id;
  -- The n-th failure of this round waits retry_delays[n] seconds, ±20 %;
  -- past the schedule the delivery has failed.
  retry := d.attempts - d.round_base;
  if retry <= coalesce(cardinality(retry_delays), 0) then
    delay := greatest(retry_delays[retry], 0) * (0.8 + random() * 0.4);
    -- (The task schedules the endpoint's next job when it is done: private.webhook_endpoint_reschedule.)
    update app.webhook_deliveries w
       set status = 'retrying', next_attempt_at = clock_timestamp() + make_interval(secs => delay),
           last_status_code = status_code, last_error = left(error, 1000), last_response_body = left(response_body, 1024)
     where w.id = d.id;
    return 'retrying';
  end if;
  update app.webhook_deliveries w
     set status = 'failed', next_attempt_at = null,
         last_status_code = status_code, last_error = left(error, 1000), last_response_body = left(response_body, 1024)
   where w.id = d.id;
  perform private.webhook_endpoint_check_failing(d.endpoint_id);
  return 'failed';
end;
$$;
comment on function private.webhook_delivery_finish(uuid, integer, integer, text, text, double precision[]) is
  'Records an attempt''s outcome (status_code null: no answer, see error): 2xx succeeded (the endpoint''s run of failures ends); '
  'otherwise a retry after retry_delays[n] seconds ±20 % (WEBHOOK_RETRY_SCHEDULE) for the n-th failure of the round, or failed past '
  'the schedule; from the endpoint''s third consecutive failed attempt on, it backs off (private.webhook_backoff_seconds). '
  'Returns the new status.';

create or replace function private.webhook_sweep() returns integer
  language plpgsql volatile
  set search_path = pg_catalog
  as $$
declare
  scheduled integer;
begin
  -- A safety net (the worker's crontab, every minute): an endpoint with a
  -- delivery due for a minute gets a job if it has none waiting (its job
  -- failed while another, which found the lock taken, had already ended),
  -- not before its back-off ends.
  select count(private.webhook_schedule(e.endpoint_id, e.backoff_until, keep_earlier => true)) into scheduled
    from (select distinct d.endpoint_id, w.backoff_until
            from app.webhook_deliveries d
            join app.webhook_endpoints w on w.id = d.endpoint_id
           where d.status in ('pending', 'retrying') and d.next_attempt_at <= now() - interval '1 minute') e;
  return scheduled;
end;
$$;
comment on function private.webhook_sweep() is
  'Gives every endpoint with a delivery overdue by a minute a webhook_deliver job (one already waiting keeps its time; not before its '
  'back-off ends); returns how many endpoints. The worker runs it every minute.';

--------------------------------------------------------------------------------
-- A manager's ping or replay is an attempt now: it ends the back-off
--------------------------------------------------------------------------------

create or replace function api.webhook_ping(id uuid) returns jsonb
  language plpgsql volatile
  security definer
  set search_path = pg_catalog
  as $$
declare
  target app.webhook_endpoints := private.webhook_endpoint_of_caller(webhook_ping.id, false);
  queued app.webhook_deliveries;
begin
  if not target.active then
    raise exception 'the webhook is not active' using errcode = 'PT409', hint = 'webhook_inactive';
  end if;
  insert into app.webhook_deliveries (endpoint_id, event_type, payload)
    values (target.id, 'webhook.ping', jsonb_build_object(
      'type', 'webhook.ping', 'timestamp', app.iso(clock_timestamp()),
      'data', jsonb_build_object('endpoint_id', target.id, 'community_id', target.community_id)))
    returning * into queued;
  update app.webhook_endpoints e set backoff_until = null where e.id = target.id and e.backoff_until is not null;
  perform private.webhook_schedule(target.id);
  return private.webhook_delivery_json(queued);
end;
$$;
comment on function api.webhook_ping(uuid) is
  'POST /api/v1/platform/webhooks/{id}/ping: queues a webhook.ping delivery (ending a back-off: it is sent now) and returns it. '
  'PT404; PT403; PT409 webhook_inactive.';

create or replace function api.webhook_delivery_replay(id uuid, delivery_id uuid) returns jsonb
  language plpgsql volatile
  security definer
  set search_path = pg_catalog
  as $$
declare
  target app.webhook_endpoints := private.webhook_endpoint_of_caller(webhook_delivery_replay.id, false);
  replayed app.webhook_deliveries;
begin
  if not target.active then
    raise exception 'the webhook is not active' using errcode = 'PT409', hint = 'webhook_inactive';
  end if;
  -- A new round of attempts now (retries counted afresh), same webhook-id.
  update app.webhook_deliveries d
     set status = 'pending', next_attempt_at = now(), round_base = d.attempts
   where d.id = webhook_delivery_replay.delivery_id and d.endpoint_id = target.id
  returning * into replayed;
  if replayed.id is null then
    raise exception 'delivery not found' using errcode = 'PT404', hint = 'delivery_not_found';
  end if;
  update app.webhook_endpoints e set backoff_until = null where e.id = target.id and e.backoff_until is not null;
  perform private.webhook_schedule(target.id);
  return private.webhook_delivery_json(replayed);
end;
$$;
comment on function api.webhook_delivery_replay(uuid, uuid) is
  'POST /api/v1/platform/webhooks/{id}/deliveries/{delivery_id}/replay: sends the delivery again now (ending a back-off), with the '
  'same webhook-id and body. PT404 webhook_not_found / delivery_not_found; PT403; PT409 webhook_inactive.';

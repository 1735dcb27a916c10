--! Previous: sha1:bddc47eec88d6d94fd5bf8ba5817a0912f96b7b2
--! Hash: sha1:dcfe19ae10cf67321dcc851d72481dda9d9d2cd5
--! Message: webhooks

--! split: 110-webhooks.sql
--------------------------------------------------------------------------------
-- Outbound webhooks
--
-- A community's managers register endpoints (URL, event types); every change
-- of one of those types in the community becomes a delivery row and a
-- `webhook_deliver` job, both written by a trigger in the transaction of the
-- change (a transactional outbox: a rolled-back change sends nothing). The
-- worker (gateway/jobs/webhooks.ts) signs each delivery per Standard
-- Webhooks and sends it; these functions decide what is sent, to which
-- secrets, and what happens after each attempt (retry schedule with jitter,
-- giving up, turning off an endpoint that keeps failing).
--
-- One job sends an endpoint's due deliveries (`webhook_deliver`, keyed per
-- endpoint, so at most one waits), oldest first, while it holds the
-- endpoint's advisory lock: deliveries of one endpoint go one at a time, in
-- the order of their changes, and endpoints in parallel. (A graphile-worker
-- queue per endpoint would order them too, but the next job of a queue waits
-- for a poll after each one: about 9 deliveries a second to one endpoint.)
--------------------------------------------------------------------------------

create table if not exists app.webhook_endpoints (
  id                         uuid primary key default gen_random_uuid(),
  community_id               uuid not null references app.communities (id) on delete cascade,
  url                        text not null
    constraint webhook_endpoints_url_check check (length(url) <= 2000 and url ~* '^https?://[^/?#]'),
  events                     text[] not null
    constraint webhook_endpoints_events_check check (
      cardinality(events) between 1 and 7
      and events <@ array['event.created', 'event.updated', 'event.deleted', 'attendee.registered',
                          'checkin.created', 'member.joined', 'member.left']),
  description                text constraint webhook_endpoints_description_check check (length(description) <= 500),
  active                     boolean not null default true,
  -- whsec_ + base64 of 32 random bytes (Standard Webhooks); the previous one
  -- keeps signing (a second signature) until previous_secret_expires_at.
  secret                     text not null,
  previous_secret            text,
  previous_secret_expires_at timestamptz,
  -- Why the service turned it off (null when a manager did, or it is on).
  disabled_reason            text,
  created_by                 uuid references identity.users (id) on delete set null,
  created_at                 timestamptz not null default now(),
  updated_at                 timestamptz not null default now()
);
comment on table app.webhook_endpoints is
  'Webhook endpoints of a community (managed by its managers through api.webhook_*). Secrets are readable only by the owner.';
create index if not exists webhook_endpoints_community_idx on app.webhook_endpoints (community_id);
-- No policy and no grant: request roles reach endpoints only through the
-- security definer api.webhook_* functions, which check the caller.
alter table app.webhook_endpoints enable row level security;

create table if not exists app.webhook_deliveries (
  id                 uuid primary key default gen_random_uuid(),
  endpoint_id        uuid not null references app.webhook_endpoints (id) on delete cascade,
  event_type         text not null,
  -- The body sent, exactly: {type, timestamp, data}.
  payload            jsonb not null,
  status             text not null default 'pending'
    constraint webhook_deliveries_status_check check (status in ('pending', 'succeeded', 'retrying', 'failed')),
  attempts           integer not null default 0,
  -- attempts when the current round began (a replay starts a new round of retries)
  round_base         integer not null default 0,
  last_status_code   integer,
  last_error         text,
  -- The receiver's answer, its first 1 KB.
  last_response_body text,
  next_attempt_at    timestamptz default now(),
  created_at         timestamptz not null default clock_timestamp(),
  delivered_at       timestamptz
);
comment on table app.webhook_deliveries is
  'One message to one endpoint (its webhook-id is msg_ + the id without dashes, the same for every attempt and replay), with the outcome of its last attempt.';
create index if not exists webhook_deliveries_endpoint_idx on app.webhook_deliveries (endpoint_id, created_at desc, id desc);
create index if not exists webhook_deliveries_due_idx on app.webhook_deliveries (endpoint_id, created_at, id)
  where status in ('pending', 'retrying');
create index if not exists webhook_deliveries_unsuccessful_idx on app.webhook_deliveries (created_at)
  where status in ('retrying', 'failed');
create index if not exists webhook_deliveries_age_idx on app.webhook_deliveries (created_at);
alter table app.webhook_deliveries enable row level security;

--------------------------------------------------------------------------------
-- Objects
--------------------------------------------------------------------------------

create or replace function private.webhook_event_types() returns text[]
  language sql immutable
  set search_path = pg_catalog
  as $$
    select array['event.created', 'event.updated', 'event.deleted', 'attendee.registered',
                 'checkin.created', 'member.joined', 'member.left']
  $$;
comment on function private.webhook_event_types() is 'The event types an endpoint may subscribe to (webhook.ping is sent on request only).';

create or replace function private.webhook_new_secret() returns text
  language sql volatile
  set search_path = pg_catalog
  as $$
    select 'whsec_' || encode(extensions.gen_random_bytes(32), 'base64')
  $$;
comment on function private.webhook_new_secret() is 'A Standard Webhooks secret: whsec_ and the base64 of 32 random bytes.';

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
      'created_at', app.iso(e.created_at))
  $$;
comment on function private.webhook_endpoint_json(app.webhook_endpoints) is 'The webhook endpoint object (never its secret).';

create or replace function private.webhook_message_id(delivery_id uuid) returns text
  language sql immutable
  set search_path = pg_catalog
  as $$
    select 'msg_' || replace(delivery_id::text, '-', '')
  $$;
comment on function private.webhook_message_id(uuid) is 'The webhook-id header of a delivery: the same for every attempt and replay.';

create or replace function private.webhook_delivery_json(d app.webhook_deliveries) returns jsonb
  language sql stable
  set search_path = pg_catalog
  as $$
    select jsonb_build_object(
      'id', d.id,
      'webhook_id', private.webhook_message_id(d.id),
      'event_type', d.event_type,
      'status', d.status,
      'attempts', d.attempts,
      'last_status_code', d.last_status_code,
      'last_error', d.last_error,
      'last_response_body', d.last_response_body,
      'next_attempt_at', app.iso(d.next_attempt_at),
      'created_at', app.iso(d.created_at),
      'delivered_at', app.iso(d.delivered_at),
      'payload', d.payload)
  $$;
comment on function private.webhook_delivery_json(app.webhook_deliveries) is 'The delivery object of GET .../deliveries.';

--------------------------------------------------------------------------------
-- Queueing deliveries
--------------------------------------------------------------------------------

create or replace function private.webhook_schedule(endpoint_id uuid, run_at timestamptz default null,
                                                    keep_earlier boolean default false)
  returns bigint
  language plpgsql volatile
  set search_path = pg_catalog
  as $$
begin
  -- The endpoint's one pending job (job_key): `replace` moves it to run_at
  -- (now, for a new delivery); keep_earlier (a retry later on) leaves a
  -- pending job's earlier time alone. The task itself never fails for an
  -- HTTP outcome; its attempts only cover the worker losing the database.
  return private.enqueue_job('webhook_deliver', jsonb_build_object('endpoint_id', webhook_schedule.endpoint_id),
                             run_at => coalesce(webhook_schedule.run_at, clock_timestamp()),
                             max_attempts => 25,
                             job_key => 'webhook:' || webhook_schedule.endpoint_id::text,
                             job_key_mode => case when keep_earlier then 'preserve_run_at' else 'replace' end);
end;
$$;
comment on function private.webhook_schedule(uuid, timestamptz, boolean) is
  'Adds (or moves) the webhook_deliver job of an endpoint: now for new deliveries, at run_at for a retry.';

create or replace function private.webhook_listening(community_id uuid, event_type text) returns boolean
  language sql stable
  set search_path = pg_catalog
  as $$
    select exists (select from app.webhook_endpoints e
                    where e.community_id = webhook_listening.community_id and e.active
                      and webhook_listening.event_type = any (e.events))
  $$;
comment on function private.webhook_listening(uuid, text) is 'Whether an active endpoint of the community wants this event type (triggers check it before building a payload).';

create or replace function private.webhook_emit(community_id uuid, event_type text, data jsonb) returns integer
  language plpgsql volatile
  set search_path = pg_catalog
  as $$
declare
  queued integer;
begin
  with added as (
    insert into app.webhook_deliveries (endpoint_id, event_type, payload)
      select e.id, webhook_emit.event_type,
             jsonb_build_object('type', webhook_emit.event_type, 'timestamp', app.iso(clock_timestamp()), 'data', webhook_emit.data)
        from app.webhook_endpoints e
       where e.community_id = webhook_emit.community_id and e.active
         and webhook_emit.event_type = any (e.events)
       order by e.id
    returning id, endpoint_id)
  -- One delivery per endpoint, so one schedule each.
  select count(private.webhook_schedule(a.endpoint_id)) into queued from added a;
  return queued;
end;
$$;
comment on function private.webhook_emit(uuid, text, jsonb) is
  'Queues a delivery of {type, timestamp, data} to every active endpoint of the community subscribed to the type; returns how many.';

--------------------------------------------------------------------------------
-- What each event type carries
--------------------------------------------------------------------------------

create or replace function private.webhook_event_data(e app.events) returns jsonb
  language sql stable
  set search_path = pg_catalog
  as $$
    -- The Event object as a manager of its community sees it.
    select private.event_object(e, (select c.node_id from app.communities c where c.id = e.community_id), true, private.public_url())
  $$;
comment on function private.webhook_event_data(app.events) is 'The data of event.* webhooks: the Event object as the community''s managers see it.';

create or replace function private.webhook_member_json(community_id uuid, member_node_id uuid, role text, joined_at timestamptz)
  returns jsonb
  language sql stable
  set search_path = pg_catalog
  as $$
    -- The CommunityMember object of the member list: node id, role, joining
    -- time and name (the community's managers see their members' names); no e-mail.
    select jsonb_build_object('id', webhook_member_json.member_node_id, 'role', webhook_member_json.role,
                              'joined_at', app.iso(webhook_member_json.joined_at),
                              'name', (select p.name from app.profiles p where p.node_id = webhook_member_json.member_node_id))
  $$;
comment on function private.webhook_member_json(uuid, uuid, text, timestamptz) is 'The member of member.* webhooks (the CommunityMember object, no e-mail).';

create or replace function private.webhook_capture_events() returns trigger
  language plpgsql
  security definer
  set search_path = pg_catalog
  as $$
declare
  after_data jsonb;
begin
  if tg_op = 'INSERT' then
    if private.webhook_listening(new.community_id, 'event.created') then
      perform private.webhook_emit(new.community_id, 'event.created', private.webhook_event_data(new));
    end if;
  elsif tg_op = 'UPDATE' then
    if private.webhook_listening(new.community_id, 'event.updated') then
      after_data := private.webhook_event_data(new);
      -- Only a change an integrator can see.
      if after_data is distinct from private.webhook_event_data(old) then
        perform private.webhook_emit(new.community_id, 'event.updated', after_data);
      end if;
    end if;
  else
    if private.webhook_listening(old.community_id, 'event.deleted') then
      perform private.webhook_emit(old.community_id, 'event.deleted', private.webhook_event_data(old));
    end if;
  end if;
  return null;
end;
$$;
comment on function private.webhook_capture_events() is 'Trigger of app.events: event.created, event.updated (when the Event object changed), event.deleted.';

create or replace function private.webhook_capture_attendees() returns trigger
  language plpgsql
  security definer
  set search_path = pg_catalog
  as $$
declare
  found_event app.events;
begin
  select * into found_event from app.events e where e.id = new.event_id;
  if found_event.id is null or not private.webhook_listening(found_event.community_id, 'attendee.registered') then
    return null;
  end if;
  -- The e-mail the registering platform gave (it came in through the
  -- community's own platform credential); whether the account existed
  -- before is not told, as the platform endpoint does not tell it.
  perform private.webhook_emit(found_event.community_id, 'attendee.registered', jsonb_build_object(
    'event_id', found_event.id,
    'event_node_id', found_event.node_id,
    'email', (select u.email from identity.users u where u.id = new.user_id),
    'external_platform', new.external_platform,
    'registered_at', app.iso(new.registered_at)));
  return null;
end;
$$;
comment on function private.webhook_capture_attendees() is 'Trigger of app.event_attendees: attendee.registered.';

create or replace function private.webhook_capture_checkins() returns trigger
  language plpgsql
  security definer
  set search_path = pg_catalog
  as $$
declare
  found_event app.events;
  person app.profiles;
  shown boolean;
begin
  select * into found_event from app.events e where e.id = new.event_id;
  if found_event.id is null or not private.webhook_listening(found_event.community_id, 'checkin.created') then
    return null;
  end if;
  select * into person from app.profiles p where p.id = new.user_id;
  -- Who checked in only for a public check-in; the name only where the
  -- community's managers see it (a chosen name, or one of their members).
  shown := new.visibility = 'public' and person.node_id is not null;
  perform private.webhook_emit(found_event.community_id, 'checkin.created', jsonb_build_object(
    'id', new.id,
    'type', 'event',
    'event_id', found_event.id,
    'event_node_id', found_event.node_id,
    'visibility', new.visibility,
    'checked_in_at', app.iso(new.checked_in_at),
    'member', case when shown then jsonb_build_object(
      'id', person.node_id,
      'name', case when person.name_source = 'chosen'
                     or exists (select from app.community_members m
                                 where m.community_id = found_event.community_id and m.member_node_id = person.node_id)
                   then person.name end) end));
  return null;
end;
$$;
comment on function private.webhook_capture_checkins() is 'Trigger of app.checkins (event check-ins): checkin.created; the person only for a public check-in.';

create or replace function private.webhook_capture_members() returns trigger
  language plpgsql
  security definer
  set search_path = pg_catalog
  as $$
begin
  if tg_op = 'INSERT' then
    if private.webhook_listening(new.community_id, 'member.joined') then
      perform private.webhook_emit(new.community_id, 'member.joined', jsonb_build_object(
        'community_id', new.community_id,
        'member', private.webhook_member_json(new.community_id, new.member_node_id, new.role, new.joined_at)));
    end if;
  elsif private.webhook_listening(old.community_id, 'member.left') then
    perform private.webhook_emit(old.community_id, 'member.left', jsonb_build_object(
      'community_id', old.community_id,
      'member', private.webhook_member_json(old.community_id, old.member_node_id, old.role, old.joined_at),
      'left_at', app.iso(clock_timestamp())));
  end if;
  return null;
end;
$$;
comment on function private.webhook_capture_members() is 'Trigger of app.community_members: member.joined, member.left.';

create or replace trigger webhook_capture after insert or update or delete on app.events
  for each row execute function private.webhook_capture_events();
create or replace trigger webhook_capture after insert on app.event_attendees
  for each row execute function private.webhook_capture_attendees();
create or replace trigger webhook_capture after insert on app.checkins
  for each row when (new.event_id is not null) execute function private.webhook_capture_checkins();
create or replace trigger webhook_capture after insert or delete on app.community_members
  for each row execute function private.webhook_capture_members();

--------------------------------------------------------------------------------
-- The managers' interface (same credentials as the platform endpoints)
--------------------------------------------------------------------------------

create or replace function private.webhook_check(url text, events text[], description text) returns void
  language plpgsql immutable
  set search_path = pg_catalog
  as $$
begin
  if url is not null and (length(url) > 2000 or url !~* '^https?://[^/?#]') then
    raise exception 'url must be an http(s) URL of at most 2000 characters' using errcode = 'PT422', hint = 'invalid_url';
  end if;
  if events is not null then
    if cardinality(events) = 0 then
      raise exception 'events must name at least one event type' using errcode = 'PT422', hint = 'validation_error';
    end if;
    if not events <@ private.webhook_event_types() then
      raise exception 'unknown event type; known: %', array_to_string(private.webhook_event_types(), ', ')
        using errcode = 'PT422', hint = 'unknown_event_type';
    end if;
  end if;
  if length(description) > 500 then
    raise exception 'description must be at most 500 characters' using errcode = 'PT422', hint = 'validation_error';
  end if;
end;
$$;
comment on function private.webhook_check(text, text[], text) is 'PT422 for a URL, event list or description an endpoint cannot have (the address rules are the gateway''s, at registration and at every send).';

create or replace function private.webhook_endpoint_of_caller(id uuid, for_update boolean default false) returns app.webhook_endpoints
  language plpgsql volatile
  security definer
  set search_path = pg_catalog
  as $$
declare
  target app.webhook_endpoints;
begin
  if for_update then
    select * into target from app.webhook_endpoints e where e.id = webhook_endpoint_of_caller.id for update;
  else
    select * into target from app.webhook_endpoints e where e.id = webhook_endpoint_of_caller.id;
  end if;
  if target.id is null then
    raise exception 'webhook not found' using errcode = 'PT404', hint = 'webhook_not_found';
  end if;
  perform private.platform_authorize(target.community_id);
  return target;
end;
$$;
comment on function private.webhook_endpoint_of_caller(uuid, boolean) is
  'The endpoint, when the caller may manage its community (as for the platform endpoints): PT404 webhook_not_found, PT403 otherwise.';

create or replace function api.webhook_create(community_id uuid, url text, events text[], description text default null)
  returns jsonb
  language plpgsql volatile
  security definer
  set search_path = pg_catalog
  as $$
declare
  created app.webhook_endpoints;
begin
  perform private.platform_authorize(webhook_create.community_id);
  perform private.webhook_check(url, events, description);
  if url is null or events is null then
    raise exception 'url and events are required' using errcode = 'PT422', hint = 'validation_error';
  end if;
  -- At most 20 endpoints a community (serialised per community).
  perform pg_advisory_xact_lock(hashtextextended('app.webhook_endpoints:' || webhook_create.community_id::text, 0));
  if (select count(*) from app.webhook_endpoints e where e.community_id = webhook_create.community_id) >= 20 then
    raise exception 'a community has at most 20 webhook endpoints' using errcode = 'PT422', hint = 'too_many_webhooks';
  end if;
  insert into app.webhook_endpoints (community_id, url, events, description, secret, created_by)
    values (webhook_create.community_id, url,
            array(select distinct t from unnest(events) t order by t),
            nullif(btrim(description), ''), private.webhook_new_secret(), auth.uid())
    returning * into created;
  return private.webhook_endpoint_json(created) || jsonb_build_object('secret', created.secret);
end;
$$;
comment on function api.webhook_create(uuid, text, text[], text) is
  'POST /api/v1/platform/webhooks: registers an endpoint of the community (at most 20) and returns it with its secret (shown only here and on rotation). PT403 as the platform endpoints; PT422 invalid_url, unknown_event_type, too_many_webhooks.';
grant execute on function api.webhook_create(uuid, text, text[], text) to authenticated;

create or replace function api.webhooks_list(community_id uuid) returns jsonb
  language plpgsql stable
  security definer
  set search_path = pg_catalog
  as $$
begin
  perform private.platform_authorize(webhooks_list.community_id);
  return (select coalesce(jsonb_agg(private.webhook_endpoint_json(e) order by e.created_at, e.id), '[]')
            from app.webhook_endpoints e where e.community_id = webhooks_list.community_id);
end;
$$;
comment on function api.webhooks_list(uuid) is 'GET /api/v1/platform/webhooks?community_id=: the community''s endpoints, oldest first, without secrets. PT403 as the platform endpoints.';
grant execute on function api.webhooks_list(uuid) to authenticated;

create or replace function api.webhook_update(id uuid, patch jsonb) returns jsonb
  language plpgsql volatile
  security definer
  set search_path = pg_catalog
  as $$
declare
  target app.webhook_endpoints := private.webhook_endpoint_of_caller(webhook_update.id, true);
  new_url text;
  new_events text[];
  new_description text;
  new_active boolean;
  extra text;
begin
  if jsonb_typeof(patch) is distinct from 'object' then
    raise exception 'the body must be an object' using errcode = 'PT422', hint = 'validation_error';
  end if;
  select k into extra from jsonb_object_keys(patch) k where k not in ('url', 'events', 'active', 'description') limit 1;
  if extra is not null then
    raise exception 'unknown field %', extra using errcode = 'PT422', hint = 'validation_error';
  end if;
  if patch ? 'url' then
    if jsonb_typeof(patch -> 'url') is distinct from 'string' then
      raise exception 'url must be a string' using errcode = 'PT422', hint = 'validation_error';
    end if;
    new_url := patch ->> 'url';
  end if;
  if patch ? 'events' then
    if jsonb_typeof(patch -> 'events') is distinct from 'array'
       or exists (select from jsonb_array_elements(patch -> 'events') v where jsonb_typeof(v) <> 'string') then
      raise exception 'events must be an array of event types' using errcode = 'PT422', hint = 'validation_error';
    end if;
    new_events := array(select distinct v from jsonb_array_elements_text(patch -> 'events') v order by v);
  end if;
  if patch ? 'active' then
    if jsonb_typeof(patch -> 'active') is distinct from 'boolean' then
      raise exception 'active must be true or false' using errcode = 'PT422', hint = 'validation_error';
    end if;
    new_active := (patch ->> 'active')::boolean;
  end if;
  if patch ? 'description' and jsonb_typeof(patch -> 'description') not in ('string', 'null') then
    raise exception 'description must be a string or null' using errcode = 'PT422', hint = 'validation_error';
  end if;
  new_description := nullif(btrim(patch ->> 'description'), '');
  perform private.webhook_check(new_url, new_events, new_description);

  update app.webhook_endpoints e
     set url = coalesce(new_url, e.url),
         events = coalesce(new_events, e.events),
         active = coalesce(new_active, e.active),
         description = case when patch ? 'description' then new_description else e.description end,
         disabled_reason = case when coalesce(new_active, e.active) then null else e.disabled_reason end,
         updated_at = now()
   where e.id = target.id
  returning * into target;
  return private.webhook_endpoint_json(target);
end;
$$;
comment on function api.webhook_update(uuid, jsonb) is
  'PATCH /api/v1/platform/webhooks/{id}: changes url, events, active and description (the keys given). PT404 webhook_not_found; PT403; PT422.';
grant execute on function api.webhook_update(uuid, jsonb) to authenticated;

create or replace function api.webhook_delete(id uuid) returns void
  language plpgsql volatile
  security definer
  set search_path = pg_catalog
  as $$
declare
  target app.webhook_endpoints := private.webhook_endpoint_of_caller(webhook_delete.id, true);
begin
  -- Its deliveries go with it; their jobs then find nothing to send.
  delete from app.webhook_endpoints e where e.id = target.id;
end;
$$;
comment on function api.webhook_delete(uuid) is 'DELETE /api/v1/platform/webhooks/{id}: removes the endpoint and its deliveries. PT404 webhook_not_found; PT403.';
grant execute on function api.webhook_delete(uuid) to authenticated;

create or replace function api.webhook_rotate_secret(id uuid) returns jsonb
  language plpgsql volatile
  security definer
  set search_path = pg_catalog
  as $$
declare
  target app.webhook_endpoints := private.webhook_endpoint_of_caller(webhook_rotate_secret.id, true);
begin
  update app.webhook_endpoints e
     set previous_secret = e.secret,
         previous_secret_expires_at = now() + interval '24 hours',
         secret = private.webhook_new_secret(),
         updated_at = now()
   where e.id = target.id
  returning * into target;
  return private.webhook_endpoint_json(target) || jsonb_build_object('secret', target.secret);
end;
$$;
comment on function api.webhook_rotate_secret(uuid) is
  'POST /api/v1/platform/webhooks/{id}/rotate_secret: a new secret (returned); the previous one keeps signing too (a second signature) for 24 hours. PT404; PT403.';
grant execute on function api.webhook_rotate_secret(uuid) to authenticated;

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
  perform private.webhook_schedule(target.id);
  return private.webhook_delivery_json(queued);
end;
$$;
comment on function api.webhook_ping(uuid) is
  'POST /api/v1/platform/webhooks/{id}/ping: queues a webhook.ping delivery and returns it. PT404; PT403; PT409 webhook_inactive.';
grant execute on function api.webhook_ping(uuid) to authenticated;

create or replace function api.webhook_deliveries(id uuid, page_limit integer default 20, page_offset integer default 0)
  returns jsonb
  language plpgsql stable
  security definer
  set search_path = pg_catalog
  as $$
declare
  target app.webhook_endpoints := private.webhook_endpoint_of_caller(webhook_deliveries.id, false);
begin
  perform app.check_page(page_limit, page_offset);
  return jsonb_build_object(
    'data', (select coalesce(jsonb_agg(private.webhook_delivery_json(d) order by d.created_at desc, d.id desc), '[]')
               from (select * from app.webhook_deliveries d
                      where d.endpoint_id = target.id
                      order by d.created_at desc, d.id desc
                      limit page_limit offset page_offset) d),
    'pagination', app.pagination((select count(*) from app.webhook_deliveries d where d.endpoint_id = target.id),
                                 page_limit, page_offset));
end;
$$;
comment on function api.webhook_deliveries(uuid, integer, integer) is
  'GET /api/v1/platform/webhooks/{id}/deliveries: the endpoint''s deliveries, newest first, with payloads and pagination. PT404; PT403; PT400 invalid_limit / invalid_offset.';
grant execute on function api.webhook_deliveries(uuid, integer, integer) to authenticated;

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
  perform private.webhook_schedule(target.id);
  return private.webhook_delivery_json(replayed);
end;
$$;
comment on function api.webhook_delivery_replay(uuid, uuid) is
  'POST /api/v1/platform/webhooks/{id}/deliveries/{delivery_id}/replay: sends the delivery again now, with the same webhook-id and body. PT404 webhook_not_found / delivery_not_found; PT403; PT409 webhook_inactive.';
grant execute on function api.webhook_delivery_replay(uuid, uuid) to authenticated;

--------------------------------------------------------------------------------
-- The worker's side (gateway/jobs/webhooks.ts), as the owner
--------------------------------------------------------------------------------

create or replace function private.webhook_endpoint_try_lock(endpoint_id uuid) returns boolean
  language sql volatile
  set search_path = pg_catalog
  as $$
    select pg_try_advisory_lock(hashtextextended('app.webhook_endpoints:send:' || webhook_endpoint_try_lock.endpoint_id::text, 0))
  $$;
comment on function private.webhook_endpoint_try_lock(uuid) is
  'The webhook_deliver task: takes the endpoint''s sending lock (session-level, so it lasts across the attempts; gone with the session) unless another worker holds it.';

create or replace function private.webhook_endpoint_unlock(endpoint_id uuid) returns boolean
  language sql volatile
  set search_path = pg_catalog
  as $$
    select pg_advisory_unlock(hashtextextended('app.webhook_endpoints:send:' || webhook_endpoint_unlock.endpoint_id::text, 0))
  $$;
comment on function private.webhook_endpoint_unlock(uuid) is 'Lets go of the endpoint''s sending lock.';

create or replace function private.webhook_due(endpoint_id uuid) returns boolean
  language sql stable
  set search_path = pg_catalog
  as $$
    select exists (select from app.webhook_deliveries d
                    where d.endpoint_id = webhook_due.endpoint_id and d.status in ('pending', 'retrying')
                      and d.next_attempt_at <= clock_timestamp())
  $$;
comment on function private.webhook_due(uuid) is 'Whether a delivery of the endpoint is due (checked again after letting go of its lock).';

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
  'The webhook_deliver task, holding the endpoint''s lock: its oldest due delivery (URL, the secrets that sign it, webhook-id, body) with one more attempt counted; nothing when none is due or the endpoint is gone (inactive: its waiting deliveries fail).';

create or replace function private.webhook_endpoint_reschedule(endpoint_id uuid) returns timestamptz
  language plpgsql volatile
  set search_path = pg_catalog
  as $$
declare
  next_at timestamptz;
begin
  select min(d.next_attempt_at) into next_at
    from app.webhook_deliveries d
   where d.endpoint_id = webhook_endpoint_reschedule.endpoint_id and d.status in ('pending', 'retrying');
  if next_at is not null then
    perform private.webhook_schedule(webhook_endpoint_reschedule.endpoint_id, next_at, keep_earlier => true);
  end if;
  return next_at;
end;
$$;
comment on function private.webhook_endpoint_reschedule(uuid) is
  'After sending: a job for the endpoint''s next retry (if a delivery waits for one); returns when.';

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
    return 'succeeded';
  end if;
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
  'Records an attempt''s outcome (status_code null: no answer, see error): 2xx succeeded; otherwise a retry after retry_delays[n] seconds ±20 % (WEBHOOK_RETRY_SCHEDULE) for the n-th failure of the round, or failed past the schedule. Returns the new status.';

create or replace function private.webhook_endpoint_check_failing(endpoint_id uuid) returns boolean
  language plpgsql volatile
  set search_path = pg_catalog
  as $$
declare
  e app.webhook_endpoints;
  community_name text;
  manager record;
begin
  if (select count(*) < 20 or not bool_and(r.status = 'failed')
        from (select d.status from app.webhook_deliveries d
               where d.endpoint_id = webhook_endpoint_check_failing.endpoint_id
               order by d.created_at desc, d.id desc limit 20) r) then
    return false;
  end if;
  update app.webhook_endpoints w set active = false, disabled_reason = 'failing', updated_at = now()
   where w.id = webhook_endpoint_check_failing.endpoint_id and w.active
  returning * into e;
  if e.id is null then
    return false;
  end if;
  select c.name into community_name from app.communities c where c.id = e.community_id;
  for manager in
    select u.id, u.email
      from app.community_members m
      join app.profiles p on p.node_id = m.member_node_id
      join identity.users u on u.id = p.id
     where m.community_id = e.community_id and m.role = 'manager'
     order by u.email
  loop
    perform private.email_queue(manager.id, manager.email, 'webhook_disabled',
      'Webhook turned off: ' || e.url,
      'The webhook endpoint ' || e.url || ' of ' || coalesce(community_name, 'your community')
      || E' failed its last 20 deliveries and has been turned off.\n\n'
      || 'Endpoint id: ' || e.id::text || E'\n\n'
      || E'Fix the receiver, then turn it on again (PATCH /api/v1/platform/webhooks/' || e.id::text
      || E' {"active": true}) and replay the deliveries it missed.\n');
  end loop;
  return true;
end;
$$;
comment on function private.webhook_endpoint_check_failing(uuid) is
  'Turns an endpoint off when its last 20 deliveries all failed, and e-mails the community''s managers (through the outbox). Returns whether it did.';

create or replace function private.webhook_sweep() returns integer
  language plpgsql volatile
  set search_path = pg_catalog
  as $$
declare
  scheduled integer;
begin
  -- A safety net (the worker's crontab, every minute): an endpoint with a
  -- delivery due for a minute gets a job if it has none waiting (its job
  -- failed while another, which found the lock taken, had already ended).
  select count(private.webhook_schedule(e.endpoint_id, null, keep_earlier => true)) into scheduled
    from (select distinct d.endpoint_id
            from app.webhook_deliveries d
           where d.status in ('pending', 'retrying') and d.next_attempt_at <= now() - interval '1 minute') e;
  return scheduled;
end;
$$;
comment on function private.webhook_sweep() is
  'Gives every endpoint with a delivery overdue by a minute a webhook_deliver job (one already waiting keeps its time); returns how many endpoints. The worker runs it every minute.';

create or replace function private.webhook_deliveries_prune(keep interval default '30 days', batch integer default 10000)
  returns integer
  language plpgsql volatile
  set search_path = pg_catalog
  as $$
declare
  gone integer;
begin
  delete from app.webhook_deliveries d
   where d.id = any (array(select w.id from app.webhook_deliveries w
                            where w.created_at < now() - webhook_deliveries_prune.keep
                              and w.status in ('succeeded', 'failed')
                            limit webhook_deliveries_prune.batch));
  get diagnostics gone = row_count;
  return gone;
end;
$$;
comment on function private.webhook_deliveries_prune(interval, integer) is
  'Deletes finished webhook deliveries older than `keep` (30 days), at most `batch` a call; returns how many. The worker runs it daily.';

--------------------------------------------------------------------------------
-- Operators
--------------------------------------------------------------------------------

create or replace function admin.webhooks()
  returns table (id uuid, community_id uuid, community text, url text, events text[], active boolean,
                 disabled_reason text, created_at timestamptz, deliveries_24h bigint, failed_24h bigint,
                 pending bigint, last_failure_at timestamptz)
  language sql stable
  set search_path = pg_catalog
  as $$
    select e.id, e.community_id, c.name, e.url, e.events, e.active, e.disabled_reason, e.created_at,
           (select count(*) from app.webhook_deliveries d where d.endpoint_id = e.id and d.created_at > now() - interval '24 hours'),
           (select count(*) from app.webhook_deliveries d
             where d.endpoint_id = e.id and d.created_at > now() - interval '24 hours' and d.status = 'failed'),
           (select count(*) from app.webhook_deliveries d where d.endpoint_id = e.id and d.status in ('pending', 'retrying')),
           (select max(d.created_at) from app.webhook_deliveries d
             where d.endpoint_id = e.id and d.status in ('retrying', 'failed'))
      from app.webhook_endpoints e
      join app.communities c on c.id = e.community_id
     order by c.name, e.created_at
  $$;
comment on function admin.webhooks() is
  'Every webhook endpoint with its community, state and delivery counts (last 24 hours; pending now).';

create or replace function admin.webhook_failures(max_rows integer default 20)
  returns table (delivery_id uuid, endpoint_id uuid, url text, event_type text, status text, attempts integer,
                 last_status_code integer, last_error text, next_attempt_at timestamptz, created_at timestamptz)
  language sql stable
  set search_path = pg_catalog
  as $$
    select d.id, d.endpoint_id, e.url, d.event_type, d.status, d.attempts, d.last_status_code, d.last_error,
           d.next_attempt_at, d.created_at
      from app.webhook_deliveries d
      join app.webhook_endpoints e on e.id = d.endpoint_id
     where d.status in ('retrying', 'failed')
     order by d.created_at desc
     limit greatest(webhook_failures.max_rows, 0)
  $$;
comment on function admin.webhook_failures(integer) is 'The most recent webhook deliveries that failed or are waiting for a retry, newest first.';

create or replace function admin.jobs(max_rows integer default 50)
  returns table (id bigint, task text, queue text, state text, attempts integer, max_attempts integer,
                 run_at timestamptz, locked_by text, locked_at timestamptz, last_error text)
  language plpgsql stable
  set search_path = pg_catalog
  as $$
begin
  if to_regnamespace('graphile_worker') is null then
    raise exception 'the job queue is not installed (schema graphile_worker): start the gateway or `npm run worker` once'
      using errcode = '55000';
  end if;
  -- running: locked by a worker; failed: out of attempts; due: waiting for a
  -- free worker; scheduled: a retry or a job for later.
  return query
    select j.id::bigint, j.task_identifier::text, j.queue_name::text, s.state, j.attempts::integer, j.max_attempts::integer, j.run_at, j.locked_by::text,
           j.locked_at, left(j.last_error, 500)::text
      from graphile_worker.jobs j,
           lateral (select case when j.locked_at is not null then 'running'
                                when j.attempts >= j.max_attempts then 'failed'
                                when j.run_at <= now() then 'due'
                                else 'scheduled' end as state) s
     order by array_position(array['running', 'due', 'failed', 'scheduled'], s.state), j.run_at, j.id
     limit greatest(jobs.max_rows, 0);
end;
$$;
comment on function admin.jobs(integer) is
  'The worker''s queue (graphile_worker.jobs): running, due, failed and scheduled jobs, in that order, with attempts and last errors.';

create or replace function admin.job_workers()
  returns table (worker text, connected_since timestamptz, client_addr text)
  language sql stable
  set search_path = pg_catalog
  as $$
    -- Every worker holds a connection named after its graphile-worker pool id.
    select substr(a.application_name, length('job-worker ') + 1), a.backend_start, host(a.client_addr)
      from pg_stat_activity a
     where a.datname = current_database() and a.application_name like 'job-worker %'
     order by a.backend_start
  $$;
comment on function admin.job_workers() is 'The job workers connected now (their graphile-worker pool ids).';

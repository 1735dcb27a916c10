-- =============================================================================
-- Outbound webhooks: endpoints, the delivery outbox, retries
-- =============================================================================
-- A community's managers register endpoints (URL, event types). Every change
-- of one of those types in the community becomes a delivery row and a
-- webhook_deliver job, written by triggers in the change's transaction (a
-- transactional outbox: a rolled-back change sends nothing). The worker signs
-- each delivery (Standard Webhooks) and sends it; these functions decide what
-- is sent, to which secrets, and what follows each attempt: retries on a
-- schedule with jitter, giving up, and turning off an endpoint that keeps
-- failing (its managers get an e-mail). Deliveries of one endpoint go one at a
-- time, in the order of their changes, under the endpoint's advisory lock.
--
-- Code: gateway/routes/webhooks.ts, gateway/jobs/webhooks.ts
-- pgTAP: supabase/tests/webhooks.test.sql, supabase/tests/webhooks.capacity.test.sql
--
-- The whole source of this area, after the areas before it in
-- sql/areas/areas.json: types, tables, indexes, triggers, policies, the api
-- functions, the helpers. To change it: edit it here, then
-- `npm run db -- areas --diff` writes the migration (docs/dba.md).
-- =============================================================================

-- =============================================================================
-- Tables
-- =============================================================================

CREATE TABLE app.webhook_endpoints (
    id uuid DEFAULT gen_random_uuid() NOT NULL,
    community_id uuid NOT NULL,
    url text NOT NULL,
    events text[] NOT NULL,
    description text,
    active boolean DEFAULT true NOT NULL,
    secret text NOT NULL,
    previous_secret text,
    previous_secret_expires_at timestamp with time zone,
    disabled_reason text,
    created_by uuid,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    updated_at timestamp with time zone DEFAULT now() NOT NULL,
    consecutive_failures integer DEFAULT 0 NOT NULL,
    backoff_until timestamp with time zone,
    waiting_since timestamp with time zone,
    recover_window_start timestamp with time zone,
    recovered_in_window integer DEFAULT 0 NOT NULL,
    CONSTRAINT webhook_endpoints_description_check CHECK ((length(description) <= 500)),
    CONSTRAINT webhook_endpoints_events_check CHECK (((cardinality(events) BETWEEN 1 AND 8) AND (events <@ ARRAY['event.created'::text, 'event.updated'::text, 'event.deleted'::text, 'attendee.registered'::text, 'checkin.created'::text, 'member.joined'::text, 'member.left'::text, 'member.deleted'::text]))),
    CONSTRAINT webhook_endpoints_url_check CHECK (((length(url) <= 2000) AND (url ~* '^https?://[^/?#]'::text))),
    CONSTRAINT webhook_endpoints_pkey PRIMARY KEY (id),
    CONSTRAINT webhook_endpoints_community_id_fkey FOREIGN KEY (community_id) REFERENCES app.communities(id) ON DELETE CASCADE,
    CONSTRAINT webhook_endpoints_created_by_fkey FOREIGN KEY (created_by) REFERENCES identity.users(id) ON DELETE SET NULL
);
COMMENT ON TABLE app.webhook_endpoints IS 'Webhook endpoints of a community (managed by its managers through api.webhook_*). Secrets are readable only by the owner.';
COMMENT ON COLUMN app.webhook_endpoints.consecutive_failures IS 'Failed attempts since the last success (any delivery); from the third on, the endpoint backs off.';
COMMENT ON COLUMN app.webhook_endpoints.backoff_until IS 'While the endpoint keeps failing: no attempt to it before this time (null: none).';
COMMENT ON COLUMN app.webhook_endpoints.waiting_since IS 'Since when the endpoint has deliveries waiting for one of its community''s sending slots (null: not waiting).';
COMMENT ON COLUMN app.webhook_endpoints.recovered_in_window IS 'Deliveries sent again by `recover` since recover_window_start (an hour''s window): at most 10,000 an hour per endpoint.';
ALTER TABLE app.webhook_endpoints ENABLE ROW LEVEL SECURITY;

CREATE TABLE app.webhook_deliveries (
    id uuid DEFAULT gen_random_uuid() NOT NULL,
    endpoint_id uuid NOT NULL,
    event_type text NOT NULL,
    payload jsonb NOT NULL,
    status text DEFAULT 'pending'::text NOT NULL,
    attempts integer DEFAULT 0 NOT NULL,
    round_base integer DEFAULT 0 NOT NULL,
    last_status_code integer,
    last_error text,
    last_response_body text,
    next_attempt_at timestamp with time zone DEFAULT now(),
    created_at timestamp with time zone DEFAULT clock_timestamp() NOT NULL,
    delivered_at timestamp with time zone,
    sequence bigint,
    url text,
    CONSTRAINT webhook_deliveries_status_check CHECK ((status = ANY (ARRAY['pending'::text, 'succeeded'::text, 'retrying'::text, 'failed'::text]))),
    CONSTRAINT webhook_deliveries_pkey PRIMARY KEY (id),
    CONSTRAINT webhook_deliveries_endpoint_id_fkey FOREIGN KEY (endpoint_id) REFERENCES app.webhook_endpoints(id) ON DELETE CASCADE
);
CREATE SEQUENCE app.webhook_deliveries_sequence_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1;
ALTER SEQUENCE app.webhook_deliveries_sequence_seq OWNED BY app.webhook_deliveries.sequence;
ALTER TABLE ONLY app.webhook_deliveries ALTER COLUMN sequence SET DEFAULT nextval('app.webhook_deliveries_sequence_seq'::regclass);
COMMENT ON TABLE app.webhook_deliveries IS 'One message to one endpoint (its webhook-id is msg_ + the id without dashes, the same for every attempt and replay), with the outcome of its last attempt.';
COMMENT ON COLUMN app.webhook_deliveries.sequence IS 'The delivery''s number, sent as `sequence` in its body: increasing in the order deliveries are queued, so of two deliveries about one object the later change has the higher number; not consecutive. Null for deliveries queued before it existed.';
COMMENT ON COLUMN app.webhook_deliveries.url IS 'The endpoint''s URL when the delivery was queued (set on insert): it is sent there only; once the endpoint''s URL changes, it is not sent (nor recovered or replayed) to the new one.';
ALTER TABLE app.webhook_deliveries ENABLE ROW LEVEL SECURITY;

-- =============================================================================
-- Indexes
-- =============================================================================

CREATE INDEX webhook_endpoints_community_idx ON app.webhook_endpoints USING btree (community_id);
CREATE INDEX webhook_deliveries_age_idx ON app.webhook_deliveries USING btree (created_at);
CREATE INDEX webhook_deliveries_due_idx ON app.webhook_deliveries USING btree (endpoint_id, created_at, id) WHERE (status = ANY (ARRAY['pending'::text, 'retrying'::text]));
CREATE INDEX webhook_deliveries_endpoint_idx ON app.webhook_deliveries USING btree (endpoint_id, created_at DESC, id DESC);
CREATE INDEX webhook_deliveries_unsuccessful_idx ON app.webhook_deliveries USING btree (created_at) WHERE (status = ANY (ARRAY['retrying'::text, 'failed'::text]));

-- =============================================================================
-- Triggers
-- =============================================================================

CREATE TRIGGER _100_url BEFORE INSERT ON app.webhook_deliveries FOR EACH ROW EXECUTE FUNCTION private.webhook_delivery_url();

-- =============================================================================
-- Functions of api: what the gateway and the MCP server call, as the request's role
-- =============================================================================

CREATE FUNCTION api.webhook_create(community_id uuid, url text, events text[], description text DEFAULT NULL::text) RETURNS jsonb
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog'
    AS $$
declare
  created app.webhook_endpoints;
begin
  perform private.platform_authorize(webhook_create.community_id);
  perform private.require_full_account();
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

COMMENT ON FUNCTION api.webhook_create(community_id uuid, url text, events text[], description text) IS 'POST /api/v1/platform/webhooks: registers an endpoint of the community (at most 20) and returns it with its secret (shown only here and on rotation). PT403 as the platform endpoints, and for a guest (private.require_full_account); PT422 invalid_url, unknown_event_type, too_many_webhooks.';
GRANT EXECUTE ON FUNCTION api.webhook_create(community_id uuid, url text, events text[], description text) TO authenticated;

CREATE FUNCTION api.webhooks_list(community_id uuid) RETURNS jsonb
    LANGUAGE plpgsql STABLE SECURITY DEFINER
    SET search_path TO 'pg_catalog'
    AS $$
begin
  perform private.platform_authorize(webhooks_list.community_id);
  return (select coalesce(jsonb_agg(private.webhook_endpoint_json(e) order by e.created_at, e.id), '[]')
            from app.webhook_endpoints e where e.community_id = webhooks_list.community_id);
end;
$$;

COMMENT ON FUNCTION api.webhooks_list(community_id uuid) IS 'GET /api/v1/platform/webhooks?community_id=: the community''s endpoints, oldest first, without secrets. PT403 as the platform endpoints.';
GRANT EXECUTE ON FUNCTION api.webhooks_list(community_id uuid) TO authenticated;

CREATE FUNCTION api.webhook_update(id uuid, patch jsonb) RETURNS jsonb
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog'
    AS $$
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
  -- What waits for the old URL does not follow the new one: it fails (and is
  -- never recovered or replayed to the new URL).
  update app.webhook_deliveries w
     set status = 'failed', next_attempt_at = null, last_error = 'the endpoint''s URL changed after it was queued'
   where w.endpoint_id = target.id and w.status in ('pending', 'retrying') and w.url is distinct from target.url;
  return private.webhook_endpoint_json(target);
end;
$$;

COMMENT ON FUNCTION api.webhook_update(id uuid, patch jsonb) IS 'PATCH /api/v1/platform/webhooks/{id}: changes url, events, active and description (the keys given). A new url: what waits for the old one fails (deliveries go to the URL they were queued for only). PT404 webhook_not_found; PT403; PT422.';
GRANT EXECUTE ON FUNCTION api.webhook_update(id uuid, patch jsonb) TO authenticated;

CREATE FUNCTION api.webhook_delete(id uuid) RETURNS void
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog'
    AS $$
declare
  target app.webhook_endpoints := private.webhook_endpoint_of_caller(webhook_delete.id, true);
begin
  -- Its deliveries go with it; their jobs then find nothing to send.
  delete from app.webhook_endpoints e where e.id = target.id;
end;
$$;

COMMENT ON FUNCTION api.webhook_delete(id uuid) IS 'DELETE /api/v1/platform/webhooks/{id}: removes the endpoint and its deliveries. PT404 webhook_not_found; PT403.';
GRANT EXECUTE ON FUNCTION api.webhook_delete(id uuid) TO authenticated;

CREATE FUNCTION api.webhook_rotate_secret(id uuid) RETURNS jsonb
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog'
    AS $$
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

COMMENT ON FUNCTION api.webhook_rotate_secret(id uuid) IS 'POST /api/v1/platform/webhooks/{id}/rotate_secret: a new secret (returned); the previous one keeps signing too (a second signature) for 24 hours. PT404; PT403.';
GRANT EXECUTE ON FUNCTION api.webhook_rotate_secret(id uuid) TO authenticated;

CREATE FUNCTION api.webhook_ping(id uuid) RETURNS jsonb
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog'
    AS $$
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

COMMENT ON FUNCTION api.webhook_ping(id uuid) IS 'POST /api/v1/platform/webhooks/{id}/ping: queues a webhook.ping delivery (ending a back-off: it is sent now) and returns it. PT404; PT403; PT409 webhook_inactive.';
GRANT EXECUTE ON FUNCTION api.webhook_ping(id uuid) TO authenticated;

CREATE FUNCTION api.webhook_deliveries(id uuid, page_limit integer DEFAULT 20, page_offset integer DEFAULT 0, status text DEFAULT NULL::text, since timestamp with time zone DEFAULT NULL::timestamp with time zone, until timestamp with time zone DEFAULT NULL::timestamp with time zone) RETURNS jsonb
    LANGUAGE plpgsql STABLE SECURITY DEFINER
    SET search_path TO 'pg_catalog'
    AS $$
declare
  target app.webhook_endpoints := private.webhook_endpoint_of_caller(webhook_deliveries.id, false);
begin
  perform app.check_page(page_limit, page_offset);
  if status is not null and status not in ('pending', 'succeeded', 'retrying', 'failed') then
    raise exception 'status must be pending, succeeded, retrying or failed' using errcode = 'PT422', hint = 'validation_error';
  end if;
  return jsonb_build_object(
    'data', (select coalesce(jsonb_agg(private.webhook_delivery_json(d) order by d.created_at desc, d.id desc), '[]')
               from (select * from app.webhook_deliveries d
                      where d.endpoint_id = target.id
                        and (webhook_deliveries.status is null or d.status = webhook_deliveries.status)
                        and (webhook_deliveries.since is null or d.created_at >= webhook_deliveries.since)
                        and (webhook_deliveries.until is null or d.created_at < webhook_deliveries.until)
                      order by d.created_at desc, d.id desc
                      limit page_limit offset page_offset) d),
    'pagination', app.pagination((select count(*) from app.webhook_deliveries d
                                   where d.endpoint_id = target.id
                                     and (webhook_deliveries.status is null or d.status = webhook_deliveries.status)
                                     and (webhook_deliveries.since is null or d.created_at >= webhook_deliveries.since)
                                     and (webhook_deliveries.until is null or d.created_at < webhook_deliveries.until)),
                                 page_limit, page_offset));
end;
$$;

COMMENT ON FUNCTION api.webhook_deliveries(id uuid, page_limit integer, page_offset integer, status text, since timestamp with time zone, until timestamp with time zone) IS 'GET /api/v1/platform/webhooks/{id}/deliveries: the endpoint''s deliveries, newest first, with payloads and pagination; only those of status, queued at or after since and before until, when given. PT404; PT403; PT400 invalid_limit / invalid_offset; PT422 an unknown status.';
GRANT EXECUTE ON FUNCTION api.webhook_deliveries(id uuid, page_limit integer, page_offset integer, status text, since timestamp with time zone, until timestamp with time zone) TO authenticated;

CREATE FUNCTION api.webhook_delivery_replay(id uuid, delivery_id uuid) RETURNS jsonb
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog'
    AS $$
declare
  target app.webhook_endpoints := private.webhook_endpoint_of_caller(webhook_delivery_replay.id, false);
  replayed app.webhook_deliveries;
begin
  if not target.active then
    raise exception 'the webhook is not active' using errcode = 'PT409', hint = 'webhook_inactive';
  end if;
  select * into replayed from app.webhook_deliveries d
   where d.id = webhook_delivery_replay.delivery_id and d.endpoint_id = target.id;
  if replayed.id is null then
    raise exception 'delivery not found' using errcode = 'PT404', hint = 'delivery_not_found';
  end if;
  if replayed.url is distinct from target.url then
    raise exception 'the delivery was queued for an earlier URL of the endpoint: it is not sent to the new one'
      using errcode = 'PT409', hint = 'webhook_url_changed';
  end if;
  -- A new round of attempts now (retries counted afresh), same webhook-id.
  update app.webhook_deliveries d
     set status = 'pending', next_attempt_at = now(), round_base = d.attempts
   where d.id = replayed.id
  returning * into replayed;
  update app.webhook_endpoints e set backoff_until = null where e.id = target.id and e.backoff_until is not null;
  perform private.webhook_schedule(target.id);
  return private.webhook_delivery_json(replayed);
end;
$$;

COMMENT ON FUNCTION api.webhook_delivery_replay(id uuid, delivery_id uuid) IS 'POST /api/v1/platform/webhooks/{id}/deliveries/{delivery_id}/replay: sends the delivery again now (ending a back-off), with the same webhook-id and body, to the URL it was queued for. PT404 webhook_not_found / delivery_not_found; PT403; PT409 webhook_inactive, or webhook_url_changed for a delivery queued for an earlier URL of the endpoint.';
GRANT EXECUTE ON FUNCTION api.webhook_delivery_replay(id uuid, delivery_id uuid) TO authenticated;

CREATE FUNCTION api.webhook_recover(id uuid, since timestamp with time zone, until timestamp with time zone DEFAULT NULL::timestamp with time zone) RETURNS jsonb
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog'
    AS $$
declare
  -- Locked: one endpoint's recoveries take turns, so the hour's count holds.
  target app.webhook_endpoints := private.webhook_endpoint_of_caller(webhook_recover.id, true);
  recovered integer;
  remaining integer;
  window_start timestamptz;
  allowed integer;
begin
  if not target.active then
    raise exception 'the webhook is not active' using errcode = 'PT409', hint = 'webhook_inactive';
  end if;
  if since is null then
    raise exception 'since is required' using errcode = 'PT422', hint = 'validation_error';
  end if;
  -- At most 10,000 deliveries sent again an hour per endpoint.
  window_start := case when target.recover_window_start > now() - interval '1 hour' then target.recover_window_start else now() end;
  allowed := 10000 - case when window_start = target.recover_window_start then target.recovered_in_window else 0 end;
  if allowed <= 0 then
    raise exception 'at most 10,000 deliveries are recovered an hour per endpoint, try again later'
      using errcode = 'PT429', hint = 'rate_limited',
            detail = jsonb_build_object('retry_after', greatest(1, ceil(extract(epoch from window_start + interval '1 hour' - now())))::integer)::text;
  end if;
  -- The failed deliveries queued in [since, until) for the URL the endpoint
  -- has now (never those queued for an earlier one), oldest first, at most
  -- 10,000 a call: each a new round of attempts now, same webhook-id and
  -- body. They are sent oldest first, before anything queued after them.
  update app.webhook_deliveries d
     set status = 'pending', next_attempt_at = now(), round_base = d.attempts
   where d.id = any (array(
           select w.id from app.webhook_deliveries w
            where w.endpoint_id = target.id and w.status = 'failed' and w.url = target.url
              and w.created_at >= webhook_recover.since
              and (webhook_recover.until is null or w.created_at < webhook_recover.until)
            order by w.created_at, w.id
            limit allowed));
  get diagnostics recovered = row_count;
  select count(*) into remaining from app.webhook_deliveries w
   where w.endpoint_id = target.id and w.status = 'failed' and w.url = target.url
     and w.created_at >= webhook_recover.since
     and (webhook_recover.until is null or w.created_at < webhook_recover.until);
  update app.webhook_endpoints e
     set recover_window_start = window_start,
         recovered_in_window = case when window_start = target.recover_window_start then e.recovered_in_window else 0 end + recovered,
         backoff_until = case when recovered > 0 then null else e.backoff_until end
   where e.id = target.id;
  if recovered > 0 then
    perform private.webhook_schedule(target.id);
  end if;
  return jsonb_build_object('recovered', recovered, 'remaining', remaining);
end;
$$;

COMMENT ON FUNCTION api.webhook_recover(id uuid, since timestamp with time zone, until timestamp with time zone) IS 'POST /api/v1/platform/webhooks/{id}/recover: sends again every failed delivery queued for the endpoint''s current URL at or after since (and before until), oldest first, ending a back-off; at most 10,000 deliveries an hour per endpoint ({recovered, remaining}: call again while remaining > 0). PT404; PT403; PT409 webhook_inactive; PT422 without since; PT429 rate_limited past the hour''s 10,000 (detail: retry_after).';
GRANT EXECUTE ON FUNCTION api.webhook_recover(id uuid, since timestamp with time zone, until timestamp with time zone) TO authenticated;

-- =============================================================================
-- Helpers (private, app, identity): internal helpers and trigger functions; request roles run only those granted here
-- =============================================================================

CREATE FUNCTION private.webhook_check(url text, events text[], description text) RETURNS void
    LANGUAGE plpgsql IMMUTABLE
    SET search_path TO 'pg_catalog'
    AS $$
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

COMMENT ON FUNCTION private.webhook_check(url text, events text[], description text) IS 'PT422 for a URL, event list or description an endpoint cannot have (the address rules are the gateway''s, at registration and at every send).';


CREATE FUNCTION private.webhook_event_types() RETURNS text[]
    LANGUAGE sql IMMUTABLE
    SET search_path TO 'pg_catalog'
    AS $$
    select array['event.created', 'event.updated', 'event.deleted', 'attendee.registered',
                 'checkin.created', 'member.joined', 'member.left', 'member.deleted']
  $$;
COMMENT ON FUNCTION private.webhook_event_types() IS 'The event types an endpoint may subscribe to (webhook.ping is sent on request only).';


CREATE FUNCTION private.webhook_new_secret() RETURNS text
    LANGUAGE sql
    SET search_path TO 'pg_catalog'
    AS $$
    select 'whsec_' || encode(extensions.gen_random_bytes(32), 'base64')
  $$;
COMMENT ON FUNCTION private.webhook_new_secret() IS 'A Standard Webhooks secret: whsec_ and the base64 of 32 random bytes.';


CREATE FUNCTION private.webhook_endpoint_json(e app.webhook_endpoints) RETURNS jsonb
    LANGUAGE sql STABLE
    SET search_path TO 'pg_catalog'
    AS $$
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

COMMENT ON FUNCTION private.webhook_endpoint_json(e app.webhook_endpoints) IS 'The webhook endpoint object (never its secret); backoff_until only while the back-off lasts.';


CREATE FUNCTION private.webhook_endpoint_of_caller(id uuid, for_update boolean DEFAULT false) RETURNS app.webhook_endpoints
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog'
    AS $$
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

COMMENT ON FUNCTION private.webhook_endpoint_of_caller(id uuid, for_update boolean) IS 'The endpoint, when the caller may manage its community (as for the platform endpoints): PT404 webhook_not_found, PT403 otherwise.';


CREATE FUNCTION private.webhook_schedule(endpoint_id uuid, run_at timestamp with time zone DEFAULT NULL::timestamp with time zone, keep_earlier boolean DEFAULT false) RETURNS bigint
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog'
    AS $$
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

COMMENT ON FUNCTION private.webhook_schedule(endpoint_id uuid, run_at timestamp with time zone, keep_earlier boolean) IS 'Adds (or moves) the webhook_deliver job of an endpoint: now for new deliveries, at run_at for a retry.';


CREATE FUNCTION private.webhook_delivery_json(d app.webhook_deliveries) RETURNS jsonb
    LANGUAGE sql STABLE
    SET search_path TO 'pg_catalog'
    AS $$
    select jsonb_build_object(
      'id', d.id,
      'message_id', private.webhook_message_id(d.id),
      'webhook_id', private.webhook_message_id(d.id),
      'sequence', d.sequence,
      'event_type', d.event_type,
      'status', d.status,
      'attempts', d.attempts,
      'last_status_code', d.last_status_code,
      'last_error', d.last_error,
      'last_response_body', d.last_response_body,
      'next_attempt_at', app.iso(d.next_attempt_at),
      'created_at', app.iso(d.created_at),
      'delivered_at', app.iso(d.delivered_at),
      'payload', private.webhook_body(d))
  $$;

COMMENT ON FUNCTION private.webhook_delivery_json(d app.webhook_deliveries) IS 'The delivery object of GET .../deliveries: message_id (the webhook-id header; webhook_id is its deprecated name), sequence, and the payload as sent (private.webhook_body).';


CREATE FUNCTION private.webhook_message_id(delivery_id uuid) RETURNS text
    LANGUAGE sql IMMUTABLE
    SET search_path TO 'pg_catalog'
    AS $$
    select 'msg_' || replace(delivery_id::text, '-', '')
  $$;

COMMENT ON FUNCTION private.webhook_message_id(delivery_id uuid) IS 'The webhook-id header of a delivery: the same for every attempt and replay.';


CREATE FUNCTION private.webhook_body(d app.webhook_deliveries) RETURNS jsonb
    LANGUAGE sql IMMUTABLE
    SET search_path TO 'pg_catalog'
    AS $$
    -- {type, timestamp, data} and the delivery's sequence (none for deliveries queued before it existed).
    select case when d.sequence is null then d.payload else d.payload || jsonb_build_object('sequence', d.sequence) end
  $$;

COMMENT ON FUNCTION private.webhook_body(d app.webhook_deliveries) IS 'The JSON body of a delivery, the same on every attempt: {type, timestamp, data, sequence}.';


CREATE FUNCTION private.webhook_delivery_url() RETURNS trigger
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog'
    AS $$
begin
  if new.url is null then
    select e.url into new.url from app.webhook_endpoints e where e.id = new.endpoint_id;
  end if;
  return new;
end;
$$;
COMMENT ON FUNCTION private.webhook_delivery_url() IS 'Trigger: a delivery records the URL its endpoint has when it is queued; it is sent there only.';


CREATE FUNCTION private.webhook_backoff_seconds(failures integer, retry_delays double precision[]) RETURNS double precision
    LANGUAGE sql IMMUTABLE
    SET search_path TO 'pg_catalog'
    AS $$
    select case when webhook_backoff_seconds.failures < 3 then null
                else least(coalesce(webhook_backoff_seconds.retry_delays[1], 5)
                             * power(2, least(webhook_backoff_seconds.failures - 3, 20)),
                           coalesce(webhook_backoff_seconds.retry_delays[cardinality(webhook_backoff_seconds.retry_delays)], 3600),
                           3600) end
  $$;

COMMENT ON FUNCTION private.webhook_backoff_seconds(failures integer, retry_delays double precision[]) IS 'How long an endpoint backs off after its n-th consecutive failed attempt: none before the third, then the first retry delay doubled with each failure, at most the last retry delay and at most an hour.';


CREATE FUNCTION private.webhook_capture_attendees() RETURNS trigger
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog'
    AS $$
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
COMMENT ON FUNCTION private.webhook_capture_attendees() IS 'Trigger of app.event_attendees: attendee.registered.';


CREATE FUNCTION private.webhook_capture_checkins() RETURNS trigger
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog'
    AS $$
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
COMMENT ON FUNCTION private.webhook_capture_checkins() IS 'Trigger of app.checkins (event check-ins): checkin.created; the person only for a public check-in.';


CREATE FUNCTION private.webhook_capture_events() RETURNS trigger
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog'
    AS $$
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
COMMENT ON FUNCTION private.webhook_capture_events() IS 'Trigger of app.events: event.created, event.updated (when the Event object changed), event.deleted.';


CREATE FUNCTION private.webhook_capture_members() RETURNS trigger
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog'
    AS $$
begin
  if tg_op = 'INSERT' then
    if private.webhook_listening(new.community_id, 'member.joined') then
      perform private.webhook_emit(new.community_id, 'member.joined', jsonb_build_object(
        'community_id', new.community_id,
        'member', private.webhook_member_json(new.community_id, new.member_node_id, new.role, new.joined_at)));
    end if;
  elsif not exists (select from app.nodes n where n.id = old.member_node_id) then
    -- The member's account was deleted: member.deleted says so, with ids only
    -- (private.webhook_member_deleted).
    return null;
  elsif private.webhook_listening(old.community_id, 'member.left') then
    perform private.webhook_emit(old.community_id, 'member.left', jsonb_build_object(
      'community_id', old.community_id,
      'member', private.webhook_member_json(old.community_id, old.member_node_id, old.role, old.joined_at),
      'left_at', app.iso(clock_timestamp())));
  end if;
  return null;
end;
$$;
COMMENT ON FUNCTION private.webhook_capture_members() IS 'Trigger of app.community_members: member.joined, member.left (not for a member whose account is being deleted: member.deleted).';


CREATE FUNCTION private.webhook_community_slot_key(community_id uuid, slot integer) RETURNS bigint
    LANGUAGE sql IMMUTABLE
    SET search_path TO 'pg_catalog'
    AS $$
    select hashtextextended('app.webhook_communities:send:' || webhook_community_slot_key.community_id::text || ':'
                            || webhook_community_slot_key.slot::text, 0)
  $$;

COMMENT ON FUNCTION private.webhook_community_slot_key(community_id uuid, slot integer) IS 'The advisory lock key of one of a community''s sending slots.';


CREATE FUNCTION private.webhook_deliveries_prune(keep interval DEFAULT '30 days'::interval, batch integer DEFAULT 10000) RETURNS integer
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog'
    AS $$
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

COMMENT ON FUNCTION private.webhook_deliveries_prune(keep interval, batch integer) IS 'Deletes finished webhook deliveries older than `keep` (30 days), at most `batch` a call; returns how many. The worker runs it daily.';


CREATE FUNCTION private.webhook_delivery_finish(delivery_id uuid, attempt integer, status_code integer, error text, response_body text, retry_delays double precision[]) RETURNS text
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog'
    AS $$
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

COMMENT ON FUNCTION private.webhook_delivery_finish(delivery_id uuid, attempt integer, status_code integer, error text, response_body text, retry_delays double precision[]) IS 'Records an attempt''s outcome (status_code null: no answer, see error): 2xx succeeded (the endpoint''s run of failures ends); otherwise a retry after retry_delays[n] seconds ±20 % (WEBHOOK_RETRY_SCHEDULE) for the n-th failure of the round, or failed past the schedule; from the endpoint''s third consecutive failed attempt on, it backs off (private.webhook_backoff_seconds). Returns the new status.';


CREATE FUNCTION private.webhook_delivery_next(endpoint_id uuid) RETURNS TABLE(delivery_id uuid, url text, secrets text[], webhook_id text, body text, attempt integer)
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog'
    AS $$
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
  -- The oldest due delivery: in the order of the changes. One queued for an
  -- earlier URL of the endpoint (a change that raced the URL's) fails instead.
  loop
    select * into d from app.webhook_deliveries w
     where w.endpoint_id = e.id and w.status in ('pending', 'retrying') and w.next_attempt_at <= clock_timestamp()
     order by w.created_at, w.id
     limit 1
     for update;
    if d.id is null then
      return;
    end if;
    exit when d.url is not distinct from e.url;
    update app.webhook_deliveries w
       set status = 'failed', next_attempt_at = null, last_error = 'the endpoint''s URL changed after it was queued'
     where w.id = d.id;
  end loop;
  update app.webhook_deliveries w set attempts = w.attempts + 1 where w.id = d.id returning * into d;
  return query select d.id, e.url,
                      array_remove(array[e.secret, case when e.previous_secret_expires_at > now() then e.previous_secret end], null),
                      private.webhook_message_id(d.id), private.webhook_body(d)::text, d.attempts;
end;
$$;

COMMENT ON FUNCTION private.webhook_delivery_next(endpoint_id uuid) IS 'The webhook_deliver task, holding the endpoint''s lock: its oldest due delivery (URL, the secrets that sign it, webhook-id, body) with one more attempt counted; nothing when none is due, the endpoint backs off or is gone (inactive: its waiting deliveries fail). A delivery queued for an earlier URL of the endpoint fails instead of being sent.';


CREATE FUNCTION private.webhook_due(endpoint_id uuid) RETURNS boolean
    LANGUAGE sql STABLE
    SET search_path TO 'pg_catalog'
    AS $$
    select exists (select from app.webhook_deliveries d
                    where d.endpoint_id = webhook_due.endpoint_id and d.status in ('pending', 'retrying')
                      and d.next_attempt_at <= clock_timestamp())
       and not exists (select from app.webhook_endpoints e
                        where e.id = webhook_due.endpoint_id and e.backoff_until > clock_timestamp())
  $$;

COMMENT ON FUNCTION private.webhook_due(endpoint_id uuid) IS 'Whether a delivery of the endpoint is due and the endpoint is not backing off (checked again after letting go of its lock).';


CREATE FUNCTION private.webhook_emit(community_id uuid, event_type text, data jsonb) RETURNS integer
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog'
    AS $$
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

COMMENT ON FUNCTION private.webhook_emit(community_id uuid, event_type text, data jsonb) IS 'Queues a delivery of {type, timestamp, data} to every active endpoint of the community subscribed to the type; returns how many.';


CREATE FUNCTION private.webhook_endpoint_check_failing(endpoint_id uuid) RETURNS boolean
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog'
    AS $$
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

COMMENT ON FUNCTION private.webhook_endpoint_check_failing(endpoint_id uuid) IS 'Turns an endpoint off when its last 20 deliveries all failed, and e-mails the community''s managers (through the outbox). Returns whether it did.';


CREATE FUNCTION private.webhook_endpoint_reschedule(endpoint_id uuid) RETURNS timestamp with time zone
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog'
    AS $$
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

COMMENT ON FUNCTION private.webhook_endpoint_reschedule(endpoint_id uuid) IS 'After sending: a job for the endpoint''s next retry (if a delivery waits for one), not before its back-off ends; returns when.';


CREATE FUNCTION private.webhook_endpoint_try_lock(endpoint_id uuid) RETURNS boolean
    LANGUAGE sql
    SET search_path TO 'pg_catalog'
    AS $$
    select pg_try_advisory_lock(hashtextextended('app.webhook_endpoints:send:' || webhook_endpoint_try_lock.endpoint_id::text, 0))
  $$;

COMMENT ON FUNCTION private.webhook_endpoint_try_lock(endpoint_id uuid) IS 'The webhook_deliver task: takes the endpoint''s sending lock (session-level, so it lasts across the attempts; gone with the session) unless another worker holds it.';


CREATE FUNCTION private.webhook_endpoint_unlock(endpoint_id uuid) RETURNS boolean
    LANGUAGE sql
    SET search_path TO 'pg_catalog'
    AS $$
    select pg_advisory_unlock(hashtextextended('app.webhook_endpoints:send:' || webhook_endpoint_unlock.endpoint_id::text, 0))
  $$;

COMMENT ON FUNCTION private.webhook_endpoint_unlock(endpoint_id uuid) IS 'Lets go of the endpoint''s sending lock.';


CREATE FUNCTION private.webhook_event_data(e app.events) RETURNS jsonb
    LANGUAGE sql STABLE
    SET search_path TO 'pg_catalog'
    AS $$
    -- The Event object as a manager of its community sees it.
    select private.event_object(e, (select c.node_id from app.communities c where c.id = e.community_id), true, private.public_url())
  $$;

COMMENT ON FUNCTION private.webhook_event_data(e app.events) IS 'The data of event.* webhooks: the Event object as the community''s managers see it.';


CREATE FUNCTION private.webhook_listening(community_id uuid, event_type text) RETURNS boolean
    LANGUAGE sql STABLE
    SET search_path TO 'pg_catalog'
    AS $$
    select exists (select from app.webhook_endpoints e
                    where e.community_id = webhook_listening.community_id and e.active
                      and webhook_listening.event_type = any (e.events))
  $$;

COMMENT ON FUNCTION private.webhook_listening(community_id uuid, event_type text) IS 'Whether an active endpoint of the community wants this event type (triggers check it before building a payload).';


CREATE FUNCTION private.webhook_member_deleted(user_id uuid, member_node_id uuid, email text) RETURNS integer
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog'
    AS $$
declare
  member_of uuid[] := array(select m.community_id from app.community_members m
                             where m.member_node_id = webhook_member_deleted.member_node_id order by m.community_id);
  touched uuid[];
  community uuid;
  queued integer := 0;
begin
  -- The communities whose deliveries may name the person: theirs, and those
  -- of the events they checked in to or were registered for.
  touched := array(
    select unnest(member_of)
    union select e.community_id from app.checkins c join app.events e on e.id = c.event_id
           where c.user_id = webhook_member_deleted.user_id
    union select e.community_id from app.event_attendees a join app.events e on e.id = a.event_id
           where a.user_id = webhook_member_deleted.user_id);
  -- Their stored copies forget the person: the name in member.* and
  -- checkin.created, the e-mail in attendee.registered (a delivery still to
  -- be sent goes out without them).
  update app.webhook_deliveries d
     set payload = case
                     when d.payload -> 'data' -> 'member' ->> 'id' = webhook_member_deleted.member_node_id::text
                       then jsonb_set(d.payload, '{data,member,name}', 'null'::jsonb)
                     else jsonb_set(d.payload, '{data,email}', 'null'::jsonb)
                   end
   where d.endpoint_id in (select e.id from app.webhook_endpoints e where e.community_id = any (touched))
     and ((d.payload -> 'data' -> 'member' ->> 'id' = webhook_member_deleted.member_node_id::text
           and d.payload -> 'data' -> 'member' ? 'name')
          or (d.event_type = 'attendee.registered' and d.payload -> 'data' ->> 'email' = webhook_member_deleted.email));
  foreach community in array member_of loop
    if private.webhook_listening(community, 'member.deleted') then
      queued := queued + private.webhook_emit(community, 'member.deleted', jsonb_build_object(
        'community_id', community,
        'member', jsonb_build_object('id', webhook_member_deleted.member_node_id),
        'deleted_at', app.iso(clock_timestamp())));
    end if;
  end loop;
  return queued;
end;
$$;

COMMENT ON FUNCTION private.webhook_member_deleted(user_id uuid, member_node_id uuid, email text) IS 'An account being deleted (private.account_delete, before its rows go): member.deleted ({community_id, member: {id: node id}, deleted_at}) to the webhooks of each of its communities, and the stored deliveries of the communities it was a member of, checked in to or registered with forget it (the member''s name, the attendee''s e-mail set to null). Returns how many deliveries were queued.';


CREATE FUNCTION private.webhook_member_json(community_id uuid, member_node_id uuid, role text, joined_at timestamp with time zone) RETURNS jsonb
    LANGUAGE sql STABLE
    SET search_path TO 'pg_catalog'
    AS $$
    -- The CommunityMember object of the member list: node id, role, joining
    -- time and name (the community's managers see their members' names); no e-mail.
    select jsonb_build_object('id', webhook_member_json.member_node_id, 'role', webhook_member_json.role,
                              'joined_at', app.iso(webhook_member_json.joined_at),
                              'name', (select p.name from app.profiles p where p.node_id = webhook_member_json.member_node_id))
  $$;

COMMENT ON FUNCTION private.webhook_member_json(community_id uuid, member_node_id uuid, role text, joined_at timestamp with time zone) IS 'The member of member.* webhooks (the CommunityMember object, no e-mail).';


CREATE FUNCTION private.webhook_send_begin(endpoint_id uuid, community_slots integer) RETURNS TABLE(status text, slot integer, community_id uuid)
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog'
    AS $$
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

COMMENT ON FUNCTION private.webhook_send_begin(endpoint_id uuid, community_slots integer) IS 'The webhook_deliver task, on its session: takes the endpoint''s sending lock and one of its community''s community_slots sending slots (WEBHOOK_COMMUNITY_CONCURRENCY; advisory locks, so the share holds across workers). status sending (slot: the one taken, of community_id), busy (another worker sends to the endpoint), waiting (the community''s slots are all in use: the endpoint waits, its job moved 30 s later unless woken sooner) or gone.';


CREATE FUNCTION private.webhook_send_end(endpoint_id uuid, community_id uuid, slot integer) RETURNS uuid
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog'
    AS $$
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

COMMENT ON FUNCTION private.webhook_send_end(endpoint_id uuid, community_id uuid, slot integer) IS 'The webhook_deliver task, done sending: lets go of the endpoint''s lock and its community''s slot, and wakes (a job now) the community''s endpoint that has waited longest for a slot; returns it.';


CREATE FUNCTION private.webhook_sweep() RETURNS integer
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog'
    AS $$
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
COMMENT ON FUNCTION private.webhook_sweep() IS 'Gives every endpoint with a delivery overdue by a minute a webhook_deliver job (one already waiting keeps its time; not before its back-off ends); returns how many endpoints. The worker runs it every minute.';

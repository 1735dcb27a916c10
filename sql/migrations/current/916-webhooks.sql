-- Made by `npm run db -- areas --diff` from sql/areas/webhooks.sql: the statements that make
-- the migrated database what that file states. Each run writes it again:
-- edit the area file, not this one. Table changes go in a file of this
-- folder numbered below 900.

-- Bodies are checked once every function exists (the check validated them all).
set local check_function_bodies = off;

CREATE OR REPLACE FUNCTION api.webhook_delivery_replay(id uuid, delivery_id uuid)
 RETURNS jsonb
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog'
AS $function$
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
$function$;

CREATE OR REPLACE FUNCTION api.webhook_recover(id uuid, since timestamp with time zone, until timestamp with time zone DEFAULT NULL::timestamp with time zone)
 RETURNS jsonb
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog'
AS $function$
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
$function$;

CREATE OR REPLACE FUNCTION api.webhook_update(id uuid, patch jsonb)
 RETURNS jsonb
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog'
AS $function$
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
$function$;

CREATE OR REPLACE FUNCTION private.webhook_delivery_next(endpoint_id uuid)
 RETURNS TABLE(delivery_id uuid, url text, secrets text[], webhook_id text, body text, attempt integer)
 LANGUAGE plpgsql
 SET search_path TO 'pg_catalog'
AS $function$
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
$function$;

CREATE OR REPLACE FUNCTION private.webhook_delivery_url()
 RETURNS trigger
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog'
AS $function$
begin
  if new.url is null then
    select e.url into new.url from app.webhook_endpoints e where e.id = new.endpoint_id;
  end if;
  return new;
end;
$function$;

set local check_function_bodies to default;

drop trigger if exists _100_url on app.webhook_deliveries;
CREATE TRIGGER _100_url BEFORE INSERT ON app.webhook_deliveries FOR EACH ROW EXECUTE FUNCTION private.webhook_delivery_url();

comment on function api.webhook_delivery_replay(uuid,uuid) is 'POST /api/v1/platform/webhooks/{id}/deliveries/{delivery_id}/replay: sends the delivery again now (ending a back-off), with the same webhook-id and body, to the URL it was queued for. PT404 webhook_not_found / delivery_not_found; PT403; PT409 webhook_inactive, or webhook_url_changed for a delivery queued for an earlier URL of the endpoint.';

comment on function api.webhook_recover(uuid,timestamp with time zone,timestamp with time zone) is 'POST /api/v1/platform/webhooks/{id}/recover: sends again every failed delivery queued for the endpoint''s current URL at or after since (and before until), oldest first, ending a back-off; at most 10,000 deliveries an hour per endpoint ({recovered, remaining}: call again while remaining > 0). PT404; PT403; PT409 webhook_inactive; PT422 without since; PT429 rate_limited past the hour''s 10,000 (detail: retry_after).';

comment on function api.webhook_update(uuid,jsonb) is 'PATCH /api/v1/platform/webhooks/{id}: changes url, events, active and description (the keys given). A new url: what waits for the old one fails (deliveries go to the URL they were queued for only). PT404 webhook_not_found; PT403; PT422.';

comment on function private.webhook_delivery_next(uuid) is 'The webhook_deliver task, holding the endpoint''s lock: its oldest due delivery (URL, the secrets that sign it, webhook-id, body) with one more attempt counted; nothing when none is due, the endpoint backs off or is gone (inactive: its waiting deliveries fail). A delivery queued for an earlier URL of the endpoint fails instead of being sent.';

comment on function private.webhook_delivery_url() is 'Trigger: a delivery records the URL its endpoint has when it is queued; it is sent there only.';

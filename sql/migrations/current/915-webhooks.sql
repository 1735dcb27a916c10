-- Made by `npm run db -- areas --diff` from sql/areas/webhooks.sql: the statements that make
-- the migrated database what that file states. Each run writes it again:
-- edit the area file, not this one. Table changes go in a file of this
-- folder numbered below 900.

drop function if exists api.webhook_deliveries(uuid,integer,integer);

-- Bodies are checked once every function exists (the check validated them all).
set local check_function_bodies = off;

CREATE OR REPLACE FUNCTION api.webhook_deliveries(id uuid, page_limit integer DEFAULT 20, page_offset integer DEFAULT 0, status text DEFAULT NULL::text, since timestamp with time zone DEFAULT NULL::timestamp with time zone, until timestamp with time zone DEFAULT NULL::timestamp with time zone)
 RETURNS jsonb
 LANGUAGE plpgsql
 STABLE SECURITY DEFINER
 SET search_path TO 'pg_catalog'
AS $function$
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
$function$;

CREATE OR REPLACE FUNCTION api.webhook_recover(id uuid, since timestamp with time zone, until timestamp with time zone DEFAULT NULL::timestamp with time zone)
 RETURNS jsonb
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog'
AS $function$
declare
  target app.webhook_endpoints := private.webhook_endpoint_of_caller(webhook_recover.id, false);
  recovered integer;
  remaining integer;
begin
  if not target.active then
    raise exception 'the webhook is not active' using errcode = 'PT409', hint = 'webhook_inactive';
  end if;
  if since is null then
    raise exception 'since is required' using errcode = 'PT422', hint = 'validation_error';
  end if;
  -- The failed deliveries queued in [since, until), oldest first, at most
  -- 10,000 a call: each a new round of attempts now, same webhook-id and
  -- body. They are sent oldest first, before anything queued after them.
  update app.webhook_deliveries d
     set status = 'pending', next_attempt_at = now(), round_base = d.attempts
   where d.id = any (array(
           select w.id from app.webhook_deliveries w
            where w.endpoint_id = target.id and w.status = 'failed'
              and w.created_at >= webhook_recover.since
              and (webhook_recover.until is null or w.created_at < webhook_recover.until)
            order by w.created_at, w.id
            limit 10000));
  get diagnostics recovered = row_count;
  select count(*) into remaining from app.webhook_deliveries w
   where w.endpoint_id = target.id and w.status = 'failed'
     and w.created_at >= webhook_recover.since
     and (webhook_recover.until is null or w.created_at < webhook_recover.until);
  if recovered > 0 then
    update app.webhook_endpoints e set backoff_until = null where e.id = target.id and e.backoff_until is not null;
    perform private.webhook_schedule(target.id);
  end if;
  return jsonb_build_object('recovered', recovered, 'remaining', remaining);
end;
$function$;

CREATE OR REPLACE FUNCTION private.webhook_body(d app.webhook_deliveries)
 RETURNS jsonb
 LANGUAGE sql
 IMMUTABLE
 SET search_path TO 'pg_catalog'
AS $function$
    -- {type, timestamp, data} and the delivery's sequence (none for deliveries queued before it existed).
    select case when d.sequence is null then d.payload else d.payload || jsonb_build_object('sequence', d.sequence) end
  $function$;

CREATE OR REPLACE FUNCTION private.webhook_delivery_json(d app.webhook_deliveries)
 RETURNS jsonb
 LANGUAGE sql
 STABLE
 SET search_path TO 'pg_catalog'
AS $function$
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
                      private.webhook_message_id(d.id), private.webhook_body(d)::text, d.attempts;
end;
$function$;

set local check_function_bodies to default;

grant execute on function api.webhook_deliveries(uuid,integer,integer,text,timestamp with time zone,timestamp with time zone) to authenticated;

grant execute on function api.webhook_recover(uuid,timestamp with time zone,timestamp with time zone) to authenticated;

comment on column app.webhook_deliveries.sequence is 'The delivery''s number, sent as `sequence` in its body: increasing in the order deliveries are queued, so of two deliveries about one object the later change has the higher number; not consecutive. Null for deliveries queued before it existed.';

comment on function api.webhook_deliveries(uuid,integer,integer,text,timestamp with time zone,timestamp with time zone) is 'GET /api/v1/platform/webhooks/{id}/deliveries: the endpoint''s deliveries, newest first, with payloads and pagination; only those of status, queued at or after since and before until, when given. PT404; PT403; PT400 invalid_limit / invalid_offset; PT422 an unknown status.';

comment on function api.webhook_recover(uuid,timestamp with time zone,timestamp with time zone) is 'POST /api/v1/platform/webhooks/{id}/recover: sends again every failed delivery queued at or after since (and before until), oldest first, at most 10,000 a call ({recovered, remaining}: call again while remaining > 0), ending a back-off. PT404; PT403; PT409 webhook_inactive; PT422 without since.';

comment on function private.webhook_body(app.webhook_deliveries) is 'The JSON body of a delivery, the same on every attempt: {type, timestamp, data, sequence}.';

comment on function private.webhook_delivery_json(app.webhook_deliveries) is 'The delivery object of GET .../deliveries: message_id (the webhook-id header; webhook_id is its deprecated name), sequence, and the payload as sent (private.webhook_body).';

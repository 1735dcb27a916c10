--------------------------------------------------------------------------------
-- A delivery goes to the URL its endpoint had when it was queued, never to one
-- the endpoint was changed to (security review round 5): after a URL change,
-- `recover` sent every old failed delivery to the new URL, so a manager could
-- aim a burst of them at a third party. And `recover` is counted per endpoint
-- (at most 10,000 deliveries an hour).
--
-- Re-runnable (graphile-migrate applies current/ again on every change).
--------------------------------------------------------------------------------

alter table app.webhook_deliveries add column if not exists url text;
comment on column app.webhook_deliveries.url is
  'The endpoint''s URL when the delivery was queued (set on insert): it is sent there only; once the endpoint''s URL changes, it is not sent (nor recovered or replayed) to the new one.';
-- Deliveries queued before: the URL their endpoint has now (pruned after 30 days, so a bounded update).
update app.webhook_deliveries d set url = e.url
  from app.webhook_endpoints e
 where e.id = d.endpoint_id and d.url is null;

alter table app.webhook_endpoints add column if not exists recover_window_start timestamptz;
alter table app.webhook_endpoints add column if not exists recovered_in_window integer not null default 0;
comment on column app.webhook_endpoints.recovered_in_window is
  'Deliveries sent again by `recover` since recover_window_start (an hour''s window): at most 10,000 an hour per endpoint.';

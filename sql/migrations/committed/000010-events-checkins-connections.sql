--! Previous: sha1:0822c71631210c534ce3d24048e70686fc1575f7
--! Hash: sha1:be55dd413e16377fc3a882916b066327a0cd111e
--! Message: events-checkins-connections

--------------------------------------------------------------------------------
-- Events, check-ins, venues, deep links and connections
--
-- Builds on app.events, app.venues and app.community_members (000005). The
-- rules live here: the Event object (one function builds it for every
-- endpoint), event status and the venue concurrency window (one function
-- each), check-ins (one current check-in per user and place, enforced by
-- partial unique indexes), connections (row-level security: a user sees only
-- their own), the deep-link targets, and the change log the upcoming-events
-- stream reads.
--
-- Request roles reach a few internal helpers in schema `private`; each one
-- granted below either derives the caller from auth.uid() or only computes.
--------------------------------------------------------------------------------

grant usage on schema private to authenticated;

--------------------------------------------------------------------------------
-- Helpers: the caller's communities (the caller's node and timestamps use
-- app.my_node_id() and app.iso() from the communities migration)
--------------------------------------------------------------------------------

create function private.caller_community_ids() returns setof uuid
  language sql stable
  security definer
  set search_path = pg_catalog
  as $$
    select m.community_id
      from app.community_members m
     where m.member_node_id = app.my_node_id()
  $$;
comment on function private.caller_community_ids() is
  'The communities the signed-in user belongs to (as member or manager).';
grant execute on function private.caller_community_ids() to authenticated;


--------------------------------------------------------------------------------
-- Events: timing rules
--
-- effective end = end_time, or date + 2 hours when the event has none.
-- status: upcoming before date, ongoing from date to the effective end
-- (inclusive), past after it.
-- venue concurrency window: date - 2h <= now <= effective end + 2h.
-- Each takes the moment as a parameter (default now()) so the edges can be
-- tested exactly.
--------------------------------------------------------------------------------

-- Declared immutable so indexes can use it: adding a fixed number of hours to
-- a timestamptz does not depend on the time zone (only day and month
-- intervals do), so the result depends on the arguments alone.
create function private.event_effective_end(starts_at timestamptz, ends_at timestamptz) returns timestamptz
  language sql immutable parallel safe
  set search_path = pg_catalog
  as $$
    select coalesce(ends_at, starts_at + interval '2 hours')
  $$;
comment on function private.event_effective_end(timestamptz, timestamptz) is
  'When an event ends: its end_time, or 2 hours after its date when it has none.';
grant execute on function private.event_effective_end(timestamptz, timestamptz) to authenticated;

create function private.event_status(starts_at timestamptz, ends_at timestamptz, as_of timestamptz default now())
  returns text
  language sql immutable parallel safe
  set search_path = pg_catalog
  as $$
    select case
             when as_of < starts_at then 'upcoming'
             when as_of <= private.event_effective_end(starts_at, ends_at) then 'ongoing'
             else 'past'
           end
  $$;
comment on function private.event_status(timestamptz, timestamptz, timestamptz) is
  'Event status at a moment: upcoming before the date, ongoing until the effective end (inclusive), then past.';
grant execute on function private.event_status(timestamptz, timestamptz, timestamptz) to authenticated;

-- Upcoming list: the caller's communities' events whose effective end is not
-- past. Venue window: events at a venue whose effective end + 2h is not past.
create index events_community_end_idx on app.events (community_id, private.event_effective_end(starts_at, ends_at));
create index events_venue_end_idx on app.events (venue_node_id, private.event_effective_end(starts_at, ends_at))
  where venue_node_id is not null;

-- The venue concurrency window, written so that the index above serves it
-- (the two comparisons are the window's, moved across by the same 2 hours).
create function private.venue_concurrent_events(venue_node_id uuid, as_of timestamptz default now())
  returns setof app.events
  language sql stable
  set search_path = pg_catalog
  as $$
    select e.*
      from app.events e
     where e.venue_node_id = venue_concurrent_events.venue_node_id
       and private.event_effective_end(e.starts_at, e.ends_at) >= as_of - interval '2 hours'
       and e.starts_at <= as_of + interval '2 hours'
     order by e.starts_at, e.id
  $$;
comment on function private.venue_concurrent_events(uuid, timestamptz) is
  'Events concurrent at a venue at a moment: date - 2h <= moment <= effective end + 2h. Used by venue check-in and the venue deep link.';
grant execute on function private.venue_concurrent_events(uuid, timestamptz) to authenticated;

--------------------------------------------------------------------------------
-- Events: columns, visibility, the Event object
--------------------------------------------------------------------------------

alter table app.events
  add column platform_a_url text,
  add column platform_b_url text,
  add column platform_c_url text;
comment on column app.events.platform_a_url is 'The event''s page on platform_a; set when synced.';
comment on column app.events.platform_b_url is 'The event''s page on platform_b; set when synced.';
comment on column app.events.platform_c_url is 'The event''s page on platform_c; set when synced.';

grant select on app.events to authenticated;
create policy "Events are visible to signed-in users" on app.events
  for select to authenticated
  using (true);

grant select on app.venues to authenticated;
create policy "Venues are visible to signed-in users" on app.venues
  for select to authenticated
  using (true);

-- The Event object of spec section 2, for every endpoint that returns events.
-- public_url is the service's public base URL (PUBLIC_URL), passed by the
-- caller. can_sync and external_platforms are present only when the signed-in
-- caller manages the hosting community (absent, not null, otherwise).
-- Security definer: it reads the hosting community and the caller's own
-- membership, which request roles cannot read directly. PL/pgSQL rather than
-- SQL because it is called once per listed event: its queries' plans are
-- cached, which makes it about three times faster than a SQL body.
create function private.event_json(e app.events, public_url text) returns jsonb
  language plpgsql stable
  security definer
  set search_path = pg_catalog
  as $$
declare
  base text := rtrim(public_url, '/');
  community_node uuid;
  result jsonb;
begin
  select c.node_id into community_node from app.communities c where c.id = e.community_id;
  result := jsonb_build_object(
    'id', e.id,
    'title', e.title,
    'date', app.iso(e.starts_at),
    'community_node_id', community_node,
    'shortlink', e.shortlink,
    'deeplink_path', '/l/event/' || e.shortlink,
    'deeplink_url', base || '/l/event/' || e.shortlink,
    'public_url', '/e/' || e.shortlink,
    'public_full_url', base || '/e/' || e.shortlink,
    'description', e.description,
    'end_time', app.iso(e.ends_at),
    'event_url', e.event_url,
    'image_path', e.image_path,
    'location', e.location,
    'node_id', e.node_id,
    'platform_a_url', e.platform_a_url,
    'platform_b_url', e.platform_b_url,
    'platform_c_url', e.platform_c_url
  );
  if exists (
    select from app.community_members m
     where m.community_id = e.community_id
       and m.role = 'manager'
       and m.member_node_id = app.my_node_id()
  ) then
    result := result || jsonb_build_object(
      'can_sync', true,
      'external_platforms', to_jsonb(array_remove(array[
        case when e.platform_a_url is not null then 'platform_a' end,
        case when e.platform_b_url is not null then 'platform_b' end,
        case when e.platform_c_url is not null then 'platform_c' end
      ], null))
    );
  end if;
  return result;
end;
$$;
comment on function private.event_json(app.events, text) is
  'The Event object (spec section 2) as the signed-in caller may see it; public_url is PUBLIC_URL.';
grant execute on function private.event_json(app.events, text) to authenticated;

-- Paths that say event_id accept the event's id or its node id.
create function private.find_event(event_ref uuid) returns app.events
  language sql stable
  set search_path = pg_catalog
  as $$
    select e.* from app.events e where e.id = event_ref or e.node_id = event_ref limit 1
  $$;
comment on function private.find_event(uuid) is 'The event whose id or node id is event_ref (visible to the caller), or null.';
grant execute on function private.find_event(uuid) to authenticated;

--------------------------------------------------------------------------------
-- Realtime groundwork: the change log
--
-- Every insert, update and delete of an event is written to app.change_log by
-- a trigger and announced with NOTIFY on channel `event_changes` (payload: the
-- change id and the event id, as JSON; readers fetch the row from the log).
-- Writers take a transaction-level advisory lock before taking an id, so ids
-- are assigned in commit order: a reader that has seen change N never later
-- finds a committed change below N (Last-Event-ID resumes without loss).
-- Event writes are rare, so serialising them costs nothing noticeable.
--------------------------------------------------------------------------------

create table app.change_log (
  id         bigint generated always as identity primary key,
  operation  text not null check (operation in ('insert', 'update', 'delete')),
  table_name text not null,
  record_id  uuid not null,
  changed_at timestamptz not null default now(),
  row_data   jsonb not null
);
comment on table app.change_log is
  'Changes of app.events in commit order (id); read by the upcoming-events stream. Not granted to request roles.';
comment on column app.change_log.row_data is 'The row after the change (before it, for a delete).';
create index change_log_record_idx on app.change_log (table_name, record_id, id);
alter table app.change_log enable row level security;

create function private.tg_events__log_change() returns trigger
  language plpgsql volatile
  security definer
  set search_path = pg_catalog
  as $$
declare
  changed record;
  change_id bigint;
begin
  if tg_op = 'DELETE' then
    changed := old;
  else
    changed := new;
  end if;
  perform pg_advisory_xact_lock(hashtextextended('app.change_log', 0));
  insert into app.change_log (operation, table_name, record_id, row_data)
    values (lower(tg_op), tg_table_name, changed.id, to_jsonb(changed))
    returning id into change_id;
  perform pg_notify('event_changes', json_build_object('id', change_id, 'event_id', changed.id)::text);
  return null;
end;
$$;
comment on function private.tg_events__log_change() is
  'Trigger: logs an event change to app.change_log (in commit order) and NOTIFYs event_changes with {id, event_id}.';

create trigger _900_log_change after insert or update or delete on app.events
  for each row execute function private.tg_events__log_change();

create function admin.prune_change_log(older_than interval default '30 days') returns bigint
  language sql volatile
  set search_path = pg_catalog
  as $$
    with gone as (delete from app.change_log where changed_at < now() - older_than returning 1)
    select count(*) from gone
  $$;
comment on function admin.prune_change_log(interval) is
  'Deletes change-log entries older than the interval (default 30 days); returns how many.';

--------------------------------------------------------------------------------
-- Hats belong to users: shared by the check-in and connection rules
--------------------------------------------------------------------------------

create function private.hat_belongs_to(hat_id uuid, user_id uuid) returns boolean
  language sql stable
  security definer
  set search_path = pg_catalog
  as $$
    select exists (select from app.hats h where h.id = hat_belongs_to.hat_id and h.user_id = hat_belongs_to.user_id)
  $$;
comment on function private.hat_belongs_to(uuid, uuid) is 'Whether the hat is one of the user''s hats.';
grant execute on function private.hat_belongs_to(uuid, uuid) to authenticated;

--------------------------------------------------------------------------------
-- Check-ins
--
-- One row per check-in, to an event or to a venue. At most one current
-- (not checked out) check-in per user and event, and per user and venue:
-- partial unique indexes, so it holds under concurrent requests. Checking out
-- sets checked_out_at; the row stays.
--------------------------------------------------------------------------------

create table app.checkins (
  id             uuid primary key default gen_random_uuid(),
  user_id        uuid not null references app.profiles (id) on delete cascade,
  event_id       uuid references app.events (id) on delete cascade,
  venue_node_id  uuid references app.venues (node_id) on delete cascade,
  hat_id         uuid references app.hats (id) on delete set null,
  location_id    uuid,
  visibility     text not null default 'anonymous' check (visibility in ('anonymous', 'public')),
  checked_in_at  timestamptz not null default now(),
  checked_out_at timestamptz,
  constraint checkins_one_place check (num_nonnulls(event_id, venue_node_id) = 1),
  constraint checkins_out_after_in check (checked_out_at is null or checked_out_at >= checked_in_at)
);
comment on table app.checkins is 'Check-ins to events and venues. Current while checked_out_at is null.';
comment on column app.checkins.location_id is 'As sent by the client with an event check-in; stored, not interpreted.';

create unique index checkins_one_current_per_event on app.checkins (user_id, event_id)
  where checked_out_at is null and event_id is not null;
create unique index checkins_one_current_per_venue on app.checkins (user_id, venue_node_id)
  where checked_out_at is null and venue_node_id is not null;
create index checkins_user_current_idx on app.checkins (user_id, checked_in_at desc) where checked_out_at is null;
create index checkins_event_idx on app.checkins (event_id) where event_id is not null;
create index checkins_venue_idx on app.checkins (venue_node_id) where venue_node_id is not null;
create index checkins_hat_idx on app.checkins (hat_id) where hat_id is not null;

create function private.tg_checkins__check_hat() returns trigger
  language plpgsql volatile
  set search_path = pg_catalog
  as $$
begin
  if new.hat_id is not null and not private.hat_belongs_to(new.hat_id, new.user_id) then
    raise exception 'hat_id is not one of your hats' using errcode = 'PT422', hint = 'invalid_hat';
  end if;
  return new;
end;
$$;
comment on function private.tg_checkins__check_hat() is 'Trigger: a check-in''s hat must be one of the user''s hats (PT422).';

create trigger _200_check_hat before insert or update of hat_id, user_id on app.checkins
  for each row execute function private.tg_checkins__check_hat();

alter table app.checkins enable row level security;
grant select, insert (user_id, event_id, venue_node_id, hat_id, location_id, visibility),
  update (checked_out_at) on app.checkins to authenticated;
create policy "Users can read their own check-ins" on app.checkins
  for select to authenticated
  using (user_id = (select auth.uid()));
create policy "Users can check themselves in" on app.checkins
  for insert to authenticated
  with check (user_id = (select auth.uid()));
create policy "Users can check themselves out" on app.checkins
  for update to authenticated
  using (user_id = (select auth.uid()))
  with check (user_id = (select auth.uid()));

-- The check-in object returned by the check-in endpoints.
create function private.checkin_json(c app.checkins) returns jsonb
  language sql stable
  set search_path = pg_catalog
  as $$
    select jsonb_build_object(
      'id', c.id,
      'type', case when c.event_id is not null then 'event' else 'venue' end,
      'event_id', c.event_id,
      'venue_id', c.venue_node_id,
      'hat_id', c.hat_id,
      'location_id', c.location_id,
      'visibility', c.visibility,
      'checked_in_at', app.iso(c.checked_in_at),
      'checked_out_at', app.iso(c.checked_out_at)
    )
  $$;
comment on function private.checkin_json(app.checkins) is 'The check-in object of the check-in endpoints.';
grant execute on function private.checkin_json(app.checkins) to authenticated;

create type api.checkin_outcome as (created boolean, checkin jsonb);

-- Checks the caller in to one event or one venue, or returns their current
-- check-in there (created = false). A concurrent duplicate waits on the
-- partial unique index, then finds the row the other request committed.
create function private.check_in(event_id uuid, venue_node_id uuid, hat_id uuid, location_id uuid, visibility text)
  returns setof api.checkin_outcome
  language plpgsql volatile
  set search_path = pg_catalog
  as $$
declare
  caller uuid := auth.uid();
  checkin_row app.checkins;
begin
  if caller is null then
    raise exception 'not signed in' using errcode = 'PT401';
  end if;
  loop
    insert into app.checkins as c (user_id, event_id, venue_node_id, hat_id, location_id, visibility)
      values (caller, check_in.event_id, check_in.venue_node_id, check_in.hat_id, check_in.location_id,
              coalesce(check_in.visibility, 'anonymous'))
      on conflict do nothing
      returning c.* into checkin_row;
    if checkin_row.id is not null then
      return query select true, private.checkin_json(checkin_row);
      return;
    end if;
    select c.* into checkin_row
      from app.checkins c
     where c.user_id = caller
       and c.checked_out_at is null
       and c.event_id is not distinct from check_in.event_id
       and c.venue_node_id is not distinct from check_in.venue_node_id;
    if checkin_row.id is not null then
      return query select false, private.checkin_json(checkin_row);
      return;
    end if;
    -- Checked out between the two statements: try again.
  end loop;
end;
$$;
comment on function private.check_in(uuid, uuid, uuid, uuid, text) is
  'Checks the caller in to an event or a venue; idempotent: returns the current check-in with created = false.';
grant execute on function private.check_in(uuid, uuid, uuid, uuid, text) to authenticated;

create function api.event_checkin(event_id uuid, hat_id uuid default null, location_id uuid default null,
                                  visibility text default null)
  returns setof api.checkin_outcome
  language plpgsql volatile
  set search_path = pg_catalog
  as $$
declare
  found_event app.events := private.find_event(event_checkin.event_id);
begin
  if found_event.id is null then
    raise exception 'event not found' using errcode = 'PT404', hint = 'event_not_found';
  end if;
  return query select * from private.check_in(found_event.id, null, hat_id, location_id, visibility);
end;
$$;
comment on function api.event_checkin(uuid, uuid, uuid, text) is
  'POST /api/mobile/events/{event_id}/checkin: checks the caller in (created) or returns the current check-in. PT404 unknown event, PT422 a hat not the caller''s.';
grant execute on function api.event_checkin(uuid, uuid, uuid, text) to authenticated;

create function api.event_checkout(event_id uuid)
  returns jsonb
  language plpgsql volatile
  set search_path = pg_catalog
  as $$
declare
  found_event app.events := private.find_event(event_checkout.event_id);
  checkin_row app.checkins;
begin
  if found_event.id is null then
    raise exception 'event not found' using errcode = 'PT404', hint = 'event_not_found';
  end if;
  update app.checkins c
     set checked_out_at = greatest(now(), c.checked_in_at)
   where c.user_id = auth.uid() and c.event_id = found_event.id and c.checked_out_at is null
  returning c.* into checkin_row;
  if checkin_row.id is null then
    raise exception 'you are not checked in to this event' using errcode = 'PT404', hint = 'not_checked_in';
  end if;
  return private.checkin_json(checkin_row);
end;
$$;
comment on function api.event_checkout(uuid) is
  'DELETE /api/mobile/events/{event_id}/checkin: checks the caller out (the row stays). PT404 unknown event or not checked in.';
grant execute on function api.event_checkout(uuid) to authenticated;

create type api.venue_checkin_outcome as (type text, created boolean, checkin jsonb, events jsonb);

create function api.venue_checkin(venue_id uuid, hat_id uuid, visibility text default null)
  returns setof api.venue_checkin_outcome
  language plpgsql volatile
  set search_path = pg_catalog
  as $$
declare
  event_count integer;
  only_event uuid;
  selection jsonb;
begin
  if not exists (select from app.venues v where v.node_id = venue_checkin.venue_id) then
    raise exception 'venue not found' using errcode = 'PT404', hint = 'venue_not_found';
  end if;
  if hat_id is null or not private.hat_belongs_to(hat_id, auth.uid()) then
    raise exception 'hat_id must be one of your hats' using errcode = 'PT422', hint = 'invalid_hat';
  end if;

  select count(*), min(e.id::text)::uuid,
         coalesce(jsonb_agg(jsonb_build_object(
           'id', e.id, 'node_id', e.node_id, 'title', e.title, 'description', e.description,
           'date', app.iso(e.starts_at), 'end_time', app.iso(e.ends_at),
           'image_path', e.image_path) order by e.starts_at, e.id), '[]'::jsonb)
    into event_count, only_event, selection
    from private.venue_concurrent_events(venue_checkin.venue_id) e;

  if event_count = 0 then
    return query select 'venue', o.created, o.checkin, null::jsonb
      from private.check_in(null, venue_checkin.venue_id, hat_id, null, visibility) o;
  elsif event_count = 1 then
    return query select 'event', o.created, o.checkin, null::jsonb
      from private.check_in(only_event, null, hat_id, null, visibility) o;
  else
    return query select 'event_selection', false, null::jsonb, selection;
  end if;
end;
$$;
comment on function api.venue_checkin(uuid, uuid, text) is
  'POST /api/mobile/venues/{venue_id}/checkin: no concurrent event: venue check-in; one: check-in to it; several: the list (type event_selection), nobody checked in.';
grant execute on function api.venue_checkin(uuid, uuid, text) to authenticated;

create function api.venue_checkout(venue_id uuid)
  returns jsonb
  language plpgsql volatile
  set search_path = pg_catalog
  as $$
declare
  checkin_row app.checkins;
begin
  if not exists (select from app.venues v where v.node_id = venue_checkout.venue_id) then
    raise exception 'venue not found' using errcode = 'PT404', hint = 'venue_not_found';
  end if;
  update app.checkins c
     set checked_out_at = greatest(now(), c.checked_in_at)
   where c.user_id = auth.uid() and c.venue_node_id = venue_checkout.venue_id and c.checked_out_at is null
  returning c.* into checkin_row;
  if checkin_row.id is null then
    raise exception 'you are not checked in at this venue' using errcode = 'PT404', hint = 'not_checked_in';
  end if;
  return private.checkin_json(checkin_row);
end;
$$;
comment on function api.venue_checkout(uuid) is
  'DELETE /api/mobile/venues/{venue_id}/checkin: ends the caller''s venue check-in. PT404 unknown venue or not checked in.';
grant execute on function api.venue_checkout(uuid) to authenticated;

create type api.current_checkins as (checkins jsonb, current_ongoing_checkin jsonb);

create function api.checkins_current()
  returns setof api.current_checkins
  language plpgsql stable
  set search_path = pg_catalog
  as $$
begin
  if app.my_node_id() is null then
    raise exception 'user node not found' using errcode = 'PT422', hint = 'user_node_not_found';
  end if;
  return query
    with open_checkins as (
      select c.id, c.checked_in_at, c.hat_id, c.visibility, c.event_id, c.venue_node_id,
             e.title as event_title, e.starts_at, e.ends_at, v.name as venue_name,
             private.event_status(e.starts_at, e.ends_at, now()) as event_status
        from app.checkins c
        left join app.events e on e.id = c.event_id
        left join app.venues v on v.node_id = c.venue_node_id
       where c.user_id = auth.uid() and c.checked_out_at is null
    )
    select
      coalesce(
        (select jsonb_agg(
                  case when cur.event_id is not null then jsonb_build_object(
                    'type', 'event', 'event_id', cur.event_id, 'event_title', cur.event_title,
                    'event_status', cur.event_status, 'checked_in_at', app.iso(cur.checked_in_at),
                    'event_date', app.iso(cur.starts_at), 'event_end_time', app.iso(cur.ends_at),
                    'hat_id', cur.hat_id, 'visibility', cur.visibility)
                  else jsonb_build_object(
                    'type', 'venue', 'venue_id', cur.venue_node_id, 'venue_name', cur.venue_name,
                    'checked_in_at', app.iso(cur.checked_in_at),
                    'hat_id', cur.hat_id, 'visibility', cur.visibility)
                  end
                  order by cur.checked_in_at desc, cur.id)
           from open_checkins cur),
        '[]'::jsonb),
      (select jsonb_build_object('type', 'event', 'event_id', cur.event_id, 'event_title', cur.event_title,
                                 'event_status', cur.event_status)
         from open_checkins cur
        where cur.event_id is not null and cur.event_status = 'ongoing'
        order by cur.checked_in_at desc, cur.id
        limit 1);
end;
$$;
comment on function api.checkins_current() is
  'GET /api/mobile/checkins: the caller''s current check-ins, newest first, and the most recent ongoing event check-in. PT422 when the user has no node.';
grant execute on function api.checkins_current() to authenticated;

--------------------------------------------------------------------------------
-- API: events
--------------------------------------------------------------------------------

create function api.events_upcoming(public_url text)
  returns setof jsonb
  language sql stable
  set search_path = pg_catalog
  as $$
    select private.event_json(e, events_upcoming.public_url)
      from app.events e
     where e.community_id in (select private.caller_community_ids())
       and private.event_effective_end(e.starts_at, e.ends_at) >= now()
     order by e.starts_at, e.id
     limit 100
  $$;
comment on function api.events_upcoming(text) is
  'GET /api/mobile/events/upcoming: events of the caller''s communities whose effective end is not past, soonest first, at most 100.';
grant execute on function api.events_upcoming(text) to authenticated;

create function api.event_get(id uuid, public_url text)
  returns jsonb
  language plpgsql stable
  set search_path = pg_catalog
  as $$
declare
  found_event app.events := private.find_event(event_get.id);
begin
  if found_event.id is null then
    raise exception 'event not found' using errcode = 'PT404', hint = 'event_not_found';
  end if;
  return private.event_json(found_event, public_url);
end;
$$;
comment on function api.event_get(uuid, text) is
  'GET /api/mobile/events/{id}: one event (by id or node id) for any signed-in user. PT404 when unknown.';
grant execute on function api.event_get(uuid, text) to authenticated;

--------------------------------------------------------------------------------
-- Deep links and public pages (anonymous callers)
--
-- These are security definer: anonymous requests have no access to app.*,
-- and each function returns only what a public page shows.
--------------------------------------------------------------------------------

-- Where an event check-in link leads: iOS and Android browsers to the app,
-- everything else to the web check-in form.
create function private.event_checkin_location(event_node_id uuid, user_agent text, app_scheme text) returns text
  language sql immutable
  set search_path = pg_catalog
  as $$
    select case
             when coalesce(user_agent, '') ~ '(iPhone|iPad|iPod|Android)'
               then app_scheme || '://checkin/event/' || event_node_id
             else '/checkin/event/' || event_node_id
           end
  $$;
comment on function private.event_checkin_location(uuid, text, text) is
  'Target of an event check-in link: APP_SCHEME://checkin/event/{node} for iOS/Android user agents, else the web form.';

create function api.link_event_checkin(event_node_id uuid, user_agent text, app_scheme text)
  returns text
  language plpgsql stable
  security definer
  set search_path = pg_catalog
  as $$
declare
  found_node uuid;
begin
  select e.node_id into found_node from app.events e where e.node_id = link_event_checkin.event_node_id;
  if found_node is null then
    raise exception 'event not found' using errcode = 'PT404', hint = 'event_not_found';
  end if;
  return private.event_checkin_location(found_node, user_agent, app_scheme);
end;
$$;
comment on function api.link_event_checkin(uuid, text, text) is
  'GET /l/checkin/event/{event_node_id}: the redirect target for this user agent. PT404 when unknown.';
grant execute on function api.link_event_checkin(uuid, text, text) to anon, authenticated;

create function api.link_event_shortlink(shortlink text, user_agent text, app_scheme text)
  returns text
  language plpgsql stable
  security definer
  set search_path = pg_catalog
  as $$
declare
  found_node uuid;
begin
  select e.node_id into found_node from app.events e where e.shortlink = link_event_shortlink.shortlink;
  if found_node is null then
    raise exception 'event not found' using errcode = 'PT404', hint = 'event_not_found';
  end if;
  return private.event_checkin_location(found_node, user_agent, app_scheme);
end;
$$;
comment on function api.link_event_shortlink(text, text, text) is
  'GET /l/event/{shortlink}: as the event check-in link. PT404 when unknown.';
grant execute on function api.link_event_shortlink(text, text, text) to anon, authenticated;

create type api.venue_link as (location text, venue_name text, events jsonb);

create function api.link_venue_checkin(venue_node_id uuid)
  returns setof api.venue_link
  language plpgsql stable
  security definer
  set search_path = pg_catalog
  as $$
declare
  found_name text;
  event_count integer;
  first_node uuid;
  choices jsonb;
begin
  select v.name into found_name from app.venues v where v.node_id = link_venue_checkin.venue_node_id;
  if found_name is null then
    raise exception 'venue not found' using errcode = 'PT404', hint = 'venue_not_found';
  end if;
  select count(*), min(e.node_id::text)::uuid,
         jsonb_agg(jsonb_build_object(
           'node_id', e.node_id, 'title', e.title, 'date', app.iso(e.starts_at),
           'end_time', app.iso(e.ends_at), 'location', e.location) order by e.starts_at, e.id)
    into event_count, first_node, choices
    from private.venue_concurrent_events(link_venue_checkin.venue_node_id) e;
  if event_count = 0 then
    raise exception 'no event is taking place at this venue now' using errcode = 'PT404', hint = 'no_concurrent_event';
  elsif event_count = 1 then
    return query select '/l/checkin/event/' || first_node, found_name, choices;
  else
    return query select null::text, found_name, choices;
  end if;
end;
$$;
comment on function api.link_venue_checkin(uuid) is
  'GET /l/checkin/venue/{venue_node_id}: one concurrent event: its check-in link (location); several: the choices. PT404 unknown venue or none.';
grant execute on function api.link_venue_checkin(uuid) to anon, authenticated;

create function api.event_public(shortlink text, public_url text)
  returns jsonb
  language plpgsql stable
  security definer
  set search_path = pg_catalog
  as $$
declare
  found_event app.events;
begin
  select e.* into found_event from app.events e where e.shortlink = event_public.shortlink;
  if found_event.id is null then
    raise exception 'event not found' using errcode = 'PT404', hint = 'event_not_found';
  end if;
  return private.event_json(found_event, public_url);
end;
$$;
comment on function api.event_public(text, text) is 'GET /e/{shortlink}: the Event for the public page. PT404 when unknown.';
grant execute on function api.event_public(text, text) to anon, authenticated;

create function api.event_public_by_node(event_node_id uuid, public_url text)
  returns jsonb
  language plpgsql stable
  security definer
  set search_path = pg_catalog
  as $$
declare
  found_event app.events;
begin
  select e.* into found_event from app.events e where e.node_id = event_public_by_node.event_node_id;
  if found_event.id is null then
    raise exception 'event not found' using errcode = 'PT404', hint = 'event_not_found';
  end if;
  return private.event_json(found_event, public_url);
end;
$$;
comment on function api.event_public_by_node(uuid, text) is
  'GET /checkin/event/{event_node_id} (web check-in form): the Event. PT404 when unknown.';
grant execute on function api.event_public_by_node(uuid, text) to anon, authenticated;

--------------------------------------------------------------------------------
-- Connections
--
-- A user's record of meeting someone: owned by the user's node; a user reads
-- and changes only their own (row-level security). Hats named on a connection
-- must be the owner's (my_hat_id) and the target's (their_hat_id).
--------------------------------------------------------------------------------

create table app.connections (
  id              uuid primary key default gen_random_uuid(),
  owner_node_id   uuid not null references app.nodes (id) on delete cascade,
  target_node_id  uuid not null references app.nodes (id) on delete cascade,
  connection_type text not null default 'async' check (connection_type in ('in_event', 'post_event', 'async')),
  event_id        uuid references app.events (id) on delete set null,
  my_hat_id       uuid references app.hats (id) on delete set null,
  their_hat_id    uuid references app.hats (id) on delete set null,
  notes           text check (length(notes) <= 5000),
  strength        text check (strength in ('weak', 'medium', 'strong')),
  tags            text[] not null default '{}' check (cardinality(tags) <= 50),
  created_at      timestamptz not null default now(),
  updated_at      timestamptz not null default now()
);
comment on table app.connections is 'Connections a user (owner node) made with another node, optionally at an event and wearing hats.';

create index connections_owner_idx on app.connections (owner_node_id, created_at desc, id);
create index connections_owner_event_idx on app.connections (owner_node_id, event_id) where event_id is not null;
create index connections_target_idx on app.connections (target_node_id);
create index connections_event_idx on app.connections (event_id) where event_id is not null;
create index connections_my_hat_idx on app.connections (my_hat_id) where my_hat_id is not null;
create index connections_their_hat_idx on app.connections (their_hat_id) where their_hat_id is not null;

create trigger _100_set_updated_at before update on app.connections
  for each row execute function private.tg__set_updated_at();

create function private.tg_connections__check_hats() returns trigger
  language plpgsql volatile
  security definer
  set search_path = pg_catalog
  as $$
begin
  if new.my_hat_id is not null and not exists (
    select from app.hats h join app.profiles p on p.id = h.user_id
     where h.id = new.my_hat_id and p.node_id = new.owner_node_id
  ) then
    raise exception 'my_hat_id is not one of your hats' using errcode = 'PT422', hint = 'invalid_hat';
  end if;
  if new.their_hat_id is not null and not exists (
    select from app.hats h join app.profiles p on p.id = h.user_id
     where h.id = new.their_hat_id and p.node_id = new.target_node_id
  ) then
    raise exception 'their_hat_id is not a hat of the target user' using errcode = 'PT422', hint = 'invalid_their_hat';
  end if;
  return new;
end;
$$;
comment on function private.tg_connections__check_hats() is
  'Trigger: my_hat_id must be the owner''s hat and their_hat_id the target''s (PT422).';

create trigger _200_check_hats before insert or update of my_hat_id, their_hat_id, owner_node_id, target_node_id
  on app.connections
  for each row execute function private.tg_connections__check_hats();

alter table app.connections enable row level security;
grant select,
  insert (owner_node_id, target_node_id, connection_type, event_id, my_hat_id, their_hat_id, notes, strength, tags),
  update (notes, strength, tags)
  on app.connections to authenticated;
create policy "Users can read their own connections" on app.connections
  for select to authenticated
  using (owner_node_id = (select app.my_node_id()));
create policy "Users can create their own connections" on app.connections
  for insert to authenticated
  with check (owner_node_id = (select app.my_node_id()));
create policy "Users can update their own connections" on app.connections
  for update to authenticated
  using (owner_node_id = (select app.my_node_id()))
  with check (owner_node_id = (select app.my_node_id()));

create type api.connection as (
  id uuid, owner_node_id uuid, target_node_id uuid, connection_type text, event_id uuid,
  my_hat_id uuid, their_hat_id uuid, notes text, strength text, tags text[],
  created_at timestamptz, updated_at timestamptz
);

create function api.connection_create(
  target_node_id uuid,
  connection_type text default null,
  event_id uuid default null,
  my_hat_id uuid default null,
  their_hat_id uuid default null,
  notes text default null,
  strength text default null,
  tags text[] default null
) returns setof api.connection
  language plpgsql volatile
  set search_path = pg_catalog
  as $$
declare
  owner_node uuid := app.my_node_id();
  found_event app.events;
begin
  if owner_node is null then
    raise exception 'user node not found' using errcode = 'PT422', hint = 'user_node_not_found';
  end if;
  if not exists (select from app.nodes n where n.id = connection_create.target_node_id) then
    raise exception 'target node not found' using errcode = 'PT422', hint = 'target_node_not_found';
  end if;
  if connection_create.event_id is not null then
    found_event := private.find_event(connection_create.event_id);
    if found_event.id is null then
      raise exception 'event not found' using errcode = 'PT422', hint = 'event_not_found';
    end if;
  end if;
  return query
    insert into app.connections as c
      (owner_node_id, target_node_id, connection_type, event_id, my_hat_id, their_hat_id, notes, strength, tags)
    values (
      owner_node, connection_create.target_node_id,
      coalesce(connection_create.connection_type, case when found_event.id is not null then 'in_event' else 'async' end),
      found_event.id, connection_create.my_hat_id, connection_create.their_hat_id,
      connection_create.notes, connection_create.strength, coalesce(connection_create.tags, '{}')
    )
    returning c.id, c.owner_node_id, c.target_node_id, c.connection_type, c.event_id, c.my_hat_id,
              c.their_hat_id, c.notes, c.strength, c.tags, c.created_at, c.updated_at;
end;
$$;
comment on function api.connection_create(uuid, text, uuid, uuid, uuid, text, text, text[]) is
  'POST /api/mobile/connections: a connection owned by the caller''s node. connection_type defaults to in_event with an event, else async. PT422 for an unknown target node or event, or a hat that is not the caller''s (their_hat_id: not the target''s).';
grant execute on function api.connection_create(uuid, text, uuid, uuid, uuid, text, text, text[]) to authenticated;

create function api.connection_get(id uuid)
  returns setof api.connection
  language plpgsql stable
  set search_path = pg_catalog
  as $$
begin
  return query
    select c.id, c.owner_node_id, c.target_node_id, c.connection_type, c.event_id, c.my_hat_id,
           c.their_hat_id, c.notes, c.strength, c.tags, c.created_at, c.updated_at
      from app.connections c
     where c.id = connection_get.id;
  if not found then
    raise exception 'connection not found' using errcode = 'PT404', hint = 'connection_not_found';
  end if;
end;
$$;
comment on function api.connection_get(uuid) is
  'GET /api/mobile/connections/{id}: one of the caller''s connections. PT404 when unknown or someone else''s.';
grant execute on function api.connection_get(uuid) to authenticated;

-- The patch holds only the fields to change: a key that is absent keeps the
-- stored value; null clears notes and strength and empties tags.
create function api.connection_update(id uuid, patch jsonb)
  returns setof api.connection
  language plpgsql volatile
  set search_path = pg_catalog
  as $$
begin
  return query
    update app.connections c
       set notes = case when patch ? 'notes' then patch ->> 'notes' else c.notes end,
           strength = case when patch ? 'strength' then patch ->> 'strength' else c.strength end,
           tags = case
                    when not patch ? 'tags' then c.tags
                    when jsonb_typeof(patch -> 'tags') = 'array'
                      then array(select jsonb_array_elements_text(patch -> 'tags'))
                    else '{}'
                  end
     where c.id = connection_update.id
    returning c.id, c.owner_node_id, c.target_node_id, c.connection_type, c.event_id, c.my_hat_id,
              c.their_hat_id, c.notes, c.strength, c.tags, c.created_at, c.updated_at;
  if not found then
    raise exception 'connection not found' using errcode = 'PT404', hint = 'connection_not_found';
  end if;
end;
$$;
comment on function api.connection_update(uuid, jsonb) is
  'PATCH /api/mobile/connections/{id}: changes notes, strength and tags given in the patch. PT404 when unknown or someone else''s.';
grant execute on function api.connection_update(uuid, jsonb) to authenticated;

create function api.connections_list()
  returns setof api.connection
  language sql stable
  set search_path = pg_catalog
  as $$
    select c.id, c.owner_node_id, c.target_node_id, c.connection_type, c.event_id, c.my_hat_id,
           c.their_hat_id, c.notes, c.strength, c.tags, c.created_at, c.updated_at
      from app.connections c
     order by c.created_at desc, c.id desc
  $$;
comment on function api.connections_list() is 'GET /api/mobile/connections: the caller''s connections, newest first.';
grant execute on function api.connections_list() to authenticated;

create function api.connections_recent()
  returns setof api.connection
  language sql stable
  set search_path = pg_catalog
  as $$
    select c.id, c.owner_node_id, c.target_node_id, c.connection_type, c.event_id, c.my_hat_id,
           c.their_hat_id, c.notes, c.strength, c.tags, c.created_at, c.updated_at
      from app.connections c
     order by c.created_at desc, c.id desc
     limit 20
  $$;
comment on function api.connections_recent() is
  'GET /api/mobile/connections/recent: the caller''s 20 most recently created connections, newest first.';
grant execute on function api.connections_recent() to authenticated;

create function api.event_connections(event_id uuid)
  returns setof api.connection
  language plpgsql stable
  set search_path = pg_catalog
  as $$
declare
  found_event app.events := private.find_event(event_connections.event_id);
begin
  if found_event.id is null then
    raise exception 'event not found' using errcode = 'PT404', hint = 'event_not_found';
  end if;
  return query
    select c.id, c.owner_node_id, c.target_node_id, c.connection_type, c.event_id, c.my_hat_id,
           c.their_hat_id, c.notes, c.strength, c.tags, c.created_at, c.updated_at
      from app.connections c
     where c.event_id = found_event.id
       and c.owner_node_id = (select app.my_node_id())
     order by c.created_at desc, c.id desc;
end;
$$;
comment on function api.event_connections(uuid) is
  'GET /api/mobile/events/{event_id}/connections: the caller''s connections made at the event, newest first. PT404 unknown event.';
grant execute on function api.event_connections(uuid) to authenticated;

--! Previous: sha1:cf3080aa3f6736e507c6f10f51d44e25e2539f06
--! Hash: sha1:3fb58b9f3c826c66daf1fbec54a11ca440c5af8f
--! Message: draft-communities-private

--! split: 1-current.sql
-- Enter migration here

--! split: 520-draft-communities-private.sql
--------------------------------------------------------------------------------
-- A draft community's events are public nowhere.
--
-- The community calendar (/c/{id}/calendar.ics) answered 404 for a draft
-- community, but its events were served without a credential by the public
-- event page /e/{shortlink} (with its share previews), its .ics, the deep
-- links /l/event/{shortlink} and /l/checkin/event/{id}, the web check-in form
-- /checkin/event/{id} and the venue link /l/checkin/venue/{id}.
--
-- One rule, private.community_events_public(community_id): a community's
-- events are public when it exists and is not a draft. Every function that
-- serves an event without a credential applies it, and answers an event of a
-- draft community as an unknown one (PT404). Signed-in members keep seeing
-- them in the mobile endpoints (the draft flag does not hide a community
-- there).
--------------------------------------------------------------------------------

create or replace function private.community_events_public(community_id uuid) returns boolean
  language sql stable
  as $$
    select exists (select from app.communities c
                    where c.id operator(pg_catalog.=) community_events_public.community_id and not c.is_draft)
  $$;
comment on function private.community_events_public(uuid) is
  'Whether a community''s events may be served without a credential (event page, its .ics, deep links, web check-in form, venue link, community calendar): it exists and is not a draft.';

create or replace function private.calendar_event_rows(shortlink text) returns setof private.calendar_row
  language sql stable
  as $$
    -- The live event; a deleted one (its tombstone) only when no event has the shortlink now.
    -- Neither when its community's events are not public (a draft).
    select r.event_id, r.shortlink, r.title, r.description, r.starts_at, r.ends_at, r.location, r.sequence,
           r.created_at, r.stamp, r.cancelled
      from (select e.id, e.shortlink, e.title, e.description, e.starts_at, e.ends_at,
                   private.event_location_text(v.name, v.address, e.location), e.sequence, e.created_at,
                   greatest(e.updated_at, v.updated_at), false, 0
              from app.events e
              left join app.venues v on v.node_id operator(pg_catalog.=) e.venue_node_id
             where e.shortlink operator(pg_catalog.=) calendar_event_rows.shortlink
               and private.community_events_public(e.community_id)
            union all
            select t.event_id, t.shortlink, t.title, t.description, t.starts_at, t.ends_at, t.location, t.sequence,
                   t.created_at, t.deleted_at, true, 1
              from app.event_tombstones t
             where t.shortlink operator(pg_catalog.=) calendar_event_rows.shortlink
               and private.community_events_public(t.community_id)
           ) r (event_id, shortlink, title, description, starts_at, ends_at, location, sequence, created_at, stamp, cancelled, rank)
     order by r.rank, r.stamp desc
     limit 1
  $$;
comment on function private.calendar_event_rows(text) is
  'The calendar entry of the event with this shortlink; when none has it now, the most recently deleted one that had it (cancelled). Nothing for an event of a community whose events are not public (private.community_events_public).';

comment on function api.calendar_event(text, text, text, text[], timestamptz) is
  'GET /e/{shortlink}.ics (no credential): the event as a calendar of one entry (cancelled when it was deleted and its tombstone is kept), with ETag and Last-Modified; calendar null when If-None-Match / If-Modified-Since match (304). format names the renderer''s output (part of the ETag). PT404 event_not_found, also for an event of a draft community.';

create or replace function api.calendar_community(community_id uuid, public_url text, format text, if_none_match text[], if_modified_since timestamptz)
  returns table (etag text, last_modified timestamptz, calendar jsonb)
  language plpgsql stable security definer
  set search_path = pg_catalog
  as $$
declare
  community app.communities;
begin
  select c.* into community from app.communities c
   where c.id = calendar_community.community_id and private.community_events_public(c.id);
  if community.id is null then
    raise exception 'community not found' using errcode = 'PT404', hint = 'community_not_found';
  end if;
  return query
    select a.etag, a.last_modified, a.calendar
      from private.calendar_feed_answer(
             array[community.id], now() - interval '30 days',
             jsonb_build_object('name', community.name, 'description', community.description,
                                'updated_at', community.updated_at),
             public_url, format, if_none_match, if_modified_since) a;
end;
$$;

create or replace function api.event_page(shortlink text, public_url text) returns jsonb
  language plpgsql stable security definer
  set search_path = pg_catalog
  as $$
declare
  found app.events;
  community app.communities;
  venue app.venues;
begin
  select e.* into found from app.events e
   where e.shortlink = event_page.shortlink and private.community_events_public(e.community_id);
  if found.id is null then
    raise exception 'event not found' using errcode = 'PT404', hint = 'event_not_found';
  end if;
  select c.* into community from app.communities c where c.id = found.community_id;
  select v.* into venue from app.venues v where v.node_id = found.venue_node_id;
  return jsonb_build_object(
    'event', private.event_json(found, public_url),
    'end', app.iso(private.event_effective_end(found.starts_at, found.ends_at)),
    'location', private.event_location_text(venue.name, venue.address, found.location),
    'place', jsonb_strip_nulls(jsonb_build_object(
               'name', coalesce(venue.name, found.location, community.name),
               'address', coalesce(nullif(btrim(venue.address), ''), found.location))),
    'organizer', jsonb_build_object('name', community.name),
    'event_status', 'EventScheduled',
    'attendance_mode', 'OfflineEventAttendanceMode');
end;
$$;
comment on function api.event_page(text, text) is
  'GET /e/{shortlink} (no credential): {event: the Event, end: its effective end, location: "venue, address" or its location text, place: {name, address} for schema.org (the venue, else the location text, else the community''s name without address), organizer: {name: the community}, event_status, attendance_mode (schema.org values)}. PT404 event_not_found, also for an event of a draft community.';

create or replace function api.event_public(shortlink text, public_url text) returns jsonb
  language plpgsql stable security definer
  set search_path = pg_catalog
  as $$
declare
  found_event app.events;
begin
  select e.* into found_event from app.events e
   where e.shortlink = event_public.shortlink and private.community_events_public(e.community_id);
  if found_event.id is null then
    raise exception 'event not found' using errcode = 'PT404', hint = 'event_not_found';
  end if;
  return private.event_json(found_event, public_url);
end;
$$;
comment on function api.event_public(text, text) is
  'The Event of a shortlink, without a credential. PT404 when unknown or of a draft community.';

create or replace function api.event_public_by_node(event_node_id uuid, public_url text) returns jsonb
  language plpgsql stable security definer
  set search_path = pg_catalog
  as $$
declare
  found_event app.events;
begin
  select e.* into found_event from app.events e
   where e.node_id = event_public_by_node.event_node_id and private.community_events_public(e.community_id);
  if found_event.id is null then
    raise exception 'event not found' using errcode = 'PT404', hint = 'event_not_found';
  end if;
  return private.event_json(found_event, public_url);
end;
$$;
comment on function api.event_public_by_node(uuid, text) is
  'GET /checkin/event/{event_node_id} (web check-in form): the Event. PT404 when unknown or of a draft community.';

create or replace function api.link_event_checkin(event_node_id uuid, user_agent text, app_scheme text) returns text
  language plpgsql stable security definer
  set search_path = pg_catalog
  as $$
declare
  found_node uuid;
begin
  select e.node_id into found_node from app.events e
   where e.node_id = link_event_checkin.event_node_id and private.community_events_public(e.community_id);
  if found_node is null then
    raise exception 'event not found' using errcode = 'PT404', hint = 'event_not_found';
  end if;
  return private.event_checkin_location(found_node, user_agent, app_scheme);
end;
$$;
comment on function api.link_event_checkin(uuid, text, text) is
  'GET /l/checkin/event/{event_node_id}: the redirect target for this user agent. PT404 when unknown or of a draft community.';

create or replace function api.link_event_shortlink(shortlink text, user_agent text, app_scheme text) returns text
  language plpgsql stable security definer
  set search_path = pg_catalog
  as $$
declare
  found_node uuid;
begin
  select e.node_id into found_node from app.events e
   where e.shortlink = link_event_shortlink.shortlink and private.community_events_public(e.community_id);
  if found_node is null then
    raise exception 'event not found' using errcode = 'PT404', hint = 'event_not_found';
  end if;
  return private.event_checkin_location(found_node, user_agent, app_scheme);
end;
$$;
comment on function api.link_event_shortlink(text, text, text) is
  'GET /l/event/{shortlink}: as the event check-in link. PT404 when unknown or of a draft community.';

create or replace function api.link_venue_checkin(venue_node_id uuid) returns setof api.venue_link
  language plpgsql stable security definer
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
    from private.venue_concurrent_events(link_venue_checkin.venue_node_id) e
   where private.community_events_public(e.community_id);
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
  'GET /l/checkin/venue/{venue_node_id}: one concurrent event: its check-in link (location); several: the choices. Events of draft communities are left out. PT404 unknown venue or none.';

-- Made by `npm run db -- areas --diff` from sql/areas/events.sql: the statements that make
-- the migrated database what that file states. Each run writes it again:
-- edit the area file, not this one. Table changes go in a file of this
-- folder numbered below 900.

-- Bodies are checked once every function exists (the check validated them all).
set local check_function_bodies = off;

CREATE OR REPLACE FUNCTION api.event_page(shortlink text, public_url text)
 RETURNS jsonb
 LANGUAGE plpgsql
 STABLE SECURITY DEFINER
 SET search_path TO 'pg_catalog'
AS $function$
declare
  found app.events;
  gone app.event_tombstones;
  community app.communities;
  venue app.venues;
  base text := rtrim(public_url, '/');
  location_text text;
begin
  select e.* into found from app.events e
   where e.shortlink = event_page.shortlink and private.community_events_public(e.community_id);
  if found.id is null then
    -- A deleted event's page says it is cancelled while its tombstone is kept
    -- (until its end is 30 days past: private.event_tombstones_prune).
    select t.* into gone from app.event_tombstones t
     where t.shortlink = event_page.shortlink and private.community_events_public(t.community_id)
     order by t.deleted_at desc
     limit 1;
    if gone.event_id is null then
      raise exception 'event not found' using errcode = 'PT404', hint = 'event_not_found';
    end if;
    select c.* into community from app.communities c where c.id = gone.community_id;
    select v.* into venue from app.venues v where v.node_id = gone.venue_node_id;
    return private.event_page_json(gone.title, gone.description, gone.starts_at, gone.ends_at, gone.timezone,
                                   gone.image_path, gone.event_url, gone.shortlink, gone.location, venue, community,
                                   base, true);
  end if;
  select c.* into community from app.communities c where c.id = found.community_id;
  select v.* into venue from app.venues v where v.node_id = found.venue_node_id;
  location_text := private.event_location_text(venue.name, venue.address, found.location);
  return private.event_page_json(found.title, found.description, found.starts_at, found.ends_at, found.timezone,
                                 found.image_path, found.event_url, found.shortlink, location_text, venue, community,
                                 base, false);
end;
$function$;

CREATE OR REPLACE FUNCTION api.link_venue_checkin(venue_node_id uuid)
 RETURNS SETOF api.venue_link
 LANGUAGE plpgsql
 STABLE SECURITY DEFINER
 SET search_path TO 'pg_catalog'
AS $function$
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
           'node_id', e.node_id, 'title', e.title, 'date', app.iso(e.starts_at), 'timezone', e.timezone,
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
$function$;

CREATE OR REPLACE FUNCTION private.default_timezone()
 RETURNS text
 LANGUAGE sql
 STABLE
 SET search_path TO 'pg_catalog'
AS $function$
    select coalesce((select s.value from private.service_settings s where s.name = 'default_timezone'), 'UTC')
  $function$;

CREATE OR REPLACE FUNCTION private.event_object(e app.events, community_node_id uuid, caller_manages boolean, public_url text)
 RETURNS jsonb
 LANGUAGE sql
 STABLE
AS $function$
    select pg_catalog.jsonb_build_object(
             'id', e.id,
             'title', e.title,
             'date', app.iso(e.starts_at),
             'community_node_id', community_node_id,
             'shortlink', e.shortlink,
             'deeplink_path', '/l/event/' || e.shortlink,
             'deeplink_url', pg_catalog.rtrim(public_url, '/') || '/l/event/' || e.shortlink,
             'public_url', '/e/' || e.shortlink,
             'public_full_url', pg_catalog.rtrim(public_url, '/') || '/e/' || e.shortlink,
             'description', e.description,
             'end_time', app.iso(e.ends_at),
             'event_url', e.event_url,
             'image_path', e.image_path,
             'location', e.location,
             'node_id', e.node_id,
             'platform_a_url', e.platform_a_url,
             'platform_b_url', e.platform_b_url,
             'platform_c_url', e.platform_c_url,
             'timezone', e.timezone)
           operator(pg_catalog.||)
           case when caller_manages then pg_catalog.jsonb_build_object(
             'can_sync', true,
             'external_platforms', pg_catalog.to_jsonb(pg_catalog.array_remove(array[
               case when e.platform_a_url is not null then 'platform_a' end,
               case when e.platform_b_url is not null then 'platform_b' end,
               case when e.platform_c_url is not null then 'platform_c' end
             ], null)))
           else '{}'::jsonb end
  $function$;

CREATE OR REPLACE FUNCTION private.event_page_json(title text, description text, starts_at timestamp with time zone, ends_at timestamp with time zone, timezone text, image_path text, event_url text, shortlink text, location_text text, venue app.venues, community app.communities, base_url text, cancelled boolean)
 RETURNS jsonb
 LANGUAGE sql
 STABLE
 SET search_path TO 'pg_catalog'
AS $function$
    select jsonb_build_object(
      'title', title,
      'description', description,
      'date', app.iso(starts_at),
      'end', app.iso(private.event_effective_end(starts_at, ends_at)),
      'timezone', timezone,
      'image_path', image_path,
      'event_url', event_url,
      'url', base_url || '/e/' || shortlink,
      'calendar_path', '/e/' || shortlink || '.ics',
      'checkin_path', case when not cancelled then '/l/event/' || shortlink end,
      'location', location_text,
      -- schema.org's location, always a place with an address: the venue
      -- (its address, else its name); else the location text; else the
      -- community, the one place known.
      'place', case
                 when (venue).node_id is not null then jsonb_build_object(
                   'name', (venue).name, 'address', coalesce(nullif(btrim((venue).address), ''), (venue).name),
                   'latitude', (venue).latitude, 'longitude', (venue).longitude)
                 when nullif(btrim(location_text), '') is not null then jsonb_build_object(
                   'name', btrim(location_text), 'address', btrim(location_text), 'latitude', null, 'longitude', null)
                 else jsonb_build_object('name', (community).name, 'address', (community).name, 'latitude', null, 'longitude', null)
               end,
      'organizer', jsonb_build_object('name', (community).name, 'url', base_url || '/c/' || (community).id),
      'event_status', case when cancelled then 'EventCancelled' else 'EventScheduled' end,
      'attendance_mode', 'OfflineEventAttendanceMode')
  $function$;

CREATE OR REPLACE FUNCTION private.tg_events__timezone()
 RETURNS trigger
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog'
AS $function$
begin
  if new.timezone is null then
    -- Made (or its zone removed) without a zone: its venue's, else its
    -- community's, else the service's default.
    new.timezone := coalesce((select v.timezone from app.venues v where v.node_id = new.venue_node_id),
                             (select c.timezone from app.communities c where c.id = new.community_id),
                             private.default_timezone());
  elsif tg_op = 'UPDATE' and new.venue_node_id is distinct from old.venue_node_id and new.timezone = old.timezone then
    -- Moved to another venue, no zone given: that venue's, when it has one.
    new.timezone := coalesce((select v.timezone from app.venues v where v.node_id = new.venue_node_id), new.timezone);
  elsif tg_op = 'INSERT' or new.timezone is distinct from old.timezone then
    -- A zone written is checked, and spelled as pg_timezone_names spells it.
    new.timezone := private.time_zone_name(new.timezone);
  end if;
  return new;
end;
$function$;

CREATE OR REPLACE FUNCTION private.time_zone_name(zone text)
 RETURNS text
 LANGUAGE plpgsql
 STABLE SECURITY DEFINER
 SET search_path TO 'pg_catalog'
AS $function$
declare
  found text;
begin
  if zone is null then
    return null;
  end if;
  select z.name into found from private.time_zones z where lower(z.name) = lower(btrim(zone));
  if found is null then
    raise exception 'timezone must be an IANA time zone name, such as Europe/Paris'
      using errcode = 'PT422', hint = 'invalid_timezone';
  end if;
  return found;
end;
$function$;

CREATE OR REPLACE FUNCTION private.time_zones_refresh()
 RETURNS integer
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog'
AS $function$
declare
  added integer;
begin
  -- Names are only added: a zone an event names stays valid. Not the posix/
  -- and right/ variants, nor Factory: calendars and browsers know none of them.
  insert into private.time_zones (name)
    select z.name from pg_timezone_names z
     where z.name !~ '^(posix|right)/' and z.name not in ('Factory', 'localtime', 'posixrules')
       and not exists (select from private.time_zones t where lower(t.name) = lower(z.name))
  on conflict do nothing;
  get diagnostics added = row_count;
  return added;
end;
$function$;

set local check_function_bodies to default;

alter table private.time_zones enable row level security, no force row level security;

drop trigger if exists _120_timezone on app.events;
CREATE TRIGGER _120_timezone BEFORE INSERT OR UPDATE ON app.events FOR EACH ROW EXECUTE FUNCTION private.tg_events__timezone();

comment on column app.events.timezone is 'The event''s IANA time zone (a name of private.time_zones, copied from pg_timezone_names): given, else its venue''s, else its community''s, else DEFAULT_TIMEZONE (trigger _120_timezone). Events made before time zones were kept are UTC, as they were shown.';

comment on column app.venues.timezone is 'The venue''s IANA time zone, or null (unknown): events made there without a zone take it. Set by admin.set_venue_timezone, or by a platform that gives it with the venue while it has none.';

comment on function api.event_page(text,text) is 'GET /e/{shortlink} (no credential): what the public page and its previews show: title, description, date, end (the effective end), timezone, image_path, event_url, url (the page), calendar_path, checkin_path (null once cancelled), location ("venue, address" or the location text), place {name, address, latitude, longitude} for schema.org (the venue, its address else its name; else the location text; else the community), organizer {name, url: the community''s public page}, event_status (EventScheduled, or EventCancelled for a deleted event while its tombstone is kept), attendance_mode. PT404 event_not_found, also for an event of a draft community.';

comment on function private.default_timezone() is 'DEFAULT_TIMEZONE as the gateway last recorded it (UTC before any gateway started): the time zone of an event made without one, at a venue and in a community that have none.';

comment on function private.event_page_json(text,text,timestamp with time zone,timestamp with time zone,text,text,text,text,text,app.venues,app.communities,text,boolean) is 'The answer of api.event_page for a live or a deleted (cancelled) event.';

comment on function private.tg_events__timezone() is 'Trigger: an event''s time zone is checked (PT422 invalid_timezone) and spelled as pg_timezone_names does; written as null (made without one, or removed), it is its venue''s, else its community''s, else DEFAULT_TIMEZONE; moved to a venue that has a zone, with no zone given, it takes that venue''s.';

comment on function private.time_zone_name(text) is 'The time zone as pg_timezone_names spells it (matched without regard to case; null for null); PT422 invalid_timezone for a name it does not have.';

comment on function private.time_zones_refresh() is 'Adds the names of pg_timezone_names that private.time_zones lacks, but the posix/ and right/ variants and Factory (the gateway runs it at start; reading the view takes 30-60 ms); returns how many.';

comment on table private.time_zones is 'The names of pg_timezone_names, copied (reading the view takes 30-60 ms): what an event, venue or community zone may be (private.time_zone_name). Refreshed at the gateway''s start (private.time_zones_refresh). Not granted to request roles.';

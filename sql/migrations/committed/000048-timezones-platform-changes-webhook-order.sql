--! Previous: sha1:6565770141ee7a93ea9fdf4760cb657524bee8dd
--! Hash: sha1:1c979bf53be30082e5815c1e2429ff7c4220210c
--! Message: timezones-platform-changes-webhook-order

--! split: 100-event-timezones.sql
-- Time zones (docs/api.md#time-zones): an event's IANA zone, given by the
-- platform, else its venue's, else its community's, else the service's
-- DEFAULT_TIMEZONE, resolved when the event is made (trigger _120_timezone).
-- Events made before this migration were shown in UTC: they keep UTC. A
-- constant default adds a NOT NULL column without rewriting the table; the
-- default is dropped after, so every new row goes through the trigger.
alter table app.events add column if not exists timezone text not null default 'UTC';
alter table app.events alter column timezone drop default;
alter table app.venues add column if not exists timezone text;
alter table app.communities add column if not exists timezone text;

-- A deleted event's public page shows it cancelled (schema.org EventCancelled)
-- while its tombstone is kept: the tombstone keeps what the page needs.
alter table app.event_tombstones add column if not exists timezone text not null default 'UTC';
alter table app.event_tombstones alter column timezone drop default;
alter table app.event_tombstones add column if not exists image_path text;
alter table app.event_tombstones add column if not exists event_url text;
alter table app.event_tombstones add column if not exists venue_node_id uuid;

-- A calendar entry carries its event's zone (DTSTART;TZID=...).
do $$
begin
  if not exists (select from pg_catalog.pg_attribute a
                  where a.attrelid = 'private.calendar_row'::regclass and a.attname = 'timezone' and not a.attisdropped) then
    alter type private.calendar_row add attribute timezone text;
  end if;
end;
$$;

-- The names of pg_timezone_names, copied: reading that view lists the whole
-- time zone database (30-60 ms), too slow for every write that names a zone.
-- The gateway refreshes the copy at start (private.time_zones_refresh), so a
-- server whose tzdata gained a zone knows it after a restart.
create table if not exists private.time_zones (
  name text primary key
);
-- squawk-ignore require-concurrent-index-creation
create unique index if not exists time_zones_lower_name_idx on private.time_zones (lower(name));
-- Filled here as private.time_zones_refresh does it (the zones every part of
-- the service knows: not the posix/ and right/ variants, nor Factory).
insert into private.time_zones (name)
  select z.name from pg_catalog.pg_timezone_names z
   where z.name !~ '^(posix|right)/' and z.name not in ('Factory', 'localtime', 'posixrules')
on conflict do nothing;

--! split: 110-webhook-sequence.sql
-- Every webhook delivery gets a number from one sequence, sent as `sequence`
-- in its body (docs/webhooks.md#order): of two deliveries about the same
-- object, the later change has the higher number. The default is set apart
-- from adding the column, so no existing row is rewritten (those stay null).
create sequence if not exists app.webhook_deliveries_sequence_seq as bigint;
alter table app.webhook_deliveries add column if not exists sequence bigint;
alter sequence app.webhook_deliveries_sequence_seq owned by app.webhook_deliveries.sequence;
alter table app.webhook_deliveries alter column sequence set default nextval('app.webhook_deliveries_sequence_seq');

--! split: 904-communities.sql
-- Made by `npm run db -- areas --diff` from sql/areas/communities.sql: the statements that make
-- the migrated database what that file states. Each run writes it again:
-- edit the area file, not this one. Table changes go in a file of this
-- folder numbered below 900.

-- Bodies are checked once every function exists (the check validated them all).
set local check_function_bodies = off;

CREATE OR REPLACE FUNCTION api.community_page(community_id uuid, public_url text)
 RETURNS jsonb
 LANGUAGE plpgsql
 STABLE SECURITY DEFINER
 SET search_path TO 'pg_catalog'
AS $function$
declare
  community app.communities;
  base text := rtrim(public_url, '/');
begin
  select c.* into community from app.communities c
   where c.id = community_page.community_id and private.community_events_public(c.id);
  if community.id is null then
    raise exception 'community not found' using errcode = 'PT404', hint = 'community_not_found';
  end if;
  return jsonb_build_object(
    'name', community.name,
    'description', community.description,
    'url', base || '/c/' || community.id,
    'calendar_path', '/c/' || community.id || '/calendar.ics',
    'events', (select coalesce(jsonb_agg(jsonb_build_object(
                        'title', e.title, 'date', app.iso(e.starts_at),
                        'end', app.iso(private.event_effective_end(e.starts_at, e.ends_at)),
                        'timezone', e.timezone,
                        'path', '/e/' || e.shortlink) order by e.starts_at, e.id), '[]'::jsonb)
                 from (select * from app.events x
                        where x.community_id = community.id
                          and private.event_effective_end(x.starts_at, x.ends_at) >= now()
                        order by x.starts_at, x.id
                        limit 50) e));
end;
$function$;

set local check_function_bodies to default;

grant execute on function api.community_page(uuid,text) to anon, authenticated;

grant select (timezone) on table app.communities to anon, authenticated;

comment on column app.communities.timezone is 'The community''s IANA time zone, or null (unknown): its events made without a zone of their own or of their venue take it. Set by admin.set_community_timezone.';

comment on function api.community_page(uuid,text) is 'GET /c/{community_id} (no credential): the community''s public page, the organizer named by its events'' previews: name, description, url, calendar_path, and its next events (effective end not past, soonest first, at most 50: title, date, end, timezone, path). PT404 community_not_found for an unknown or draft community.';

--! split: 905-events.sql
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

--! split: 909-platform.sql
-- Made by `npm run db -- areas --diff` from sql/areas/platform.sql: the statements that make
-- the migrated database what that file states. Each run writes it again:
-- edit the area file, not this one. Table changes go in a file of this
-- folder numbered below 900.

drop function if exists api.platform_event_create(uuid,text,text,text,text,timestamp with time zone,timestamp with time zone,text,text,text,text,double precision,double precision);

drop function if exists private.platform_venue(text,text,double precision,double precision);

-- Bodies are checked once every function exists (the check validated them all).
set local check_function_bodies = off;

CREATE OR REPLACE FUNCTION api.platform_event_create(community_id uuid, external_platform text, external_id text, title text, description text, starts_at timestamp with time zone, ends_at timestamp with time zone DEFAULT NULL::timestamp with time zone, external_url text DEFAULT NULL::text, image_url text DEFAULT NULL::text, venue_name text DEFAULT NULL::text, venue_address text DEFAULT NULL::text, venue_latitude double precision DEFAULT NULL::double precision, venue_longitude double precision DEFAULT NULL::double precision, timezone text DEFAULT NULL::text)
 RETURNS jsonb
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog'
AS $function$
declare
  existing app.events;
  created app.events;
  venue app.venues;
  zone text := private.time_zone_name(platform_event_create.timezone);
  new_node uuid;
begin
  perform private.platform_authorize(community_id);
  if external_platform is null or external_platform not in ('platform_a', 'platform_b', 'platform_c', 'platform_d') then
    raise exception 'external_platform must be one of platform_a, platform_b, platform_c, platform_d'
      using errcode = 'PT422', hint = 'validation_error';
  end if;
  if external_id is null or length(external_id) not between 1 and 200 then
    raise exception 'external_id must be 1 to 200 characters' using errcode = 'PT422', hint = 'validation_error';
  end if;
  perform private.platform_event_check(title, starts_at, ends_at);

  -- Identical requests wait here for each other; the first creates the
  -- event, the others then find it.
  perform pg_advisory_xact_lock(hashtextextended('app.events:external:' || external_platform || ':' || external_id, 0));
  select e.* into existing
    from app.events e
   where e.external_platform = platform_event_create.external_platform
     and e.external_id = platform_event_create.external_id;
  if existing.id is not null then
    if existing.community_id <> platform_event_create.community_id then
      raise exception 'this external event belongs to another community'
        using errcode = 'PT422', hint = 'external_event_in_other_community';
    end if;
    -- A repeat never changes the event (PATCH does): it says which of the
    -- values given differ from the stored ones.
    return private.platform_event_json(existing, false) || jsonb_build_object('not_applied', to_jsonb(array_remove(array[
      case when btrim(title) is distinct from existing.title then 'title' end,
      case when description is not null and description is distinct from existing.description then 'description' end,
      case when starts_at is distinct from existing.starts_at then 'date' end,
      case when ends_at is not null and ends_at is distinct from existing.ends_at then 'end_time' end,
      case when zone is not null and zone is distinct from existing.timezone then 'timezone' end,
      case when external_url is not null and external_url is distinct from existing.event_url then 'external_url' end,
      case when image_url is not null and image_url is distinct from existing.image_path then 'image_url' end,
      case when venue_name is not null and not exists (
             select from app.venues v
              where v.node_id = existing.venue_node_id
                and lower(btrim(v.name)) = lower(btrim(venue_name))
                and lower(btrim(coalesce(v.address, ''))) = lower(btrim(coalesce(venue_address, ''))))
           then 'venue' end], null)));
  end if;

  if venue_name is not null then
    venue := private.platform_venue(venue_name, venue_address, venue_latitude, venue_longitude, zone);
  end if;
  insert into app.nodes (kind) values ('event') returning id into new_node;
  insert into app.events as e (node_id, community_id, title, description, starts_at, ends_at, venue_node_id, location,
                               event_url, image_path, platform_a_url, platform_b_url, platform_c_url,
                               external_platform, external_id, timezone)
    values (new_node, platform_event_create.community_id, btrim(title), description, starts_at, ends_at,
            venue.node_id, venue.name, external_url, image_url,
            case when external_platform = 'platform_a' then external_url end,
            case when external_platform = 'platform_b' then external_url end,
            case when external_platform = 'platform_c' then external_url end,
            platform_event_create.external_platform, platform_event_create.external_id, zone)
    returning e.* into created;
  return private.platform_event_json(created, true) || jsonb_build_object('not_applied', '[]'::jsonb);
end;
$function$;

CREATE OR REPLACE FUNCTION api.platform_event_delete(event_ref uuid, external_platform text DEFAULT NULL::text, external_id text DEFAULT NULL::text)
 RETURNS void
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog'
AS $function$
declare
  target app.events := private.platform_event_locked(event_ref, external_platform, external_id);
begin
  -- The triggers do the rest: the tombstone (calendars: STATUS:CANCELLED;
  -- the page: EventCancelled), the change log (the feed), event.deleted.
  -- The event's node stays: ids are not reused.
  delete from app.events e where e.id = target.id;
end;
$function$;

CREATE OR REPLACE FUNCTION api.platform_event_update(event_ref uuid, external_platform text, external_id text, patch jsonb)
 RETURNS jsonb
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog'
AS $function$
declare
  target app.events := private.platform_event_locked(event_ref, external_platform, external_id);
  extra text;
  new_title text := target.title;
  new_description text := target.description;
  new_starts timestamptz := target.starts_at;
  new_ends timestamptz := target.ends_at;
  new_zone text := target.timezone;
  new_url text := target.event_url;
  new_image text := target.image_path;
  new_venue uuid := target.venue_node_id;
  new_location text := target.location;
  venue app.venues;
  updated app.events;
begin
  if jsonb_typeof(patch) is distinct from 'object' then
    raise exception 'the body must be an object' using errcode = 'PT422', hint = 'validation_error';
  end if;
  select k into extra from jsonb_object_keys(patch) k
   where k not in ('title', 'description', 'date', 'end_time', 'timezone', 'external_url', 'image_url', 'venue')
   limit 1;
  if extra is not null then
    raise exception 'unknown field %', extra using errcode = 'PT422', hint = 'validation_error';
  end if;
  if patch ? 'title' then
    new_title := private.platform_patch_text(patch, 'title', false);
  end if;
  if patch ? 'description' then
    new_description := private.platform_patch_text(patch, 'description', true);
  end if;
  if patch ? 'date' then
    new_starts := private.platform_patch_time(patch, 'date', false);
  end if;
  if patch ? 'end_time' then
    new_ends := private.platform_patch_time(patch, 'end_time', true);
  end if;
  perform private.platform_event_check(new_title, new_starts, new_ends);
  if patch ? 'timezone' then
    -- null: the venue's zone again, else the community's (trigger _120_timezone).
    new_zone := private.time_zone_name(private.platform_patch_text(patch, 'timezone', true));
  end if;
  if patch ? 'external_url' then
    new_url := private.platform_patch_text(patch, 'external_url', true);
  end if;
  if patch ? 'image_url' then
    new_image := private.platform_patch_text(patch, 'image_url', true);
  end if;
  if patch ? 'venue' then
    if jsonb_typeof(patch -> 'venue') = 'null' then
      new_venue := null;
      new_location := null;
    elsif jsonb_typeof(patch -> 'venue') = 'object' then
      venue := private.platform_venue(private.platform_patch_text(patch -> 'venue', 'name', false),
                                      private.platform_patch_text(patch -> 'venue', 'address', true),
                                      private.platform_patch_number(patch -> 'venue', 'latitude'),
                                      private.platform_patch_number(patch -> 'venue', 'longitude'),
                                      case when patch ? 'timezone' then new_zone end);
      new_venue := venue.node_id;
      new_location := venue.name;
    else
      raise exception 'venue must be an object or null' using errcode = 'PT422', hint = 'validation_error';
    end if;
  end if;

  -- One UPDATE: the triggers bump SEQUENCE (calendars), log the change (the
  -- feed) and send event.updated, once, and only when something changed.
  update app.events e
     set title = btrim(new_title), description = new_description, starts_at = new_starts, ends_at = new_ends,
         timezone = new_zone, event_url = new_url, image_path = new_image,
         platform_a_url = case when e.external_platform = 'platform_a' and patch ? 'external_url' then new_url else e.platform_a_url end,
         platform_b_url = case when e.external_platform = 'platform_b' and patch ? 'external_url' then new_url else e.platform_b_url end,
         platform_c_url = case when e.external_platform = 'platform_c' and patch ? 'external_url' then new_url else e.platform_c_url end,
         venue_node_id = new_venue, location = new_location
   where e.id = target.id
  returning e.* into updated;
  return private.platform_event_json(updated, false);
end;
$function$;

CREATE OR REPLACE FUNCTION private.platform_event_check(title text, starts_at timestamp with time zone, ends_at timestamp with time zone)
 RETURNS void
 LANGUAGE plpgsql
 IMMUTABLE
 SET search_path TO 'pg_catalog'
AS $function$
begin
  if title is null or length(btrim(title)) not between 1 and 300 then
    raise exception 'title must be 1 to 300 characters' using errcode = 'PT422', hint = 'validation_error';
  end if;
  if starts_at is null then
    raise exception 'date is required' using errcode = 'PT422', hint = 'validation_error';
  end if;
  if ends_at is not null and ends_at < starts_at then
    raise exception 'end_time must not be before date' using errcode = 'PT422', hint = 'validation_error';
  end if;
end;
$function$;

CREATE OR REPLACE FUNCTION private.platform_event_json(e app.events, created boolean)
 RETURNS jsonb
 LANGUAGE sql
 STABLE
 SET search_path TO 'pg_catalog'
AS $function$
    select jsonb_build_object(
      'created', created,
      'event_id', e.id,
      'event_node_id', e.node_id,
      'title', e.title,
      'date', app.iso(e.starts_at),
      'end_time', app.iso(e.ends_at),
      'timezone', e.timezone,
      'sequence', e.sequence,
      'venue', (select jsonb_build_object('location_id', v.location_id, 'name', v.name, 'venue_node_id', v.node_id)
                  from app.venues v where v.node_id = e.venue_node_id))
  $function$;

CREATE OR REPLACE FUNCTION private.platform_event_locked(event_ref uuid, external_platform text, external_id text)
 RETURNS app.events
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog'
AS $function$
declare
  found app.events;
begin
  if event_ref is not null then
    select e.* into found from app.events e where e.id = event_ref or e.node_id = event_ref limit 1 for update;
  else
    select e.* into found from app.events e
     where e.external_platform = platform_event_locked.external_platform and e.external_id = platform_event_locked.external_id
     for update;
  end if;
  if found.id is null then
    raise exception 'event not found' using errcode = 'PT404', hint = 'event_not_found';
  end if;
  perform private.platform_authorize(found.community_id);
  return found;
end;
$function$;

CREATE OR REPLACE FUNCTION private.platform_patch_number(patch jsonb, key text)
 RETURNS double precision
 LANGUAGE plpgsql
 IMMUTABLE
 SET search_path TO 'pg_catalog'
AS $function$
begin
  if jsonb_typeof(patch -> key) is null or jsonb_typeof(patch -> key) = 'null' then
    return null;
  end if;
  if jsonb_typeof(patch -> key) <> 'number' then
    raise exception '% must be a number', key using errcode = 'PT422', hint = 'validation_error';
  end if;
  return (patch ->> key)::double precision;
end;
$function$;

CREATE OR REPLACE FUNCTION private.platform_patch_text(patch jsonb, key text, nullable boolean)
 RETURNS text
 LANGUAGE plpgsql
 IMMUTABLE
 SET search_path TO 'pg_catalog'
AS $function$
begin
  if jsonb_typeof(patch -> key) is null or jsonb_typeof(patch -> key) = 'null' then
    if nullable then
      return null;
    end if;
    raise exception '% must be a string', key using errcode = 'PT422', hint = 'validation_error';
  end if;
  if jsonb_typeof(patch -> key) <> 'string' then
    raise exception '% must be a string', key using errcode = 'PT422', hint = 'validation_error';
  end if;
  return patch ->> key;
end;
$function$;

CREATE OR REPLACE FUNCTION private.platform_patch_time(patch jsonb, key text, nullable boolean)
 RETURNS timestamp with time zone
 LANGUAGE plpgsql
 STABLE
 SET search_path TO 'pg_catalog'
AS $function$
declare
  value text := private.platform_patch_text(patch, key, nullable);
begin
  if value is null then
    return null;
  end if;
  -- An instant: a date-time with its offset (or Z).
  if value !~ '^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(:\d{2}(\.\d+)?)?(Z|[+-]\d{2}:\d{2})$' then
    raise exception '% must be an ISO 8601 date-time with a time zone', key using errcode = 'PT422', hint = 'validation_error';
  end if;
  begin
    return value::timestamptz;
  exception when others then
    raise exception '% must be an ISO 8601 date-time with a time zone', key using errcode = 'PT422', hint = 'validation_error';
  end;
end;
$function$;

CREATE OR REPLACE FUNCTION private.platform_venue(name text, address text, latitude double precision, longitude double precision, zone text DEFAULT NULL::text)
 RETURNS app.venues
 LANGUAGE plpgsql
 SET search_path TO 'pg_catalog'
AS $function$
declare
  wanted_name text := lower(btrim(platform_venue.name));
  wanted_address text := lower(btrim(coalesce(platform_venue.address, '')));
  found app.venues;
  new_node uuid;
begin
  if wanted_name is null or length(wanted_name) not between 1 and 200 then
    raise exception 'venue.name must be 1 to 200 characters' using errcode = 'PT422', hint = 'validation_error';
  end if;
  if (latitude is null) <> (longitude is null) then
    raise exception 'venue.latitude and venue.longitude go together' using errcode = 'PT422', hint = 'validation_error';
  end if;
  if latitude not between -90 and 90 or longitude not between -180 and 180 then
    raise exception 'venue.latitude must be within ±90 and venue.longitude within ±180' using errcode = 'PT422', hint = 'validation_error';
  end if;
  perform pg_advisory_xact_lock(hashtextextended('app.venues:platform', 0));
  select v.* into found
    from app.venues v
   where lower(btrim(v.name)) = wanted_name and lower(btrim(coalesce(v.address, ''))) = wanted_address
   order by v.created_at, v.location_id
   limit 1;
  if found.node_id is null and latitude is not null then
    select v.* into found
      from app.venues v
     where v.latitude between platform_venue.latitude - 1e-6 and platform_venue.latitude + 1e-6
       and v.longitude between platform_venue.longitude - 1e-6 and platform_venue.longitude + 1e-6
     order by v.created_at, v.location_id
     limit 1;
  end if;
  if found.node_id is null then
    insert into app.nodes (kind) values ('venue') returning id into new_node;
    insert into app.venues as v (node_id, name, address, latitude, longitude, timezone)
      values (new_node, btrim(platform_venue.name), nullif(btrim(platform_venue.address), ''),
              platform_venue.latitude, platform_venue.longitude, zone)
      returning v.* into found;
  elsif found.timezone is null and zone is not null then
    -- A venue learns its zone from the first event there that names one.
    update app.venues v set timezone = zone where v.node_id = found.node_id returning v.* into found;
  end if;
  return found;
end;
$function$;

set local check_function_bodies to default;

grant execute on function api.platform_event_create(uuid,text,text,text,text,timestamp with time zone,timestamp with time zone,text,text,text,text,double precision,double precision,text) to authenticated;

grant execute on function api.platform_event_delete(uuid,text,text) to authenticated;

grant execute on function api.platform_event_update(uuid,text,text,jsonb) to authenticated;

comment on function api.platform_event_create(uuid,text,text,text,text,timestamp with time zone,timestamp with time zone,text,text,text,text,double precision,double precision,text) is 'POST /api/v1/platform/events: creates the event (created true) or returns the one with the same external_platform and external_id (created false), which a repeat never changes: not_applied names the values given that differ from the stored ones (PATCH changes them). Reuses or creates the venue; timezone (an IANA name) defaults to the venue''s, then the community''s. PT403 not a manager of the community (or a token of another community); PT422 invalid input, invalid_timezone.';

comment on function api.platform_event_delete(uuid,text,text) is 'DELETE /api/v1/platform/events/{event_id} (event id or node id) and DELETE /api/v1/platform/events/external/{external_platform}/{external_id} (event_ref null): deletes (cancels) the event: calendars list it as STATUS:CANCELLED and its page shows it cancelled while its tombstone is kept, the feed sends a delete, webhooks event.deleted. PT404 event_not_found (also when deleted already); PT403 as the platform endpoints.';

comment on function api.platform_event_update(uuid,text,text,jsonb) is 'PATCH /api/v1/platform/events/{event_id} (event id or node id) and PATCH /api/v1/platform/events/external/{external_platform}/{external_id} (event_ref null): changes the keys given (title, description, date, end_time, timezone, external_url, image_url, venue; null clears a nullable one, timezone null takes the venue''s or community''s again) in one UPDATE, so SEQUENCE, the feed and event.updated follow once. PT404 event_not_found; PT403 as the platform endpoints; PT422 validation_error, invalid_timezone.';

comment on function private.platform_event_check(text,timestamp with time zone,timestamp with time zone) is 'PT422 validation_error for a title, date and end_time an event cannot have (the event as created, or as a PATCH leaves it).';

comment on function private.platform_event_json(app.events,boolean) is 'The `data` of the platform event endpoints: created, event_id, event_node_id, title, date, end_time, timezone, sequence (the iCalendar SEQUENCE), venue (location_id, name, venue_node_id) or null.';

comment on function private.platform_event_locked(uuid,text,text) is 'The event with this id or node id (else the one with this external_platform and external_id), locked for the change, when the caller may manage its community: PT404 event_not_found, then PT403 as private.platform_authorize.';

comment on function private.platform_patch_number(jsonb,text) is 'The number at key of a PATCH body (null when absent or null); PT422 validation_error for anything else.';

comment on function private.platform_patch_text(jsonb,text,boolean) is 'The string at key of a PATCH body (null when absent or null and nullable); PT422 validation_error for anything else.';

comment on function private.platform_patch_time(jsonb,text,boolean) is 'The instant at key of a PATCH body (an ISO 8601 date-time with Z or an offset; null when absent or null and nullable); PT422 validation_error for anything else.';

comment on function private.platform_venue(text,text,double precision,double precision,text) is 'Reuses the venue with the same name and address (case-insensitive), else the same coordinates, else creates one; a venue without a zone takes zone (the event''s, as given) when there is one.';

--! split: 913-calendars.sql
-- Made by `npm run db -- areas --diff` from sql/areas/calendars.sql: the statements that make
-- the migrated database what that file states. Each run writes it again:
-- edit the area file, not this one. Table changes go in a file of this
-- folder numbered below 900.

-- Bodies are checked once every function exists (the check validated them all).
set local check_function_bodies = off;

CREATE OR REPLACE FUNCTION api.calendar_community(community_id uuid, public_url text, format text, if_none_match text[], if_modified_since timestamp with time zone)
 RETURNS TABLE(etag text, last_modified timestamp with time zone, calendar jsonb)
 LANGUAGE plpgsql
 STABLE SECURITY DEFINER
 SET search_path TO 'pg_catalog'
AS $function$
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
                                'timezone', coalesce(community.timezone, private.default_timezone()),
                                'updated_at', community.updated_at),
             public_url, format, if_none_match, if_modified_since) a;
end;
$function$;

CREATE OR REPLACE FUNCTION api.calendar_event(shortlink text, public_url text, format text, if_none_match text[], if_modified_since timestamp with time zone)
 RETURNS TABLE(etag text, last_modified timestamp with time zone, calendar jsonb)
 LANGUAGE plpgsql
 STABLE SECURITY DEFINER
 SET search_path TO 'pg_catalog'
AS $function$
declare
  found private.calendar_row;
  heading jsonb;
begin
  select r.* into found from private.calendar_event_rows(calendar_event.shortlink) r;
  if found.event_id is null then
    raise exception 'event not found' using errcode = 'PT404', hint = 'event_not_found';
  end if;
  heading := jsonb_build_object('name', found.title, 'timezone', found.timezone);
  etag := private.calendar_etag(format, public_url, heading, 1,
                                private.calendar_row_hash(found.event_id, found.sequence, found.stamp, found.cancelled));
  last_modified := found.stamp;
  if not private.calendar_not_modified(etag, last_modified, if_none_match, if_modified_since) then
    calendar := heading || jsonb_build_object('events', jsonb_build_array(private.calendar_entry(found, public_url)));
  end if;
  return next;
end;
$function$;

CREATE OR REPLACE FUNCTION private.calendar_entry(r private.calendar_row, public_url text)
 RETURNS jsonb
 LANGUAGE sql
 STABLE
AS $function$
    select pg_catalog.jsonb_build_object(
      'uid', r.event_id::text operator(pg_catalog.||) '@' operator(pg_catalog.||) private.url_host(public_url),
      'sequence', r.sequence,
      'start', app.iso(r.starts_at),
      'end', app.iso(private.event_effective_end(r.starts_at, r.ends_at)),
      'stamp', app.iso(r.stamp),
      'created', app.iso(r.created_at),
      'summary', r.title,
      'description', r.description,
      'location', r.location,
      'url', pg_catalog.rtrim(public_url, '/') operator(pg_catalog.||) '/e/' operator(pg_catalog.||) r.shortlink,
      'status', case when r.cancelled then 'CANCELLED' else 'CONFIRMED' end,
      'timezone', r.timezone)
  $function$;

CREATE OR REPLACE FUNCTION private.calendar_event_rows(shortlink text)
 RETURNS SETOF private.calendar_row
 LANGUAGE sql
 STABLE
AS $function$
    -- The live event; a deleted one (its tombstone) only when no event has the shortlink now.
    -- Neither when its community's events are not public (a draft).
    select r.event_id, r.shortlink, r.title, r.description, r.starts_at, r.ends_at, r.location, r.sequence,
           r.created_at, r.stamp, r.cancelled, r.timezone
      from (select e.id, e.shortlink, e.title, e.description, e.starts_at, e.ends_at,
                   private.event_location_text(v.name, v.address, e.location), e.sequence, e.created_at,
                   greatest(e.updated_at, v.updated_at), false, 0, e.timezone
              from app.events e
              left join app.venues v on v.node_id operator(pg_catalog.=) e.venue_node_id
             where e.shortlink operator(pg_catalog.=) calendar_event_rows.shortlink
               and private.community_events_public(e.community_id)
            union all
            select t.event_id, t.shortlink, t.title, t.description, t.starts_at, t.ends_at, t.location, t.sequence,
                   t.created_at, t.deleted_at, true, 1, t.timezone
              from app.event_tombstones t
             where t.shortlink operator(pg_catalog.=) calendar_event_rows.shortlink
               and private.community_events_public(t.community_id)
           ) r (event_id, shortlink, title, description, starts_at, ends_at, location, sequence, created_at, stamp, cancelled, rank, timezone)
     order by r.rank, r.stamp desc
     limit 1
  $function$;

CREATE OR REPLACE FUNCTION private.calendar_rows(community_ids uuid[], ends_after timestamp with time zone)
 RETURNS SETOF private.calendar_row
 LANGUAGE sql
 STABLE
AS $function$
    select e.id, e.shortlink, e.title, e.description, e.starts_at, e.ends_at,
           private.event_location_text(v.name, v.address, e.location), e.sequence, e.created_at,
           greatest(e.updated_at, v.updated_at), false, e.timezone
      from app.events e
      left join app.venues v on v.node_id operator(pg_catalog.=) e.venue_node_id
     where e.community_id operator(pg_catalog.=) any (community_ids)
       and private.event_effective_end(e.starts_at, e.ends_at) operator(pg_catalog.>=) ends_after
    union all
    select t.event_id, t.shortlink, t.title, t.description, t.starts_at, t.ends_at, t.location, t.sequence,
           t.created_at, t.deleted_at, true, t.timezone
      from app.event_tombstones t
     where t.community_id operator(pg_catalog.=) any (community_ids)
       and private.event_effective_end(t.starts_at, t.ends_at) operator(pg_catalog.>=) ends_after
  $function$;

CREATE OR REPLACE FUNCTION private.tg_events__tombstone()
 RETURNS trigger
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog'
AS $function$
begin
  insert into app.event_tombstones as t (event_id, community_id, shortlink, title, description, starts_at, ends_at,
                                         location, sequence, created_at, timezone, image_path, event_url, venue_node_id)
  select old.id, old.community_id, old.shortlink, old.title, old.description, old.starts_at, old.ends_at,
         private.event_location_text(v.name, v.address, old.location), old.sequence + 1, old.created_at,
         old.timezone, old.image_path, old.event_url, v.node_id
    from (select) one
    left join app.venues v on v.node_id = old.venue_node_id
  on conflict (event_id) do nothing;
  return null;
end;
$function$;

set local check_function_bodies to default;

comment on function private.calendar_entry(private.calendar_row,text) is 'A calendar entry as the gateway renders it (VEVENT): uid <event id>@<PUBLIC_URL host>, sequence, start and effective end (UTC), stamp, created, summary, description, location, url (the public page), status CONFIRMED or CANCELLED, timezone (the event''s IANA zone: DTSTART and DTEND are written in it).';

comment on function private.tg_events__tombstone() is 'Trigger: a deleted event leaves a tombstone (app.event_tombstones), its sequence one higher, which the calendar feeds list as cancelled and its public page shows cancelled.';

comment on table app.event_tombstones is 'Deleted events, as they were (location as the calendar showed it; zone, image, website and venue for the cancelled page), listed by the calendar feeds and shown by the public page as cancelled until their effective end is 30 days past (private.event_tombstones_prune). No community foreign key: a deleted community takes its events with it. Not granted to request roles.';

comment on type private.calendar_row is 'One entry of a calendar: a live event (stamp: when it or its venue last changed) or a deleted one (cancelled; stamp: when it was deleted), with its time zone (null: the service default).';

--! split: 915-webhooks.sql
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

--! split: 917-admin.sql
-- Made by `npm run db -- areas --diff` from sql/areas/admin.sql: the statements that make
-- the migrated database what that file states. Each run writes it again:
-- edit the area file, not this one. Table changes go in a file of this
-- folder numbered below 900.

-- Bodies are checked once every function exists (the check validated them all).
set local check_function_bodies = off;

CREATE OR REPLACE FUNCTION admin.set_community_timezone(community_id uuid, timezone text)
 RETURNS text
 LANGUAGE plpgsql
 SET search_path TO 'pg_catalog'
AS $function$
declare
  zone text := private.time_zone_name(set_community_timezone.timezone);
begin
  update app.communities c set timezone = zone, updated_at = now() where c.id = set_community_timezone.community_id;
  if not found then
    raise exception 'no community with id %', community_id using errcode = 'P0002';
  end if;
  return zone;
end;
$function$;

CREATE OR REPLACE FUNCTION admin.set_venue_timezone(venue_node_id uuid, timezone text)
 RETURNS text
 LANGUAGE plpgsql
 SET search_path TO 'pg_catalog'
AS $function$
declare
  zone text := private.time_zone_name(set_venue_timezone.timezone);
begin
  update app.venues v set timezone = zone where v.node_id = set_venue_timezone.venue_node_id;
  if not found then
    raise exception 'no venue with node id %', venue_node_id using errcode = 'P0002';
  end if;
  return zone;
end;
$function$;

set local check_function_bodies to default;

comment on function admin.set_community_timezone(uuid,text) is 'Sets a community''s IANA time zone (null: unknown), which its events made from now on take when neither they nor their venue name one. Returns it as pg_timezone_names spells it; PT422 invalid_timezone for an unknown name.';

comment on function admin.set_venue_timezone(uuid,text) is 'Sets a venue''s IANA time zone (null: unknown), which events made there from now on take when they name none. Returns it as pg_timezone_names spells it; PT422 invalid_timezone for an unknown name.';

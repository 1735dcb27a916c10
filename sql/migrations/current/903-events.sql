-- Made by `npm run db -- areas --diff` from sql/areas/events.sql: the statements that make
-- the migrated database what that file states. Each run writes it again:
-- edit the area file, not this one. Table changes go in a file of this
-- folder numbered below 900.

comment on column app.events.image_object_id is null;

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
    -- The share preview's image: a 1200x630 transformation when the image is stored here.
    'og_image', coalesce(private.storage_render_url(found.image_object_id, 1200, 630, 'cover'), found.image_path),
    'event_status', 'EventScheduled',
    'attendance_mode', 'OfflineEventAttendanceMode');
end;
$function$;

CREATE OR REPLACE FUNCTION api.event_update(id uuid, patch jsonb, public_url text)
 RETURNS jsonb
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog'
AS $function$
declare
  caller uuid := auth.uid();
  found_event app.events := private.find_event(event_update.id);
begin
  if found_event.id is null then
    raise exception 'event not found' using errcode = 'PT404', hint = 'event_not_found';
  end if;
  if not private.is_community_manager(found_event.community_id, caller) then
    raise exception 'only managers of the event''s community may change it' using errcode = 'PT403', hint = 'not_community_manager';
  end if;
  if pg_catalog.jsonb_typeof(event_update.patch) is distinct from 'object' then
    raise exception 'the patch must be an object' using errcode = 'PT422', hint = 'validation_error';
  end if;
  if event_update.patch ? 'image_path' then
    -- An object of the event-images bucket in the event's folder, or null to clear (a platform's external image stays).
    update app.events e
       set image_object_id = private.storage_image_object('event-images', event_update.patch->>'image_path', caller)
     where e.id = found_event.id
    returning e.* into found_event;
  end if;
  return private.event_json(found_event, event_update.public_url);
end;
$function$;

CREATE OR REPLACE FUNCTION api.venue_checkin(venue_id uuid, hat_id uuid, visibility text DEFAULT NULL::text)
 RETURNS SETOF api.venue_checkin_outcome
 LANGUAGE plpgsql
 SET search_path TO 'pg_catalog'
AS $function$
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
           'image_path', coalesce(private.storage_object_name(e.image_object_id), e.image_path),
           'image_url', coalesce(app.storage_public_url(e.image_object_id), e.image_path)) order by e.starts_at, e.id), '[]'::jsonb)
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
             'image_path', coalesce(private.storage_object_name(e.image_object_id), e.image_path),
             'image_url', coalesce(app.storage_public_url(e.image_object_id), e.image_path),
             'location', e.location,
             'node_id', e.node_id,
             'platform_a_url', e.platform_a_url,
             'platform_b_url', e.platform_b_url,
             'platform_c_url', e.platform_c_url)
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

CREATE OR REPLACE FUNCTION private.tg_events__storage_purge()
 RETURNS trigger
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog'
AS $function$
begin
  perform private.storage_purge_enqueue('event', old.id);
  return null;
end;
$function$;

set local check_function_bodies to default;

drop trigger if exists _900_storage_purge on app.events;
CREATE TRIGGER _900_storage_purge AFTER DELETE ON app.events FOR EACH ROW EXECUTE FUNCTION private.tg_events__storage_purge();

grant execute on function api.event_update(uuid,jsonb,text) to authenticated;

comment on function api.event_page(text,text) is 'GET /e/{shortlink} (no credential): {event: the Event, end: its effective end, location: "venue, address" or its location text, place: {name, address} for schema.org (the venue, else the location text, else the community''s name without address), organizer: {name: the community}, og_image (the share preview''s image: a 1200x630 transformation of a stored image, else the external image), event_status, attendance_mode (schema.org values)}. PT404 event_not_found, also for an event of a draft community.';

comment on function api.event_update(uuid,jsonb,text) is 'PATCH /api/mobile/events/{id}: a manager of the event''s community changes what the patch names: image_path (an object of the event-images bucket in the event''s folder, or null to clear). PT403 not_community_manager, PT404 event_not_found, PT422 invalid_image_path.';

comment on function private.tg_events__storage_purge() is 'Trigger: an event deleted, the objects of its storage folder are deleted by a storage_purge job.';

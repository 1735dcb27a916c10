--! Previous: sha1:8bfeba411ff0648157a75895bcd482d0079ef389
--! Hash: sha1:90e1f4e5aa3d23e39a836f44512d2d90ae2d9dbc
--! Message: share-previews

--! split: 220-share-previews.sql
--------------------------------------------------------------------------------
-- Share previews of the public event page (issue 24): GET /e/{shortlink}
-- reads everything its Open Graph tags and its schema.org Event (JSON-LD)
-- need in one call: the Event object, its effective end, where it takes
-- place (as calendars show it, and as a schema.org Place), and the hosting
-- community (the organizer).
--------------------------------------------------------------------------------

create or replace function api.event_page(shortlink text, public_url text) returns jsonb
  language plpgsql stable security definer
  set search_path = pg_catalog
  as $$
declare
  found app.events;
  community app.communities;
  venue app.venues;
begin
  select e.* into found from app.events e where e.shortlink = event_page.shortlink;
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
  'GET /e/{shortlink} (no credential): {event: the Event, end: its effective end, location: "venue, address" or its location text, place: {name, address} for schema.org (the venue, else the location text, else the community''s name without address), organizer: {name: the community}, event_status, attendance_mode (schema.org values)}. PT404 event_not_found.';
grant execute on function api.event_page(text, text) to anon, authenticated;

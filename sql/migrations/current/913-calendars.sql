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

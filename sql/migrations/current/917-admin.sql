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

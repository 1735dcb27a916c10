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

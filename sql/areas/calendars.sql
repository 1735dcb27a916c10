-- =============================================================================
-- Calendars: iCalendar data of events, communities and personal feeds
-- =============================================================================
-- iCalendar data of one event, of a community and of a personal feed behind a
-- secret URL; the gateway renders what these functions return.
--
--   - SEQUENCE: app.events.sequence grows by one on every update that changes
--     the event (a trigger; what a statement writes to it is ignored);
--   - a deleted event leaves a tombstone (app.event_tombstones) listed with
--     STATUS:CANCELLED while the event itself would be listed, then pruned;
--   - each feed computes its ETag and Last-Modified from the rows it lists and
--     builds the calendar only when the request's validators differ;
--   - the personal feed's token is 32 random bytes, stored as its SHA-256;
--     making the feed again replaces it, and a password reset deletes it.
--
-- Code: gateway/routes/calendars.ts
-- pgTAP: supabase/tests/calendars.test.sql
--
-- The whole source of this area, after the areas before it in
-- sql/areas/areas.json: types, tables, indexes, triggers, policies, the api
-- functions, the helpers. To change it: edit it here, then
-- `npm run db -- areas --diff` writes the migration (docs/dba.md).
-- =============================================================================

-- =============================================================================
-- Types
-- =============================================================================

CREATE TYPE private.calendar_row AS (
	event_id uuid,
	shortlink text,
	title text,
	description text,
	starts_at timestamp with time zone,
	ends_at timestamp with time zone,
	location text,
	sequence integer,
	created_at timestamp with time zone,
	stamp timestamp with time zone,
	cancelled boolean,
	timezone text
);
COMMENT ON TYPE private.calendar_row IS 'One entry of a calendar: a live event (stamp: when it or its venue last changed) or a deleted one (cancelled; stamp: when it was deleted), with its time zone (null: the service default).';

-- =============================================================================
-- Tables
-- =============================================================================

CREATE TABLE app.calendar_feeds (
    user_id uuid NOT NULL,
    token_hash bytea NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT calendar_feeds_pkey PRIMARY KEY (user_id),
    CONSTRAINT calendar_feeds_token_hash_key UNIQUE (token_hash),
    CONSTRAINT calendar_feeds_user_id_fkey FOREIGN KEY (user_id) REFERENCES identity.users(id) ON DELETE CASCADE
);
COMMENT ON TABLE app.calendar_feeds IS 'A user''s personal calendar feed (/cal/{token}.ics): only the SHA-256 of the token is stored; one per user. Not granted to request roles.';
ALTER TABLE app.calendar_feeds ENABLE ROW LEVEL SECURITY;

CREATE TABLE app.event_tombstones (
    event_id uuid NOT NULL,
    community_id uuid NOT NULL,
    shortlink text NOT NULL,
    title text NOT NULL,
    description text,
    starts_at timestamp with time zone NOT NULL,
    ends_at timestamp with time zone,
    location text,
    sequence integer NOT NULL,
    created_at timestamp with time zone NOT NULL,
    deleted_at timestamp with time zone DEFAULT now() NOT NULL,
    timezone text NOT NULL,
    image_path text,
    event_url text,
    venue_node_id uuid,
    CONSTRAINT event_tombstones_pkey PRIMARY KEY (event_id)
);
COMMENT ON TABLE app.event_tombstones IS 'Deleted events, as they were (location as the calendar showed it; zone, image, website and venue for the cancelled page), listed by the calendar feeds and shown by the public page as cancelled until their effective end is 30 days past (private.event_tombstones_prune). No community foreign key: a deleted community takes its events with it. Not granted to request roles.';
ALTER TABLE app.event_tombstones ENABLE ROW LEVEL SECURITY;

-- =============================================================================
-- Indexes
-- =============================================================================

CREATE INDEX event_tombstones_community_end_idx ON app.event_tombstones USING btree (community_id, private.event_effective_end(starts_at, ends_at));
CREATE INDEX event_tombstones_shortlink_idx ON app.event_tombstones USING btree (shortlink);

-- =============================================================================
-- Functions of api: what the gateway and the MCP server call, as the request's role
-- =============================================================================

CREATE FUNCTION api.calendar_event(shortlink text, public_url text, format text, if_none_match text[], if_modified_since timestamp with time zone) RETURNS TABLE(etag text, last_modified timestamp with time zone, calendar jsonb)
    LANGUAGE plpgsql STABLE SECURITY DEFINER
    SET search_path TO 'pg_catalog'
    AS $$
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
$$;

COMMENT ON FUNCTION api.calendar_event(shortlink text, public_url text, format text, if_none_match text[], if_modified_since timestamp with time zone) IS 'GET /e/{shortlink}.ics (no credential): the event as a calendar of one entry (cancelled when it was deleted and its tombstone is kept), with ETag and Last-Modified; calendar null when If-None-Match / If-Modified-Since match (304). format names the renderer''s output (part of the ETag). PT404 event_not_found, also for an event of a draft community.';
GRANT EXECUTE ON FUNCTION api.calendar_event(shortlink text, public_url text, format text, if_none_match text[], if_modified_since timestamp with time zone) TO anon;
GRANT EXECUTE ON FUNCTION api.calendar_event(shortlink text, public_url text, format text, if_none_match text[], if_modified_since timestamp with time zone) TO authenticated;

CREATE FUNCTION api.calendar_community(community_id uuid, public_url text, format text, if_none_match text[], if_modified_since timestamp with time zone) RETURNS TABLE(etag text, last_modified timestamp with time zone, calendar jsonb)
    LANGUAGE plpgsql STABLE SECURITY DEFINER
    SET search_path TO 'pg_catalog'
    AS $$
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
$$;

COMMENT ON FUNCTION api.calendar_community(community_id uuid, public_url text, format text, if_none_match text[], if_modified_since timestamp with time zone) IS 'GET /c/{community_id}/calendar.ics (no credential): the community''s events whose effective end is at most 30 days past (and deleted ones, cancelled), soonest first, with ETag and Last-Modified; calendar null when the request''s validators match (304). PT404 community_not_found for an unknown or draft community.';
GRANT EXECUTE ON FUNCTION api.calendar_community(community_id uuid, public_url text, format text, if_none_match text[], if_modified_since timestamp with time zone) TO anon;
GRANT EXECUTE ON FUNCTION api.calendar_community(community_id uuid, public_url text, format text, if_none_match text[], if_modified_since timestamp with time zone) TO authenticated;

CREATE FUNCTION api.calendar_feed_create(public_url text) RETURNS jsonb
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog'
    AS $$
declare
  me uuid := auth.uid();
  token text := translate(rtrim(encode(extensions.gen_random_bytes(32), 'base64'), '='), '+/', '-_');
  url text;
begin
  if me is null then
    raise exception 'sign in first' using errcode = 'PT401', hint = 'unauthorized';
  end if;
  insert into app.calendar_feeds as f (user_id, token_hash)
  values (me, extensions.digest(token, 'sha256'))
  on conflict (user_id) do update set token_hash = excluded.token_hash, created_at = now();
  url := rtrim(public_url, '/') || '/cal/' || token || '.ics';
  return jsonb_build_object('url', url, 'webcal_url', regexp_replace(url, '^https?://', 'webcal://', 'i'));
end;
$$;

COMMENT ON FUNCTION api.calendar_feed_create(public_url text) IS 'POST /api/mobile/calendar/feed: a new secret feed URL for the caller ({url, webcal_url}); the previous one, if any, stops working. Only the token''s SHA-256 is stored.';
GRANT EXECUTE ON FUNCTION api.calendar_feed_create(public_url text) TO authenticated;

CREATE FUNCTION api.calendar_feed_revoke() RETURNS void
    LANGUAGE sql SECURITY DEFINER
    SET search_path TO 'pg_catalog'
    AS $$
    delete from app.calendar_feeds f where f.user_id = auth.uid()
  $$;
COMMENT ON FUNCTION api.calendar_feed_revoke() IS 'DELETE /api/mobile/calendar/feed: the caller''s feed URL stops working (nothing to do when there is none).';
GRANT EXECUTE ON FUNCTION api.calendar_feed_revoke() TO authenticated;

CREATE FUNCTION api.calendar_personal(token text, public_url text, format text, if_none_match text[], if_modified_since timestamp with time zone) RETURNS TABLE(etag text, last_modified timestamp with time zone, calendar jsonb)
    LANGUAGE plpgsql STABLE SECURITY DEFINER
    SET search_path TO 'pg_catalog'
    AS $$
declare
  owner uuid;
begin
  select f.user_id into owner from app.calendar_feeds f where f.token_hash = extensions.digest(calendar_personal.token, 'sha256');
  if owner is null then
    raise exception 'calendar not found' using errcode = 'PT404', hint = 'calendar_not_found';
  end if;
  return query
    select a.etag, a.last_modified, a.calendar
      from private.calendar_feed_answer(
             array(select m.community_id
                     from app.profiles p
                     join app.community_members m on m.member_node_id = p.node_id
                    where p.id = owner),
             now(),
             jsonb_build_object('name', 'My events'),
             public_url, format, if_none_match, if_modified_since) a;
end;
$$;

COMMENT ON FUNCTION api.calendar_personal(token text, public_url text, format text, if_none_match text[], if_modified_since timestamp with time zone) IS 'GET /cal/{token}.ics (the token is the credential): the upcoming events (effective end not past) of every community of the feed''s owner, and deleted ones (cancelled), with ETag and Last-Modified; calendar null when the request''s validators match (304). PT404 calendar_not_found for an unknown or replaced token.';
GRANT EXECUTE ON FUNCTION api.calendar_personal(token text, public_url text, format text, if_none_match text[], if_modified_since timestamp with time zone) TO anon;
GRANT EXECUTE ON FUNCTION api.calendar_personal(token text, public_url text, format text, if_none_match text[], if_modified_since timestamp with time zone) TO authenticated;

-- =============================================================================
-- Helpers (private, app, identity): internal helpers and trigger functions; request roles run only those granted here
-- =============================================================================

CREATE FUNCTION private.calendar_event_rows(shortlink text) RETURNS SETOF private.calendar_row
    LANGUAGE sql STABLE
    AS $$
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
  $$;

COMMENT ON FUNCTION private.calendar_event_rows(shortlink text) IS 'The calendar entry of the event with this shortlink; when none has it now, the most recently deleted one that had it (cancelled). Nothing for an event of a community whose events are not public (private.community_events_public).';


CREATE FUNCTION private.calendar_etag(format text, public_url text, heading jsonb, entry_count bigint, version numeric) RETURNS text
    LANGUAGE sql IMMUTABLE
    AS $$
    select '"' operator(pg_catalog.||)
           pg_catalog.md5(pg_catalog.concat_ws(' ', format, public_url, heading::text, entry_count, version))
           operator(pg_catalog.||) '"'
  $$;

COMMENT ON FUNCTION private.calendar_etag(format text, public_url text, heading jsonb, entry_count bigint, version numeric) IS 'A calendar''s ETag: the renderer''s format, PUBLIC_URL, the calendar''s heading, the entry count and the sum of private.calendar_row_hash over the entries.';


CREATE FUNCTION private.calendar_row_hash(event_id uuid, sequence integer, stamp timestamp with time zone, cancelled boolean) RETURNS bigint
    LANGUAGE sql IMMUTABLE
    AS $$
    -- The hash functions of the hash operator classes: stable across versions (hash partitioning relies on it), and cheap.
    -- (PostgreSQL 15 has no timestamptz_hash_extended: the instant as a UTC timestamp.)
    select pg_catalog.uuid_hash_extended(event_id,
             pg_catalog.timestamp_hash_extended(pg_catalog.timezone('UTC', stamp), sequence::bigint operator(pg_catalog.*) 2
                                                operator(pg_catalog.+) cancelled::integer))
  $$;

COMMENT ON FUNCTION private.calendar_row_hash(event_id uuid, sequence integer, stamp timestamp with time zone, cancelled boolean) IS 'A 64-bit hash of what identifies an entry''s version (id, sequence, stamp, cancelled); summed over a calendar''s entries, part of its ETag.';


CREATE FUNCTION private.calendar_not_modified(etag text, last_modified timestamp with time zone, if_none_match text[], if_modified_since timestamp with time zone) RETURNS boolean
    LANGUAGE sql IMMUTABLE
    AS $$
    -- RFC 9110 13.1.2/13.1.3: If-None-Match, when sent, decides alone (weak comparison; * matches any).
    select case when if_none_match is not null
                then etag operator(pg_catalog.=) any (if_none_match) or '*' operator(pg_catalog.=) any (if_none_match)
                else if_modified_since is not null
                     and pg_catalog.date_trunc('second', last_modified) operator(pg_catalog.<=) if_modified_since
           end
  $$;

COMMENT ON FUNCTION private.calendar_not_modified(etag text, last_modified timestamp with time zone, if_none_match text[], if_modified_since timestamp with time zone) IS 'Whether a conditional GET is answered 304: If-None-Match (entity tags, W/ removed) holds the ETag or *; or, without If-None-Match, If-Modified-Since is at or after Last-Modified (whole seconds).';


CREATE FUNCTION private.calendar_entry(r private.calendar_row, public_url text) RETURNS jsonb
    LANGUAGE sql STABLE
    AS $$
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
  $$;

COMMENT ON FUNCTION private.calendar_entry(r private.calendar_row, public_url text) IS 'A calendar entry as the gateway renders it (VEVENT): uid <event id>@<PUBLIC_URL host>, sequence, start and effective end (UTC), stamp, created, summary, description, location, url (the public page), status CONFIRMED or CANCELLED, timezone (the event''s IANA zone: DTSTART and DTEND are written in it).';


CREATE FUNCTION private.calendar_feed_answer(community_ids uuid[], ends_after timestamp with time zone, heading jsonb, public_url text, format text, if_none_match text[], if_modified_since timestamp with time zone) RETURNS TABLE(etag text, last_modified timestamp with time zone, calendar jsonb)
    LANGUAGE plpgsql STABLE
    SET search_path TO 'pg_catalog'
    AS $$
declare
  entry_count bigint;
  version numeric;
  newest timestamptz;
begin
  select count(*), coalesce(sum(private.calendar_row_hash(r.event_id, r.sequence, r.stamp, r.cancelled)), 0), max(r.stamp)
    into entry_count, version, newest
    from private.calendar_rows(community_ids, ends_after) r;
  etag := private.calendar_etag(format, public_url, heading, entry_count, version);
  last_modified := greatest(newest, (heading ->> 'updated_at')::timestamptz, timestamptz '2000-01-01 00:00:00+00');
  if private.calendar_not_modified(etag, last_modified, if_none_match, if_modified_since) then
    calendar := null;
  else
    calendar := (heading - 'updated_at') || jsonb_build_object('events', (
      select coalesce(jsonb_agg(private.calendar_entry(r, public_url) order by r.starts_at, r.event_id), '[]'::jsonb)
        from (select * from private.calendar_rows(community_ids, ends_after) c
               order by c.starts_at, c.event_id
               limit private.calendar_max_entries()) r));
  end if;
  return next;
end;
$$;

COMMENT ON FUNCTION private.calendar_feed_answer(community_ids uuid[], ends_after timestamp with time zone, heading jsonb, public_url text, format text, if_none_match text[], if_modified_since timestamp with time zone) IS 'The answer to a feed request over private.calendar_rows(community_ids, ends_after): ETag (private.calendar_etag, over every row), Last-Modified (the newest entry stamp, or the heading''s updated_at), and the calendar (the heading without updated_at, and its events: soonest first, at most private.calendar_max_entries()) unless the request''s validators match (then null: 304).';


CREATE FUNCTION private.calendar_rows(community_ids uuid[], ends_after timestamp with time zone) RETURNS SETOF private.calendar_row
    LANGUAGE sql STABLE
    AS $$
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
  $$;

COMMENT ON FUNCTION private.calendar_rows(community_ids uuid[], ends_after timestamp with time zone) IS 'The entries of a calendar of these communities, in no order: their events whose effective end is at or after ends_after, and the deleted ones (cancelled) as long as that holds.';


CREATE FUNCTION private.calendar_max_entries() RETURNS integer
    LANGUAGE sql IMMUTABLE
    AS $$ select 5000 $$;
COMMENT ON FUNCTION private.calendar_max_entries() IS 'At most this many events per calendar feed (soonest first).';


CREATE FUNCTION private.event_tombstones_prune(max_rows integer DEFAULT 10000) RETURNS integer
    LANGUAGE sql SECURITY DEFINER
    SET search_path TO 'pg_catalog'
    AS $$
    with gone as (
      delete from app.event_tombstones t
       where t.event_id in (select o.event_id from app.event_tombstones o
                             where private.event_effective_end(o.starts_at, o.ends_at) < now() - interval '30 days'
                             limit max_rows)
      returning 1)
    select count(*)::integer from gone
  $$;

COMMENT ON FUNCTION private.event_tombstones_prune(max_rows integer) IS 'Deletes tombstones no calendar lists any more (effective end more than 30 days ago), at most max_rows; returns how many. The gateway runs it with the change-log prune.';


CREATE FUNCTION private.tg_events__sequence() RETURNS trigger
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog'
    AS $$
begin
  if (to_jsonb(new) - 'updated_at' - 'sequence') is distinct from (to_jsonb(old) - 'updated_at' - 'sequence') then
    new.sequence := old.sequence + 1;
  else
    new.sequence := old.sequence;
  end if;
  return new;
end;
$$;
COMMENT ON FUNCTION private.tg_events__sequence() IS 'Trigger: an update that changes an event (anything but updated_at) raises its sequence by one; sequence itself cannot be written.';


CREATE FUNCTION private.tg_events__tombstone() RETURNS trigger
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog'
    AS $$
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
$$;
COMMENT ON FUNCTION private.tg_events__tombstone() IS 'Trigger: a deleted event leaves a tombstone (app.event_tombstones), its sequence one higher, which the calendar feeds list as cancelled and its public page shows cancelled.';

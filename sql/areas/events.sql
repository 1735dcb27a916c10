-- =============================================================================
-- Events, venues, check-ins and the public event pages
-- =============================================================================
-- The Event object (private.event_json: one function builds it for every
-- endpoint), event status and the venue concurrency window, check-ins and the
-- public pages (deep links, the web check-in form, the share preview).
--
--   effective end   end_time, or date + 2 hours
--   status          upcoming before date, ongoing from date to the effective
--                   end (inclusive), past after it
--   venue window    date - 2h <= now <= effective end + 2h
--
-- Each takes the moment as a parameter (default now()), so the edges can be
-- tested exactly. An event's time zone (an IANA name checked against a copy
-- of pg_timezone_names) is given, else its venue's, else its community's, else
-- the service's DEFAULT_TIMEZONE, when it is made (a trigger); instants stay
-- UTC in every answer, which carry the zone beside them. The public page of a
-- deleted event says it is cancelled while its tombstone is kept. A check-in is to an event or a venue, at
-- most one current per user and place (partial unique indexes); checking in
-- twice answers the same check-in; the hat must be the user's own whatever
-- inserts the row (a trigger). An offline check-in carries the phone's time
-- (device_checked_in_at, beside the server's checked_in_at): at most 5
-- minutes ahead, 24 hours behind, and inside the venue window of the event. Row-level security: a user reads only their own check-ins and
-- registrations; signed-in users read events, venues and nodes.
--
-- Code: gateway/routes/events.ts, gateway/routes/deeplinks.ts
-- pgTAP: supabase/tests/events.test.sql
--
-- The whole source of this area, after the areas before it in
-- sql/areas/areas.json: types, tables, indexes, triggers, policies, the api
-- functions, the helpers. To change it: edit it here, then
-- `npm run db -- areas --diff` writes the migration (docs/dba.md).
-- =============================================================================

-- =============================================================================
-- Types
-- =============================================================================

CREATE TYPE api.checkin_outcome AS (
	created boolean,
	checkin jsonb
);

CREATE TYPE api.current_checkins AS (
	checkins jsonb,
	current_ongoing_checkin jsonb
);

CREATE TYPE api.venue_checkin_outcome AS (
	type text,
	created boolean,
	checkin jsonb,
	events jsonb
);

CREATE TYPE api.venue_link AS (
	location text,
	venue_name text,
	events jsonb
);

-- =============================================================================
-- Tables
-- =============================================================================

CREATE TABLE app.venues (
    node_id uuid NOT NULL,
    name text NOT NULL,
    address text,
    latitude double precision,
    longitude double precision,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    updated_at timestamp with time zone DEFAULT now() NOT NULL,
    location_id integer GENERATED ALWAYS AS IDENTITY NOT NULL,
    timezone text,
    CONSTRAINT venues_latitude_check CHECK (((latitude >= ('-90'::integer)::double precision) AND (latitude <= (90)::double precision))),
    CONSTRAINT venues_longitude_check CHECK (((longitude >= ('-180'::integer)::double precision) AND (longitude <= (180)::double precision))),
    CONSTRAINT venues_name_check CHECK (((length(btrim(name)) >= 1) AND (length(btrim(name)) <= 200))),
    CONSTRAINT venues_pkey PRIMARY KEY (node_id),
    CONSTRAINT venues_node_id_fkey FOREIGN KEY (node_id) REFERENCES app.nodes(id) ON DELETE CASCADE
);
COMMENT ON TABLE app.venues IS 'Venues; a venue is identified by its node id.';
COMMENT ON COLUMN app.venues.location_id IS 'A short integer id of the venue (the platform API''s location_id).';
COMMENT ON COLUMN app.venues.timezone IS 'The venue''s IANA time zone, or null (unknown): events made there without a zone take it. Set by admin.set_venue_timezone, or by a platform that gives it with the venue while it has none.';
ALTER TABLE app.venues ENABLE ROW LEVEL SECURITY;
GRANT SELECT ON TABLE app.venues TO authenticated;

CREATE TABLE app.events (
    id uuid DEFAULT gen_random_uuid() NOT NULL,
    node_id uuid NOT NULL,
    community_id uuid NOT NULL,
    title text NOT NULL,
    description text,
    starts_at timestamp with time zone NOT NULL,
    ends_at timestamp with time zone,
    venue_node_id uuid,
    location text,
    event_url text,
    image_path text,
    shortlink text DEFAULT private.generate_shortlink() NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    updated_at timestamp with time zone DEFAULT now() NOT NULL,
    platform_a_url text,
    platform_b_url text,
    platform_c_url text,
    external_platform text,
    external_id text,
    sequence integer DEFAULT 0 NOT NULL,
    timezone text NOT NULL,
    image_object_id uuid,
    CONSTRAINT events_check CHECK (((ends_at IS NULL) OR (ends_at >= starts_at))),
    CONSTRAINT events_external_platform_check CHECK ((((external_platform IS NULL) = (external_id IS NULL)) AND ((external_platform IS NULL) OR (external_platform = ANY (ARRAY['platform_a'::text, 'platform_b'::text, 'platform_c'::text, 'platform_d'::text]))) AND ((external_id IS NULL) OR ((length(external_id) >= 1) AND (length(external_id) <= 200))))),
    CONSTRAINT events_shortlink_check CHECK ((shortlink ~ '^[A-Za-z0-9]{8}$'::text)),
    CONSTRAINT events_title_check CHECK (((length(btrim(title)) >= 1) AND (length(btrim(title)) <= 300))),
    CONSTRAINT events_external_key UNIQUE (external_platform, external_id),
    CONSTRAINT events_node_id_key UNIQUE (node_id),
    CONSTRAINT events_pkey PRIMARY KEY (id),
    CONSTRAINT events_shortlink_key UNIQUE (shortlink),
    CONSTRAINT events_community_id_fkey FOREIGN KEY (community_id) REFERENCES app.communities(id) ON DELETE CASCADE,
    CONSTRAINT events_node_id_fkey FOREIGN KEY (node_id) REFERENCES app.nodes(id) ON DELETE RESTRICT,
    CONSTRAINT events_venue_node_id_fkey FOREIGN KEY (venue_node_id) REFERENCES app.venues(node_id) ON DELETE SET NULL
);
ALTER TABLE ONLY app.events
    ADD CONSTRAINT events_image_object_id_fkey FOREIGN KEY (image_object_id) REFERENCES app.storage_objects(id) ON DELETE SET NULL;
COMMENT ON TABLE app.events IS 'Calendar events of a community. An event without ends_at ends 2 hours after starts_at.';
COMMENT ON COLUMN app.events.starts_at IS 'The event''s `date` in the API.';
COMMENT ON COLUMN app.events.ends_at IS 'The event''s `end_time` in the API.';
COMMENT ON COLUMN app.events.platform_a_url IS 'The event''s page on platform_a; set when synced.';
COMMENT ON COLUMN app.events.platform_b_url IS 'The event''s page on platform_b; set when synced.';
COMMENT ON COLUMN app.events.platform_c_url IS 'The event''s page on platform_c; set when synced.';
COMMENT ON COLUMN app.events.external_platform IS 'The platform that pushed the event (platform_a..platform_d), or null.';
COMMENT ON COLUMN app.events.external_id IS 'The event''s id on external_platform; unique per platform.';
COMMENT ON COLUMN app.events.sequence IS 'The iCalendar SEQUENCE: 0 when created, one more on every update that changes the event (trigger _150_sequence).';
COMMENT ON COLUMN app.events.timezone IS 'The event''s IANA time zone (a name of private.time_zones, copied from pg_timezone_names): given, else its venue''s, else its community''s, else DEFAULT_TIMEZONE (trigger _120_timezone). Events made before time zones were kept are UTC, as they were shown.';
ALTER TABLE app.events ENABLE ROW LEVEL SECURITY;
GRANT SELECT ON TABLE app.events TO authenticated;

CREATE TABLE app.checkins (
    id uuid DEFAULT gen_random_uuid() NOT NULL,
    user_id uuid NOT NULL,
    event_id uuid,
    venue_node_id uuid,
    hat_id uuid,
    location_id uuid,
    visibility text DEFAULT 'anonymous'::text NOT NULL,
    checked_in_at timestamp with time zone DEFAULT now() NOT NULL,
    checked_out_at timestamp with time zone,
    device_checked_in_at timestamp with time zone,
    CONSTRAINT checkins_device_time_bounded CHECK (((device_checked_in_at IS NULL) OR ((device_checked_in_at >= (checked_in_at - '24:00:00'::interval)) AND (device_checked_in_at <= (checked_in_at + '00:05:00'::interval))))),
    CONSTRAINT checkins_one_place CHECK ((num_nonnulls(event_id, venue_node_id) = 1)),
    CONSTRAINT checkins_out_after_in CHECK (((checked_out_at IS NULL) OR (checked_out_at >= checked_in_at))),
    CONSTRAINT checkins_visibility_check CHECK ((visibility = ANY (ARRAY['anonymous'::text, 'public'::text]))),
    CONSTRAINT checkins_pkey PRIMARY KEY (id),
    CONSTRAINT checkins_event_id_fkey FOREIGN KEY (event_id) REFERENCES app.events(id) ON DELETE CASCADE,
    CONSTRAINT checkins_hat_id_fkey FOREIGN KEY (hat_id) REFERENCES app.hats(id) ON DELETE SET NULL,
    CONSTRAINT checkins_user_id_fkey FOREIGN KEY (user_id) REFERENCES app.profiles(id) ON DELETE CASCADE,
    CONSTRAINT checkins_venue_node_id_fkey FOREIGN KEY (venue_node_id) REFERENCES app.venues(node_id) ON DELETE CASCADE
);
COMMENT ON TABLE app.checkins IS 'Check-ins to events and venues. Current while checked_out_at is null.';
COMMENT ON COLUMN app.checkins.location_id IS 'As sent by the client with an event check-in; stored, not interpreted.';
COMMENT ON COLUMN app.checkins.device_checked_in_at IS 'When the phone says it checked in (an offline check-in sent later), beside checked_in_at (the server''s time of arrival): at most 24 hours before it and 5 minutes after it (clock skew), and inside the event''s check-in window (private.checkin_device_time); null when the phone sent none.';
ALTER TABLE app.checkins ENABLE ROW LEVEL SECURITY;
GRANT SELECT ON TABLE app.checkins TO authenticated;
GRANT INSERT(user_id) ON TABLE app.checkins TO authenticated;
GRANT INSERT(event_id) ON TABLE app.checkins TO authenticated;
GRANT INSERT(venue_node_id) ON TABLE app.checkins TO authenticated;
GRANT INSERT(hat_id) ON TABLE app.checkins TO authenticated;
GRANT INSERT(location_id) ON TABLE app.checkins TO authenticated;
GRANT INSERT(visibility) ON TABLE app.checkins TO authenticated;
GRANT INSERT(device_checked_in_at) ON TABLE app.checkins TO authenticated;
GRANT UPDATE(checked_out_at) ON TABLE app.checkins TO authenticated;

CREATE TABLE app.event_attendees (
    event_id uuid NOT NULL,
    user_id uuid NOT NULL,
    external_platform text,
    registered_at timestamp with time zone DEFAULT now() NOT NULL,
    account_created boolean DEFAULT false NOT NULL,
    community_joined boolean DEFAULT false NOT NULL,
    CONSTRAINT event_attendees_pkey PRIMARY KEY (event_id, user_id),
    CONSTRAINT event_attendees_event_id_fkey FOREIGN KEY (event_id) REFERENCES app.events(id) ON DELETE CASCADE,
    CONSTRAINT event_attendees_user_id_fkey FOREIGN KEY (user_id) REFERENCES identity.users(id) ON DELETE CASCADE
);
COMMENT ON TABLE app.event_attendees IS 'Attendees registered for an event by an external platform.';
COMMENT ON COLUMN app.event_attendees.account_created IS 'Whether this registration made the account (api.platform_attendee_register answers its repeats, and other registrations of the community, with the user_id).';
COMMENT ON COLUMN app.event_attendees.community_joined IS 'Whether this registration joined the account to the event''s community (a repeat answers it again).';
ALTER TABLE app.event_attendees ENABLE ROW LEVEL SECURITY;
GRANT SELECT ON TABLE app.event_attendees TO authenticated;

CREATE TABLE private.time_zones (
    name text NOT NULL,
    CONSTRAINT time_zones_pkey PRIMARY KEY (name)
);
COMMENT ON TABLE private.time_zones IS 'The names of pg_timezone_names, copied (reading the view takes 30-60 ms): what an event, venue or community zone may be (private.time_zone_name). Refreshed at the gateway''s start (private.time_zones_refresh). Not granted to request roles.';
ALTER TABLE private.time_zones ENABLE ROW LEVEL SECURITY;

-- =============================================================================
-- Indexes
-- =============================================================================

CREATE INDEX venues_coordinates_idx ON app.venues USING btree (latitude, longitude) WHERE (latitude IS NOT NULL);
CREATE UNIQUE INDEX venues_location_id_key ON app.venues USING btree (location_id);
CREATE INDEX venues_name_address_idx ON app.venues USING btree (lower(btrim(name)), lower(btrim(COALESCE(address, ''::text))));
CREATE INDEX events_community_end_idx ON app.events USING btree (community_id, private.event_effective_end(starts_at, ends_at));
CREATE INDEX events_community_idx ON app.events USING btree (community_id, starts_at);
CREATE INDEX events_effective_end_idx ON app.events USING btree (private.event_effective_end(starts_at, ends_at));
CREATE INDEX events_image_object_idx ON app.events USING btree (image_object_id) WHERE (image_object_id IS NOT NULL);
CREATE INDEX events_venue_end_idx ON app.events USING btree (venue_node_id, private.event_effective_end(starts_at, ends_at)) WHERE (venue_node_id IS NOT NULL);
CREATE INDEX events_venue_idx ON app.events USING btree (venue_node_id, starts_at) WHERE (venue_node_id IS NOT NULL);
CREATE INDEX checkins_event_idx ON app.checkins USING btree (event_id) WHERE (event_id IS NOT NULL);
CREATE INDEX checkins_hat_idx ON app.checkins USING btree (hat_id) WHERE (hat_id IS NOT NULL);
CREATE UNIQUE INDEX checkins_one_current_per_event ON app.checkins USING btree (user_id, event_id) WHERE ((checked_out_at IS NULL) AND (event_id IS NOT NULL));
CREATE UNIQUE INDEX checkins_one_current_per_venue ON app.checkins USING btree (user_id, venue_node_id) WHERE ((checked_out_at IS NULL) AND (venue_node_id IS NOT NULL));
CREATE INDEX checkins_user_current_idx ON app.checkins USING btree (user_id, checked_in_at DESC) WHERE (checked_out_at IS NULL);
CREATE INDEX checkins_venue_idx ON app.checkins USING btree (venue_node_id) WHERE (venue_node_id IS NOT NULL);
CREATE INDEX event_attendees_user_idx ON app.event_attendees USING btree (user_id);
CREATE UNIQUE INDEX time_zones_lower_name_idx ON private.time_zones USING btree (lower(name));

-- =============================================================================
-- Triggers
-- =============================================================================

CREATE TRIGGER _100_set_updated_at BEFORE UPDATE ON app.venues FOR EACH ROW EXECUTE FUNCTION private.tg__set_updated_at();
CREATE TRIGGER _100_set_updated_at BEFORE UPDATE ON app.events FOR EACH ROW EXECUTE FUNCTION private.tg__set_updated_at();
CREATE TRIGGER _120_timezone BEFORE INSERT OR UPDATE ON app.events FOR EACH ROW EXECUTE FUNCTION private.tg_events__timezone();
CREATE TRIGGER _150_sequence BEFORE UPDATE ON app.events FOR EACH ROW EXECUTE FUNCTION private.tg_events__sequence();
CREATE TRIGGER _800_tombstone AFTER DELETE ON app.events FOR EACH ROW EXECUTE FUNCTION private.tg_events__tombstone();
CREATE TRIGGER _900_log_change AFTER INSERT OR DELETE OR UPDATE ON app.events FOR EACH ROW EXECUTE FUNCTION private.tg_events__log_change();
CREATE TRIGGER _900_storage_purge AFTER DELETE ON app.events FOR EACH ROW EXECUTE FUNCTION private.tg_events__storage_purge();
CREATE TRIGGER webhook_capture AFTER INSERT OR DELETE OR UPDATE ON app.events FOR EACH ROW EXECUTE FUNCTION private.webhook_capture_events();
CREATE TRIGGER _200_check_hat BEFORE INSERT OR UPDATE OF hat_id, user_id ON app.checkins FOR EACH ROW EXECUTE FUNCTION private.tg_checkins__check_hat();
CREATE TRIGGER webhook_capture AFTER INSERT ON app.checkins FOR EACH ROW WHEN ((new.event_id IS NOT NULL)) EXECUTE FUNCTION private.webhook_capture_checkins();
CREATE TRIGGER webhook_capture AFTER INSERT ON app.event_attendees FOR EACH ROW EXECUTE FUNCTION private.webhook_capture_attendees();

-- =============================================================================
-- Policies
-- =============================================================================

CREATE POLICY "Venues are visible to signed-in users" ON app.venues FOR SELECT TO authenticated USING (true);

CREATE POLICY "Events are visible to signed-in users" ON app.events FOR SELECT TO authenticated USING (private.event_readable(community_id));

CREATE POLICY "Users can check themselves in" ON app.checkins FOR INSERT TO authenticated WITH CHECK ((user_id = ( SELECT auth.uid() AS uid)));

CREATE POLICY "Users can check themselves out" ON app.checkins FOR UPDATE TO authenticated USING ((user_id = ( SELECT auth.uid() AS uid))) WITH CHECK ((user_id = ( SELECT auth.uid() AS uid)));

CREATE POLICY "Users can read their own check-ins" ON app.checkins FOR SELECT TO authenticated USING ((user_id = ( SELECT auth.uid() AS uid)));

CREATE POLICY "Users can read their own registrations" ON app.event_attendees FOR SELECT TO authenticated USING ((user_id = ( SELECT auth.uid() AS uid)));

-- =============================================================================
-- Functions of api: what the gateway and the MCP server call, as the request's role
-- =============================================================================

CREATE FUNCTION api.venue_checkin(venue_id uuid, hat_id uuid, visibility text DEFAULT NULL::text) RETURNS SETOF api.venue_checkin_outcome
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog'
    AS $$
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
$$;

COMMENT ON FUNCTION api.venue_checkin(venue_id uuid, hat_id uuid, visibility text) IS 'POST /api/mobile/venues/{venue_id}/checkin: no concurrent event: venue check-in; one: check-in to it; several: the list (type event_selection), nobody checked in.';
GRANT EXECUTE ON FUNCTION api.venue_checkin(venue_id uuid, hat_id uuid, visibility text) TO authenticated;

CREATE FUNCTION api.checkins_current() RETURNS SETOF api.current_checkins
    LANGUAGE plpgsql STABLE
    SET search_path TO 'pg_catalog'
    AS $$
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
COMMENT ON FUNCTION api.checkins_current() IS 'GET /api/mobile/checkins: the caller''s current check-ins, newest first, and the most recent ongoing event check-in. PT422 when the user has no node.';
GRANT EXECUTE ON FUNCTION api.checkins_current() TO authenticated;

CREATE FUNCTION api.events_upcoming_page(public_url text) RETURNS json
    LANGUAGE plpgsql STABLE
    SET search_path TO 'pg_catalog'
    AS $$
begin
  return (
    select coalesce(json_agg(private.event_object(u.event, u.community_node_id, u.manages, events_upcoming_page.public_url)
                             order by (u.event).starts_at, (u.event).id), '[]'::json)
      from private.my_upcoming_events() u);
end;
$$;

COMMENT ON FUNCTION api.events_upcoming_page(public_url text) IS 'GET /api/mobile/events/upcoming: the JSON array of the events of the caller''s communities whose effective end is not past, soonest first, at most 100.';
GRANT EXECUTE ON FUNCTION api.events_upcoming_page(public_url text) TO authenticated;

CREATE FUNCTION api.event_get(id uuid, public_url text) RETURNS jsonb
    LANGUAGE plpgsql STABLE
    SET search_path TO 'pg_catalog'
    AS $$
declare
  found_event app.events := private.find_event(event_get.id);
begin
  if found_event.id is null then
    raise exception 'event not found' using errcode = 'PT404', hint = 'event_not_found';
  end if;
  return private.event_json(found_event, public_url);
end;
$$;

COMMENT ON FUNCTION api.event_get(id uuid, public_url text) IS 'GET /api/mobile/events/{id}: one event (by id or node id) for any signed-in user. PT404 when unknown.';
GRANT EXECUTE ON FUNCTION api.event_get(id uuid, public_url text) TO authenticated;

CREATE FUNCTION api.event_update(id uuid, patch jsonb, public_url text, if_match text[] DEFAULT NULL::text[]) RETURNS jsonb
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog'
    AS $$
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
  if event_update.if_match is not null then
    select e.* into found_event from app.events e where e.id = found_event.id for no key update;
    perform app.check_if_match(event_update.if_match, found_event.updated_at, private.event_json(found_event, event_update.public_url));
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
$$;

COMMENT ON FUNCTION api.event_update(id uuid, patch jsonb, public_url text, if_match text[]) IS 'PATCH /api/mobile/events/{id}: a manager of the event''s community changes what the patch names: image_path (an object of the event-images bucket in the event''s folder, or null to clear). PT403 not_community_manager, PT404 event_not_found, PT422 invalid_image_path; PT412 precondition_failed (with the current event) when if_match (the If-Match tags) names another version (api.event_etag).';
GRANT EXECUTE ON FUNCTION api.event_update(id uuid, patch jsonb, public_url text, if_match text[]) TO authenticated;

CREATE FUNCTION api.event_etag(id uuid) RETURNS text
    LANGUAGE sql STABLE
    SET search_path TO 'pg_catalog'
    AS $$
    select api.etag((private.find_event(event_etag.id)).updated_at)
  $$;

COMMENT ON FUNCTION api.event_etag(id uuid) IS 'GET and PATCH /api/mobile/events/{id}: the event''s ETag (api.etag of its updated_at; by id or node id), answered beside the Event object (which has no updated_at); null when unknown.';
GRANT EXECUTE ON FUNCTION api.event_etag(id uuid) TO authenticated;

CREATE FUNCTION api.event_checkin(event_id uuid, hat_id uuid DEFAULT NULL::uuid, location_id uuid DEFAULT NULL::uuid, visibility text DEFAULT NULL::text, checked_in_at timestamp with time zone DEFAULT NULL::timestamp with time zone) RETURNS SETOF api.checkin_outcome
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog'
    AS $$
declare
  found_event app.events := private.find_event(event_checkin.event_id);
begin
  if found_event.id is null then
    raise exception 'event not found' using errcode = 'PT404', hint = 'event_not_found';
  end if;
  return query select * from private.check_in(found_event.id, null, hat_id, location_id, visibility,
                                               private.checkin_device_time(found_event, event_checkin.checked_in_at));
end;
$$;

COMMENT ON FUNCTION api.event_checkin(event_id uuid, hat_id uuid, location_id uuid, visibility text, checked_in_at timestamp with time zone) IS 'POST /api/mobile/events/{event_id}/checkin: checks the caller in (created) or returns the current check-in. checked_in_at: the phone''s time of an offline check-in, kept as device_checked_in_at beside the server''s (private.checkin_device_time: PT422 checkin_time_in_future, checkin_time_too_old, checkin_time_outside_event). PT404 unknown event, PT422 a hat not the caller''s.';
GRANT EXECUTE ON FUNCTION api.event_checkin(event_id uuid, hat_id uuid, location_id uuid, visibility text, checked_in_at timestamp with time zone) TO authenticated;

CREATE FUNCTION api.event_checkout(event_id uuid) RETURNS jsonb
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog'
    AS $$
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

COMMENT ON FUNCTION api.event_checkout(event_id uuid) IS 'DELETE /api/mobile/events/{event_id}/checkin: checks the caller out (the row stays). PT404 unknown event or not checked in.';
GRANT EXECUTE ON FUNCTION api.event_checkout(event_id uuid) TO authenticated;

CREATE FUNCTION api.venue_checkout(venue_id uuid) RETURNS jsonb
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog'
    AS $$
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

COMMENT ON FUNCTION api.venue_checkout(venue_id uuid) IS 'DELETE /api/mobile/venues/{venue_id}/checkin: ends the caller''s venue check-in. PT404 unknown venue or not checked in.';
GRANT EXECUTE ON FUNCTION api.venue_checkout(venue_id uuid) TO authenticated;

CREATE FUNCTION api.event_public(shortlink text, public_url text) RETURNS jsonb
    LANGUAGE plpgsql STABLE SECURITY DEFINER
    SET search_path TO 'pg_catalog'
    AS $$
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

COMMENT ON FUNCTION api.event_public(shortlink text, public_url text) IS 'The Event of a shortlink, without a credential. PT404 when unknown or of a draft community.';
GRANT EXECUTE ON FUNCTION api.event_public(shortlink text, public_url text) TO anon;
GRANT EXECUTE ON FUNCTION api.event_public(shortlink text, public_url text) TO authenticated;

CREATE FUNCTION api.event_page(shortlink text, public_url text) RETURNS jsonb
    LANGUAGE plpgsql STABLE SECURITY DEFINER
    SET search_path TO 'pg_catalog'
    AS $$
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
  -- The image as a URL (the stored object's public URL, else the external
  -- one), and the share preview's: a 1200x630 transformation when stored here.
  return private.event_page_json(found.title, found.description, found.starts_at, found.ends_at, found.timezone,
                                 coalesce(app.storage_public_url(found.image_object_id), found.image_path),
                                 found.event_url, found.shortlink, location_text, venue, community,
                                 base, false)
         || jsonb_build_object('og_image', coalesce(private.storage_render_url(found.image_object_id, 1200, 630, 'cover'),
                                                    app.storage_public_url(found.image_object_id), found.image_path));
end;
$$;

COMMENT ON FUNCTION api.event_page(shortlink text, public_url text) IS 'GET /e/{shortlink} (no credential): what the public page and its previews show: og_image (a 1200x630 transformation of a stored image, else the image), title, description, date, end (the effective end), timezone, image_path, event_url, url (the page), calendar_path, checkin_path (null once cancelled), location ("venue, address" or the location text), place {name, address, latitude, longitude} for schema.org (the venue, its address else its name; else the location text; else the community), organizer {name, url: the community''s public page}, event_status (EventScheduled, or EventCancelled for a deleted event while its tombstone is kept), attendance_mode. PT404 event_not_found, also for an event of a draft community.';
GRANT EXECUTE ON FUNCTION api.event_page(shortlink text, public_url text) TO anon;
GRANT EXECUTE ON FUNCTION api.event_page(shortlink text, public_url text) TO authenticated;

CREATE FUNCTION api.link_venue_checkin(venue_node_id uuid) RETURNS SETOF api.venue_link
    LANGUAGE plpgsql STABLE SECURITY DEFINER
    SET search_path TO 'pg_catalog'
    AS $$
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
$$;

COMMENT ON FUNCTION api.link_venue_checkin(venue_node_id uuid) IS 'GET /l/checkin/venue/{venue_node_id}: one concurrent event: its check-in link (location); several: the choices. Events of draft communities are left out. PT404 unknown venue or none.';
GRANT EXECUTE ON FUNCTION api.link_venue_checkin(venue_node_id uuid) TO anon;
GRANT EXECUTE ON FUNCTION api.link_venue_checkin(venue_node_id uuid) TO authenticated;

CREATE FUNCTION api.link_event_checkin(event_node_id uuid, user_agent text, app_scheme text) RETURNS text
    LANGUAGE plpgsql STABLE SECURITY DEFINER
    SET search_path TO 'pg_catalog'
    AS $$
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

COMMENT ON FUNCTION api.link_event_checkin(event_node_id uuid, user_agent text, app_scheme text) IS 'GET /l/checkin/event/{event_node_id}: the redirect target for this user agent. PT404 when unknown or of a draft community.';
GRANT EXECUTE ON FUNCTION api.link_event_checkin(event_node_id uuid, user_agent text, app_scheme text) TO anon;
GRANT EXECUTE ON FUNCTION api.link_event_checkin(event_node_id uuid, user_agent text, app_scheme text) TO authenticated;

CREATE FUNCTION api.link_event_shortlink(shortlink text, user_agent text, app_scheme text) RETURNS text
    LANGUAGE plpgsql STABLE SECURITY DEFINER
    SET search_path TO 'pg_catalog'
    AS $$
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

COMMENT ON FUNCTION api.link_event_shortlink(shortlink text, user_agent text, app_scheme text) IS 'GET /l/event/{shortlink}: as the event check-in link. PT404 when unknown or of a draft community.';
GRANT EXECUTE ON FUNCTION api.link_event_shortlink(shortlink text, user_agent text, app_scheme text) TO anon;
GRANT EXECUTE ON FUNCTION api.link_event_shortlink(shortlink text, user_agent text, app_scheme text) TO authenticated;

CREATE FUNCTION api.event_public_by_node(event_node_id uuid, public_url text) RETURNS jsonb
    LANGUAGE plpgsql STABLE SECURITY DEFINER
    SET search_path TO 'pg_catalog'
    AS $$
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

COMMENT ON FUNCTION api.event_public_by_node(event_node_id uuid, public_url text) IS 'GET /checkin/event/{event_node_id} (web check-in form): the Event. PT404 when unknown or of a draft community.';
GRANT EXECUTE ON FUNCTION api.event_public_by_node(event_node_id uuid, public_url text) TO anon;
GRANT EXECUTE ON FUNCTION api.event_public_by_node(event_node_id uuid, public_url text) TO authenticated;

CREATE FUNCTION api.events_upcoming(public_url text) RETURNS SETOF jsonb
    LANGUAGE sql STABLE
    SET search_path TO 'pg_catalog'
    AS $$
    select u.event::jsonb from json_array_elements(api.events_upcoming_page(events_upcoming.public_url)) with ordinality as u(event, n)
     order by u.n
  $$;

COMMENT ON FUNCTION api.events_upcoming(public_url text) IS 'The events of api.events_upcoming_page as rows, soonest first.';
GRANT EXECUTE ON FUNCTION api.events_upcoming(public_url text) TO authenticated;

-- =============================================================================
-- Helpers (private, app, identity): internal helpers and trigger functions; request roles run only those granted here
-- =============================================================================

CREATE FUNCTION private.venue_concurrent_events(venue_node_id uuid, as_of timestamp with time zone DEFAULT now()) RETURNS SETOF app.events
    LANGUAGE sql STABLE
    SET search_path TO 'pg_catalog'
    AS $$
    select e.*
      from app.events e
     where e.venue_node_id = venue_concurrent_events.venue_node_id
       and private.event_effective_end(e.starts_at, e.ends_at) >= as_of - interval '2 hours'
       and e.starts_at <= as_of + interval '2 hours'
     order by e.starts_at, e.id
  $$;

COMMENT ON FUNCTION private.venue_concurrent_events(venue_node_id uuid, as_of timestamp with time zone) IS 'Events concurrent at a venue at a moment: date - 2h <= moment <= effective end + 2h. Used by venue check-in and the venue deep link.';
GRANT EXECUTE ON FUNCTION private.venue_concurrent_events(venue_node_id uuid, as_of timestamp with time zone) TO authenticated;

CREATE FUNCTION private.event_effective_end(starts_at timestamp with time zone, ends_at timestamp with time zone) RETURNS timestamp with time zone
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    SET search_path TO 'pg_catalog'
    AS $$
    select coalesce(ends_at, starts_at + interval '2 hours')
  $$;

COMMENT ON FUNCTION private.event_effective_end(starts_at timestamp with time zone, ends_at timestamp with time zone) IS 'When an event ends: its end_time, or 2 hours after its date when it has none.';
GRANT EXECUTE ON FUNCTION private.event_effective_end(starts_at timestamp with time zone, ends_at timestamp with time zone) TO authenticated;

CREATE FUNCTION private.check_in(event_id uuid, venue_node_id uuid, hat_id uuid, location_id uuid, visibility text, device_checked_in_at timestamp with time zone DEFAULT NULL::timestamp with time zone) RETURNS SETOF api.checkin_outcome
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog'
    AS $$
declare
  caller uuid := auth.uid();
begin
  if caller is null then
    raise exception 'not signed in' using errcode = 'PT401';
  end if;
  return query select * from private.check_in_user(caller, event_id, venue_node_id, hat_id, location_id, visibility, device_checked_in_at);
end;
$$;

COMMENT ON FUNCTION private.check_in(event_id uuid, venue_node_id uuid, hat_id uuid, location_id uuid, visibility text, device_checked_in_at timestamp with time zone) IS 'Checks the caller in to an event or a venue (device_checked_in_at: the phone''s time, already checked); idempotent: returns the current check-in with created = false.';
GRANT EXECUTE ON FUNCTION private.check_in(event_id uuid, venue_node_id uuid, hat_id uuid, location_id uuid, visibility text, device_checked_in_at timestamp with time zone) TO authenticated;

CREATE FUNCTION private.check_in_user(user_id uuid, event_id uuid, venue_node_id uuid, hat_id uuid, location_id uuid, visibility text, device_checked_in_at timestamp with time zone DEFAULT NULL::timestamp with time zone) RETURNS SETOF api.checkin_outcome
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog'
    AS $$
declare
  checkin_row app.checkins;
begin
  loop
    insert into app.checkins as c (user_id, event_id, venue_node_id, hat_id, location_id, visibility, device_checked_in_at)
      values (check_in_user.user_id, check_in_user.event_id, check_in_user.venue_node_id, check_in_user.hat_id,
              check_in_user.location_id, coalesce(check_in_user.visibility, 'anonymous'), check_in_user.device_checked_in_at)
      on conflict do nothing
      returning c.* into checkin_row;
    if checkin_row.id is not null then
      return query select true, private.checkin_json(checkin_row);
      return;
    end if;
    select c.* into checkin_row
      from app.checkins c
     where c.user_id = check_in_user.user_id
       and c.checked_out_at is null
       and c.event_id is not distinct from check_in_user.event_id
       and c.venue_node_id is not distinct from check_in_user.venue_node_id;
    if checkin_row.id is not null then
      return query select false, private.checkin_json(checkin_row);
      return;
    end if;
    -- Checked out between the two statements: try again.
  end loop;
end;
$$;

COMMENT ON FUNCTION private.check_in_user(user_id uuid, event_id uuid, venue_node_id uuid, hat_id uuid, location_id uuid, visibility text, device_checked_in_at timestamp with time zone) IS 'Checks a user in to an event or a venue; idempotent: returns the current check-in with created = false. Runs with the caller''s rights: for a request role, row-level security admits only the caller''s own user_id.';
GRANT EXECUTE ON FUNCTION private.check_in_user(user_id uuid, event_id uuid, venue_node_id uuid, hat_id uuid, location_id uuid, visibility text, device_checked_in_at timestamp with time zone) TO authenticated;

CREATE FUNCTION private.checkin_device_time(event app.events, device_time timestamp with time zone, as_of timestamp with time zone DEFAULT now()) RETURNS timestamp with time zone
    LANGUAGE plpgsql STABLE
    SET search_path TO 'pg_catalog'
    AS $$
begin
  -- An offline check-in: the phone's clock, trusted within bounds. At most 5
  -- minutes ahead of the server (clock skew), at most 24 hours behind it (a
  -- day offline), and inside the event's check-in window (the venue window:
  -- 2 hours before its date to 2 hours after its effective end).
  if device_time is null then
    return null;
  end if;
  if device_time > as_of + interval '5 minutes' then
    raise exception 'checked_in_at is in the future (more than 5 minutes ahead of the server)'
      using errcode = 'PT422', hint = 'checkin_time_in_future';
  end if;
  if device_time < as_of - interval '24 hours' then
    raise exception 'checked_in_at is more than 24 hours old' using errcode = 'PT422', hint = 'checkin_time_too_old';
  end if;
  if device_time < event.starts_at - interval '2 hours'
     or device_time > private.event_effective_end(event.starts_at, event.ends_at) + interval '2 hours' then
    raise exception 'checked_in_at is outside the event''s check-in window (2 hours before its start to 2 hours after its end)'
      using errcode = 'PT422', hint = 'checkin_time_outside_event';
  end if;
  return device_time;
end;
$$;

COMMENT ON FUNCTION private.checkin_device_time(event app.events, device_time timestamp with time zone, as_of timestamp with time zone) IS 'The phone''s time of an offline event check-in, checked: null stays null; PT422 checkin_time_in_future past as_of + 5 minutes, checkin_time_too_old before as_of - 24 hours, checkin_time_outside_event outside date - 2h .. effective end + 2h.';
GRANT EXECUTE ON FUNCTION private.checkin_device_time(event app.events, device_time timestamp with time zone, as_of timestamp with time zone) TO authenticated;

CREATE FUNCTION private.checkin_json(c app.checkins) RETURNS jsonb
    LANGUAGE sql STABLE
    SET search_path TO 'pg_catalog'
    AS $$
    select jsonb_build_object(
      'id', c.id,
      'type', case when c.event_id is not null then 'event' else 'venue' end,
      'event_id', c.event_id,
      'venue_id', c.venue_node_id,
      'hat_id', c.hat_id,
      'location_id', c.location_id,
      'visibility', c.visibility,
      'checked_in_at', app.iso(c.checked_in_at),
      'checked_out_at', app.iso(c.checked_out_at),
      'device_checked_in_at', app.iso(c.device_checked_in_at)
    )
  $$;

COMMENT ON FUNCTION private.checkin_json(c app.checkins) IS 'The check-in object of the check-in endpoints.';
GRANT EXECUTE ON FUNCTION private.checkin_json(c app.checkins) TO authenticated;

CREATE FUNCTION private.event_status(starts_at timestamp with time zone, ends_at timestamp with time zone, as_of timestamp with time zone DEFAULT now()) RETURNS text
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    SET search_path TO 'pg_catalog'
    AS $$
    select case
             when as_of < starts_at then 'upcoming'
             when as_of <= private.event_effective_end(starts_at, ends_at) then 'ongoing'
             else 'past'
           end
  $$;

COMMENT ON FUNCTION private.event_status(starts_at timestamp with time zone, ends_at timestamp with time zone, as_of timestamp with time zone) IS 'Event status at a moment: upcoming before the date, ongoing until the effective end (inclusive), then past.';
GRANT EXECUTE ON FUNCTION private.event_status(starts_at timestamp with time zone, ends_at timestamp with time zone, as_of timestamp with time zone) TO authenticated;

CREATE FUNCTION private.event_object(e app.events, community_node_id uuid, caller_manages boolean, public_url text) RETURNS jsonb
    LANGUAGE sql STABLE
    AS $$
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
  $$;

COMMENT ON FUNCTION private.event_object(e app.events, community_node_id uuid, caller_manages boolean, public_url text) IS 'The Event object (docs/api.md, Resources; components.schemas.Event of the OpenAPI document) from the event, its community''s node id, whether the caller manages that community, and PUBLIC_URL.';
GRANT EXECUTE ON FUNCTION private.event_object(e app.events, community_node_id uuid, caller_manages boolean, public_url text) TO authenticated;

CREATE FUNCTION private.my_upcoming_events() RETURNS TABLE(event app.events, community_node_id uuid, manages boolean)
    LANGUAGE sql STABLE
    AS $$
    select u.event, u.community_node_id, u.manages from private.upcoming_events_of(app.my_node_id()) u
  $$;
COMMENT ON FUNCTION private.my_upcoming_events() IS 'The signed-in caller''s upcoming events (their communities'' events whose effective end is not past), soonest first, at most 100, with the community''s node id and whether the caller manages it. The one definition of the upcoming list: api.events_upcoming_page and the stream snapshot read it.';
GRANT EXECUTE ON FUNCTION private.my_upcoming_events() TO authenticated;

CREATE FUNCTION private.upcoming_events_of(member_node uuid) RETURNS TABLE(event app.events, community_node_id uuid, manages boolean)
    LANGUAGE sql STABLE
    AS $$
    select e, c.node_id, m.role operator(pg_catalog.=) 'manager'
      from app.community_members m
      join app.events e on e.community_id operator(pg_catalog.=) m.community_id
      join app.communities c on c.id operator(pg_catalog.=) e.community_id
     where m.member_node_id operator(pg_catalog.=) member_node
       and private.event_effective_end(e.starts_at, e.ends_at) operator(pg_catalog.>=) pg_catalog.now()
     order by e.starts_at, e.id
     limit 100
  $$;

COMMENT ON FUNCTION private.upcoming_events_of(member_node uuid) IS 'The upcoming list of the member with this node id: their communities'' events whose effective end is not past, soonest first, at most 100, with the community''s node id and whether they manage it. The one definition of the upcoming list (my_upcoming_events reads it for the caller; event_streams_open for each view).';
GRANT EXECUTE ON FUNCTION private.upcoming_events_of(member_node uuid) TO authenticated;

CREATE FUNCTION private.find_event(event_ref uuid) RETURNS app.events
    LANGUAGE sql STABLE
    SET search_path TO 'pg_catalog'
    AS $$
    select e.* from app.events e where e.id = event_ref or e.node_id = event_ref limit 1
  $$;

COMMENT ON FUNCTION private.find_event(event_ref uuid) IS 'The event whose id or node id is event_ref (visible to the caller), or null.';
GRANT EXECUTE ON FUNCTION private.find_event(event_ref uuid) TO authenticated;

CREATE FUNCTION private.event_json(e app.events, public_url text) RETURNS jsonb
    LANGUAGE plpgsql STABLE SECURITY DEFINER
    SET search_path TO 'pg_catalog'
    AS $$
declare
  community_node uuid;
begin
  select c.node_id into community_node from app.communities c where c.id = e.community_id;
  return private.event_object(e, community_node, exists (
    select from app.community_members m
     where m.community_id = e.community_id
       and m.role = 'manager'
       and m.member_node_id = app.my_node_id()), public_url);
end;
$$;

COMMENT ON FUNCTION private.event_json(e app.events, public_url text) IS 'The Event object (docs/api.md, Resources; components.schemas.Event of the OpenAPI document) as the signed-in caller may see it; public_url is PUBLIC_URL.';
GRANT EXECUTE ON FUNCTION private.event_json(e app.events, public_url text) TO authenticated;

CREATE FUNCTION private.community_events_public(community_id uuid) RETURNS boolean
    LANGUAGE sql STABLE
    AS $$
    select exists (select from app.communities c
                    where c.id operator(pg_catalog.=) community_events_public.community_id and not c.is_draft)
  $$;

COMMENT ON FUNCTION private.community_events_public(community_id uuid) IS 'Whether a community''s events may be served without a credential (event page, its .ics, deep links, web check-in form, venue link, community calendar): it exists and is not a draft.';


CREATE FUNCTION private.event_page_json(title text, description text, starts_at timestamp with time zone, ends_at timestamp with time zone, timezone text, image_path text, event_url text, shortlink text, location_text text, venue app.venues, community app.communities, base_url text, cancelled boolean) RETURNS jsonb
    LANGUAGE sql STABLE
    SET search_path TO 'pg_catalog'
    AS $$
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
  $$;

COMMENT ON FUNCTION private.event_page_json(title text, description text, starts_at timestamp with time zone, ends_at timestamp with time zone, timezone text, image_path text, event_url text, shortlink text, location_text text, venue app.venues, community app.communities, base_url text, cancelled boolean) IS 'The answer of api.event_page for a live or a deleted (cancelled) event.';


CREATE FUNCTION private.event_location_text(venue_name text, venue_address text, event_location text) RETURNS text
    LANGUAGE sql IMMUTABLE
    AS $$
    select coalesce(venue_name operator(pg_catalog.||) coalesce(', ' operator(pg_catalog.||) nullif(pg_catalog.btrim(venue_address), ''), ''),
                    event_location)
  $$;

COMMENT ON FUNCTION private.event_location_text(venue_name text, venue_address text, event_location text) IS 'Where an event takes place, as calendars and previews show it: "venue name, address" when it has a venue, else its location text.';


CREATE FUNCTION private.event_checkin_location(event_node_id uuid, user_agent text, app_scheme text) RETURNS text
    LANGUAGE sql IMMUTABLE
    SET search_path TO 'pg_catalog'
    AS $$
    select case
             when coalesce(user_agent, '') ~ '(iPhone|iPad|iPod|Android)'
               then app_scheme || '://checkin/event/' || event_node_id
             else '/checkin/event/' || event_node_id
           end
  $$;

COMMENT ON FUNCTION private.event_checkin_location(event_node_id uuid, user_agent text, app_scheme text) IS 'Target of an event check-in link: APP_SCHEME://checkin/event/{node} for iOS/Android user agents, else the web form.';


CREATE FUNCTION private.tg_events__timezone() RETURNS trigger
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog'
    AS $$
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
$$;
COMMENT ON FUNCTION private.tg_events__timezone() IS 'Trigger: an event''s time zone is checked (PT422 invalid_timezone) and spelled as pg_timezone_names does; written as null (made without one, or removed), it is its venue''s, else its community''s, else DEFAULT_TIMEZONE; moved to a venue that has a zone, with no zone given, it takes that venue''s.';


CREATE FUNCTION private.default_timezone() RETURNS text
    LANGUAGE sql STABLE
    SET search_path TO 'pg_catalog'
    AS $$
    select coalesce((select s.value from private.service_settings s where s.name = 'default_timezone'), 'UTC')
  $$;
COMMENT ON FUNCTION private.default_timezone() IS 'DEFAULT_TIMEZONE as the gateway last recorded it (UTC before any gateway started): the time zone of an event made without one, at a venue and in a community that have none.';


CREATE FUNCTION private.time_zone_name(zone text) RETURNS text
    LANGUAGE plpgsql STABLE SECURITY DEFINER
    SET search_path TO 'pg_catalog'
    AS $$
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
$$;

COMMENT ON FUNCTION private.time_zone_name(zone text) IS 'The time zone as pg_timezone_names spells it (matched without regard to case; null for null); PT422 invalid_timezone for a name it does not have.';


CREATE FUNCTION private.tg_events__storage_purge() RETURNS trigger
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog'
    AS $$
begin
  perform private.storage_purge_enqueue('event', old.id);
  return null;
end;
$$;
COMMENT ON FUNCTION private.tg_events__storage_purge() IS 'Trigger: an event deleted, the objects of its storage folder are deleted by a storage_purge job.';


CREATE FUNCTION private.tg_checkins__check_hat() RETURNS trigger
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog'
    AS $$
begin
  if new.hat_id is not null and not private.hat_belongs_to(new.hat_id, new.user_id) then
    raise exception 'hat_id is not one of your hats' using errcode = 'PT422', hint = 'invalid_hat';
  end if;
  return new;
end;
$$;
COMMENT ON FUNCTION private.tg_checkins__check_hat() IS 'Trigger: a check-in''s hat must be one of the user''s hats (PT422).';


CREATE FUNCTION private.event_readable(community_id uuid) RETURNS boolean
    LANGUAGE sql STABLE
    AS $$
    -- Any signed-in user may read every event (GET /api/mobile/events/{id});
    -- the policy below applies this to the authenticated role.
    select true
  $$;

COMMENT ON FUNCTION private.event_readable(community_id uuid) IS 'Whether the signed-in caller may read an event of the community (row-level security of app.events and the postgres_changes feed).';
GRANT EXECUTE ON FUNCTION private.event_readable(community_id uuid) TO authenticated;

CREATE FUNCTION private.generate_shortlink() RETURNS text
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog'
    AS $$
declare
  alphabet constant text := 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789';
  candidate text;
  random_bytes bytea;
begin
  loop
    random_bytes := extensions.gen_random_bytes(8);
    candidate := '';
    for i in 0..7 loop
      candidate := candidate || substr(alphabet, 1 + (get_byte(random_bytes, i) % 62), 1);
    end loop;
    exit when not exists (select from app.events where shortlink = candidate);
  end loop;
  return candidate;
end;
$$;
COMMENT ON FUNCTION private.generate_shortlink() IS 'A fresh, unused 8-character event shortlink.';


CREATE FUNCTION private.time_zones_refresh() RETURNS integer
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog'
    AS $$
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
$$;
COMMENT ON FUNCTION private.time_zones_refresh() IS 'Adds the names of pg_timezone_names that private.time_zones lacks, but the posix/ and right/ variants and Factory (the gateway runs it at start; reading the view takes 30-60 ms); returns how many.';

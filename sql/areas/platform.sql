-- =============================================================================
-- Platform integration: events, attendees and check-ins from event platforms; forms
-- =============================================================================
-- An external event platform pushes events, registers attendees and checks
-- them in. Who may: a manager of the event's community (access token or
-- personal API token), or a community-scoped API token of that community whose
-- owner is still its manager; everyone else PT403 (private.platform_authorize,
-- the rule in one place).
--
-- Event creation is idempotent on (external_platform, external_id): an advisory
-- lock serialises identical requests and a unique constraint is the final
-- guarantee. A venue is reused (same name and address, case-insensitive; else
-- the same coordinates) or made. An attendee is an existing account or a new
-- one without a password (registered for the event only); check-ins go through
-- the same function as the mobile app's. api.form_submit keeps any JSON object
-- of at most 64 KB for operators (admin.forms_list).
--
-- Code: gateway/routes/platform.ts
-- pgTAP: supabase/tests/platform.test.sql
--
-- The whole source of this area, after the areas before it in
-- sql/areas/areas.json: types, tables, indexes, triggers, policies, the api
-- functions, the helpers. To change it: edit it here, then
-- `npm run db -- areas --diff` writes the migration (docs/dba.md).
-- =============================================================================

-- =============================================================================
-- Tables
-- =============================================================================

CREATE TABLE app.form_submissions (
    id bigint GENERATED ALWAYS AS IDENTITY NOT NULL,
    payload jsonb NOT NULL,
    size_bytes integer NOT NULL,
    received_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT form_submissions_payload_check CHECK ((jsonb_typeof(payload) = 'object'::text)),
    CONSTRAINT form_submissions_size_bytes_check CHECK (((size_bytes >= 2) AND (size_bytes <= 65536))),
    CONSTRAINT form_submissions_pkey PRIMARY KEY (id)
);
COMMENT ON TABLE app.form_submissions IS 'Objects posted to POST /api/v1/forms (no credential), with their size and time of arrival. Read with admin.forms_list.';
ALTER TABLE app.form_submissions ENABLE ROW LEVEL SECURITY;

-- =============================================================================
-- Indexes
-- =============================================================================

CREATE INDEX form_submissions_received_idx ON app.form_submissions USING btree (received_at DESC, id DESC);

-- =============================================================================
-- Functions of api: what the gateway and the MCP server call, as the request's role
-- =============================================================================

CREATE FUNCTION api.form_submit(payload text) RETURNS bigint
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog'
    AS $$
declare
  parsed jsonb;
  new_id bigint;
begin
  if octet_length(payload) > 65536 then
    raise exception 'a form may be at most 64 KB' using errcode = 'PT413', hint = 'payload_too_large';
  end if;
  begin
    parsed := payload::jsonb;
  exception when invalid_text_representation then
    parsed := null;
  end;
  if parsed is null or jsonb_typeof(parsed) <> 'object' then
    raise exception 'the form must be a JSON object' using errcode = 'PT400', hint = 'bad_request';
  end if;
  insert into app.form_submissions as f (payload, size_bytes)
    values (parsed, octet_length(payload))
    returning f.id into new_id;
  return new_id;
end;
$$;

COMMENT ON FUNCTION api.form_submit(payload text) IS 'POST /api/v1/forms (no credential): stores a JSON object of at most 64 KB. PT400 not an object; PT413 too large.';
GRANT EXECUTE ON FUNCTION api.form_submit(payload text) TO anon;
GRANT EXECUTE ON FUNCTION api.form_submit(payload text) TO authenticated;

CREATE FUNCTION api.platform_event_update(event_ref uuid, external_platform text, external_id text, patch jsonb) RETURNS jsonb
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog'
    AS $$
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
$$;

COMMENT ON FUNCTION api.platform_event_update(event_ref uuid, external_platform text, external_id text, patch jsonb) IS 'PATCH /api/v1/platform/events/{event_id} (event id or node id) and PATCH /api/v1/platform/events/external/{external_platform}/{external_id} (event_ref null): changes the keys given (title, description, date, end_time, timezone, external_url, image_url, venue; null clears a nullable one, timezone null takes the venue''s or community''s again) in one UPDATE, so SEQUENCE, the feed and event.updated follow once. PT404 event_not_found; PT403 as the platform endpoints; PT422 validation_error, invalid_timezone.';
GRANT EXECUTE ON FUNCTION api.platform_event_update(event_ref uuid, external_platform text, external_id text, patch jsonb) TO authenticated;

CREATE FUNCTION api.platform_event_delete(event_ref uuid, external_platform text DEFAULT NULL::text, external_id text DEFAULT NULL::text) RETURNS void
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog'
    AS $$
declare
  target app.events := private.platform_event_locked(event_ref, external_platform, external_id);
begin
  -- The triggers do the rest: the tombstone (calendars: STATUS:CANCELLED;
  -- the page: EventCancelled), the change log (the feed), event.deleted.
  -- The event's node stays: ids are not reused.
  delete from app.events e where e.id = target.id;
end;
$$;

COMMENT ON FUNCTION api.platform_event_delete(event_ref uuid, external_platform text, external_id text) IS 'DELETE /api/v1/platform/events/{event_id} (event id or node id) and DELETE /api/v1/platform/events/external/{external_platform}/{external_id} (event_ref null): deletes (cancels) the event: calendars list it as STATUS:CANCELLED and its page shows it cancelled while its tombstone is kept, the feed sends a delete, webhooks event.deleted. PT404 event_not_found (also when deleted already); PT403 as the platform endpoints.';
GRANT EXECUTE ON FUNCTION api.platform_event_delete(event_ref uuid, external_platform text, external_id text) TO authenticated;

CREATE FUNCTION api.platform_event_create(community_id uuid, external_platform text, external_id text, title text, description text, starts_at timestamp with time zone, ends_at timestamp with time zone DEFAULT NULL::timestamp with time zone, external_url text DEFAULT NULL::text, image_url text DEFAULT NULL::text, venue_name text DEFAULT NULL::text, venue_address text DEFAULT NULL::text, venue_latitude double precision DEFAULT NULL::double precision, venue_longitude double precision DEFAULT NULL::double precision, timezone text DEFAULT NULL::text) RETURNS jsonb
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog'
    AS $$
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
$$;

COMMENT ON FUNCTION api.platform_event_create(community_id uuid, external_platform text, external_id text, title text, description text, starts_at timestamp with time zone, ends_at timestamp with time zone, external_url text, image_url text, venue_name text, venue_address text, venue_latitude double precision, venue_longitude double precision, timezone text) IS 'POST /api/v1/platform/events: creates the event (created true) or returns the one with the same external_platform and external_id (created false), which a repeat never changes: not_applied names the values given that differ from the stored ones (PATCH changes them). Reuses or creates the venue; timezone (an IANA name) defaults to the venue''s, then the community''s. PT403 not a manager of the community (or a token of another community); PT422 invalid input, invalid_timezone.';
GRANT EXECUTE ON FUNCTION api.platform_event_create(community_id uuid, external_platform text, external_id text, title text, description text, starts_at timestamp with time zone, ends_at timestamp with time zone, external_url text, image_url text, venue_name text, venue_address text, venue_latitude double precision, venue_longitude double precision, timezone text) TO authenticated;

CREATE FUNCTION api.platform_attendee_register(event_node_id uuid, email text, name text DEFAULT NULL::text) RETURNS jsonb
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog'
    AS $_$
declare
  found_event app.events := private.platform_event(event_node_id);
  normalised_email text := lower(btrim(platform_attendee_register.email));
  attendee uuid;
  attendee_node uuid;
  user_created boolean := false;
  community_joined boolean := false;
  registered boolean;
  named boolean;
begin
  perform private.platform_authorize(found_event.community_id);
  if normalised_email is null or normalised_email !~ '^[^@\s]+@[^@\s]+$' or length(normalised_email) > 320 then
    raise exception 'email must be an e-mail address' using errcode = 'PT422', hint = 'invalid_email';
  end if;

  -- Racing registrations of one person wait here for each other.
  perform pg_advisory_xact_lock(hashtextextended('identity.users:' || normalised_email, 0));
  select u.id into attendee from identity.users u where u.email = normalised_email;
  if attendee is null then
    begin
      attendee := private.create_account(normalised_email, null, name);
      user_created := true;
    exception when sqlstate 'PT409' then
      -- Registered through another path (e.g. the register endpoint) meanwhile.
      select u.id into attendee from identity.users u where u.email = normalised_email;
    end;
  end if;

  if user_created then
    -- An account made here joins the event's community (spec); an existing
    -- one is left where its owner put it.
    select p.node_id into attendee_node from app.profiles p where p.id = attendee;
    if attendee_node is null then
      raise exception 'this user has no node and cannot join a community' using errcode = 'PT422', hint = 'user_has_no_node';
    end if;
    with joined as (
      insert into app.community_members as m (community_id, member_node_id)
        values (found_event.community_id, attendee_node)
        on conflict on constraint community_members_pkey do nothing
        returning 1)
    select exists (select from joined) into community_joined;
  end if;
  with added as (
    insert into app.event_attendees as a (event_id, user_id, external_platform, account_created, community_joined)
      values (found_event.id, attendee, found_event.external_platform, user_created, community_joined)
      on conflict on constraint event_attendees_pkey do nothing
      returning 1)
  select exists (select from added) into registered;
  if not registered then
    -- A repeat: the first registration's answer.
    select a.account_created, a.community_joined into user_created, community_joined
      from app.event_attendees a
     where a.event_id = found_event.id and a.user_id = attendee;
  end if;
  -- The account is named when a registration of this community made it.
  named := user_created or exists (
    select from app.event_attendees a
      join app.events e on e.id = a.event_id
     where a.user_id = attendee and a.account_created and e.community_id = found_event.community_id);

  return jsonb_build_object(
    'created', registered,
    'data', jsonb_build_object('user_id', case when named then attendee end, 'email', normalised_email,
                               'user_created', user_created, 'community_joined', community_joined));
end;
$_$;

COMMENT ON FUNCTION api.platform_attendee_register(event_node_id uuid, email text, name text) IS 'POST /api/v1/platform/events/{event_node_id}/attendees: registers the e-mail for the event (created false when already registered). An unknown e-mail gets an account (no password; name defaults to the part of the e-mail before @), joined to the event''s community, and its user_id is returned; a repeat of a registration answers as the first did (app.event_attendees keeps account_created and community_joined). An account a registration of this community made is named; any other existing account is registered for the event only and its user_id is null. PT404 unknown event; PT403; PT422.';
GRANT EXECUTE ON FUNCTION api.platform_attendee_register(event_node_id uuid, email text, name text) TO authenticated;

CREATE FUNCTION api.platform_checkin(event_node_id uuid, email text) RETURNS jsonb
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog'
    AS $$
declare
  found_event app.events := private.platform_event(event_node_id);
  attendee uuid;
  outcome api.checkin_outcome;
begin
  perform private.platform_authorize(found_event.community_id);
  -- Registered for the event, or a member of its community; anyone else is
  -- the same 404 as an unknown e-mail.
  select u.id into attendee
    from identity.users u
    join app.profiles p on p.id = u.id
   where u.email = lower(btrim(platform_checkin.email))
     and (exists (select from app.event_attendees a where a.event_id = found_event.id and a.user_id = u.id)
          or exists (select from app.community_members m
                      where m.community_id = found_event.community_id and m.member_node_id = p.node_id));
  if attendee is null then
    raise exception 'user not found' using errcode = 'PT404', hint = 'user_not_found';
  end if;
  select * into outcome from private.check_in_user(attendee, found_event.id, null, null, null, null);
  return jsonb_build_object(
    'created', outcome.created,
    'data', jsonb_build_object('checkin_id', outcome.checkin ->> 'id',
                               'checked_in_at', outcome.checkin ->> 'checked_in_at',
                               'already_checked_in', not outcome.created));
end;
$$;

COMMENT ON FUNCTION api.platform_checkin(event_node_id uuid, email text) IS 'POST /api/v1/platform/events/{event_node_id}/checkins: checks in a user registered for the event or a member of its community (created), or returns the current check-in (already_checked_in). PT404 unknown event; PT404 user_not_found for an unknown e-mail and for anyone neither registered nor a member (the same answer); PT403.';
GRANT EXECUTE ON FUNCTION api.platform_checkin(event_node_id uuid, email text) TO authenticated;

-- =============================================================================
-- Helpers (private, app, identity): internal helpers and trigger functions; request roles run only those granted here
-- =============================================================================

CREATE FUNCTION private.platform_event_locked(event_ref uuid, external_platform text, external_id text) RETURNS app.events
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog'
    AS $$
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
$$;

COMMENT ON FUNCTION private.platform_event_locked(event_ref uuid, external_platform text, external_id text) IS 'The event with this id or node id (else the one with this external_platform and external_id), locked for the change, when the caller may manage its community: PT404 event_not_found, then PT403 as private.platform_authorize.';


CREATE FUNCTION private.platform_authorize(community_id uuid) RETURNS void
    LANGUAGE plpgsql STABLE SECURITY DEFINER
    SET search_path TO 'pg_catalog'
    AS $$
declare
  caller uuid := auth.uid();
  token_community uuid := nullif(auth.jwt() ->> 'token_community_id', '')::uuid;
begin
  if caller is null then
    raise exception 'not signed in' using errcode = 'PT401', hint = 'unauthorized';
  end if;
  if token_community is not null and token_community is distinct from platform_authorize.community_id then
    raise exception 'this API token is scoped to another community' using errcode = 'PT403', hint = 'community_scope_violation';
  end if;
  if platform_authorize.community_id is null or not private.is_community_manager(platform_authorize.community_id, caller) then
    raise exception 'not authorized to manage this community' using errcode = 'PT403', hint = 'not_community_manager';
  end if;
end;
$$;

COMMENT ON FUNCTION private.platform_authorize(community_id uuid) IS 'PT403 unless the caller manages the community (not_community_manager) and, for a community-scoped API token, the token is of that community (community_scope_violation).';
GRANT EXECUTE ON FUNCTION private.platform_authorize(community_id uuid) TO authenticated;

CREATE FUNCTION private.platform_patch_text(patch jsonb, key text, nullable boolean) RETURNS text
    LANGUAGE plpgsql IMMUTABLE
    SET search_path TO 'pg_catalog'
    AS $$
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
$$;

COMMENT ON FUNCTION private.platform_patch_text(patch jsonb, key text, nullable boolean) IS 'The string at key of a PATCH body (null when absent or null and nullable); PT422 validation_error for anything else.';


CREATE FUNCTION private.platform_patch_time(patch jsonb, key text, nullable boolean) RETURNS timestamp with time zone
    LANGUAGE plpgsql STABLE
    SET search_path TO 'pg_catalog'
    AS $_$
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
$_$;

COMMENT ON FUNCTION private.platform_patch_time(patch jsonb, key text, nullable boolean) IS 'The instant at key of a PATCH body (an ISO 8601 date-time with Z or an offset; null when absent or null and nullable); PT422 validation_error for anything else.';


CREATE FUNCTION private.platform_event_check(title text, starts_at timestamp with time zone, ends_at timestamp with time zone) RETURNS void
    LANGUAGE plpgsql IMMUTABLE
    SET search_path TO 'pg_catalog'
    AS $$
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
$$;

COMMENT ON FUNCTION private.platform_event_check(title text, starts_at timestamp with time zone, ends_at timestamp with time zone) IS 'PT422 validation_error for a title, date and end_time an event cannot have (the event as created, or as a PATCH leaves it).';


CREATE FUNCTION private.platform_venue(name text, address text, latitude double precision, longitude double precision, zone text DEFAULT NULL::text) RETURNS app.venues
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog'
    AS $$
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
$$;

COMMENT ON FUNCTION private.platform_venue(name text, address text, latitude double precision, longitude double precision, zone text) IS 'Reuses the venue with the same name and address (case-insensitive), else the same coordinates, else creates one; a venue without a zone takes zone (the event''s, as given) when there is one.';


CREATE FUNCTION private.platform_patch_number(patch jsonb, key text) RETURNS double precision
    LANGUAGE plpgsql IMMUTABLE
    SET search_path TO 'pg_catalog'
    AS $$
begin
  if jsonb_typeof(patch -> key) is null or jsonb_typeof(patch -> key) = 'null' then
    return null;
  end if;
  if jsonb_typeof(patch -> key) <> 'number' then
    raise exception '% must be a number', key using errcode = 'PT422', hint = 'validation_error';
  end if;
  return (patch ->> key)::double precision;
end;
$$;

COMMENT ON FUNCTION private.platform_patch_number(patch jsonb, key text) IS 'The number at key of a PATCH body (null when absent or null); PT422 validation_error for anything else.';


CREATE FUNCTION private.platform_event_json(e app.events, created boolean) RETURNS jsonb
    LANGUAGE sql STABLE
    SET search_path TO 'pg_catalog'
    AS $$
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
  $$;

COMMENT ON FUNCTION private.platform_event_json(e app.events, created boolean) IS 'The `data` of the platform event endpoints: created, event_id, event_node_id, title, date, end_time, timezone, sequence (the iCalendar SEQUENCE), venue (location_id, name, venue_node_id) or null.';


CREATE FUNCTION private.platform_event(event_ref uuid) RETURNS app.events
    LANGUAGE plpgsql STABLE SECURITY DEFINER
    SET search_path TO 'pg_catalog'
    AS $$
declare
  found_event app.events;
begin
  select e.* into found_event from app.events e where e.node_id = event_ref or e.id = event_ref limit 1;
  if found_event.id is null then
    raise exception 'event not found' using errcode = 'PT404', hint = 'event_not_found';
  end if;
  return found_event;
end;
$$;

COMMENT ON FUNCTION private.platform_event(event_ref uuid) IS 'The event with this node id (or id); PT404 when there is none.';

--! Previous: sha1:c395ffe05d4342f242b71f183600cf846d41e6e1
--! Hash: sha1:754be32162a7595118e26368ed39b9d5f13537cd
--! Message: platform

--! split: 110-platform.sql
--------------------------------------------------------------------------------
-- Platform integration (spec section 4 "Platform integration"; DESIGN.md
-- "Tokens, docs and platform integration") and the public forms endpoint
--
-- An external event platform pushes events, registers attendees and checks
-- them in. Who may: a manager of the event's community, with an access token
-- or a personal API token (which acts as its owner), or a community-scoped
-- API token of that community (its owner still a manager of it). Everyone
-- else: PT403. private.platform_authorize() is that rule, in one place.
--
--   api.platform_event_create      idempotent on (external_platform,
--                                  external_id): a transaction-level advisory
--                                  lock on the pair serialises identical
--                                  requests, and a unique constraint is the
--                                  final guarantee. A venue is reused (same
--                                  name and address, case-insensitive; else
--                                  same coordinates) or created.
--   api.platform_attendee_register creates the user if needed (no password:
--                                  they set one through the set-password
--                                  page), joins them to the event's community
--                                  and records the registration; an advisory
--                                  lock on the e-mail serialises racing
--                                  requests for one person.
--   api.platform_checkin           checks an existing user in, through the
--                                  same check-in function as the mobile API.
--   api.form_submit                stores any JSON object (at most 64 KB) for
--                                  operators (admin.forms_list).
--
-- Events made here go through app.events like any other, so the upcoming
-- list, the change log and the realtime feed show them.
--------------------------------------------------------------------------------

drop function if exists api.platform_event_create(uuid, text, text, text, text, timestamptz, timestamptz, text, text,
                                                  text, text, double precision, double precision);
drop function if exists api.platform_attendee_register(uuid, text, text);
drop function if exists api.platform_checkin(uuid, text);
drop function if exists api.form_submit(text);
drop function if exists admin.forms_list(integer, timestamptz);
drop function if exists private.platform_authorize(uuid);
drop function if exists private.platform_event_json(app.events, boolean);
drop function if exists private.platform_venue(text, text, double precision, double precision);
drop function if exists private.platform_event(uuid);

--------------------------------------------------------------------------------
-- Accounts without a password (platform attendees; agent-created members)
--
-- private.create_account(email, null, name) makes the user, profile and node
-- with no password hash: nobody can sign in until a password is set. A given
-- password must still be at least 8 characters. A null or empty name is
-- derived from the e-mail address, here and nowhere else.
--------------------------------------------------------------------------------

create or replace function private.create_account(email text, password text, name text default null)
  returns uuid
  language plpgsql volatile
  set search_path = pg_catalog
  as $$
#variable_conflict use_column
declare
  normalised_email text := lower(btrim(create_account.email));
  new_user_id uuid;
  new_node_id uuid;
begin
  if normalised_email is null or normalised_email !~ '^[^@\s]+@[^@\s]+$' or length(normalised_email) > 320 then
    raise exception 'invalid email address' using errcode = 'PT400', hint = 'invalid_email';
  end if;
  if create_account.password is not null and length(create_account.password) < 8 then
    raise exception 'password must be at least 8 characters' using errcode = 'PT400', hint = 'weak_password';
  end if;

  insert into identity.users (email, password_hash)
    values (normalised_email,
            case when create_account.password is not null then identity.hash_password(create_account.password) end)
    on conflict (email) do nothing
    returning id into new_user_id;
  if new_user_id is null then
    raise exception 'an account with this email already exists' using errcode = 'PT409', hint = 'email_taken';
  end if;

  insert into app.nodes (kind) values ('user') returning id into new_node_id;
  insert into app.profiles (id, name, node_id)
    values (new_user_id, coalesce(nullif(btrim(create_account.name), ''), split_part(normalised_email, '@', 1)), new_node_id);
  return new_user_id;
end;
$$;
comment on function private.create_account(text, text, text) is
  'Creates a user (hashed password, or none when password is null: they set one later), their node and profile; '
  'a null name is derived from the e-mail. PT409 when the e-mail is taken.';

--------------------------------------------------------------------------------
-- Check-ins for a given user: private.check_in (the caller, mobile API) and
-- the platform check-in share one implementation.
--------------------------------------------------------------------------------

create or replace function private.check_in_user(user_id uuid, event_id uuid, venue_node_id uuid, hat_id uuid,
                                                 location_id uuid, visibility text)
  returns setof api.checkin_outcome
  language plpgsql volatile
  set search_path = pg_catalog
  as $$
declare
  checkin_row app.checkins;
begin
  loop
    insert into app.checkins as c (user_id, event_id, venue_node_id, hat_id, location_id, visibility)
      values (check_in_user.user_id, check_in_user.event_id, check_in_user.venue_node_id, check_in_user.hat_id,
              check_in_user.location_id, coalesce(check_in_user.visibility, 'anonymous'))
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
comment on function private.check_in_user(uuid, uuid, uuid, uuid, uuid, text) is
  'Checks a user in to an event or a venue; idempotent: returns the current check-in with created = false. '
  'Runs with the caller''s rights: for a request role, row-level security admits only the caller''s own user_id.';
grant execute on function private.check_in_user(uuid, uuid, uuid, uuid, uuid, text) to authenticated;

create or replace function private.check_in(event_id uuid, venue_node_id uuid, hat_id uuid, location_id uuid, visibility text)
  returns setof api.checkin_outcome
  language plpgsql volatile
  set search_path = pg_catalog
  as $$
declare
  caller uuid := auth.uid();
begin
  if caller is null then
    raise exception 'not signed in' using errcode = 'PT401';
  end if;
  return query select * from private.check_in_user(caller, event_id, venue_node_id, hat_id, location_id, visibility);
end;
$$;
comment on function private.check_in(uuid, uuid, uuid, uuid, text) is
  'Checks the caller in to an event or a venue; idempotent: returns the current check-in with created = false.';

--------------------------------------------------------------------------------
-- Tables: external ids on events, integer venue ids, registrations, forms
--------------------------------------------------------------------------------

alter table app.events add column if not exists external_platform text;
alter table app.events add column if not exists external_id text;
comment on column app.events.external_platform is 'The platform that pushed the event (platform_a..platform_d), or null.';
comment on column app.events.external_id is 'The event''s id on external_platform; unique per platform.';
alter table app.events drop constraint if exists events_external_platform_check;
-- Safe: the columns it checks are new in this migration (all null), so the validating scan finds nothing to refuse; graphile-migrate runs a migration in one transaction, where NOT VALID + VALIDATE would hold the same lock.
-- squawk-ignore constraint-missing-not-valid
alter table app.events add constraint events_external_platform_check
  check ((external_platform is null) = (external_id is null)
         and (external_platform is null or external_platform in ('platform_a', 'platform_b', 'platform_c', 'platform_d'))
         and (external_id is null or length(external_id) between 1 and 200));
-- Nulls are distinct: events not pushed by a platform never conflict.
alter table app.events drop constraint if exists events_external_key;
-- Safe: the unique key covers columns new in this migration (all null); graphile-migrate's one transaction cannot build the index CONCURRENTLY first.
-- squawk-ignore disallowed-unique-constraint, constraint-missing-not-valid
alter table app.events add constraint events_external_key unique (external_platform, external_id);

-- Safe: an identity column needs a value for every row; venues are few (one per place), so the rewrite is short.
-- squawk-ignore adding-field-with-default
alter table app.venues add column if not exists location_id integer generated always as identity;
comment on column app.venues.location_id is 'A short integer id of the venue (the platform API''s location_id).';
-- Safe: graphile-migrate runs the migration in one transaction, where CONCURRENTLY is impossible; the table is small (venues, or refresh tokens of ended sessions); a DBA with a large one moves this index to a --! no-transaction migration.
-- squawk-ignore require-concurrent-index-creation
create unique index if not exists venues_location_id_key on app.venues (location_id);
-- Venue matching: by name and address (case-insensitive), else by coordinates.
-- Safe: graphile-migrate runs the migration in one transaction, where CONCURRENTLY is impossible; the table is small (venues, or refresh tokens of ended sessions); a DBA with a large one moves this index to a --! no-transaction migration.
-- squawk-ignore require-concurrent-index-creation
create index if not exists venues_name_address_idx on app.venues (lower(btrim(name)), lower(btrim(coalesce(address, ''))));
-- Safe: graphile-migrate runs the migration in one transaction, where CONCURRENTLY is impossible; the table is small (venues, or refresh tokens of ended sessions); a DBA with a large one moves this index to a --! no-transaction migration.
-- squawk-ignore require-concurrent-index-creation
create index if not exists venues_coordinates_idx on app.venues (latitude, longitude) where latitude is not null;

create table app.event_attendees (
  event_id          uuid not null references app.events (id) on delete cascade,
  user_id           uuid not null references identity.users (id) on delete cascade,
  external_platform text,
  registered_at     timestamptz not null default now(),
  primary key (event_id, user_id)
);
comment on table app.event_attendees is 'Attendees registered for an event by an external platform.';
create index event_attendees_user_idx on app.event_attendees (user_id);
alter table app.event_attendees enable row level security;
grant select on app.event_attendees to authenticated;
create policy "Users can read their own registrations" on app.event_attendees
  for select to authenticated
  using (user_id = (select auth.uid()));

create table app.form_submissions (
  id          bigint generated always as identity primary key,
  payload     jsonb not null check (jsonb_typeof(payload) = 'object'),
  size_bytes  integer not null check (size_bytes between 2 and 65536),
  received_at timestamptz not null default now()
);
comment on table app.form_submissions is
  'Objects posted to POST /api/v1/forms (no credential), with their size and time of arrival. Read with admin.forms_list.';
create index form_submissions_received_idx on app.form_submissions (received_at desc, id desc);
alter table app.form_submissions enable row level security;

--------------------------------------------------------------------------------
-- Who may act for a community on the platform endpoints
--------------------------------------------------------------------------------

create function private.platform_authorize(community_id uuid) returns void
  language plpgsql stable
  security definer
  set search_path = pg_catalog
  as $$
declare
  caller uuid := auth.uid();
  token_community uuid := nullif(auth.jwt() ->> 'token_community_id', '')::uuid;
begin
  if caller is null then
    raise exception 'not signed in' using errcode = 'PT401', hint = 'unauthorized';
  end if;
  if token_community is not null and token_community is distinct from platform_authorize.community_id then
    raise exception 'this API token is scoped to another community' using errcode = 'PT403', hint = 'forbidden';
  end if;
  if platform_authorize.community_id is null or not private.is_community_manager(platform_authorize.community_id, caller) then
    raise exception 'not authorized to manage this community' using errcode = 'PT403', hint = 'not_community_manager';
  end if;
end;
$$;
comment on function private.platform_authorize(uuid) is
  'PT403 unless the caller manages the community and, for a community-scoped API token, the token is of that community.';
grant execute on function private.platform_authorize(uuid) to authenticated;

-- The event a platform path names (node id, or event id), whoever may see it.
create function private.platform_event(event_ref uuid) returns app.events
  language plpgsql stable
  security definer
  set search_path = pg_catalog
  as $$
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
comment on function private.platform_event(uuid) is 'The event with this node id (or id); PT404 when there is none.';

--------------------------------------------------------------------------------
-- Events
--------------------------------------------------------------------------------

-- The venue for an incoming `venue`: the oldest with the same name and
-- address (case-insensitive, surrounding spaces ignored; a missing address
-- matches a missing one), else the oldest at the same coordinates (within
-- 1e-6 degrees, about 10 cm), else a new one. Finding and creating hold one
-- transaction-level lock, so racing requests for a new venue create one.
create function private.platform_venue(name text, address text, latitude double precision, longitude double precision)
  returns app.venues
  language plpgsql volatile
  set search_path = pg_catalog
  as $$
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
    insert into app.venues as v (node_id, name, address, latitude, longitude)
      values (new_node, btrim(platform_venue.name), nullif(btrim(platform_venue.address), ''),
              platform_venue.latitude, platform_venue.longitude)
      returning v.* into found;
  end if;
  return found;
end;
$$;
comment on function private.platform_venue(text, text, double precision, double precision) is
  'Reuses the venue with the same name and address (case-insensitive), else the same coordinates, else creates one.';

create function private.platform_event_json(e app.events, created boolean) returns jsonb
  language sql stable
  set search_path = pg_catalog
  as $$
    select jsonb_build_object(
      'created', created,
      'event_id', e.id,
      'event_node_id', e.node_id,
      'title', e.title,
      'venue', (select jsonb_build_object('location_id', v.location_id, 'name', v.name, 'venue_node_id', v.node_id)
                  from app.venues v where v.node_id = e.venue_node_id))
  $$;
comment on function private.platform_event_json(app.events, boolean) is
  'The `data` of the platform event endpoint: created, event_id, event_node_id, title, venue (location_id, name, venue_node_id) or null.';

create function api.platform_event_create(
  community_id uuid,
  external_platform text,
  external_id text,
  title text,
  description text,
  starts_at timestamptz,
  ends_at timestamptz default null,
  external_url text default null,
  image_url text default null,
  venue_name text default null,
  venue_address text default null,
  venue_latitude double precision default null,
  venue_longitude double precision default null
) returns jsonb
  language plpgsql volatile
  security definer
  set search_path = pg_catalog
  as $$
declare
  existing app.events;
  created app.events;
  venue app.venues;
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
  if title is null or length(btrim(title)) not between 1 and 300 then
    raise exception 'title must be 1 to 300 characters' using errcode = 'PT422', hint = 'validation_error';
  end if;
  if starts_at is null then
    raise exception 'date is required' using errcode = 'PT422', hint = 'validation_error';
  end if;
  if ends_at is not null and ends_at < starts_at then
    raise exception 'end_time must not be before date' using errcode = 'PT422', hint = 'validation_error';
  end if;

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
    return private.platform_event_json(existing, false);
  end if;

  if venue_name is not null then
    venue := private.platform_venue(venue_name, venue_address, venue_latitude, venue_longitude);
  end if;
  insert into app.nodes (kind) values ('event') returning id into new_node;
  insert into app.events as e (node_id, community_id, title, description, starts_at, ends_at, venue_node_id, location,
                               event_url, image_path, platform_a_url, platform_b_url, platform_c_url,
                               external_platform, external_id)
    values (new_node, platform_event_create.community_id, btrim(title), description, starts_at, ends_at,
            venue.node_id, venue.name, external_url, image_url,
            case when external_platform = 'platform_a' then external_url end,
            case when external_platform = 'platform_b' then external_url end,
            case when external_platform = 'platform_c' then external_url end,
            platform_event_create.external_platform, platform_event_create.external_id)
    returning e.* into created;
  return private.platform_event_json(created, true);
end;
$$;
comment on function api.platform_event_create(uuid, text, text, text, text, timestamptz, timestamptz, text, text,
                                              text, text, double precision, double precision) is
  'POST /api/v1/platform/events: creates the event (created true) or returns the one with the same external_platform and external_id '
  '(created false). Reuses or creates the venue. PT403 not a manager of the community (or a token of another community); PT422 invalid input.';
grant execute on function api.platform_event_create(uuid, text, text, text, text, timestamptz, timestamptz, text, text,
                                                    text, text, double precision, double precision) to authenticated;

--------------------------------------------------------------------------------
-- Attendees and check-ins
--------------------------------------------------------------------------------

create function api.platform_attendee_register(event_node_id uuid, email text, name text default null) returns jsonb
  language plpgsql volatile
  security definer
  set search_path = pg_catalog
  as $$
declare
  found_event app.events := private.platform_event(event_node_id);
  normalised_email text := lower(btrim(platform_attendee_register.email));
  attendee uuid;
  attendee_node uuid;
  user_created boolean := false;
  community_joined boolean;
  registered boolean;
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
  with added as (
    insert into app.event_attendees as a (event_id, user_id, external_platform)
      values (found_event.id, attendee, found_event.external_platform)
      on conflict on constraint event_attendees_pkey do nothing
      returning 1)
  select exists (select from added) into registered;

  return jsonb_build_object(
    'created', registered,
    'data', jsonb_build_object('user_id', attendee, 'email', normalised_email,
                               'user_created', user_created, 'community_joined', community_joined));
end;
$$;
comment on function api.platform_attendee_register(uuid, text, text) is
  'POST /api/v1/platform/events/{event_node_id}/attendees: creates the user if needed (no password; name defaults to the part of the e-mail before @), '
  'joins them to the event''s community and registers them for the event (created false when already registered). PT404 unknown event; PT403; PT422.';
grant execute on function api.platform_attendee_register(uuid, text, text) to authenticated;

create function api.platform_checkin(event_node_id uuid, email text) returns jsonb
  language plpgsql volatile
  security definer
  set search_path = pg_catalog
  as $$
declare
  found_event app.events := private.platform_event(event_node_id);
  attendee uuid;
  outcome api.checkin_outcome;
begin
  perform private.platform_authorize(found_event.community_id);
  select u.id into attendee from identity.users u where u.email = lower(btrim(platform_checkin.email));
  if attendee is null or not exists (select from app.profiles p where p.id = attendee) then
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
comment on function api.platform_checkin(uuid, text) is
  'POST /api/v1/platform/events/{event_node_id}/checkins: checks an existing user in (created) or returns the current check-in '
  '(already_checked_in). PT404 unknown event or user; PT403.';
grant execute on function api.platform_checkin(uuid, text) to authenticated;

--------------------------------------------------------------------------------
-- Forms
--------------------------------------------------------------------------------

-- Takes the JSON text as received (compact), so the limit is on what was sent.
create function api.form_submit(payload text) returns bigint
  language plpgsql volatile
  security definer
  set search_path = pg_catalog
  as $$
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
comment on function api.form_submit(text) is
  'POST /api/v1/forms (no credential): stores a JSON object of at most 64 KB. PT400 not an object; PT413 too large.';
grant execute on function api.form_submit(text) to anon, authenticated;

create function admin.forms_list(max_rows integer default 50, since timestamptz default null)
  returns table (id bigint, received_at timestamptz, size_bytes integer, payload jsonb)
  language sql stable
  set search_path = pg_catalog
  as $$
    select f.id, f.received_at, f.size_bytes, f.payload
      from app.form_submissions f
     where since is null or f.received_at >= since
     order by f.received_at desc, f.id desc
     limit greatest(coalesce(max_rows, 50), 0)
  $$;
comment on function admin.forms_list(integer, timestamptz) is
  'The forms posted to POST /api/v1/forms, newest first: at most max_rows (default 50), received at or after since (if given).';

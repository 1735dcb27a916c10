--! Previous: sha1:60903798b282239fbd09bee8f8b55d384b605f0e
--! Hash: sha1:6565770141ee7a93ea9fdf4760cb657524bee8dd
--! Message: attendee-first-answer

--! split: 150-attendee-first-answer.sql
--------------------------------------------------------------------------------
-- A repeated attendee registration answers like the first
--
-- A platform that registers a new e-mail makes the account and learns its
-- user_id; sending the same registration again (a retry after a lost answer)
-- answered user_id null, as for an account the platform did not make. Each
-- registration now keeps what it did (made the account, joined it to the
-- community), so that api.platform_attendee_register can answer a repeat as
-- it answered the first, and can name an account a registration of the same
-- community made. Registrations made before this keep false: their repeats
-- answer as before.
--------------------------------------------------------------------------------
alter table app.event_attendees add column if not exists account_created boolean not null default false;
alter table app.event_attendees add column if not exists community_joined boolean not null default false;

--! split: 905-events.sql
-- Made by `npm run db -- areas --diff` from sql/areas/events.sql: the statements that make
-- the migrated database what that file states. Each run writes it again:
-- edit the area file, not this one. Table changes go in a file of this
-- folder numbered below 900.

comment on column app.event_attendees.account_created is 'Whether this registration made the account (api.platform_attendee_register answers its repeats, and other registrations of the community, with the user_id).';

comment on column app.event_attendees.community_joined is 'Whether this registration joined the account to the event''s community (a repeat answers it again).';

--! split: 909-platform.sql
-- Made by `npm run db -- areas --diff` from sql/areas/platform.sql: the statements that make
-- the migrated database what that file states. Each run writes it again:
-- edit the area file, not this one. Table changes go in a file of this
-- folder numbered below 900.

-- Bodies are checked once every function exists (the check validated them all).
set local check_function_bodies = off;

CREATE OR REPLACE FUNCTION api.platform_attendee_register(event_node_id uuid, email text, name text DEFAULT NULL::text)
 RETURNS jsonb
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog'
AS $function$
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
$function$;

set local check_function_bodies to default;

comment on function api.platform_attendee_register(uuid,text,text) is 'POST /api/v1/platform/events/{event_node_id}/attendees: registers the e-mail for the event (created false when already registered). An unknown e-mail gets an account (no password; name defaults to the part of the e-mail before @), joined to the event''s community, and its user_id is returned; a repeat of a registration answers as the first did (app.event_attendees keeps account_created and community_joined). An account a registration of this community made is named; any other existing account is registered for the event only and its user_id is null. PT404 unknown event; PT403; PT422.';

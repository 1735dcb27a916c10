--! Previous: sha1:5ee05148fecf60a3ae488d4e3615d1d7404cf2a0
--! Hash: sha1:5e77352a23bd3decf2e293123efbabe4f64677cd
--! Message: platform-attendees

--! split: 1-current.sql
-- Enter migration here

--! split: 029-platform-attendees.sql
--------------------------------------------------------------------------------
-- Platform endpoints reach only what the platform is given (issue 27,
-- finding 6)
--
--  * Registering an attendee whose e-mail already has an account registers
--    that account for the event only: it is not joined to the community
--    (that is the person's choice), and its user_id is not returned. Only an
--    account the registration itself creates is joined to the event's
--    community and named by its user_id.
--  * A platform check-in accepts a user registered for the event or a member
--    of the event's community. Anyone else is answered exactly as an unknown
--    e-mail (404 user_not_found, the same message), so a check-in tells
--    nothing about accounts outside the community.
--------------------------------------------------------------------------------

create or replace function api.platform_attendee_register(event_node_id uuid, email text, name text default null) returns jsonb
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
  community_joined boolean := false;
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
    insert into app.event_attendees as a (event_id, user_id, external_platform)
      values (found_event.id, attendee, found_event.external_platform)
      on conflict on constraint event_attendees_pkey do nothing
      returning 1)
  select exists (select from added) into registered;

  return jsonb_build_object(
    'created', registered,
    'data', jsonb_build_object('user_id', case when user_created then attendee end, 'email', normalised_email,
                               'user_created', user_created, 'community_joined', community_joined));
end;
$$;
comment on function api.platform_attendee_register(uuid, text, text) is
  'POST /api/v1/platform/events/{event_node_id}/attendees: registers the e-mail for the event (created false when already registered). '
  'An unknown e-mail gets an account (no password; name defaults to the part of the e-mail before @), joined to the event''s community, '
  'and its user_id is returned; an existing account is registered for the event only and its user_id is null. PT404 unknown event; PT403; PT422.';
grant execute on function api.platform_attendee_register(uuid, text, text) to authenticated;

create or replace function api.platform_checkin(event_node_id uuid, email text) returns jsonb
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
comment on function api.platform_checkin(uuid, text) is
  'POST /api/v1/platform/events/{event_node_id}/checkins: checks in a user registered for the event or a member of its community (created), '
  'or returns the current check-in (already_checked_in). PT404 unknown event; PT404 user_not_found for an unknown e-mail and for anyone '
  'neither registered nor a member (the same answer); PT403.';
grant execute on function api.platform_checkin(uuid, text) to authenticated;

-- Made by `npm run db -- areas --diff` from sql/areas/webhooks.sql: the statements that make
-- the migrated database what that file states. Each run writes it again:
-- edit the area file, not this one. Table changes go in a file of this
-- folder numbered below 900.

-- Bodies are checked once every function exists (the check validated them all).
set local check_function_bodies = off;

CREATE OR REPLACE FUNCTION private.webhook_capture_members()
 RETURNS trigger
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog'
AS $function$
begin
  if tg_op = 'INSERT' then
    if private.webhook_listening(new.community_id, 'member.joined') then
      perform private.webhook_emit(new.community_id, 'member.joined', jsonb_build_object(
        'community_id', new.community_id,
        'member', private.webhook_member_json(new.community_id, new.member_node_id, new.role, new.joined_at)));
    end if;
  elsif not exists (select from app.nodes n where n.id = old.member_node_id) then
    -- The member's account was deleted: member.deleted says so, with ids only
    -- (private.webhook_member_deleted).
    return null;
  elsif private.webhook_listening(old.community_id, 'member.left') then
    perform private.webhook_emit(old.community_id, 'member.left', jsonb_build_object(
      'community_id', old.community_id,
      'member', private.webhook_member_json(old.community_id, old.member_node_id, old.role, old.joined_at),
      'left_at', app.iso(clock_timestamp())));
  end if;
  return null;
end;
$function$;

CREATE OR REPLACE FUNCTION private.webhook_event_types()
 RETURNS text[]
 LANGUAGE sql
 IMMUTABLE
 SET search_path TO 'pg_catalog'
AS $function$
    select array['event.created', 'event.updated', 'event.deleted', 'attendee.registered',
                 'checkin.created', 'member.joined', 'member.left', 'member.deleted']
  $function$;

CREATE OR REPLACE FUNCTION private.webhook_member_deleted(user_id uuid, member_node_id uuid, email text)
 RETURNS integer
 LANGUAGE plpgsql
 SET search_path TO 'pg_catalog'
AS $function$
declare
  member_of uuid[] := array(select m.community_id from app.community_members m
                             where m.member_node_id = webhook_member_deleted.member_node_id order by m.community_id);
  touched uuid[];
  community uuid;
  queued integer := 0;
begin
  -- The communities whose deliveries may name the person: theirs, and those
  -- of the events they checked in to or were registered for.
  touched := array(
    select unnest(member_of)
    union select e.community_id from app.checkins c join app.events e on e.id = c.event_id
           where c.user_id = webhook_member_deleted.user_id
    union select e.community_id from app.event_attendees a join app.events e on e.id = a.event_id
           where a.user_id = webhook_member_deleted.user_id);
  -- Their stored copies forget the person: the name in member.* and
  -- checkin.created, the e-mail in attendee.registered (a delivery still to
  -- be sent goes out without them).
  update app.webhook_deliveries d
     set payload = case
                     when d.payload -> 'data' -> 'member' ->> 'id' = webhook_member_deleted.member_node_id::text
                       then jsonb_set(d.payload, '{data,member,name}', 'null'::jsonb)
                     else jsonb_set(d.payload, '{data,email}', 'null'::jsonb)
                   end
   where d.endpoint_id in (select e.id from app.webhook_endpoints e where e.community_id = any (touched))
     and ((d.payload -> 'data' -> 'member' ->> 'id' = webhook_member_deleted.member_node_id::text
           and d.payload -> 'data' -> 'member' ? 'name')
          or (d.event_type = 'attendee.registered' and d.payload -> 'data' ->> 'email' = webhook_member_deleted.email));
  foreach community in array member_of loop
    if private.webhook_listening(community, 'member.deleted') then
      queued := queued + private.webhook_emit(community, 'member.deleted', jsonb_build_object(
        'community_id', community,
        'member', jsonb_build_object('id', webhook_member_deleted.member_node_id),
        'deleted_at', app.iso(clock_timestamp())));
    end if;
  end loop;
  return queued;
end;
$function$;

set local check_function_bodies to default;

comment on function private.webhook_capture_members() is 'Trigger of app.community_members: member.joined, member.left (not for a member whose account is being deleted: member.deleted).';

comment on function private.webhook_member_deleted(uuid,uuid,text) is 'An account being deleted (private.account_delete, before its rows go): member.deleted ({community_id, member: {id: node id}, deleted_at}) to the webhooks of each of its communities, and the stored deliveries of the communities it was a member of, checked in to or registered with forget it (the member''s name, the attendee''s e-mail set to null). Returns how many deliveries were queued.';

-- Made by `npm run db -- areas --diff` from sql/areas/communities.sql: the statements that make
-- the migrated database what that file states. Each run writes it again:
-- edit the area file, not this one. Table changes go in a file of this
-- folder numbered below 900.

-- Bodies are checked once every function exists (the check validated them all).
set local check_function_bodies = off;

CREATE OR REPLACE FUNCTION api.community_join(community_id uuid)
 RETURNS jsonb
 LANGUAGE plpgsql
 SET search_path TO 'pg_catalog'
AS $function$
declare
  me uuid;
  joined timestamptz;
  new_count integer;
begin
  perform app.require_community(community_id);
  me := app.require_my_node();
  begin
    insert into app.community_members as m (community_id, member_node_id)
      values (community_join.community_id, me)
      on conflict on constraint community_members_pkey do nothing
      returning m.joined_at into joined;
  exception when foreign_key_violation then
    -- The caller's account was deleted while this ran (private.account_delete
    -- holds its node until it commits): its credentials have ended.
    raise exception 'the account was deleted' using errcode = 'PT401', hint = 'session_ended';
  end;
  if joined is null then
    raise exception 'already a member of this community' using errcode = 'PT400', hint = 'already_member';
  end if;
  select c.member_count into new_count from app.communities c where c.id = community_join.community_id;
  return jsonb_build_object('member_count', new_count, 'role', 'member', 'joined_at', app.iso(joined));
end;
$function$;

set local check_function_bodies to default;

comment on function api.community_join(uuid) is 'POST /api/mobile/communities/{id}/join: the caller joins as member. PT404 unknown community; PT400 already a member or no node; PT401 session_ended when the caller''s account is deleted meanwhile.';

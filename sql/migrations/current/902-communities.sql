-- Made by `npm run db -- areas --diff` from sql/areas/communities.sql: the statements that make
-- the migrated database what that file states. Each run writes it again:
-- edit the area file, not this one. Table changes go in a file of this
-- folder numbered below 900.

comment on column app.communities.image_object_id is null;

-- Bodies are checked once every function exists (the check validated them all).
set local check_function_bodies = off;

CREATE OR REPLACE FUNCTION api.community_update(community_id uuid, patch jsonb)
 RETURNS jsonb
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog'
AS $function$
declare
  caller uuid := auth.uid();
begin
  perform app.require_community(community_update.community_id);
  if not private.is_community_manager(community_update.community_id, caller) then
    raise exception 'only managers of the community may change it' using errcode = 'PT403', hint = 'not_community_manager';
  end if;
  if pg_catalog.jsonb_typeof(community_update.patch) is distinct from 'object' then
    raise exception 'the patch must be an object' using errcode = 'PT422', hint = 'validation_error';
  end if;
  if community_update.patch ? 'image_path' then
    -- An object of the community-images bucket in the community's folder, or null to clear.
    update app.communities c
       set image_object_id = private.storage_image_object('community-images', community_update.patch->>'image_path', caller)
     where c.id = community_update.community_id;
  end if;
  return api.community_get(community_update.community_id);
end;
$function$;

CREATE OR REPLACE FUNCTION app.community_json(c app.communities)
 RETURNS jsonb
 LANGUAGE sql
 STABLE
AS $function$
    select pg_catalog.jsonb_build_object(
      'id', c.id, 'name', c.name, 'description', c.description, 'tags', pg_catalog.to_jsonb(c.tags),
      'member_count', c.member_count, 'created_at', app.iso(c.created_at), 'updated_at', app.iso(c.updated_at),
      'image_url', app.storage_public_url(c.image_object_id))
  $function$;

CREATE OR REPLACE FUNCTION private.tg_communities__storage_purge()
 RETURNS trigger
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog'
AS $function$
begin
  perform private.storage_purge_enqueue('community', old.id);
  return null;
end;
$function$;

set local check_function_bodies to default;

drop trigger if exists _900_storage_purge on app.communities;
CREATE TRIGGER _900_storage_purge AFTER DELETE ON app.communities FOR EACH ROW EXECUTE FUNCTION private.tg_communities__storage_purge();

grant execute on function api.community_update(uuid,jsonb) to authenticated;

grant select (image_object_id) on table app.communities to anon, authenticated;

comment on function api.community_update(uuid,jsonb) is 'PATCH /api/mobile/communities/{id}: a manager changes what the patch names: image_path (an object of the community-images bucket in the community''s folder, or null to clear). PT403 not_community_manager, PT404 community_not_found, PT422 invalid_image_path.';

comment on function app.community_json(app.communities) is 'id, name, description, tags, member_count, created_at, updated_at, image_url of a community (CommunityListItem''s common part; inlined by the planner).';

comment on function private.tg_communities__storage_purge() is 'Trigger: a community deleted, the objects of its storage folder are deleted by a storage_purge job.';

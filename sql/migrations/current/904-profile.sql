-- Made by `npm run db -- areas --diff` from sql/areas/profile.sql: the statements that make
-- the migrated database what that file states. Each run writes it again:
-- edit the area file, not this one. Table changes go in a file of this
-- folder numbered below 900.

comment on column app.profiles.avatar_object_id is null;

comment on column app.subscription_plans.storage_quota_bytes is null;

comment on column app.subscription_plans.storage_uploads_per_minute is null;

-- Bodies are checked once every function exists (the check validated them all).
set local check_function_bodies = off;

CREATE OR REPLACE FUNCTION api.profile_get()
 RETURNS SETOF api.user_profile
 LANGUAGE sql
 STABLE
AS $function$
    select p.id, u.email, p.name, s.is_premium, p.subscription_type,
           s.max_hats, p.node_id, p.created_at, p.updated_at, app.storage_public_url(p.avatar_object_id)
      from app.profiles p
      join identity.users u on u.id = p.id
      join app.subscription_plans s on s.id = p.subscription_type
  $function$;

CREATE OR REPLACE FUNCTION api.profile_patch(patch jsonb)
 RETURNS SETOF api.user_profile
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog'
AS $function$
declare
  caller uuid := auth.uid();
begin
  if pg_catalog.jsonb_typeof(profile_patch.patch) is distinct from 'object' then
    raise exception 'the patch must be an object' using errcode = 'PT422', hint = 'validation_error';
  end if;
  if profile_patch.patch ? 'name' then
    perform api.profile_update(profile_patch.patch->>'name');
  end if;
  if profile_patch.patch ? 'avatar_path' then
    -- An object of the avatars bucket in the caller's own folder, or null to clear.
    update app.profiles p
       set avatar_object_id = private.storage_image_object('avatars', profile_patch.patch->>'avatar_path', caller)
     where p.id = caller;
    if not found then
      raise exception 'profile not found' using errcode = 'PT404', hint = 'profile_not_found';
    end if;
  end if;
  return query
    select p.id, u.email, p.name, s.is_premium, p.subscription_type,
           s.max_hats, p.node_id, p.created_at, p.updated_at, app.storage_public_url(p.avatar_object_id)
      from app.profiles p
      join identity.users u on u.id = p.id
      join app.subscription_plans s on s.id = p.subscription_type
     where p.id = caller;
  if not found then
    raise exception 'profile not found' using errcode = 'PT404', hint = 'profile_not_found';
  end if;
end;
$function$;

CREATE OR REPLACE FUNCTION api.profile_update(name text)
 RETURNS SETOF api.user_profile
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog'
AS $function$
declare
  new_name text := btrim(profile_update.name);
begin
  if new_name is null or length(new_name) not between 1 and 200 then
    raise exception 'name must be 1 to 200 characters' using errcode = 'PT422', hint = 'validation_error';
  end if;
  update app.profiles p
     set name = new_name, name_source = 'chosen'
   where p.id = auth.uid();
  if not found then
    raise exception 'profile not found' using errcode = 'PT404', hint = 'profile_not_found';
  end if;
  return query
    select p.id, u.email, p.name, s.is_premium, p.subscription_type,
           s.max_hats, p.node_id, p.created_at, p.updated_at, app.storage_public_url(p.avatar_object_id)
      from app.profiles p
      join identity.users u on u.id = p.id
      join app.subscription_plans s on s.id = p.subscription_type
     where p.id = auth.uid();
end;
$function$;

set local check_function_bodies to default;

grant execute on function api.profile_patch(jsonb) to authenticated;

comment on function api.profile_patch(jsonb) is 'PATCH /api/mobile/profile: changes what the patch names: name (as api.profile_update) and avatar_path (an object of the avatars bucket in the caller''s folder, or null to clear). PT422 validation_error or invalid_image_path, PT404 without a profile.';

comment on function api.profile_update(text) is 'Sets the caller''s name (then chosen: visible to other members). PT422 for an empty or too long name, PT404 without a profile.';

-- =============================================================================
-- Profiles, hats, plans and the names others may see
-- =============================================================================
-- A profile belongs to an account (same id) and points at the user's node.
-- Hats are a user's personas: hat types are rows of app.hat_types, the first
-- hat is primary, and how many a user may have comes from their plan
-- (app.subscription_plans: basic 3, premium 10), enforced by a trigger that
-- locks the profile row, so the limit holds under concurrent creates and for
-- any insert path.
--
-- Names: a name the user chose is visible to signed-in users; a name derived
-- from the e-mail address stays private to the user and to the managers of
-- their communities. app.node_display_name and app.node_display_names are that
-- rule, for one node and for a set of nodes.
--
-- Code: gateway/routes/profile.ts
-- pgTAP: supabase/tests/profile.test.sql
--
-- Its tables (created and altered by the migrations; their comments, row-level
-- security, policies, grants and triggers are below):
--   app.profiles, app.hats, app.hat_types, app.subscription_plans
--
-- Its types (made by the migrations):
--   api.hat, api.hat_type, api.user_profile
--
-- The current definition of every function, view, policy, trigger, grant and
-- comment of this area. To change a rule: edit it here, then
-- `npm run db -- areas --diff` writes its migration (docs/dba.md, "Changing a
-- rule"). CI (`npm run db -- areas --check`) fails while this file and the
-- migrated database disagree. `npm run db -- areas --write` renders all below
-- `-- Code:` again from a freshly migrated database.
-- =============================================================================

-- -----------------------------------------------------------------------------
-- Functions of api: what the gateway and the MCP server call, as the request's
-- role
-- -----------------------------------------------------------------------------

CREATE OR REPLACE FUNCTION api.hat_create(name text, hat_type text, description text DEFAULT NULL::text)
 RETURNS SETOF api.hat
 LANGUAGE plpgsql
 SET search_path TO 'pg_catalog'
AS $function$
declare
  caller uuid := auth.uid();
begin
  if caller is null then
    raise exception 'not signed in' using errcode = 'PT401';
  end if;
  if not exists (select from app.hat_types t where t.id = hat_create.hat_type) then
    raise exception 'unknown hat_type "%"', hat_create.hat_type
      using errcode = 'PT422', hint = 'unknown_hat_type';
  end if;

  return query
    insert into app.hats as h (user_id, name, hat_type, description)
      values (caller, btrim(hat_create.name), hat_create.hat_type, hat_create.description)
      returning h.id, h.name, h.hat_type, h.description, h.is_primary, h.created_at;
end;
$function$;
comment on function api.hat_create(text,text,text) is 'POST /api/mobile/hats: creates a hat for the caller. PT422 for an unknown hat_type or past the plan''s max_hats.';
grant execute on function api.hat_create(text,text,text) to authenticated;

CREATE OR REPLACE FUNCTION api.hat_types_list()
 RETURNS SETOF api.hat_type
 LANGUAGE sql
 STABLE
 SET search_path TO 'pg_catalog'
AS $function$
    select t.id, t.name, t.description from app.hat_types t order by t.sort_order, t.id
  $function$;
comment on function api.hat_types_list() is 'GET /api/mobile/hat_types: the hat types, in display order.';
grant execute on function api.hat_types_list() to authenticated;

CREATE OR REPLACE FUNCTION api.hats_list()
 RETURNS SETOF api.hat
 LANGUAGE sql
 STABLE
 SET search_path TO 'pg_catalog'
AS $function$
    select h.id, h.name, h.hat_type, h.description, h.is_primary, h.created_at
      from app.hats h
      order by h.is_primary desc, h.created_at, h.id
  $function$;
comment on function api.hats_list() is 'GET /api/mobile/hats: the caller''s hats (row-level security), primary first, then oldest first.';
grant execute on function api.hats_list() to authenticated;

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
comment on function api.profile_get() is 'GET /api/mobile/profile: the caller''s UserProfile (row-level security picks the row); no row when it is missing (the route''s 404). Inlined into the calling statement (plain SQL, no search_path of its own: every name is qualified).';
grant execute on function api.profile_get() to authenticated;

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
comment on function api.profile_patch(jsonb) is 'PATCH /api/mobile/profile: changes what the patch names: name (as api.profile_update) and avatar_path (an object of the avatars bucket in the caller''s folder, or null to clear). PT422 validation_error or invalid_image_path, PT404 without a profile.';
grant execute on function api.profile_patch(jsonb) to authenticated;

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
comment on function api.profile_update(text) is 'Sets the caller''s name (then chosen: visible to other members). PT422 for an empty or too long name, PT404 without a profile.';
grant execute on function api.profile_update(text) to authenticated;

-- -----------------------------------------------------------------------------
-- Functions of app: helpers of policies and list functions
-- -----------------------------------------------------------------------------

CREATE OR REPLACE FUNCTION app.node_display_name(node_id uuid)
 RETURNS text
 LANGUAGE sql
 STABLE
 SET search_path TO 'pg_catalog'
AS $function$
    select n.name from app.node_display_names(array[node_display_name.node_id]) n
  $function$;
comment on function app.node_display_name(uuid) is 'The display name of a user node (profile name), and nothing else: null when the name was derived from the e-mail, unless the caller is that user or manages one of their communities.';
grant execute on function app.node_display_name(uuid) to authenticated;

CREATE OR REPLACE FUNCTION app.node_display_names(node_ids uuid[])
 RETURNS TABLE(node_id uuid, name text)
 LANGUAGE plpgsql
 STABLE SECURITY DEFINER
 SET search_path TO 'pg_catalog'
AS $function$
declare
  caller constant uuid := auth.uid();
  -- the communities the caller manages: their members' names are visible to the caller
  managed constant uuid[] := array(
    select mine.community_id
      from app.community_members mine
      join app.profiles me on me.node_id = mine.member_node_id
     where me.id = caller
       and mine.role = 'manager');
begin
  return query
    select p.node_id, p.name
      from app.profiles p
     where p.node_id = any(node_display_names.node_ids)
       and (p.name_source = 'chosen'
            or p.id = caller
            or exists (
              select
                from app.community_members theirs
               where theirs.member_node_id = p.node_id
                 and theirs.community_id = any(managed)));
end;
$function$;
comment on function app.node_display_names(uuid[]) is 'The display names (profile names) of these user nodes that the caller may see: a name chosen by its user, the caller''s own, or a member of a community the caller manages. Nodes whose name the caller may not see are left out. The one definition of name privacy (node_display_name is it for one node).';
grant execute on function app.node_display_names(uuid[]) to authenticated;

-- -----------------------------------------------------------------------------
-- Functions of private: internal helpers and trigger functions (request roles
-- run only those granted here)
-- -----------------------------------------------------------------------------

CREATE OR REPLACE FUNCTION private.hat_belongs_to(hat_id uuid, user_id uuid)
 RETURNS boolean
 LANGUAGE sql
 STABLE SECURITY DEFINER
 SET search_path TO 'pg_catalog'
AS $function$
    select exists (select from app.hats h where h.id = hat_belongs_to.hat_id and h.user_id = hat_belongs_to.user_id)
  $function$;
comment on function private.hat_belongs_to(uuid,uuid) is 'Whether the hat is one of the user''s hats.';
grant execute on function private.hat_belongs_to(uuid,uuid) to authenticated;

CREATE OR REPLACE FUNCTION private.tg_hats__enforce_limit()
 RETURNS trigger
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog'
AS $function$
declare
  allowed integer;
  plan text;
  existing integer;
begin
  select p.subscription_type, s.max_hats into plan, allowed
    from app.profiles p
    join app.subscription_plans s on s.id = p.subscription_type
    where p.id = new.user_id
    for update of p;
  if not found then
    raise exception 'profile not found' using errcode = 'PT404', hint = 'profile_not_found';
  end if;

  select count(*) into existing from app.hats where user_id = new.user_id;
  if existing >= allowed then
    raise exception 'hat limit reached: the % plan allows % hats', plan, allowed
      using errcode = 'PT422', hint = 'hat_limit_reached';
  end if;

  -- The first hat a user creates is their primary hat.
  new.is_primary := (existing = 0);
  return new;
end;
$function$;
comment on function private.tg_hats__enforce_limit() is 'Trigger: enforces max_hats of the owner''s plan (PT422) and makes the first hat primary.';

-- -----------------------------------------------------------------------------
-- Tables: comments, row-level security, policies, grants, triggers
-- -----------------------------------------------------------------------------

-- app.profiles
comment on table app.profiles is 'A user''s profile. node_id is null only when an operator removed the node.';
comment on column app.profiles.name_source is 'Where name came from: chosen (by the user or an operator) or email (derived from the e-mail address; shown only to the user and to managers of their communities).';
alter table app.profiles enable row level security;
drop policy if exists "Users can read their own profile" on app.profiles;
create policy "Users can read their own profile" on app.profiles
  as permissive for select to authenticated
  using ((id = ( SELECT auth.uid() AS uid)));
grant select on table app.profiles to authenticated;
drop trigger if exists _100_set_updated_at on app.profiles;
CREATE TRIGGER _100_set_updated_at BEFORE UPDATE ON app.profiles FOR EACH ROW EXECUTE FUNCTION private.tg__set_updated_at();

-- app.hats
comment on table app.hats is 'A user''s personas. At most one primary hat per user; the count is limited by the plan.';
alter table app.hats enable row level security;
drop policy if exists "Users can create their own hats" on app.hats;
create policy "Users can create their own hats" on app.hats
  as permissive for insert to authenticated
  with check ((user_id = ( SELECT auth.uid() AS uid)));
drop policy if exists "Users can read their own hats" on app.hats;
create policy "Users can read their own hats" on app.hats
  as permissive for select to authenticated
  using ((user_id = ( SELECT auth.uid() AS uid)));
grant select, insert (description, hat_type, name, user_id) on table app.hats to authenticated;
drop trigger if exists _100_set_updated_at on app.hats;
CREATE TRIGGER _100_set_updated_at BEFORE UPDATE ON app.hats FOR EACH ROW EXECUTE FUNCTION private.tg__set_updated_at();
drop trigger if exists _200_enforce_limit on app.hats;
CREATE TRIGGER _200_enforce_limit BEFORE INSERT ON app.hats FOR EACH ROW EXECUTE FUNCTION private.tg_hats__enforce_limit();

-- app.hat_types
comment on table app.hat_types is 'The kinds of hat a user may wear; `id` is the slug clients send as hat_type.';
alter table app.hat_types enable row level security;
drop policy if exists "Hat types are visible to signed-in users" on app.hat_types;
create policy "Hat types are visible to signed-in users" on app.hat_types
  as permissive for select to authenticated
  using (true);
grant select on table app.hat_types to authenticated;

-- app.subscription_plans
comment on table app.subscription_plans is 'Subscription types and what they allow. A DBA changes a limit here.';
alter table app.subscription_plans enable row level security;
drop policy if exists "Plans are visible to signed-in users" on app.subscription_plans;
create policy "Plans are visible to signed-in users" on app.subscription_plans
  as permissive for select to authenticated
  using (true);
grant select on table app.subscription_plans to authenticated;

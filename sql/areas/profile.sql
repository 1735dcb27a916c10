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
-- The whole source of this area, after the areas before it in
-- sql/areas/areas.json: types, tables, indexes, triggers, policies, the api
-- functions, the helpers. To change it: edit it here, then
-- `npm run db -- areas --diff` writes the migration (docs/dba.md).
-- =============================================================================

-- =============================================================================
-- Types
-- =============================================================================

CREATE TYPE api.hat AS (
	id uuid,
	name text,
	hat_type text,
	description text,
	is_primary boolean,
	created_at timestamp with time zone
);

CREATE TYPE api.hat_type AS (
	id text,
	name text,
	description text
);

CREATE TYPE api.user_profile AS (
	id uuid,
	email text,
	name text,
	is_premium boolean,
	subscription_type text,
	max_hats integer,
	node_id uuid,
	created_at timestamp with time zone,
	updated_at timestamp with time zone,
	avatar_url text
);

-- =============================================================================
-- Tables
-- =============================================================================

CREATE TABLE app.subscription_plans (
    id text NOT NULL,
    max_hats integer NOT NULL,
    is_premium boolean DEFAULT false NOT NULL,
    storage_quota_bytes bigint DEFAULT 104857600 NOT NULL,
    storage_uploads_per_minute integer DEFAULT 30 NOT NULL,
    CONSTRAINT subscription_plans_id_check CHECK ((id ~ '^[a-z_]+$'::text)),
    CONSTRAINT subscription_plans_max_hats_check CHECK ((max_hats >= 0)),
    CONSTRAINT subscription_plans_pkey PRIMARY KEY (id)
);
COMMENT ON TABLE app.subscription_plans IS 'Subscription types and what they allow. A DBA changes a limit here.';
ALTER TABLE app.subscription_plans ENABLE ROW LEVEL SECURITY;
GRANT SELECT ON TABLE app.subscription_plans TO authenticated;

CREATE TABLE app.profiles (
    id uuid NOT NULL,
    name text NOT NULL,
    subscription_type text DEFAULT 'basic'::text NOT NULL,
    node_id uuid,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    updated_at timestamp with time zone DEFAULT now() NOT NULL,
    name_source text DEFAULT 'chosen'::text NOT NULL,
    avatar_object_id uuid,
    CONSTRAINT profiles_name_check CHECK (((length(btrim(name)) >= 1) AND (length(btrim(name)) <= 200))),
    CONSTRAINT profiles_name_source_valid CHECK ((name_source = ANY (ARRAY['chosen'::text, 'email'::text]))),
    CONSTRAINT profiles_node_id_key UNIQUE (node_id),
    CONSTRAINT profiles_pkey PRIMARY KEY (id),
    CONSTRAINT profiles_id_fkey FOREIGN KEY (id) REFERENCES identity.users(id) ON DELETE CASCADE,
    CONSTRAINT profiles_node_id_fkey FOREIGN KEY (node_id) REFERENCES app.nodes(id) ON DELETE SET NULL,
    CONSTRAINT profiles_subscription_type_fkey FOREIGN KEY (subscription_type) REFERENCES app.subscription_plans(id) ON UPDATE CASCADE
);
ALTER TABLE ONLY app.profiles
    ADD CONSTRAINT profiles_avatar_object_id_fkey FOREIGN KEY (avatar_object_id) REFERENCES app.storage_objects(id) ON DELETE SET NULL;
COMMENT ON TABLE app.profiles IS 'A user''s profile. node_id is null only when an operator removed the node.';
COMMENT ON COLUMN app.profiles.name_source IS 'Where name came from: chosen (by the user or an operator) or email (derived from the e-mail address; shown only to the user and to managers of their communities).';
ALTER TABLE app.profiles ENABLE ROW LEVEL SECURITY;
GRANT SELECT ON TABLE app.profiles TO authenticated;

CREATE TABLE app.hat_types (
    id text NOT NULL,
    name text NOT NULL,
    description text,
    sort_order integer DEFAULT 0 NOT NULL,
    CONSTRAINT hat_types_id_check CHECK ((id ~ '^[a-z_]+$'::text)),
    CONSTRAINT hat_types_pkey PRIMARY KEY (id)
);
COMMENT ON TABLE app.hat_types IS 'The kinds of hat a user may wear; `id` is the slug clients send as hat_type.';
ALTER TABLE app.hat_types ENABLE ROW LEVEL SECURITY;
GRANT SELECT ON TABLE app.hat_types TO authenticated;

CREATE TABLE app.hats (
    id uuid DEFAULT gen_random_uuid() NOT NULL,
    user_id uuid NOT NULL,
    name text NOT NULL,
    hat_type text NOT NULL,
    description text,
    is_primary boolean DEFAULT false NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    updated_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT hats_description_check CHECK ((length(description) <= 2000)),
    CONSTRAINT hats_name_check CHECK (((length(btrim(name)) >= 1) AND (length(btrim(name)) <= 100))),
    CONSTRAINT hats_pkey PRIMARY KEY (id),
    CONSTRAINT hats_hat_type_fkey FOREIGN KEY (hat_type) REFERENCES app.hat_types(id) ON UPDATE CASCADE,
    CONSTRAINT hats_user_id_fkey FOREIGN KEY (user_id) REFERENCES app.profiles(id) ON DELETE CASCADE
);
COMMENT ON TABLE app.hats IS 'A user''s personas. At most one primary hat per user; the count is limited by the plan.';
ALTER TABLE app.hats ENABLE ROW LEVEL SECURITY;
GRANT SELECT ON TABLE app.hats TO authenticated;
GRANT INSERT(user_id) ON TABLE app.hats TO authenticated;
GRANT INSERT(name) ON TABLE app.hats TO authenticated;
GRANT INSERT(hat_type) ON TABLE app.hats TO authenticated;
GRANT INSERT(description) ON TABLE app.hats TO authenticated;

-- =============================================================================
-- Indexes
-- =============================================================================

CREATE INDEX profiles_avatar_object_idx ON app.profiles USING btree (avatar_object_id) WHERE (avatar_object_id IS NOT NULL);
CREATE UNIQUE INDEX hats_one_primary_per_user ON app.hats USING btree (user_id) WHERE is_primary;
CREATE INDEX hats_user_idx ON app.hats USING btree (user_id, created_at);

-- =============================================================================
-- Triggers
-- =============================================================================

CREATE TRIGGER _100_set_updated_at BEFORE UPDATE ON app.profiles FOR EACH ROW EXECUTE FUNCTION private.tg__set_updated_at();
CREATE TRIGGER _100_set_updated_at BEFORE UPDATE ON app.hats FOR EACH ROW EXECUTE FUNCTION private.tg__set_updated_at();
CREATE TRIGGER _200_enforce_limit BEFORE INSERT ON app.hats FOR EACH ROW EXECUTE FUNCTION private.tg_hats__enforce_limit();

-- =============================================================================
-- Policies
-- =============================================================================

CREATE POLICY "Plans are visible to signed-in users" ON app.subscription_plans FOR SELECT TO authenticated USING (true);

CREATE POLICY "Users can read their own profile" ON app.profiles FOR SELECT TO authenticated USING ((id = ( SELECT auth.uid() AS uid)));

CREATE POLICY "Hat types are visible to signed-in users" ON app.hat_types FOR SELECT TO authenticated USING (true);

CREATE POLICY "Users can create their own hats" ON app.hats FOR INSERT TO authenticated WITH CHECK ((user_id = ( SELECT auth.uid() AS uid)));

CREATE POLICY "Users can read their own hats" ON app.hats FOR SELECT TO authenticated USING ((user_id = ( SELECT auth.uid() AS uid)));

-- =============================================================================
-- Functions of api: what the gateway and the MCP server call, as the request's role
-- =============================================================================

CREATE FUNCTION api.profile_get() RETURNS SETOF api.user_profile
    LANGUAGE sql STABLE
    AS $$
    select p.id, u.email, p.name, s.is_premium, p.subscription_type,
           s.max_hats, p.node_id, p.created_at, p.updated_at, app.storage_public_url(p.avatar_object_id)
      from app.profiles p
      join identity.users u on u.id = p.id
      join app.subscription_plans s on s.id = p.subscription_type
  $$;
COMMENT ON FUNCTION api.profile_get() IS 'GET /api/mobile/profile: the caller''s UserProfile (row-level security picks the row); no row when it is missing (the route''s 404). Inlined into the calling statement (plain SQL, no search_path of its own: every name is qualified).';
GRANT EXECUTE ON FUNCTION api.profile_get() TO authenticated;

CREATE FUNCTION api.profile_patch(patch jsonb, if_match text[] DEFAULT NULL::text[]) RETURNS SETOF api.user_profile
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog'
    AS $$
declare
  caller uuid := auth.uid();
  version timestamp with time zone;
begin
  if pg_catalog.jsonb_typeof(profile_patch.patch) is distinct from 'object' then
    raise exception 'the patch must be an object' using errcode = 'PT422', hint = 'validation_error';
  end if;
  if profile_patch.if_match is not null then
    select p.updated_at into version from app.profiles p where p.id = caller for no key update;
    if found then
      perform app.check_if_match(profile_patch.if_match, version, private.profile_json(caller));
    end if;
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
$$;

COMMENT ON FUNCTION api.profile_patch(patch jsonb, if_match text[]) IS 'PATCH /api/mobile/profile: changes what the patch names: name (as api.profile_update) and avatar_path (an object of the avatars bucket in the caller''s folder, or null to clear). PT422 validation_error or invalid_image_path, PT404 without a profile; PT412 precondition_failed (with the current profile) when if_match (the If-Match tags) names another version (api.etag of the profile''s updated_at).';
GRANT EXECUTE ON FUNCTION api.profile_patch(patch jsonb, if_match text[]) TO authenticated;

CREATE FUNCTION api.hats_list() RETURNS SETOF api.hat
    LANGUAGE sql STABLE
    SET search_path TO 'pg_catalog'
    AS $$
    select h.id, h.name, h.hat_type, h.description, h.is_primary, h.created_at
      from app.hats h
      order by h.is_primary desc, h.created_at, h.id
  $$;
COMMENT ON FUNCTION api.hats_list() IS 'GET /api/mobile/hats: the caller''s hats (row-level security), primary first, then oldest first.';
GRANT EXECUTE ON FUNCTION api.hats_list() TO authenticated;

CREATE FUNCTION api.hat_create(name text, hat_type text, description text DEFAULT NULL::text) RETURNS SETOF api.hat
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog'
    AS $$
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
$$;

COMMENT ON FUNCTION api.hat_create(name text, hat_type text, description text) IS 'POST /api/mobile/hats: creates a hat for the caller. PT422 for an unknown hat_type or past the plan''s max_hats.';
GRANT EXECUTE ON FUNCTION api.hat_create(name text, hat_type text, description text) TO authenticated;

CREATE FUNCTION api.hat_types_list() RETURNS SETOF api.hat_type
    LANGUAGE sql STABLE
    SET search_path TO 'pg_catalog'
    AS $$
    select t.id, t.name, t.description from app.hat_types t order by t.sort_order, t.id
  $$;
COMMENT ON FUNCTION api.hat_types_list() IS 'GET /api/mobile/hat_types: the hat types, in display order.';
GRANT EXECUTE ON FUNCTION api.hat_types_list() TO authenticated;

CREATE FUNCTION api.profile_update(name text) RETURNS SETOF api.user_profile
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog'
    AS $$
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
$$;

COMMENT ON FUNCTION api.profile_update(name text) IS 'Sets the caller''s name (then chosen: visible to other members). PT422 for an empty or too long name, PT404 without a profile.';
GRANT EXECUTE ON FUNCTION api.profile_update(name text) TO authenticated;

-- =============================================================================
-- Helpers (private, app, identity): internal helpers and trigger functions; request roles run only those granted here
-- =============================================================================

CREATE FUNCTION private.profile_json(user_id uuid) RETURNS jsonb
    LANGUAGE sql STABLE SECURITY DEFINER
    SET search_path TO 'pg_catalog'
    AS $$
    select jsonb_build_object('id', p.id, 'email', u.email, 'name', p.name, 'is_premium', s.is_premium,
                              'subscription_type', p.subscription_type, 'max_hats', s.max_hats, 'node_id', p.node_id,
                              'created_at', app.iso(p.created_at), 'updated_at', app.iso(p.updated_at),
                              'avatar_url', app.storage_public_url(p.avatar_object_id))
      from app.profiles p
      join identity.users u on u.id = p.id
      join app.subscription_plans s on s.id = p.subscription_type
     where p.id = profile_json.user_id and p.id = auth.uid()
  $$;

COMMENT ON FUNCTION private.profile_json(user_id uuid) IS 'The caller''s profile as the REST interface answers it (the UserProfile object), for the current object of a PT412; null for anyone else''s id.';

CREATE FUNCTION private.tg_hats__enforce_limit() RETURNS trigger
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog'
    AS $$
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
$$;
COMMENT ON FUNCTION private.tg_hats__enforce_limit() IS 'Trigger: enforces max_hats of the owner''s plan (PT422) and makes the first hat primary.';


CREATE FUNCTION app.node_display_name(node_id uuid) RETURNS text
    LANGUAGE sql STABLE
    SET search_path TO 'pg_catalog'
    AS $$
    select n.name from app.node_display_names(array[node_display_name.node_id]) n
  $$;

COMMENT ON FUNCTION app.node_display_name(node_id uuid) IS 'The display name of a user node (profile name), and nothing else: null when the name was derived from the e-mail, unless the caller is that user or manages one of their communities.';
GRANT EXECUTE ON FUNCTION app.node_display_name(node_id uuid) TO authenticated;

CREATE FUNCTION app.node_display_names(node_ids uuid[]) RETURNS TABLE(node_id uuid, name text)
    LANGUAGE plpgsql STABLE SECURITY DEFINER
    SET search_path TO 'pg_catalog'
    AS $$
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
$$;

COMMENT ON FUNCTION app.node_display_names(node_ids uuid[]) IS 'The display names (profile names) of these user nodes that the caller may see: a name chosen by its user, the caller''s own, or a member of a community the caller manages. Nodes whose name the caller may not see are left out. The one definition of name privacy (node_display_name is it for one node).';
GRANT EXECUTE ON FUNCTION app.node_display_names(node_ids uuid[]) TO authenticated;

CREATE FUNCTION private.hat_belongs_to(hat_id uuid, user_id uuid) RETURNS boolean
    LANGUAGE sql STABLE SECURITY DEFINER
    SET search_path TO 'pg_catalog'
    AS $$
    select exists (select from app.hats h where h.id = hat_belongs_to.hat_id and h.user_id = hat_belongs_to.user_id)
  $$;

COMMENT ON FUNCTION private.hat_belongs_to(hat_id uuid, user_id uuid) IS 'Whether the hat is one of the user''s hats.';
GRANT EXECUTE ON FUNCTION private.hat_belongs_to(hat_id uuid, user_id uuid) TO authenticated;

-- =============================================================================
-- Communities and memberships
-- =============================================================================
-- Communities are readable by everyone, signed in or not (name, description,
-- tags, counts: nothing personal); memberships by signed-in users (member node
-- ids, names as the name rule allows, roles; never e-mails). A user joins and
-- leaves as themselves, as `member`; managers are made by operators
-- (admin.add_manager). member_count is kept by a trigger in the membership's
-- transaction (it takes the community row lock, so concurrent joins and leaves
-- never make it drift), and the last manager cannot leave or be demoted (a
-- trigger locks the community row and counts the others). Joining twice or
-- leaving when not a member is PT400; an unknown community PT404. Search looks
-- through name, description and tags (search_text, kept by a trigger, served by
-- a trigram index).
--
-- Code: gateway/routes/communities.ts
-- pgTAP: supabase/tests/communities.test.sql
--
-- The whole source of this area, after the areas before it in
-- sql/areas/areas.json: types, tables, indexes, triggers, policies, the api
-- functions, the helpers. To change it: edit it here, then
-- `npm run db -- areas --diff` writes the migration (docs/dba.md).
-- =============================================================================

-- =============================================================================
-- Tables
-- =============================================================================

CREATE TABLE app.communities (
    id uuid DEFAULT gen_random_uuid() NOT NULL,
    node_id uuid NOT NULL,
    name text NOT NULL,
    description text,
    tags text[] DEFAULT '{}'::text[] NOT NULL,
    member_count integer DEFAULT 0 NOT NULL,
    is_sandbox boolean DEFAULT false NOT NULL,
    is_draft boolean DEFAULT false NOT NULL,
    accepts_handoffs boolean DEFAULT false NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    updated_at timestamp with time zone DEFAULT now() NOT NULL,
    search_text text DEFAULT ''::text NOT NULL,
    timezone text,
    image_object_id uuid,
    CONSTRAINT communities_member_count_check CHECK ((member_count >= 0)),
    CONSTRAINT communities_name_check CHECK (((length(btrim(name)) >= 1) AND (length(btrim(name)) <= 200))),
    CONSTRAINT communities_node_id_key UNIQUE (node_id),
    CONSTRAINT communities_pkey PRIMARY KEY (id),
    CONSTRAINT communities_node_id_fkey FOREIGN KEY (node_id) REFERENCES app.nodes(id) ON DELETE RESTRICT
);
ALTER TABLE ONLY app.communities
    ADD CONSTRAINT communities_image_object_id_fkey FOREIGN KEY (image_object_id) REFERENCES app.storage_objects(id) ON DELETE SET NULL;
COMMENT ON TABLE app.communities IS 'Communities. member_count is kept by a trigger on community_members.';
COMMENT ON COLUMN app.communities.timezone IS 'The community''s IANA time zone, or null (unknown): its events made without a zone of their own or of their venue take it. Set by admin.set_community_timezone.';
ALTER TABLE app.communities ENABLE ROW LEVEL SECURITY;
GRANT SELECT(id) ON TABLE app.communities TO anon;
GRANT SELECT(id) ON TABLE app.communities TO authenticated;
GRANT SELECT(node_id) ON TABLE app.communities TO anon;
GRANT SELECT(node_id) ON TABLE app.communities TO authenticated;
GRANT SELECT(name) ON TABLE app.communities TO anon;
GRANT SELECT(name) ON TABLE app.communities TO authenticated;
GRANT SELECT(description) ON TABLE app.communities TO anon;
GRANT SELECT(description) ON TABLE app.communities TO authenticated;
GRANT SELECT(tags) ON TABLE app.communities TO anon;
GRANT SELECT(tags) ON TABLE app.communities TO authenticated;
GRANT SELECT(member_count) ON TABLE app.communities TO anon;
GRANT SELECT(member_count) ON TABLE app.communities TO authenticated;
GRANT SELECT(is_sandbox) ON TABLE app.communities TO anon;
GRANT SELECT(is_sandbox) ON TABLE app.communities TO authenticated;
GRANT SELECT(is_draft) ON TABLE app.communities TO anon;
GRANT SELECT(is_draft) ON TABLE app.communities TO authenticated;
GRANT SELECT(accepts_handoffs) ON TABLE app.communities TO anon;
GRANT SELECT(accepts_handoffs) ON TABLE app.communities TO authenticated;
GRANT SELECT(created_at) ON TABLE app.communities TO anon;
GRANT SELECT(created_at) ON TABLE app.communities TO authenticated;
GRANT SELECT(updated_at) ON TABLE app.communities TO anon;
GRANT SELECT(updated_at) ON TABLE app.communities TO authenticated;
GRANT SELECT(search_text) ON TABLE app.communities TO anon;
GRANT SELECT(search_text) ON TABLE app.communities TO authenticated;
GRANT SELECT(timezone) ON TABLE app.communities TO anon;
GRANT SELECT(timezone) ON TABLE app.communities TO authenticated;
GRANT SELECT(image_object_id) ON TABLE app.communities TO anon;
GRANT SELECT(image_object_id) ON TABLE app.communities TO authenticated;

CREATE TABLE app.community_members (
    community_id uuid NOT NULL,
    member_node_id uuid NOT NULL,
    role text DEFAULT 'member'::text NOT NULL,
    joined_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT community_members_role_check CHECK ((role = ANY (ARRAY['member'::text, 'manager'::text]))),
    CONSTRAINT community_members_pkey PRIMARY KEY (community_id, member_node_id),
    CONSTRAINT community_members_community_id_fkey FOREIGN KEY (community_id) REFERENCES app.communities(id) ON DELETE CASCADE,
    CONSTRAINT community_members_member_node_id_fkey FOREIGN KEY (member_node_id) REFERENCES app.nodes(id) ON DELETE CASCADE
);
COMMENT ON TABLE app.community_members IS 'Memberships: a user node in a community, as member or manager.';
ALTER TABLE app.community_members ENABLE ROW LEVEL SECURITY;
GRANT SELECT,DELETE ON TABLE app.community_members TO authenticated;
GRANT INSERT(community_id) ON TABLE app.community_members TO authenticated;
GRANT INSERT(member_node_id) ON TABLE app.community_members TO authenticated;

-- =============================================================================
-- Indexes
-- =============================================================================

CREATE INDEX communities_image_object_idx ON app.communities USING btree (image_object_id) WHERE (image_object_id IS NOT NULL);
CREATE INDEX communities_name_order ON app.communities USING btree (lower(name), id);
CREATE INDEX communities_search_trgm ON app.communities USING gin (search_text extensions.gin_trgm_ops);
CREATE INDEX community_members_member_idx ON app.community_members USING btree (member_node_id, joined_at);
CREATE INDEX community_members_roster ON app.community_members USING btree (community_id, role, joined_at, member_node_id);

-- =============================================================================
-- Triggers
-- =============================================================================

CREATE TRIGGER _100_set_updated_at BEFORE UPDATE ON app.communities FOR EACH ROW EXECUTE FUNCTION private.tg__set_updated_at();
CREATE TRIGGER _200_search_text BEFORE INSERT OR UPDATE OF name, description, tags ON app.communities FOR EACH ROW EXECUTE FUNCTION private.tg_communities__search_text();
CREATE TRIGGER _900_storage_purge AFTER DELETE ON app.communities FOR EACH ROW EXECUTE FUNCTION private.tg_communities__storage_purge();
CREATE TRIGGER _100_keep_a_manager BEFORE DELETE OR UPDATE OF role ON app.community_members FOR EACH ROW EXECUTE FUNCTION private.tg_community_members__keep_a_manager();
CREATE TRIGGER _500_member_count AFTER INSERT OR DELETE ON app.community_members FOR EACH ROW EXECUTE FUNCTION private.tg_community_members__count();
CREATE TRIGGER _900_log_change AFTER INSERT OR DELETE OR UPDATE ON app.community_members FOR EACH ROW EXECUTE FUNCTION private.tg_community_members__log_change();
CREATE TRIGGER webhook_capture AFTER INSERT OR DELETE ON app.community_members FOR EACH ROW EXECUTE FUNCTION private.webhook_capture_members();

-- =============================================================================
-- Policies
-- =============================================================================

CREATE POLICY "Communities are public" ON app.communities FOR SELECT TO anon, authenticated USING (true);

CREATE POLICY "Memberships are visible to signed-in users" ON app.community_members FOR SELECT TO authenticated USING (true);

CREATE POLICY "Users join communities as themselves" ON app.community_members FOR INSERT TO authenticated WITH CHECK (((member_node_id = ( SELECT app.my_node_id() AS my_node_id)) AND (role = 'member'::text)));

CREATE POLICY "Users leave communities as themselves" ON app.community_members FOR DELETE TO authenticated USING ((member_node_id = ( SELECT app.my_node_id() AS my_node_id)));

-- =============================================================================
-- Functions of api: what the gateway and the MCP server call, as the request's role
-- =============================================================================

CREATE FUNCTION api.communities_mine(page_limit integer DEFAULT 50, page_offset integer DEFAULT 0) RETURNS jsonb
    LANGUAGE plpgsql STABLE
    SET search_path TO 'pg_catalog'
    AS $$
declare
  me uuid := app.my_node_id();
  total bigint;
  items jsonb;
begin
  perform app.check_page(page_limit, page_offset);
  select count(*) into total from app.community_members m where m.member_node_id = me;
  select coalesce(jsonb_agg(item order by ord), '[]') into items from (
    select row_number() over (order by m.joined_at desc, c.id) as ord,
           app.community_json(c) || jsonb_build_object('joined_at', app.iso(m.joined_at), 'role', m.role) as item
      from app.community_members m
      join app.communities c on c.id = m.community_id
      where m.member_node_id = me
      order by m.joined_at desc, c.id
      limit page_limit offset page_offset
  ) page;
  return jsonb_build_object('data', items, 'pagination', app.pagination(total, page_limit, page_offset));
end;
$$;

COMMENT ON FUNCTION api.communities_mine(page_limit integer, page_offset integer) IS 'GET /api/mobile/communities: the caller''s communities with joined_at and role; newest membership first.';
GRANT EXECUTE ON FUNCTION api.communities_mine(page_limit integer, page_offset integer) TO authenticated;

CREATE FUNCTION api.communities_search(q text, page_limit integer DEFAULT 50, page_offset integer DEFAULT 0) RETURNS jsonb
    LANGUAGE plpgsql STABLE
    SET search_path TO 'pg_catalog'
    AS $$
declare
  me uuid := app.my_node_id();
  pattern text := app.contains_pattern(lower(q));
  total bigint;
  items jsonb;
begin
  if q is null or length(q) < 1 then
    raise exception 'q is required' using errcode = 'PT400', hint = 'invalid_query';
  end if;
  perform app.check_page(page_limit, page_offset);
  -- One scan: the page and the total together (the total only needs its own
  -- query when the page is empty, e.g. an offset past the end).
  with page as (
    select c.id, count(*) over () as total, row_number() over (order by lower(c.name), c.id) as ord
      from app.communities c
      where c.search_text like pattern
      order by lower(c.name), c.id
      limit page_limit offset page_offset
  )
  select coalesce(jsonb_agg(app.community_json(c) || jsonb_build_object(
           'is_member', m.role is not null, 'is_manager', coalesce(m.role = 'manager', false)
         ) order by n.ord), '[]'),
         max(n.total)
    into items, total
    from page n
    join app.communities c on c.id = n.id
    left join app.community_members m on m.community_id = c.id and m.member_node_id = me;
  if total is null then
    select count(*) into total from app.communities c where c.search_text like pattern;
  end if;
  return jsonb_build_object('data', items, 'pagination', app.pagination(total, page_limit, page_offset));
end;
$$;

COMMENT ON FUNCTION api.communities_search(q text, page_limit integer, page_offset integer) IS 'GET /api/mobile/communities/search: substring search of name, description and tags with is_member/is_manager; by name.';
GRANT EXECUTE ON FUNCTION api.communities_search(q text, page_limit integer, page_offset integer) TO authenticated;

CREATE FUNCTION api.community_get(community_id uuid) RETURNS jsonb
    LANGUAGE plpgsql STABLE
    SET search_path TO 'pg_catalog'
    AS $$
declare
  me uuid := app.my_node_id();
  result jsonb;
begin
  select app.community_json(c) || jsonb_build_object(
           'managers', (
             select coalesce(jsonb_agg(jsonb_build_object('id', mm.member_node_id, 'name', app.node_display_name(mm.member_node_id))
                                       order by mm.joined_at, mm.member_node_id), '[]')
               from app.community_members mm
               where mm.community_id = c.id and mm.role = 'manager'),
           'is_member', m.role is not null,
           'is_manager', coalesce(m.role = 'manager', false),
           'joined_at', app.iso(m.joined_at),
           'user_role', m.role
         )
    into result
    from app.communities c
    left join app.community_members m on m.community_id = c.id and m.member_node_id = me
    where c.id = community_get.community_id;
  if result is null then
    raise exception 'community not found' using errcode = 'PT404', hint = 'community_not_found';
  end if;
  return result;
end;
$$;

COMMENT ON FUNCTION api.community_get(community_id uuid) IS 'GET /api/mobile/communities/{id}: the community with its managers and the caller''s membership. PT404 when unknown.';
GRANT EXECUTE ON FUNCTION api.community_get(community_id uuid) TO authenticated;

CREATE FUNCTION api.community_update(community_id uuid, patch jsonb) RETURNS jsonb
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog'
    AS $$
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
$$;

COMMENT ON FUNCTION api.community_update(community_id uuid, patch jsonb) IS 'PATCH /api/mobile/communities/{id}: a manager changes what the patch names: image_path (an object of the community-images bucket in the community''s folder, or null to clear). PT403 not_community_manager, PT404 community_not_found, PT422 invalid_image_path.';
GRANT EXECUTE ON FUNCTION api.community_update(community_id uuid, patch jsonb) TO authenticated;

CREATE FUNCTION api.community_members(community_id uuid, page_limit integer DEFAULT 50, page_offset integer DEFAULT 0) RETURNS jsonb
    LANGUAGE plpgsql STABLE
    SET search_path TO 'pg_catalog'
    AS $$
declare
  total bigint;
  items jsonb;
begin
  perform app.check_page(page_limit, page_offset);
  select c.member_count into total from app.communities c where c.id = community_members.community_id;
  if not found then
    raise exception 'community not found' using errcode = 'PT404', hint = 'community_not_found';
  end if;
  with page as (
    -- Managers first, then by joining time: 'manager' sorts before 'member'
    -- (the only two roles, see the check on app.community_members.role), so
    -- ordering by role follows the roster index and stops after the page.
    select m.member_node_id, m.role, m.joined_at
      from app.community_members m
     where m.community_id = community_members.community_id
     order by m.role, m.joined_at, m.member_node_id
     limit page_limit offset page_offset
  ),
  -- the names of the page's members, in one call of the privacy rule
  names as (
    select n.node_id, n.name from app.node_display_names(array(select p.member_node_id from page p)) n
  )
  select coalesce(jsonb_agg(jsonb_build_object('id', p.member_node_id, 'role', p.role, 'joined_at', app.iso(p.joined_at),
                                               'name', n.name)
                            order by p.role, p.joined_at, p.member_node_id), '[]')
    into items
    from page p
    left join names n on n.node_id = p.member_node_id;
  return jsonb_build_object('data', items, 'pagination', app.pagination(total, page_limit, page_offset));
end;
$$;

COMMENT ON FUNCTION api.community_members(community_id uuid, page_limit integer, page_offset integer) IS 'GET /api/mobile/communities/{id}/members: member node ids, names, roles and joined_at; managers first, then oldest members.';
GRANT EXECUTE ON FUNCTION api.community_members(community_id uuid, page_limit integer, page_offset integer) TO authenticated;

CREATE FUNCTION api.community_join(community_id uuid) RETURNS jsonb
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog'
    AS $$
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
$$;

COMMENT ON FUNCTION api.community_join(community_id uuid) IS 'POST /api/mobile/communities/{id}/join: the caller joins as member. PT404 unknown community; PT400 already a member or no node; PT401 session_ended when the caller''s account is deleted meanwhile.';
GRANT EXECUTE ON FUNCTION api.community_join(community_id uuid) TO authenticated;

CREATE FUNCTION api.community_leave(community_id uuid) RETURNS jsonb
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog'
    AS $$
declare
  me uuid;
  left_node uuid;
  new_count integer;
begin
  perform app.require_community(community_id);
  me := app.require_my_node();
  delete from app.community_members m
    where m.community_id = community_leave.community_id and m.member_node_id = me
    returning m.member_node_id into left_node;
  if left_node is null then
    raise exception 'not a member of this community' using errcode = 'PT400', hint = 'not_a_member';
  end if;
  select c.member_count into new_count from app.communities c where c.id = community_leave.community_id;
  return jsonb_build_object('member_count', new_count);
end;
$$;

COMMENT ON FUNCTION api.community_leave(community_id uuid) IS 'POST /api/mobile/communities/{id}/leave: the caller leaves. PT404 unknown community; PT400 not a member, no node, or last manager.';
GRANT EXECUTE ON FUNCTION api.community_leave(community_id uuid) TO authenticated;

CREATE FUNCTION api.community_public(community_id uuid) RETURNS jsonb
    LANGUAGE plpgsql STABLE
    SET search_path TO 'pg_catalog'
    AS $$
declare
  result jsonb;
begin
  select app.community_json(c)
    into result
    from app.communities c
    where c.id = community_public.community_id;
  if result is null then
    raise exception 'community not found' using errcode = 'PT404', hint = 'community_not_found';
  end if;
  return result;
end;
$$;

COMMENT ON FUNCTION api.community_public(community_id uuid) IS 'GET /api/community/{id} (no credential): name, description, tags, member_count and timestamps. PT404 when unknown.';
GRANT EXECUTE ON FUNCTION api.community_public(community_id uuid) TO anon;
GRANT EXECUTE ON FUNCTION api.community_public(community_id uuid) TO authenticated;

CREATE FUNCTION api.community_page(community_id uuid, public_url text) RETURNS jsonb
    LANGUAGE plpgsql STABLE SECURITY DEFINER
    SET search_path TO 'pg_catalog'
    AS $$
declare
  community app.communities;
  base text := rtrim(public_url, '/');
begin
  select c.* into community from app.communities c
   where c.id = community_page.community_id and private.community_events_public(c.id);
  if community.id is null then
    raise exception 'community not found' using errcode = 'PT404', hint = 'community_not_found';
  end if;
  return jsonb_build_object(
    'name', community.name,
    'description', community.description,
    'url', base || '/c/' || community.id,
    'calendar_path', '/c/' || community.id || '/calendar.ics',
    'events', (select coalesce(jsonb_agg(jsonb_build_object(
                        'title', e.title, 'date', app.iso(e.starts_at),
                        'end', app.iso(private.event_effective_end(e.starts_at, e.ends_at)),
                        'timezone', e.timezone,
                        'path', '/e/' || e.shortlink) order by e.starts_at, e.id), '[]'::jsonb)
                 from (select * from app.events x
                        where x.community_id = community.id
                          and private.event_effective_end(x.starts_at, x.ends_at) >= now()
                        order by x.starts_at, x.id
                        limit 50) e));
end;
$$;

COMMENT ON FUNCTION api.community_page(community_id uuid, public_url text) IS 'GET /c/{community_id} (no credential): the community''s public page, the organizer named by its events'' previews: name, description, url, calendar_path, and its next events (effective end not past, soonest first, at most 50: title, date, end, timezone, path). PT404 community_not_found for an unknown or draft community.';
GRANT EXECUTE ON FUNCTION api.community_page(community_id uuid, public_url text) TO anon;
GRANT EXECUTE ON FUNCTION api.community_page(community_id uuid, public_url text) TO authenticated;

-- =============================================================================
-- Helpers (private, app, identity): internal helpers and trigger functions; request roles run only those granted here
-- =============================================================================

CREATE FUNCTION app.community_json(c app.communities) RETURNS jsonb
    LANGUAGE sql STABLE
    AS $$
    select pg_catalog.jsonb_build_object(
      'id', c.id, 'name', c.name, 'description', c.description, 'tags', pg_catalog.to_jsonb(c.tags),
      'member_count', c.member_count, 'created_at', app.iso(c.created_at), 'updated_at', app.iso(c.updated_at),
      'image_url', app.storage_public_url(c.image_object_id))
  $$;

COMMENT ON FUNCTION app.community_json(c app.communities) IS 'id, name, description, tags, member_count, created_at, updated_at, image_url of a community (CommunityListItem''s common part; inlined by the planner).';
GRANT EXECUTE ON FUNCTION app.community_json(c app.communities) TO anon;
GRANT EXECUTE ON FUNCTION app.community_json(c app.communities) TO authenticated;

CREATE FUNCTION app.require_community(community_id uuid) RETURNS void
    LANGUAGE plpgsql STABLE
    SET search_path TO 'pg_catalog'
    AS $$
begin
  if not exists (select from app.communities c where c.id = require_community.community_id) then
    raise exception 'community not found' using errcode = 'PT404', hint = 'community_not_found';
  end if;
end;
$$;

GRANT EXECUTE ON FUNCTION app.require_community(community_id uuid) TO authenticated;

CREATE FUNCTION private.is_community_manager(community_id uuid, user_id uuid) RETURNS boolean
    LANGUAGE sql STABLE SECURITY DEFINER
    SET search_path TO 'pg_catalog'
    AS $$
    select exists (
      select from app.community_members m
        join app.profiles p on p.node_id = m.member_node_id
       where m.community_id = is_community_manager.community_id
         and p.id = is_community_manager.user_id
         and m.role = 'manager')
  $$;

COMMENT ON FUNCTION private.is_community_manager(community_id uuid, user_id uuid) IS 'Whether the user is a manager of the community.';
GRANT EXECUTE ON FUNCTION private.is_community_manager(community_id uuid, user_id uuid) TO authenticated;

CREATE FUNCTION private.tg_communities__search_text() RETURNS trigger
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog'
    AS $$
begin
  -- chr(31) (unit separator) keeps a query from matching across two fields.
  new.search_text := lower(concat_ws(chr(31), new.name, new.description, array_to_string(new.tags, chr(31))));
  return new;
end;
$$;


CREATE FUNCTION private.tg_communities__storage_purge() RETURNS trigger
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog'
    AS $$
begin
  perform private.storage_purge_enqueue('community', old.id);
  return null;
end;
$$;
COMMENT ON FUNCTION private.tg_communities__storage_purge() IS 'Trigger: a community deleted, the objects of its storage folder are deleted by a storage_purge job.';


CREATE FUNCTION private.tg_community_members__keep_a_manager() RETURNS trigger
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog'
    AS $$
declare
  community_found boolean;
begin
  if old.role <> 'manager' or (tg_op = 'UPDATE' and new.role = 'manager') then
    return coalesce(new, old);
  end if;
  -- Serialise membership changes of this community, then count afresh.
  perform from app.communities c where c.id = old.community_id for update;
  community_found := found;
  if community_found and not exists (
    select from app.community_members m
    where m.community_id = old.community_id and m.role = 'manager' and m.member_node_id <> old.member_node_id
  ) then
    raise exception 'the last manager cannot leave the community' using errcode = 'PT400', hint = 'last_manager';
  end if;
  return coalesce(new, old);
end;
$$;
COMMENT ON FUNCTION private.tg_community_members__keep_a_manager() IS 'Trigger: refuses to remove or demote the last manager of a community (PT400). Deleting the community itself is allowed.';


CREATE FUNCTION private.tg_community_members__count() RETURNS trigger
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog'
    AS $$
begin
  if tg_op = 'INSERT' then
    update app.communities set member_count = member_count + 1 where id = new.community_id;
  elsif tg_op = 'DELETE' then
    update app.communities set member_count = member_count - 1 where id = old.community_id;
  end if;
  return null;
end;
$$;
COMMENT ON FUNCTION private.tg_community_members__count() IS 'Trigger: keeps communities.member_count equal to the number of membership rows.';


CREATE FUNCTION private.caller_community_ids() RETURNS SETOF uuid
    LANGUAGE sql STABLE SECURITY DEFINER
    SET search_path TO 'pg_catalog'
    AS $$
    select m.community_id
      from app.community_members m
     where m.member_node_id = app.my_node_id()
  $$;
COMMENT ON FUNCTION private.caller_community_ids() IS 'The communities the signed-in user belongs to (as member or manager).';
GRANT EXECUTE ON FUNCTION private.caller_community_ids() TO authenticated;

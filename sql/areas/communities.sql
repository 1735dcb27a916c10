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
-- Its tables (created and altered by the migrations; their comments, row-level
-- security, policies, grants and triggers are below):
--   app.communities, app.community_members
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

CREATE OR REPLACE FUNCTION api.communities_mine(page_limit integer DEFAULT 50, page_offset integer DEFAULT 0)
 RETURNS jsonb
 LANGUAGE plpgsql
 STABLE
 SET search_path TO 'pg_catalog'
AS $function$
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
$function$;
comment on function api.communities_mine(integer,integer) is 'GET /api/mobile/communities: the caller''s communities with joined_at and role; newest membership first.';
grant execute on function api.communities_mine(integer,integer) to authenticated;

CREATE OR REPLACE FUNCTION api.communities_search(q text, page_limit integer DEFAULT 50, page_offset integer DEFAULT 0)
 RETURNS jsonb
 LANGUAGE plpgsql
 STABLE
 SET search_path TO 'pg_catalog'
AS $function$
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
$function$;
comment on function api.communities_search(text,integer,integer) is 'GET /api/mobile/communities/search: substring search of name, description and tags with is_member/is_manager; by name.';
grant execute on function api.communities_search(text,integer,integer) to authenticated;

CREATE OR REPLACE FUNCTION api.community_get(community_id uuid)
 RETURNS jsonb
 LANGUAGE plpgsql
 STABLE
 SET search_path TO 'pg_catalog'
AS $function$
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
$function$;
comment on function api.community_get(uuid) is 'GET /api/mobile/communities/{id}: the community with its managers and the caller''s membership. PT404 when unknown.';
grant execute on function api.community_get(uuid) to authenticated;

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
comment on function api.community_join(uuid) is 'POST /api/mobile/communities/{id}/join: the caller joins as member. PT404 unknown community; PT400 already a member or no node; PT401 session_ended when the caller''s account is deleted meanwhile.';
grant execute on function api.community_join(uuid) to authenticated;

CREATE OR REPLACE FUNCTION api.community_leave(community_id uuid)
 RETURNS jsonb
 LANGUAGE plpgsql
 SET search_path TO 'pg_catalog'
AS $function$
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
$function$;
comment on function api.community_leave(uuid) is 'POST /api/mobile/communities/{id}/leave: the caller leaves. PT404 unknown community; PT400 not a member, no node, or last manager.';
grant execute on function api.community_leave(uuid) to authenticated;

CREATE OR REPLACE FUNCTION api.community_members(community_id uuid, page_limit integer DEFAULT 50, page_offset integer DEFAULT 0)
 RETURNS jsonb
 LANGUAGE plpgsql
 STABLE
 SET search_path TO 'pg_catalog'
AS $function$
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
$function$;
comment on function api.community_members(uuid,integer,integer) is 'GET /api/mobile/communities/{id}/members: member node ids, names, roles and joined_at; managers first, then oldest members.';
grant execute on function api.community_members(uuid,integer,integer) to authenticated;

CREATE OR REPLACE FUNCTION api.community_page(community_id uuid, public_url text)
 RETURNS jsonb
 LANGUAGE plpgsql
 STABLE SECURITY DEFINER
 SET search_path TO 'pg_catalog'
AS $function$
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
$function$;
comment on function api.community_page(uuid,text) is 'GET /c/{community_id} (no credential): the community''s public page, the organizer named by its events'' previews: name, description, url, calendar_path, and its next events (effective end not past, soonest first, at most 50: title, date, end, timezone, path). PT404 community_not_found for an unknown or draft community.';
grant execute on function api.community_page(uuid,text) to anon, authenticated;

CREATE OR REPLACE FUNCTION api.community_public(community_id uuid)
 RETURNS jsonb
 LANGUAGE plpgsql
 STABLE
 SET search_path TO 'pg_catalog'
AS $function$
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
$function$;
comment on function api.community_public(uuid) is 'GET /api/community/{id} (no credential): name, description, tags, member_count and timestamps. PT404 when unknown.';
grant execute on function api.community_public(uuid) to anon, authenticated;

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
comment on function api.community_update(uuid,jsonb) is 'PATCH /api/mobile/communities/{id}: a manager changes what the patch names: image_path (an object of the community-images bucket in the community''s folder, or null to clear). PT403 not_community_manager, PT404 community_not_found, PT422 invalid_image_path.';
grant execute on function api.community_update(uuid,jsonb) to authenticated;

-- -----------------------------------------------------------------------------
-- Functions of app: helpers of policies and list functions
-- -----------------------------------------------------------------------------

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
comment on function app.community_json(app.communities) is 'id, name, description, tags, member_count, created_at, updated_at, image_url of a community (CommunityListItem''s common part; inlined by the planner).';
grant execute on function app.community_json(app.communities) to anon, authenticated;

CREATE OR REPLACE FUNCTION app.require_community(community_id uuid)
 RETURNS void
 LANGUAGE plpgsql
 STABLE
 SET search_path TO 'pg_catalog'
AS $function$
begin
  if not exists (select from app.communities c where c.id = require_community.community_id) then
    raise exception 'community not found' using errcode = 'PT404', hint = 'community_not_found';
  end if;
end;
$function$;
grant execute on function app.require_community(uuid) to authenticated;

-- -----------------------------------------------------------------------------
-- Functions of private: internal helpers and trigger functions (request roles
-- run only those granted here)
-- -----------------------------------------------------------------------------

CREATE OR REPLACE FUNCTION private.caller_community_ids()
 RETURNS SETOF uuid
 LANGUAGE sql
 STABLE SECURITY DEFINER
 SET search_path TO 'pg_catalog'
AS $function$
    select m.community_id
      from app.community_members m
     where m.member_node_id = app.my_node_id()
  $function$;
comment on function private.caller_community_ids() is 'The communities the signed-in user belongs to (as member or manager).';
grant execute on function private.caller_community_ids() to authenticated;

CREATE OR REPLACE FUNCTION private.is_community_manager(community_id uuid, user_id uuid)
 RETURNS boolean
 LANGUAGE sql
 STABLE SECURITY DEFINER
 SET search_path TO 'pg_catalog'
AS $function$
    select exists (
      select from app.community_members m
        join app.profiles p on p.node_id = m.member_node_id
       where m.community_id = is_community_manager.community_id
         and p.id = is_community_manager.user_id
         and m.role = 'manager')
  $function$;
comment on function private.is_community_manager(uuid,uuid) is 'Whether the user is a manager of the community.';
grant execute on function private.is_community_manager(uuid,uuid) to authenticated;

CREATE OR REPLACE FUNCTION private.tg_communities__search_text()
 RETURNS trigger
 LANGUAGE plpgsql
 SET search_path TO 'pg_catalog'
AS $function$
begin
  -- chr(31) (unit separator) keeps a query from matching across two fields.
  new.search_text := lower(concat_ws(chr(31), new.name, new.description, array_to_string(new.tags, chr(31))));
  return new;
end;
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
comment on function private.tg_communities__storage_purge() is 'Trigger: a community deleted, the objects of its storage folder are deleted by a storage_purge job.';

CREATE OR REPLACE FUNCTION private.tg_community_members__count()
 RETURNS trigger
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog'
AS $function$
begin
  if tg_op = 'INSERT' then
    update app.communities set member_count = member_count + 1 where id = new.community_id;
  elsif tg_op = 'DELETE' then
    update app.communities set member_count = member_count - 1 where id = old.community_id;
  end if;
  return null;
end;
$function$;
comment on function private.tg_community_members__count() is 'Trigger: keeps communities.member_count equal to the number of membership rows.';

CREATE OR REPLACE FUNCTION private.tg_community_members__keep_a_manager()
 RETURNS trigger
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog'
AS $function$
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
$function$;
comment on function private.tg_community_members__keep_a_manager() is 'Trigger: refuses to remove or demote the last manager of a community (PT400). Deleting the community itself is allowed.';

-- -----------------------------------------------------------------------------
-- Tables: comments, row-level security, policies, grants, triggers
-- -----------------------------------------------------------------------------

-- app.communities
comment on table app.communities is 'Communities. member_count is kept by a trigger on community_members.';
comment on column app.communities.timezone is 'The community''s IANA time zone, or null (unknown): its events made without a zone of their own or of their venue take it. Set by admin.set_community_timezone.';
alter table app.communities enable row level security;
drop policy if exists "Communities are public" on app.communities;
create policy "Communities are public" on app.communities
  as permissive for select to anon, authenticated
  using (true);
grant select (accepts_handoffs, created_at, description, id, image_object_id, is_draft, is_sandbox, member_count, name, node_id, search_text, tags, timezone, updated_at) on table app.communities to anon, authenticated;
drop trigger if exists _100_set_updated_at on app.communities;
CREATE TRIGGER _100_set_updated_at BEFORE UPDATE ON app.communities FOR EACH ROW EXECUTE FUNCTION private.tg__set_updated_at();
drop trigger if exists _200_search_text on app.communities;
CREATE TRIGGER _200_search_text BEFORE INSERT OR UPDATE OF name, description, tags ON app.communities FOR EACH ROW EXECUTE FUNCTION private.tg_communities__search_text();
drop trigger if exists _900_storage_purge on app.communities;
CREATE TRIGGER _900_storage_purge AFTER DELETE ON app.communities FOR EACH ROW EXECUTE FUNCTION private.tg_communities__storage_purge();

-- app.community_members
comment on table app.community_members is 'Memberships: a user node in a community, as member or manager.';
alter table app.community_members enable row level security;
drop policy if exists "Memberships are visible to signed-in users" on app.community_members;
create policy "Memberships are visible to signed-in users" on app.community_members
  as permissive for select to authenticated
  using (true);
drop policy if exists "Users join communities as themselves" on app.community_members;
create policy "Users join communities as themselves" on app.community_members
  as permissive for insert to authenticated
  with check (((member_node_id = ( SELECT app.my_node_id() AS my_node_id)) AND (role = 'member'::text)));
drop policy if exists "Users leave communities as themselves" on app.community_members;
create policy "Users leave communities as themselves" on app.community_members
  as permissive for delete to authenticated
  using ((member_node_id = ( SELECT app.my_node_id() AS my_node_id)));
grant select, delete, insert (community_id, member_node_id) on table app.community_members to authenticated;
drop trigger if exists _100_keep_a_manager on app.community_members;
CREATE TRIGGER _100_keep_a_manager BEFORE DELETE OR UPDATE OF role ON app.community_members FOR EACH ROW EXECUTE FUNCTION private.tg_community_members__keep_a_manager();
drop trigger if exists _500_member_count on app.community_members;
CREATE TRIGGER _500_member_count AFTER INSERT OR DELETE ON app.community_members FOR EACH ROW EXECUTE FUNCTION private.tg_community_members__count();
drop trigger if exists _900_log_change on app.community_members;
CREATE TRIGGER _900_log_change AFTER INSERT OR DELETE OR UPDATE ON app.community_members FOR EACH ROW EXECUTE FUNCTION private.tg_community_members__log_change();
drop trigger if exists webhook_capture on app.community_members;
CREATE TRIGGER webhook_capture AFTER INSERT OR DELETE ON app.community_members FOR EACH ROW EXECUTE FUNCTION private.webhook_capture_members();

-- =============================================================================
-- Connections between members
-- =============================================================================
-- A connection is one member's record of another (type, notes, strength,
-- tags, the event and hats it was made with). Row-level security: a user reads,
-- creates and changes only their own; the owner never changes. Hats named on a
-- connection must be the owner's and the target's (a trigger), and notes and
-- tags are bounded in the table itself.
--
-- Code: gateway/routes/connections.ts
-- pgTAP: supabase/tests/connections.test.sql
--
-- Its tables (created and altered by the migrations; their comments, row-level
-- security, policies, grants and triggers are below):
--   app.connections
--
-- Its types (made by the migrations):
--   api.connection
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

CREATE OR REPLACE FUNCTION api.connection_create(target_node_id uuid, connection_type text DEFAULT NULL::text, event_id uuid DEFAULT NULL::uuid, my_hat_id uuid DEFAULT NULL::uuid, their_hat_id uuid DEFAULT NULL::uuid, notes text DEFAULT NULL::text, strength text DEFAULT NULL::text, tags text[] DEFAULT NULL::text[])
 RETURNS SETOF api.connection
 LANGUAGE plpgsql
 SET search_path TO 'pg_catalog'
AS $function$
declare
  owner_node uuid := app.my_node_id();
  found_event app.events;
begin
  if owner_node is null then
    raise exception 'user node not found' using errcode = 'PT422', hint = 'user_node_not_found';
  end if;
  if not exists (select from app.nodes n where n.id = connection_create.target_node_id) then
    raise exception 'target node not found' using errcode = 'PT422', hint = 'target_node_not_found';
  end if;
  if connection_create.event_id is not null then
    found_event := private.find_event(connection_create.event_id);
    if found_event.id is null then
      raise exception 'event not found' using errcode = 'PT422', hint = 'event_not_found';
    end if;
  end if;
  return query
    insert into app.connections as c
      (owner_node_id, target_node_id, connection_type, event_id, my_hat_id, their_hat_id, notes, strength, tags)
    values (
      owner_node, connection_create.target_node_id,
      coalesce(connection_create.connection_type, case when found_event.id is not null then 'in_event' else 'async' end),
      found_event.id, connection_create.my_hat_id, connection_create.their_hat_id,
      connection_create.notes, connection_create.strength, coalesce(connection_create.tags, '{}')
    )
    returning c.id, c.owner_node_id, c.target_node_id, c.connection_type, c.event_id, c.my_hat_id,
              c.their_hat_id, c.notes, c.strength, c.tags, c.created_at, c.updated_at;
end;
$function$;
comment on function api.connection_create(uuid,text,uuid,uuid,uuid,text,text,text[]) is 'POST /api/mobile/connections: a connection owned by the caller''s node. connection_type defaults to in_event with an event, else async. PT422 for an unknown target node or event, or a hat that is not the caller''s (their_hat_id: not the target''s).';
grant execute on function api.connection_create(uuid,text,uuid,uuid,uuid,text,text,text[]) to authenticated;

CREATE OR REPLACE FUNCTION api.connection_get(id uuid)
 RETURNS SETOF api.connection
 LANGUAGE plpgsql
 STABLE
 SET search_path TO 'pg_catalog'
AS $function$
begin
  return query
    select c.id, c.owner_node_id, c.target_node_id, c.connection_type, c.event_id, c.my_hat_id,
           c.their_hat_id, c.notes, c.strength, c.tags, c.created_at, c.updated_at
      from app.connections c
     where c.id = connection_get.id;
  if not found then
    raise exception 'connection not found' using errcode = 'PT404', hint = 'connection_not_found';
  end if;
end;
$function$;
comment on function api.connection_get(uuid) is 'GET /api/mobile/connections/{id}: one of the caller''s connections. PT404 when unknown or someone else''s.';
grant execute on function api.connection_get(uuid) to authenticated;

CREATE OR REPLACE FUNCTION api.connection_update(id uuid, patch jsonb)
 RETURNS SETOF api.connection
 LANGUAGE plpgsql
 SET search_path TO 'pg_catalog'
AS $function$
begin
  return query
    update app.connections c
       set notes = case when patch ? 'notes' then patch ->> 'notes' else c.notes end,
           strength = case when patch ? 'strength' then patch ->> 'strength' else c.strength end,
           tags = case
                    when not patch ? 'tags' then c.tags
                    when jsonb_typeof(patch -> 'tags') = 'array'
                      then array(select jsonb_array_elements_text(patch -> 'tags'))
                    else '{}'
                  end
     where c.id = connection_update.id
    returning c.id, c.owner_node_id, c.target_node_id, c.connection_type, c.event_id, c.my_hat_id,
              c.their_hat_id, c.notes, c.strength, c.tags, c.created_at, c.updated_at;
  if not found then
    raise exception 'connection not found' using errcode = 'PT404', hint = 'connection_not_found';
  end if;
end;
$function$;
comment on function api.connection_update(uuid,jsonb) is 'PATCH /api/mobile/connections/{id}: changes notes, strength and tags given in the patch. PT404 when unknown or someone else''s.';
grant execute on function api.connection_update(uuid,jsonb) to authenticated;

CREATE OR REPLACE FUNCTION api.connections_list()
 RETURNS SETOF api.connection
 LANGUAGE sql
 STABLE
 SET search_path TO 'pg_catalog'
AS $function$
    select c.id, c.owner_node_id, c.target_node_id, c.connection_type, c.event_id, c.my_hat_id,
           c.their_hat_id, c.notes, c.strength, c.tags, c.created_at, c.updated_at
      from app.connections c
     order by c.created_at desc, c.id desc
  $function$;
comment on function api.connections_list() is 'GET /api/mobile/connections: the caller''s connections, newest first.';
grant execute on function api.connections_list() to authenticated;

CREATE OR REPLACE FUNCTION api.connections_recent()
 RETURNS SETOF api.connection
 LANGUAGE sql
 STABLE
 SET search_path TO 'pg_catalog'
AS $function$
    select c.id, c.owner_node_id, c.target_node_id, c.connection_type, c.event_id, c.my_hat_id,
           c.their_hat_id, c.notes, c.strength, c.tags, c.created_at, c.updated_at
      from app.connections c
     order by c.created_at desc, c.id desc
     limit 20
  $function$;
comment on function api.connections_recent() is 'GET /api/mobile/connections/recent: the caller''s 20 most recently created connections, newest first.';
grant execute on function api.connections_recent() to authenticated;

CREATE OR REPLACE FUNCTION api.event_connections(event_id uuid)
 RETURNS SETOF api.connection
 LANGUAGE plpgsql
 STABLE
 SET search_path TO 'pg_catalog'
AS $function$
declare
  found_event app.events := private.find_event(event_connections.event_id);
begin
  if found_event.id is null then
    raise exception 'event not found' using errcode = 'PT404', hint = 'event_not_found';
  end if;
  return query
    select c.id, c.owner_node_id, c.target_node_id, c.connection_type, c.event_id, c.my_hat_id,
           c.their_hat_id, c.notes, c.strength, c.tags, c.created_at, c.updated_at
      from app.connections c
     where c.event_id = found_event.id
       and c.owner_node_id = (select app.my_node_id())
     order by c.created_at desc, c.id desc;
end;
$function$;
comment on function api.event_connections(uuid) is 'GET /api/mobile/events/{event_id}/connections: the caller''s connections made at the event, newest first. PT404 unknown event.';
grant execute on function api.event_connections(uuid) to authenticated;

-- -----------------------------------------------------------------------------
-- Functions of private: internal helpers and trigger functions (request roles
-- run only those granted here)
-- -----------------------------------------------------------------------------

CREATE OR REPLACE FUNCTION private.tg_connections__check_hats()
 RETURNS trigger
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog'
AS $function$
begin
  if new.my_hat_id is not null and not exists (
    select from app.hats h join app.profiles p on p.id = h.user_id
     where h.id = new.my_hat_id and p.node_id = new.owner_node_id
  ) then
    raise exception 'my_hat_id is not one of your hats' using errcode = 'PT422', hint = 'invalid_hat';
  end if;
  if new.their_hat_id is not null and not exists (
    select from app.hats h join app.profiles p on p.id = h.user_id
     where h.id = new.their_hat_id and p.node_id = new.target_node_id
  ) then
    raise exception 'their_hat_id is not a hat of the target user' using errcode = 'PT422', hint = 'invalid_their_hat';
  end if;
  return new;
end;
$function$;
comment on function private.tg_connections__check_hats() is 'Trigger: my_hat_id must be the owner''s hat and their_hat_id the target''s (PT422).';

-- -----------------------------------------------------------------------------
-- Tables: comments, row-level security, policies, grants, triggers
-- -----------------------------------------------------------------------------

-- app.connections
comment on table app.connections is 'Connections a user (owner node) made with another node, optionally at an event and wearing hats.';
alter table app.connections enable row level security;
drop policy if exists "Users can create their own connections" on app.connections;
create policy "Users can create their own connections" on app.connections
  as permissive for insert to authenticated
  with check ((owner_node_id = ( SELECT app.my_node_id() AS my_node_id)));
drop policy if exists "Users can read their own connections" on app.connections;
create policy "Users can read their own connections" on app.connections
  as permissive for select to authenticated
  using ((owner_node_id = ( SELECT app.my_node_id() AS my_node_id)));
drop policy if exists "Users can update their own connections" on app.connections;
create policy "Users can update their own connections" on app.connections
  as permissive for update to authenticated
  using ((owner_node_id = ( SELECT app.my_node_id() AS my_node_id)))
  with check ((owner_node_id = ( SELECT app.my_node_id() AS my_node_id)));
grant select, insert (connection_type, event_id, my_hat_id, notes, owner_node_id, strength, tags, target_node_id, their_hat_id), update (notes, strength, tags) on table app.connections to authenticated;
drop trigger if exists _100_set_updated_at on app.connections;
CREATE TRIGGER _100_set_updated_at BEFORE UPDATE ON app.connections FOR EACH ROW EXECUTE FUNCTION private.tg__set_updated_at();
drop trigger if exists _200_check_hats on app.connections;
CREATE TRIGGER _200_check_hats BEFORE INSERT OR UPDATE OF my_hat_id, their_hat_id, owner_node_id, target_node_id ON app.connections FOR EACH ROW EXECUTE FUNCTION private.tg_connections__check_hats();

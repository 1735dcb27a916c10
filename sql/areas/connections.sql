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
-- The whole source of this area, after the areas before it in
-- sql/areas/areas.json: types, tables, indexes, triggers, policies, the api
-- functions, the helpers. To change it: edit it here, then
-- `npm run db -- areas --diff` writes the migration (docs/dba.md).
-- =============================================================================

-- =============================================================================
-- Types
-- =============================================================================

CREATE TYPE api.connection AS (
	id uuid,
	owner_node_id uuid,
	target_node_id uuid,
	connection_type text,
	event_id uuid,
	my_hat_id uuid,
	their_hat_id uuid,
	notes text,
	strength text,
	tags text[],
	created_at timestamp with time zone,
	updated_at timestamp with time zone
);

-- =============================================================================
-- Tables
-- =============================================================================

CREATE TABLE app.connections (
    id uuid DEFAULT gen_random_uuid() NOT NULL,
    owner_node_id uuid NOT NULL,
    target_node_id uuid NOT NULL,
    connection_type text DEFAULT 'async'::text NOT NULL,
    event_id uuid,
    my_hat_id uuid,
    their_hat_id uuid,
    notes text,
    strength text,
    tags text[] DEFAULT '{}'::text[] NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    updated_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT connections_connection_type_check CHECK ((connection_type = ANY (ARRAY['in_event'::text, 'post_event'::text, 'async'::text]))),
    CONSTRAINT connections_notes_check CHECK ((length(notes) <= 5000)),
    CONSTRAINT connections_strength_check CHECK ((strength = ANY (ARRAY['weak'::text, 'medium'::text, 'strong'::text]))),
    CONSTRAINT connections_tags_check CHECK ((cardinality(tags) <= 50)),
    CONSTRAINT connections_pkey PRIMARY KEY (id),
    CONSTRAINT connections_event_id_fkey FOREIGN KEY (event_id) REFERENCES app.events(id) ON DELETE SET NULL,
    CONSTRAINT connections_my_hat_id_fkey FOREIGN KEY (my_hat_id) REFERENCES app.hats(id) ON DELETE SET NULL,
    CONSTRAINT connections_owner_node_id_fkey FOREIGN KEY (owner_node_id) REFERENCES app.nodes(id) ON DELETE CASCADE,
    CONSTRAINT connections_target_node_id_fkey FOREIGN KEY (target_node_id) REFERENCES app.nodes(id) ON DELETE CASCADE,
    CONSTRAINT connections_their_hat_id_fkey FOREIGN KEY (their_hat_id) REFERENCES app.hats(id) ON DELETE SET NULL
);
ALTER TABLE app.connections
    ADD CONSTRAINT connections_tags_size CHECK ((octet_length(array_to_string(tags, ''::text)) <= 5000)) NOT VALID;
COMMENT ON TABLE app.connections IS 'Connections a user (owner node) made with another node, optionally at an event and wearing hats.';
ALTER TABLE app.connections ENABLE ROW LEVEL SECURITY;
GRANT SELECT ON TABLE app.connections TO authenticated;
GRANT INSERT(owner_node_id) ON TABLE app.connections TO authenticated;
GRANT INSERT(target_node_id) ON TABLE app.connections TO authenticated;
GRANT INSERT(connection_type) ON TABLE app.connections TO authenticated;
GRANT INSERT(event_id) ON TABLE app.connections TO authenticated;
GRANT INSERT(my_hat_id) ON TABLE app.connections TO authenticated;
GRANT INSERT(their_hat_id) ON TABLE app.connections TO authenticated;
GRANT INSERT(notes),UPDATE(notes) ON TABLE app.connections TO authenticated;
GRANT INSERT(strength),UPDATE(strength) ON TABLE app.connections TO authenticated;
GRANT INSERT(tags),UPDATE(tags) ON TABLE app.connections TO authenticated;

-- =============================================================================
-- Indexes
-- =============================================================================

CREATE INDEX connections_event_idx ON app.connections USING btree (event_id) WHERE (event_id IS NOT NULL);
CREATE INDEX connections_my_hat_idx ON app.connections USING btree (my_hat_id) WHERE (my_hat_id IS NOT NULL);
CREATE INDEX connections_owner_event_idx ON app.connections USING btree (owner_node_id, event_id) WHERE (event_id IS NOT NULL);
CREATE INDEX connections_owner_idx ON app.connections USING btree (owner_node_id, created_at DESC, id);
CREATE INDEX connections_target_idx ON app.connections USING btree (target_node_id);
CREATE INDEX connections_their_hat_idx ON app.connections USING btree (their_hat_id) WHERE (their_hat_id IS NOT NULL);

-- =============================================================================
-- Triggers
-- =============================================================================

CREATE TRIGGER _100_set_updated_at BEFORE UPDATE ON app.connections FOR EACH ROW EXECUTE FUNCTION private.tg__set_updated_at();
CREATE TRIGGER _200_check_hats BEFORE INSERT OR UPDATE OF my_hat_id, their_hat_id, owner_node_id, target_node_id ON app.connections FOR EACH ROW EXECUTE FUNCTION private.tg_connections__check_hats();

-- =============================================================================
-- Policies
-- =============================================================================

CREATE POLICY "Users can create their own connections" ON app.connections FOR INSERT TO authenticated WITH CHECK ((owner_node_id = ( SELECT app.my_node_id() AS my_node_id)));

CREATE POLICY "Users can read their own connections" ON app.connections FOR SELECT TO authenticated USING ((owner_node_id = ( SELECT app.my_node_id() AS my_node_id)));

CREATE POLICY "Users can update their own connections" ON app.connections FOR UPDATE TO authenticated USING ((owner_node_id = ( SELECT app.my_node_id() AS my_node_id))) WITH CHECK ((owner_node_id = ( SELECT app.my_node_id() AS my_node_id)));

-- =============================================================================
-- Functions of api: what the gateway and the MCP server call, as the request's role
-- =============================================================================

CREATE FUNCTION api.connections_list() RETURNS SETOF api.connection
    LANGUAGE sql STABLE
    SET search_path TO 'pg_catalog'
    AS $$
    select c.id, c.owner_node_id, c.target_node_id, c.connection_type, c.event_id, c.my_hat_id,
           c.their_hat_id, c.notes, c.strength, c.tags, c.created_at, c.updated_at
      from app.connections c
     order by c.created_at desc, c.id desc
  $$;
COMMENT ON FUNCTION api.connections_list() IS 'GET /api/mobile/connections: the caller''s connections, newest first.';
GRANT EXECUTE ON FUNCTION api.connections_list() TO authenticated;

CREATE FUNCTION api.connections_recent() RETURNS SETOF api.connection
    LANGUAGE sql STABLE
    SET search_path TO 'pg_catalog'
    AS $$
    select c.id, c.owner_node_id, c.target_node_id, c.connection_type, c.event_id, c.my_hat_id,
           c.their_hat_id, c.notes, c.strength, c.tags, c.created_at, c.updated_at
      from app.connections c
     order by c.created_at desc, c.id desc
     limit 20
  $$;
COMMENT ON FUNCTION api.connections_recent() IS 'GET /api/mobile/connections/recent: the caller''s 20 most recently created connections, newest first.';
GRANT EXECUTE ON FUNCTION api.connections_recent() TO authenticated;

CREATE FUNCTION api.connection_create(target_node_id uuid, connection_type text DEFAULT NULL::text, event_id uuid DEFAULT NULL::uuid, my_hat_id uuid DEFAULT NULL::uuid, their_hat_id uuid DEFAULT NULL::uuid, notes text DEFAULT NULL::text, strength text DEFAULT NULL::text, tags text[] DEFAULT NULL::text[]) RETURNS SETOF api.connection
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog'
    AS $$
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
$$;

COMMENT ON FUNCTION api.connection_create(target_node_id uuid, connection_type text, event_id uuid, my_hat_id uuid, their_hat_id uuid, notes text, strength text, tags text[]) IS 'POST /api/mobile/connections: a connection owned by the caller''s node. connection_type defaults to in_event with an event, else async. PT422 for an unknown target node or event, or a hat that is not the caller''s (their_hat_id: not the target''s).';
GRANT EXECUTE ON FUNCTION api.connection_create(target_node_id uuid, connection_type text, event_id uuid, my_hat_id uuid, their_hat_id uuid, notes text, strength text, tags text[]) TO authenticated;

CREATE FUNCTION api.connection_get(id uuid) RETURNS SETOF api.connection
    LANGUAGE plpgsql STABLE
    SET search_path TO 'pg_catalog'
    AS $$
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
$$;

COMMENT ON FUNCTION api.connection_get(id uuid) IS 'GET /api/mobile/connections/{id}: one of the caller''s connections. PT404 when unknown or someone else''s.';
GRANT EXECUTE ON FUNCTION api.connection_get(id uuid) TO authenticated;

CREATE FUNCTION api.connection_update(id uuid, patch jsonb, if_match text[] DEFAULT NULL::text[]) RETURNS SETOF api.connection
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog'
    AS $$
declare
  current_row app.connections;
begin
  if connection_update.if_match is not null then
    select c.* into current_row from app.connections c where c.id = connection_update.id for no key update;
    if found then
      perform app.check_if_match(connection_update.if_match, current_row.updated_at, private.connection_json(current_row));
    end if;
  end if;
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
$$;

COMMENT ON FUNCTION api.connection_update(id uuid, patch jsonb, if_match text[]) IS 'PATCH /api/mobile/connections/{id}: changes notes, strength and tags given in the patch. PT404 when unknown or someone else''s; PT412 precondition_failed (with the current connection) when if_match (the If-Match tags) names another version (api.etag).';
GRANT EXECUTE ON FUNCTION api.connection_update(id uuid, patch jsonb, if_match text[]) TO authenticated;

CREATE FUNCTION api.event_connections(event_id uuid) RETURNS SETOF api.connection
    LANGUAGE plpgsql STABLE
    SET search_path TO 'pg_catalog'
    AS $$
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
$$;

COMMENT ON FUNCTION api.event_connections(event_id uuid) IS 'GET /api/mobile/events/{event_id}/connections: the caller''s connections made at the event, newest first. PT404 unknown event.';
GRANT EXECUTE ON FUNCTION api.event_connections(event_id uuid) TO authenticated;

-- =============================================================================
-- Helpers (private, app, identity): internal helpers and trigger functions; request roles run only those granted here
-- =============================================================================

CREATE FUNCTION private.connection_json(c app.connections) RETURNS jsonb
    LANGUAGE sql STABLE
    SET search_path TO 'pg_catalog'
    AS $$
    select jsonb_build_object('id', c.id, 'owner_node_id', c.owner_node_id, 'target_node_id', c.target_node_id,
                              'connection_type', c.connection_type, 'event_id', c.event_id, 'my_hat_id', c.my_hat_id,
                              'their_hat_id', c.their_hat_id, 'notes', c.notes, 'strength', c.strength, 'tags', c.tags,
                              'created_at', app.iso(c.created_at), 'updated_at', app.iso(c.updated_at))
  $$;

COMMENT ON FUNCTION private.connection_json(c app.connections) IS 'A connection as the REST interface answers it (the Connection object), for the current object of a PT412.';
GRANT EXECUTE ON FUNCTION private.connection_json(c app.connections) TO authenticated;

CREATE FUNCTION private.tg_connections__check_hats() RETURNS trigger
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog'
    AS $$
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
$$;
COMMENT ON FUNCTION private.tg_connections__check_hats() IS 'Trigger: my_hat_id must be the owner''s hat and their_hat_id the target''s (PT422).';

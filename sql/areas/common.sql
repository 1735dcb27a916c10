-- =============================================================================
-- Common ground: schemas, nodes, service settings and shared helpers
-- =============================================================================
-- Shared by every area: the schemas and who may use them, nodes, the settings
-- of the running service, and small helpers.
--
--   api       what the gateway and the MCP server call, one function per route
--             or tool, granted to anon/authenticated one by one
--   app       the tables, row-level security on every one
--   identity  credentials; request roles see only their own id and e-mail
--   private   internal helpers and trigger functions, mostly security definer
--   admin     operator functions (psql or `npm run admin`); no request role
--             may use the schema
--
-- Every user, community, event and venue has a node (app.nodes); paths that say
-- node_id take that id, and app.my_node_id() is the caller's. Lists are paged
-- by app.check_page() and app.pagination(); app.iso() writes timestamps the way
-- clients read them; private.json_capped() bounds what request records keep.
-- api.etag() is a single object's version (its updated_at) as an ETag, and
-- app.check_if_match() refuses a write whose If-Match names another (PT412).
-- A refusal raises SQLSTATE PTxxx (HTTP status xxx) with a snake_case hint, the
-- error code clients see (docs/dba.md, "Errors from SQL").
--
-- Code: gateway/core/database/transaction.ts, gateway/http/route.ts
-- pgTAP: supabase/tests/common.test.sql, supabase/tests/01-catalog-guards.sql, supabase/tests/05-rls-isolation.sql
--
-- The whole source of this area, after the areas before it in
-- sql/areas/areas.json: types, tables, indexes, triggers, policies, the api
-- functions, the helpers. To change it: edit it here, then
-- `npm run db -- areas --diff` writes the migration (docs/dba.md).
-- =============================================================================

-- =============================================================================
-- Schemas, extensions and default privileges
-- =============================================================================

-- No one may execute a function unless granted it: each grant stands below its function.
ALTER DEFAULT PRIVILEGES REVOKE ALL ON FUNCTIONS FROM PUBLIC;

CREATE SCHEMA admin;

CREATE SCHEMA api;

CREATE SCHEMA app;

CREATE SCHEMA identity;

CREATE SCHEMA private;

GRANT USAGE ON SCHEMA api TO anon;
GRANT USAGE ON SCHEMA api TO authenticated;
GRANT USAGE ON SCHEMA api TO service_role;

GRANT USAGE ON SCHEMA app TO authenticated;
GRANT USAGE ON SCHEMA app TO service_role;
GRANT USAGE ON SCHEMA app TO anon;

GRANT USAGE ON SCHEMA identity TO authenticated;

GRANT USAGE ON SCHEMA private TO authenticated;
GRANT USAGE ON SCHEMA private TO service_role;

CREATE EXTENSION IF NOT EXISTS pg_trgm WITH SCHEMA extensions;

-- =============================================================================
-- Tables
-- =============================================================================

CREATE TABLE app.nodes (
    id uuid DEFAULT gen_random_uuid() NOT NULL,
    kind text NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    data jsonb,
    CONSTRAINT nodes_kind_check CHECK ((kind = ANY (ARRAY['user'::text, 'community'::text, 'event'::text, 'venue'::text]))),
    CONSTRAINT nodes_pkey PRIMARY KEY (id)
);
COMMENT ON TABLE app.nodes IS 'One row per user, community, event and venue; the id that node_id paths take.';
COMMENT ON COLUMN app.nodes.data IS 'Free-form data attached to a node: the signup data an agent collected for a member it created.';
ALTER TABLE app.nodes ENABLE ROW LEVEL SECURITY;
GRANT SELECT(id) ON TABLE app.nodes TO authenticated;
GRANT SELECT(kind) ON TABLE app.nodes TO authenticated;
GRANT SELECT(created_at) ON TABLE app.nodes TO authenticated;

CREATE TABLE private.service_settings (
    name text NOT NULL,
    value text NOT NULL,
    updated_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT service_settings_pkey PRIMARY KEY (name)
);
COMMENT ON TABLE private.service_settings IS 'Settings of the running service that SQL outside a request needs (public_url: PUBLIC_URL, for the Event objects of webhook payloads). Written by the gateway at start.';

-- =============================================================================
-- Policies
-- =============================================================================

CREATE POLICY "Nodes are visible to signed-in users" ON app.nodes FOR SELECT TO authenticated USING (true);

-- =============================================================================
-- API functions
-- =============================================================================

CREATE FUNCTION api.etag(version timestamp with time zone) RETURNS text
    LANGUAGE sql IMMUTABLE STRICT
    SET search_path TO 'pg_catalog'
    AS $$
    select '"' || ((extract(epoch from version) * 1000000)::bigint)::text || '"'
  $$;

COMMENT ON FUNCTION api.etag(version timestamp with time zone) IS 'The ETag of a single object of the REST interface: its row''s updated_at (set on every update by private.tg__set_updated_at) in microseconds since 1970, quoted (a strong entity tag). The gateway answers it on every single-object GET and write; app.check_if_match compares If-Match to it.';
GRANT EXECUTE ON FUNCTION api.etag(version timestamp with time zone) TO authenticated;

-- =============================================================================
-- Helpers (private, app, identity): internal helpers and trigger functions; request roles run only those granted here
-- =============================================================================

CREATE FUNCTION app.check_page(page_limit integer, page_offset integer) RETURNS void
    LANGUAGE plpgsql IMMUTABLE
    SET search_path TO 'pg_catalog'
    AS $$
begin
  if page_limit is null or page_limit < 1 or page_limit > 100 then
    raise exception 'limit must be between 1 and 100' using errcode = 'PT400', hint = 'invalid_limit';
  end if;
  if page_offset is null or page_offset < 0 then
    raise exception 'offset must be 0 or more' using errcode = 'PT400', hint = 'invalid_offset';
  end if;
end;
$$;


SET default_tablespace = '';

SET default_table_access_method = heap;

GRANT EXECUTE ON FUNCTION app.check_page(page_limit integer, page_offset integer) TO authenticated;

CREATE FUNCTION app.check_if_match(if_match text[], version timestamp with time zone, current jsonb) RETURNS void
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog'
    AS $$
declare
  etag text := api.etag(version);
begin
  -- No If-Match: no condition. `*`: any current version (the object exists,
  -- or the caller would have had 404). Otherwise one of the tags must be the
  -- current one, compared strongly: a weak tag (W/"...") never matches.
  if if_match is null or '*' = any(if_match) or etag = any(if_match) then
    return;
  end if;
  raise exception 'the object changed since the version given in If-Match' using errcode = 'PT412', hint = 'precondition_failed',
    detail = pg_catalog.jsonb_build_object('etag', etag, 'current', current)::text;
end;
$$;

COMMENT ON FUNCTION app.check_if_match(if_match text[], version timestamp with time zone, current jsonb) IS 'A write''s If-Match (the entity tags sent; null: none) against the object''s current version (api.etag of its updated_at), called with the row locked: PT412 precondition_failed with {etag, current: the object as the route answers it} in the DETAIL when no tag matches (nothing is written: the transaction fails).';
GRANT EXECUTE ON FUNCTION app.check_if_match(if_match text[], version timestamp with time zone, current jsonb) TO authenticated;

CREATE FUNCTION app.contains_pattern(needle text) RETURNS text
    LANGUAGE sql IMMUTABLE STRICT
    SET search_path TO 'pg_catalog'
    AS $$
    select '%' || replace(replace(replace(needle, '\', '\\'), '%', '\%'), '_', '\_') || '%'
  $$;

COMMENT ON FUNCTION app.contains_pattern(needle text) IS 'LIKE pattern for a literal substring match.';
GRANT EXECUTE ON FUNCTION app.contains_pattern(needle text) TO anon;
GRANT EXECUTE ON FUNCTION app.contains_pattern(needle text) TO authenticated;

CREATE FUNCTION app.iso(ts timestamp with time zone) RETURNS text
    LANGUAGE sql STABLE
    AS $$
    select pg_catalog.to_char(pg_catalog.timezone('UTC', ts), 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')
  $$;

COMMENT ON FUNCTION app.iso(ts timestamp with time zone) IS 'ISO 8601 in UTC with milliseconds, as the gateway writes timestamps (inlined by the planner).';
GRANT EXECUTE ON FUNCTION app.iso(ts timestamp with time zone) TO anon;
GRANT EXECUTE ON FUNCTION app.iso(ts timestamp with time zone) TO authenticated;
GRANT EXECUTE ON FUNCTION app.iso(ts timestamp with time zone) TO service_role;

CREATE FUNCTION app.my_node_id() RETURNS uuid
    LANGUAGE sql STABLE SECURITY DEFINER
    SET search_path TO 'pg_catalog'
    AS $$
    select p.node_id from app.profiles p where p.id = auth.uid()
  $$;
COMMENT ON FUNCTION app.my_node_id() IS 'The node id of the signed-in user, or null.';
GRANT EXECUTE ON FUNCTION app.my_node_id() TO anon;
GRANT EXECUTE ON FUNCTION app.my_node_id() TO authenticated;

CREATE FUNCTION app.pagination(total_count bigint, page_limit integer, page_offset integer) RETURNS jsonb
    LANGUAGE sql IMMUTABLE
    SET search_path TO 'pg_catalog'
    AS $$
    select jsonb_build_object(
      'total_count', total_count,
      'page', page_offset / page_limit + 1,
      'page_size', page_limit,
      'total_pages', ceil(total_count::numeric / page_limit)::integer
    )
  $$;

COMMENT ON FUNCTION app.pagination(total_count bigint, page_limit integer, page_offset integer) IS 'The pagination object: total_count, page, page_size, total_pages.';
GRANT EXECUTE ON FUNCTION app.pagination(total_count bigint, page_limit integer, page_offset integer) TO anon;
GRANT EXECUTE ON FUNCTION app.pagination(total_count bigint, page_limit integer, page_offset integer) TO authenticated;

CREATE FUNCTION app.require_my_node() RETURNS uuid
    LANGUAGE plpgsql STABLE
    SET search_path TO 'pg_catalog'
    AS $$
declare
  me uuid := app.my_node_id();
begin
  if me is null then
    raise exception 'user has no node' using errcode = 'PT400', hint = 'user_has_no_node';
  end if;
  return me;
end;
$$;
GRANT EXECUTE ON FUNCTION app.require_my_node() TO authenticated;

CREATE FUNCTION private.json_capped(value jsonb, max_bytes integer DEFAULT 16384) RETURNS jsonb
    LANGUAGE plpgsql IMMUTABLE
    SET search_path TO 'pg_catalog'
    AS $$
declare
  json_text text;
  size integer;
  preview text;
  preview_bytes integer := greatest(json_capped.max_bytes / 2, 0);
begin
  if value is null then
    return null;
  end if;
  json_text := value::text;
  size := octet_length(json_text);
  if size <= json_capped.max_bytes then
    return value;
  end if;
  preview := left(json_text, preview_bytes);
  -- Characters of several bytes: drop whole characters from the end (a
  -- character is at most 4 bytes, so a quarter of the excess at least, per
  -- step) until the bytes fit.
  while octet_length(preview) > preview_bytes loop
    preview := left(preview, length(preview) - ceil((octet_length(preview) - preview_bytes) / 4.0)::integer);
  end loop;
  return jsonb_build_object('truncated', true, 'bytes', size, 'preview', preview);
end;
$$;

COMMENT ON FUNCTION private.json_capped(value jsonb, max_bytes integer) IS 'The value when its JSON text is at most max_bytes (default 16 KB); otherwise the marker {truncated: true, bytes, preview: the first max_bytes/2 bytes of its JSON text}.';
GRANT EXECUTE ON FUNCTION private.json_capped(value jsonb, max_bytes integer) TO authenticated;

CREATE FUNCTION private.public_url() RETURNS text
    LANGUAGE sql STABLE
    SET search_path TO 'pg_catalog'
    AS $$
    select coalesce(nullif(current_setting('request.public_url', true), ''),
                    (select s.value from private.service_settings s where s.name = 'public_url'),
                    'http://localhost:3000')
  $$;
COMMENT ON FUNCTION private.public_url() IS 'PUBLIC_URL of the gateway the request came through (request.public_url, set by each transaction); outside a request (jobs) as the gateway last recorded it; http://localhost:3000 before any gateway started.';


CREATE FUNCTION private.service_setting_set(name text, value text) RETURNS void
    LANGUAGE sql
    SET search_path TO 'pg_catalog'
    AS $$
    insert into private.service_settings as s (name, value) values (service_setting_set.name, service_setting_set.value)
      on conflict (name) do update set value = excluded.value, updated_at = now()
      where s.value is distinct from excluded.value
  $$;

COMMENT ON FUNCTION private.service_setting_set(name text, value text) IS 'Records a setting of the running service (the gateway records public_url at start).';


CREATE FUNCTION private.tg__set_updated_at() RETURNS trigger
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog'
    AS $$
begin
  new.updated_at := now();
  return new;
end;
$$;
COMMENT ON FUNCTION private.tg__set_updated_at() IS 'Trigger: sets updated_at to now() on update.';


CREATE FUNCTION private.url_host(url text) RETURNS text
    LANGUAGE sql IMMUTABLE
    AS $$
    select pg_catalog.lower(pg_catalog.substring(url, '^[A-Za-z][A-Za-z0-9+.-]*://(?:[^/?#@]*@)?(\[[^]/]*\]|[^/?#:]*)'))
  $$;

COMMENT ON FUNCTION private.url_host(url text) IS 'The host of an absolute URL (lower case; an IPv6 address in brackets), e.g. of PUBLIC_URL.';

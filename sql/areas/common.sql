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
-- A refusal raises SQLSTATE PTxxx (HTTP status xxx) with a snake_case hint, the
-- error code clients see (docs/dba.md, "Errors from SQL").
--
-- Code: gateway/core/database/transaction.ts, gateway/http/route.ts
-- pgTAP: supabase/tests/common.test.sql, supabase/tests/01-catalog-guards.sql,
--   supabase/tests/05-rls-isolation.sql
--
-- Its tables (created and altered by the migrations; their comments, row-level
-- security, policies, grants and triggers are below):
--   app.nodes, private.service_settings
--
-- The current definition of every function, view, policy, trigger, grant and
-- comment of this area. To change a rule: edit it here, then
-- `npm run db -- areas --diff` writes its migration (docs/dba.md, "Changing a
-- rule"). CI (`npm run db -- areas --check`) fails while this file and the
-- migrated database disagree. `npm run db -- areas --write` renders all below
-- `-- Code:` again from a freshly migrated database.
-- =============================================================================

-- -----------------------------------------------------------------------------
-- Functions of app: helpers of policies and list functions
-- -----------------------------------------------------------------------------

CREATE OR REPLACE FUNCTION app.check_page(page_limit integer, page_offset integer)
 RETURNS void
 LANGUAGE plpgsql
 IMMUTABLE
 SET search_path TO 'pg_catalog'
AS $function$
begin
  if page_limit is null or page_limit < 1 or page_limit > 100 then
    raise exception 'limit must be between 1 and 100' using errcode = 'PT400', hint = 'invalid_limit';
  end if;
  if page_offset is null or page_offset < 0 then
    raise exception 'offset must be 0 or more' using errcode = 'PT400', hint = 'invalid_offset';
  end if;
end;
$function$;
grant execute on function app.check_page(integer,integer) to authenticated;

CREATE OR REPLACE FUNCTION app.contains_pattern(needle text)
 RETURNS text
 LANGUAGE sql
 IMMUTABLE STRICT
 SET search_path TO 'pg_catalog'
AS $function$
    select '%' || replace(replace(replace(needle, '\', '\\'), '%', '\%'), '_', '\_') || '%'
  $function$;
comment on function app.contains_pattern(text) is 'LIKE pattern for a literal substring match.';
grant execute on function app.contains_pattern(text) to anon, authenticated;

CREATE OR REPLACE FUNCTION app.iso(ts timestamp with time zone)
 RETURNS text
 LANGUAGE sql
 STABLE
AS $function$
    select pg_catalog.to_char(pg_catalog.timezone('UTC', ts), 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')
  $function$;
comment on function app.iso(timestamp with time zone) is 'ISO 8601 in UTC with milliseconds, as the gateway writes timestamps (inlined by the planner).';
grant execute on function app.iso(timestamp with time zone) to anon, authenticated;

CREATE OR REPLACE FUNCTION app.my_node_id()
 RETURNS uuid
 LANGUAGE sql
 STABLE SECURITY DEFINER
 SET search_path TO 'pg_catalog'
AS $function$
    select p.node_id from app.profiles p where p.id = auth.uid()
  $function$;
comment on function app.my_node_id() is 'The node id of the signed-in user, or null.';
grant execute on function app.my_node_id() to anon, authenticated;

CREATE OR REPLACE FUNCTION app.pagination(total_count bigint, page_limit integer, page_offset integer)
 RETURNS jsonb
 LANGUAGE sql
 IMMUTABLE
 SET search_path TO 'pg_catalog'
AS $function$
    select jsonb_build_object(
      'total_count', total_count,
      'page', page_offset / page_limit + 1,
      'page_size', page_limit,
      'total_pages', ceil(total_count::numeric / page_limit)::integer
    )
  $function$;
comment on function app.pagination(bigint,integer,integer) is 'The pagination object: total_count, page, page_size, total_pages.';
grant execute on function app.pagination(bigint,integer,integer) to anon, authenticated;

CREATE OR REPLACE FUNCTION app.require_my_node()
 RETURNS uuid
 LANGUAGE plpgsql
 STABLE
 SET search_path TO 'pg_catalog'
AS $function$
declare
  me uuid := app.my_node_id();
begin
  if me is null then
    raise exception 'user has no node' using errcode = 'PT400', hint = 'user_has_no_node';
  end if;
  return me;
end;
$function$;
grant execute on function app.require_my_node() to authenticated;

-- -----------------------------------------------------------------------------
-- Functions of private: internal helpers and trigger functions (request roles
-- run only those granted here)
-- -----------------------------------------------------------------------------

CREATE OR REPLACE FUNCTION private.json_capped(value jsonb, max_bytes integer DEFAULT 16384)
 RETURNS jsonb
 LANGUAGE plpgsql
 IMMUTABLE
 SET search_path TO 'pg_catalog'
AS $function$
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
$function$;
comment on function private.json_capped(jsonb,integer) is 'The value when its JSON text is at most max_bytes (default 16 KB); otherwise the marker {truncated: true, bytes, preview: the first max_bytes/2 bytes of its JSON text}.';
grant execute on function private.json_capped(jsonb,integer) to authenticated;

CREATE OR REPLACE FUNCTION private.public_url()
 RETURNS text
 LANGUAGE sql
 STABLE
 SET search_path TO 'pg_catalog'
AS $function$
    select coalesce(nullif(current_setting('request.public_url', true), ''),
                    (select s.value from private.service_settings s where s.name = 'public_url'),
                    'http://localhost:3000')
  $function$;
comment on function private.public_url() is 'PUBLIC_URL of the gateway the request came through (request.public_url, set by each transaction); outside a request (jobs) as the gateway last recorded it; http://localhost:3000 before any gateway started.';

CREATE OR REPLACE FUNCTION private.service_setting_set(name text, value text)
 RETURNS void
 LANGUAGE sql
 SET search_path TO 'pg_catalog'
AS $function$
    insert into private.service_settings as s (name, value) values (service_setting_set.name, service_setting_set.value)
      on conflict (name) do update set value = excluded.value, updated_at = now()
      where s.value is distinct from excluded.value
  $function$;
comment on function private.service_setting_set(text,text) is 'Records a setting of the running service (the gateway records public_url at start).';

CREATE OR REPLACE FUNCTION private.tg__set_updated_at()
 RETURNS trigger
 LANGUAGE plpgsql
 SET search_path TO 'pg_catalog'
AS $function$
begin
  new.updated_at := now();
  return new;
end;
$function$;
comment on function private.tg__set_updated_at() is 'Trigger: sets updated_at to now() on update.';

CREATE OR REPLACE FUNCTION private.url_host(url text)
 RETURNS text
 LANGUAGE sql
 IMMUTABLE
AS $function$
    select pg_catalog.lower(pg_catalog.substring(url, '^[A-Za-z][A-Za-z0-9+.-]*://(?:[^/?#@]*@)?(\[[^]/]*\]|[^/?#:]*)'))
  $function$;
comment on function private.url_host(text) is 'The host of an absolute URL (lower case; an IPv6 address in brackets), e.g. of PUBLIC_URL.';

-- -----------------------------------------------------------------------------
-- Tables: comments, row-level security, policies, grants, triggers
-- -----------------------------------------------------------------------------

-- app.nodes
comment on table app.nodes is 'One row per user, community, event and venue; the id that node_id paths take.';
comment on column app.nodes.data is 'Free-form data attached to a node: the signup data an agent collected for a member it created.';
alter table app.nodes enable row level security;
drop policy if exists "Nodes are visible to signed-in users" on app.nodes;
create policy "Nodes are visible to signed-in users" on app.nodes
  as permissive for select to authenticated
  using (true);
grant select (created_at, id, kind) on table app.nodes to authenticated;

-- private.service_settings
comment on table private.service_settings is 'Settings of the running service that SQL outside a request needs (public_url: PUBLIC_URL, for the Event objects of webhook payloads). Written by the gateway at start.';

-- -----------------------------------------------------------------------------
-- Schemas: comments and grants
-- -----------------------------------------------------------------------------

-- schema api
grant usage on schema api to anon, authenticated, service_role;

-- schema app
grant usage on schema app to anon, authenticated, service_role;

-- schema identity
grant usage on schema identity to authenticated;

-- schema private
grant usage on schema private to authenticated;

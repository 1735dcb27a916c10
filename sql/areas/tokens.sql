-- =============================================================================
-- API tokens
-- =============================================================================
-- API tokens: a random secret `cbk_` + 40 base62 characters, shown once,
-- stored only as its SHA-256. A personal token belongs to its creator; one made
-- with a community (only by its manager) is community-scoped. `permissions` are
-- path patterns: an exact path, or a prefix ending in `*` (no other wildcard).
-- api.api_token_authenticate (the gateway, as anon, before the request's own
-- transaction) refuses an unknown, inactive or expired token with PT401,
-- otherwise counts the use exactly (one UPDATE under the row lock) and answers
-- the owner, the scope, whether the path matches and the expiry. A token cannot
-- make tokens. Deactivating or deleting a token ends its open streams (NOTIFY
-- session_ended with the token's id).
--
-- Code: gateway/routes/tokens.ts, gateway/core/auth/api-tokens.ts
-- pgTAP: supabase/tests/tokens.test.sql
--
-- The whole source of this area, after the areas before it in
-- sql/areas/areas.json: types, tables, indexes, triggers, policies, the api
-- functions, the helpers. To change it: edit it here, then
-- `npm run db -- areas --diff` writes the migration (docs/dba.md).
-- =============================================================================

-- =============================================================================
-- Types
-- =============================================================================

CREATE TYPE api.api_token_created AS (
	token jsonb,
	token_value text
);

-- =============================================================================
-- Tables
-- =============================================================================

CREATE TABLE app.api_tokens (
    id uuid DEFAULT gen_random_uuid() NOT NULL,
    user_id uuid NOT NULL,
    community_id uuid,
    name text NOT NULL,
    permissions text[] NOT NULL,
    token_hash bytea NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    expires_at timestamp with time zone,
    active boolean DEFAULT true NOT NULL,
    last_used_at timestamp with time zone,
    usage_count bigint DEFAULT 0 NOT NULL,
    CONSTRAINT api_tokens_name_check CHECK (((length(btrim(name)) >= 1) AND (length(btrim(name)) <= 200))),
    CONSTRAINT api_tokens_permissions_check CHECK (((cardinality(permissions) BETWEEN 1 AND 50) AND (array_position(permissions, NULL::text) IS NULL))),
    CONSTRAINT api_tokens_token_hash_check CHECK ((octet_length(token_hash) = 32)),
    CONSTRAINT api_tokens_usage_count_check CHECK ((usage_count >= 0)),
    CONSTRAINT api_tokens_pkey PRIMARY KEY (id),
    CONSTRAINT api_tokens_token_hash_key UNIQUE (token_hash),
    CONSTRAINT api_tokens_community_id_fkey FOREIGN KEY (community_id) REFERENCES app.communities(id) ON DELETE CASCADE,
    CONSTRAINT api_tokens_user_id_fkey FOREIGN KEY (user_id) REFERENCES identity.users(id) ON DELETE CASCADE
);
COMMENT ON TABLE app.api_tokens IS 'API tokens: the SHA-256 of the secret (never the secret), the owner, an optional community scope, path patterns, expiry, usage.';
COMMENT ON COLUMN app.api_tokens.community_id IS 'Set for a community-scoped token (created by a manager of the community).';
COMMENT ON COLUMN app.api_tokens.permissions IS 'Path patterns: exact, or a prefix ending in `*`.';
COMMENT ON COLUMN app.api_tokens.token_hash IS 'SHA-256 of the secret (`cbk_` + 40 base62 characters).';
ALTER TABLE app.api_tokens ENABLE ROW LEVEL SECURITY;
GRANT SELECT(id) ON TABLE app.api_tokens TO authenticated;
GRANT SELECT(user_id) ON TABLE app.api_tokens TO authenticated;
GRANT SELECT(community_id) ON TABLE app.api_tokens TO authenticated;
GRANT SELECT(name) ON TABLE app.api_tokens TO authenticated;
GRANT SELECT(permissions) ON TABLE app.api_tokens TO authenticated;
GRANT SELECT(created_at) ON TABLE app.api_tokens TO authenticated;
GRANT SELECT(expires_at) ON TABLE app.api_tokens TO authenticated;
GRANT SELECT(active),UPDATE(active) ON TABLE app.api_tokens TO authenticated;
GRANT SELECT(last_used_at) ON TABLE app.api_tokens TO authenticated;
GRANT SELECT(usage_count) ON TABLE app.api_tokens TO authenticated;

-- =============================================================================
-- Indexes
-- =============================================================================

CREATE INDEX api_tokens_community_idx ON app.api_tokens USING btree (community_id) WHERE (community_id IS NOT NULL);
CREATE INDEX api_tokens_user_idx ON app.api_tokens USING btree (user_id, created_at DESC);

-- =============================================================================
-- Triggers
-- =============================================================================

CREATE TRIGGER _200_check_permissions BEFORE INSERT OR UPDATE OF permissions ON app.api_tokens FOR EACH ROW EXECUTE FUNCTION private.tg_api_tokens__check_permissions();
CREATE TRIGGER _900_notify_token_deleted AFTER DELETE ON app.api_tokens FOR EACH ROW WHEN (old.active) EXECUTE FUNCTION private.tg_api_tokens__notify_ended();
CREATE TRIGGER _900_notify_token_ended AFTER UPDATE OF active ON app.api_tokens FOR EACH ROW WHEN ((old.active AND (NOT new.active))) EXECUTE FUNCTION private.tg_api_tokens__notify_ended();

-- =============================================================================
-- Policies
-- =============================================================================

CREATE POLICY "Users can deactivate their own API tokens" ON app.api_tokens FOR UPDATE TO authenticated USING ((user_id = ( SELECT auth.uid() AS uid))) WITH CHECK ((user_id = ( SELECT auth.uid() AS uid)));

CREATE POLICY "Users can read their own API tokens" ON app.api_tokens FOR SELECT TO authenticated USING ((user_id = ( SELECT auth.uid() AS uid)));

-- =============================================================================
-- Functions of api: what the gateway and the MCP server call, as the request's role
-- =============================================================================

CREATE FUNCTION api.api_token_create(name text, permissions text[], expires_at timestamp with time zone DEFAULT NULL::timestamp with time zone, community_id uuid DEFAULT NULL::uuid) RETURNS SETOF api.api_token_created
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog'
    AS $$
declare
  caller uuid := auth.uid();
  secret text := private.new_api_token_secret();
  created app.api_tokens;
begin
  if caller is null then
    raise exception 'not signed in' using errcode = 'PT401', hint = 'unauthorized';
  end if;
  perform private.require_full_account();
  if auth.jwt() ->> 'token_id' is not null then
    raise exception 'API tokens are created with an access token, not with another API token'
      using errcode = 'PT403', hint = 'forbidden';
  end if;
  if name is null or length(btrim(name)) not between 1 and 200 then
    raise exception 'name must be 1 to 200 characters' using errcode = 'PT422', hint = 'validation_error';
  end if;
  if permissions is null or cardinality(permissions) not between 1 and 50 or array_position(permissions, null) is not null then
    raise exception 'permissions must list 1 to 50 path patterns' using errcode = 'PT422', hint = 'invalid_permissions';
  end if;
  if expires_at is not null and expires_at <= now() then
    raise exception 'expires_at must be in the future' using errcode = 'PT422', hint = 'validation_error';
  end if;
  if community_id is not null and not private.is_community_manager(community_id, caller) then
    raise exception 'only a manager of the community can create a token for it'
      using errcode = 'PT403', hint = 'not_community_manager';
  end if;

  insert into app.api_tokens as t (user_id, community_id, name, permissions, token_hash, expires_at)
    values (caller, api_token_create.community_id, btrim(api_token_create.name), api_token_create.permissions,
            extensions.digest(secret, 'sha256'), api_token_create.expires_at)
    returning t.* into created;
  return query select private.api_token_json(created), secret;
end;
$$;

COMMENT ON FUNCTION api.api_token_create(name text, permissions text[], expires_at timestamp with time zone, community_id uuid) IS 'POST /api/docs/tokens: creates a token for the caller (community-scoped with community_id, managers only: PT403) and returns it with its secret, the only time the secret is shown. PT422 for invalid input; PT403 when called with an API token or by a guest (private.require_full_account).';
GRANT EXECUTE ON FUNCTION api.api_token_create(name text, permissions text[], expires_at timestamp with time zone, community_id uuid) TO authenticated;

CREATE FUNCTION api.api_tokens_list() RETURNS SETOF jsonb
    LANGUAGE sql STABLE SECURITY DEFINER
    SET search_path TO 'pg_catalog'
    AS $$
    select private.api_token_json(t)
      from app.api_tokens t
     where t.user_id = auth.uid()
     order by t.created_at desc, t.id
  $$;
COMMENT ON FUNCTION api.api_tokens_list() IS 'GET /api/docs/tokens: the caller''s tokens (row-level security), newest first, as ApiToken objects; never a secret.';
GRANT EXECUTE ON FUNCTION api.api_tokens_list() TO authenticated;

CREATE FUNCTION api.api_token_deactivate(id uuid) RETURNS jsonb
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog'
    AS $$
declare
  changed app.api_tokens;
begin
  -- Another user's token is not found, like an unknown one.
  update app.api_tokens t set active = false
   where t.id = api_token_deactivate.id and t.user_id = auth.uid()
  returning t.* into changed;
  if changed.id is null then
    raise exception 'token not found' using errcode = 'PT404', hint = 'token_not_found';
  end if;
  return private.api_token_json(changed);
end;
$$;

COMMENT ON FUNCTION api.api_token_deactivate(id uuid) IS 'DELETE /api/docs/tokens/{id}: deactivates one of the caller''s tokens (idempotent). PT404 when unknown or another user''s.';
GRANT EXECUTE ON FUNCTION api.api_token_deactivate(id uuid) TO authenticated;

CREATE FUNCTION api.api_token_authenticate(secret text, request_path text) RETURNS TABLE(token_id uuid, user_id uuid, community_id uuid, path_allowed boolean, expires_at timestamp with time zone, refusal text)
    LANGUAGE plpgsql SECURITY DEFINER
    SET search_path TO 'pg_catalog'
    AS $$
declare
  used app.api_tokens;
  in_scope boolean;
  permitted boolean;
begin
  update app.api_tokens t
     set usage_count = t.usage_count + 1,
         last_used_at = greatest(t.last_used_at, clock_timestamp())
   where t.token_hash = extensions.digest(coalesce(secret, ''), 'sha256')
     and t.active
     and (t.expires_at is null or t.expires_at > clock_timestamp())
  returning t.* into used;
  if used.id is null then
    raise exception 'invalid, inactive or expired API token' using errcode = 'PT401', hint = 'invalid_token';
  end if;
  in_scope := private.api_token_scope_allows(used.community_id, request_path);
  permitted := private.api_token_path_allowed(used.permissions, request_path);
  return query select used.id, used.user_id, used.community_id, in_scope and permitted, used.expires_at,
                      case when not in_scope then 'community_scope_violation'
                           when not permitted then 'forbidden' end;
end;
$$;

COMMENT ON FUNCTION api.api_token_authenticate(secret text, request_path text) IS 'Authenticates an API token secret for a request path (every path, /mcp included): PT401 (invalid_token) when unknown, inactive or expired; otherwise counts the use (usage_count, last_used_at) and returns the owner, the community scope, whether the token may be used on the path, the expiry, and why not (refusal, answered 403): community_scope_violation for a community-scoped token off the platform endpoints, forbidden for a path no permission pattern matches.';
GRANT EXECUTE ON FUNCTION api.api_token_authenticate(secret text, request_path text) TO anon;
GRANT EXECUTE ON FUNCTION api.api_token_authenticate(secret text, request_path text) TO authenticated;

-- =============================================================================
-- Helpers (private, app, identity): internal helpers and trigger functions; request roles run only those granted here
-- =============================================================================

CREATE FUNCTION private.new_api_token_secret() RETURNS text
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog'
    AS $$
declare
  alphabet constant text := 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789';
  secret text := '';
  random_bytes bytea;
  b integer;
begin
  while length(secret) < 40 loop
    random_bytes := extensions.gen_random_bytes(48);
    for i in 0..47 loop
      b := get_byte(random_bytes, i);
      if b < 248 and length(secret) < 40 then
        secret := secret || substr(alphabet, 1 + b % 62, 1);
      end if;
    end loop;
  end loop;
  return 'cbk_' || secret;
end;
$$;
COMMENT ON FUNCTION private.new_api_token_secret() IS 'A new API token secret: `cbk_` + 40 uniformly random base62 characters.';


CREATE FUNCTION private.api_token_json(t app.api_tokens) RETURNS jsonb
    LANGUAGE sql STABLE
    SET search_path TO 'pg_catalog'
    AS $$
    select jsonb_build_object(
      'id', t.id,
      'name', t.name,
      'permissions', to_jsonb(t.permissions),
      'community_id', t.community_id,
      'created_at', app.iso(t.created_at),
      'expires_at', app.iso(t.expires_at),
      'active', t.active,
      'last_used_at', app.iso(t.last_used_at),
      'usage_count', t.usage_count)
  $$;

COMMENT ON FUNCTION private.api_token_json(t app.api_tokens) IS 'The ApiToken object (docs/api.md, Resources; components.schemas.ApiToken of the OpenAPI document), with community_id; never the secret or its hash.';
GRANT EXECUTE ON FUNCTION private.api_token_json(t app.api_tokens) TO authenticated;

CREATE FUNCTION private.api_token_scope_allows(community_id uuid, request_path text) RETURNS boolean
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    SET search_path TO 'pg_catalog'
    AS $$ select community_id is null or coalesce(request_path ~* '^/api/v1/platform/', false) $$;

COMMENT ON FUNCTION private.api_token_scope_allows(community_id uuid, request_path text) IS 'Whether a token of this community scope may be presented on the path: a personal token (no community) anywhere its permissions allow; a community-scoped one only on the platform endpoints (/api/v1/platform/..., case-insensitive), where private.platform_authorize holds it to its community.';


CREATE FUNCTION private.api_token_path_allowed(permissions text[], request_path text) RETURNS boolean
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    SET search_path TO 'pg_catalog'
    AS $$
    select coalesce(request_path is not null and exists (
      select from unnest(permissions) as p(pattern)
       where case when right(p.pattern, 1) = '*'
                  then starts_with(request_path, left(p.pattern, -1))
                  else request_path = p.pattern
             end
    ), false)
  $$;

COMMENT ON FUNCTION private.api_token_path_allowed(permissions text[], request_path text) IS 'Whether a request path matches one of the patterns: equal to an exact pattern, or starting with the prefix of a pattern ending in `*`.';


CREATE FUNCTION private.tg_api_tokens__check_permissions() RETURNS trigger
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog'
    AS $$
begin
  if exists (select from unnest(new.permissions) p(pattern) where not private.api_token_pattern_valid(p.pattern)) then
    raise exception 'each permission must be `*`, a path starting with / or a prefix ending in *'
      using errcode = 'PT422', hint = 'invalid_permissions';
  end if;
  return new;
end;
$$;
COMMENT ON FUNCTION private.tg_api_tokens__check_permissions() IS 'Trigger: every permission pattern of a token is well formed (PT422).';


CREATE FUNCTION private.api_token_pattern_valid(pattern text) RETURNS boolean
    LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
    SET search_path TO 'pg_catalog'
    AS $_$
    select length(pattern) <= 500 and pattern ~ '^(\*|/[^*[:space:]]*\*?)$'
  $_$;

COMMENT ON FUNCTION private.api_token_pattern_valid(pattern text) IS 'Whether a token permission pattern is well formed: `*`, or `/path` (exact) or `/prefix*`.';


CREATE FUNCTION private.tg_api_tokens__notify_ended() RETURNS trigger
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog'
    AS $$
begin
  perform pg_notify('session_ended', old.id::text);
  return null;
end;
$$;
COMMENT ON FUNCTION private.tg_api_tokens__notify_ended() IS 'Trigger: NOTIFY session_ended with the id of an API token that was deactivated or deleted (its streams end).';

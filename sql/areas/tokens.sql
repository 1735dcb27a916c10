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
-- Its tables (created and altered by the migrations; their comments, row-level
-- security, policies, grants and triggers are below):
--   app.api_tokens
--
-- Its types (made by the migrations):
--   api.api_token_created
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

CREATE OR REPLACE FUNCTION api.api_token_authenticate(secret text, request_path text)
 RETURNS TABLE(token_id uuid, user_id uuid, community_id uuid, path_allowed boolean, expires_at timestamp with time zone, refusal text)
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog'
AS $function$
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
$function$;
comment on function api.api_token_authenticate(text,text) is 'Authenticates an API token secret for a request path (every path, /mcp included): PT401 (invalid_token) when unknown, inactive or expired; otherwise counts the use (usage_count, last_used_at) and returns the owner, the community scope, whether the token may be used on the path, the expiry, and why not (refusal, answered 403): community_scope_violation for a community-scoped token off the platform endpoints, forbidden for a path no permission pattern matches.';
grant execute on function api.api_token_authenticate(text,text) to anon, authenticated;

CREATE OR REPLACE FUNCTION api.api_token_create(name text, permissions text[], expires_at timestamp with time zone DEFAULT NULL::timestamp with time zone, community_id uuid DEFAULT NULL::uuid)
 RETURNS SETOF api.api_token_created
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog'
AS $function$
declare
  caller uuid := auth.uid();
  secret text := private.new_api_token_secret();
  created app.api_tokens;
begin
  if caller is null then
    raise exception 'not signed in' using errcode = 'PT401', hint = 'unauthorized';
  end if;
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
$function$;
comment on function api.api_token_create(text,text[],timestamp with time zone,uuid) is 'POST /api/docs/tokens: creates a token for the caller (community-scoped with community_id, managers only: PT403) and returns it with its secret, the only time the secret is shown. PT422 for invalid input; PT403 when called with an API token.';
grant execute on function api.api_token_create(text,text[],timestamp with time zone,uuid) to authenticated;

CREATE OR REPLACE FUNCTION api.api_token_deactivate(id uuid)
 RETURNS jsonb
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog'
AS $function$
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
$function$;
comment on function api.api_token_deactivate(uuid) is 'DELETE /api/docs/tokens/{id}: deactivates one of the caller''s tokens (idempotent). PT404 when unknown or another user''s.';
grant execute on function api.api_token_deactivate(uuid) to authenticated;

CREATE OR REPLACE FUNCTION api.api_tokens_list()
 RETURNS SETOF jsonb
 LANGUAGE sql
 STABLE SECURITY DEFINER
 SET search_path TO 'pg_catalog'
AS $function$
    select private.api_token_json(t)
      from app.api_tokens t
     where t.user_id = auth.uid()
     order by t.created_at desc, t.id
  $function$;
comment on function api.api_tokens_list() is 'GET /api/docs/tokens: the caller''s tokens (row-level security), newest first, as ApiToken objects; never a secret.';
grant execute on function api.api_tokens_list() to authenticated;

-- -----------------------------------------------------------------------------
-- Functions of private: internal helpers and trigger functions (request roles
-- run only those granted here)
-- -----------------------------------------------------------------------------

CREATE OR REPLACE FUNCTION private.api_token_json(t app.api_tokens)
 RETURNS jsonb
 LANGUAGE sql
 STABLE
 SET search_path TO 'pg_catalog'
AS $function$
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
  $function$;
comment on function private.api_token_json(app.api_tokens) is 'The ApiToken object (docs/api.md, Resources; components.schemas.ApiToken of the OpenAPI document), with community_id; never the secret or its hash.';
grant execute on function private.api_token_json(app.api_tokens) to authenticated;

CREATE OR REPLACE FUNCTION private.api_token_path_allowed(permissions text[], request_path text)
 RETURNS boolean
 LANGUAGE sql
 IMMUTABLE PARALLEL SAFE
 SET search_path TO 'pg_catalog'
AS $function$
    select coalesce(request_path is not null and exists (
      select from unnest(permissions) as p(pattern)
       where case when right(p.pattern, 1) = '*'
                  then starts_with(request_path, left(p.pattern, -1))
                  else request_path = p.pattern
             end
    ), false)
  $function$;
comment on function private.api_token_path_allowed(text[],text) is 'Whether a request path matches one of the patterns: equal to an exact pattern, or starting with the prefix of a pattern ending in `*`.';

CREATE OR REPLACE FUNCTION private.api_token_pattern_valid(pattern text)
 RETURNS boolean
 LANGUAGE sql
 IMMUTABLE PARALLEL SAFE STRICT
 SET search_path TO 'pg_catalog'
AS $function$
    select length(pattern) <= 500 and pattern ~ '^(\*|/[^*[:space:]]*\*?)$'
  $function$;
comment on function private.api_token_pattern_valid(text) is 'Whether a token permission pattern is well formed: `*`, or `/path` (exact) or `/prefix*`.';

CREATE OR REPLACE FUNCTION private.api_token_scope_allows(community_id uuid, request_path text)
 RETURNS boolean
 LANGUAGE sql
 IMMUTABLE PARALLEL SAFE
 SET search_path TO 'pg_catalog'
AS $function$ select community_id is null or coalesce(request_path ~* '^/api/v1/platform/', false) $function$;
comment on function private.api_token_scope_allows(uuid,text) is 'Whether a token of this community scope may be presented on the path: a personal token (no community) anywhere its permissions allow; a community-scoped one only on the platform endpoints (/api/v1/platform/..., case-insensitive), where private.platform_authorize holds it to its community.';

CREATE OR REPLACE FUNCTION private.new_api_token_secret()
 RETURNS text
 LANGUAGE plpgsql
 SET search_path TO 'pg_catalog'
AS $function$
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
$function$;
comment on function private.new_api_token_secret() is 'A new API token secret: `cbk_` + 40 uniformly random base62 characters.';

CREATE OR REPLACE FUNCTION private.tg_api_tokens__check_permissions()
 RETURNS trigger
 LANGUAGE plpgsql
 SET search_path TO 'pg_catalog'
AS $function$
begin
  if exists (select from unnest(new.permissions) p(pattern) where not private.api_token_pattern_valid(p.pattern)) then
    raise exception 'each permission must be `*`, a path starting with / or a prefix ending in *'
      using errcode = 'PT422', hint = 'invalid_permissions';
  end if;
  return new;
end;
$function$;
comment on function private.tg_api_tokens__check_permissions() is 'Trigger: every permission pattern of a token is well formed (PT422).';

CREATE OR REPLACE FUNCTION private.tg_api_tokens__notify_ended()
 RETURNS trigger
 LANGUAGE plpgsql
 SET search_path TO 'pg_catalog'
AS $function$
begin
  perform pg_notify('session_ended', old.id::text);
  return null;
end;
$function$;
comment on function private.tg_api_tokens__notify_ended() is 'Trigger: NOTIFY session_ended with the id of an API token that was deactivated or deleted (its streams end).';

-- -----------------------------------------------------------------------------
-- Tables: comments, row-level security, policies, grants, triggers
-- -----------------------------------------------------------------------------

-- app.api_tokens
comment on table app.api_tokens is 'API tokens: the SHA-256 of the secret (never the secret), the owner, an optional community scope, path patterns, expiry, usage.';
comment on column app.api_tokens.community_id is 'Set for a community-scoped token (created by a manager of the community).';
comment on column app.api_tokens.permissions is 'Path patterns: exact, or a prefix ending in `*`.';
comment on column app.api_tokens.token_hash is 'SHA-256 of the secret (`cbk_` + 40 base62 characters).';
alter table app.api_tokens enable row level security;
drop policy if exists "Users can deactivate their own API tokens" on app.api_tokens;
create policy "Users can deactivate their own API tokens" on app.api_tokens
  as permissive for update to authenticated
  using ((user_id = ( SELECT auth.uid() AS uid)))
  with check ((user_id = ( SELECT auth.uid() AS uid)));
drop policy if exists "Users can read their own API tokens" on app.api_tokens;
create policy "Users can read their own API tokens" on app.api_tokens
  as permissive for select to authenticated
  using ((user_id = ( SELECT auth.uid() AS uid)));
grant select (active, community_id, created_at, expires_at, id, last_used_at, name, permissions, usage_count, user_id), update (active) on table app.api_tokens to authenticated;
drop trigger if exists _200_check_permissions on app.api_tokens;
CREATE TRIGGER _200_check_permissions BEFORE INSERT OR UPDATE OF permissions ON app.api_tokens FOR EACH ROW EXECUTE FUNCTION private.tg_api_tokens__check_permissions();
drop trigger if exists _900_notify_token_deleted on app.api_tokens;
CREATE TRIGGER _900_notify_token_deleted AFTER DELETE ON app.api_tokens FOR EACH ROW WHEN (old.active) EXECUTE FUNCTION private.tg_api_tokens__notify_ended();
drop trigger if exists _900_notify_token_ended on app.api_tokens;
CREATE TRIGGER _900_notify_token_ended AFTER UPDATE OF active ON app.api_tokens FOR EACH ROW WHEN (old.active AND NOT new.active) EXECUTE FUNCTION private.tg_api_tokens__notify_ended();

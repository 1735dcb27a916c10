--! Previous: sha1:4ccf917dc945c96d91dcd43e80a716481e37a1b3
--! Hash: sha1:cf3080aa3f6736e507c6f10f51d44e25e2539f06
--! Message: token-community-scope

--! split: 1-current.sql
-- Enter migration here

--! split: 510-token-community-scope.sql
--------------------------------------------------------------------------------
-- A community-scoped API token reaches its community's platform endpoints
-- only.
--
-- A token created with community_id "acts on that community's platform
-- integration only", but only private.platform_authorize and
-- private.mcp_agent read its scope: on the rest of the REST interface it
-- acted as its owner (the profile with the e-mail, tasks, deals,
-- connections, hats, a calendar feed, the event stream, joining another
-- community).
--
-- Now the function that authenticates every API token, for the path it is
-- presented on, decides: a community-scoped token is refused on every path
-- but the platform endpoints (/api/v1/platform/..., case-insensitive as the
-- gateway's routing), `/mcp` included, with refusal community_scope_violation
-- (the gateway and the MCP server answer 403 with it; the use is still
-- counted). On the platform endpoints, private.platform_authorize refuses it
-- for another community with the same code. So no route can forget the
-- scope: every door that takes an API token authenticates it here.
--------------------------------------------------------------------------------

create or replace function private.api_token_scope_allows(community_id uuid, request_path text) returns boolean
  language sql immutable parallel safe
  set search_path = pg_catalog
  as $$ select community_id is null or coalesce(request_path ~* '^/api/v1/platform/', false) $$;
comment on function private.api_token_scope_allows(uuid, text) is
  'Whether a token of this community scope may be presented on the path: a personal token (no community) anywhere its permissions allow; a community-scoped one only on the platform endpoints (/api/v1/platform/..., case-insensitive), where private.platform_authorize holds it to its community.';

drop function if exists api.api_token_authenticate(text, text);
create function api.api_token_authenticate(secret text, request_path text)
  returns table (token_id uuid, user_id uuid, community_id uuid, path_allowed boolean, expires_at timestamptz, refusal text)
  language plpgsql volatile
  security definer
  set search_path = pg_catalog
  as $$
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
comment on function api.api_token_authenticate(text, text) is
  'Authenticates an API token secret for a request path (every path, /mcp included): PT401 (invalid_token) when unknown, inactive or expired; otherwise counts the use (usage_count, last_used_at) and returns the owner, the community scope, whether the token may be used on the path, the expiry, and why not (refusal, answered 403): community_scope_violation for a community-scoped token off the platform endpoints, forbidden for a path no permission pattern matches.';
grant execute on function api.api_token_authenticate(text, text) to anon, authenticated;

create or replace function private.platform_authorize(community_id uuid) returns void
  language plpgsql stable
  security definer
  set search_path = pg_catalog
  as $$
declare
  caller uuid := auth.uid();
  token_community uuid := nullif(auth.jwt() ->> 'token_community_id', '')::uuid;
begin
  if caller is null then
    raise exception 'not signed in' using errcode = 'PT401', hint = 'unauthorized';
  end if;
  if token_community is not null and token_community is distinct from platform_authorize.community_id then
    raise exception 'this API token is scoped to another community' using errcode = 'PT403', hint = 'community_scope_violation';
  end if;
  if platform_authorize.community_id is null or not private.is_community_manager(platform_authorize.community_id, caller) then
    raise exception 'not authorized to manage this community' using errcode = 'PT403', hint = 'not_community_manager';
  end if;
end;
$$;
comment on function private.platform_authorize(uuid) is
  'PT403 unless the caller manages the community (not_community_manager) and, for a community-scoped API token, the token is of that community (community_scope_violation).';

--! Previous: sha1:3ac6d9d6ffc6a23b96ed2bcc9a7499e73100e298
--! Hash: sha1:c395ffe05d4342f242b71f183600cf846d41e6e1
--! Message: api-tokens

--! split: 100-api-tokens.sql
--------------------------------------------------------------------------------
-- API tokens (spec sections 2 "ApiToken", 4 "Documentation and tokens", 5)
--
-- A token is a random secret `cbk_` + 40 base62 characters (the fixed prefix
-- lets secret scanners find a leaked one), shown once at creation; only its
-- SHA-256 is stored. A personal token belongs to its creator; a token created
-- with community_id (only by a manager of that community) is community-scoped.
-- A token authenticates REST requests as its owner, on the paths its
-- `permissions` allow: each pattern is an exact path, or a prefix ending in
-- `*`. Pattern matching, expiry and the usage counter are here:
--
--   api.api_token_authenticate(secret, request_path)
--       called by the gateway (as anon) in its own short transaction before
--       the request's: unknown, inactive or expired is PT401; otherwise one
--       UPDATE bumps usage_count and last_used_at (the row lock makes
--       concurrent uses count exactly) and returns the owner, the community
--       scope and whether the path matches a pattern.
--
-- Request claims of a token-authenticated request carry `token_id` and
-- `token_community_id`, so SQL can tell a token from an access token
-- (auth.jwt() ->> 'token_id').
--------------------------------------------------------------------------------

-- Re-runnable while in current/: drop what this file creates (the table's
-- rowtype takes the functions that use it along).
drop function if exists api.api_token_authenticate(text, text);
drop function if exists api.api_token_deactivate(uuid);
drop function if exists api.api_token_create(text, text[], timestamptz, uuid);
drop function if exists api.api_tokens_list();
drop type if exists api.api_token_created;
drop type if exists api.api_token_identity;
drop function if exists private.tg_api_tokens__check_permissions();
drop function if exists private.api_token_path_allowed(text[], text);
drop function if exists private.api_token_pattern_valid(text);
drop function if exists private.new_api_token_secret();
drop function if exists private.is_community_manager(uuid, uuid);

--------------------------------------------------------------------------------
-- Patterns
--------------------------------------------------------------------------------

-- A permission pattern: `*` (every path), or a path starting with `/`, without
-- whitespace, with `*` only as its last character (a prefix).
create function private.api_token_pattern_valid(pattern text) returns boolean
  language sql immutable strict parallel safe
  set search_path = pg_catalog
  as $$
    select length(pattern) <= 500 and pattern ~ '^(\*|/[^*[:space:]]*\*?)$'
  $$;
comment on function private.api_token_pattern_valid(text) is
  'Whether a token permission pattern is well formed: `*`, or `/path` (exact) or `/prefix*`.';

-- Exact match, or prefix match for a pattern ending in `*`.
create function private.api_token_path_allowed(permissions text[], request_path text) returns boolean
  language sql immutable parallel safe
  set search_path = pg_catalog
  as $$
    select coalesce(request_path is not null and exists (
      select from unnest(permissions) as p(pattern)
       where case when right(p.pattern, 1) = '*'
                  then starts_with(request_path, left(p.pattern, -1))
                  else request_path = p.pattern
             end
    ), false)
  $$;
comment on function private.api_token_path_allowed(text[], text) is
  'Whether a request path matches one of the patterns: equal to an exact pattern, or starting with the prefix of a pattern ending in `*`.';

--------------------------------------------------------------------------------
-- The table
--------------------------------------------------------------------------------

create table app.api_tokens (
  id           uuid primary key default gen_random_uuid(),
  user_id      uuid not null references identity.users (id) on delete cascade,
  community_id uuid references app.communities (id) on delete cascade,
  name         text not null check (length(btrim(name)) between 1 and 200),
  permissions  text[] not null
               check (cardinality(permissions) between 1 and 50
                      and array_position(permissions, null) is null),
  token_hash   bytea not null unique check (octet_length(token_hash) = 32),
  created_at   timestamptz not null default now(),
  expires_at   timestamptz,
  active       boolean not null default true,
  last_used_at timestamptz,
  usage_count  bigint not null default 0 check (usage_count >= 0)
);
comment on table app.api_tokens is
  'API tokens: the SHA-256 of the secret (never the secret), the owner, an optional community scope, path patterns, expiry, usage.';
comment on column app.api_tokens.token_hash is 'SHA-256 of the secret (`cbk_` + 40 base62 characters).';
comment on column app.api_tokens.community_id is 'Set for a community-scoped token (created by a manager of the community).';
comment on column app.api_tokens.permissions is 'Path patterns: exact, or a prefix ending in `*`.';

create index api_tokens_user_idx on app.api_tokens (user_id, created_at desc);
create index api_tokens_community_idx on app.api_tokens (community_id) where community_id is not null;

-- Every element of permissions must be a valid pattern (a check constraint
-- cannot hold a subquery, so a trigger).
create function private.tg_api_tokens__check_permissions() returns trigger
  language plpgsql volatile
  set search_path = pg_catalog
  as $$
begin
  if exists (select from unnest(new.permissions) p(pattern) where not private.api_token_pattern_valid(p.pattern)) then
    raise exception 'each permission must be `*`, a path starting with / or a prefix ending in *'
      using errcode = 'PT422', hint = 'invalid_permissions';
  end if;
  return new;
end;
$$;
comment on function private.tg_api_tokens__check_permissions() is
  'Trigger: every permission pattern of a token is well formed (PT422).';

create trigger _200_check_permissions before insert or update of permissions on app.api_tokens
  for each row execute function private.tg_api_tokens__check_permissions();

-- Owners read their own tokens (never the hash) and may deactivate them.
alter table app.api_tokens enable row level security;
grant select (id, user_id, community_id, name, permissions, created_at, expires_at, active, last_used_at, usage_count),
  update (active) on app.api_tokens to authenticated;
create policy "Users can read their own API tokens" on app.api_tokens
  for select to authenticated
  using (user_id = (select auth.uid()));
create policy "Users can deactivate their own API tokens" on app.api_tokens
  for update to authenticated
  using (user_id = (select auth.uid()))
  with check (user_id = (select auth.uid()));

--------------------------------------------------------------------------------
-- Helpers
--------------------------------------------------------------------------------

-- Whether the user manages the community (role manager).
create function private.is_community_manager(community_id uuid, user_id uuid) returns boolean
  language sql stable
  security definer
  set search_path = pg_catalog
  as $$
    select exists (
      select from app.community_members m
        join app.profiles p on p.node_id = m.member_node_id
       where m.community_id = is_community_manager.community_id
         and p.id = is_community_manager.user_id
         and m.role = 'manager')
  $$;
comment on function private.is_community_manager(uuid, uuid) is 'Whether the user is a manager of the community.';
grant execute on function private.is_community_manager(uuid, uuid) to authenticated;

-- `cbk_` + 40 base62 characters from gen_random_bytes, without modulo bias
-- (bytes of 248 and above are skipped: 248 = 4 * 62).
create function private.new_api_token_secret() returns text
  language plpgsql volatile
  set search_path = pg_catalog
  as $$
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
comment on function private.new_api_token_secret() is 'A new API token secret: `cbk_` + 40 uniformly random base62 characters.';

-- The ApiToken object of spec section 2 (plus community_id; never the hash).
create function private.api_token_json(t app.api_tokens) returns jsonb
  language sql stable
  set search_path = pg_catalog
  as $$
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
comment on function private.api_token_json(app.api_tokens) is 'The ApiToken object (spec section 2), with community_id; never the secret or its hash.';
grant execute on function private.api_token_json(app.api_tokens) to authenticated;

--------------------------------------------------------------------------------
-- API
--------------------------------------------------------------------------------

-- The API functions are security definer because the token object is built
-- from the whole row, whose hash request roles may not read; each one selects
-- the caller's own rows explicitly (the same rule as the row-level security
-- policies above, which govern direct access to the table).
create function api.api_tokens_list() returns setof jsonb
  language sql stable
  security definer
  set search_path = pg_catalog
  as $$
    select private.api_token_json(t)
      from app.api_tokens t
     where t.user_id = auth.uid()
     order by t.created_at desc, t.id
  $$;
comment on function api.api_tokens_list() is
  'GET /api/docs/tokens: the caller''s tokens (row-level security), newest first, as ApiToken objects; never a secret.';
grant execute on function api.api_tokens_list() to authenticated;

create type api.api_token_created as (token jsonb, token_value text);

-- Security definer: it stores the hash, which request roles cannot write.
-- A token cannot mint tokens: creating one needs an access token (a session),
-- so a leaked token cannot widen its own reach.
create function api.api_token_create(name text, permissions text[], expires_at timestamptz default null,
                                     community_id uuid default null)
  returns setof api.api_token_created
  language plpgsql volatile
  security definer
  set search_path = pg_catalog
  as $$
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
$$;
comment on function api.api_token_create(text, text[], timestamptz, uuid) is
  'POST /api/docs/tokens: creates a token for the caller (community-scoped with community_id, managers only: PT403) and returns it with its secret, the only time the secret is shown. PT422 for invalid input; PT403 when called with an API token.';
grant execute on function api.api_token_create(text, text[], timestamptz, uuid) to authenticated;

create function api.api_token_deactivate(id uuid) returns jsonb
  language plpgsql volatile
  security definer
  set search_path = pg_catalog
  as $$
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
comment on function api.api_token_deactivate(uuid) is
  'DELETE /api/docs/tokens/{id}: deactivates one of the caller''s tokens (idempotent). PT404 when unknown or another user''s.';
grant execute on function api.api_token_deactivate(uuid) to authenticated;

create type api.api_token_identity as (token_id uuid, user_id uuid, community_id uuid, path_allowed boolean);

create function api.api_token_authenticate(secret text, request_path text)
  returns setof api.api_token_identity
  language plpgsql volatile
  security definer
  set search_path = pg_catalog
  as $$
declare
  used app.api_tokens;
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
  return query select used.id, used.user_id, used.community_id,
                      private.api_token_path_allowed(used.permissions, request_path);
end;
$$;
comment on function api.api_token_authenticate(text, text) is
  'Authenticates an API token secret for a request path: PT401 (invalid_token) when unknown, inactive or expired; '
  'otherwise counts the use (usage_count, last_used_at) and returns the owner, the community scope and whether a permission pattern matches the path.';
grant execute on function api.api_token_authenticate(text, text) to anon, authenticated;

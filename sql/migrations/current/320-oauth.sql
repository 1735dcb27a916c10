--------------------------------------------------------------------------------
-- OAuth 2.0 for the agent interface: clients, authorization codes, tokens
--
-- Authorization code + PKCE (S256) with dynamic client registration, as MCP
-- clients do it. The MCP process runs the HTTP side (the MCP SDK's auth
-- router) and calls these functions as the database owner; nothing here is
-- granted to request roles. Every secret (client secret, pending-request id,
-- code, access and refresh token) is stored only as its SHA-256.
--   * a pending authorization request lives 10 minutes, allows 5 wrong
--     passwords, and is consumed by approval or denial;
--   * a code lives 1 minute and is single-use (a second use revokes what the
--     first one issued);
--   * access tokens live `access_ttl` seconds; refresh tokens 30 days and
--     rotate; presenting a rotated refresh token revokes the whole family.
--------------------------------------------------------------------------------

create table if not exists identity.oauth_clients (
  client_id                text primary key,
  client_secret_hash       bytea,
  client_secret_expires_at bigint not null default 0,
  client_id_issued_at      bigint not null,
  metadata                 jsonb not null check (jsonb_typeof(metadata) = 'object'),
  created_at               timestamptz not null default now()
);
comment on table identity.oauth_clients is 'OAuth clients registered dynamically (RFC 7591). metadata holds what the client registered, never the secret.';
alter table identity.oauth_clients enable row level security;

create table if not exists identity.oauth_requests (
  request_hash   bytea primary key,
  client_id      text not null references identity.oauth_clients (client_id) on delete cascade,
  redirect_uri   text not null,
  code_challenge text not null,
  state          text,
  scopes         text[] not null,
  resource       text,
  failures       integer not null default 0,
  expires_at     timestamptz not null
);
comment on table identity.oauth_requests is 'Authorization requests waiting for the user to sign in and consent.';
alter table identity.oauth_requests enable row level security;

create table if not exists identity.oauth_codes (
  code_hash      bytea primary key,
  client_id      text not null references identity.oauth_clients (client_id) on delete cascade,
  user_id        uuid not null references identity.users (id) on delete cascade,
  redirect_uri   text not null,
  code_challenge text not null,
  scopes         text[] not null,
  resource       text,
  family_id      uuid not null default gen_random_uuid(),
  expires_at     timestamptz not null,
  used_at        timestamptz
);
comment on table identity.oauth_codes is 'Authorization codes (hashed), single-use.';
alter table identity.oauth_codes enable row level security;

create table if not exists identity.oauth_tokens (
  id         uuid primary key default gen_random_uuid(),
  token_hash bytea not null unique,
  kind       text not null check (kind in ('access', 'refresh')),
  client_id  text not null references identity.oauth_clients (client_id) on delete cascade,
  user_id    uuid not null references identity.users (id) on delete cascade,
  family_id  uuid not null,
  scopes     text[] not null,
  resource   text,
  created_at timestamptz not null default now(),
  expires_at timestamptz not null,
  revoked_at timestamptz
);
comment on table identity.oauth_tokens is 'OAuth access and refresh tokens (hashed). One family per authorization; rotation keeps the family.';
create index if not exists oauth_tokens_family_idx on identity.oauth_tokens (family_id);
create index if not exists oauth_tokens_user_idx on identity.oauth_tokens (user_id);
alter table identity.oauth_tokens enable row level security;

-- Volatile, not immutable: a function that raises must never be folded into
-- a plan at planning time (plpgsql_check found that it was).
create or replace function private.oauth_invalid_grant(message text) returns void
  language plpgsql volatile
  set search_path = pg_catalog
  as $$
begin
  raise exception '%', message using errcode = 'PT400', hint = 'invalid_grant';
end;
$$;

--------------------------------------------------------------------------------
-- Clients
--------------------------------------------------------------------------------

create or replace function private.oauth_client_register(client_id text, client_secret text, client_secret_expires_at bigint,
                                                         client_id_issued_at bigint, metadata jsonb)
  returns void
  language sql volatile
  set search_path = pg_catalog
  as $$
    insert into identity.oauth_clients (client_id, client_secret_hash, client_secret_expires_at, client_id_issued_at, metadata)
      values (client_id, identity.token_hash(client_secret), coalesce(client_secret_expires_at, 0), client_id_issued_at,
              metadata - 'client_secret' - 'client_id' - 'client_id_issued_at' - 'client_secret_expires_at')
  $$;
comment on function private.oauth_client_register(text, text, bigint, bigint, jsonb) is
  'Stores a dynamically registered client (secret hashed; null for public clients).';

create or replace function private.oauth_client_get(client_id text)
  returns table (metadata jsonb, has_secret boolean, client_secret_expires_at bigint, client_id_issued_at bigint)
  language sql stable
  set search_path = pg_catalog
  as $$
    select c.metadata, c.client_secret_hash is not null, c.client_secret_expires_at, c.client_id_issued_at
      from identity.oauth_clients c
     where c.client_id = oauth_client_get.client_id
  $$;
comment on function private.oauth_client_get(text) is 'A registered client''s metadata and whether it has a secret.';

create or replace function private.oauth_client_secret_matches(client_id text, client_secret text) returns boolean
  language sql stable
  set search_path = pg_catalog
  as $$
    select coalesce((
      select c.client_secret_hash is null
             or (c.client_secret_hash = identity.token_hash(coalesce(client_secret, ''))
                 and (c.client_secret_expires_at = 0 or c.client_secret_expires_at > extract(epoch from now())))
        from identity.oauth_clients c
       where c.client_id = oauth_client_secret_matches.client_id), false)
  $$;
comment on function private.oauth_client_secret_matches(text, text) is
  'True for a public client, or a confidential client presenting its (unexpired) secret.';

--------------------------------------------------------------------------------
-- Authorization: pending request → sign-in and consent → code
--------------------------------------------------------------------------------

create or replace function private.oauth_request_begin(client_id text, redirect_uri text, code_challenge text, state text,
                                                       scopes text[], resource text)
  returns text
  language plpgsql volatile
  set search_path = pg_catalog
  as $$
declare
  token text := identity.new_token();
begin
  delete from identity.oauth_requests r where r.expires_at < now();
  insert into identity.oauth_requests (request_hash, client_id, redirect_uri, code_challenge, state, scopes, resource, expires_at)
    values (identity.token_hash(token), client_id, redirect_uri, code_challenge, state, scopes, resource,
            now() + interval '10 minutes');
  return token;
end;
$$;
comment on function private.oauth_request_begin(text, text, text, text, text[], text) is
  'Keeps a validated authorization request until the user consents; returns the request''s secret id (for the consent form).';

create or replace function private.oauth_request_get(request_token text)
  returns table (client_id text, client_name text, client_uri text, redirect_uri text, scopes text[], state text)
  language sql stable
  set search_path = pg_catalog
  as $$
    select r.client_id, c.metadata->>'client_name', c.metadata->>'client_uri', r.redirect_uri, r.scopes, r.state
      from identity.oauth_requests r
      join identity.oauth_clients c on c.client_id = r.client_id
     where r.request_hash = identity.token_hash(request_token) and r.expires_at > now()
  $$;
comment on function private.oauth_request_get(text) is 'A pending authorization request (for the consent page); no row when unknown or expired.';

-- The user signs in and consents: the request becomes a code (PT401
-- invalid_credentials for a wrong e-mail or password; after 5 the request is
-- gone; PT404 request_expired when unknown or expired).
create or replace function private.oauth_request_approve(request_token text, email text, password text)
  returns table (redirect_uri text, code text, state text)
  language plpgsql volatile
  set search_path = pg_catalog
  as $$
declare
  request identity.oauth_requests;
  account identity.users;
  new_code text := identity.new_token();
begin
  select r.* into request from identity.oauth_requests r
   where r.request_hash = identity.token_hash(request_token) and r.expires_at > now()
   for update;
  if request.request_hash is null then
    raise exception 'this authorization request has expired; start again from your application'
      using errcode = 'PT404', hint = 'request_expired';
  end if;
  select u.* into account from identity.users u where u.email = lower(btrim(oauth_request_approve.email));
  if not identity.password_matches(password, account.password_hash) then
    if request.failures >= 4 then
      delete from identity.oauth_requests r where r.request_hash = request.request_hash;
    else
      update identity.oauth_requests r set failures = r.failures + 1 where r.request_hash = request.request_hash;
    end if;
    -- Commit the failure count, then refuse: the caller raises after commit.
    return query select null::text, null::text, null::text;
    return;
  end if;
  delete from identity.oauth_requests r where r.request_hash = request.request_hash;
  insert into identity.oauth_codes (code_hash, client_id, user_id, redirect_uri, code_challenge, scopes, resource, expires_at)
    values (identity.token_hash(new_code), request.client_id, account.id, request.redirect_uri, request.code_challenge,
            request.scopes, request.resource, now() + interval '1 minute');
  return query select request.redirect_uri, new_code, request.state;
end;
$$;
comment on function private.oauth_request_approve(text, text, text) is
  'Signs the user in (e-mail and password) and turns the pending request into a single-use code. A row of nulls means wrong credentials (counted); PT404 request_expired.';

create or replace function private.oauth_request_deny(request_token text)
  returns table (redirect_uri text, state text)
  language sql volatile
  set search_path = pg_catalog
  as $$
    delete from identity.oauth_requests r
     where r.request_hash = identity.token_hash(request_token) and r.expires_at > now()
    returning r.redirect_uri, r.state
  $$;
comment on function private.oauth_request_deny(text) is 'The user declined: forgets the request and returns where to send the error.';

--------------------------------------------------------------------------------
-- Tokens
--------------------------------------------------------------------------------

-- A code presented again after its use: revoke what its first use issued
-- (RFC 6749 10.5). Returns whether it did.
create or replace function private.oauth_code_reused(code text) returns boolean
  language sql volatile
  set search_path = pg_catalog
  as $$
    with revoked as (
      update identity.oauth_tokens t set revoked_at = now()
        from identity.oauth_codes c
       where c.code_hash = identity.token_hash(code) and c.used_at is not null
         and t.family_id = c.family_id and t.revoked_at is null
      returning 1)
    select exists (select from revoked)
  $$;

-- The PKCE challenge of a live code of the client; null (after revoking what
-- a reused code issued) otherwise. Failures are answered with null rather
-- than raised, so that the revocation commits.
create or replace function private.oauth_code_challenge(client_id text, code text) returns text
  language plpgsql volatile
  set search_path = pg_catalog
  as $$
declare
  challenge text;
begin
  select c.code_challenge into challenge from identity.oauth_codes c
   where c.code_hash = identity.token_hash(code) and c.client_id = oauth_code_challenge.client_id
     and c.used_at is null and c.expires_at > now();
  if challenge is null then
    perform private.oauth_code_reused(code);
  end if;
  return challenge;
end;
$$;
comment on function private.oauth_code_challenge(text, text) is
  'The PKCE challenge of a live code of the client; null when unknown, expired or used (a used code''s tokens are revoked).';

create or replace function private.oauth_issue_tokens(client_id text, user_id uuid, family_id uuid, scopes text[], resource text,
                                                      access_ttl integer)
  returns table (access_token text, refresh_token text, expires_in integer, scope text)
  language plpgsql volatile
  set search_path = pg_catalog
  as $$
declare
  access text := 'cboa_' || identity.new_token();
  refresh text := 'cbor_' || identity.new_token();
begin
  insert into identity.oauth_tokens (token_hash, kind, client_id, user_id, family_id, scopes, resource, expires_at) values
    (identity.token_hash(access), 'access', client_id, user_id, family_id, scopes, resource,
     now() + make_interval(secs => access_ttl)),
    (identity.token_hash(refresh), 'refresh', client_id, user_id, family_id, scopes, resource, now() + interval '30 days');
  return query select access, refresh, access_ttl, array_to_string(scopes, ' ');
end;
$$;
comment on function private.oauth_issue_tokens(text, uuid, uuid, text[], text, integer) is
  'Issues an access token and a refresh token of one family (tests use it to mint tokens directly).';

create or replace function private.oauth_code_exchange(client_id text, code text, redirect_uri text, resource text, access_ttl integer)
  returns table (access_token text, refresh_token text, expires_in integer, scope text)
  language plpgsql volatile
  set search_path = pg_catalog
  as $$
declare
  grant_row identity.oauth_codes;
begin
  update identity.oauth_codes c set used_at = now()
   where c.code_hash = identity.token_hash(code) and c.client_id = oauth_code_exchange.client_id
     and c.used_at is null and c.expires_at > now()
  returning c.* into grant_row;
  if grant_row.code_hash is null then
    -- No rows: invalid_grant (a reused code's tokens are revoked, and that commits).
    perform private.oauth_code_reused(code);
    return;
  end if;
  if redirect_uri is not null and redirect_uri <> grant_row.redirect_uri then
    perform private.oauth_invalid_grant('redirect_uri does not match the authorization request');
  end if;
  if resource is not null and grant_row.resource is not null and resource <> grant_row.resource then
    perform private.oauth_invalid_grant('resource does not match the authorization request');
  end if;
  return query select * from private.oauth_issue_tokens(grant_row.client_id, grant_row.user_id, grant_row.family_id,
                                                        grant_row.scopes, coalesce(grant_row.resource, resource), access_ttl);
end;
$$;
comment on function private.oauth_code_exchange(text, text, text, text, integer) is
  'Exchanges a code (single use; PKCE checked before) for tokens. No row when unknown, expired or reused; PT400 invalid_grant when mismatched.';

create or replace function private.oauth_token_refresh(client_id text, presented_token text, scopes text[], resource text, access_ttl integer)
  returns table (access_token text, refresh_token text, expires_in integer, scope text)
  language plpgsql volatile
  set search_path = pg_catalog
  as $$
-- `resource` is part of the OAuth provider's call; a refreshed token keeps the
-- resource of its grant, so the argument is not used.
-- @plpgsql_check_options: extra_warnings = false
declare
  old identity.oauth_tokens;
begin
  select t.* into old from identity.oauth_tokens t
   where t.token_hash = identity.token_hash(presented_token) and t.kind = 'refresh'
     and t.client_id = oauth_token_refresh.client_id
   for update;
  if old.id is null or old.expires_at <= now() then
    perform private.oauth_invalid_grant('invalid refresh token');
  end if;
  if old.revoked_at is not null then
    -- Reuse of a rotated token: revoke the family and answer no row (the revocation commits).
    update identity.oauth_tokens t set revoked_at = now() where t.family_id = old.family_id and t.revoked_at is null;
    return;
  end if;
  if scopes is not null and cardinality(scopes) > 0 and not scopes <@ old.scopes then
    raise exception 'requested scopes exceed the original grant' using errcode = 'PT400', hint = 'invalid_scope';
  end if;
  update identity.oauth_tokens t set revoked_at = now() where t.id = old.id;
  return query select * from private.oauth_issue_tokens(old.client_id, old.user_id, old.family_id,
                                                        coalesce(nullif(scopes, '{}'), old.scopes), old.resource, access_ttl);
end;
$$;
comment on function private.oauth_token_refresh(text, text, text[], text, integer) is
  'Rotates a refresh token. No row when a rotated one is presented again (the family is revoked); PT400 invalid_grant / invalid_scope.';

create or replace function private.oauth_token_authenticate(access_token text)
  returns table (token_id uuid, user_id uuid, client_id text, scopes text[], resource text, expires_at timestamptz)
  language plpgsql stable
  set search_path = pg_catalog
  as $$
begin
  return query
    select t.id, t.user_id, t.client_id, t.scopes, t.resource, t.expires_at
      from identity.oauth_tokens t
     where t.token_hash = identity.token_hash(access_token) and t.kind = 'access'
       and t.revoked_at is null and t.expires_at > now();
  if not found then
    raise exception 'invalid or expired access token' using errcode = 'PT401', hint = 'invalid_token';
  end if;
end;
$$;
comment on function private.oauth_token_authenticate(text) is 'The owner, client and scopes of a live OAuth access token; PT401 invalid_token otherwise.';

create or replace function private.oauth_token_revoke(client_id text, token text) returns void
  language sql volatile
  set search_path = pg_catalog
  as $$
    update identity.oauth_tokens t set revoked_at = now()
     where t.revoked_at is null
       and t.family_id in (select r.family_id from identity.oauth_tokens r
                            where r.token_hash = identity.token_hash(token) and r.client_id = oauth_token_revoke.client_id)
  $$;
comment on function private.oauth_token_revoke(text, text) is 'Revokes the token''s whole family (RFC 7009); unknown tokens are ignored.';

create or replace function private.oauth_prune() returns void
  language sql volatile
  set search_path = pg_catalog
  as $$
    delete from identity.oauth_requests where expires_at < now();
    delete from identity.oauth_codes where expires_at < now() - interval '1 day';
    delete from identity.oauth_tokens where expires_at < now() - interval '1 day';
  $$;
comment on function private.oauth_prune() is 'Deletes expired pending requests, codes and tokens.';

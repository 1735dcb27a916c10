--! Previous: sha1:36b66c8c3080dd71e93b3fa758c682b80f058be1
--! Hash: sha1:d1ed2e62b315d1397e1a3b4689e55a081abb9f01
--! Message: identity

--------------------------------------------------------------------------------
-- Identity: users and their credentials
--
-- Passwords are hashed here with bcrypt (pgcrypto). The password is first
-- reduced with SHA-256 so bcrypt's 72-byte input limit never truncates it.
-- Refresh tokens are random, stored only as SHA-256 hashes, rotated on every
-- use; presenting a rotated token again revokes its whole family (session).
--------------------------------------------------------------------------------

create table identity.users (
  id            uuid primary key default gen_random_uuid(),
  email         text not null,
  password_hash text,
  created_at    timestamptz not null default now(),
  updated_at    timestamptz not null default now(),
  constraint users_email_is_normalised check (email = lower(btrim(email))),
  constraint users_email_shape check (length(email) <= 320 and email ~ '^[^@\s]+@[^@\s]+$')
);
comment on table identity.users is 'Sign-in identities. password_hash is null for accounts that cannot sign in yet.';
comment on column identity.users.email is 'Lower-case e-mail address; unique.';

create unique index users_email_key on identity.users (email);

create trigger _100_set_updated_at before update on identity.users
  for each row execute function private.tg__set_updated_at();

alter table identity.users enable row level security;

-- A signed-in user may read their own id and e-mail (never the hash).
grant usage on schema identity to authenticated;
grant select (id, email, created_at, updated_at) on identity.users to authenticated;
create policy "Users can read their own identity" on identity.users
  for select to authenticated
  using (id = (select auth.uid()));

create table identity.refresh_tokens (
  id             bigint generated always as identity primary key,
  token_hash     bytea not null unique,
  user_id        uuid not null references identity.users (id) on delete cascade,
  session_id     uuid not null,
  parent_id      bigint references identity.refresh_tokens (id) on delete set null,
  created_at     timestamptz not null default now(),
  expires_at     timestamptz not null,
  revoked_at     timestamptz,
  revoked_reason text check (revoked_reason in ('rotated', 'reused', 'logout')),
  constraint refresh_tokens_revocation_complete check ((revoked_at is null) = (revoked_reason is null))
);
comment on table identity.refresh_tokens is
  'Refresh tokens (hashed). All tokens descending from one login share session_id (the family).';

create index refresh_tokens_session_idx on identity.refresh_tokens (session_id);
create index refresh_tokens_user_idx on identity.refresh_tokens (user_id);
alter table identity.refresh_tokens enable row level security;

--------------------------------------------------------------------------------
-- Password hashing
--------------------------------------------------------------------------------

create function identity.hash_password(password text) returns text
  language sql volatile strict
  set search_path = pg_catalog
  as $$
    select extensions.crypt(
      encode(extensions.digest(password, 'sha256'), 'base64'),
      extensions.gen_salt('bf', 10)
    )
  $$;
comment on function identity.hash_password(text) is 'bcrypt (cost 10) of the SHA-256 of the password.';

-- Compares against a fixed dummy hash when the account has none, so an unknown
-- e-mail costs the same time as a wrong password.
create function identity.password_matches(password text, password_hash text) returns boolean
  language sql volatile
  set search_path = pg_catalog
  as $$
    select coalesce(
      extensions.crypt(
        encode(extensions.digest(coalesce(password, ''), 'sha256'), 'base64'),
        coalesce(password_hash, '$2a$10$CwTycUXWue0Thq9StjUM0u')
      ) = password_hash,
      false
    )
  $$;
comment on function identity.password_matches(text, text) is
  'True when the password matches the bcrypt hash; always does the bcrypt work, even for a null hash.';

-- A new opaque token: 32 random bytes, base64url.
create function identity.new_token() returns text
  language sql volatile
  set search_path = pg_catalog
  as $$
    select rtrim(translate(encode(extensions.gen_random_bytes(32), 'base64'), '+/', '-_'), '=')
  $$;

create function identity.token_hash(token text) returns bytea
  language sql immutable strict
  set search_path = pg_catalog
  as $$
    select extensions.digest(token, 'sha256')
  $$;

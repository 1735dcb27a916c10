--------------------------------------------------------------------------------
-- A signed upload URL uploads one object, once (security review round 5).
--
-- The digest of each token that began an upload is kept until the token
-- expires: another upload with it is refused. An upload through it that is
-- refused or cut off gives the token back (its row goes with the upload).
--
-- Re-runnable (graphile-migrate applies current/ again on every change).
--------------------------------------------------------------------------------

create table if not exists app.storage_signed_uploads (
  -- identity.token_hash of the token (SHA-256).
  token_hash  bytea primary key,
  -- The token's own expiry: after it the row is pruned (the token is refused anyway).
  expires_at  timestamptz not null,
  used_at     timestamptz not null default now()
);
comment on table app.storage_signed_uploads is
  'Signed upload URLs used (or in use): the digest of each token that began an upload, until the token expires, so that it uploads once.';
create index if not exists storage_signed_uploads_expires_idx on app.storage_signed_uploads (expires_at);
alter table app.storage_signed_uploads enable row level security;

-- The token an upload through a signed upload URL began with (given back if the upload does not finish).
alter table app.storage_uploads add column if not exists signed_token_hash bytea;

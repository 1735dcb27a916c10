--! Previous: sha1:f9268d8db992e2ff1b07791e06adf4d8c7ac16a8
--! Hash: sha1:36b66c8c3080dd71e93b3fa758c682b80f058be1
--! Message: schemas

--------------------------------------------------------------------------------
-- Schemas, by exposure
--
--   api       functions the gateway and the MCP server call (one per operation);
--             granted to anon/authenticated as each function needs
--   app       tables; row-level security on every one of them
--   identity  credentials: users with password hashes, refresh tokens; never
--             granted to request roles except the columns named below
--   private   internals: trigger functions, security definer helpers
--   admin     operator functions (psql or `npm run admin`); never granted
--
-- Errors: functions raise SQLSTATE 'PTxxx' to choose HTTP status xxx (the
-- PostgREST convention); `message` is shown to the client, `hint` (optional)
-- becomes the machine-readable `error` code. The map lives in
-- gateway/lib/errors.ts.
--------------------------------------------------------------------------------

create schema if not exists api;
create schema if not exists app;
create schema if not exists identity;
create schema if not exists private;
create schema if not exists admin;

grant usage on schema api to anon, authenticated, service_role;
grant usage on schema app to authenticated, service_role;

-- Functions are not executable by PUBLIC unless granted one by one.
alter default privileges revoke execute on functions from public;
alter default privileges in schema api revoke execute on functions from public;
alter default privileges in schema app revoke execute on functions from public;
alter default privileges in schema private revoke execute on functions from public;
alter default privileges in schema admin revoke execute on functions from public;
alter default privileges in schema identity revoke execute on functions from public;

-- Shared trigger: keep updated_at current.
create function private.tg__set_updated_at() returns trigger
  language plpgsql volatile
  set search_path = pg_catalog
  as $$
begin
  new.updated_at := now();
  return new;
end;
$$;
comment on function private.tg__set_updated_at() is 'Trigger: sets updated_at to now() on update.';

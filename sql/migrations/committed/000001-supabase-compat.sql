--! Previous: -
--! Hash: sha1:f9268d8db992e2ff1b07791e06adf4d8c7ac16a8
--! Message: supabase-compat

--------------------------------------------------------------------------------
-- Supabase compatibility layer
--
-- The same migrations run on plain Postgres (15+) and on a Supabase project.
-- Supabase already has the roles below, the `auth` schema with auth.uid() and
-- auth.jwt(), and pgcrypto in the `extensions` schema; on plain Postgres we
-- create them. Everything here is created only where it is missing, so on
-- Supabase this file changes nothing.
--------------------------------------------------------------------------------

-- Roles. `anon` and `authenticated` are what a request runs as (the gateway
-- does `set local role` per transaction); `service_role` bypasses RLS;
-- `authenticator` is the login role a PostgREST-style gateway would use.
do $$
begin
  if not exists (select from pg_catalog.pg_roles where rolname = 'anon') then
    create role anon nologin noinherit;
  end if;
  if not exists (select from pg_catalog.pg_roles where rolname = 'authenticated') then
    create role authenticated nologin noinherit;
  end if;
  if not exists (select from pg_catalog.pg_roles where rolname = 'service_role') then
    create role service_role nologin noinherit bypassrls;
  end if;
  if not exists (select from pg_catalog.pg_roles where rolname = 'authenticator') then
    create role authenticator login noinherit;
  end if;
end
$$;

-- authenticator may become any request role; so must the role that runs the
-- migrations and the gateway, unless it is a superuser (who may become anyone).
do $$
declare
  request_role text;
begin
  foreach request_role in array array['anon', 'authenticated', 'service_role'] loop
    if not pg_catalog.pg_has_role('authenticator', request_role, 'member') then
      begin
        execute format('grant %I to authenticator', request_role);
      exception when insufficient_privilege then
        raise notice 'could not grant % to authenticator: %', request_role, sqlerrm;
      end;
    end if;
    if not (select rolsuper from pg_catalog.pg_roles where rolname = current_user)
       and not pg_catalog.pg_has_role(current_user, request_role, 'member') then
      begin
        execute format('grant %I to %I', request_role, current_user);
      exception when insufficient_privilege then
        raise notice 'could not grant % to %: %', request_role, current_user, sqlerrm;
      end;
    end if;
  end loop;
end
$$;

-- Extensions live in `extensions`, as on Supabase; code always qualifies them
-- (extensions.crypt, extensions.digest, ...).
create schema if not exists extensions;
grant usage on schema extensions to anon, authenticated, service_role;
create extension if not exists pgcrypto with schema extensions;

-- auth.uid(), auth.role(), auth.jwt(): read the claims the gateway sets with
-- set_config('request.jwt.claims', ..., true) at the start of each request.
create schema if not exists auth;
grant usage on schema auth to anon, authenticated, service_role;

do $$
begin
  if to_regprocedure('auth.jwt()') is null then
    create function auth.jwt() returns jsonb
      language sql stable
      as $f$
        select coalesce(
          nullif(current_setting('request.jwt.claim', true), ''),
          nullif(current_setting('request.jwt.claims', true), '')
        )::jsonb
      $f$;
    comment on function auth.jwt() is 'The verified JWT claims of the current request (set by the gateway).';
    grant execute on function auth.jwt() to anon, authenticated, service_role;
  end if;

  if to_regprocedure('auth.uid()') is null then
    create function auth.uid() returns uuid
      language sql stable
      as $f$
        select coalesce(
          nullif(current_setting('request.jwt.claim.sub', true), ''),
          (nullif(current_setting('request.jwt.claims', true), '')::jsonb ->> 'sub')
        )::uuid
      $f$;
    comment on function auth.uid() is 'The user id (JWT `sub`) of the current request, or null for anonymous requests.';
    grant execute on function auth.uid() to anon, authenticated, service_role;
  end if;

  if to_regprocedure('auth.role()') is null then
    create function auth.role() returns text
      language sql stable
      as $f$
        select coalesce(
          nullif(current_setting('request.jwt.claim.role', true), ''),
          (nullif(current_setting('request.jwt.claims', true), '')::jsonb ->> 'role')
        )::text
      $f$;
    comment on function auth.role() is 'The role claim of the current request.';
    grant execute on function auth.role() to anon, authenticated, service_role;
  end if;
end
$$;

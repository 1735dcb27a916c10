-- =============================================================================
-- Signing keys of access tokens: the key set, rotation, revocation
-- =============================================================================
-- The asymmetric keys (ES256 or RS256) that sign and verify access tokens,
-- kept here so that every gateway process, on every machine, signs and
-- verifies with the same set, and publishes it at
-- GET /auth/v1/.well-known/jwks.json (supabase-js `auth.getClaims()`
-- verifies a token with it, without asking the service).
--
--   standby   published and verifying, not signing yet: added ahead of a
--             rotation, so that every verifier and every client cache knows
--             it before a token signed with it exists
--   current   signs every new access token (exactly one, or none before the
--             first gateway start, which makes one)
--   previous  the key a rotation replaced: it still verifies (and is still
--             published) until the access tokens it signed have expired, that
--             is for the access token lifetime after retired_at
--   revoked   refused at once (a key that leaked): its tokens fail on every
--             door as soon as each process has reloaded the set (NOTIFY
--             signing_keys_changed)
--
-- The private half is stored here as the service's other secrets are
-- (webhook secrets, the hashes of tokens): in a table no request role can
-- read (row-level security on, no grants), reached only by the processes'
-- own role through private.signing_keys_usable and by operators through
-- admin.signing_key_*. A database backup holds it: keep backups as secret as
-- JWT_SECRET. API keys (the anon and service-role keys) and older HS256
-- access tokens stay with the shared secret (JWT_SECRET), not here.
--
-- Code: gateway/core/auth/signing-keys.ts, gateway/core/auth/jwt.ts,
--   gateway/auth/v1/settings.ts (the JWKS), gateway/tooling/admin.ts
--   (`npm run admin -- signing-keys`)
-- pgTAP: supabase/tests/jwks.test.sql
--
-- The whole source of this area, after the areas before it in
-- sql/areas/areas.json: types, tables, indexes, triggers, policies, the api
-- functions, the helpers. To change it: edit it here, then
-- `npm run db -- areas --diff` writes the migration (docs/dba.md).
-- =============================================================================

-- =============================================================================
-- Tables
-- =============================================================================

CREATE TABLE identity.signing_keys (
    kid text NOT NULL,
    alg text NOT NULL,
    status text DEFAULT 'standby'::text NOT NULL,
    public_jwk jsonb NOT NULL,
    private_jwk jsonb NOT NULL,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    activated_at timestamp with time zone,
    retired_at timestamp with time zone,
    revoked_at timestamp with time zone,
    CONSTRAINT signing_keys_alg_check CHECK ((alg = ANY (ARRAY['ES256'::text, 'RS256'::text]))),
    CONSTRAINT signing_keys_kid_shape CHECK ((kid ~ '^[A-Za-z0-9_-]{1,64}$'::text)),
    CONSTRAINT signing_keys_pkey PRIMARY KEY (kid),
    CONSTRAINT signing_keys_public_is_public CHECK (((public_jwk ->> 'kid'::text) = kid AND NOT (public_jwk ? 'd'::text))),
    CONSTRAINT signing_keys_status_check CHECK ((status = ANY (ARRAY['standby'::text, 'current'::text, 'previous'::text, 'revoked'::text])))
);
COMMENT ON TABLE identity.signing_keys IS 'The asymmetric keys that sign (current) and verify (standby, current, previous) access tokens; revoked keys verify nothing. The private JWK is readable only by the processes'' own role.';
COMMENT ON COLUMN identity.signing_keys.public_jwk IS 'The public JWK as published in /auth/v1/.well-known/jwks.json (kid, alg, use sig).';
COMMENT ON COLUMN identity.signing_keys.private_jwk IS 'The private JWK (with d): never leaves the processes'' own role.';
COMMENT ON COLUMN identity.signing_keys.retired_at IS 'When a rotation made the key previous: it verifies for the access token lifetime after this.';
ALTER TABLE identity.signing_keys ENABLE ROW LEVEL SECURITY;

-- =============================================================================
-- Indexes
-- =============================================================================

CREATE UNIQUE INDEX signing_keys_one_current ON identity.signing_keys USING btree (status) WHERE (status = 'current'::text);
CREATE UNIQUE INDEX signing_keys_one_standby ON identity.signing_keys USING btree (status) WHERE (status = 'standby'::text);

-- =============================================================================
-- Triggers
-- =============================================================================

CREATE TRIGGER _900_notify_signing_keys_changed AFTER INSERT OR DELETE OR UPDATE ON identity.signing_keys FOR EACH STATEMENT EXECUTE FUNCTION private.tg_signing_keys__notify_changed();

-- =============================================================================
-- Helpers (private, app, identity): internal helpers and trigger functions; request roles run only those granted here
-- =============================================================================

CREATE FUNCTION private.signing_key_first(kid text, alg text, public_jwk jsonb, private_jwk jsonb) RETURNS void
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog'
    AS $$
begin
  -- Processes starting together agree on one key: the first to lock makes it.
  lock table identity.signing_keys in share row exclusive mode;
  if not exists (select from identity.signing_keys k where k.status = 'current') then
    insert into identity.signing_keys (kid, alg, status, public_jwk, private_jwk, activated_at)
    values (signing_key_first.kid, signing_key_first.alg, 'current', signing_key_first.public_jwk, signing_key_first.private_jwk, now());
  end if;
end;
$$;

COMMENT ON FUNCTION private.signing_key_first(kid text, alg text, public_jwk jsonb, private_jwk jsonb) IS 'At a process''s start, when no key signs yet: the key it made becomes the current one, unless another process''s did first (the table is locked meanwhile).';


CREATE FUNCTION private.signing_keys_usable(token_ttl_seconds integer) RETURNS TABLE(kid text, alg text, status text, public_jwk jsonb, private_jwk jsonb)
    LANGUAGE sql STABLE
    SET search_path TO 'pg_catalog'
    AS $$
    select k.kid, k.alg, k.status, k.public_jwk, case when k.status = 'current' then k.private_jwk end
      from identity.signing_keys k
     where k.status in ('current', 'standby')
        or (k.status = 'previous' and k.retired_at > now() - make_interval(secs => signing_keys_usable.token_ttl_seconds))
     order by k.status = 'current' desc, k.created_at desc
  $$;

COMMENT ON FUNCTION private.signing_keys_usable(token_ttl_seconds integer) IS 'The keys a process verifies with and publishes: the current one (with its private JWK: it signs), the standby one, and previous ones retired less than token_ttl_seconds ago (their tokens may still be valid). Revoked keys never.';


CREATE FUNCTION private.tg_signing_keys__notify_changed() RETURNS trigger
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog'
    AS $$
begin
  perform pg_notify('signing_keys_changed', '');
  return null;
end;
$$;

COMMENT ON FUNCTION private.tg_signing_keys__notify_changed() IS 'Tells every process (NOTIFY signing_keys_changed) to reload the key set: a key added, rotated or revoked.';


CREATE FUNCTION admin.signing_key_add(kid text, alg text, public_jwk jsonb, private_jwk jsonb) RETURNS void
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog'
    AS $$
begin
  if exists (select from identity.signing_keys k where k.status = 'standby') then
    raise exception 'a standby key exists already: rotate to it or revoke it first' using errcode = 'PT422', hint = 'validation_error';
  end if;
  -- With no key at all (a database no process has started on), the first key signs at once.
  insert into identity.signing_keys (kid, alg, status, public_jwk, private_jwk, activated_at)
  select signing_key_add.kid, signing_key_add.alg, s.status, signing_key_add.public_jwk, signing_key_add.private_jwk,
         case when s.status = 'current' then now() end
    from (select case when exists (select from identity.signing_keys k where k.status = 'current') then 'standby' else 'current' end as status) s;
end;
$$;

COMMENT ON FUNCTION admin.signing_key_add(kid text, alg text, public_jwk jsonb, private_jwk jsonb) IS 'npm run admin -- signing-keys add: a new key, standby (published and verifying, not signing) until signing_key_rotate; the current one when none signs yet. PT422 validation_error while a standby key exists.';


CREATE FUNCTION admin.signing_key_revoke(kid text) RETURNS void
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog'
    AS $$
declare
  found_status text;
begin
  select k.status into found_status from identity.signing_keys k where k.kid = signing_key_revoke.kid for update;
  if found_status is null then
    raise exception 'no signing key %', signing_key_revoke.kid using errcode = 'PT404', hint = 'not_found';
  end if;
  if found_status = 'current' then
    raise exception 'the current key signs every new token: add a key, rotate to it, then revoke this one' using errcode = 'PT422', hint = 'validation_error';
  end if;
  update identity.signing_keys k set status = 'revoked', revoked_at = coalesce(k.revoked_at, now())
   where k.kid = signing_key_revoke.kid;
end;
$$;

COMMENT ON FUNCTION admin.signing_key_revoke(kid text) IS 'npm run admin -- signing-keys revoke <kid>: the key verifies nothing any more (its tokens are refused on every door once each process has reloaded the set, at once by NOTIFY). PT404 not_found; PT422 validation_error for the current key (rotate first).';


CREATE FUNCTION admin.signing_key_rotate() RETURNS text
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog'
    AS $$
declare
  next_kid text;
begin
  select k.kid into next_kid from identity.signing_keys k where k.status = 'standby' for update;
  if next_kid is null then
    raise exception 'no standby key: add one first (it must be published before it signs)' using errcode = 'PT404', hint = 'not_found';
  end if;
  update identity.signing_keys k set status = 'previous', retired_at = now() where k.status = 'current';
  update identity.signing_keys k set status = 'current', activated_at = now() where k.kid = next_kid;
  return next_kid;
end;
$$;

COMMENT ON FUNCTION admin.signing_key_rotate() IS 'npm run admin -- signing-keys rotate: the standby key signs from now on; the current one becomes previous and verifies until its tokens have expired. Answers the new current kid. PT404 not_found without a standby key.';


CREATE FUNCTION admin.signing_keys_list() RETURNS TABLE(kid text, alg text, status text, created_at timestamp with time zone, activated_at timestamp with time zone, retired_at timestamp with time zone, revoked_at timestamp with time zone)
    LANGUAGE sql STABLE
    SET search_path TO 'pg_catalog'
    AS $$
    select k.kid, k.alg, k.status, k.created_at, k.activated_at, k.retired_at, k.revoked_at
      from identity.signing_keys k
     order by k.created_at
  $$;

COMMENT ON FUNCTION admin.signing_keys_list() IS 'npm run admin -- signing-keys list: every key, oldest first, without its private half.';

-- Made by `npm run db -- areas --diff` from sql/areas: the statements that make the
-- migrated database what the area files state, planned by pg-delta. Each run
-- writes it again: edit the area files, not this one. Data changes go in a
-- file of this folder numbered below 900 (docs/dba.md, "Changing a rule").

set local check_function_bodies = off;

DROP FUNCTION "admin"."user_create"(text, text, jsonb);

DROP FUNCTION "admin"."user_update"(uuid, text, text, jsonb);

DROP FUNCTION "private"."user_metadata_merge"(uuid, jsonb);

CREATE TABLE "identity"."signing_keys" ("kid" text NOT NULL, "alg" text NOT NULL, "status" text NOT NULL DEFAULT 'standby'::text, "public_jwk" jsonb NOT NULL, "private_jwk" jsonb NOT NULL, "created_at" timestamp with time zone NOT NULL DEFAULT now(), "activated_at" timestamp with time zone, "retired_at" timestamp with time zone, "revoked_at" timestamp with time zone, CONSTRAINT "signing_keys_alg_check" CHECK ((alg = ANY (ARRAY['ES256'::text, 'RS256'::text]))), CONSTRAINT "signing_keys_kid_shape" CHECK ((kid ~ '^[A-Za-z0-9_-]{1,64}$'::text)), CONSTRAINT "signing_keys_pkey" PRIMARY KEY (kid), CONSTRAINT "signing_keys_public_is_public" CHECK ((((public_jwk ->> 'kid'::text) = kid) AND (NOT (public_jwk ? 'd'::text)))), CONSTRAINT "signing_keys_status_check" CHECK ((status = ANY (ARRAY['standby'::text, 'current'::text, 'previous'::text, 'revoked'::text]))));

ALTER TABLE "identity"."signing_keys" ENABLE ROW LEVEL SECURITY;

ALTER TABLE "identity"."users" ADD COLUMN "app_metadata" jsonb NOT NULL DEFAULT '{}'::jsonb;

CREATE OR REPLACE FUNCTION admin.signing_key_add(kid text, alg text, public_jwk jsonb, private_jwk jsonb)
 RETURNS void
 LANGUAGE plpgsql
 SET search_path TO 'pg_catalog'
AS $function$
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
$function$;

CREATE OR REPLACE FUNCTION admin.signing_key_revoke(kid text)
 RETURNS void
 LANGUAGE plpgsql
 SET search_path TO 'pg_catalog'
AS $function$
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
$function$;

CREATE OR REPLACE FUNCTION admin.signing_key_rotate()
 RETURNS text
 LANGUAGE plpgsql
 SET search_path TO 'pg_catalog'
AS $function$
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
$function$;

CREATE OR REPLACE FUNCTION admin.signing_keys_list()
 RETURNS TABLE(kid text, alg text, status text, created_at timestamp with time zone, activated_at timestamp with time zone, retired_at timestamp with time zone, revoked_at timestamp with time zone)
 LANGUAGE sql
 STABLE
 SET search_path TO 'pg_catalog'
AS $function$
    select k.kid, k.alg, k.status, k.created_at, k.activated_at, k.retired_at, k.revoked_at
      from identity.signing_keys k
     order by k.created_at
  $function$;

CREATE OR REPLACE FUNCTION admin.user_create(email text, password_hash text DEFAULT NULL::text, user_metadata jsonb DEFAULT NULL::jsonb, app_metadata jsonb DEFAULT NULL::jsonb)
 RETURNS jsonb
 LANGUAGE plpgsql
 SET search_path TO 'pg_catalog'
AS $function$
declare
  new_user uuid := private.create_account_with_hash(user_create.email, user_create.password_hash, null);
begin
  if user_create.user_metadata is not null then
    perform private.user_metadata_merge(new_user, user_create.user_metadata);
  end if;
  if user_create.app_metadata is not null then
    update identity.users u set app_metadata = private.metadata_merged(u.app_metadata, user_create.app_metadata, 'app_metadata')
     where u.id = new_user;
  end if;
  return private.auth_user_object(new_user);
end;
$function$;

CREATE OR REPLACE FUNCTION admin.user_update(user_id uuid, email text DEFAULT NULL::text, password_hash text DEFAULT NULL::text, user_metadata jsonb DEFAULT NULL::jsonb, app_metadata jsonb DEFAULT NULL::jsonb)
 RETURNS jsonb
 LANGUAGE plpgsql
 SET search_path TO 'pg_catalog'
AS $function$
declare
  current_email text;
begin
  select u.email into current_email from identity.users u where u.id = user_update.user_id for update;
  if not found then
    raise exception 'User not found' using errcode = 'PT404', hint = 'not_found';
  end if;
  -- One transaction: every change or none.
  if user_update.email is not null and lower(btrim(user_update.email)) is distinct from current_email then
    -- The operator's change needs no link: the address is the account's at once (PT400 invalid_email, PT409 email_taken).
    update identity.users u set email = private.account_email_check(user_update.email), updated_at = now()
     where u.id = user_update.user_id
     returning u.email into current_email;
    -- A name derived from the old address (private) is derived from the new one: no trace of the old address stays.
    update app.profiles p set name = split_part(current_email, '@', 1)
     where p.id = user_update.user_id and p.name_source = 'email';
  end if;
  if user_update.password_hash is not null then
    if not private.password_hash_valid(user_update.password_hash) then
      raise exception 'password_hash must be a bcrypt hash of cost 10 or more' using errcode = 'PT400', hint = 'invalid_password_hash';
    end if;
    update identity.users u set password_hash = user_update.password_hash, updated_at = now() where u.id = user_update.user_id;
    -- As Supabase Auth does when an operator sets a password: every session of the account ends (and its signed storage URLs).
    update identity.refresh_tokens r set revoked_at = now(), revoked_reason = 'logout'
     where r.user_id = user_update.user_id and r.revoked_at is null;
    perform private.storage_signed_urls_end(user_update.user_id);
  end if;
  if user_update.user_metadata is not null then
    perform private.user_metadata_merge(user_update.user_id, user_update.user_metadata);
  end if;
  if user_update.app_metadata is not null then
    -- Only here: the service-role key's door. A user's own door (PUT /auth/v1/user) has no way to it.
    update identity.users u
       set app_metadata = private.metadata_merged(u.app_metadata, user_update.app_metadata, 'app_metadata'), updated_at = now()
     where u.id = user_update.user_id;
  end if;
  return private.auth_user_object(user_update.user_id);
end;
$function$;

CREATE OR REPLACE FUNCTION private.access_token_claims(user_id uuid)
 RETURNS jsonb
 LANGUAGE sql
 STABLE
 SET search_path TO 'pg_catalog'
AS $function$
    select jsonb_build_object(
             'app_metadata', u.app_metadata || jsonb_build_object('provider', 'email', 'providers', jsonb_build_array('email')),
             'user_metadata', u.user_metadata)
      from identity.users u
     where u.id = access_token_claims.user_id
  $function$;

CREATE OR REPLACE FUNCTION private.app_metadata()
 RETURNS jsonb
 LANGUAGE sql
 STABLE SECURITY DEFINER
 SET search_path TO 'pg_catalog'
AS $function$
    select coalesce(auth.jwt() -> 'app_metadata',
                    (select u.app_metadata from identity.users u where u.id = auth.uid()),
                    '{}'::jsonb)
  $function$;

CREATE OR REPLACE FUNCTION private.auth_user_object(user_id uuid)
 RETURNS jsonb
 LANGUAGE sql
 STABLE
 SET search_path TO 'pg_catalog'
AS $function$
    select jsonb_build_object(
             'id', u.id, 'aud', 'authenticated', 'role', 'authenticated', 'email', u.email, 'phone', '',
             'email_confirmed_at', app.iso(u.created_at), 'confirmed_at', app.iso(u.created_at),
             'last_sign_in_at', app.iso(s.last_sign_in_at),
             'app_metadata', u.app_metadata || jsonb_build_object('provider', 'email', 'providers', jsonb_build_array('email')),
             'user_metadata', u.user_metadata,
             'identities', jsonb_build_array(jsonb_build_object(
               'identity_id', u.id, 'id', u.id, 'user_id', u.id, 'provider', 'email', 'email', u.email,
               'identity_data', jsonb_build_object('sub', u.id, 'email', u.email, 'email_verified', true, 'phone_verified', false),
               'last_sign_in_at', app.iso(s.last_sign_in_at), 'created_at', app.iso(u.created_at), 'updated_at', app.iso(u.updated_at))),
             'created_at', app.iso(u.created_at), 'updated_at', app.iso(u.updated_at), 'is_anonymous', false)
        || coalesce((select jsonb_build_object('new_email', l.new_email, 'email_change_sent_at', app.iso(l.created_at))
                       from identity.account_links l
                      where l.user_id = u.id and l.purpose = 'email_change' and l.used_at is null and l.expires_at > now()
                      order by l.created_at desc limit 1), '{}'::jsonb)
      from identity.users u
      cross join lateral (select max(r.created_at) as last_sign_in_at from identity.refresh_tokens r
                           where r.user_id = u.id and r.parent_id is null) s
     where u.id = auth_user_object.user_id
  $function$;

CREATE OR REPLACE FUNCTION private.metadata_merged(current_value jsonb, data jsonb, what text)
 RETURNS jsonb
 LANGUAGE plpgsql
 IMMUTABLE
 SET search_path TO 'pg_catalog'
AS $function$
declare
  merged jsonb;
begin
  if jsonb_typeof(metadata_merged.data) is distinct from 'object' then
    raise exception 'data must be a JSON object' using errcode = 'PT422', hint = 'validation_error';
  end if;
  -- Supabase Auth's merge: each key given replaces its value; a key given as null is removed.
  merged := (select coalesce(jsonb_object_agg(e.key, e.value), '{}'::jsonb)
               from jsonb_each(coalesce(metadata_merged.current_value, '{}'::jsonb) || metadata_merged.data) e
              where e.value <> 'null'::jsonb);
  if octet_length(merged::text) > 16384 then
    raise exception '% may hold at most 16 KB', metadata_merged.what using errcode = 'PT422', hint = 'validation_error';
  end if;
  return merged;
end;
$function$;

CREATE OR REPLACE FUNCTION private.signing_key_first(kid text, alg text, public_jwk jsonb, private_jwk jsonb)
 RETURNS void
 LANGUAGE plpgsql
 SET search_path TO 'pg_catalog'
AS $function$
begin
  -- Processes starting together agree on one key: the first to lock makes it.
  lock table identity.signing_keys in share row exclusive mode;
  if not exists (select from identity.signing_keys k where k.status = 'current') then
    insert into identity.signing_keys (kid, alg, status, public_jwk, private_jwk, activated_at)
    values (signing_key_first.kid, signing_key_first.alg, 'current', signing_key_first.public_jwk, signing_key_first.private_jwk, now());
  end if;
end;
$function$;

CREATE OR REPLACE FUNCTION private.signing_keys_usable(token_ttl_seconds integer)
 RETURNS TABLE(kid text, alg text, status text, public_jwk jsonb, private_jwk jsonb)
 LANGUAGE sql
 STABLE
 SET search_path TO 'pg_catalog'
AS $function$
    select k.kid, k.alg, k.status, k.public_jwk, case when k.status = 'current' then k.private_jwk end
      from identity.signing_keys k
     where k.status in ('current', 'standby')
        or (k.status = 'previous' and k.retired_at > now() - make_interval(secs => signing_keys_usable.token_ttl_seconds))
     order by k.status = 'current' desc, k.created_at desc
  $function$;

CREATE OR REPLACE FUNCTION private.tg_signing_keys__notify_changed()
 RETURNS trigger
 LANGUAGE plpgsql
 SET search_path TO 'pg_catalog'
AS $function$
begin
  perform pg_notify('signing_keys_changed', '');
  return null;
end;
$function$;

CREATE OR REPLACE FUNCTION private.user_metadata_merge(user_id uuid, data jsonb)
 RETURNS void
 LANGUAGE sql
 SET search_path TO 'pg_catalog'
AS $function$
    update identity.users u
       set user_metadata = private.metadata_merged(u.user_metadata, user_metadata_merge.data, 'user_metadata'), updated_at = now()
     where u.id = user_metadata_merge.user_id
  $function$;

ALTER TABLE "identity"."users" ADD CONSTRAINT "users_app_metadata_object" CHECK ((jsonb_typeof(app_metadata) = 'object'::text));

CREATE UNIQUE INDEX signing_keys_one_current ON identity.signing_keys USING btree (status) WHERE (status = 'current'::text);

CREATE UNIQUE INDEX signing_keys_one_standby ON identity.signing_keys USING btree (status) WHERE (status = 'standby'::text);

CREATE TRIGGER _900_notify_signing_keys_changed AFTER INSERT OR DELETE OR UPDATE ON identity.signing_keys FOR EACH STATEMENT EXECUTE FUNCTION private.tg_signing_keys__notify_changed();

COMMENT ON COLUMN "identity"."signing_keys"."private_jwk" IS 'The private JWK (with d): never leaves the processes'' own role.';

COMMENT ON COLUMN "identity"."signing_keys"."public_jwk" IS 'The public JWK as published in /auth/v1/.well-known/jwks.json (kid, alg, use sig).';

COMMENT ON COLUMN "identity"."signing_keys"."retired_at" IS 'When a rotation made the key previous: it verifies for the access token lifetime after this.';

COMMENT ON COLUMN "identity"."users"."app_metadata" IS 'What the service (its operators, with the service-role key) says about the user: a JSON object of at most 16 KB set only through PUT /auth/v1/admin/users/{id} (admin.user_update), answered as the User object''s app_metadata with provider and providers, and carried in access tokens (claim app_metadata) for rules to read (private.app_metadata()).';

COMMENT ON FUNCTION "admin"."signing_key_add"(text, text, jsonb, jsonb) IS 'npm run admin -- signing-keys add: a new key, standby (published and verifying, not signing) until signing_key_rotate; the current one when none signs yet. PT422 validation_error while a standby key exists.';

COMMENT ON FUNCTION "admin"."signing_key_revoke"(text) IS 'npm run admin -- signing-keys revoke <kid>: the key verifies nothing any more (its tokens are refused on every door once each process has reloaded the set, at once by NOTIFY). PT404 not_found; PT422 validation_error for the current key (rotate first).';

COMMENT ON FUNCTION "admin"."signing_key_rotate"() IS 'npm run admin -- signing-keys rotate: the standby key signs from now on; the current one becomes previous and verifies until its tokens have expired. Answers the new current kid. PT404 not_found without a standby key.';

COMMENT ON FUNCTION "admin"."signing_keys_list"() IS 'npm run admin -- signing-keys list: every key, oldest first, without its private half.';

COMMENT ON FUNCTION "admin"."user_create"(text, text, jsonb, jsonb) IS 'POST /auth/v1/admin/users (the service-role key): creates an account as registration does (private.create_account_with_hash: profile and node; password_hash a bcrypt hash the gateway made, or null for an account that signs in only through a set-password link), merges user_metadata and app_metadata, and answers the User object. PT400 invalid_email / invalid_password_hash, PT409 email_taken, PT422 validation_error for user_metadata.';

COMMENT ON FUNCTION "admin"."user_update"(uuid, text, text, jsonb, jsonb) IS 'PUT /auth/v1/admin/users/{id} (the service-role key): every change at once or none. email becomes the account''s address at once (no link; a name derived from the old address is derived from the new one; PT400 invalid_email, PT409 email_taken); password_hash (a bcrypt hash the gateway made) replaces the password and ends every session of the account and its signed storage URLs; user_metadata is merged as PUT /auth/v1/user merges it, and app_metadata the same way (its only door: access tokens issued afterwards carry it). Answers the User object; PT404 not_found for an unknown id.';

COMMENT ON FUNCTION "private"."access_token_claims"(uuid) IS 'The claims of a user''s access token besides those of its session (sub, email, session_id): app_metadata and user_metadata as Supabase Auth carries them. Read by the processes when they sign a token (gateway/auth/sessions.ts); what is added to every access token is added here.';

COMMENT ON FUNCTION "private"."app_metadata"() IS 'The caller''s app_metadata, for rules and policies: as its access token carries it (claim app_metadata, as signed when the token was issued), or the account''s own for a credential that carries none (an API token, an OAuth token on /mcp); {} for anon.';

COMMENT ON FUNCTION "private"."auth_user_object"(uuid) IS 'A user as Supabase Auth''s User object: id, aud, role, email, email_confirmed_at (the account''s creation: sign-up needs no confirmation here), last_sign_in_at (its latest sign-in), app_metadata (the operators'' keys, and provider email), user_metadata, one email identity, created_at, updated_at; new_email and email_change_sent_at while an e-mail change waits for its link.';

COMMENT ON FUNCTION "private"."metadata_merged"(jsonb, jsonb, text) IS 'current_value with data merged as Supabase Auth merges user_metadata and app_metadata: each key given replaces its value, a key given as null is removed; at most 16 KB (else PT422 validation_error naming what); data not an object: PT422.';

COMMENT ON FUNCTION "private"."signing_key_first"(text, text, jsonb, jsonb) IS 'At a process''s start, when no key signs yet: the key it made becomes the current one, unless another process''s did first (the table is locked meanwhile).';

COMMENT ON FUNCTION "private"."signing_keys_usable"(integer) IS 'The keys a process verifies with and publishes: the current one (with its private JWK: it signs), the standby one, and previous ones retired less than token_ttl_seconds ago (their tokens may still be valid). Revoked keys never.';

COMMENT ON FUNCTION "private"."tg_signing_keys__notify_changed"() IS 'Tells every process (NOTIFY signing_keys_changed) to reload the key set: a key added, rotated or revoked.';

COMMENT ON FUNCTION "private"."user_metadata_merge"(uuid, jsonb) IS 'Merges data into a user''s user_metadata (private.metadata_merged: PT422 validation_error for more than 16 KB or data not an object). The one merge of PUT /auth/v1/user and the admin user functions.';

COMMENT ON TABLE "identity"."signing_keys" IS 'The asymmetric keys that sign (current) and verify (standby, current, previous) access tokens; revoked keys verify nothing. The private JWK is readable only by the processes'' own role.';

REVOKE ALL ON FUNCTION "admin"."signing_key_add"(text, text, jsonb, jsonb) FROM PUBLIC;

REVOKE ALL ON FUNCTION "admin"."signing_key_revoke"(text) FROM PUBLIC;

REVOKE ALL ON FUNCTION "admin"."signing_key_rotate"() FROM PUBLIC;

REVOKE ALL ON FUNCTION "admin"."signing_keys_list"() FROM PUBLIC;

REVOKE ALL ON FUNCTION "admin"."user_create"(text, text, jsonb, jsonb) FROM PUBLIC;

REVOKE ALL ON FUNCTION "admin"."user_update"(uuid, text, text, jsonb, jsonb) FROM PUBLIC;

REVOKE ALL ON FUNCTION "private"."access_token_claims"(uuid) FROM PUBLIC;

REVOKE ALL ON FUNCTION "private"."app_metadata"() FROM PUBLIC;

GRANT EXECUTE ON FUNCTION "private"."app_metadata"() TO "anon", "authenticated";

REVOKE ALL ON FUNCTION "private"."metadata_merged"(jsonb, jsonb, text) FROM PUBLIC;

REVOKE ALL ON FUNCTION "private"."signing_key_first"(text, text, jsonb, jsonb) FROM PUBLIC;

REVOKE ALL ON FUNCTION "private"."signing_keys_usable"(integer) FROM PUBLIC;

REVOKE ALL ON FUNCTION "private"."tg_signing_keys__notify_changed"() FROM PUBLIC;

REVOKE ALL ON FUNCTION "private"."user_metadata_merge"(uuid, jsonb) FROM PUBLIC;

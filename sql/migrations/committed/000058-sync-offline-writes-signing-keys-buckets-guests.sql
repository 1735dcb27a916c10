--! Previous: sha1:d2ecdca374e1dd0b3ac2adbe06037ca9dd5f8bee
--! Hash: sha1:1fe348c7429b3757510d4eab1bf489077f70985e
--! Message: sync-offline-writes-signing-keys-buckets-guests

--! split: 100-checkins-device-time.sql
-- Offline check-ins: the phone's time beside the server's (app.checkins,
-- sql/areas/events.sql).
ALTER TABLE app.checkins ADD COLUMN IF NOT EXISTS device_checked_in_at timestamp with time zone;

ALTER TABLE app.checkins DROP CONSTRAINT IF EXISTS checkins_device_time_bounded;
-- Safe: the column is new, null in every row, so the validating scan refuses
-- nothing; it reads app.checkins once under the lock (one row per check-in).
-- squawk-ignore constraint-missing-not-valid
ALTER TABLE app.checkins ADD CONSTRAINT checkins_device_time_bounded CHECK (((device_checked_in_at IS NULL) OR ((device_checked_in_at >= (checked_in_at - '24:00:00'::interval)) AND (device_checked_in_at <= (checked_in_at + '00:05:00'::interval)))));

--! split: 110-auth-counters-unlogged.sql
-- The sign-in counters written on every attempt (private.password_attempts:
-- one row per sign-in while its password is checked; private.auth_failures:
-- one row per failure, and per request at the doors that set a password or
-- e-mail a link) are UNLOGGED: their rows write no WAL and a transaction that
-- writes only them (private.password_attempt_start) commits without waiting
-- for a WAL flush. A crash of the primary or a failover empties them, which
-- forgets the failures of the last window and ends the sign-ins being checked
-- at that moment (they answer expired and are tried again).
alter table private.password_attempts set unlogged;
alter table private.auth_failures set unlogged;

--! split: 120-guests-operator-uploads.sql
-- Written by hand (docs/dba.md): the table changes of this round that squawk
-- asks to be made in steps, so that 900-areas.sql has nothing left to plan
-- for them.
--
-- The checks below are added in the migration's one transaction: each reads
-- its table once under the lock, and nothing in it can fail them (the new
-- columns hold their defaults; existing accounts all have an address; every
-- scope in auth_failures is one of the list's).
--
-- Guests (sql/areas/auth.sql): an account may have no e-mail address, and
-- the service's own claims (app_metadata) live beside it.
ALTER TABLE identity.users ADD COLUMN IF NOT EXISTS is_anonymous boolean NOT NULL DEFAULT false;
ALTER TABLE identity.users ADD COLUMN IF NOT EXISTS app_metadata jsonb NOT NULL DEFAULT '{}'::jsonb;
-- Safe: only this service reads identity.users, and every reader of email
-- (the User object, the profile, the export) answers null for a guest.
-- squawk-ignore ban-drop-not-null
ALTER TABLE identity.users ALTER COLUMN email DROP NOT NULL;
ALTER TABLE identity.users DROP CONSTRAINT IF EXISTS users_app_metadata_object;
-- squawk-ignore constraint-missing-not-valid
ALTER TABLE identity.users ADD CONSTRAINT users_app_metadata_object CHECK ((jsonb_typeof(app_metadata) = 'object'::text));
ALTER TABLE identity.users DROP CONSTRAINT IF EXISTS users_guest_has_no_email;
-- squawk-ignore constraint-missing-not-valid
ALTER TABLE identity.users ADD CONSTRAINT users_guest_has_no_email CHECK ((is_anonymous = (email IS NULL)));

-- Guest sign-ins are counted per client address with the other sign-in failures.
ALTER TABLE private.auth_failures DROP CONSTRAINT IF EXISTS auth_failures_scope_check;
-- squawk-ignore constraint-missing-not-valid
ALTER TABLE private.auth_failures ADD CONSTRAINT auth_failures_scope_check CHECK ((scope = ANY (ARRAY['email'::text, 'email_client'::text, 'ip'::text, 'refresh'::text, 'verify'::text, 'password_set'::text, 'email_link'::text, 'guest'::text])));

-- Uploads by the service-role key (the storage operator) belong to no user
-- (sql/areas/storage.sql): no quota counts them.
-- Safe: the column is read only by the storage functions, which handle null.
-- squawk-ignore ban-drop-not-null
ALTER TABLE app.storage_uploads ALTER COLUMN owner_id DROP NOT NULL;

--! split: 900-areas.sql
-- Made by `npm run db -- areas --diff` from sql/areas: the statements that make the
-- migrated database what the area files state, planned by pg-delta. Each run
-- writes it again: edit the area files, not this one. Data changes go in a
-- file of this folder numbered below 900 (docs/dba.md, "Changing a rule").

set local check_function_bodies = off;

DROP FUNCTION "admin"."user_create"(text, text, jsonb);

DROP FUNCTION "admin"."user_update"(uuid, text, text, jsonb);

DROP FUNCTION "api"."connection_update"(uuid, jsonb);

DROP FUNCTION "api"."event_checkin"(uuid, uuid, uuid, text);

DROP FUNCTION "api"."event_update"(uuid, jsonb, text);

DROP FUNCTION "api"."profile_patch"(jsonb);

DROP FUNCTION "api"."task_delete"(uuid);

DROP FUNCTION "api"."task_update"(uuid, jsonb);

DROP FUNCTION "private"."check_in"(uuid, uuid, uuid, uuid, text);

DROP FUNCTION "private"."check_in_user"(uuid, uuid, uuid, uuid, uuid, text);

DROP FUNCTION "private"."user_metadata_merge"(uuid, jsonb);

CREATE TABLE "identity"."email_codes" ("id" bigint GENERATED ALWAYS AS IDENTITY NOT NULL, "user_id" uuid NOT NULL, "code_hash" bytea NOT NULL, "link_hash" bytea NOT NULL, "created_at" timestamp with time zone NOT NULL DEFAULT now(), "expires_at" timestamp with time zone NOT NULL, "used_at" timestamp with time zone, "failures" integer NOT NULL DEFAULT 0, CONSTRAINT "email_codes_link_hash_key" UNIQUE (link_hash), CONSTRAINT "email_codes_pkey" PRIMARY KEY (id));

ALTER TABLE "identity"."email_codes" ENABLE ROW LEVEL SECURITY;

CREATE TABLE "identity"."signing_keys" ("kid" text NOT NULL, "alg" text NOT NULL, "status" text NOT NULL DEFAULT 'standby'::text, "public_jwk" jsonb NOT NULL, "private_jwk" jsonb NOT NULL, "created_at" timestamp with time zone NOT NULL DEFAULT now(), "activated_at" timestamp with time zone, "retired_at" timestamp with time zone, "revoked_at" timestamp with time zone, CONSTRAINT "signing_keys_alg_check" CHECK ((alg = ANY (ARRAY['ES256'::text, 'RS256'::text]))), CONSTRAINT "signing_keys_kid_shape" CHECK ((kid ~ '^[A-Za-z0-9_-]{1,64}$'::text)), CONSTRAINT "signing_keys_pkey" PRIMARY KEY (kid), CONSTRAINT "signing_keys_public_is_public" CHECK ((((public_jwk ->> 'kid'::text) = kid) AND (NOT (public_jwk ? 'd'::text)))), CONSTRAINT "signing_keys_status_check" CHECK ((status = ANY (ARRAY['standby'::text, 'current'::text, 'previous'::text, 'revoked'::text]))));

ALTER TABLE "identity"."signing_keys" ENABLE ROW LEVEL SECURITY;

CREATE TYPE "api"."sync_message" AS ("change_id" bigint, "operation" text, "id" uuid, "value" jsonb);

CREATE TYPE "api"."sync_snapshot_row" AS ("head" bigint, "id" uuid, "value" jsonb);

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
  perform private.require_full_account();
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

CREATE OR REPLACE FUNCTION api.auth_guest_convert(email text, password_hash text, data jsonb DEFAULT NULL::jsonb)
 RETURNS jsonb
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog'
AS $function$
declare
  me uuid := private.account_caller();
  normalised text;
begin
  perform from identity.users u where u.id = me and u.is_anonymous for update;
  if not found then
    raise exception 'only a guest account is converted' using errcode = 'PT403', hint = 'forbidden';
  end if;
  if not private.password_hash_valid(auth_guest_convert.password_hash) then
    raise exception 'password_hash must be a bcrypt hash of cost 10 or more' using errcode = 'PT400', hint = 'invalid_password_hash';
  end if;
  normalised := private.account_email_check(auth_guest_convert.email);
  begin
    update identity.users u
       set email = normalised, password_hash = auth_guest_convert.password_hash, is_anonymous = false, updated_at = now()
     where u.id = me;
  exception when unique_violation then
    raise exception 'an account with this email already exists' using errcode = 'PT409', hint = 'email_taken';
  end;
  update app.profiles p set name = split_part(normalised, '@', 1) where p.id = me and p.name_source = 'email';
  if auth_guest_convert.data is not null then
    perform private.user_metadata_merge(me, auth_guest_convert.data);
  end if;
  return private.auth_user_object(me);
end;
$function$;

CREATE OR REPLACE FUNCTION api.auth_guest_sign_in(client_ip text, max_per_ip integer, window_seconds integer, user_agent text DEFAULT NULL::text, data jsonb DEFAULT NULL::jsonb)
 RETURNS TABLE(status text, retry_after integer, user_id uuid, email text, refresh_token text, session_id uuid)
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog'
AS $function$
declare
  wait integer;
  guest uuid;
  new_node uuid;
  started record;
begin
  if client_ip is not null then
    -- Sign-ins of one address take turns, so a burst cannot slip past the count.
    perform pg_advisory_xact_lock(hashtextextended('auth_failures:guest:' || client_ip, 0));
    wait := private.auth_throttle_wait('guest', client_ip, max_per_ip, window_seconds);
    if wait > 0 then
      return query select 'throttled'::text, wait, null::uuid, null::text, null::text, null::uuid;
      return;
    end if;
    perform private.auth_throttle_record('guest', client_ip);
  end if;
  insert into identity.users (email, password_hash, is_anonymous) values (null, null, true) returning id into guest;
  insert into app.nodes (kind) values ('user') returning id into new_node;
  -- A derived (private) name until the guest chooses one.
  insert into app.profiles (id, name, name_source, node_id) values (guest, 'guest', 'email', new_node);
  if auth_guest_sign_in.data is not null then
    perform private.user_metadata_merge(guest, auth_guest_sign_in.data);
  end if;
  select * into started from private.start_session(guest, auth_guest_sign_in.user_agent, auth_guest_sign_in.client_ip);
  return query select 'ok'::text, 0, guest, null::text, started.refresh_token, started.session_id;
end;
$function$;

CREATE OR REPLACE FUNCTION api.auth_magic_link_verify(token text, user_agent text DEFAULT NULL::text, client_ip text DEFAULT NULL::text)
 RETURNS TABLE(user_id uuid, email text, refresh_token text, session_id uuid)
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog'
AS $function$
declare
  live identity.email_codes;
  started record;
begin
  select c.* into live from identity.email_codes c
   where c.link_hash = identity.token_hash(auth_magic_link_verify.token) for update;
  if live.id is null or live.used_at is not null or live.expires_at <= now() then
    raise exception 'this link is not valid or has expired' using errcode = 'PT400', hint = 'invalid_link';
  end if;
  update identity.email_codes c set used_at = now() where c.id = live.id;
  select * into started from private.start_session(live.user_id, auth_magic_link_verify.user_agent, auth_magic_link_verify.client_ip);
  return query select u.id, u.email, started.refresh_token, started.session_id
                 from identity.users u where u.id = live.user_id;
end;
$function$;

CREATE OR REPLACE FUNCTION api.auth_otp_request(email text, public_url text, client_ip text, max_per_ip integer, window_seconds integer)
 RETURNS void
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog'
AS $function$
begin
  -- As a recovery link: the same work whether or not the account exists; the
  -- lookup, the code and the e-mail are a job's (private.email_link_send).
  perform private.email_link_enqueue('otp', auth_otp_request.email, auth_otp_request.public_url,
                                     auth_otp_request.client_ip, auth_otp_request.max_per_ip, auth_otp_request.window_seconds);
end;
$function$;

CREATE OR REPLACE FUNCTION api.auth_otp_verify(email text, code text, client_ip text, user_agent text, max_failures_per_email_client integer, max_failures_per_email integer, max_failures_per_ip integer, window_seconds integer)
 RETURNS TABLE(status text, retry_after integer, user_id uuid, user_email text, refresh_token text, session_id uuid)
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog'
AS $function$
declare
  email_key text := lower(btrim(coalesce(auth_otp_verify.email, '')));
  wait integer;
  live identity.email_codes;
  started record;
begin
  -- Tries for one address take turns, and count with its failed sign-ins (private.sign_in_wait).
  perform pg_advisory_xact_lock(hashtextextended('auth_failures:email:' || email_key, 0));
  wait := private.sign_in_wait(email_key, client_ip, max_failures_per_email_client, max_failures_per_email,
                               max_failures_per_ip, window_seconds);
  if wait > 0 then
    return query select 'throttled'::text, wait, null::uuid, null::text, null::text, null::uuid;
    return;
  end if;
  select c.* into live
    from identity.email_codes c join identity.users u on u.id = c.user_id
   where u.email = email_key and c.used_at is null and c.expires_at > now()
   order by c.created_at desc limit 1
   for update of c;
  if live.id is null or coalesce(auth_otp_verify.code, '') !~ '^[0-9]{6}$'
     or live.code_hash <> identity.token_hash(live.user_id::text || ':' || auth_otp_verify.code) then
    -- Counted as a failed sign-in, the same whether or not the address has an account or a code.
    perform private.auth_throttle_record('email_client', email_key || ' ' || coalesce(client_ip, 'unknown'));
    perform private.auth_throttle_record('email', email_key);
    if client_ip is not null then
      perform private.auth_throttle_record('ip', client_ip);
    end if;
    if live.id is not null then
      update identity.email_codes c set failures = c.failures + 1,
                                        used_at = case when c.failures + 1 >= 5 then now() end
       where c.id = live.id;
    end if;
    return query select 'invalid'::text, 0, null::uuid, null::text, null::text, null::uuid;
    return;
  end if;
  update identity.email_codes c set used_at = now() where c.id = live.id;
  delete from private.auth_failures f where f.scope = 'email_client' and f.key = email_key || ' ' || coalesce(client_ip, 'unknown');
  select * into started from private.start_session(live.user_id, auth_otp_verify.user_agent, auth_otp_verify.client_ip);
  return query select 'ok'::text, 0, u.id, u.email, started.refresh_token, started.session_id
                 from identity.users u where u.id = live.user_id;
end;
$function$;

CREATE OR REPLACE FUNCTION api.connection_update(id uuid, patch jsonb, if_match text[] DEFAULT NULL::text[])
 RETURNS SETOF api.connection
 LANGUAGE plpgsql
 SET search_path TO 'pg_catalog'
AS $function$
declare
  current_row app.connections;
begin
  if connection_update.if_match is not null then
    select c.* into current_row from app.connections c where c.id = connection_update.id for no key update;
    if found then
      perform app.check_if_match(connection_update.if_match, current_row.updated_at, private.connection_json(current_row));
    end if;
  end if;
  return query
    update app.connections c
       set notes = case when patch ? 'notes' then patch ->> 'notes' else c.notes end,
           strength = case when patch ? 'strength' then patch ->> 'strength' else c.strength end,
           tags = case
                    when not patch ? 'tags' then c.tags
                    when jsonb_typeof(patch -> 'tags') = 'array'
                      then array(select jsonb_array_elements_text(patch -> 'tags'))
                    else '{}'
                  end
     where c.id = connection_update.id
    returning c.id, c.owner_node_id, c.target_node_id, c.connection_type, c.event_id, c.my_hat_id,
              c.their_hat_id, c.notes, c.strength, c.tags, c.created_at, c.updated_at;
  if not found then
    raise exception 'connection not found' using errcode = 'PT404', hint = 'connection_not_found';
  end if;
end;
$function$;

CREATE OR REPLACE FUNCTION api.etag(version timestamp with time zone)
 RETURNS text
 LANGUAGE sql
 IMMUTABLE STRICT
 SET search_path TO 'pg_catalog'
AS $function$
    select '"' || ((extract(epoch from version) * 1000000)::bigint)::text || '"'
  $function$;

CREATE OR REPLACE FUNCTION api.event_checkin(event_id uuid, hat_id uuid DEFAULT NULL::uuid, location_id uuid DEFAULT NULL::uuid, visibility text DEFAULT NULL::text, checked_in_at timestamp with time zone DEFAULT NULL::timestamp with time zone)
 RETURNS SETOF api.checkin_outcome
 LANGUAGE plpgsql
 SET search_path TO 'pg_catalog'
AS $function$
declare
  found_event app.events := private.find_event(event_checkin.event_id);
begin
  if found_event.id is null then
    raise exception 'event not found' using errcode = 'PT404', hint = 'event_not_found';
  end if;
  return query select * from private.check_in(found_event.id, null, hat_id, location_id, visibility,
                                               private.checkin_device_time(found_event, event_checkin.checked_in_at));
end;
$function$;

CREATE OR REPLACE FUNCTION api.event_etag(id uuid)
 RETURNS text
 LANGUAGE sql
 STABLE
 SET search_path TO 'pg_catalog'
AS $function$
    select api.etag((private.find_event(event_etag.id)).updated_at)
  $function$;

CREATE OR REPLACE FUNCTION api.event_update(id uuid, patch jsonb, public_url text, if_match text[] DEFAULT NULL::text[])
 RETURNS jsonb
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog'
AS $function$
declare
  caller uuid := auth.uid();
  found_event app.events := private.find_event(event_update.id);
begin
  if found_event.id is null then
    raise exception 'event not found' using errcode = 'PT404', hint = 'event_not_found';
  end if;
  if not private.is_community_manager(found_event.community_id, caller) then
    raise exception 'only managers of the event''s community may change it' using errcode = 'PT403', hint = 'not_community_manager';
  end if;
  if event_update.if_match is not null then
    select e.* into found_event from app.events e where e.id = found_event.id for no key update;
    perform app.check_if_match(event_update.if_match, found_event.updated_at, private.event_json(found_event, event_update.public_url));
  end if;
  if pg_catalog.jsonb_typeof(event_update.patch) is distinct from 'object' then
    raise exception 'the patch must be an object' using errcode = 'PT422', hint = 'validation_error';
  end if;
  if event_update.patch ? 'image_path' then
    -- An object of the event-images bucket in the event's folder, or null to clear (a platform's external image stays).
    update app.events e
       set image_object_id = private.storage_image_object('event-images', event_update.patch->>'image_path', caller)
     where e.id = found_event.id
    returning e.* into found_event;
  end if;
  return private.event_json(found_event, event_update.public_url);
end;
$function$;

CREATE OR REPLACE FUNCTION api.profile_patch(patch jsonb, if_match text[] DEFAULT NULL::text[])
 RETURNS SETOF api.user_profile
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog'
AS $function$
declare
  caller uuid := auth.uid();
  version timestamp with time zone;
begin
  if pg_catalog.jsonb_typeof(profile_patch.patch) is distinct from 'object' then
    raise exception 'the patch must be an object' using errcode = 'PT422', hint = 'validation_error';
  end if;
  if profile_patch.if_match is not null then
    select p.updated_at into version from app.profiles p where p.id = caller for no key update;
    if found then
      perform app.check_if_match(profile_patch.if_match, version, private.profile_json(caller));
    end if;
  end if;
  if profile_patch.patch ? 'name' then
    perform api.profile_update(profile_patch.patch->>'name');
  end if;
  if profile_patch.patch ? 'avatar_path' then
    -- An object of the avatars bucket in the caller's own folder, or null to clear.
    update app.profiles p
       set avatar_object_id = private.storage_image_object('avatars', profile_patch.patch->>'avatar_path', caller)
     where p.id = caller;
    if not found then
      raise exception 'profile not found' using errcode = 'PT404', hint = 'profile_not_found';
    end if;
  end if;
  return query
    select p.id, u.email, p.name, s.is_premium, p.subscription_type,
           s.max_hats, p.node_id, p.created_at, p.updated_at, app.storage_public_url(p.avatar_object_id)
      from app.profiles p
      join identity.users u on u.id = p.id
      join app.subscription_plans s on s.id = p.subscription_type
     where p.id = caller;
  if not found then
    raise exception 'profile not found' using errcode = 'PT404', hint = 'profile_not_found';
  end if;
end;
$function$;

CREATE OR REPLACE FUNCTION api.storage_bucket_create(bucket_id text, public boolean, file_size_limit bigint, allowed_mime_types text[])
 RETURNS jsonb
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog'
AS $function$
begin
  perform private.storage_operator_only();
  if storage_bucket_create.bucket_id is null or storage_bucket_create.bucket_id !~ '^[a-z0-9][a-z0-9_-]{0,62}$' then
    raise exception 'Bucket name invalid' using errcode = 'PT400', hint = 'invalid_bucket_name';
  end if;
  perform private.storage_bucket_limits_check(storage_bucket_create.file_size_limit, storage_bucket_create.allowed_mime_types, false);
  insert into app.storage_buckets (id, public, folder_owner, file_size_limit, allowed_mime_types)
    values (storage_bucket_create.bucket_id, coalesce(storage_bucket_create.public, false), 'user',
            coalesce(storage_bucket_create.file_size_limit, private.storage_default_size_limit()), storage_bucket_create.allowed_mime_types)
    on conflict on constraint storage_buckets_pkey do nothing;
  if not found then
    raise exception 'The resource already exists' using errcode = 'PT409', hint = 'bucket_exists';
  end if;
  return pg_catalog.jsonb_build_object('name', storage_bucket_create.bucket_id);
end;
$function$;

CREATE OR REPLACE FUNCTION api.storage_bucket_delete(bucket_id text)
 RETURNS jsonb
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog'
AS $function$
begin
  perform private.storage_operator_only();
  perform private.storage_bucket(storage_bucket_delete.bucket_id);
  if storage_bucket_delete.bucket_id = any (private.storage_builtin_buckets()) then
    raise exception 'The bucket % is built in and cannot be deleted', storage_bucket_delete.bucket_id
      using errcode = 'PT409', hint = 'bucket_builtin';
  end if;
  if exists (select from app.storage_objects o where o.bucket_id = storage_bucket_delete.bucket_id)
     or exists (select from app.storage_uploads u where u.bucket_id = storage_bucket_delete.bucket_id and u.expires_at > now()) then
    raise exception 'The bucket you tried to delete is not empty' using errcode = 'PT409', hint = 'bucket_not_empty';
  end if;
  delete from app.storage_uploads u where u.bucket_id = storage_bucket_delete.bucket_id;
  delete from app.storage_buckets b where b.id = storage_bucket_delete.bucket_id;
  return pg_catalog.jsonb_build_object('message', 'Successfully deleted');
end;
$function$;

CREATE OR REPLACE FUNCTION api.storage_bucket_empty(bucket_id text)
 RETURNS jsonb
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog'
AS $function$
begin
  perform private.storage_operator_only();
  perform private.storage_bucket(storage_bucket_empty.bucket_id);
  -- Their bytes go to app.storage_garbage (the trigger), collected later.
  delete from app.storage_objects o where o.bucket_id = storage_bucket_empty.bucket_id;
  return pg_catalog.jsonb_build_object('message', 'Successfully emptied');
end;
$function$;

CREATE OR REPLACE FUNCTION api.storage_bucket_update(bucket_id text, changes jsonb)
 RETURNS jsonb
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog'
AS $function$
declare
  b app.storage_buckets;
  size_limit bigint;
  types text[];
begin
  perform private.storage_operator_only();
  select * into b from app.storage_buckets s where s.id = storage_bucket_update.bucket_id for update;
  if b.id is null then
    raise exception 'Bucket not found' using errcode = 'PT404', hint = 'bucket_not_found';
  end if;
  -- A field left out stays; null clears a limit.
  size_limit := case when storage_bucket_update.changes ? 'file_size_limit'
                     then coalesce((storage_bucket_update.changes->>'file_size_limit')::bigint, private.storage_default_size_limit())
                     else b.file_size_limit end;
  types := case when storage_bucket_update.changes ? 'allowed_mime_types'
                then (select pg_catalog.array_agg(t) from pg_catalog.jsonb_array_elements_text(
                        case pg_catalog.jsonb_typeof(storage_bucket_update.changes->'allowed_mime_types') when 'array'
                             then storage_bucket_update.changes->'allowed_mime_types' else '[]'::jsonb end) t)
                else b.allowed_mime_types end;
  perform private.storage_bucket_limits_check(size_limit, types, b.images);
  update app.storage_buckets s
     set public = coalesce((storage_bucket_update.changes->>'public')::boolean, s.public),
         file_size_limit = size_limit,
         allowed_mime_types = case when b.images then coalesce(types, array['image/*']) else types end
   where s.id = b.id;
  return pg_catalog.jsonb_build_object('message', 'Successfully updated');
end;
$function$;

CREATE OR REPLACE FUNCTION api.storage_object_copy_begin(bucket_id text, source text, destination_bucket text, destination text, upsert boolean)
 RETURNS TABLE(upload_id uuid, storage_key text, source_key text, size bigint, content_type text, cache_control text, etag text, width integer, height integer, user_metadata jsonb)
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog'
AS $function$
declare
  caller uuid := auth.uid();
  src record;
  target app.storage_buckets := private.storage_bucket(coalesce(storage_object_copy_begin.destination_bucket, storage_object_copy_begin.bucket_id));
  started record;
begin
  if caller is null and not private.storage_operator() then
    raise exception 'not signed in' using errcode = 'PT401', hint = 'unauthorized';
  end if;
  select * into src from api.storage_object_get(storage_object_copy_begin.bucket_id, storage_object_copy_begin.source);
  if not private.storage_type_allowed(target, src.content_type) or (target.images and src.width is null) then
    raise exception 'mime type % is not supported', src.content_type using errcode = 'PT415', hint = 'invalid_mime_type';
  end if;
  select * into started from private.storage_upload_start(caller, target.id, storage_object_copy_begin.destination,
    coalesce(storage_object_copy_begin.upsert, false), src.size, 'copy');
  return query select started.upload_id, started.storage_key, src.storage_key, src.size, src.content_type, src.cache_control, src.etag,
                      src.width, src.height, src.user_metadata;
end;
$function$;

CREATE OR REPLACE FUNCTION api.storage_objects_list_v2(bucket_id text, prefix text, max_rows integer, cursor text, with_delimiter boolean, sort_column text, sort_order text)
 RETURNS jsonb
 LANGUAGE plpgsql
 STABLE
 SET search_path TO 'pg_catalog'
AS $function$
declare
  start text := coalesce(storage_objects_list_v2.prefix, '');
  descending boolean := lower(coalesce(storage_objects_list_v2.sort_order, 'asc')) = 'desc';
  sort text := coalesce(storage_objects_list_v2.sort_column, 'name');
  page_size integer := least(greatest(coalesce(storage_objects_list_v2.max_rows, 1000), 1), 1000);
  after jsonb;
  rows jsonb;
  more boolean;
  last_entry jsonb;
begin
  perform private.storage_bucket(storage_objects_list_v2.bucket_id);
  if sort not in ('name', 'created_at', 'updated_at') then
    raise exception 'sortBy.column must be name, created_at or updated_at' using errcode = 'PT400', hint = 'bad_request';
  end if;
  if storage_objects_list_v2.cursor is not null and storage_objects_list_v2.cursor <> '' then
    begin
      after := pg_catalog.convert_from(private.storage_base64url_decode(storage_objects_list_v2.cursor), 'UTF8')::jsonb;
    exception when others then
      after := null;
    end;
    if pg_catalog.jsonb_typeof(after) is distinct from 'object' or after->>'c' is distinct from sort
       or (after->>'d')::boolean is distinct from descending or pg_catalog.jsonb_typeof(after->'k') is distinct from 'array' then
      raise exception 'Invalid cursor' using errcode = 'PT400', hint = 'bad_request';
    end if;
  end if;
  -- Row-level security: only objects of folders the caller owns (the operator: all).
  with under as (
    select o as obj, o.name::text collate "C" as name,
           case when coalesce(storage_objects_list_v2.with_delimiter, false)
                     and pg_catalog.strpos(pg_catalog.substr(o.name, length(start) + 1), '/') > 0
                then left(o.name, length(start) + pg_catalog.strpos(pg_catalog.substr(o.name, length(start) + 1), '/')) end collate "C" as folder
      from app.storage_objects o
     where o.bucket_id = storage_objects_list_v2.bucket_id
       and pg_catalog.starts_with(o.name, start)
  ), entries as (
    select distinct u.folder as name, null::app.storage_objects as obj from under u where u.folder is not null
    union all
    select u.name, u.obj from under u where u.folder is null
  ), keyed as (
    -- The order: (rank, value, name). By name, folders and objects together; by a date, folders first.
    select e.name, e.obj,
           case when sort = 'name' or e.obj is null then 0 else 1 end as rank,
           (case when sort = 'name' or e.obj is null then e.name
                 when sort = 'created_at' then app.iso((e.obj).created_at)
                 else app.iso((e.obj).updated_at) end) collate "C" as value
      from entries e
  ), numbered as (
    select k.*,
           row_number() over (order by case when not descending then k.rank end asc, case when not descending then k.value end asc,
                                       case when not descending then k.name end asc, case when descending then k.rank end desc,
                                       case when descending then k.value end desc, case when descending then k.name end desc) as n
      from keyed k
     where after is null
        or (not descending and (k.rank, k.value, k.name) > ((after->'k'->>0)::integer, (after->'k'->>1) collate "C", (after->'k'->>2) collate "C"))
        or (descending and (k.rank, k.value, k.name) < ((after->'k'->>0)::integer, (after->'k'->>1) collate "C", (after->'k'->>2) collate "C"))
  )
  select coalesce(pg_catalog.jsonb_agg(pg_catalog.jsonb_build_object(
           'entry', case when x.obj is null then
                      pg_catalog.jsonb_build_object('key', pg_catalog.split_part(pg_catalog.rtrim(x.name, '/'), '/', -1), 'name', x.name)
                    else
                      pg_catalog.jsonb_build_object('name', x.name, 'id', (x.obj).id, 'updated_at', app.iso((x.obj).updated_at),
                        'created_at', app.iso((x.obj).created_at), 'last_accessed_at', app.iso((x.obj).updated_at),
                        'metadata', private.storage_object_metadata(x.obj))
                    end,
           'folder', x.obj is null,
           'key', pg_catalog.jsonb_build_array(x.rank, x.value, x.name)) order by x.n), '[]'::jsonb)
    into rows
    from numbered x
   where x.n <= page_size + 1;
  more := pg_catalog.jsonb_array_length(rows) > page_size;
  if more then
    last_entry := rows->(page_size - 1);
    rows := rows - page_size;
  end if;
  -- nextCursor and nextCursorKey only when there is a next page.
  return pg_catalog.jsonb_strip_nulls(pg_catalog.jsonb_build_object(
    'hasNext', more,
    'nextCursor', case when more then private.storage_base64url(pg_catalog.convert_to(
      pg_catalog.jsonb_build_object('c', sort, 'd', descending, 'k', last_entry->'key')::text, 'UTF8')) end,
    'nextCursorKey', case when more then last_entry->'key'->>2 end,
    'folders', coalesce((select pg_catalog.jsonb_agg(r->'entry') from pg_catalog.jsonb_array_elements(rows) r where (r->>'folder')::boolean), '[]'::jsonb),
    'objects', coalesce((select pg_catalog.jsonb_agg(r->'entry') from pg_catalog.jsonb_array_elements(rows) r where not (r->>'folder')::boolean), '[]'::jsonb)));
end;
$function$;

CREATE OR REPLACE FUNCTION api.storage_resumable_upload(upload_id uuid)
 RETURNS TABLE(storage_key text, file_size_limit bigint, allowed_mime_types text[], images boolean, bucket_id text, name text, declared_size bigint)
 LANGUAGE plpgsql
 STABLE SECURITY DEFINER
 SET search_path TO 'pg_catalog'
AS $function$
begin
  return query
    select u.storage_key, b.file_size_limit, b.allowed_mime_types, b.images, u.bucket_id, u.name::text, u.declared_size
      from app.storage_uploads u
      join app.storage_buckets b on b.id = u.bucket_id
     where u.id = storage_resumable_upload.upload_id and u.kind = 'resumable'
       and (u.owner_id = auth.uid() or (u.owner_id is null and private.storage_operator())) and u.expires_at > now();
  if not found then
    raise exception 'Upload not found' using errcode = 'PT404', hint = 'upload_not_found';
  end if;
end;
$function$;

CREATE OR REPLACE FUNCTION api.storage_sign(bucket_id text, names text[], expires_in integer, transform jsonb DEFAULT NULL::jsonb)
 RETURNS jsonb
 LANGUAGE plpgsql
 STABLE SECURITY DEFINER
 SET search_path TO 'pg_catalog'
AS $function$
declare
  caller uuid := auth.uid();
  b app.storage_buckets := private.storage_bucket(storage_sign.bucket_id);
  result jsonb := '[]'::jsonb;
  object_name text;
  readable boolean;
  route text := case when storage_sign.transform is null then '/object/sign/' else '/render/image/sign/' end;
begin
  if storage_sign.expires_in is null or storage_sign.expires_in not between 1 and 31536000 then
    raise exception 'expiresIn must be 1 to 31536000 seconds' using errcode = 'PT400', hint = 'bad_request';
  end if;
  foreach object_name in array storage_sign.names loop
    readable := (b.public or private.storage_folder_owned(b.id, object_name, caller))
                and exists (select from app.storage_objects o where o.bucket_id = b.id and o.name = object_name);
    result := result || pg_catalog.jsonb_build_array(pg_catalog.jsonb_build_object(
      'path', object_name,
      'error', case when readable then null else 'Either the object does not exist or you do not have access to it' end,
      'signedURL', case when readable then
        route || b.id || '/' || private.storage_url_path(object_name) || '?token=' || private.storage_token(pg_catalog.jsonb_strip_nulls(pg_catalog.jsonb_build_object(
          'scope', 'download', 'url', b.id || '/' || object_name, 'sub', caller, 'operator', case when caller is null then true end,
          'transform', storage_sign.transform)),
          storage_sign.expires_in) end));
  end loop;
  return result;
end;
$function$;

CREATE OR REPLACE FUNCTION api.storage_sign_upload(bucket_id text, name text, upsert boolean)
 RETURNS jsonb
 LANGUAGE plpgsql
 STABLE SECURITY DEFINER
 SET search_path TO 'pg_catalog'
AS $function$
declare
  caller uuid := auth.uid();
  b app.storage_buckets := private.storage_bucket(storage_sign_upload.bucket_id);
  token text;
begin
  perform private.storage_check_name(storage_sign_upload.name);
  if not private.storage_folder_owned(b.id, storage_sign_upload.name, caller) then
    raise exception 'Access denied: you may not write %/%', b.id, storage_sign_upload.name using errcode = 'PT403', hint = 'storage_access_denied';
  end if;
  token := private.storage_token(pg_catalog.jsonb_strip_nulls(pg_catalog.jsonb_build_object('scope', 'upload', 'url', b.id || '/' || storage_sign_upload.name,
    'sub', caller, 'operator', case when caller is null then true end, 'upsert', coalesce(storage_sign_upload.upsert, false))), 7200);
  return pg_catalog.jsonb_build_object('url', '/object/upload/sign/' || b.id || '/' || private.storage_url_path(storage_sign_upload.name) || '?token=' || token,
                                       'token', token);
end;
$function$;

CREATE OR REPLACE FUNCTION api.storage_upload_begin(bucket_id text, name text, upsert boolean, declared_size bigint, kind text DEFAULT 'direct'::text)
 RETURNS TABLE(upload_id uuid, storage_key text, file_size_limit bigint, allowed_mime_types text[], images boolean)
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog'
AS $function$
declare
  caller uuid := auth.uid();
begin
  if caller is null and not private.storage_operator() then
    raise exception 'not signed in' using errcode = 'PT401', hint = 'unauthorized';
  end if;
  if storage_upload_begin.kind not in ('direct', 'resumable') then
    raise exception 'kind must be direct or resumable' using errcode = 'PT400', hint = 'bad_request';
  end if;
  return query select * from private.storage_upload_start(caller, storage_upload_begin.bucket_id, storage_upload_begin.name,
    coalesce(storage_upload_begin.upsert, false), storage_upload_begin.declared_size, storage_upload_begin.kind);
end;
$function$;

CREATE OR REPLACE FUNCTION api.storage_upload_begin_signed(bucket_id text, name text, token text, declared_size bigint)
 RETURNS TABLE(upload_id uuid, storage_key text, file_size_limit bigint, allowed_mime_types text[], images boolean)
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog'
AS $function$
declare
  claims jsonb := private.storage_token_claims(storage_upload_begin_signed.token, 'upload',
    storage_upload_begin_signed.bucket_id || '/' || storage_upload_begin_signed.name);
  token_digest bytea := identity.token_hash(storage_upload_begin_signed.token);
  started record;
begin
  -- Once: the token's digest is kept until it expires. A second upload waits
  -- for the first's transaction here, then finds it.
  insert into app.storage_signed_uploads (token_hash, expires_at)
    values (token_digest, pg_catalog.to_timestamp((claims->>'exp')::bigint))
    on conflict (token_hash) do nothing;
  if not found then
    raise exception 'The resource already exists' using errcode = 'PT409', hint = 'signed_url_used';
  end if;
  select * into started from private.storage_upload_start((claims->>'sub')::uuid, storage_upload_begin_signed.bucket_id,
    storage_upload_begin_signed.name, coalesce((claims->>'upsert')::boolean, false), storage_upload_begin_signed.declared_size, 'signed');
  update app.storage_uploads u set signed_token_hash = token_digest where u.id = started.upload_id;
  return query select started.upload_id, started.storage_key, started.file_size_limit, started.allowed_mime_types, started.images;
end;
$function$;

CREATE OR REPLACE FUNCTION api.sync_changes(shape text, after_id bigint, public_url text)
 RETURNS SETOF api.sync_message
 LANGUAGE sql
 STABLE
 SET search_path TO 'pg_catalog'
AS $function$
    with pos as (
      select p.head from private.change_log_position() p
    ),
    log as (
      select l.* from pos, private.sync_log(sync_changes.shape, sync_changes.after_id, pos.head) l
    ),
    own_table as (
      select case sync_changes.shape when 'profile' then 'profiles' else sync_changes.shape end as name
    ),
    -- The caller's memberships that changed in the range: whether they were
    -- a member before it (the first entry: anything but an insert).
    moved as (
      select distinct on (l.record_id) l.record_id as community_id, l.operation <> 'insert' as was_member
        from log l
       where l.table_name = 'community_members'
       order by l.record_id, l.id
    ),
    moved_last as (
      select l.record_id as community_id, max(l.id) as change_id
        from log l
       where l.table_name = 'community_members'
       group by 1
    ),
    -- Rows of the shape's own table changed in the range: the first entry
    -- says how the row was before the range.
    firsts as (
      select distinct on (l.record_id) l.record_id, l.operation, l.changed_at,
             coalesce(l.old_data, l.row_data) as before_row
        from log l, own_table t
       where l.table_name = t.name
       order by l.record_id, l.id
    ),
    lasts as (
      select l.record_id, max(l.id) as change_id
        from log l, own_table t
       where l.table_name = t.name
       group by 1
    ),
    -- Rows touched by a membership change: a community's events (events), the
    -- community itself (communities).
    by_membership as (
      select x.record_id, x.community_id, ml.change_id
        from (select e.id as record_id, e.community_id
                from private.sync_community_events(array(select m.community_id from moved m)) e
               where sync_changes.shape = 'events'
              union all
              select m.community_id, m.community_id from moved m where sync_changes.shape = 'communities') x
        join moved_last ml on ml.community_id = x.community_id
    ),
    touched as (
      select k.record_id, max(k.change_id) as change_id
        from (select record_id, change_id from lasts union all select record_id, change_id from by_membership) k
       group by 1
    ),
    judged as (
      select t.record_id, t.change_id,
             case
               when f.record_id is not null and f.operation = 'insert' then false
               when sync_changes.shape = 'events' then
                 private.sync_was_member(coalesce((f.before_row ->> 'community_id')::uuid, bm.community_id),
                                         (select array_agg(m.community_id) from moved m where m.was_member),
                                         (select array_agg(m.community_id) from moved m where not m.was_member))
                 and (f.record_id is null or f.operation = 'expire'
                      or private.event_effective_end((f.before_row ->> 'starts_at')::timestamptz,
                                                     (f.before_row ->> 'ends_at')::timestamptz) >= f.changed_at)
               when sync_changes.shape = 'communities' then
                 private.sync_was_member(t.record_id,
                                         (select array_agg(m.community_id) from moved m where m.was_member),
                                         (select array_agg(m.community_id) from moved m where not m.was_member))
               else true
             end as was_visible
        from touched t
        left join firsts f on f.record_id = t.record_id
        left join (select distinct on (b.record_id) b.record_id, b.community_id from by_membership b
                    order by b.record_id) bm on bm.record_id = t.record_id
    ),
    now_rows as (
      select r.id, r.value
        from private.sync_rows(sync_changes.shape, sync_changes.public_url) r
       where r.id in (select t.record_id from touched t)
    )
    select j.change_id,
           case when j.was_visible and n.id is not null then 'update'
                when n.id is not null then 'insert'
                else 'delete' end,
           j.record_id,
           coalesce(n.value, jsonb_build_object('id', j.record_id))
      from judged j
      left join now_rows n on n.id = j.record_id
     where j.was_visible or n.id is not null
    union all
    -- The head the answer is consistent with: a row without an id, last.
    select pos.head, 'head', null::uuid, null::jsonb from pos
     order by 1, 3 nulls last
  $function$;

CREATE OR REPLACE FUNCTION api.sync_snapshot(shape text, public_url text)
 RETURNS SETOF api.sync_snapshot_row
 LANGUAGE sql
 STABLE
 SET search_path TO 'pg_catalog'
AS $function$
    select p.head, r.id, r.value
      from private.change_log_position() p
      left join private.sync_rows(sync_snapshot.shape, sync_snapshot.public_url) r on true
     order by r.id
  $function$;

CREATE OR REPLACE FUNCTION api.task_delete(task_id uuid, if_match text[] DEFAULT NULL::text[])
 RETURNS void
 LANGUAGE plpgsql
 SET search_path TO 'pg_catalog'
AS $function$
declare
  task app.tasks;
begin
  if task_delete.if_match is not null then
    select * into task from app.tasks t where t.id = task_delete.task_id for update;
    if found then
      perform app.check_if_match(task_delete.if_match, task.updated_at, private.task_json(task));
    end if;
  end if;
  delete from app.tasks t where t.id = task_delete.task_id;
  if found then
    return;
  end if;
  if private.task_exists(task_delete.task_id) then
    raise exception 'only the creator of a task can delete it' using errcode = 'PT403', hint = 'not_task_creator';
  end if;
  raise exception 'task not found' using errcode = 'PT404', hint = 'task_not_found';
end;
$function$;

CREATE OR REPLACE FUNCTION api.task_update(task_id uuid, changes jsonb, if_match text[] DEFAULT NULL::text[])
 RETURNS SETOF api.task
 LANGUAGE plpgsql
 SET search_path TO 'pg_catalog'
AS $function$
declare
  task app.tasks;
  new_meta jsonb;
  new_deal jsonb;
begin
  if changes is null or jsonb_typeof(changes) <> 'object' then
    raise exception 'the body must be an object' using errcode = 'PT422', hint = 'validation_error';
  end if;
  if changes ? 'status' then
    raise exception 'status cannot be changed with PATCH; use start or complete' using errcode = 'PT422', hint = 'validation_error';
  end if;
  if exists (select from jsonb_object_keys(changes) k where k not in ('title', 'description', 'deal_context')) then
    raise exception 'only title, description and deal_context can be changed' using errcode = 'PT422', hint = 'validation_error';
  end if;
  if jsonb_typeof(changes -> 'deal_context') not in ('object', 'null') then
    raise exception 'deal_context must be an object' using errcode = 'PT422', hint = 'validation_error';
  end if;

  select * into task from app.tasks t where t.id = task_update.task_id for no key update;
  if not found then
    raise exception 'task not found' using errcode = 'PT404', hint = 'task_not_found';
  end if;
  perform app.check_if_match(task_update.if_match, task.updated_at, private.task_json(task));

  new_meta := task.meta || (changes - 'deal_context');
  if changes ? 'deal_context' then
    if jsonb_typeof(changes -> 'deal_context') = 'null' then
      new_meta := new_meta - 'deal_context';
    else
      new_deal := jsonb_strip_nulls(coalesce(task.meta -> 'deal_context', '{}') || (changes -> 'deal_context'));
      new_meta := case when new_deal = '{}' then new_meta - 'deal_context'
                       else jsonb_set(new_meta, '{deal_context}', new_deal) end;
    end if;
  end if;
  -- Null removes a top-level key (never status, which is not in changes).
  new_meta := new_meta - array(select k from jsonb_each(changes) e(k, v) where jsonb_typeof(v) = 'null');

  return query
    update app.tasks t set meta = new_meta
     where t.id = task.id
     returning t.id, t.created_by, t.inserted_at, t.updated_at, t.meta;
end;
$function$;

CREATE OR REPLACE FUNCTION api.webhook_create(community_id uuid, url text, events text[], description text DEFAULT NULL::text)
 RETURNS jsonb
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog'
AS $function$
declare
  created app.webhook_endpoints;
begin
  perform private.platform_authorize(webhook_create.community_id);
  perform private.require_full_account();
  perform private.webhook_check(url, events, description);
  if url is null or events is null then
    raise exception 'url and events are required' using errcode = 'PT422', hint = 'validation_error';
  end if;
  -- At most 20 endpoints a community (serialised per community).
  perform pg_advisory_xact_lock(hashtextextended('app.webhook_endpoints:' || webhook_create.community_id::text, 0));
  if (select count(*) from app.webhook_endpoints e where e.community_id = webhook_create.community_id) >= 20 then
    raise exception 'a community has at most 20 webhook endpoints' using errcode = 'PT422', hint = 'too_many_webhooks';
  end if;
  insert into app.webhook_endpoints (community_id, url, events, description, secret, created_by)
    values (webhook_create.community_id, url,
            array(select distinct t from unnest(events) t order by t),
            nullif(btrim(description), ''), private.webhook_new_secret(), auth.uid())
    returning * into created;
  return private.webhook_endpoint_json(created) || jsonb_build_object('secret', created.secret);
end;
$function$;

CREATE OR REPLACE FUNCTION app.check_if_match(if_match text[], version timestamp with time zone, current jsonb)
 RETURNS void
 LANGUAGE plpgsql
 SET search_path TO 'pg_catalog'
AS $function$
declare
  etag text := api.etag(version);
begin
  -- No If-Match: no condition. `*`: any current version (the object exists,
  -- or the caller would have had 404). Otherwise one of the tags must be the
  -- current one, compared strongly: a weak tag (W/"...") never matches.
  if if_match is null or '*' = any(if_match) or etag = any(if_match) then
    return;
  end if;
  raise exception 'the object changed since the version given in If-Match' using errcode = 'PT412', hint = 'precondition_failed',
    detail = pg_catalog.jsonb_build_object('etag', etag, 'current', current)::text;
end;
$function$;

CREATE OR REPLACE FUNCTION private.access_token_claims(user_id uuid)
 RETURNS jsonb
 LANGUAGE sql
 STABLE
 SET search_path TO 'pg_catalog'
AS $function$
    select jsonb_build_object(
             'app_metadata', case when u.is_anonymous then u.app_metadata
                                  else u.app_metadata || jsonb_build_object('provider', 'email', 'providers', jsonb_build_array('email')) end,
             'user_metadata', u.user_metadata,
             'is_anonymous', u.is_anonymous)
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
    select case when u.is_anonymous then
             -- A guest as Supabase Auth answers one: no address, no identity, no provider.
             jsonb_build_object(
               'id', u.id, 'aud', 'authenticated', 'role', 'authenticated', 'email', '', 'phone', '',
               'last_sign_in_at', app.iso(s.last_sign_in_at), 'app_metadata', u.app_metadata,
               'user_metadata', u.user_metadata, 'identities', '[]'::jsonb,
               'created_at', app.iso(u.created_at), 'updated_at', app.iso(u.updated_at), 'is_anonymous', true)
           else
           jsonb_build_object(
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
           end
      from identity.users u
      cross join lateral (select max(r.created_at) as last_sign_in_at from identity.refresh_tokens r
                           where r.user_id = u.id and r.parent_id is null) s
     where u.id = auth_user_object.user_id
  $function$;

CREATE OR REPLACE FUNCTION private.check_in(event_id uuid, venue_node_id uuid, hat_id uuid, location_id uuid, visibility text, device_checked_in_at timestamp with time zone DEFAULT NULL::timestamp with time zone)
 RETURNS SETOF api.checkin_outcome
 LANGUAGE plpgsql
 SET search_path TO 'pg_catalog'
AS $function$
declare
  caller uuid := auth.uid();
begin
  if caller is null then
    raise exception 'not signed in' using errcode = 'PT401';
  end if;
  return query select * from private.check_in_user(caller, event_id, venue_node_id, hat_id, location_id, visibility, device_checked_in_at);
end;
$function$;

CREATE OR REPLACE FUNCTION private.check_in_user(user_id uuid, event_id uuid, venue_node_id uuid, hat_id uuid, location_id uuid, visibility text, device_checked_in_at timestamp with time zone DEFAULT NULL::timestamp with time zone)
 RETURNS SETOF api.checkin_outcome
 LANGUAGE plpgsql
 SET search_path TO 'pg_catalog'
AS $function$
declare
  checkin_row app.checkins;
begin
  loop
    insert into app.checkins as c (user_id, event_id, venue_node_id, hat_id, location_id, visibility, device_checked_in_at)
      values (check_in_user.user_id, check_in_user.event_id, check_in_user.venue_node_id, check_in_user.hat_id,
              check_in_user.location_id, coalesce(check_in_user.visibility, 'anonymous'), check_in_user.device_checked_in_at)
      on conflict do nothing
      returning c.* into checkin_row;
    if checkin_row.id is not null then
      return query select true, private.checkin_json(checkin_row);
      return;
    end if;
    select c.* into checkin_row
      from app.checkins c
     where c.user_id = check_in_user.user_id
       and c.checked_out_at is null
       and c.event_id is not distinct from check_in_user.event_id
       and c.venue_node_id is not distinct from check_in_user.venue_node_id;
    if checkin_row.id is not null then
      return query select false, private.checkin_json(checkin_row);
      return;
    end if;
    -- Checked out between the two statements: try again.
  end loop;
end;
$function$;

CREATE OR REPLACE FUNCTION private.checkin_device_time(event app.events, device_time timestamp with time zone, as_of timestamp with time zone DEFAULT now())
 RETURNS timestamp with time zone
 LANGUAGE plpgsql
 STABLE
 SET search_path TO 'pg_catalog'
AS $function$
begin
  -- An offline check-in: the phone's clock, trusted within bounds. At most 5
  -- minutes ahead of the server (clock skew), at most 24 hours behind it (a
  -- day offline), and inside the event's check-in window (the venue window:
  -- 2 hours before its date to 2 hours after its effective end).
  if device_time is null then
    return null;
  end if;
  if device_time > as_of + interval '5 minutes' then
    raise exception 'checked_in_at is in the future (more than 5 minutes ahead of the server)'
      using errcode = 'PT422', hint = 'checkin_time_in_future';
  end if;
  if device_time < as_of - interval '24 hours' then
    raise exception 'checked_in_at is more than 24 hours old' using errcode = 'PT422', hint = 'checkin_time_too_old';
  end if;
  if device_time < event.starts_at - interval '2 hours'
     or device_time > private.event_effective_end(event.starts_at, event.ends_at) + interval '2 hours' then
    raise exception 'checked_in_at is outside the event''s check-in window (2 hours before its start to 2 hours after its end)'
      using errcode = 'PT422', hint = 'checkin_time_outside_event';
  end if;
  return device_time;
end;
$function$;

CREATE OR REPLACE FUNCTION private.checkin_json(c app.checkins)
 RETURNS jsonb
 LANGUAGE sql
 STABLE
 SET search_path TO 'pg_catalog'
AS $function$
    select jsonb_build_object(
      'id', c.id,
      'type', case when c.event_id is not null then 'event' else 'venue' end,
      'event_id', c.event_id,
      'venue_id', c.venue_node_id,
      'hat_id', c.hat_id,
      'location_id', c.location_id,
      'visibility', c.visibility,
      'checked_in_at', app.iso(c.checked_in_at),
      'checked_out_at', app.iso(c.checked_out_at),
      'device_checked_in_at', app.iso(c.device_checked_in_at)
    )
  $function$;

CREATE OR REPLACE FUNCTION private.connection_json(c app.connections)
 RETURNS jsonb
 LANGUAGE sql
 STABLE
 SET search_path TO 'pg_catalog'
AS $function$
    select jsonb_build_object('id', c.id, 'owner_node_id', c.owner_node_id, 'target_node_id', c.target_node_id,
                              'connection_type', c.connection_type, 'event_id', c.event_id, 'my_hat_id', c.my_hat_id,
                              'their_hat_id', c.their_hat_id, 'notes', c.notes, 'strength', c.strength, 'tags', c.tags,
                              'created_at', app.iso(c.created_at), 'updated_at', app.iso(c.updated_at))
  $function$;

CREATE OR REPLACE FUNCTION private.email_code_queue(user_id uuid, public_url text)
 RETURNS uuid
 LANGUAGE plpgsql
 SET search_path TO 'pg_catalog'
AS $function$
declare
  account identity.users;
  code text := lpad(((('x' || encode(extensions.gen_random_bytes(4), 'hex'))::bit(32)::bigint % 1000000))::text, 6, '0');
  token text := identity.new_token();
  link text;
begin
  select * into account from identity.users u where u.id = email_code_queue.user_id;
  if account.id is null or account.email is null then
    raise exception 'user not found' using errcode = 'PT404', hint = 'not_found';
  end if;
  -- Only the newest code (and link) of a user works.
  update identity.email_codes c set used_at = now() where c.user_id = account.id and c.used_at is null;
  insert into identity.email_codes (user_id, code_hash, link_hash, expires_at)
    values (account.id, identity.token_hash(account.id::text || ':' || code), identity.token_hash(token), now() + interval '1 hour');
  link := rtrim(email_code_queue.public_url, '/') || '/auth/v1/verify?type=magiclink&token=' || token;
  return private.email_queue(
    account.id, account.email, 'otp', 'Your sign-in code',
    'Someone asked to sign in to the account of ' || account.email || E'.\n\n'
    || 'Your code: ' || code || E'\n\n'
    || E'Or open this link (it works once, for an hour, as the code does):\n' || link || E'\n\n'
    || E'If it was not you, ignore this e-mail.\n',
    link);
end;
$function$;

CREATE OR REPLACE FUNCTION private.email_link_enqueue(kind text, email text, public_url text, client_ip text, max_per_ip integer, window_seconds integer)
 RETURNS void
 LANGUAGE plpgsql
 SET search_path TO 'pg_catalog'
AS $function$
declare
  wait integer;
  address text := lower(btrim(email_link_enqueue.email));
begin
  if email_link_enqueue.kind not in ('recover', 'delete_account', 'otp') then
    raise exception 'unknown link kind %', email_link_enqueue.kind using errcode = '22023';
  end if;
  if email_link_enqueue.client_ip is not null then
    -- Requests of one address take turns, so a burst cannot slip past the count.
    perform pg_advisory_xact_lock(hashtextextended('auth_failures:email_link:' || email_link_enqueue.client_ip, 0));
    wait := private.auth_throttle_wait('email_link', email_link_enqueue.client_ip, email_link_enqueue.max_per_ip, email_link_enqueue.window_seconds);
    if wait > 0 then
      raise exception 'too many e-mailed links asked for from this address, try again later'
        using errcode = 'PT429', hint = 'rate_limited', detail = jsonb_build_object('retry_after', wait)::text;
    end if;
    perform private.auth_throttle_record('email_link', email_link_enqueue.client_ip);
  end if;
  -- Nothing here reads whether the address has an account. One job per
  -- address and kind waits at a time (a repeat replaces it).
  perform private.enqueue_job('email_link',
    jsonb_build_object('kind', email_link_enqueue.kind, 'email', address, 'public_url', email_link_enqueue.public_url),
    max_attempts => 5, job_key => 'email_link:' || email_link_enqueue.kind || ':' || address);
end;
$function$;

CREATE OR REPLACE FUNCTION private.email_link_send(kind text, email text, public_url text)
 RETURNS void
 LANGUAGE plpgsql
 SET search_path TO 'pg_catalog'
AS $function$
declare
  account_id uuid;
begin
  select u.id into account_id from identity.users u where u.email = lower(btrim(email_link_send.email));
  if account_id is null then
    return;
  end if;
  if email_link_send.kind = 'recover' then
    -- At most 5 links an hour per account, so the address cannot be flooded through this door.
    if (select count(*) from app.email_outbox o
         where o.user_id = account_id and o.purpose = 'recover'
           and o.created_at > now() - interval '1 hour') < 5 then
      perform private.queue_password_email(account_id, 'recover', email_link_send.public_url);
    end if;
  elsif email_link_send.kind = 'delete_account' then
    perform private.account_delete_link_queue(account_id, email_link_send.public_url);
  elsif email_link_send.kind = 'otp' then
    -- At most 5 codes an hour per account, as recovery links.
    if (select count(*) from app.email_outbox o
         where o.user_id = account_id and o.purpose = 'otp'
           and o.created_at > now() - interval '1 hour') < 5 then
      perform private.email_code_queue(account_id, email_link_send.public_url);
    end if;
  else
    raise exception 'unknown link kind %', email_link_send.kind using errcode = '22023';
  end if;
end;
$function$;

CREATE OR REPLACE FUNCTION private.guests_prune(older_than interval, batch integer DEFAULT 100)
 RETURNS integer
 LANGUAGE plpgsql
 SET search_path TO 'pg_catalog'
AS $function$
declare
  guest uuid;
  gone integer := 0;
begin
  for guest in
    select u.id from identity.users u
     where u.is_anonymous and u.created_at < now() - guests_prune.older_than
     order by u.created_at
     limit guests_prune.batch
     for update skip locked
  loop
    begin
      perform private.account_delete(guest);
      gone := gone + 1;
    exception when sqlstate 'PT409' then
      -- The only manager of a community (made one by a manager): kept until it is not.
      null;
    end;
  end loop;
  return gone;
end;
$function$;

CREATE OR REPLACE FUNCTION private.idempotency_key_lifetime()
 RETURNS interval
 LANGUAGE sql
 IMMUTABLE
AS $function$ select interval '48 hours' $function$;

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

CREATE OR REPLACE FUNCTION private.profile_json(user_id uuid)
 RETURNS jsonb
 LANGUAGE sql
 STABLE SECURITY DEFINER
 SET search_path TO 'pg_catalog'
AS $function$
    select jsonb_build_object('id', p.id, 'email', u.email, 'name', p.name, 'is_premium', s.is_premium,
                              'subscription_type', p.subscription_type, 'max_hats', s.max_hats, 'node_id', p.node_id,
                              'created_at', app.iso(p.created_at), 'updated_at', app.iso(p.updated_at),
                              'avatar_url', app.storage_public_url(p.avatar_object_id))
      from app.profiles p
      join identity.users u on u.id = p.id
      join app.subscription_plans s on s.id = p.subscription_type
     where p.id = profile_json.user_id and p.id = auth.uid()
  $function$;

CREATE OR REPLACE FUNCTION private.require_full_account()
 RETURNS void
 LANGUAGE plpgsql
 STABLE SECURITY DEFINER
 SET search_path TO 'pg_catalog'
AS $function$
begin
  if exists (select from identity.users u where u.id = auth.uid() and u.is_anonymous) then
    raise exception 'a guest cannot do this: sign up with an e-mail address and a password first'
      using errcode = 'PT403', hint = 'forbidden';
  end if;
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

CREATE OR REPLACE FUNCTION private.storage_bucket_limits_check(file_size_limit bigint, allowed_mime_types text[], images boolean)
 RETURNS void
 LANGUAGE plpgsql
 IMMUTABLE
 SET search_path TO 'pg_catalog'
AS $function$
begin
  if storage_bucket_limits_check.file_size_limit is not null and storage_bucket_limits_check.file_size_limit not between 1 and 5368709120 then
    raise exception 'file_size_limit must be 1 byte to 5 GB' using errcode = 'PT400', hint = 'invalid_bucket_limits';
  end if;
  if storage_bucket_limits_check.allowed_mime_types is not null and (
       cardinality(storage_bucket_limits_check.allowed_mime_types) not between 1 and 50
       or exists (select from pg_catalog.unnest(storage_bucket_limits_check.allowed_mime_types) t
                   where t is null or t !~ '^[a-z0-9][a-z0-9!#$&^_.+-]{0,126}/([a-z0-9][a-z0-9!#$&^_.+-]{0,126}|\*)$')) then
    raise exception 'allowed_mime_types must be 1 to 50 types such as image/png or image/*' using errcode = 'PT400', hint = 'invalid_bucket_limits';
  end if;
  if storage_bucket_limits_check.images and storage_bucket_limits_check.allowed_mime_types is not null
     and not storage_bucket_limits_check.allowed_mime_types <@ array['image/*', 'image/jpeg', 'image/png', 'image/webp', 'image/avif', 'image/gif'] then
    raise exception 'an image bucket takes image/* or image/jpeg, png, webp, avif, gif only' using errcode = 'PT400', hint = 'invalid_bucket_limits';
  end if;
end;
$function$;

CREATE OR REPLACE FUNCTION private.storage_builtin_buckets()
 RETURNS text[]
 LANGUAGE sql
 IMMUTABLE
 SET search_path TO 'pg_catalog'
AS $function$
    select array['avatars', 'community-images', 'event-images', 'attachments']
  $function$;

CREATE OR REPLACE FUNCTION private.storage_default_size_limit()
 RETURNS bigint
 LANGUAGE sql
 IMMUTABLE
 SET search_path TO 'pg_catalog'
AS $function$
    select 52428800::bigint
  $function$;

CREATE OR REPLACE FUNCTION private.storage_folder_owned(bucket_id text, name text, user_id uuid)
 RETURNS boolean
 LANGUAGE sql
 STABLE SECURITY DEFINER
 SET search_path TO 'pg_catalog'
AS $function$
    select case when storage_folder_owned.user_id is null then private.storage_operator()
    else coalesce((
      select case b.folder_owner
               when 'user' then f.id = storage_folder_owned.user_id
               when 'community' then private.is_community_manager(f.id, storage_folder_owned.user_id)
               when 'event' then exists (select from app.events e
                                          where e.id = f.id and private.is_community_manager(e.community_id, storage_folder_owned.user_id))
             end
        from app.storage_buckets b, (select private.storage_folder_id(storage_folder_owned.name) as id) f
       where b.id = storage_folder_owned.bucket_id and f.id is not null), false)
    end
  $function$;

CREATE OR REPLACE FUNCTION private.storage_operator()
 RETURNS boolean
 LANGUAGE sql
 STABLE
 SET search_path TO 'pg_catalog'
AS $function$
    select coalesce(auth.jwt()->>'role', '') = 'service_role' and auth.uid() is null
  $function$;

CREATE OR REPLACE FUNCTION private.storage_operator_only()
 RETURNS void
 LANGUAGE plpgsql
 STABLE
 SET search_path TO 'pg_catalog'
AS $function$
begin
  if not private.storage_operator() then
    raise exception 'Access denied: only the service-role key manages buckets' using errcode = 'PT403', hint = 'storage_access_denied';
  end if;
end;
$function$;

CREATE OR REPLACE FUNCTION private.storage_token_claims(token text, scope text, url text)
 RETURNS jsonb
 LANGUAGE plpgsql
 STABLE SECURITY DEFINER
 SET search_path TO 'pg_catalog'
AS $function$
declare
  parts text[] := pg_catalog.string_to_array(coalesce(storage_token_claims.token, ''), '.');
  claims jsonb;
  valid_after timestamptz;
begin
  if cardinality(parts) <> 3
     or parts[3] is distinct from private.storage_base64url(extensions.hmac(pg_catalog.convert_to(parts[1] || '.' || parts[2], 'UTF8'),
                                     (select k.secret from private.storage_signing_keys k), 'sha256')) then
    raise exception 'Invalid signature' using errcode = 'PT400', hint = 'invalid_signature';
  end if;
  claims := pg_catalog.convert_from(private.storage_base64url_decode(parts[2]), 'UTF8')::jsonb;
  if claims->>'scope' is distinct from storage_token_claims.scope or claims->>'url' is distinct from storage_token_claims.url then
    raise exception 'Invalid signature' using errcode = 'PT400', hint = 'invalid_signature';
  end if;
  if (claims->>'exp')::bigint <= extract(epoch from now()) then
    raise exception 'The signed URL has expired' using errcode = 'PT400', hint = 'signature_expired';
  end if;
  -- The signer's credentials ended after it was signed (private.storage_signed_urls_end: a password set or
  -- changed, a global sign-out), or the account is gone.
  -- The operator's (signed with the service-role key: no user) end only with exp.
  if claims->>'sub' is null and claims->'operator' = 'true'::jsonb then
    return claims;
  end if;
  select u.signed_urls_valid_after into valid_after from app.storage_usage u where u.user_id = (claims->>'sub')::uuid;
  if valid_after is not null and (claims->>'iat')::numeric <= extract(epoch from valid_after)
     or not exists (select from identity.users u where u.id = (claims->>'sub')::uuid) then
    raise exception 'The signed URL has expired' using errcode = 'PT400', hint = 'signature_expired';
  end if;
  return claims;
end;
$function$;

CREATE OR REPLACE FUNCTION private.storage_upload_finish(upload_id uuid, size bigint, etag text, content_type text, cache_control text, user_metadata jsonb, width integer, height integer)
 RETURNS jsonb
 LANGUAGE plpgsql
 SET search_path TO 'pg_catalog'
AS $function$
declare
  u app.storage_uploads;
  o app.storage_objects;
begin
  delete from app.storage_uploads p where p.id = storage_upload_finish.upload_id and p.expires_at > now() returning p.* into u;
  if u.id is null then
    raise exception 'The upload expired or was cancelled' using errcode = 'PT404', hint = 'upload_not_found';
  end if;
  -- The right to write may have ended while the bytes were on their way.
  if u.owner_id is not null and not private.storage_folder_owned(u.bucket_id, u.name, u.owner_id) then
    raise exception 'Access denied: you may not write %/%', u.bucket_id, u.name using errcode = 'PT403', hint = 'storage_access_denied';
  end if;
  if u.upsert then
    insert into app.storage_objects as s (bucket_id, name, owner_id, storage_key, size, content_type, cache_control, etag, width, height, user_metadata)
      values (u.bucket_id, u.name, u.owner_id, u.storage_key, storage_upload_finish.size, storage_upload_finish.content_type,
              coalesce(storage_upload_finish.cache_control, 'max-age=3600'), storage_upload_finish.etag,
              storage_upload_finish.width, storage_upload_finish.height, storage_upload_finish.user_metadata)
      on conflict on constraint storage_objects_bucket_name_key do update
        set owner_id = excluded.owner_id, storage_key = excluded.storage_key, size = excluded.size, content_type = excluded.content_type,
            cache_control = excluded.cache_control, etag = excluded.etag, width = excluded.width, height = excluded.height,
            user_metadata = excluded.user_metadata, version = gen_random_uuid()
      returning s.* into o;
  else
    if exists (select from app.storage_objects x where x.bucket_id = u.bucket_id and x.name = u.name) then
      raise exception 'The resource already exists' using errcode = 'PT409', hint = 'object_exists';
    end if;
    insert into app.storage_objects as s (bucket_id, name, owner_id, storage_key, size, content_type, cache_control, etag, width, height, user_metadata)
      values (u.bucket_id, u.name, u.owner_id, u.storage_key, storage_upload_finish.size, storage_upload_finish.content_type,
              coalesce(storage_upload_finish.cache_control, 'max-age=3600'), storage_upload_finish.etag,
              storage_upload_finish.width, storage_upload_finish.height, storage_upload_finish.user_metadata)
      returning s.* into o;
  end if;
  return private.storage_object_json(o);
end;
$function$;

CREATE OR REPLACE FUNCTION private.storage_upload_start(owner_id uuid, bucket_id text, name text, upsert boolean, declared_size bigint, kind text)
 RETURNS TABLE(upload_id uuid, storage_key text, file_size_limit bigint, allowed_mime_types text[], images boolean)
 LANGUAGE plpgsql
 SET search_path TO 'pg_catalog'
AS $function$
declare
  b app.storage_buckets := private.storage_bucket(storage_upload_start.bucket_id);
  existing app.storage_objects;
  reserved bigint;
  quota bigint;
  per_minute integer;
  open_uploads integer;
  oldest_open timestamptz;
  w app.storage_usage;
  started app.storage_uploads;
begin
  perform private.storage_check_name(storage_upload_start.name);
  if storage_upload_start.owner_id is not null
     and not private.storage_folder_owned(b.id, storage_upload_start.name, storage_upload_start.owner_id) then
    raise exception 'Access denied: you may not write %/%', b.id, storage_upload_start.name using errcode = 'PT403', hint = 'storage_access_denied';
  end if;
  select * into existing from app.storage_objects o where o.bucket_id = b.id and o.name = storage_upload_start.name;
  if existing.id is not null and not storage_upload_start.upsert then
    raise exception 'The resource already exists' using errcode = 'PT409', hint = 'object_exists';
  end if;
  if storage_upload_start.declared_size > b.file_size_limit then
    raise exception 'The object exceeded the maximum allowed size' using errcode = 'PT413', hint = 'object_too_large';
  end if;
  if storage_upload_start.owner_id is null then
    -- The operator's: no quota, rate or count of uploads under way.
    insert into app.storage_uploads as u (bucket_id, name, owner_id, upsert, kind, storage_key, declared_size, expires_at)
      values (b.id, storage_upload_start.name, null, storage_upload_start.upsert, storage_upload_start.kind,
              'objects/' || gen_random_uuid(), storage_upload_start.declared_size,
              now() + case storage_upload_start.kind when 'resumable' then interval '24 hours' else interval '1 hour' end)
      returning u.* into started;
    return query select started.id, started.storage_key, b.file_size_limit, b.allowed_mime_types, b.images;
    return;
  end if;
  -- The owner's usage row, locked: one owner's uploads begin one at a time,
  -- so what the others reserved is counted right. The upload is counted in
  -- the minute's window (a refused upload does not count: its transaction
  -- rolls back).
  insert into app.storage_usage as s (user_id, window_start, window_uploads)
    values (storage_upload_start.owner_id, now(), 1)
    on conflict (user_id) do update
      set window_start = case when s.window_start is null or s.window_start <= now() - interval '1 minute' then now() else s.window_start end,
          window_uploads = case when s.window_start is null or s.window_start <= now() - interval '1 minute' then 1 else s.window_uploads + 1 end
    returning s.* into w;
  -- The quota: what is stored, plus what the owner's uploads under way
  -- reserved (their declared sizes: a resumable upload's Upload-Length, a
  -- body's Content-Length), plus this one; an object this one replaces
  -- frees its bytes. The finish checks again with the real size.
  quota := private.storage_quota_bytes(storage_upload_start.owner_id);
  select coalesce(sum(u.declared_size), 0) into reserved
    from app.storage_uploads u where u.owner_id = storage_upload_start.owner_id and u.expires_at > now();
  if w.bytes + reserved + coalesce(storage_upload_start.declared_size, 0)
       - (case when existing.owner_id = storage_upload_start.owner_id then existing.size else 0 end) > quota
     or (storage_upload_start.declared_size is null and w.bytes + reserved >= quota) then
    raise exception 'Storage quota exceeded: % of % bytes used, % reserved by uploads under way', w.bytes, quota, reserved
      using errcode = 'PT413', hint = 'quota_exceeded';
  end if;
  -- Uploads per minute (a fixed window per user).
  per_minute := coalesce(w.uploads_per_minute,
    (select s.storage_uploads_per_minute from app.profiles p join app.subscription_plans s on s.id = p.subscription_type
      where p.id = storage_upload_start.owner_id),
    30);
  if w.window_uploads > per_minute then
    raise exception 'Too many uploads: at most % a minute', per_minute using errcode = 'PT429', hint = 'too_many_uploads',
      detail = json_build_object('retry_after', greatest(1, ceil(extract(epoch from w.window_start + interval '1 minute' - now())))::integer)::text;
  end if;
  -- Resumable uploads open at once (each holds staged bytes until it finishes, is cancelled or expires).
  if storage_upload_start.kind = 'resumable' then
    select count(*), min(u.expires_at) into open_uploads, oldest_open
      from app.storage_uploads u
     where u.owner_id = storage_upload_start.owner_id and u.kind = 'resumable' and u.expires_at > now();
    if open_uploads >= private.storage_open_uploads_max() then
      raise exception 'Too many resumable uploads under way: at most %; finish or cancel one', private.storage_open_uploads_max()
        using errcode = 'PT429', hint = 'too_many_open_uploads',
              detail = json_build_object('retry_after', greatest(1, ceil(extract(epoch from oldest_open - now())))::integer)::text;
    end if;
  end if;
  insert into app.storage_uploads as u (bucket_id, name, owner_id, upsert, kind, storage_key, declared_size, expires_at)
    values (b.id, storage_upload_start.name, storage_upload_start.owner_id, storage_upload_start.upsert, storage_upload_start.kind,
            'objects/' || gen_random_uuid(), storage_upload_start.declared_size,
            now() + case storage_upload_start.kind when 'resumable' then interval '24 hours' else interval '1 hour' end)
    returning u.* into started;
  return query select started.id, started.storage_key, b.file_size_limit, b.allowed_mime_types, b.images;
end;
$function$;

CREATE OR REPLACE FUNCTION private.sync_audience(shape text, after_id bigint, upto_id bigint, users uuid[])
 RETURNS SETOF uuid
 LANGUAGE sql
 STABLE SECURITY DEFINER
 SET search_path TO 'pg_catalog'
AS $function$
    with log as (
      select c.table_name, c.record_id, c.row_data, c.old_data
        from app.change_log c
       where c.id > after_id and c.id <= upto_id
    ),
    candidates as (
      select p.id
        from log l
        join app.profiles p on p.node_id = (l.row_data ->> 'member_node_id')::uuid
       where l.table_name = 'community_members' and shape in ('events', 'communities')
      union
      select p.id
        from app.community_members m
        join app.profiles p on p.node_id = m.member_node_id
       where shape = 'events'
         and m.community_id in (select (l.row_data ->> 'community_id')::uuid from log l where l.table_name = 'events'
                                union
                                select (l.old_data ->> 'community_id')::uuid from log l where l.table_name = 'events')
      union
      select p.id
        from app.community_members m
        join app.profiles p on p.node_id = m.member_node_id
       where shape = 'communities'
         and m.community_id in (select l.record_id from log l where l.table_name = 'communities')
      union
      select (l.row_data ->> 'created_by')::uuid from log l where shape in ('tasks', 'deals') and l.table_name = shape
      union
      select (l.row_data ->> 'user_id')::uuid from log l where shape = 'hats' and l.table_name = 'hats'
      union
      select l.record_id from log l where shape = 'profile' and l.table_name = 'profiles'
      union
      select p.id
        from log l
        join app.profiles p on p.node_id = (l.row_data ->> 'owner_node_id')::uuid
       where shape = 'connections' and l.table_name = 'connections'
    )
    select c.id from candidates c where c.id = any(users)
  $function$;

CREATE OR REPLACE FUNCTION private.sync_community_events(communities uuid[])
 RETURNS TABLE(id uuid, community_id uuid)
 LANGUAGE sql
 STABLE SECURITY DEFINER
 SET search_path TO 'pg_catalog'
AS $function$
    select e.id, e.community_id
      from app.events e
     where e.community_id = any(communities)
       and private.event_effective_end(e.starts_at, e.ends_at)
           >= greatest(now(), (select s.expired_through from app.change_log_state s))
  $function$;

CREATE OR REPLACE FUNCTION private.sync_log(shape text, after_id bigint, upto_id bigint)
 RETURNS TABLE(id bigint, operation text, table_name text, record_id uuid, changed_at timestamp with time zone, row_data jsonb, old_data jsonb)
 LANGUAGE plpgsql
 STABLE SECURITY DEFINER
 SET search_path TO 'pg_catalog'
AS $function$
declare
  me uuid := auth.uid();
  my_node uuid := app.my_node_id();
begin
  if shape not in ('profile', 'hats', 'communities', 'events', 'tasks', 'deals', 'connections') then
    raise exception 'unknown shape %', shape using errcode = 'PT400', hint = 'bad_request';
  end if;
  if after_id < (select s.pruned_through from app.change_log_state s) then
    raise exception 'the changes after % are no longer kept', after_id
      using errcode = 'PT410', hint = 'last_event_id_expired';
  end if;
  return query
    select c.id, c.operation, c.table_name, c.record_id, c.changed_at, c.row_data, c.old_data
      from app.change_log c
     where c.id > after_id and c.id <= upto_id
       and case
             when c.table_name = 'community_members' then
               shape in ('events', 'communities') and (c.row_data ->> 'member_node_id')::uuid = my_node
             when shape = 'events' then c.table_name = 'events'
             when shape = 'communities' then c.table_name = 'communities'
             when shape = 'tasks' then c.table_name = 'tasks' and (c.row_data ->> 'created_by')::uuid = me
             when shape = 'deals' then c.table_name = 'deals' and (c.row_data ->> 'created_by')::uuid = me
             when shape = 'hats' then c.table_name = 'hats' and (c.row_data ->> 'user_id')::uuid = me
             when shape = 'profile' then c.table_name = 'profiles' and c.record_id = me
             when shape = 'connections' then c.table_name = 'connections' and (c.row_data ->> 'owner_node_id')::uuid = my_node
             else false
           end
     order by c.id;
end;
$function$;

CREATE OR REPLACE FUNCTION private.sync_rows(shape text, public_url text)
 RETURNS TABLE(id uuid, value jsonb)
 LANGUAGE plpgsql
 STABLE
 SET search_path TO 'pg_catalog'
AS $function$
begin
  case shape
    when 'profile' then
      return query
        select p.id, to_jsonb(p) || jsonb_build_object('created_at', app.iso(p.created_at), 'updated_at', app.iso(p.updated_at))
          from api.profile_get() p;
    when 'hats' then
      return query
        select h.id, to_jsonb(h) || jsonb_build_object('created_at', app.iso(h.created_at))
          from api.hats_list() h;
    when 'communities' then
      return query
        select c.id, app.community_json(c) || jsonb_build_object('joined_at', app.iso(m.joined_at), 'role', m.role)
          from app.community_members m
          join app.communities c on c.id = m.community_id
         where m.member_node_id = app.my_node_id();
    when 'events' then
      return query
        select (u.event).id, private.event_object(u.event, u.community_node_id, u.manages, public_url)
          from private.synced_events_of(app.my_node_id()) u;
    when 'tasks' then
      return query
        select t.id, jsonb_build_object('id', t.id, 'created_by', t.created_by, 'inserted_at', app.iso(t.inserted_at),
                                        'updated_at', app.iso(t.updated_at), 'meta', t.meta)
          from app.tasks t;
    when 'deals' then
      return query
        select d.id, to_jsonb(d) from api.deals_list() d;
    when 'connections' then
      return query
        select c.id, to_jsonb(c) || jsonb_build_object('created_at', app.iso(c.created_at), 'updated_at', app.iso(c.updated_at))
          from api.connections_list() c;
    else
      raise exception 'unknown shape %', shape using errcode = 'PT400', hint = 'bad_request';
  end case;
end;
$function$;

CREATE OR REPLACE FUNCTION private.sync_was_member(community uuid, was uuid[], was_not uuid[])
 RETURNS boolean
 LANGUAGE sql
 STABLE
 SET search_path TO 'pg_catalog'
AS $function$
    select case
             when community = any(coalesce(was, '{}')) then true
             when community = any(coalesce(was_not, '{}')) then false
             else exists (select from app.community_members m
                           where m.community_id = community and m.member_node_id = app.my_node_id())
           end
  $function$;

CREATE OR REPLACE FUNCTION private.synced_events_of(member_node uuid)
 RETURNS TABLE(event app.events, community_node_id uuid, manages boolean)
 LANGUAGE sql
 STABLE
 SET search_path TO 'pg_catalog'
AS $function$
    select e, c.node_id, m.role = 'manager'
      from app.community_members m
      join app.events e on e.community_id = m.community_id
      join app.communities c on c.id = e.community_id
     where m.member_node_id = member_node
       and private.event_effective_end(e.starts_at, e.ends_at)
           >= greatest(now(), (select p.expired_through from private.change_log_position() p))
  $function$;

CREATE OR REPLACE FUNCTION private.task_json(task app.tasks)
 RETURNS jsonb
 LANGUAGE sql
 STABLE
 SET search_path TO 'pg_catalog'
AS $function$
    select jsonb_build_object('id', task.id, 'created_by', task.created_by, 'inserted_at', app.iso(task.inserted_at),
                              'updated_at', app.iso(task.updated_at), 'meta', task.meta)
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

CREATE OR REPLACE FUNCTION private.tg_storage_objects__bucket_rules()
 RETURNS trigger
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog'
AS $function$
declare
  b app.storage_buckets := private.storage_bucket(new.bucket_id);
begin
  if new.size > b.file_size_limit then
    raise exception 'The object exceeded the maximum allowed size' using errcode = 'PT413', hint = 'object_too_large';
  end if;
  if not private.storage_type_allowed(b, new.content_type) or (b.images and new.width is null) then
    raise exception 'mime type % is not supported', new.content_type using errcode = 'PT415', hint = 'invalid_mime_type';
  end if;
  return new;
end;
$function$;

CREATE OR REPLACE FUNCTION private.tg_sync__log_change()
 RETURNS trigger
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog'
AS $function$
declare
  row_now jsonb := case when tg_op = 'DELETE' then to_jsonb(old) else to_jsonb(new) end;
  row_before jsonb := case when tg_op = 'UPDATE' then to_jsonb(old) end;
begin
  -- An update that changes nothing is no change.
  if row_now is not distinct from row_before then
    return null;
  end if;
  perform pg_notify('event_changes', json_build_object('id',
    private.append_change(lower(tg_op), tg_table_name, (row_now ->> 'id')::uuid, row_now, row_before))::text);
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

ALTER TABLE "identity"."email_codes" ADD CONSTRAINT "email_codes_user_id_fkey" FOREIGN KEY (user_id) REFERENCES identity.users(id) ON DELETE CASCADE;

CREATE INDEX email_codes_user_idx ON identity.email_codes USING btree (user_id);

CREATE UNIQUE INDEX signing_keys_one_current ON identity.signing_keys USING btree (status) WHERE (status = 'current'::text);

CREATE UNIQUE INDEX signing_keys_one_standby ON identity.signing_keys USING btree (status) WHERE (status = 'standby'::text);

CREATE TRIGGER _910_sync_log_change AFTER INSERT OR DELETE OR UPDATE ON app.communities FOR EACH ROW EXECUTE FUNCTION private.tg_sync__log_change();

CREATE TRIGGER _910_sync_log_change AFTER INSERT OR DELETE OR UPDATE ON app.connections FOR EACH ROW EXECUTE FUNCTION private.tg_sync__log_change();

CREATE TRIGGER _910_sync_log_change AFTER INSERT OR DELETE OR UPDATE ON app.deals FOR EACH ROW EXECUTE FUNCTION private.tg_sync__log_change();

CREATE TRIGGER _910_sync_log_change AFTER INSERT OR DELETE OR UPDATE ON app.hats FOR EACH ROW EXECUTE FUNCTION private.tg_sync__log_change();

CREATE TRIGGER _910_sync_log_change AFTER INSERT OR DELETE OR UPDATE ON app.profiles FOR EACH ROW EXECUTE FUNCTION private.tg_sync__log_change();

CREATE TRIGGER _910_sync_log_change AFTER INSERT OR DELETE OR UPDATE ON app.tasks FOR EACH ROW EXECUTE FUNCTION private.tg_sync__log_change();

CREATE TRIGGER _900_notify_signing_keys_changed AFTER INSERT OR DELETE OR UPDATE ON identity.signing_keys FOR EACH STATEMENT EXECUTE FUNCTION private.tg_signing_keys__notify_changed();

COMMENT ON COLUMN "app"."checkins"."device_checked_in_at" IS 'When the phone says it checked in (an offline check-in sent later), beside checked_in_at (the server''s time of arrival): at most 24 hours before it and 5 minutes after it (clock skew), and inside the event''s check-in window (private.checkin_device_time); null when the phone sent none.';

COMMENT ON COLUMN "identity"."signing_keys"."private_jwk" IS 'The private JWK (with d): never leaves the processes'' own role.';

COMMENT ON COLUMN "identity"."signing_keys"."public_jwk" IS 'The public JWK as published in /auth/v1/.well-known/jwks.json (kid, alg, use sig).';

COMMENT ON COLUMN "identity"."signing_keys"."retired_at" IS 'When a rotation made the key previous: it verifies for the access token lifetime after this.';

COMMENT ON COLUMN "identity"."users"."app_metadata" IS 'What the service (its operators, with the service-role key) says about the user: a JSON object of at most 16 KB set only through PUT /auth/v1/admin/users/{id} (admin.user_update), answered as the User object''s app_metadata with provider and providers, and carried in access tokens (claim app_metadata) for rules to read (private.app_metadata()).';

COMMENT ON COLUMN "identity"."users"."email" IS 'Lower-case e-mail address; unique. Null for a guest (is_anonymous).';

COMMENT ON COLUMN "identity"."users"."is_anonymous" IS 'A guest (POST /auth/v1/signup without e-mail: supabase-js signInAnonymously): no e-mail, no password; private.require_full_account refuses it what only a full account may do; it becomes a full account, same id, when it sets an e-mail and a password (api.auth_guest_convert); unconverted, it is deleted after a while (private.guests_prune).';

COMMENT ON FUNCTION "admin"."signing_key_add"(text, text, jsonb, jsonb) IS 'npm run admin -- signing-keys add: a new key, standby (published and verifying, not signing) until signing_key_rotate; the current one when none signs yet. PT422 validation_error while a standby key exists.';

COMMENT ON FUNCTION "admin"."signing_key_revoke"(text) IS 'npm run admin -- signing-keys revoke <kid>: the key verifies nothing any more (its tokens are refused on every door once each process has reloaded the set, at once by NOTIFY). PT404 not_found; PT422 validation_error for the current key (rotate first).';

COMMENT ON FUNCTION "admin"."signing_key_rotate"() IS 'npm run admin -- signing-keys rotate: the standby key signs from now on; the current one becomes previous and verifies until its tokens have expired. Answers the new current kid. PT404 not_found without a standby key.';

COMMENT ON FUNCTION "admin"."signing_keys_list"() IS 'npm run admin -- signing-keys list: every key, oldest first, without its private half.';

COMMENT ON FUNCTION "admin"."user_create"(text, text, jsonb, jsonb) IS 'POST /auth/v1/admin/users (the service-role key): creates an account as registration does (private.create_account_with_hash: profile and node; password_hash a bcrypt hash the gateway made, or null for an account that signs in only through a set-password link), merges user_metadata and app_metadata, and answers the User object. PT400 invalid_email / invalid_password_hash, PT409 email_taken, PT422 validation_error for user_metadata.';

COMMENT ON FUNCTION "admin"."user_update"(uuid, text, text, jsonb, jsonb) IS 'PUT /auth/v1/admin/users/{id} (the service-role key): every change at once or none. email becomes the account''s address at once (no link; a name derived from the old address is derived from the new one; PT400 invalid_email, PT409 email_taken); password_hash (a bcrypt hash the gateway made) replaces the password and ends every session of the account and its signed storage URLs; user_metadata is merged as PUT /auth/v1/user merges it, and app_metadata the same way (its only door: access tokens issued afterwards carry it). Answers the User object; PT404 not_found for an unknown id.';

COMMENT ON FUNCTION "api"."api_token_create"(text, text[], timestamp with time zone, uuid) IS 'POST /api/docs/tokens: creates a token for the caller (community-scoped with community_id, managers only: PT403) and returns it with its secret, the only time the secret is shown. PT422 for invalid input; PT403 when called with an API token or by a guest (private.require_full_account).';

COMMENT ON FUNCTION "api"."auth_guest_convert"(text, text, jsonb) IS 'PUT /auth/v1/user {email, password} of a guest (supabase-js updateUser): the guest becomes a full account with this e-mail and the bcrypt hash the gateway made of the password, keeping its id and everything it made (its derived name follows the address; data merged into user_metadata); answers the User object. PT403 forbidden for a caller that is not a guest (or an API token); PT400 invalid_email, invalid_password_hash; PT409 email_taken.';

COMMENT ON FUNCTION "api"."auth_guest_sign_in"(text, integer, integer, text, jsonb) IS 'POST /auth/v1/signup without e-mail (supabase-js signInAnonymously): a new guest (identity.users.is_anonymous: no e-mail, no password; a profile with a private derived name; data merged into user_metadata) and its session. Counted per client address: status throttled (retry_after seconds) past max_per_ip sign-ins in window_seconds, else ok.';

COMMENT ON FUNCTION "api"."auth_magic_link_verify"(text, text, text) IS 'GET and POST /auth/v1/verify type magiclink (or email) with the token of the link signInWithOtp e-mailed: signs its account in, once, within the hour (the code of the same message is used up with it). PT400 invalid_link for a used, replaced, voided or expired link.';

COMMENT ON FUNCTION "api"."auth_otp_request"(text, text, text, integer, integer) IS 'POST /auth/v1/otp (supabase-js signInWithOtp): queues the job that e-mails the account with this address a 6-digit code and a magic link (private.email_code_queue; at most 5 an hour per account); does and answers the same whether or not the account exists. PT429 rate_limited past max_per_ip requests of the client address in window_seconds, counted with the other e-mailed links.';

COMMENT ON FUNCTION "api"."auth_otp_verify"(text, text, text, text, integer, integer, integer, integer) IS 'POST /auth/v1/verify {type: email, email, token} (supabase-js verifyOtp): the newest live code e-mailed to the address signs its account in, once (status ok: a session). A wrong code, an unknown address or no live code is status invalid, counted as a failed sign-in (per address and client, per address, per client address; the same limits as passwords), and the fifth wrong code voids the code; past the limits status throttled (retry_after seconds).';

COMMENT ON FUNCTION "api"."connection_update"(uuid, jsonb, text[]) IS 'PATCH /api/mobile/connections/{id}: changes notes, strength and tags given in the patch. PT404 when unknown or someone else''s; PT412 precondition_failed (with the current connection) when if_match (the If-Match tags) names another version (api.etag).';

COMMENT ON FUNCTION "api"."etag"(timestamp with time zone) IS 'The ETag of a single object of the REST interface: its row''s updated_at (set on every update by private.tg__set_updated_at) in microseconds since 1970, quoted (a strong entity tag). The gateway answers it on every single-object GET and write; app.check_if_match compares If-Match to it.';

COMMENT ON FUNCTION "api"."event_checkin"(uuid, uuid, uuid, text, timestamp with time zone) IS 'POST /api/mobile/events/{event_id}/checkin: checks the caller in (created) or returns the current check-in. checked_in_at: the phone''s time of an offline check-in, kept as device_checked_in_at beside the server''s (private.checkin_device_time: PT422 checkin_time_in_future, checkin_time_too_old, checkin_time_outside_event). PT404 unknown event, PT422 a hat not the caller''s.';

COMMENT ON FUNCTION "api"."event_etag"(uuid) IS 'GET and PATCH /api/mobile/events/{id}: the event''s ETag (api.etag of its updated_at; by id or node id), answered beside the Event object (which has no updated_at); null when unknown.';

COMMENT ON FUNCTION "api"."event_update"(uuid, jsonb, text, text[]) IS 'PATCH /api/mobile/events/{id}: a manager of the event''s community changes what the patch names: image_path (an object of the event-images bucket in the event''s folder, or null to clear). PT403 not_community_manager, PT404 event_not_found, PT422 invalid_image_path; PT412 precondition_failed (with the current event) when if_match (the If-Match tags) names another version (api.event_etag).';

COMMENT ON FUNCTION "api"."idempotency_claim"(text, text) IS 'Claims an Idempotency-Key for the caller''s credential (private.idempotency_credential) in the request''s transaction, before the route''s call, and returns null; or, when the credential sent the same request (request_hash: SHA-256 of method, path and body, hex) in the last 48 hours, returns its stored answer {status, answer: {headers, body}}, which the gateway sends only if the route does not refuse the caller now. PT409 idempotency_key_in_progress while another transaction holds the key; PT422 idempotency_key_reused for another request.';

COMMENT ON FUNCTION "api"."profile_patch"(jsonb, text[]) IS 'PATCH /api/mobile/profile: changes what the patch names: name (as api.profile_update) and avatar_path (an object of the avatars bucket in the caller''s folder, or null to clear). PT422 validation_error or invalid_image_path, PT404 without a profile; PT412 precondition_failed (with the current profile) when if_match (the If-Match tags) names another version (api.etag of the profile''s updated_at).';

COMMENT ON FUNCTION "api"."storage_bucket_create"(text, boolean, bigint, text[]) IS 'POST /storage/v1/bucket (the operator only: the service-role key): a bucket, public or private, with a size limit in bytes (null: private.storage_default_size_limit()) and the types it takes (null: any). Its users write under their own id (`{user id}/...`, folder_owner user); an operator changes that in SQL (app.storage_buckets.folder_owner). PT403 storage_access_denied for anyone else, PT400 invalid_bucket_name or invalid_bucket_limits, PT409 bucket_exists.';

COMMENT ON FUNCTION "api"."storage_bucket_delete"(text) IS 'DELETE /storage/v1/bucket/{id} (the operator only): deletes an empty bucket (no object, no upload under way: empty it first). The four built-in buckets (private.storage_builtin_buckets) stay: PT409 bucket_builtin. PT403 storage_access_denied, PT404 bucket_not_found, PT409 bucket_not_empty.';

COMMENT ON FUNCTION "api"."storage_bucket_empty"(text) IS 'POST /storage/v1/bucket/{id}/empty (the operator only): deletes every object of the bucket in one transaction (their bytes are collected later). PT403 storage_access_denied, PT404 bucket_not_found.';

COMMENT ON FUNCTION "api"."storage_bucket_update"(text, jsonb) IS 'PUT /storage/v1/bucket/{id} (the operator only): changes what `changes` names of public, file_size_limit (bytes; null: the default) and allowed_mime_types (null: any; an image bucket keeps to image types). PT403 storage_access_denied, PT404 bucket_not_found, PT400 invalid_bucket_limits.';

COMMENT ON FUNCTION "api"."storage_objects_list_v2"(text, text, integer, text, boolean, text, text) IS 'POST /storage/v1/object/list-v2/{bucket} (supabase-js `listV2`): a page of at most max_rows (1 to 1,000) objects whose full names start with prefix, with with_delimiter the folders directly under it instead of what they hold; by name (folders among objects) or by created_at or updated_at (folders first), asc or desc; the next page after cursor (opaque, as nextCursor gave it). Only in folders the caller owns (row-level security). PT404 bucket_not_found, PT400 bad_request (a cursor not made here, or for another order).';

COMMENT ON FUNCTION "api"."sync_changes"(text, bigint, text) IS 'GET /sync/v1/shape (offset after a change id): what changed in the caller''s shape after after_id, up to the log''s head, one message per row (change_id of its last change, insert|update|delete, id, the row as REST answers it or {id} for a delete), then a head row (operation ''head'', no id). PT410 last_event_id_expired when after_id is older than the log keeps; PT400 for an unknown shape.';

COMMENT ON FUNCTION "api"."sync_snapshot"(text, text) IS 'GET /sync/v1/shape (offset -1): the rows of the caller''s shape (private.sync_rows) and the change id they are consistent with (head, on every row; one row with a null id when the shape is empty). One statement, so the rows and the head are of one snapshot.';

COMMENT ON FUNCTION "api"."task_delete"(uuid, text[]) IS 'DELETE /api/mobile/tasks/{id}: deletes one of the caller''s tasks and its links; PT403 for another user''s task, PT404 for none; PT412 precondition_failed (with the current task) when if_match (the If-Match tags) names another version (api.etag).';

COMMENT ON FUNCTION "api"."task_update"(uuid, jsonb, text[]) IS 'PATCH /api/mobile/tasks/{id}: merges title, description and deal_context into meta (null removes); PT422 for status or other keys; PT404; PT412 precondition_failed (with the current task) when if_match (the If-Match tags) names another version (api.etag).';

COMMENT ON FUNCTION "api"."webhook_create"(uuid, text, text[], text) IS 'POST /api/v1/platform/webhooks: registers an endpoint of the community (at most 20) and returns it with its secret (shown only here and on rotation). PT403 as the platform endpoints, and for a guest (private.require_full_account); PT422 invalid_url, unknown_event_type, too_many_webhooks.';

COMMENT ON FUNCTION "app"."check_if_match"(text[], timestamp with time zone, jsonb) IS 'A write''s If-Match (the entity tags sent; null: none) against the object''s current version (api.etag of its updated_at), called with the row locked: PT412 precondition_failed with {etag, current: the object as the route answers it} in the DETAIL when no tag matches (nothing is written: the transaction fails).';

COMMENT ON FUNCTION "private"."access_token_claims"(uuid) IS 'The claims of a user''s access token besides those of its session (sub, email, session_id): app_metadata, user_metadata and is_anonymous (true for a guest) as Supabase Auth carries them, the same as the User object (private.auth_user_object). Read by the processes when they sign a token (gateway/auth/sessions.ts); what is added to every access token is added here.';

COMMENT ON FUNCTION "private"."app_metadata"() IS 'The caller''s app_metadata, for rules and policies: as its access token carries it (claim app_metadata, as signed when the token was issued), or the account''s own for a credential that carries none (an API token, an OAuth token on /mcp); {} for anon.';

COMMENT ON FUNCTION "private"."auth_user_object"(uuid) IS 'A user as Supabase Auth''s User object: id, aud, role, email, email_confirmed_at (the account''s creation: sign-up needs no confirmation here), last_sign_in_at (its latest sign-in), app_metadata (the operators'' keys, and provider email), user_metadata, one email identity, created_at, updated_at, is_anonymous false; new_email and email_change_sent_at while an e-mail change waits for its link. A guest (is_anonymous) as Supabase Auth answers one: email empty, no confirmation times, no identity, app_metadata only the operators'' keys (no provider), is_anonymous true.';

COMMENT ON FUNCTION "private"."check_in"(uuid, uuid, uuid, uuid, text, timestamp with time zone) IS 'Checks the caller in to an event or a venue (device_checked_in_at: the phone''s time, already checked); idempotent: returns the current check-in with created = false.';

COMMENT ON FUNCTION "private"."check_in_user"(uuid, uuid, uuid, uuid, uuid, text, timestamp with time zone) IS 'Checks a user in to an event or a venue; idempotent: returns the current check-in with created = false. Runs with the caller''s rights: for a request role, row-level security admits only the caller''s own user_id.';

COMMENT ON FUNCTION "private"."checkin_device_time"(app.events, timestamp with time zone, timestamp with time zone) IS 'The phone''s time of an offline event check-in, checked: null stays null; PT422 checkin_time_in_future past as_of + 5 minutes, checkin_time_too_old before as_of - 24 hours, checkin_time_outside_event outside date - 2h .. effective end + 2h.';

COMMENT ON FUNCTION "private"."connection_json"(app.connections) IS 'A connection as the REST interface answers it (the Connection object), for the current object of a PT412.';

COMMENT ON FUNCTION "private"."email_code_queue"(uuid, text) IS 'Queues the e-mail of a sign-in code (6 random digits) and its magic link (GET /auth/v1/verify?type=magiclink) for the account, both valid once for an hour; older codes of the account stop working. Only hashes are stored (the code with the user id).';

COMMENT ON FUNCTION "private"."email_link_send"(text, text, text) IS 'The email_link job (gateway/jobs/mail.ts), after the request answered: when an account has the address, queues its e-mail (kind recover: a set-password link, at most 5 an hour; delete_account: a deletion link, private.account_delete_link_queue; otp: a sign-in code and link, private.email_code_queue, at most 5 an hour); nothing otherwise.';

COMMENT ON FUNCTION "private"."guests_prune"(interval, integer) IS 'Deletes guests (identity.users.is_anonymous) made more than older_than ago and never converted, as an account deletion does (private.account_delete: memberships, check-ins, sessions, everything of theirs), at most `batch` a call; returns how many. A guest that is the only manager of a community stays. The worker runs it hourly (GUEST_RETENTION_DAYS).';

COMMENT ON FUNCTION "private"."idempotency_key_lifetime"() IS 'How long an idempotency key and its answer are kept: 48 hours, so that a write replayed after a day offline keeps its key.';

COMMENT ON FUNCTION "private"."idempotency_keys_prune"(integer) IS 'Deletes idempotency keys older than 48 hours, at most max_rows (oldest first), and counts them off their callers; returns how many. The background worker''s crontab runs it.';

COMMENT ON FUNCTION "private"."metadata_merged"(jsonb, jsonb, text) IS 'current_value with data merged as Supabase Auth merges user_metadata and app_metadata: each key given replaces its value, a key given as null is removed; at most 16 KB (else PT422 validation_error naming what); data not an object: PT422.';

COMMENT ON FUNCTION "private"."profile_json"(uuid) IS 'The caller''s profile as the REST interface answers it (the UserProfile object), for the current object of a PT412; null for anyone else''s id.';

COMMENT ON FUNCTION "private"."require_full_account"() IS 'The one check of what a guest (identity.users.is_anonymous) may not do: PT403 forbidden when the caller is a guest; nothing otherwise (anon callers are refused by the rules themselves). Called by api.api_token_create and api.webhook_create (the OAuth consent form needs a password, which a guest has not). Read from the table, so a guest converted a moment ago is a full account at once, whatever its access token says.';

COMMENT ON FUNCTION "private"."signing_key_first"(text, text, jsonb, jsonb) IS 'At a process''s start, when no key signs yet: the key it made becomes the current one, unless another process''s did first (the table is locked meanwhile).';

COMMENT ON FUNCTION "private"."signing_keys_usable"(integer) IS 'The keys a process verifies with and publishes: the current one (with its private JWK: it signs), the standby one, and previous ones retired less than token_ttl_seconds ago (their tokens may still be valid). Revoked keys never.';

COMMENT ON FUNCTION "private"."storage_bucket_limits_check"(bigint, text[], boolean) IS 'PT400 invalid_bucket_limits unless a bucket''s limits are sound: 1 byte to 5 GB; 1 to 50 lower-case types or type/* patterns; an image bucket''s, image types only.';

COMMENT ON FUNCTION "private"."storage_builtin_buckets"() IS 'The buckets the migrations make, which the service uses (avatars, community and event images, attachments): they cannot be deleted.';

COMMENT ON FUNCTION "private"."storage_default_size_limit"() IS 'The size limit of a bucket made or changed without one: 50 MB (Supabase Storage''s default).';

COMMENT ON FUNCTION "private"."storage_folder_owned"(text, text, uuid) IS 'THE storage rule: whether the user owns the object''s first folder in the bucket: user buckets, the folder named by their id; community buckets, a community they manage; event buckets, an event of a community they manage. Owners write (and, in private buckets, read); it is the row-level security of app.storage_objects. No user (null): true for the operator only (private.storage_operator: the service-role key), who owns every folder.';

COMMENT ON FUNCTION "private"."storage_operator"() IS 'Whether the request is the operator''s: it runs with the claims the gateway gives the service-role key on /storage/v1 (role service_role, no user), as Postgres role service_role. The operator passes the storage rule (private.storage_folder_owned) and row-level security (the role bypasses it), never the checks of bucket, path, size and type.';

COMMENT ON FUNCTION "private"."storage_operator_only"() IS 'PT403 storage_access_denied unless the request is the operator''s (private.storage_operator): the bucket API.';

COMMENT ON FUNCTION "private"."storage_upload_start"(uuid, text, text, boolean, bigint, text) IS 'Begins an upload for owner_id (the caller, or the signer of a signed upload URL): the bucket, the path, the owner''s right to write it, an existing object (without upsert), the declared size against the bucket''s limit and against the quota together with what the owner''s uploads under way reserved (their declared sizes, held until they finish, are given up or expire), the upload rate, and at most private.storage_open_uploads_max() resumable uploads open, before a byte is read (owner_id null: the operator''s upload, which only the path, the bucket and the size limit hold); registers it under a fresh byte-store key (expiring after 1 hour, 24 for resumable uploads). PT413 quota_exceeded, PT429 too_many_uploads or too_many_open_uploads (detail: retry_after).';

COMMENT ON FUNCTION "private"."sync_audience"(text, bigint, bigint, uuid[]) IS 'Which of these users a range of changes may concern for a shape (a superset: owners of changed rows, members of changed events'' and communities'' communities, users whose memberships changed). The gateway reads api.sync_changes for those only.';

COMMENT ON FUNCTION "private"."sync_community_events"(uuid[]) IS 'The ids of the events shown in an events shape of these communities (not ended): those a join brings in and a leave takes out (api.sync_changes, for the caller''s changed memberships only).';

COMMENT ON FUNCTION "private"."sync_log"(text, bigint, bigint) IS 'The change-log entries after_id < id <= upto_id that may concern the caller''s shape: their own rows (the owner column of the row), the caller''s memberships, and every event or community change (judged by api.sync_changes). PT410 last_event_id_expired below the prune watermark; PT400 for an unknown shape.';

COMMENT ON FUNCTION "private"."sync_rows"(text, text) IS 'The rows of a shape as the caller sees them now, each with the fields REST answers (read through the REST functions and row-level security; timestamps as the gateway writes them): profile, hats, communities (mine, with joined_at and role), events (of my communities, not ended), tasks, deals, connections. PT400 for another name.';

COMMENT ON FUNCTION "private"."sync_was_member"(uuid, uuid[], uuid[]) IS 'Whether the caller was a member of the community before a range of changes: as its first membership entry in the range says (was / was_not), else as now.';

COMMENT ON FUNCTION "private"."synced_events_of"(uuid) IS 'The events shape of a member: the events of their communities that have not ended (nor been logged as expired), with the community''s node id and whether they manage it. Unlike the upcoming list, not limited to 100.';

COMMENT ON FUNCTION "private"."task_json"(app.tasks) IS 'A task as the REST interface answers it (the Task object), for the current object of a PT412.';

COMMENT ON FUNCTION "private"."tg_signing_keys__notify_changed"() IS 'Tells every process (NOTIFY signing_keys_changed) to reload the key set: a key added, rotated or revoked.';

COMMENT ON FUNCTION "private"."tg_sync__log_change"() IS 'Trigger: logs a change of a synced table (tasks, deals, hats, connections, profiles, communities) to app.change_log (record_id = the row''s id) and NOTIFYs event_changes with {id}.';

COMMENT ON FUNCTION "private"."user_metadata_merge"(uuid, jsonb) IS 'Merges data into a user''s user_metadata (private.metadata_merged: PT422 validation_error for more than 16 KB or data not an object). The one merge of PUT /auth/v1/user and the admin user functions.';

COMMENT ON TABLE "app"."idempotency_keys" IS 'Idempotency keys of the last 48 hours, per user and credential (at most 1,000 a user): the key''s SHA-256, the request''s SHA-256 (method, path, body), the status of a success and the answer (encrypted with a key derived from the user, the credential and the idempotency key). Written only in the transaction of the request they answer. Not granted to request roles.';

COMMENT ON TABLE "app"."storage_uploads" IS 'Uploads under way: the key their bytes are written to before the object exists. One that expires (cut off, gateway killed) has its bytes collected. owner_id null: the operator''s (the service-role key), which no rule of folders, quota or rate holds.';

COMMENT ON TABLE "identity"."email_codes" IS 'E-mailed sign-in codes and their magic links (supabase-js signInWithOtp), hashed: one message carries a 6-digit code and a link, either signs in once, within the hour; a newer one voids older ones, and 5 wrong codes void it.';

COMMENT ON TABLE "identity"."signing_keys" IS 'The asymmetric keys that sign (current) and verify (standby, current, previous) access tokens; revoked keys verify nothing. The private JWK is readable only by the processes'' own role.';

COMMENT ON TABLE "private"."auth_failures" IS 'Failed sign-ins (per e-mail and client address, per e-mail, per client IP), failed refresh/verify attempts (per client IP), requests at the doors that set a password (password_set, per client IP) at the doors that e-mail a link (email_link, per client IP) and guest sign-ins (guest, per client IP), for throttling.';

REVOKE ALL ON FUNCTION "admin"."signing_key_add"(text, text, jsonb, jsonb) FROM PUBLIC;

REVOKE ALL ON FUNCTION "admin"."signing_key_revoke"(text) FROM PUBLIC;

REVOKE ALL ON FUNCTION "admin"."signing_key_rotate"() FROM PUBLIC;

REVOKE ALL ON FUNCTION "admin"."signing_keys_list"() FROM PUBLIC;

REVOKE ALL ON FUNCTION "admin"."user_create"(text, text, jsonb, jsonb) FROM PUBLIC;

REVOKE ALL ON FUNCTION "admin"."user_update"(uuid, text, text, jsonb, jsonb) FROM PUBLIC;

REVOKE ALL ON FUNCTION "api"."auth_guest_convert"(text, text, jsonb) FROM PUBLIC;

GRANT EXECUTE ON FUNCTION "api"."auth_guest_convert"(text, text, jsonb) TO "authenticated";

REVOKE ALL ON FUNCTION "api"."auth_guest_sign_in"(text, integer, integer, text, jsonb) FROM PUBLIC;

GRANT EXECUTE ON FUNCTION "api"."auth_guest_sign_in"(text, integer, integer, text, jsonb) TO "anon", "authenticated";

REVOKE ALL ON FUNCTION "api"."auth_magic_link_verify"(text, text, text) FROM PUBLIC;

GRANT EXECUTE ON FUNCTION "api"."auth_magic_link_verify"(text, text, text) TO "anon", "authenticated";

REVOKE ALL ON FUNCTION "api"."auth_otp_request"(text, text, text, integer, integer) FROM PUBLIC;

GRANT EXECUTE ON FUNCTION "api"."auth_otp_request"(text, text, text, integer, integer) TO "anon", "authenticated";

REVOKE ALL ON FUNCTION "api"."auth_otp_verify"(text, text, text, text, integer, integer, integer, integer) FROM PUBLIC;

GRANT EXECUTE ON FUNCTION "api"."auth_otp_verify"(text, text, text, text, integer, integer, integer, integer) TO "anon", "authenticated";

REVOKE ALL ON FUNCTION "api"."connection_update"(uuid, jsonb, text[]) FROM PUBLIC;

GRANT EXECUTE ON FUNCTION "api"."connection_update"(uuid, jsonb, text[]) TO "authenticated";

REVOKE ALL ON FUNCTION "api"."etag"(timestamp with time zone) FROM PUBLIC;

GRANT EXECUTE ON FUNCTION "api"."etag"(timestamp with time zone) TO "authenticated";

REVOKE ALL ON FUNCTION "api"."event_checkin"(uuid, uuid, uuid, text, timestamp with time zone) FROM PUBLIC;

GRANT EXECUTE ON FUNCTION "api"."event_checkin"(uuid, uuid, uuid, text, timestamp with time zone) TO "authenticated";

REVOKE ALL ON FUNCTION "api"."event_etag"(uuid) FROM PUBLIC;

GRANT EXECUTE ON FUNCTION "api"."event_etag"(uuid) TO "authenticated";

REVOKE ALL ON FUNCTION "api"."event_update"(uuid, jsonb, text, text[]) FROM PUBLIC;

GRANT EXECUTE ON FUNCTION "api"."event_update"(uuid, jsonb, text, text[]) TO "authenticated";

REVOKE ALL ON FUNCTION "api"."profile_patch"(jsonb, text[]) FROM PUBLIC;

GRANT EXECUTE ON FUNCTION "api"."profile_patch"(jsonb, text[]) TO "authenticated";

REVOKE ALL ON FUNCTION "api"."storage_bucket_create"(text, boolean, bigint, text[]) FROM PUBLIC;

GRANT EXECUTE ON FUNCTION "api"."storage_bucket_create"(text, boolean, bigint, text[]) TO "authenticated";

GRANT EXECUTE ON FUNCTION "api"."storage_bucket_create"(text, boolean, bigint, text[]) TO "service_role";

REVOKE ALL ON FUNCTION "api"."storage_bucket_delete"(text) FROM PUBLIC;

GRANT EXECUTE ON FUNCTION "api"."storage_bucket_delete"(text) TO "authenticated";

GRANT EXECUTE ON FUNCTION "api"."storage_bucket_delete"(text) TO "service_role";

REVOKE ALL ON FUNCTION "api"."storage_bucket_empty"(text) FROM PUBLIC;

GRANT EXECUTE ON FUNCTION "api"."storage_bucket_empty"(text) TO "authenticated";

GRANT EXECUTE ON FUNCTION "api"."storage_bucket_empty"(text) TO "service_role";

REVOKE ALL ON FUNCTION "api"."storage_bucket_get"(text) FROM "service_role";

GRANT EXECUTE ON FUNCTION "api"."storage_bucket_get"(text) TO "service_role";

REVOKE ALL ON FUNCTION "api"."storage_bucket_update"(text, jsonb) FROM PUBLIC;

GRANT EXECUTE ON FUNCTION "api"."storage_bucket_update"(text, jsonb) TO "authenticated";

GRANT EXECUTE ON FUNCTION "api"."storage_bucket_update"(text, jsonb) TO "service_role";

REVOKE ALL ON FUNCTION "api"."storage_buckets_list"() FROM "service_role";

GRANT EXECUTE ON FUNCTION "api"."storage_buckets_list"() TO "service_role";

REVOKE ALL ON FUNCTION "api"."storage_object_copy_begin"(text, text, text, text, boolean) FROM "service_role";

GRANT EXECUTE ON FUNCTION "api"."storage_object_copy_begin"(text, text, text, text, boolean) TO "service_role";

REVOKE ALL ON FUNCTION "api"."storage_object_get"(text, text, boolean) FROM "service_role";

GRANT EXECUTE ON FUNCTION "api"."storage_object_get"(text, text, boolean) TO "service_role";

REVOKE ALL ON FUNCTION "api"."storage_object_move"(text, text, text, text) FROM "service_role";

GRANT EXECUTE ON FUNCTION "api"."storage_object_move"(text, text, text, text) TO "service_role";

REVOKE ALL ON FUNCTION "api"."storage_object_signed"(text, text, text) FROM "service_role";

GRANT EXECUTE ON FUNCTION "api"."storage_object_signed"(text, text, text) TO "service_role";

REVOKE ALL ON FUNCTION "api"."storage_objects_list"(text, text, integer, integer, text, text, text) FROM "service_role";

GRANT EXECUTE ON FUNCTION "api"."storage_objects_list"(text, text, integer, integer, text, text, text) TO "service_role";

REVOKE ALL ON FUNCTION "api"."storage_objects_list_v2"(text, text, integer, text, boolean, text, text) FROM PUBLIC;

GRANT EXECUTE ON FUNCTION "api"."storage_objects_list_v2"(text, text, integer, text, boolean, text, text) TO "authenticated";

GRANT EXECUTE ON FUNCTION "api"."storage_objects_list_v2"(text, text, integer, text, boolean, text, text) TO "service_role";

REVOKE ALL ON FUNCTION "api"."storage_objects_remove"(text, text[]) FROM "service_role";

GRANT EXECUTE ON FUNCTION "api"."storage_objects_remove"(text, text[]) TO "service_role";

REVOKE ALL ON FUNCTION "api"."storage_resumable_upload"(uuid) FROM "service_role";

GRANT EXECUTE ON FUNCTION "api"."storage_resumable_upload"(uuid) TO "service_role";

REVOKE ALL ON FUNCTION "api"."storage_sign"(text, text[], integer, jsonb) FROM "service_role";

GRANT EXECUTE ON FUNCTION "api"."storage_sign"(text, text[], integer, jsonb) TO "service_role";

REVOKE ALL ON FUNCTION "api"."storage_sign_upload"(text, text, boolean) FROM "service_role";

GRANT EXECUTE ON FUNCTION "api"."storage_sign_upload"(text, text, boolean) TO "service_role";

REVOKE ALL ON FUNCTION "api"."storage_upload_begin"(text, text, boolean, bigint, text) FROM "service_role";

GRANT EXECUTE ON FUNCTION "api"."storage_upload_begin"(text, text, boolean, bigint, text) TO "service_role";

REVOKE ALL ON FUNCTION "api"."storage_upload_begin_signed"(text, text, text, bigint) FROM "service_role";

GRANT EXECUTE ON FUNCTION "api"."storage_upload_begin_signed"(text, text, text, bigint) TO "service_role";

REVOKE ALL ON FUNCTION "api"."sync_changes"(text, bigint, text) FROM PUBLIC;

GRANT EXECUTE ON FUNCTION "api"."sync_changes"(text, bigint, text) TO "authenticated";

REVOKE ALL ON FUNCTION "api"."sync_snapshot"(text, text) FROM PUBLIC;

GRANT EXECUTE ON FUNCTION "api"."sync_snapshot"(text, text) TO "authenticated";

REVOKE ALL ON FUNCTION "api"."task_delete"(uuid, text[]) FROM PUBLIC;

GRANT EXECUTE ON FUNCTION "api"."task_delete"(uuid, text[]) TO "authenticated";

REVOKE ALL ON FUNCTION "api"."task_update"(uuid, jsonb, text[]) FROM PUBLIC;

GRANT EXECUTE ON FUNCTION "api"."task_update"(uuid, jsonb, text[]) TO "authenticated";

REVOKE ALL ON FUNCTION "app"."check_if_match"(text[], timestamp with time zone, jsonb) FROM PUBLIC;

GRANT EXECUTE ON FUNCTION "app"."check_if_match"(text[], timestamp with time zone, jsonb) TO "authenticated";

REVOKE ALL ON FUNCTION "app"."iso"(timestamp with time zone) FROM "service_role";

GRANT EXECUTE ON FUNCTION "app"."iso"(timestamp with time zone) TO "service_role";

REVOKE ALL ON FUNCTION "private"."access_token_claims"(uuid) FROM PUBLIC;

REVOKE ALL ON FUNCTION "private"."app_metadata"() FROM PUBLIC;

GRANT EXECUTE ON FUNCTION "private"."app_metadata"() TO "anon", "authenticated";

REVOKE ALL ON FUNCTION "private"."check_in"(uuid, uuid, uuid, uuid, text, timestamp with time zone) FROM PUBLIC;

GRANT EXECUTE ON FUNCTION "private"."check_in"(uuid, uuid, uuid, uuid, text, timestamp with time zone) TO "authenticated";

REVOKE ALL ON FUNCTION "private"."check_in_user"(uuid, uuid, uuid, uuid, uuid, text, timestamp with time zone) FROM PUBLIC;

GRANT EXECUTE ON FUNCTION "private"."check_in_user"(uuid, uuid, uuid, uuid, uuid, text, timestamp with time zone) TO "authenticated";

REVOKE ALL ON FUNCTION "private"."checkin_device_time"(app.events, timestamp with time zone, timestamp with time zone) FROM PUBLIC;

GRANT EXECUTE ON FUNCTION "private"."checkin_device_time"(app.events, timestamp with time zone, timestamp with time zone) TO "authenticated";

REVOKE ALL ON FUNCTION "private"."connection_json"(app.connections) FROM PUBLIC;

GRANT EXECUTE ON FUNCTION "private"."connection_json"(app.connections) TO "authenticated";

REVOKE ALL ON FUNCTION "private"."email_code_queue"(uuid, text) FROM PUBLIC;

REVOKE ALL ON FUNCTION "private"."guests_prune"(interval, integer) FROM PUBLIC;

REVOKE ALL ON FUNCTION "private"."metadata_merged"(jsonb, jsonb, text) FROM PUBLIC;

REVOKE ALL ON FUNCTION "private"."profile_json"(uuid) FROM PUBLIC;

REVOKE ALL ON FUNCTION "private"."require_full_account"() FROM PUBLIC;

GRANT EXECUTE ON FUNCTION "private"."require_full_account"() TO "authenticated";

REVOKE ALL ON FUNCTION "private"."signing_key_first"(text, text, jsonb, jsonb) FROM PUBLIC;

REVOKE ALL ON FUNCTION "private"."signing_keys_usable"(integer) FROM PUBLIC;

REVOKE ALL ON FUNCTION "private"."storage_base64url"(bytea) FROM "authenticated";

GRANT EXECUTE ON FUNCTION "private"."storage_base64url"(bytea) TO "authenticated";

REVOKE ALL ON FUNCTION "private"."storage_base64url"(bytea) FROM "service_role";

GRANT EXECUTE ON FUNCTION "private"."storage_base64url"(bytea) TO "service_role";

REVOKE ALL ON FUNCTION "private"."storage_base64url_decode"(text) FROM "authenticated";

GRANT EXECUTE ON FUNCTION "private"."storage_base64url_decode"(text) TO "authenticated";

REVOKE ALL ON FUNCTION "private"."storage_base64url_decode"(text) FROM "service_role";

GRANT EXECUTE ON FUNCTION "private"."storage_base64url_decode"(text) TO "service_role";

REVOKE ALL ON FUNCTION "private"."storage_bucket"(text) FROM "service_role";

GRANT EXECUTE ON FUNCTION "private"."storage_bucket"(text) TO "service_role";

REVOKE ALL ON FUNCTION "private"."storage_bucket_limits_check"(bigint, text[], boolean) FROM PUBLIC;

REVOKE ALL ON FUNCTION "private"."storage_builtin_buckets"() FROM PUBLIC;

REVOKE ALL ON FUNCTION "private"."storage_check_name"(text) FROM "service_role";

GRANT EXECUTE ON FUNCTION "private"."storage_check_name"(text) TO "service_role";

REVOKE ALL ON FUNCTION "private"."storage_default_size_limit"() FROM PUBLIC;

REVOKE ALL ON FUNCTION "private"."storage_folder_owned"(text, text, uuid) FROM "service_role";

GRANT EXECUTE ON FUNCTION "private"."storage_folder_owned"(text, text, uuid) TO "service_role";

REVOKE ALL ON FUNCTION "private"."storage_object_json"(app.storage_objects) FROM "service_role";

GRANT EXECUTE ON FUNCTION "private"."storage_object_json"(app.storage_objects) TO "service_role";

REVOKE ALL ON FUNCTION "private"."storage_object_metadata"(app.storage_objects) FROM "service_role";

GRANT EXECUTE ON FUNCTION "private"."storage_object_metadata"(app.storage_objects) TO "service_role";

REVOKE ALL ON FUNCTION "private"."storage_operator"() FROM PUBLIC;

GRANT EXECUTE ON FUNCTION "private"."storage_operator"() TO "authenticated";

GRANT EXECUTE ON FUNCTION "private"."storage_operator"() TO "service_role";

REVOKE ALL ON FUNCTION "private"."storage_operator_only"() FROM PUBLIC;

REVOKE ALL ON FUNCTION "private"."sync_audience"(text, bigint, bigint, uuid[]) FROM PUBLIC;

REVOKE ALL ON FUNCTION "private"."sync_community_events"(uuid[]) FROM PUBLIC;

GRANT EXECUTE ON FUNCTION "private"."sync_community_events"(uuid[]) TO "authenticated";

REVOKE ALL ON FUNCTION "private"."sync_log"(text, bigint, bigint) FROM PUBLIC;

GRANT EXECUTE ON FUNCTION "private"."sync_log"(text, bigint, bigint) TO "authenticated";

REVOKE ALL ON FUNCTION "private"."sync_rows"(text, text) FROM PUBLIC;

GRANT EXECUTE ON FUNCTION "private"."sync_rows"(text, text) TO "authenticated";

REVOKE ALL ON FUNCTION "private"."sync_was_member"(uuid, uuid[], uuid[]) FROM PUBLIC;

GRANT EXECUTE ON FUNCTION "private"."sync_was_member"(uuid, uuid[], uuid[]) TO "authenticated";

REVOKE ALL ON FUNCTION "private"."synced_events_of"(uuid) FROM PUBLIC;

GRANT EXECUTE ON FUNCTION "private"."synced_events_of"(uuid) TO "authenticated";

REVOKE ALL ON FUNCTION "private"."task_json"(app.tasks) FROM PUBLIC;

GRANT EXECUTE ON FUNCTION "private"."task_json"(app.tasks) TO "authenticated";

REVOKE ALL ON FUNCTION "private"."tg_signing_keys__notify_changed"() FROM PUBLIC;

REVOKE ALL ON FUNCTION "private"."tg_sync__log_change"() FROM PUBLIC;

REVOKE ALL ON FUNCTION "private"."user_metadata_merge"(uuid, jsonb) FROM PUBLIC;

REVOKE ALL ON SCHEMA "private" FROM "service_role";

GRANT USAGE ON SCHEMA "private" TO "service_role";

REVOKE ALL ("device_checked_in_at") ON TABLE "app"."checkins" FROM "authenticated";

GRANT INSERT ("device_checked_in_at") ON TABLE "app"."checkins" TO "authenticated";

REVOKE ALL ("bucket_id") ON TABLE "app"."storage_objects" FROM "service_role";

GRANT UPDATE ("bucket_id") ON TABLE "app"."storage_objects" TO "service_role";

REVOKE ALL ("name") ON TABLE "app"."storage_objects" FROM "service_role";

GRANT UPDATE ("name") ON TABLE "app"."storage_objects" TO "service_role";

REVOKE ALL ON TABLE "app"."storage_objects" FROM "service_role";

GRANT UPDATE (bucket_id), UPDATE (name) ON TABLE app.storage_objects TO service_role;

GRANT DELETE, SELECT ON TABLE "app"."storage_objects" TO "service_role";

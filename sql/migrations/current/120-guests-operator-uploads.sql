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

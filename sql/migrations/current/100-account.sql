--------------------------------------------------------------------------------
-- An account its owner controls: delete it (in the app, on the web, by an
-- operator), export it, change its e-mail and password, see and end its
-- sessions. The rules are in sql/areas/account.sql; these are its tables and
-- the changes of other tables it needs.
--
-- Re-runnable (graphile-migrate applies current/ again on every change):
-- `if not exists`, and constraints dropped before they are added.
--------------------------------------------------------------------------------

-- Sessions show where and with what they were last used (the sign-in or the
-- refresh that made each refresh token).
alter table identity.refresh_tokens add column if not exists user_agent text;
alter table identity.refresh_tokens add column if not exists ip text;

-- A deleted account's sessions stay ended: their refresh tokens lose the
-- account (user_id null, user agent and address cleared), not their
-- revocation, so private.session_ended keeps refusing their access tokens
-- until private.sessions_prune removes them (two days after the newest, when
-- every access token of them has expired).
-- Safe: no client reads identity.refresh_tokens (only the service's own functions, which allow a null user).
-- squawk-ignore ban-drop-not-null
alter table identity.refresh_tokens alter column user_id drop not null;
-- The same key, another action: every row satisfied it a statement ago, so it
-- is not validated again (a scan of the table under the migration's lock, which
-- every request's session check would wait for); new rows are checked.
alter table identity.refresh_tokens drop constraint if exists refresh_tokens_user_id_fkey;
alter table identity.refresh_tokens add constraint refresh_tokens_user_id_fkey
  foreign key (user_id) references identity.users (id) on delete set null not valid;

-- A signed-in user's password checks (before deleting the account, changing
-- its e-mail or its password) are sign-in attempts of their own door.
alter table private.password_attempts drop constraint if exists password_attempts_door_check;
-- Safe: private.password_attempts holds attempts of the last hour at most (60 s each, forgotten after); the validating scan is short.
-- squawk-ignore constraint-missing-not-valid
alter table private.password_attempts add constraint password_attempts_door_check
  check (door in ('login', 'oauth_consent', 'reauthenticate'));

-- What a right password at the reauthenticate door gives: a single-use proof,
-- valid 60 seconds, that the account's functions consume.
create table if not exists identity.reauthentications (
  proof_hash  bytea primary key constraint reauthentications_proof_hash_check check (octet_length(proof_hash) = 32),
  user_id     uuid not null references identity.users (id) on delete cascade,
  created_at  timestamptz not null default now(),
  expires_at  timestamptz not null
);
create index if not exists reauthentications_user_idx on identity.reauthentications (user_id);

-- E-mailed links of an account: delete it (1 hour), confirm a new e-mail
-- address (24 hours). Single-use, stored as SHA-256; a newer link of a
-- purpose voids the user's older ones of it.
create table if not exists identity.account_links (
  id          bigint generated always as identity primary key,
  token_hash  bytea not null constraint account_links_token_hash_key unique,
  user_id     uuid not null references identity.users (id) on delete cascade,
  purpose     text not null constraint account_links_purpose_check check (purpose in ('delete_account', 'email_change')),
  new_email   text constraint account_links_new_email_check check (new_email = lower(btrim(new_email)) and length(new_email) <= 320),
  created_at  timestamptz not null default now(),
  expires_at  timestamptz not null,
  used_at     timestamptz,
  constraint account_links_email_change_has_email check ((purpose = 'email_change') = (new_email is not null))
);
create index if not exists account_links_user_idx on identity.account_links (user_id, purpose, created_at);

-- Exports of an account's data, counted per user (private.account_export_take).
create table if not exists private.account_exports (
  user_id      uuid not null references identity.users (id) on delete cascade,
  exported_at  timestamptz not null default now()
);
create index if not exists account_exports_user_idx on private.account_exports (user_id, exported_at);

-- Integrators learn of a deleted account: webhook event member.deleted.
alter table app.webhook_endpoints drop constraint if exists webhook_endpoints_events_check;
-- Safe: a community has at most 20 endpoints (api.webhook_create); the validating scan is short.
-- squawk-ignore constraint-missing-not-valid
alter table app.webhook_endpoints add constraint webhook_endpoints_events_check
  check (cardinality(events) between 1 and 8
         and events <@ array['event.created', 'event.updated', 'event.deleted', 'attendee.registered',
                             'checkin.created', 'member.joined', 'member.left', 'member.deleted']);

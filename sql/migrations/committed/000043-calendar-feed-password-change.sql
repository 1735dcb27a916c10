--! Previous: sha1:3fb58b9f3c826c66daf1fbec54a11ca440c5af8f
--! Hash: sha1:a3c0496cdc1636f9e2ce3afbf52506968dc822c7
--! Message: calendar-feed-password-change

--! split: 1-current.sql
-- Enter migration here

--! split: 530-calendar-feed-password-change.sql
--------------------------------------------------------------------------------
-- The personal calendar feed ends on a real password change only.
--
-- A trigger deleted the account's feed on any change of
-- identity.users.password_hash. Since passwords are hashed in the processes,
-- a sign-in re-hashes a hash below BCRYPT_COST (private.password_attempt_finish):
-- raising BCRYPT_COST ended every subscriber's feed at their next sign-in,
-- without them knowing.
--
-- The feed URL is a credential of the account, so it now ends with the
-- others, in private.end_credentials: what a password set through a
-- set-password link (api.auth_set_password: a reset, or the first password
-- of an invited account) ends. A re-hash changes the hash, not the password,
-- and ends nothing.
--------------------------------------------------------------------------------

drop trigger if exists _500_end_calendar_feed on identity.users;
drop function if exists private.tg_users__end_calendar_feed();

create or replace function private.end_credentials(user_id uuid) returns void
  language plpgsql
  set search_path = pg_catalog
  as $$
begin
  -- Sessions (refresh tokens; their access tokens fail with session_ended, their streams close).
  update identity.refresh_tokens r set revoked_at = now(), revoked_reason = 'logout'
   where r.user_id = end_credentials.user_id and r.revoked_at is null;
  -- API tokens (deactivated: listed with active false; their streams close).
  update app.api_tokens t set active = false
   where t.user_id = end_credentials.user_id and t.active;
  -- OAuth grants: access and refresh tokens, and codes not exchanged yet.
  update identity.oauth_tokens o set revoked_at = now()
   where o.user_id = end_credentials.user_id and o.revoked_at is null;
  delete from identity.oauth_codes c
   where c.user_id = end_credentials.user_id and c.used_at is null;
  -- MCP sessions.
  update private.mcp_sessions s set ended_at = now()
   where s.user_id = end_credentials.user_id and s.ended_at is null;
  -- The personal calendar feed URL.
  delete from app.calendar_feeds f where f.user_id = end_credentials.user_id;
end;
$$;
comment on function private.end_credentials(uuid) is
  'Ends every credential of a user: sessions, API tokens, OAuth tokens and pending codes, MCP sessions, the calendar feed URL (a password set through a set-password link calls it; a re-hash at sign-in does not).';

-- Made by `npm run db -- areas --diff` from sql/areas/auth.sql: the statements that make
-- the migrated database what that file states. Each run writes it again:
-- edit the area file, not this one. Table changes go in a file of this
-- folder numbered below 900.

-- Bodies are checked once every function exists (the check validated them all).
set local check_function_bodies = off;

CREATE OR REPLACE FUNCTION api.auth_recovery_password_set(password_hash text)
 RETURNS jsonb
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog'
AS $function$
declare
  me uuid := private.account_caller();
  current_session uuid := private.account_session();
begin
  if not private.password_hash_valid(auth_recovery_password_set.password_hash) then
    raise exception 'password_hash must be a bcrypt hash of cost 10 or more' using errcode = 'PT400', hint = 'invalid_password_hash';
  end if;
  delete from identity.recovery_sessions s
   where s.session_id = current_session and s.user_id = me and s.expires_at > now();
  if not found then
    raise exception 'Current password required when setting new password.' using errcode = 'PT400', hint = 'current_password_required';
  end if;
  update identity.users u set password_hash = auth_recovery_password_set.password_hash, updated_at = now() where u.id = me;
  -- As a password change: every other session ends; this one stays. Signed storage URLs end.
  update identity.refresh_tokens r set revoked_at = now(), revoked_reason = 'logout'
   where r.user_id = me and r.revoked_at is null and r.session_id <> current_session;
  perform private.storage_signed_urls_end(me);
  return private.auth_user_object(me);
end;
$function$;

CREATE OR REPLACE FUNCTION api.auth_recovery_verify(token text, user_agent text DEFAULT NULL::text, client_ip text DEFAULT NULL::text)
 RETURNS TABLE(user_id uuid, email text, refresh_token text, session_id uuid)
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog'
AS $function$
declare
  link identity.password_tokens := private.password_link(auth_recovery_verify.token, true);
  started record;
begin
  update identity.password_tokens t set used_at = now() where t.user_id = link.user_id and t.used_at is null;
  -- Whoever held the account before holds nothing of it now (as a set-password link does).
  perform private.end_credentials(link.user_id);
  -- The person has claimed the account: the agent that created it no longer owns it; it joins what it was handed to.
  perform private.agent_member_claim(link.user_id);
  select * into started from private.start_session(link.user_id, auth_recovery_verify.user_agent, auth_recovery_verify.client_ip);
  delete from identity.recovery_sessions s where s.user_id = link.user_id;
  insert into identity.recovery_sessions (session_id, user_id, expires_at) values (started.session_id, link.user_id, now() + interval '1 hour');
  return query select u.id, u.email, started.refresh_token, started.session_id from identity.users u where u.id = link.user_id;
end;
$function$;

CREATE OR REPLACE FUNCTION private.end_credentials(user_id uuid)
 RETURNS void
 LANGUAGE plpgsql
 SET search_path TO 'pg_catalog'
AS $function$
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
  -- Signed URLs of storage objects the user made.
  perform private.storage_signed_urls_end(end_credentials.user_id);
end;
$function$;

set local check_function_bodies to default;

comment on function api.auth_recovery_password_set(text) is 'PUT /auth/v1/user {password} without the current password: allowed once, within the hour, in a session a recovery link started (api.auth_recovery_verify); sets the bcrypt hash the gateway made and ends every other session and every signed storage URL. PT400 current_password_required in any other session; PT400 invalid_password_hash.';

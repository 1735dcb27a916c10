-- Made by `npm run db -- areas --diff` from sql/areas/auth.sql: the statements that make
-- the migrated database what that file states. Each run writes it again:
-- edit the area file, not this one. Table changes go in a file of this
-- folder numbered below 900.

-- Bodies are checked once every function exists (the check validated them all).
set local check_function_bodies = off;

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
  insert into app.storage_usage as u (user_id, signed_urls_valid_after) values (end_credentials.user_id, now())
    on conflict on constraint storage_usage_pkey do update set signed_urls_valid_after = now();
end;
$function$;

CREATE OR REPLACE FUNCTION private.tg_users__storage_purge()
 RETURNS trigger
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog'
AS $function$
begin
  perform private.storage_purge_enqueue('user', old.id);
  return null;
end;
$function$;

set local check_function_bodies to default;

drop trigger if exists _900_storage_purge on identity.users;
CREATE TRIGGER _900_storage_purge AFTER DELETE ON identity.users FOR EACH ROW EXECUTE FUNCTION private.tg_users__storage_purge();

comment on function private.end_credentials(uuid) is 'Ends every credential of a user: sessions, API tokens, OAuth tokens and pending codes, MCP sessions, the calendar feed URL, signed storage URLs (a password set through a set-password link calls it; a re-hash at sign-in does not).';

comment on function private.tg_users__storage_purge() is 'Trigger: an account deleted, the objects of its storage folder are deleted by a storage_purge job.';

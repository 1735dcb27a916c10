-- Made by `npm run db -- areas --diff` from sql/areas/account.sql: the statements that make
-- the migrated database what that file states. Each run writes it again:
-- edit the area file, not this one. Table changes go in a file of this
-- folder numbered below 900.

-- Bodies are checked once every function exists (the check validated them all).
set local check_function_bodies = off;

CREATE OR REPLACE FUNCTION api.account_sign_out(scope text)
 RETURNS jsonb
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog'
AS $function$
declare
  me uuid := private.account_caller();
  current_session uuid := private.account_session();
  ended integer;
begin
  if account_sign_out.scope not in ('global', 'local', 'others') then
    raise exception 'scope must be global, local or others' using errcode = 'PT422', hint = 'validation_error';
  end if;
  with gone as (
    update identity.refresh_tokens r set revoked_at = now(), revoked_reason = 'logout'
     where r.user_id = me and r.revoked_at is null
       and case account_sign_out.scope when 'global' then true
                                       when 'local' then r.session_id = current_session
                                       else r.session_id <> current_session end
    returning r.session_id)
  select count(distinct g.session_id) into ended from gone g;
  return jsonb_build_object('sessions_ended', ended);
end;
$function$;

set local check_function_bodies to default;

grant execute on function api.account_sign_out(text) to authenticated;

comment on function api.account_sign_out(text) is 'POST /auth/v1/logout?scope=: ends the calling session (local), every session of the caller (global) or all but the calling one (others): their refresh tokens, access tokens and streams at once; returns how many. PT422 validation_error for another scope; PT403 forbidden for an API token or an agent.';

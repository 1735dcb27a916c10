-- Made by `npm run db -- areas --diff` from sql/areas/admin.sql: the statements that make
-- the migrated database what that file states. Each run writes it again:
-- edit the area file, not this one. Table changes go in a file of this
-- folder numbered below 900.

-- Bodies are checked once every function exists (the check validated them all).
set local check_function_bodies = off;

CREATE OR REPLACE FUNCTION admin.delete_user(email text)
 RETURNS jsonb
 LANGUAGE plpgsql
 SET search_path TO 'pg_catalog'
AS $function$
declare
  account_id uuid;
begin
  select u.id into account_id from identity.users u where u.email = lower(btrim(delete_user.email));
  if account_id is null then
    raise exception 'no user with email %', email using errcode = 'P0002';
  end if;
  return private.account_delete(account_id);
end;
$function$;

set local check_function_bodies to default;

comment on function admin.delete_user(text) is 'Deletes the account with this e-mail and everything of the person, as its owner deleting it does (private.account_delete): refused (PT409 last_manager_of_communities) while it is the only manager of a community. Returns user_id, node_id, communities_left.';

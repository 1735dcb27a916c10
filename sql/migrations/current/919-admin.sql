-- Made by `npm run db -- areas --diff` from sql/areas/admin.sql: the statements that make
-- the migrated database what that file states. Each run writes it again:
-- edit the area file, not this one. Table changes go in a file of this
-- folder numbered below 900.

-- Bodies are checked once every function exists (the check validated them all).
set local check_function_bodies = off;

CREATE OR REPLACE FUNCTION admin.user_delete(user_id uuid)
 RETURNS jsonb
 LANGUAGE plpgsql
 SET search_path TO 'pg_catalog'
AS $function$
begin
  if not exists (select from identity.users u where u.id = user_delete.user_id) then
    raise exception 'User not found' using errcode = 'PT404', hint = 'not_found';
  end if;
  return private.account_delete(user_delete.user_id);
end;
$function$;

CREATE OR REPLACE FUNCTION admin.user_get(user_id uuid)
 RETURNS jsonb
 LANGUAGE plpgsql
 STABLE
 SET search_path TO 'pg_catalog'
AS $function$
begin
  if not exists (select from identity.users u where u.id = user_get.user_id) then
    raise exception 'User not found' using errcode = 'PT404', hint = 'not_found';
  end if;
  return private.auth_user_object(user_get.user_id);
end;
$function$;

CREATE OR REPLACE FUNCTION admin.users_list(page integer, per_page integer)
 RETURNS jsonb
 LANGUAGE plpgsql
 STABLE
 SET search_path TO 'pg_catalog'
AS $function$
begin
  if users_list.page < 1 or users_list.per_page < 1 or users_list.per_page > 1000 then
    raise exception 'page must be 1 or more and per_page 1 to 1000' using errcode = 'PT400', hint = 'validation_error';
  end if;
  return jsonb_build_object(
    'users', coalesce((
      select jsonb_agg(private.auth_user_object(u.id) order by u.created_at, u.id)
        from (select x.id, x.created_at from identity.users x
               order by x.created_at, x.id
               offset (users_list.page - 1)::bigint * users_list.per_page limit users_list.per_page) u), '[]'::jsonb),
    'total', (select count(*) from identity.users));
end;
$function$;

set local check_function_bodies to default;

comment on function admin.user_delete(uuid) is 'DELETE /auth/v1/admin/users/{id} (the service-role key): deletes the account as admin.delete_user does (private.account_delete: refused, PT409 last_manager_of_communities, while it is the only manager of a community). PT404 not_found for an unknown id.';

comment on function admin.user_get(uuid) is 'GET /auth/v1/admin/users/{id} (the service-role key): the account as Supabase Auth''s User object (private.auth_user_object). PT404 not_found for an unknown id.';

comment on function admin.users_list(integer,integer) is 'GET /auth/v1/admin/users (the service-role key): a page of the accounts as Supabase Auth''s User objects, oldest first, and how many there are (total). PT400 validation_error for a page below 1 or per_page outside 1-1000.';

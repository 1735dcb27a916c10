-- Made by `npm run db -- areas --diff` from sql/areas/auth.sql: the statements that make
-- the migrated database what that file states. Each run writes it again:
-- edit the area file, not this one. Table changes go in a file of this
-- folder numbered below 900.

-- Bodies are checked once every function exists (the check validated them all).
set local check_function_bodies = off;

CREATE OR REPLACE FUNCTION api.auth_user_metadata_update(data jsonb)
 RETURNS jsonb
 LANGUAGE plpgsql
 SECURITY DEFINER
 SET search_path TO 'pg_catalog'
AS $function$
declare
  me uuid := private.account_caller();
begin
  perform private.user_metadata_merge(me, auth_user_metadata_update.data);
  return private.auth_user_object(me);
end;
$function$;

CREATE OR REPLACE FUNCTION private.user_metadata_merge(user_id uuid, data jsonb)
 RETURNS void
 LANGUAGE plpgsql
 SET search_path TO 'pg_catalog'
AS $function$
declare
  merged jsonb;
begin
  if jsonb_typeof(user_metadata_merge.data) is distinct from 'object' then
    raise exception 'data must be a JSON object' using errcode = 'PT422', hint = 'validation_error';
  end if;
  -- Supabase Auth's merge: each key given replaces its value; a key given as null is removed.
  select u.user_metadata || user_metadata_merge.data into merged
    from identity.users u where u.id = user_metadata_merge.user_id;
  merged := (select coalesce(jsonb_object_agg(e.key, e.value), '{}'::jsonb)
               from jsonb_each(merged) e where e.value <> 'null'::jsonb);
  if octet_length(merged::text) > 16384 then
    raise exception 'user_metadata may hold at most 16 KB' using errcode = 'PT422', hint = 'validation_error';
  end if;
  update identity.users u set user_metadata = merged, updated_at = now() where u.id = user_metadata_merge.user_id;
end;
$function$;

set local check_function_bodies to default;

comment on function private.user_metadata_merge(uuid,jsonb) is 'Merges data into a user''s user_metadata as Supabase Auth does (each key given replaces its value, a key given as null is removed; at most 16 KB, else PT422 validation_error; data not an object: PT422). The one merge of PUT /auth/v1/user and the admin user functions.';

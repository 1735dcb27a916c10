--! Previous: sha1:9106ed77cf4ae2b86a1aa152662df81d56a8f20b
--! Hash: sha1:9a693c1e4dc5e74241d7af4b9fdac8dc0ca4eac5
--! Message: supabase-auth-admin-create-update

--! split: 901-auth.sql
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

--! split: 919-admin.sql
-- Made by `npm run db -- areas --diff` from sql/areas/admin.sql: the statements that make
-- the migrated database what that file states. Each run writes it again:
-- edit the area file, not this one. Table changes go in a file of this
-- folder numbered below 900.

-- Bodies are checked once every function exists (the check validated them all).
set local check_function_bodies = off;

CREATE OR REPLACE FUNCTION admin.user_create(email text, password_hash text DEFAULT NULL::text, user_metadata jsonb DEFAULT NULL::jsonb)
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
  return private.auth_user_object(new_user);
end;
$function$;

CREATE OR REPLACE FUNCTION admin.user_update(user_id uuid, email text DEFAULT NULL::text, password_hash text DEFAULT NULL::text, user_metadata jsonb DEFAULT NULL::jsonb)
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
    -- As Supabase Auth does when an operator sets a password: every session of the account ends.
    update identity.refresh_tokens r set revoked_at = now(), revoked_reason = 'logout'
     where r.user_id = user_update.user_id and r.revoked_at is null;
  end if;
  if user_update.user_metadata is not null then
    perform private.user_metadata_merge(user_update.user_id, user_update.user_metadata);
  end if;
  return private.auth_user_object(user_update.user_id);
end;
$function$;

set local check_function_bodies to default;

comment on function admin.user_create(text,text,jsonb) is 'POST /auth/v1/admin/users (the service-role key): creates an account as registration does (private.create_account_with_hash: profile and node; password_hash a bcrypt hash the gateway made, or null for an account that signs in only through a set-password link), merges user_metadata, and answers the User object. PT400 invalid_email / invalid_password_hash, PT409 email_taken, PT422 validation_error for user_metadata.';

comment on function admin.user_update(uuid,text,text,jsonb) is 'PUT /auth/v1/admin/users/{id} (the service-role key): every change at once or none. email becomes the account''s address at once (no link; a name derived from the old address is derived from the new one; PT400 invalid_email, PT409 email_taken); password_hash (a bcrypt hash the gateway made) replaces the password and ends every session of the account; user_metadata is merged as PUT /auth/v1/user merges it. Answers the User object; PT404 not_found for an unknown id.';

-- Made by `npm run db -- areas --diff` from sql/areas/admin.sql: the statements that make
-- the migrated database what that file states. Each run writes it again:
-- edit the area file, not this one. Table changes go in a file of this
-- folder numbered below 900.

-- Bodies are checked once every function exists (the check validated them all).
set local check_function_bodies = off;

CREATE OR REPLACE FUNCTION admin.storage_collect(due_now boolean DEFAULT false)
 RETURNS integer
 LANGUAGE plpgsql
 SET search_path TO 'pg_catalog'
AS $function$
declare
  due integer;
begin
  -- The bytes of deleted and replaced objects wait 10 minutes (collect_after),
  -- for downloads under way; due_now skips that wait and any retry back-off.
  if storage_collect.due_now then
    update app.storage_garbage g set collect_after = now() where g.collect_after > now();
  end if;
  select count(*)::integer into due from app.storage_garbage g where g.collect_after <= now();
  -- The job worker that has the byte store deletes them, now rather than at its next minute.
  perform private.enqueue_job('storage_collect', '{}'::jsonb, job_key => 'cron_storage_collect');
  return due;
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
    -- As Supabase Auth does when an operator sets a password: every session of the account ends (and its signed storage URLs).
    update identity.refresh_tokens r set revoked_at = now(), revoked_reason = 'logout'
     where r.user_id = user_update.user_id and r.revoked_at is null;
    perform private.storage_signed_urls_end(user_update.user_id);
  end if;
  if user_update.user_metadata is not null then
    perform private.user_metadata_merge(user_update.user_id, user_update.user_metadata);
  end if;
  return private.auth_user_object(user_update.user_id);
end;
$function$;

set local check_function_bodies to default;

comment on function admin.storage_collect(boolean) is 'Has a job worker collect storage garbage now (the storage_collect job, queued at once): the bytes of deleted and replaced objects, expired uploads. due_now: also the bytes still in their 10-minute grace period (collect_after) or retry back-off. Returns how many byte-store keys are due.';

comment on function admin.user_update(uuid,text,text,jsonb) is 'PUT /auth/v1/admin/users/{id} (the service-role key): every change at once or none. email becomes the account''s address at once (no link; a name derived from the old address is derived from the new one; PT400 invalid_email, PT409 email_taken); password_hash (a bcrypt hash the gateway made) replaces the password and ends every session of the account and its signed storage URLs; user_metadata is merged as PUT /auth/v1/user merges it. Answers the User object; PT404 not_found for an unknown id.';

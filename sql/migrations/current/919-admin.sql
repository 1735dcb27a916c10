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

set local check_function_bodies to default;

comment on function admin.storage_collect(boolean) is 'Has a job worker collect storage garbage now (the storage_collect job, queued at once): the bytes of deleted and replaced objects, expired uploads. due_now: also the bytes still in their 10-minute grace period (collect_after) or retry back-off. Returns how many byte-store keys are due.';

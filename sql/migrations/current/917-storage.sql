-- Made by `npm run db -- areas --diff` from sql/areas/storage.sql: the statements that make
-- the migrated database what that file states. Each run writes it again:
-- edit the area file, not this one. Table changes go in a file of this
-- folder numbered below 900.

-- Bodies are checked once every function exists (the check validated them all).
set local check_function_bodies = off;

CREATE OR REPLACE FUNCTION private.storage_backup_lock_id()
 RETURNS bigint
 LANGUAGE sql
 IMMUTABLE
 SET search_path TO 'pg_catalog'
AS $function$
    select 4871232390914563012::bigint
  $function$;

CREATE OR REPLACE FUNCTION private.storage_garbage_take(max_rows integer DEFAULT 200)
 RETURNS TABLE(storage_key text)
 LANGUAGE sql
 SET search_path TO 'pg_catalog'
AS $function$
    -- A key an object uses again (a finish whose answer was lost) is not garbage.
    with used as (
      delete from app.storage_garbage g
       where g.collect_after <= now() and exists (select from app.storage_objects o where o.storage_key = g.storage_key)
    ), due as (
      -- Nothing while a backup copies the stored files (private.storage_backup_lock_id).
      select g.storage_key from app.storage_garbage g
       where (select pg_try_advisory_xact_lock_shared(private.storage_backup_lock_id()))
         and g.collect_after <= now()
         and not exists (select from app.storage_objects o where o.storage_key = g.storage_key)
       order by g.collect_after
       limit storage_garbage_take.max_rows
       for update skip locked
    )
    update app.storage_garbage g
       set attempts = g.attempts + 1,
           collect_after = now() + least(interval '1 hour', interval '1 minute' * power(2, g.attempts))
      from due d where g.storage_key = d.storage_key
    returning g.storage_key
  $function$;

set local check_function_bodies to default;

comment on function private.storage_backup_lock_id() is 'The advisory lock a backup (npm run admin -- backup) holds, in its session, from before its dump''s snapshot until it has copied the files the dump lists: private.storage_garbage_take takes no key meanwhile, so no byte of an object the dump lists is deleted before it is copied.';

comment on function private.storage_garbage_take(integer) is 'A batch of byte-store keys to delete (the storage_collect job), each put off with back-off in case the job dies; private.storage_garbage_done forgets them once deleted. None while a backup holds private.storage_backup_lock_id.';

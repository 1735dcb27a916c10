--! Previous: sha1:9a693c1e4dc5e74241d7af4b9fdac8dc0ca4eac5
--! Hash: sha1:61a93f22a16f77acdb8b3aae0448a13a2aadb7cd
--! Message: jobs-carry-traceparent

--! split: 918-jobs.sql
-- Made by `npm run db -- areas --diff` from sql/areas/jobs.sql: the statements that make
-- the migrated database what that file states. Each run writes it again:
-- edit the area file, not this one. Table changes go in a file of this
-- folder numbered below 900.

-- Bodies are checked once every function exists (the check validated them all).
set local check_function_bodies = off;

CREATE OR REPLACE FUNCTION private.enqueue_job(task text, payload jsonb, queue_name text DEFAULT NULL::text, run_at timestamp with time zone DEFAULT NULL::timestamp with time zone, max_attempts integer DEFAULT NULL::integer, job_key text DEFAULT NULL::text, job_key_mode text DEFAULT 'replace'::text)
 RETURNS bigint
 LANGUAGE plpgsql
 SET search_path TO 'pg_catalog'
AS $function$
declare
  keyed bigint;
  added bigint;
  traceparent text;
begin
  if to_regnamespace('graphile_worker') is null then
    raise exception 'the job queue is not installed (schema graphile_worker): start the gateway or `npm run worker` once'
      using errcode = '55000';
  end if;
  if enqueue_job.job_key is not null then
    select j.id into keyed from graphile_worker._private_jobs j where j.key = enqueue_job.job_key;
  end if;
  -- The trace of the request that queues the job (the gateway sets
  -- request.traceparent, transaction-local; a W3C traceparent or nothing):
  -- kept in the payload under `traceparent`, which the tasks ignore; the
  -- worker starts the job's span as its child.
  traceparent := nullif(current_setting('request.traceparent', true), '');
  if traceparent ~ '^00-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}$' and jsonb_typeof(enqueue_job.payload) = 'object' then
    enqueue_job.payload := enqueue_job.payload || jsonb_build_object('traceparent', traceparent);
  end if;
  added := (graphile_worker.add_job(
    identifier => enqueue_job.task,
    payload => enqueue_job.payload::json,
    queue_name => enqueue_job.queue_name,
    run_at => enqueue_job.run_at,
    max_attempts => enqueue_job.max_attempts,
    job_key => enqueue_job.job_key,
    job_key_mode => enqueue_job.job_key_mode)).id;
  -- add_job replaced a job that is running (it cleared its key and took its
  -- last attempt) and dated that now(), when this transaction began, which
  -- may be before a worker locked the job: date it now instead, after the
  -- lock, so that jobs_recover knows it was replaced while it ran.
  if keyed is not null then
    update graphile_worker._private_jobs j
       set updated_at = clock_timestamp()
     where j.id = keyed and j.key is null and j.locked_at is not null;
  end if;
  return added;
end;
$function$;

set local check_function_bodies to default;

comment on function private.enqueue_job(text,jsonb,text,timestamp with time zone,integer,text,text) is 'Adds a graphile-worker job in the current transaction (it exists only if the transaction commits). queue_name: jobs of one queue run one at a time; job_key: a later job with the same key replaces a pending one (job_key_mode replace, or preserve_run_at to keep its time); one running is left to finish without another attempt, dated at the replacement so that jobs_recover gives it back its attempt if its worker dies. The payload gains `traceparent` (the W3C trace context of the request that queues the job, from the transaction-local request.traceparent the gateway sets), which the tasks ignore and the worker continues. Returns the job id.';

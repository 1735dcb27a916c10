-- =============================================================================
-- Background jobs on graphile-worker
-- =============================================================================
-- Background work runs on graphile-worker (its own schema, graphile_worker,
-- installed before the migrations). Jobs are added by SQL in the transaction of
-- the change that causes them (private.enqueue_job), so a job exists exactly
-- when its change committed. A worker that died (a lost connection named
-- `job-worker <pool id>`) has its jobs freed within a minute
-- (private.jobs_recover), so an interrupted job runs again. Each area's prune
-- function lives with its area.
--
-- Code: gateway/jobs/worker.ts, gateway/core/database/job-queue.ts
-- pgTAP: supabase/tests/jobs.test.sql
--
-- The whole source of this area, after the areas before it in
-- sql/areas/areas.json: types, tables, indexes, triggers, policies, the api
-- functions, the helpers. To change it: edit it here, then
-- `npm run db -- areas --diff` writes the migration (docs/dba.md).
-- =============================================================================

-- =============================================================================
-- Helpers (private, app, identity): internal helpers and trigger functions; request roles run only those granted here
-- =============================================================================

CREATE FUNCTION private.enqueue_job(task text, payload jsonb, queue_name text DEFAULT NULL::text, run_at timestamp with time zone DEFAULT NULL::timestamp with time zone, max_attempts integer DEFAULT NULL::integer, job_key text DEFAULT NULL::text, job_key_mode text DEFAULT 'replace'::text) RETURNS bigint
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog'
    AS $_$
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
$_$;

COMMENT ON FUNCTION private.enqueue_job(task text, payload jsonb, queue_name text, run_at timestamp with time zone, max_attempts integer, job_key text, job_key_mode text) IS 'Adds a graphile-worker job in the current transaction (it exists only if the transaction commits). queue_name: jobs of one queue run one at a time; job_key: a later job with the same key replaces a pending one (job_key_mode replace, or preserve_run_at to keep its time); one running is left to finish without another attempt, dated at the replacement so that jobs_recover gives it back its attempt if its worker dies. The payload gains `traceparent` (the W3C trace context of the request that queues the job, from the transaction-local request.traceparent the gateway sets), which the tasks ignore and the worker continues. Returns the job id.';


CREATE FUNCTION private.jobs_recover() RETURNS text[]
    LANGUAGE plpgsql
    SET search_path TO 'pg_catalog'
    AS $$
declare
  dead text[];
begin
  if to_regnamespace('graphile_worker') is null then
    return array[]::text[];
  end if;
  select coalesce(array_agg(distinct l.locked_by), array[]::text[]) into dead
    from (select j.locked_by from graphile_worker._private_jobs j where j.locked_by is not null
          union
          select q.locked_by from graphile_worker._private_job_queues q where q.locked_by is not null) l
   where not exists (select from pg_stat_activity a
                      where a.datname = current_database() and a.application_name = 'job-worker ' || l.locked_by);
  if cardinality(dead) = 0 then
    return dead;
  end if;
  -- Replaced while running (add_job took its last attempt): the cut-off run is given back.
  update graphile_worker._private_jobs j
     set attempts = j.max_attempts - 1,
         last_error = 'its worker (' || j.locked_by || ') died while running it; run again',
         updated_at = now()
   where j.locked_by = any (dead)
     and j.key is null
     and j.attempts >= j.max_attempts
     and j.updated_at > j.locked_at;
  -- On its last attempt: it stays failed, with the reason.
  update graphile_worker._private_jobs j
     set last_error = 'its worker (' || j.locked_by || ') died while running its last attempt'
           || coalesce('; before that: ' || j.last_error, ''),
         updated_at = now()
   where j.locked_by = any (dead)
     and j.attempts >= j.max_attempts;
  perform graphile_worker.force_unlock_workers(dead);
  return dead;
end;
$$;
COMMENT ON FUNCTION private.jobs_recover() IS 'Frees the jobs and queues of workers that are gone (no connection named job-worker <pool id> any more), so they run again; a job replaced while it ran (no attempt left) gets its attempt back, and one cut off on its last attempt stays failed with the reason in last_error. Returns those pool ids.';

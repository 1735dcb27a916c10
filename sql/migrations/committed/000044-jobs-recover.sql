--! Previous: sha1:a3c0496cdc1636f9e2ce3afbf52506968dc822c7
--! Hash: sha1:5c491f28725789b48bca4a7f40ef9258d8f3987a
--! Message: jobs-recover

--! split: 100-jobs-recover.sql
--------------------------------------------------------------------------------
-- Jobs cut off by a worker's death: run again, or failed with a reason
--
-- A job whose key is added again while the job runs (a webhook endpoint's
-- job, when a delivery commits while it sends) is left to finish by
-- graphile-worker's add_job: it clears the job's key, takes its last attempt
-- (attempts = max_attempts, updated_at moved past locked_at) and adds a new
-- job with the key. Normally the running job then ends. When its worker died
-- instead (SIGKILL, a lost machine), private.jobs_recover freed it with no
-- attempt left: it never ran again and stayed failed with no error, and its
-- endpoint waited for the minute sweep (the new jobs had found the endpoint's
-- lock held by it, and ended).
--
-- Now jobs_recover, for the workers that are gone:
--   * gives such a job (key cleared, no attempt left, updated after it was
--     locked) back the attempt the replacement took: it runs again now, and
--     does what it was cut off from (a webhook job sends its endpoint's due
--     deliveries; the tasks are safe to run twice);
--   * records why on a job that was on its real last attempt when its worker
--     died (it stays failed, with that reason for `npm run admin -- jobs`);
--   * frees the rest as before (they run again, their attempt counted).
--------------------------------------------------------------------------------

create or replace function private.jobs_recover() returns text[]
  language plpgsql volatile
  set search_path = pg_catalog
  as $$
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
comment on function private.jobs_recover() is
  'Frees the jobs and queues of workers that are gone (no connection named job-worker <pool id> any more), so they run again; a job replaced while it ran (no attempt left) gets its attempt back, and one cut off on its last attempt stays failed with the reason in last_error. Returns those pool ids.';

--------------------------------------------------------------------------------
-- admin.jobs: a job locked by a worker that is gone is `orphaned`, not
-- `running` (the next worker to start, or recover_jobs within a minute, frees
-- it); the other states as before.
--------------------------------------------------------------------------------

create or replace function admin.jobs(max_rows integer default 50)
  returns table (id bigint, task text, queue text, state text, attempts integer, max_attempts integer, run_at timestamptz,
                 locked_by text, locked_at timestamptz, last_error text)
  language plpgsql stable
  set search_path = pg_catalog
  as $$
begin
  if to_regnamespace('graphile_worker') is null then
    raise exception 'the job queue is not installed (schema graphile_worker): start the gateway or `npm run worker` once'
      using errcode = '55000';
  end if;
  -- running: locked by a connected worker; orphaned: locked by a worker that
  -- is gone; failed: out of attempts; due: waiting for a free worker;
  -- scheduled: a retry or a job for later.
  return query
    select j.id::bigint, j.task_identifier::text, j.queue_name::text, s.state, j.attempts::integer, j.max_attempts::integer, j.run_at,
           j.locked_by::text, j.locked_at, left(j.last_error, 500)::text
      from graphile_worker.jobs j,
           lateral (select case when j.locked_at is not null
                                 and exists (select from pg_stat_activity a
                                              where a.datname = current_database()
                                                and a.application_name = 'job-worker ' || j.locked_by) then 'running'
                                when j.locked_at is not null then 'orphaned'
                                when j.attempts >= j.max_attempts then 'failed'
                                when j.run_at <= now() then 'due'
                                else 'scheduled' end as state) s
     order by array_position(array['running', 'orphaned', 'due', 'failed', 'scheduled'], s.state), j.run_at, j.id
     limit greatest(jobs.max_rows, 0);
end;
$$;
comment on function admin.jobs(integer) is
  'The worker''s queue (graphile_worker.jobs): running, orphaned (locked by a worker that is gone), due, failed and scheduled jobs, in that order, with attempts and last errors.';

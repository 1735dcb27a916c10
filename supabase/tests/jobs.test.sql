-- Background jobs: a job is added in the transaction of its change (and is
-- gone with it), the e-mail outbox queues one send_email job per message,
-- the prunes delete only what no rule needs any more, and the jobs of a
-- worker that died are freed (a job replaced while it ran gets its attempt
-- back; one cut off on its last attempt is failed with the reason).
begin;
select plan(25);

select tests.create_user('jobs_user');

-- Jobs live and die with their transaction ------------------------------------

-- (Counted by its key: the test gateway's worker completes other jobs meanwhile.)
savepoint before_job;
select private.enqueue_job('prune_mcp', '{}', job_key => 'tests:rolled-back');
select is((select count(*)::int from graphile_worker.jobs where key = 'tests:rolled-back'), 1,
  'enqueue_job adds a job in the current transaction');
rollback to savepoint before_job;
select is((select count(*)::int from graphile_worker.jobs where key = 'tests:rolled-back'), 0,
  'and a rolled-back transaction leaves none');

-- A job carries the trace of the request that queued it -------------------------

savepoint traced;
select set_config('request.traceparent', '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01', true);
select private.enqueue_job('prune_mcp', '{"keep": 1}', job_key => 'tests:traced');
select is((select payload::jsonb from graphile_worker._private_jobs where key = 'tests:traced'),
  '{"keep": 1, "traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}'::jsonb,
  'enqueue_job keeps the request''s traceparent in the payload, beside what the task reads');
select set_config('request.traceparent', '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"; x', true);
select private.enqueue_job('prune_mcp', '{"keep": 1}', job_key => 'tests:traced');
select is((select payload::jsonb from graphile_worker._private_jobs where key = 'tests:traced'), '{"keep": 1}'::jsonb,
  'one that is not a W3C traceparent is left out');
select set_config('request.traceparent', '', true);
select private.enqueue_job('prune_mcp', '{}', job_key => 'tests:traced');
select is((select payload::jsonb from graphile_worker._private_jobs where key = 'tests:traced'), '{}'::jsonb,
  'and without one the payload is as given');
rollback to savepoint traced;

select set_config('tests.mail', private.email_queue(tests.user_id('jobs_user'), tests.email('jobs_user'), 'test', 'Hello', 'Body')::text, true);
select is((select task_identifier || ' ' || max_attempts from graphile_worker.jobs where key = 'email:' || current_setting('tests.mail')),
  'send_email 10', 'email_queue adds the message''s send_email job (10 attempts)');
select is((select count(*)::int from private.email_outbox_begin(current_setting('tests.mail')::uuid)), 1,
  'the task finds the unsent message');
select private.email_outbox_sent(current_setting('tests.mail')::uuid);
select is((select count(*)::int from private.email_outbox_begin(current_setting('tests.mail')::uuid)), 0,
  'and nothing once it was sent (a job run twice sends once)');

-- Prunes ---------------------------------------------------------------------

insert into private.auth_failures (scope, key, failed_at)
  values ('ip', 'jobs-test-old', now() - interval '25 hours'), ('ip', 'jobs-test-new', now() - interval '23 hours');
select private.auth_failures_prune();
select is((select array_agg(key order by key) from private.auth_failures where key like 'jobs-test-%'), array['jobs-test-new'],
  'auth_failures_prune deletes failed sign-ins older than any window (a day), only those');

-- Sessions: one ended and old, one ended recently, one still usable.
insert into identity.refresh_tokens (token_hash, user_id, session_id, expires_at, created_at, revoked_at, revoked_reason)
  values (sha256('jobs-a'), tests.user_id('jobs_user'), '00000000-0000-4000-8000-00000000000a', now() + interval '20 days',
          now() - interval '10 days', now() - interval '9 days', 'logout'),
         (sha256('jobs-b'), tests.user_id('jobs_user'), '00000000-0000-4000-8000-00000000000b', now() + interval '29 days',
          now() - interval '1 hour', now() - interval '30 minutes', 'logout'),
         (sha256('jobs-c'), tests.user_id('jobs_user'), '00000000-0000-4000-8000-00000000000c', now() + interval '20 days',
          now() - interval '10 days', null, null);
select private.sessions_prune();
select is((select array_agg(right(session_id::text, 1) order by session_id) from identity.refresh_tokens
            where user_id = tests.user_id('jobs_user')),
  array['b', 'c'], 'sessions_prune deletes a session ended days ago, not one ended within the access tokens'' lifetime, nor a live one');
select ok(private.session_ended('00000000-0000-4000-8000-00000000000b'), 'the recently ended session still ends its access tokens');

-- Crashed workers --------------------------------------------------------------

select set_config('tests.job', private.enqueue_job('prune_mcp', '{}')::text, true);
update graphile_worker._private_jobs set locked_at = now(), locked_by = 'pool-gone-for-good', attempts = 1
 where id = current_setting('tests.job')::bigint;
select is((select state from admin.jobs(1000000) where id = current_setting('tests.job')::bigint), 'orphaned',
  'admin.jobs shows a job locked by a worker that is gone as orphaned, not running');
select ok('pool-gone-for-good' = any (private.jobs_recover()), 'jobs_recover names a worker without its connection');
select is((select locked_by from graphile_worker.jobs where id = current_setting('tests.job')::bigint), null,
  'and frees its job to run again');
select is((select count(*)::int from graphile_worker.jobs where id = current_setting('tests.job')::bigint and locked_by is null
            and run_at <= now()), 1, 'which is due');
select ok(not exists (select from pg_stat_activity a, unnest(private.jobs_recover()) d
                       where a.application_name = 'job-worker ' || d),
  'a worker that holds its connection is never named');

-- A job replaced while it ran: add_job cleared its key and took its last
-- attempt (updated_at after locked_at); its worker then died.
select set_config('tests.replaced', private.enqueue_job('prune_mcp', '{}', max_attempts => 5)::text, true);
update graphile_worker._private_jobs
   set locked_at = now() - interval '1 minute', locked_by = 'pool-killed', key = null, attempts = 5, updated_at = now()
 where id = current_setting('tests.replaced')::bigint;
-- A job on its real last attempt (locked after its last update) when its worker died.
select set_config('tests.last', private.enqueue_job('prune_mcp', '{}', max_attempts => 3)::text, true);
update graphile_worker._private_jobs
   set locked_at = now() - interval '1 minute', locked_by = 'pool-killed', attempts = 3, last_error = 'HTTP 500',
       updated_at = now() - interval '2 minutes'
 where id = current_setting('tests.last')::bigint;
-- A job a worker locked after the transaction that replaces it began (its
-- now() is then before locked_at): replaced while it ran all the same.
select set_config('tests.raced', private.enqueue_job('prune_mcp', '{}', max_attempts => 5, job_key => 'tests:raced')::text, true);
update graphile_worker._private_jobs set locked_at = clock_timestamp(), locked_by = 'pool-killed', attempts = 1
 where id = current_setting('tests.raced')::bigint;
select private.enqueue_job('prune_mcp', '{}', max_attempts => 5, job_key => 'tests:raced');
select is((select key is null and attempts = max_attempts and updated_at > locked_at from graphile_worker._private_jobs
            where id = current_setting('tests.raced')::bigint), true,
  'enqueue_job dates a running job it replaces after the job''s lock, though its transaction began before');
select ok('pool-killed' = any (private.jobs_recover()), 'jobs_recover names the killed worker');
select is((select attempts || '/' || max_attempts || ' ' || (locked_by is null) from graphile_worker.jobs
            where id = current_setting('tests.raced')::bigint), '4/5 true',
  'and gives the attempt back to a job replaced by a transaction that began before its worker locked it');
select is((select attempts || '/' || max_attempts || ' ' || (locked_by is null) from graphile_worker.jobs
            where id = current_setting('tests.replaced')::bigint), '4/5 true',
  'a job replaced while it ran gets back the attempt the replacement took, unlocked');
select ok((select is_available from graphile_worker._private_jobs where id = current_setting('tests.replaced')::bigint),
  'so it runs again');
select is((select last_error from graphile_worker.jobs where id = current_setting('tests.last')::bigint),
  'its worker (pool-killed) died while running its last attempt; before that: HTTP 500',
  'a job cut off on its last attempt stays failed, with the reason');
select is((select count(*)::int from graphile_worker.jobs
            where id in (current_setting('tests.replaced')::bigint, current_setting('tests.last')::bigint)
              and attempts >= max_attempts and last_error is null), 0,
  'neither is left failed without a reason');

-- Webhook deliveries left without a job -----------------------------------------

select set_config('tests.community', admin.create_community('Sweep club')::text, true);
with e as (insert into app.webhook_endpoints (community_id, url, events, secret)
             values (current_setting('tests.community')::uuid, 'https://sweep.example.test', '{event.created}', 'whsec_AAAA')
           returning id)
select set_config('tests.endpoint', e.id::text, true) from e;
insert into app.webhook_deliveries (endpoint_id, event_type, payload, next_attempt_at)
  values (current_setting('tests.endpoint')::uuid, 'event.created', '{}', now() - interval '5 minutes');
select is(private.webhook_sweep(), 1, 'webhook_sweep finds an endpoint with a delivery overdue and no job');
select is((select count(*)::int from graphile_worker.jobs where key = 'webhook:' || current_setting('tests.endpoint') and run_at <= clock_timestamp()), 1,
  'and gives it a job, due now');

select * from finish();
rollback;

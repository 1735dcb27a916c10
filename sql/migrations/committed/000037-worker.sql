--! Previous: sha1:8dbf7556920eab78e3b4e812b123de7fcee0eb2f
--! Hash: sha1:bddc47eec88d6d94fd5bf8ba5817a0912f96b7b2
--! Message: worker

--! split: 100-worker.sql
--------------------------------------------------------------------------------
-- Background work on graphile-worker
--
-- Every background job (sending an e-mail of the outbox, delivering a webhook,
-- the periodic prunes) is a graphile-worker job. Jobs are added by SQL, in
-- the transaction of the change that causes them, through
-- private.enqueue_job, so a job exists exactly when its change committed.
--
-- graphile-worker installs and migrates its own schema, `graphile_worker`.
-- The gateway (and `npm run worker`) installs it BEFORE the application
-- migrations run (gateway/jobs/queue.ts), so it exists whenever these
-- functions run. Functions that add jobs are PL/pgSQL: their bodies are
-- resolved when they run, not when they are created, so these migrations
-- apply on a database without that schema too (the schema dump, the
-- graphile-migrate shadow database, `supabase db push`); a job added there
-- before a gateway or worker ever started fails with a clear message.
--------------------------------------------------------------------------------

create or replace function private.enqueue_job(
  task text,
  payload jsonb,
  queue_name text default null,
  run_at timestamptz default null,
  max_attempts integer default null,
  job_key text default null,
  job_key_mode text default 'replace'
) returns bigint
  language plpgsql volatile
  set search_path = pg_catalog
  as $$
begin
  if to_regnamespace('graphile_worker') is null then
    raise exception 'the job queue is not installed (schema graphile_worker): start the gateway or `npm run worker` once'
      using errcode = '55000';
  end if;
  return (graphile_worker.add_job(
    identifier => enqueue_job.task,
    payload => enqueue_job.payload::json,
    queue_name => enqueue_job.queue_name,
    run_at => enqueue_job.run_at,
    max_attempts => enqueue_job.max_attempts,
    job_key => enqueue_job.job_key,
    job_key_mode => enqueue_job.job_key_mode)).id;
end;
$$;
comment on function private.enqueue_job(text, jsonb, text, timestamptz, integer, text, text) is
  'Adds a graphile-worker job in the current transaction (it exists only if the transaction commits). queue_name: jobs of one queue run one at a time; job_key: a later job with the same key replaces a pending one (job_key_mode replace, or preserve_run_at to keep its time). Returns the job id.';

--------------------------------------------------------------------------------
-- Crashed workers
--
-- graphile-worker (without Worker Pro) frees the jobs of a worker that died
-- (SIGKILL, a lost machine) only after four hours. Every worker of this
-- service holds a connection named `job-worker <its pool id>` (the id its
-- jobs are locked by) for as long as it runs; Postgres drops that connection
-- when the process dies. A worker that starts, and the crontab every minute,
-- unlock the jobs and queues held by pool ids with no such connection, so a
-- job interrupted by a crash runs again within a minute (at least once).
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
  if cardinality(dead) > 0 then
    perform graphile_worker.force_unlock_workers(dead);
  end if;
  return dead;
end;
$$;
comment on function private.jobs_recover() is
  'Unlocks the jobs and queues of workers that are gone (no connection named job-worker <pool id> any more), so they run again; returns those pool ids.';

--------------------------------------------------------------------------------
-- Settings the service records for SQL that runs outside a request
--------------------------------------------------------------------------------

create table if not exists private.service_settings (
  name       text primary key,
  value      text not null,
  updated_at timestamptz not null default now()
);
comment on table private.service_settings is
  'Settings of the running service that SQL outside a request needs (public_url: PUBLIC_URL, for the Event objects of webhook payloads). Written by the gateway at start.';
-- No grants: reached by the owner only (a listed exception of the RLS rule).

create or replace function private.service_setting_set(name text, value text) returns void
  language sql volatile
  set search_path = pg_catalog
  as $$
    insert into private.service_settings as s (name, value) values (service_setting_set.name, service_setting_set.value)
      on conflict (name) do update set value = excluded.value, updated_at = now()
      where s.value is distinct from excluded.value
  $$;
comment on function private.service_setting_set(text, text) is 'Records a setting of the running service (the gateway records public_url at start).';

create or replace function private.public_url() returns text
  language sql stable
  set search_path = pg_catalog
  as $$
    select coalesce((select s.value from private.service_settings s where s.name = 'public_url'), 'http://localhost:3000')
  $$;
comment on function private.public_url() is 'PUBLIC_URL as the gateway last recorded it (http://localhost:3000 before any gateway started).';

--------------------------------------------------------------------------------
-- The e-mail outbox: one job per message
--
-- What replaced: private.email_outbox_claim leased batches of due messages
-- (attempts + send_after as the lease, `for update skip locked`) for a
-- sender loop in every gateway woken by NOTIFY email_outbox and a 30 s timer.
-- Now queueing a message adds a `send_email` job; the worker's job lock is
-- the lease and its retries (10 attempts, exponential back-off) the timer.
--------------------------------------------------------------------------------

create or replace function private.email_queue(user_id uuid, to_email text, purpose text, subject text, body_text text,
                                               link text default null)
  returns uuid
  language plpgsql volatile
  set search_path = pg_catalog
  as $$
declare
  message_id uuid;
begin
  insert into app.email_outbox (user_id, to_email, purpose, subject, body_text, link)
    values (email_queue.user_id, email_queue.to_email, email_queue.purpose, email_queue.subject, email_queue.body_text,
            email_queue.link)
    returning id into message_id;
  perform private.enqueue_job('send_email', jsonb_build_object('id', message_id),
                              max_attempts => 10, job_key => 'email:' || message_id::text);
  return message_id;
end;
$$;
comment on function private.email_queue(uuid, text, text, text, text, text) is
  'Puts an e-mail in the outbox and adds its send_email job (sent over SMTP_URL by a worker; without SMTP it waits, readable with admin.outbox()). Returns the outbox id.';

create or replace function private.queue_password_email(user_id uuid, purpose text, public_url text)
  returns uuid
  language plpgsql volatile
  set search_path = pg_catalog
  as $$
declare
  account identity.users;
  token text := identity.new_token();
  link text;
  lifetime interval;
begin
  select * into account from identity.users u where u.id = queue_password_email.user_id;
  if account.id is null then
    raise exception 'user not found' using errcode = 'PT404', hint = 'not_found';
  end if;
  lifetime := case queue_password_email.purpose
    when 'invite' then interval '7 days'
    when 'recover' then interval '1 hour'
  end;
  if lifetime is null then
    raise exception 'unknown e-mail purpose %', queue_password_email.purpose using errcode = '22023';
  end if;

  -- Only the newest link of a user works.
  update identity.password_tokens t set used_at = now()
   where t.user_id = account.id and t.used_at is null;
  insert into identity.password_tokens (token_hash, user_id, purpose, expires_at)
    values (identity.token_hash(token), account.id, queue_password_email.purpose, now() + lifetime);

  link := rtrim(queue_password_email.public_url, '/') || '/auth/set-password?token=' || token;
  return private.email_queue(
    account.id, account.email, queue_password_email.purpose,
    case queue_password_email.purpose
      when 'invite' then 'Set your password'
      else 'Reset your password'
    end,
    case queue_password_email.purpose
      when 'invite' then
        'An account was created for ' || account.email || E'.\n\n'
        || E'Choose your password here (the link works once, for 7 days):\n' || link || E'\n\n'
        || E'Then sign in with the app.\n'
      else
        'Someone asked to reset the password of ' || account.email || E'.\n\n'
        || E'Choose a new password here (the link works once, for 1 hour):\n' || link || E'\n\n'
        || E'If it was not you, ignore this message; your password stays as it is.\n'
    end,
    link);
end;
$$;

-- The send_email task: begin (count the attempt), send, then sent or failed.
create or replace function private.email_outbox_begin(id uuid)
  returns table (id uuid, to_email text, subject text, body_text text)
  language sql volatile
  set search_path = pg_catalog
  as $$
    update app.email_outbox o set attempts = o.attempts + 1
     where o.id = email_outbox_begin.id and o.sent_at is null
    returning o.id, o.to_email, o.subject, o.body_text
  $$;
comment on function private.email_outbox_begin(uuid) is
  'The send_email task: the message to send and one more attempt counted; nothing when it was sent already.';

create or replace function private.email_outbox_failed(id uuid, error text) returns void
  language sql volatile
  set search_path = pg_catalog
  as $$
    update app.email_outbox o set last_error = left(email_outbox_failed.error, 1000)
     where o.id = email_outbox_failed.id
  $$;
comment on function private.email_outbox_failed(uuid, text) is
  'Records why a send failed (the send_email job is then retried by the worker, with back-off, 10 attempts in all).';

drop function if exists private.email_outbox_claim(integer, interval);

-- Messages queued before this migration (unsent, attempts left) get their job
-- (job_key: running this again adds nothing).
select private.enqueue_job('send_email', jsonb_build_object('id', o.id), max_attempts => 10, job_key => 'email:' || o.id::text)
  from app.email_outbox o
 where o.sent_at is null and o.attempts < 10;

--------------------------------------------------------------------------------
-- Prunes (the worker's crontab runs them: gateway/jobs/crontab.ts)
--
-- What replaced: the gateway's five-minute timer (change log), the MCP
-- process's one-minute timer (MCP sessions and counts, OAuth state, stored
-- test and tool-call records), and the 1-in-100 chance of a delete on every
-- failed sign-in (throttling counts).
--------------------------------------------------------------------------------

create or replace function private.auth_throttle_record(scope text, key text) returns void
  language plpgsql volatile
  security definer
  set search_path = pg_catalog
  as $$
begin
  -- Old failures are deleted by private.auth_failures_prune (the worker's crontab).
  insert into private.auth_failures (scope, key) values (auth_throttle_record.scope, auth_throttle_record.key);
end;
$$;

create or replace function private.auth_failures_prune(batch integer default 10000) returns integer
  language plpgsql volatile
  set search_path = pg_catalog
  as $$
declare
  gone integer;
begin
  -- LOGIN_FAILURE_WINDOW_SECONDS is at most a day: older failures count nowhere.
  delete from private.auth_failures f
   where f.ctid = any (array(select a.ctid from private.auth_failures a
                              where a.failed_at < now() - interval '1 day'
                              limit auth_failures_prune.batch));
  get diagnostics gone = row_count;
  return gone;
end;
$$;
comment on function private.auth_failures_prune(integer) is
  'Deletes failed sign-in counts older than any throttling window (a day), at most `batch` a call; returns how many. The worker runs it every 10 minutes.';

create or replace function private.sessions_prune(batch integer default 1000) returns integer
  language plpgsql volatile
  set search_path = pg_catalog
  as $$
declare
  gone integer;
begin
  -- A session (a refresh-token family) with no usable token left (every token
  -- rotated, revoked or expired) whose newest token is more than two days old:
  -- its access tokens (at most ACCESS_TOKEN_TTL, a day at most, after the
  -- newest refresh) have all expired, so nothing asks private.session_ended
  -- about it any more.
  with ended as (
    select t.session_id
      from identity.refresh_tokens t
     group by t.session_id
    having bool_and(t.revoked_at is not null or t.expires_at <= now())
       and max(t.created_at) < now() - interval '2 days'
     limit sessions_prune.batch)
  delete from identity.refresh_tokens t using ended e where t.session_id = e.session_id;
  get diagnostics gone = row_count;
  return gone;
end;
$$;
comment on function private.sessions_prune(integer) is
  'Deletes the refresh tokens of ended sessions (no usable token, newest older than two days), at most `batch` sessions a call; returns how many tokens. The worker runs it hourly.';

-- Idempotency-Key records and event tombstones are pruned by their own
-- functions (migrations 000033, 000034) from lines in gateway/jobs/crontab.ts.

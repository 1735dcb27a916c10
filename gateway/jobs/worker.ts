// The job worker: graphile-worker (https://worker.graphile.org), the job
// queue made for Postgres, runs every background job of the service on two
// runners of its own, so that neither can hold up the other:
//
//   deliveries   webhook_deliver: the due deliveries of one webhook endpoint
//                (webhooks.ts); WORKER_CONCURRENCY at once, a community at
//                most WEBHOOK_COMMUNITY_CONCURRENCY of them (in SQL, across
//                every worker)
//   mail and upkeep
//                send_email: one message of the e-mail outbox (mail.ts; only
//                with SMTP_URL), first; email_link: the account an address
//                names looked up, and its link queued, after the request
//                that asked answered (mail.ts); then the periodic jobs of the crontab
//                (crontab.ts: prunes, recover_jobs, the webhook sweep);
//                MAIL_CONCURRENCY (2) at once
//
// (With one runner, 20 webhook endpoints that never answer held every slot
// for 10 s an attempt, and e-mail waited behind them.) A runner fetches only
// the jobs of its own tasks.
//
// Jobs are added by SQL (private.enqueue_job → graphile_worker.add_job) in
// the transaction of the change that causes them, with the traceparent of
// the request that made it (each job runs in a span continuing it);
// graphile-worker's NOTIFY wakes a worker at commit, and jobs are locked
// with `skip locked`, so any number of workers (each gateway process,
// `npm run worker` processes) share the queue safely.
//
// Crashes: every runner holds a connection named `job-worker <pool id>`
// while it runs; private.jobs_recover (at every worker's start and each
// minute) frees the jobs of pool ids without one. Before that connection is
// up the runner takes no job (graphile-worker's forbiddenFlags hook, awaited
// before each fetch, is the gate).
//
// A job that ends while the database is away: its result is written again
// until the database answers, the job locked by its runner meanwhile
// (gateway/patches/graphile-worker+0.17.3.patch: unpatched, the failed write
// was an unhandled rejection, which ended the process). A runner stopped
// before that gives up; the job's lock is freed as above, and it runs again.
import { EventEmitter } from 'node:events';
import postgres from 'postgres';
import type pg from 'pg';
import { makeWorkerUtils, run, type Runner, type TaskList, type WorkerEvents } from 'graphile-worker';
import { DEFAULT_COMMUNITY_CONCURRENCY, DEFAULT_WEBHOOK_PORTS, type Config, type StorageConfig, type WebhookConfig } from '../core/process/config.ts';
import { reconnectDelaySeconds } from '../core/database/pool.ts';
import { primaryFollowingPool } from '../core/database/hosts.ts';
import type { Logger } from '../core/process/log.ts';
import { crontab, PERIODIC_JOBS, type PeriodicSettings } from './crontab.ts';
import { emailLinkTask, sendEmailTask, type SmtpOptions } from './mail.ts';
import { workerLogger } from '../core/database/job-queue.ts';
import { jobs, jobsRunning, metricsOn, readQueueWith } from '../core/process/metrics.ts';
import { webhookDeliverTask } from './webhooks.ts';
import { inJobSpan } from '../core/process/tracing.ts';
import { storagePurgeTask } from '../storage/jobs.ts';
import { StorageService } from '../storage/service.ts';

/** Jobs the runner of e-mail and the periodic jobs runs at once. */
export const MAIL_CONCURRENCY = 2;

export interface JobWorkerOptions {
  /** A session connection (DATABASE_DIRECT_URL behind a transaction-mode pooler). */
  connectionString: string;
  /** WORKER_CONCURRENCY: webhook deliveries sent at once. */
  concurrency: number;
  /** Only through a transaction-mode pooler (no direct URL): no prepared statements, no crash recovery. */
  throughTransactionPooler?: boolean;
  /** SMTP_URL and MAIL_FROM; without them e-mails wait in the outbox. */
  smtp?: SmtpOptions;
  /** allowedPorts and communityConcurrency default to WEBHOOK_ALLOWED_PORTS' and WEBHOOK_COMMUNITY_CONCURRENCY's defaults. */
  webhooks: Pick<WebhookConfig, 'allowPrivateTargets' | 'retrySchedule'> & Partial<WebhookConfig>;
  /** CHANGE_LOG_RETENTION_HOURS, in seconds. */
  changeLogRetentionSeconds: number;
  /** GUEST_RETENTION_DAYS, in seconds (absent: 30 days). */
  guestRetentionSeconds?: number;
  /**
   * File storage (STORAGE_*): the storage jobs delete bytes from its byte
   * store. Absent: this worker takes no storage job (a worker started for
   * something else, as tests do); every worker that has it must name the
   * same byte store.
   */
  storage?: StorageConfig;
  /** How often to look for jobs that came due (retries); new jobs arrive by NOTIFY at once. */
  pollIntervalMs?: number;
  /** Deliveries one webhook job sends before a new job takes over (default 500; tests make it small). */
  webhookBatchSize?: number;
  log: Logger;
}

export interface JobWorker {
  /** The graphile-worker pool ids its jobs are locked by (one per runner). */
  readonly ids: string[];
  /** Why the worker is not polling for jobs (its last fetch failed, or a runner stopped); null while it polls (the admin server's /ready). */
  notPolling(): string | null;
  /** Stops taking jobs and waits (at most timeoutMs) for those running; whatever is left runs again elsewhere. */
  stop(timeoutMs?: number): Promise<void>;
}

export async function startJobWorker(options: JobWorkerOptions): Promise<JobWorker> {
  const { log } = options;
  const closers: (() => void)[] = [];
  const webhooks = webhookDeliverTask({
    rules: {
      allowPrivate: options.webhooks.allowPrivateTargets,
      allowedPorts: options.webhooks.allowedPorts ?? DEFAULT_WEBHOOK_PORTS,
    },
    retrySchedule: options.webhooks.retrySchedule,
    communityConcurrency: options.webhooks.communityConcurrency ?? DEFAULT_COMMUNITY_CONCURRENCY,
    batchSize: options.webhookBatchSize,
    log,
  });
  closers.push(webhooks.close);

  // A link to whoever has an address: looked up and queued as an e-mail after the request answered (with or without SMTP).
  const upkeep: TaskList = { email_link: emailLinkTask };
  if (options.smtp) {
    const mail = sendEmailTask(options.smtp);
    upkeep.send_email = mail.task;
    closers.push(mail.close);
  }
  const settings: PeriodicSettings = {
    changeLogRetentionSeconds: options.changeLogRetentionSeconds,
    guestRetentionSeconds: options.guestRetentionSeconds,
    storage: options.storage ? new StorageService(options.storage) : undefined,
  };
  if (settings.storage) upkeep.storage_purge = storagePurgeTask;
  const periodic = PERIODIC_JOBS.filter((job) => settings.storage || !job.needsStorage);
  for (const job of periodic) {
    upkeep[job.task] = async (_payload, helpers) => {
      await job.run(helpers, settings);
    };
  }

  // graphile-worker's pg pools take one host: these follow the primary of a multi-host URL (core/database/hosts.ts).
  const utilsPool = primaryFollowingPool(options.connectionString, { max: 2 }, poolErrors(log));
  const utils = await makeWorkerUtils({ pgPool: utilsPool, noPreparedStatements: options.throughTransactionPooler, logger: workerLogger(log) });
  const runners: RunningLane[] = [];
  const stopAll = async (timeoutMs: number) => {
    let timer: NodeJS.Timeout | undefined;
    // A lane's pool ends only once its runner has stopped: a job still running past the timeout
    // completes (or fails) through that pool, so it must stay open until then.
    const stops = runners.map((r) =>
      r.runner
        .stop()
        .catch((err: unknown) => log.warn({ err }, 'job worker: stopping failed'))
        .finally(() => r.pool.end().catch(() => {})),
    );
    await Promise.race([Promise.all(stops), new Promise<void>((resolve) => (timer = setTimeout(resolve, timeoutMs)))]);
    clearTimeout(timer);
    readQueueWith(undefined);
    await Promise.resolve(utils.release()).catch(() => {});
    await utilsPool.end().catch(() => {});
    await Promise.all(runners.map((r) => r.liveness?.end({ timeout: 1 }).catch(() => {})));
    for (const close of closers) close();
  };
  // The two lanes start side by side: each waits on its own pool's connections and LISTEN.
  const lanes = await Promise.allSettled([
    startLane(options, 'deliveries', { webhook_deliver: webhooks.task }, options.concurrency),
    startLane(options, 'mail and upkeep', upkeep, MAIL_CONCURRENCY, crontab(periodic)),
  ]);
  for (const lane of lanes) if (lane.status === 'fulfilled') runners.push(lane.value);
  const failed = lanes.find((lane) => lane.status === 'rejected');
  if (failed) {
    await stopAll(1_000);
    throw failed.reason;
  }
  if (!options.throughTransactionPooler) {
    await utils
      .withPgClient((client) => client.query('select private.jobs_recover() as dead'))
      .then(({ rows }) => {
        const dead = rows[0]?.dead as string[] | undefined;
        if (dead?.length) log.warn({ workers: dead }, 'job worker: freed the jobs of workers that are gone');
      })
      .catch((err: unknown) => log.warn({ err }, 'job worker: recovering the jobs of dead workers failed'));
  }
  const ids = runners.map((r) => r.id);
  const jobQueue = utils;
  if (metricsOn()) readQueueWith(() => jobQueue.withPgClient((client) => client.query<{ task: string; n: string }>(QUEUED_SQL)).then(({ rows }) => rows));
  log.debug({ workers: ids, concurrency: options.concurrency, smtp: Boolean(options.smtp) }, 'job worker running');

  let stopped: Promise<void> | undefined;
  return {
    ids,
    notPolling() {
      for (const lane of runners) if (lane.polling.problem) return lane.polling.problem;
      return null;
    },
    stop(timeoutMs = 10_000) {
      stopped ??= stopAll(timeoutMs);
      return stopped;
    },
  };
}

interface RunningLane {
  id: string;
  runner: Runner;
  liveness: postgres.Sql | undefined;
  /** The runner's pg pool (graphile-worker leaves a pool it was given open). */
  pool: pg.Pool;
  /** Whether its last fetch of jobs worked, and whether the runner still runs. */
  polling: { problem: string | null };
}

/** Jobs waiting (not locked, due or not), by task: the jobs_queued gauge, read at each scrape. */
const QUEUED_SQL = `select task_identifier as task, count(*)::text as n from graphile_worker.jobs where locked_at is null group by 1`;


/** Counts a lane's jobs by task and outcome, and follows whether it polls (graphile-worker's events). */
function instrumentLane(events: WorkerEvents, polling: { problem: string | null }): void {
  events.on('worker:getJob:empty', () => (polling.problem = null));
  events.on('worker:getJob:error', ({ error }) => (polling.problem = `the job worker cannot fetch jobs: ${(error as Error)?.message ?? String(error)}`));
  if (!metricsOn()) return;
  events.on('job:start', ({ job }) => {
    polling.problem = null;
    jobsRunning.inc({ task: job.task_identifier });
  });
  events.on('job:success', ({ job }) => jobs.inc({ task: job.task_identifier, outcome: 'succeeded' }));
  events.on('job:error', ({ job }) => jobs.inc({ task: job.task_identifier, outcome: 'failed' }));
  events.on('job:complete', ({ job }) => jobsRunning.dec({ task: job.task_identifier }));
}

/**
 * The tasks, each job run as a span that continues the trace of the request
 * that queued it (its payload's traceparent; core/process/tracing.ts), when
 * traces are exported.
 */
function inJobSpans(taskList: TaskList): TaskList {
  const traced: TaskList = {};
  for (const [name, task] of Object.entries(taskList)) {
    if (task) traced[name] = (payload, helpers) => inJobSpan(name, payload, async () => task(payload, helpers));
  }
  return traced;
}

/** One graphile-worker runner for `taskList` (it fetches only those tasks' jobs), with its liveness connection. */
async function startLane(options: JobWorkerOptions, name: string, taskList: TaskList, concurrency: number, cron?: string): Promise<RunningLane> {
  const { log } = options;
  // The liveness connection, named after the pool id (known once the pool exists).
  const recovery = !options.throughTransactionPooler;
  let liveness: postgres.Sql | undefined;
  let poolId = '';
  let open: () => void = () => {};
  const gate = new Promise<void>((resolve) => (open = resolve));
  const events = new EventEmitter() as WorkerEvents;
  const polling = { problem: null as string | null };
  instrumentLane(events, polling);
  events.on('pool:create', ({ workerPool }) => {
    poolId = workerPool.id;
    if (!recovery) return open();
    liveness = postgres(options.connectionString, {
      max: 1,
      backoff: reconnectDelaySeconds,
      onnotice: () => {},
      connection: { application_name: `job-worker ${poolId}` },
    });
    // LISTEN keeps the connection open, and postgres.js re-opens it after a drop.
    liveness
      .listen('job_worker', () => {})
      .catch((err: unknown) => log.warn({ err, runner: name }, 'job worker: the liveness connection failed; its jobs may be run again by others'))
      .finally(open);
  });
  let runner: Runner;
  // A running webhook job holds one connection (its endpoint lock); fetching and completing jobs and LISTEN need more.
  const pool = primaryFollowingPool(options.connectionString, { max: concurrency * 2 + 2 }, poolErrors(log));
  try {
    runner = await run({
      pgPool: pool,
      concurrency,
      noPreparedStatements: options.throughTransactionPooler,
      noHandleSignals: true,
      pollInterval: options.pollIntervalMs ?? 1000,
      taskList: inJobSpans(taskList),
      ...(cron ? { crontab: cron } : {}),
      logger: workerLogger(log),
      events,
      // Awaited before every fetch: no job is taken before the liveness connection is up.
      forbiddenFlags: async () => {
        await gate;
        return null;
      },
    });
  } catch (err) {
    await liveness?.end({ timeout: 1 });
    await pool.end().catch(() => {});
    throw err;
  }
  runner.promise.catch((err: unknown) => {
    polling.problem = `the job worker (${name}) stopped with an error`;
    log.error({ err, runner: name }, 'job worker stopped with an error');
  });
  await gate;
  return { id: poolId, runner, liveness, pool, polling };
}

/** The errors of a pool's connections (a restart, a failover), logged as graphile-worker's own pools log them: connection errors quieted (workerLogger). */
function poolErrors(log: Logger): (err: Error) => void {
  const logger = workerLogger(log);
  return (err) => logger.error(`PostgreSQL client generated error: ${err.message}`, { error: err });
}

/** The job worker's options from the configuration (also used by `npm run worker`). */
export function jobWorkerOptions(config: Config, connectionString: string, log: Logger): JobWorkerOptions {
  if (config.databasePoolMode === 'transaction' && !config.databaseDirectUrl) {
    log.warn('DATABASE_POOL_MODE=transaction without DATABASE_DIRECT_URL: the job worker polls, and cannot free the jobs of crashed workers before four hours');
  }
  return {
    connectionString,
    concurrency: config.worker.concurrency,
    throughTransactionPooler: config.databasePoolMode === 'transaction' && !config.databaseDirectUrl,
    smtp: config.smtpUrl ? { url: config.smtpUrl, from: config.mailFrom } : undefined,
    webhooks: config.webhooks,
    changeLogRetentionSeconds: config.realtime.retentionSeconds,
    guestRetentionSeconds: config.guests.retentionSeconds,
    storage: config.storage,
    log,
  };
}

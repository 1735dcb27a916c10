// The job worker: graphile-worker (https://worker.graphile.org), the job
// queue made for Postgres, runs every background job of the service:
//
//   send_email        one message of the e-mail outbox (mail.ts; only with SMTP_URL)
//   webhook_deliver   the due deliveries of one webhook endpoint (webhooks.ts)
//   prune_*, recover_jobs
//                     periodic jobs of its crontab (crontab.ts)
//
// Jobs are added by SQL (private.enqueue_job → graphile_worker.add_job) in
// the transaction of the change that causes them; graphile-worker's NOTIFY
// wakes a worker at commit, and jobs are locked with `skip locked`, so any
// number of workers (each gateway process, `npm run worker` processes) share
// the queue safely.
//
// Crashes: every worker holds a connection named `job-worker <pool id>`
// while it runs; private.jobs_recover (at every worker's start and each
// minute) frees the jobs of pool ids without one. Before that connection is
// up the worker takes no job (graphile-worker's forbiddenFlags hook, awaited
// before each fetch, is the gate).
import { EventEmitter } from 'node:events';
import postgres from 'postgres';
import { makeWorkerUtils, run, type Runner, type TaskList, type WorkerEvents } from 'graphile-worker';
import type { Config, WebhookConfig } from '../core/config.ts';
import { reconnectDelaySeconds } from '../core/db.ts';
import type { Logger } from '../core/log.ts';
import { crontab, PERIODIC_JOBS, type PeriodicSettings } from './crontab.ts';
import { sendEmailTask, type SmtpOptions } from './mail.ts';
import { workerLogger } from '../core/job-queue.ts';
import { webhookDeliverTask } from './webhooks.ts';

export interface JobWorkerOptions {
  /** A session connection (DATABASE_DIRECT_URL behind a transaction-mode pooler). */
  connectionString: string;
  /** WORKER_CONCURRENCY. */
  concurrency: number;
  /** Only through a transaction-mode pooler (no direct URL): no prepared statements, no crash recovery. */
  throughTransactionPooler?: boolean;
  /** SMTP_URL and MAIL_FROM; without them e-mails wait in the outbox. */
  smtp?: SmtpOptions;
  webhooks: WebhookConfig;
  /** CHANGE_LOG_RETENTION_HOURS, in seconds. */
  changeLogRetentionSeconds: number;
  /** How often to look for jobs that came due (retries); new jobs arrive by NOTIFY at once. */
  pollIntervalMs?: number;
  /** Deliveries one webhook job sends before a new job takes over (default 500; tests make it small). */
  webhookBatchSize?: number;
  log: Logger;
}

export interface JobWorker {
  /** The graphile-worker pool id its jobs are locked by. */
  readonly id: string;
  /** Stops taking jobs and waits (at most timeoutMs) for those running; whatever is left runs again elsewhere. */
  stop(timeoutMs?: number): Promise<void>;
}

export async function startJobWorker(options: JobWorkerOptions): Promise<JobWorker> {
  const { log } = options;
  const closers: (() => void)[] = [];
  const taskList: TaskList = {};

  const webhooks = webhookDeliverTask({
    allowPrivateTargets: options.webhooks.allowPrivateTargets,
    retrySchedule: options.webhooks.retrySchedule,
    batchSize: options.webhookBatchSize,
  });
  taskList.webhook_deliver = webhooks.task;
  closers.push(webhooks.close);
  if (options.smtp) {
    const mail = sendEmailTask(options.smtp);
    taskList.send_email = mail.task;
    closers.push(mail.close);
  }

  const utils = await makeWorkerUtils({ connectionString: options.connectionString, noPreparedStatements: options.throughTransactionPooler, logger: workerLogger(log) });
  const settings: PeriodicSettings = {
    changeLogRetentionSeconds: options.changeLogRetentionSeconds,
  };
  for (const job of PERIODIC_JOBS) {
    taskList[job.task] = async (_payload, helpers) => {
      await job.run(helpers, settings);
    };
  }

  // The liveness connection, named after the pool id (known once the pool exists).
  const recovery = !options.throughTransactionPooler;
  let liveness: postgres.Sql | undefined;
  let poolId = '';
  let open: () => void = () => {};
  const gate = new Promise<void>((resolve) => (open = resolve));
  const events = new EventEmitter() as WorkerEvents;
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
      .catch((err: unknown) => log.warn({ err }, 'job worker: the liveness connection failed; its jobs may be run again by others'))
      .finally(open);
  });

  let runner: Runner;
  try {
    runner = await run({
      connectionString: options.connectionString,
      concurrency: options.concurrency,
      // A running webhook job holds one connection (its endpoint lock); fetching and completing jobs and LISTEN need more.
      maxPoolSize: options.concurrency * 2 + 2,
      noPreparedStatements: options.throughTransactionPooler,
      noHandleSignals: true,
      pollInterval: options.pollIntervalMs ?? 1000,
      taskList,
      crontab: crontab(),
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
    await utils.release();
    for (const close of closers) close();
    throw err;
  }
  runner.promise.catch((err: unknown) => log.error({ err }, 'job worker stopped with an error'));
  await gate;
  if (recovery) {
    await utils
      .withPgClient((client) => client.query('select private.jobs_recover() as dead'))
      .then(({ rows }) => {
        const dead = rows[0]?.dead as string[] | undefined;
        if (dead?.length) log.warn({ workers: dead }, 'job worker: freed the jobs of workers that are gone');
      })
      .catch((err: unknown) => log.warn({ err }, 'job worker: recovering the jobs of dead workers failed'));
  }
  log.debug({ worker: poolId, concurrency: options.concurrency, smtp: Boolean(options.smtp) }, 'job worker running');

  let stopped: Promise<void> | undefined;
  return {
    id: poolId,
    stop(timeoutMs = 10_000) {
      stopped ??= (async () => {
        let timer: NodeJS.Timeout | undefined;
        await Promise.race([
          runner.stop().catch((err: unknown) => log.warn({ err }, 'job worker: stopping failed')),
          new Promise<void>((resolve) => (timer = setTimeout(resolve, timeoutMs))),
        ]);
        clearTimeout(timer);
        await Promise.resolve(utils.release()).catch(() => {});
        await liveness?.end({ timeout: 1 }).catch(() => {});
        for (const close of closers) close();
      })();
      return stopped;
    },
  };
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
    log,
  };
}

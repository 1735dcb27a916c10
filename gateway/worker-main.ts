// `npm run worker`: a job worker alone (graphile-worker: e-mails, webhook
// deliveries, the periodic prunes; see gateway/jobs/worker.ts), for running
// background work apart from the gateways (which run one each by default;
// WORKER=off turns theirs off). It uses DATABASE_URL (DATABASE_DIRECT_URL
// when set: the worker needs a session, not a transaction-mode pooler), or
// joins the embedded database of a running `npm start`. It installs the job
// queue's schema if missing but does not migrate the application: the
// gateway does. SIGINT/SIGTERM: running jobs finish (10 s at most), then it exits.
import { loadConfigOrExit } from './core/process/config.ts';
import { openDatabase, type Database } from './core/process/open-database.ts';
import { createLogger } from './core/process/log.ts';
import { onShutdown } from './core/process/shutdown.ts';
import { jobWorkerOptions, startJobWorker, type JobWorker } from './jobs/worker.ts';
import { startAdminServer, type AdminServer } from './core/process/admin-server.ts';
import { enableMetrics } from './core/process/metrics.ts';
import { startTracing, stopTracing } from './core/process/tracing.ts';
import { withDeadline, createPool } from './core/database/pool.ts';

async function main(): Promise<void> {
  const config = loadConfigOrExit();
  const log = createLogger(config.logLevel, 'worker');
  let database: Database | undefined;
  let worker: JobWorker | undefined;
  let admin: AdminServer | undefined;
  let probe: ReturnType<typeof createPool> | undefined;
  const shutdown = onShutdown(
    log,
    async () => {
      await worker?.stop(10_000);
      await admin?.close();
      await stopTracing();
      await probe?.end({ timeout: 1 });
      await database?.stop();
    },
    { limitMs: 15_000 },
  );

  // OTEL_EXPORTER_OTLP_ENDPOINT: a span per webhook delivery, whose traceparent the receiver gets.
  await startTracing('community-backend-worker');
  try {
    // ADMIN_PORT: /live, /ready (the database answers, the worker polls) and /metrics (jobs, webhooks, e-mails).
    if (config.admin) {
      enableMetrics('worker');
      admin = await startAdminServer({
        ...config.admin,
        log,
        checks: () => ({
          database: async () => {
            if (!probe) return 'starting';
            const sql = probe;
            await withDeadline(sql, 2_000, () => sql`select 1`.then(() => undefined));
            return null;
          },
          jobs: async () => (worker ? worker.notPolling() : 'starting'),
        }),
      });
    }
    database = await openDatabase(config, log, { reuseRunning: true });
    if (config.admin) probe = createPool(config.databaseDirectUrl ?? database.url, { max: 1, applicationName: 'job-worker-admin' });
    worker = await startJobWorker(jobWorkerOptions(config, config.databaseDirectUrl ?? database.url, log));
  } catch (err) {
    log.fatal({ err }, 'could not start');
    console.error(`could not start: ${err instanceof Error ? err.message : String(err)}`);
    await database?.stop().catch(() => {});
    process.exit(1);
  }
  if (shutdown.stopping) return void worker.stop();
  log.info({ workers: worker.ids, concurrency: config.worker.concurrency, smtp: Boolean(config.smtpUrl) }, 'job worker running');
}

void main();

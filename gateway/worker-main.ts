// `npm run worker`: a job worker alone (graphile-worker: e-mails, webhook
// deliveries, the periodic prunes; see gateway/jobs/worker.ts), for running
// background work apart from the gateways (which run one each by default;
// WORKER=off turns theirs off). It uses DATABASE_URL (DATABASE_DIRECT_URL
// when set: the worker needs a session, not a transaction-mode pooler), or
// joins the embedded database of a running `npm start`. It installs the job
// queue's schema if missing but does not migrate the application: the
// gateway does. SIGINT/SIGTERM: running jobs finish (10 s at most), then it exits.
import { loadConfigOrExit } from './core/config.ts';
import { openDatabase, type Database } from './core/database.ts';
import { createLogger } from './core/log.ts';
import { onShutdown } from './core/shutdown.ts';
import { jobWorkerOptions, startJobWorker, type JobWorker } from './jobs/worker.ts';

async function main(): Promise<void> {
  const config = loadConfigOrExit();
  const log = createLogger(config.logLevel, 'worker');
  let database: Database | undefined;
  let worker: JobWorker | undefined;
  const shutdown = onShutdown(
    log,
    async () => {
      await worker?.stop(10_000);
      await database?.stop();
    },
    { limitMs: 15_000 },
  );

  try {
    database = await openDatabase(config, log, { reuseRunning: true });
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

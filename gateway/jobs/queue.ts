// graphile-worker's schema (graphile_worker) and its log lines; used by the
// migrations (lib/migrate.ts installs the schema first) and the worker.
import { Logger as WorkerLogger, runMigrations } from 'graphile-worker';
import type { Logger } from '../lib/log.ts';

/** graphile-worker's log lines through pino (its per-job info lines at debug). */
export function workerLogger(log: Logger): WorkerLogger {
  return new WorkerLogger((scope) => (level, message, meta) => {
    const fields = { job: scope.jobId, task: scope.taskIdentifier, worker: scope.workerId, ...(meta?.error ? { err: meta.error } : {}) };
    if (level === 'error') log.error(fields, message);
    else if (level === 'warning') log.warn(fields, message);
    else log.debug(fields, message);
  });
}

/**
 * Installs or migrates graphile-worker's schema (graphile_worker). Runs
 * before the application migrations, whose functions add jobs. Several
 * processes starting together are fine (graphile-worker detects a concurrent
 * migration); a database not reachable yet is retried for 30 s.
 */
export async function installJobQueue(connectionString: string, log: Logger): Promise<void> {
  const started = Date.now();
  for (let attempt = 1; ; attempt++) {
    try {
      await runMigrations({ connectionString, logger: workerLogger(log) });
      return;
    } catch (err) {
      const code = (err as { code?: unknown } | null)?.code;
      const retryable = code === 'ECONNREFUSED' || code === 'ECONNRESET' || code === '57P03' || code === '23505' || code === '42P06';
      if (!retryable || Date.now() - started > 30_000) throw err;
      await new Promise((resolve) => setTimeout(resolve, Math.min(250 * attempt, 2000)));
    }
  }
}


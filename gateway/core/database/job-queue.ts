// graphile-worker's schema (graphile_worker) and its log lines; used by the
// migrations (core/database/migrate.ts installs the schema first) and the worker
// (gateway/jobs/worker.ts).
import { Logger as WorkerLogger, runMigrations } from 'graphile-worker';
import type { Logger } from '../process/log.ts';
import { primaryUrl } from './hosts.ts';

/**
 * graphile-worker's log lines through pino: its per-job info lines at
 * debug; while the database is unreachable (a restart, an outage) its
 * connection errors are one warning line every 10 s, not one per connection.
 */
export function workerLogger(log: Logger): WorkerLogger {
  let quietUntil = 0;
  let quieted = 0;
  return new WorkerLogger((scope) => (level, message, meta) => {
    const error = meta?.error;
    const fields = { job: scope.jobId, task: scope.taskIdentifier, worker: scope.workerId, ...(error ? { err: error } : {}) };
    if ((level === 'error' || level === 'warning') && isConnectionError(error, message)) {
      const now = Date.now();
      if (now < quietUntil) {
        quieted++;
        return log.debug(fields, message);
      }
      log.warn({ cause: { message: (error as Error | undefined)?.message ?? message }, quieted }, 'job worker: database unavailable; retrying');
      quietUntil = now + 10_000;
      quieted = 0;
      return;
    }
    if (level === 'error') log.error(fields, message);
    else if (level === 'warning') log.warn(fields, message);
    else log.debug(fields, message);
  });
}

const CONNECTION_CODES = new Set(['NO_PRIMARY', 'ECONNREFUSED', 'ECONNRESET', 'ETIMEDOUT', 'EPIPE', 'ENOTFOUND', 'EAI_AGAIN']);

function isConnectionError(error: unknown, message: string): boolean {
  const code = String((error as { code?: unknown } | null)?.code ?? '');
  if (CONNECTION_CODES.has(code) || code.startsWith('08') || code.startsWith('57P') || code === '53300') return true;
  return /connection (terminated|error)|not queryable|terminating connection|shutting down|starting up|ECONNREFUSED/i.test(
    `${message} ${(error as Error | undefined)?.message ?? ''}`,
  );
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
      // graphile-worker's pg takes one host: the primary of a multi-host URL.
      await runMigrations({ connectionString: await primaryUrl(connectionString), logger: workerLogger(log) });
      return;
    } catch (err) {
      const code = (err as { code?: unknown } | null)?.code;
      const retryable = code === 'ECONNREFUSED' || code === 'NO_PRIMARY' || code === 'ECONNRESET' || code === '57P03' || code === '23505' || code === '42P06';
      if (!retryable || Date.now() - started > 30_000) throw err;
      await new Promise((resolve) => setTimeout(resolve, Math.min(250 * attempt, 2000)));
    }
  }
}


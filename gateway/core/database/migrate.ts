// Applies the graphile-migrate migrations in sql/migrations: every committed
// migration and, for development databases, the work in progress in
// sql/migrations/current/ (empty on main), so a DBA's uncommitted change is
// what the embedded `npm start` and `npm test` run against. A database named
// by DATABASE_URL only ever gets committed migrations.
//
// First of all, graphile-worker's own schema (graphile_worker, installed and
// migrated by graphile-worker's runMigrations): application functions add
// jobs to it (private.enqueue_job), so it exists before any of them can run.
import { createRequire } from 'node:module';
import path from 'node:path';
import { Logger, migrate, watch, type Settings } from 'graphile-migrate';
import { projectRoot } from '../process/config.ts';
import type { Logger as PinoLogger } from '../process/log.ts';
import { installJobQueue } from './job-queue.ts';
import { primaryUrl } from './hosts.ts';

export const MIGRATIONS_FOLDER = path.join(projectRoot(), 'sql', 'migrations');

/** What a run applied: the committed migrations, and whether the work in progress (current/) ran. */
interface Applied {
  committed: string[];
  current: boolean;
}

function settingsFor(connectionString: string, log: PinoLogger, applied: Applied, migrationsFolder: string): Settings {
  return {
    connectionString,
    migrationsFolder,
    manageGraphileMigrateSchema: true,
    logger: new Logger(() => (level, message) => {
      if (level === 'error') log.error({ migrate: message }, 'migration error');
      else if (level === 'warning') log.warn({ migrate: message }, 'migration warning');
      else log.debug({ migrate: message }, 'migration');
      // graphile-migrate says so for each migration it runs (and for current/ when it changed).
      const committed = /Running migration '([^']+)'/.exec(message)?.[1];
      if (committed) applied.committed.push(committed);
      if (/Running current\.sql/.test(message)) applied.current = true;
    }),
  };
}

/**
 * Brings the database up to date (`migrationsFolder`: another copy of
 * sql/migrations, as `npm run db -- areas --diff` makes one). Several gateway replicas starting together
 * take turns: graphile-migrate holds an advisory lock while it migrates and
 * refuses a second migrator, so we wait and try again. A database that is not
 * reachable yet (still starting) is retried for 30 seconds.
 */
export async function runMigrations(
  connectionString: string,
  log: PinoLogger,
  { includeCurrent, migrationsFolder = MIGRATIONS_FOLDER }: { includeCurrent: boolean; migrationsFolder?: string },
): Promise<void> {
  await installJobQueue(connectionString, log);
  const applied: Applied = { committed: [], current: false };
  const started = Date.now();
  for (let attempt = 1; ; attempt++) {
    try {
      // graphile-migrate's pg takes one host: the primary of a multi-host URL (core/database/hosts.ts).
      const settings = settingsFor(await primaryUrl(connectionString), log, applied, migrationsFolder);
      await migrate(settings);
      if (includeCurrent) await watch(settings, true);
      releaseMigrationPools();
      logApplied(log, applied, Date.now() - started);
      return;
    } catch (err) {
      const locked = err instanceof Error && err.message.includes('Failed to get exclusive lock');
      const unreachable = isUnreachable(err);
      const elapsed = Date.now() - started;
      if (!(locked && elapsed < 120_000) && !(unreachable && elapsed < 30_000)) throw err;
      log.info({ attempt }, locked ? 'another process is migrating this database; waiting' : 'database not reachable yet; retrying');
      await new Promise((resolve) => setTimeout(resolve, Math.min(500 * attempt, 3000)));
    }
  }
}

/** One line saying what was applied (how many, which), or, at debug level, that nothing was. */
function logApplied(log: PinoLogger, applied: Applied, ms: number): void {
  const names = applied.committed.map((file) => path.basename(file));
  if (names.length === 0 && !applied.current) return log.debug('migrations: the database is up to date');
  const parts = [
    ...(names.length ? [`${names.length} committed (${names.join(', ')})`] : []),
    ...(applied.current ? ['the work in progress in sql/migrations/current/'] : []),
  ];
  log.info({ committed: names, current: applied.current, ms }, `migrations applied: ${parts.join(' and ')}`);
}

/**
 * graphile-migrate keeps its pg pool for 200 ms after a run, and exits the
 * process if that pool sees an error (as when Postgres stops during a quick
 * shutdown). Close its idle pools as soon as migrating is done.
 */
function releaseMigrationPools(): void {
  const pgReal = createRequire(import.meta.url)('graphile-migrate/dist/pgReal.js') as { clearAllPools?: () => void };
  pgReal.clearAllPools?.();
}

function isUnreachable(err: unknown): boolean {
  const code = (err as { code?: unknown } | null)?.code;
  // Refused/reset connections, Postgres still starting up (57P03), no host of a multi-host URL taking writes yet.
  return code === 'ECONNREFUSED' || code === 'ECONNRESET' || code === '57P03' || code === 'NO_PRIMARY';
}

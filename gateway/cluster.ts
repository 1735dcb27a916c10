// WEB_CONCURRENCY: several gateway processes on one machine, sharing the port
// (node:cluster). Limits and counters live in Postgres, so they hold across
// processes exactly as across replicas; the realtime hub is per process, as it
// is per replica.
//
// The primary opens the database (starting the embedded one when DATABASE_URL
// is unset), migrates it once, then forks the workers with DATABASE_URL set;
// each worker is an ordinary gateway process (main.ts). A worker that dies is
// replaced; the replacement (GATEWAY_REPLACEMENT=1 in its environment) waits
// for the database if it does not answer (an outage may be why its
// predecessor died), and one that fails to start all the same is replaced
// again, within the crash limit: a replacement never takes the service down
// by itself. SIGINT/SIGTERM stop the workers, then the database.
import cluster, { type Worker } from 'node:cluster';
import os from 'node:os';
import type { Config } from './core/process/config.ts';
import { openDatabase, type Database } from './core/process/open-database.ts';
import type { Logger } from './core/process/log.ts';
import { runMigrations } from './core/database/migrate.ts';
import { startupMessage } from './core/process/startup-error.ts';
import { readinessOf, startAdminServer, type AdminServer, type MetricsSource, type ReadinessCheck } from './core/process/admin-server.ts';
import { createPool, withDeadline, type Sql } from './core/database/pool.ts';
import { enableMetrics } from './core/process/metrics.ts';

/** WEB_CONCURRENCY, or the core count in production (NODE_ENV=production), else 1. */
export function webConcurrency(env: NodeJS.ProcessEnv = process.env): number {
  const raw = env.WEB_CONCURRENCY?.trim();
  if (raw) {
    const n = Number(raw);
    if (!Number.isInteger(n) || n < 1 || n > 256) throw new Error(`WEB_CONCURRENCY must be a whole number from 1 to 256, not ${raw}`);
    return n;
  }
  return env.NODE_ENV === 'production' ? os.availableParallelism() : 1;
}

/** A process the primary runs beside the workers (the MCP server), stopped before the database. */
export interface Sidecar {
  stop(): Promise<void>;
  /** Resolves once it first runs; rejects with why its first start failed (the service then does not start). */
  readonly started?: Promise<void>;
  /** The address the workers send its requests to (undefined while it is not up): told to each worker as it changes. */
  url?(): string | undefined;
  /** Calls `listener` whenever url() changes. */
  onUrlChange?(listener: () => void): void;
  /** The running process, asked for its metrics (admin server). */
  current?(): MetricsSource | undefined;
  /** Null when it answers, else why not (admin server's /ready). */
  notAnswering?(): Promise<string | null>;
}

/** What a worker tells the primary about its start (main.ts sends these). */
export type WorkerMessage = { type: 'gateway-ready' } | { type: 'gateway-failed'; message: string };

/** What the primary tells its workers: where the MCP process it runs listens now (main.ts proxies /mcp there). */
export type PrimaryMessage = { type: 'mcp-upstream'; url: string };

/**
 * In the environment of a worker that replaces one that died: it waits for
 * the database rather than fail to start (main.ts; server.ts waitForDatabase).
 */
export const REPLACEMENT_ENV = 'GATEWAY_REPLACEMENT';

/** A worker that dies this many times within CRASH_WINDOW_MS after starting stops the service. */
const MAX_CRASHES = 5;
const CRASH_WINDOW_MS = 60_000;

/**
 * In the primary of a multi-process gateway: starts the database and the
 * workers and returns true (the caller does nothing else). In a worker, or
 * with one process: returns false (the caller starts the gateway itself).
 *
 * Failures end the service the way a single process ends: one line on
 * stderr (`could not start: ...`) and exit code 1. That is the case when the
 * database cannot be opened or migrated, when one of the first workers fails
 * to start (the port is taken: every worker would fail the same way, so they
 * are not re-forked), and when workers keep dying (MAX_CRASHES within a
 * minute, replacements that fail to start included). A worker that dies now
 * and then after it started is replaced.
 */
export async function startWorkers(
  config: Config,
  log: Logger,
  startSidecar?: (databaseUrl: string) => Sidecar,
): Promise<boolean> {
  if (cluster.isWorker) return false;
  let workers: number;
  try {
    workers = webConcurrency();
  } catch (err) {
    console.error(`could not start: ${(err as Error).message}`);
    process.exit(1);
  }
  if (workers <= 1) return false;

  let database: Database | undefined;
  try {
    database = await openDatabase(config, log);
    await runMigrations(database.url, log, { includeCurrent: database.embedded });
  } catch (err) {
    log.debug({ err }, 'could not start');
    console.error(`could not start: ${startupMessage(err)}`);
    await database?.stop().catch(() => {});
    process.exit(1);
  }
  const db = database;
  const sidecar = startSidecar?.(db.url);
  // ADMIN_PORT: the primary serves the admin server for all its processes.
  let admin: { server: AdminServer; probe: Sql } | undefined;
  if (config.admin) {
    // Its own process metrics (CPU, memory, event loop) join the workers'.
    enableMetrics('gateway');
    const probe = createPool(db.url, { max: 1, applicationName: 'gateway-admin' });
    const running = () => Object.values(cluster.workers ?? {}).filter((w): w is NonNullable<typeof w> => w !== undefined && !w.isDead() && w.isConnected());
    const server = await startAdminServer({
      ...config.admin,
      log,
      // It serves no requests: the workers' metrics are the service's, with
      // its own process metrics (CPU, memory) added to theirs.
      own: 'process',
      checks: () => {
        const checks: Record<string, ReadinessCheck> = {
          database: async () => {
            await withDeadline(probe, 2_000, () => probe`select 1`.then(() => undefined));
            return null;
          },
        };
        const live = running();
        if (live.length < workers) checks.gateways = async () => `${live.length} of ${workers} gateway processes running`;
        for (const w of live) checks[`gateway ${w.id}`] = ready.has(w.id) ? readinessOf(w) : async () => 'starting';
        if (sidecar?.notAnswering) checks.mcp = () => sidecar.notAnswering!();
        return checks;
      },
      sources: () => {
        const child = sidecar?.current?.();
        return [...running(), ...(child ? [child] : [])];
      },
    }).catch(async (err: unknown) => {
      console.error(`could not start: the admin server: ${startupMessage(err)}`);
      await sidecar?.stop().catch(() => {});
      await probe.end({ timeout: 1 }).catch(() => {});
      await db.stop().catch(() => {});
      process.exit(1);
    });
    admin = { server, probe };
  }
  let stopping = false;
  let exitCode = 0;
  const ready = new Set<number>();
  const replacements = new Set<number>();
  const crashes: number[] = [];
  // Where the MCP process listens, told to every worker at its start and whenever it changes (a restarted MCP process takes another free port).
  const tellUpstream = (worker: Worker) => {
    const url = sidecar?.url?.();
    if (url && worker.isConnected()) worker.send({ type: 'mcp-upstream', url } satisfies PrimaryMessage);
  };
  sidecar?.onUrlChange?.(() => {
    for (const worker of Object.values(cluster.workers ?? {})) if (worker) tellUpstream(worker);
  });
  const fork = (replacement: boolean) => {
    const worker = cluster.fork({ DATABASE_URL: db.url, ...(replacement ? { [REPLACEMENT_ENV]: '1' } : {}) });
    if (replacement) replacements.add(worker.id);
    worker.on('online', () => tellUpstream(worker));
    worker.on('message', (message: WorkerMessage) => {
      // Told again once it serves: a message sent at 'online' can reach the
      // worker before main.ts listens for it, and is then lost.
      if (message?.type === 'gateway-ready') {
        ready.add(worker.id);
        tellUpstream(worker);
      }
      if (message?.type !== 'gateway-failed') return;
      // A replacement that could not start is replaced in turn (the exit below).
      if (replacements.has(worker.id)) log.error({ pid: worker.process.pid, reason: message.message }, 'a replacement gateway process could not start');
      else fail(message.message);
    });
  };
  const fail = (message: string) => {
    if (stopping) return;
    console.error(`could not start: ${message}`);
    exitCode = 1;
    stop('SIGTERM');
  };
  cluster.on('exit', (worker, code, signal) => {
    const started = ready.delete(worker.id);
    const replacement = replacements.delete(worker.id);
    if (stopping) {
      // A worker leaves cluster.workers only after both its 'exit' and its
      // 'disconnect', in either order: count the ones still running.
      if (Object.values(cluster.workers ?? {}).every((w) => !w || w.isDead())) void stopAll();
      return;
    }
    if (!started && !replacement) return fail(`a gateway process exited while starting (${signal ?? `code ${code}`})`);
    const now = Date.now();
    crashes.push(now);
    while (crashes.length > 0 && crashes[0]! < now - CRASH_WINDOW_MS) crashes.shift();
    if (crashes.length >= MAX_CRASHES) {
      console.error(`gateway processes keep dying (${crashes.length} within ${CRASH_WINDOW_MS / 1000} s): stopping`);
      exitCode = 1;
      return stop('SIGTERM');
    }
    log.error({ pid: worker.process.pid, code, signal }, 'gateway worker died; starting another');
    setTimeout(() => {
      if (!stopping) fork(true);
    }, 1000).unref();
  });
  let stoppingAll = false;
  const stopAll = async () => {
    if (stoppingAll) return;
    stoppingAll = true;
    await sidecar?.stop().catch(() => {});
    await admin?.server.close();
    await admin?.probe.end({ timeout: 1 }).catch(() => {});
    await db.stop().finally(() => process.exit(exitCode));
  };
  const stop = (signal: NodeJS.Signals) => {
    if (stopping) return;
    stopping = true;
    log.info({ signal }, 'stopping gateway workers');
    const running = Object.values(cluster.workers ?? {});
    if (running.length === 0) void stopAll();
    for (const worker of running) worker?.process.kill(signal);
  };
  process.on('SIGINT', () => stop('SIGINT'));
  process.on('SIGTERM', () => stop('SIGTERM'));
  sidecar?.started?.catch((err: Error) => fail(`the MCP server: ${err.message}`));
  for (let i = 0; i < workers; i++) fork(false);
  log.info({ workers, database: db.embedded ? 'embedded' : 'DATABASE_URL' }, `starting ${workers} gateway processes`);
  return true;
}

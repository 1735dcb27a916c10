// Debian's PgBouncer (/usr/sbin/pgbouncer) in transaction mode in front of a
// test database, on a random port: the shape of Supabase's and most managed
// Postgres's pooler. Used by test/process/pgbouncer.test.ts and, with
// TEST_PGBOUNCER=1, by the whole test run (global-setup.ts).
import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { freePort } from '../../gateway/core/process/free-port.ts';
import { postgresUser } from '../../gateway/core/process/postgres-binaries.ts';

export const PGBOUNCER_BINARY = process.env.PGBOUNCER_BINARY ?? '/usr/sbin/pgbouncer';

export interface RunningPgBouncer {
  /** The database through the pooler (same user and password). */
  url: string;
  /** Stops PgBouncer at once (every client connection closed) and starts it again on the same port. */
  restart(): Promise<void>;
  stop(): Promise<void>;
}

const quote = (s: string) => `"${s.replace(/"/g, '""')}"`;

async function waitForPort(port: number, child: ChildProcess, log: () => string): Promise<void> {
  const deadline = Date.now() + 15_000;
  for (;;) {
    if (child.exitCode !== null) throw new Error(`pgbouncer exited with ${child.exitCode}: ${log()}`);
    const open = await new Promise<boolean>((resolve) => {
      const socket = net.connect(port, '127.0.0.1', () => (socket.end(), resolve(true)));
      socket.once('error', () => resolve(false));
    });
    if (open) return;
    if (Date.now() > deadline) throw new Error(`pgbouncer did not listen: ${log()}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

/** Starts PgBouncer (pool_mode = transaction) in front of `databaseUrl`. */
export async function startPgBouncer(databaseUrl: string, { poolSize = 20 } = {}): Promise<RunningPgBouncer> {
  const target = new URL(databaseUrl);
  const user = decodeURIComponent(target.username);
  const password = decodeURIComponent(target.password);
  const database = decodeURIComponent(target.pathname.slice(1));
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'pgbouncer-'));
  fs.chmodSync(dir, 0o755);
  const port = await freePort();
  const logFile = path.join(dir, 'pgbouncer.log');
  fs.writeFileSync(path.join(dir, 'userlist.txt'), `${quote(user)} ${quote(password)}\n`, { mode: 0o644 });
  fs.writeFileSync(
    path.join(dir, 'pgbouncer.ini'),
    [
      '[databases]',
      `${database} = host=${target.hostname} port=${target.port || 5432} dbname=${database}`,
      '[pgbouncer]',
      'listen_addr = 127.0.0.1',
      `listen_port = ${port}`,
      `unix_socket_dir =`,
      // Clients authenticate as the server user (trust when it has no password).
      `auth_type = ${password ? 'scram-sha-256' : 'trust'}`,
      `auth_file = ${path.join(dir, 'userlist.txt')}`,
      'pool_mode = transaction',
      `default_pool_size = ${poolSize}`,
      'max_client_conn = 500',
      // Settings the gateway's client sends at connect (application_name) pass through.
      'ignore_startup_parameters = extra_float_digits,options',
      `logfile = ${logFile}`,
      `pidfile = ${path.join(dir, 'pgbouncer.pid')}`,
      'server_reset_query =',
      // After a failed server login PgBouncer refuses every client for this
      // long (default 15 s): a database back from a restart would wait for it
      // (docs/operations/deploying.md#poolers).
      'server_login_retry = 0.25',
      '',
    ].join('\n'),
    { mode: 0o644 },
  );
  // PgBouncer refuses to run as root: run it as the postgres user then.
  const ids = postgresUser();
  if (ids) fs.chownSync(dir, ids.uid, ids.gid);
  const launch = async (): Promise<ChildProcess> => {
    const child = spawn(PGBOUNCER_BINARY, [path.join(dir, 'pgbouncer.ini')], {
      stdio: ['ignore', 'ignore', 'pipe'],
      ...(ids ?? {}),
    });
    let stderr = '';
    child.stderr?.on('data', (d: Buffer) => (stderr += d.toString()));
    const log = () => stderr + (fs.existsSync(logFile) ? fs.readFileSync(logFile, 'utf8').slice(-2000) : '');
    try {
      await waitForPort(port, child, log);
    } catch (err) {
      child.kill('SIGKILL');
      throw err;
    }
    return child;
  };
  const stopChild = (child: ChildProcess, signal: NodeJS.Signals) =>
    new Promise<void>((resolve) => {
      if (child.exitCode !== null || child.signalCode !== null) return resolve();
      child.once('exit', () => resolve());
      child.kill(signal);
    });
  let child: ChildProcess;
  try {
    child = await launch();
  } catch (err) {
    fs.rmSync(dir, { recursive: true, force: true });
    throw err;
  }
  const url = Object.assign(new URL(databaseUrl), { port: String(port) }).toString();
  return {
    url,
    async restart() {
      // SIGTERM: immediate shutdown (every client connection closed), as a crash or an upgrade does.
      await stopChild(child, 'SIGTERM');
      child = await launch();
    },
    stop: async () => {
      await stopChild(child, 'SIGINT');
      fs.rmSync(dir, { recursive: true, force: true });
    },
  };
}

// A PostgreSQL 15 primary and its synchronous streaming standby (Debian's
// /usr/lib/postgresql/15/bin, run as the `postgres` OS user when we are root,
// as .ci/run does): initdb, pg_basebackup -R, synchronous_standby_names, so
// that a commit is acknowledged only once the standby has it. The primary
// can be killed (SIGKILL of its postmaster: no shutdown, no checkpoint) and
// the standby promoted (pg_ctl promote). Used by test/process/failover.test.ts;
// test/process/replicas.test.ts uses the standby as a read replica
// (asynchronous, applying WAL late: ReplicationOptions), stopped and started.
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import postgres from 'postgres';
import { pg15Program } from '../../gateway/tooling/pg15.ts';
import { freePort, waitUntil } from './processes.ts';

export interface Node {
  port: number;
  data: string;
  /** A single-host URL of the node's `app` database. */
  url: string;
}

export interface ReplicatedPair {
  primary: Node;
  standby: Node;
  /** `postgres://postgres@h:p1,h:p2/app?target_session_attrs=read-write`, in the order given. */
  multiHostUrl(order?: Node[]): string;
  /** SIGKILL of the primary's postmaster (its backends die with it: postmaster death). */
  killPrimary(): void;
  /** pg_ctl stop -m immediate of the standby (its connections cut at once). */
  stopStandby(): void;
  /** pg_ctl start of the standby again, waiting until it accepts connections. */
  startStandby(): void;
  /** SIGSTOP (true) or SIGCONT (false) of the standby's postmaster and its processes: a replica that stops answering without closing anything. */
  freezeStandby(frozen: boolean): void;
  /** pg_ctl promote of the standby, waiting until it takes writes. */
  promoteStandby(): Promise<void>;
  dispose(): Promise<void>;
}

export const pg15Installed = Boolean(pg15Program('pg_ctl') && pg15Program('initdb') && fs.existsSync('/usr/lib/postgresql/15/bin/pg_basebackup'));

const asRoot = process.getuid?.() === 0;

function run(program: string, args: string[]): string {
  const quoted = [program, ...args].map((a) => `'${a.replaceAll("'", `'\\''`)}'`).join(' ');
  const result = asRoot ? spawnSync('su', ['postgres', '-s', '/bin/sh', '-c', quoted], { encoding: 'utf8' }) : spawnSync(program, args, { encoding: 'utf8' });
  if (result.status !== 0) throw new Error(`${path.basename(program)}: ${result.stderr || result.stdout}`);
  return result.stdout;
}

const bin = (name: string) => path.join('/usr/lib/postgresql/15/bin', name);

function postmasterPid(data: string): number | null {
  try {
    return Number(fs.readFileSync(path.join(data, 'postmaster.pid'), 'utf8').split('\n')[0]) || null;
  } catch {
    return null;
  }
}

export interface ReplicationOptions {
  /** false: asynchronous replication (a read replica); default synchronous_standby_names = '*'. */
  synchronous?: boolean;
  /** The standby's recovery_min_apply_delay: it replays each commit this long after the primary made it. */
  applyDelayMs?: number;
}

/** The processes whose parent is `pid` (a postmaster's backends and auxiliary processes), from /proc. */
function childrenOf(pid: number): number[] {
  const children: number[] = [];
  for (const entry of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = fs.readFileSync(`/proc/${entry}/stat`, 'utf8');
      // pid (comm) state ppid ...: comm may hold spaces, so read after its last ')'.
      const ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
      if (ppid === pid) children.push(Number(entry));
    } catch {
      // gone meanwhile
    }
  }
  return children;
}

export async function startReplicatedPair(dir: string, { synchronous = true, applyDelayMs = 0 }: ReplicationOptions = {}): Promise<ReplicatedPair> {
  fs.mkdirSync(dir, { recursive: true, mode: 0o755 });
  if (asRoot) spawnSync('chown', ['postgres:', dir]);
  const node = (name: string): Node => {
    const port = freePort();
    return { port, data: path.join(dir, name), url: `postgres://postgres@127.0.0.1:${port}/app` };
  };
  const primary = node('primary');
  const standby = node('standby');
  const options = (n: Node) =>
    `-p ${n.port} -c listen_addresses=127.0.0.1 -c unix_socket_directories=${dir} -c fsync=off -c max_connections=200 -c wal_level=replica -c max_wal_senders=5 -c hot_standby=on -c wal_receiver_status_interval=1s`;
  const start = (n: Node) => run(bin('pg_ctl'), ['-D', n.data, '-l', `${n.data}.log`, '-w', 'start', '-o', options(n)]);

  run(bin('initdb'), ['-D', primary.data, '-U', 'postgres', '--auth=trust', '-E', 'UTF8', '--locale=C', '--no-sync']);
  fs.appendFileSync(path.join(primary.data, 'pg_hba.conf'), 'host replication all 127.0.0.1/32 trust\n');
  start(primary);
  const admin = postgres(`postgres://postgres@127.0.0.1:${primary.port}/postgres`, { max: 1, onnotice: () => {} });
  await admin`create database app`;
  await admin.end();
  run(bin('pg_basebackup'), ['-h', '127.0.0.1', '-p', String(primary.port), '-U', 'postgres', '-D', standby.data, '-R', '-X', 'stream', '--checkpoint=fast', '--no-sync']);
  if (applyDelayMs > 0) fs.appendFileSync(path.join(standby.data, 'postgresql.auto.conf'), `recovery_min_apply_delay = '${applyDelayMs}ms'\n`);
  start(standby);
  // Synchronous from now on (not before: with no standby yet, every commit would wait): a commit is acknowledged once the standby has flushed it.
  const check = postgres(primary.url, { max: 1, onnotice: () => {} });
  if (synchronous) {
    await check`alter system set synchronous_standby_names = '*'`;
    await check`select pg_reload_conf()`;
  }
  const state = synchronous ? 'sync' : 'async';
  await waitUntil(async () => (await check`select count(*)::int as n from pg_stat_replication where sync_state = ${state}`)[0]!.n === 1, 20_000, `a ${state} standby`);
  await check.end();

  return {
    primary,
    standby,
    multiHostUrl: (order = [primary, standby]) =>
      `postgres://postgres@${order.map((n) => `127.0.0.1:${n.port}`).join(',')}/app?target_session_attrs=read-write`,
    killPrimary() {
      const pid = postmasterPid(primary.data);
      if (!pid) throw new Error('the primary is not running');
      process.kill(pid, 'SIGKILL');
    },
    stopStandby() {
      run(bin('pg_ctl'), ['-D', standby.data, '-m', 'immediate', 'stop']);
    },
    startStandby() {
      start(standby);
    },
    freezeStandby(frozen) {
      const pid = postmasterPid(standby.data);
      if (!pid) throw new Error('the standby is not running');
      for (const p of [pid, ...childrenOf(pid)]) process.kill(p, frozen ? 'SIGSTOP' : 'SIGCONT');
    },
    async promoteStandby() {
      run(bin('pg_ctl'), ['-D', standby.data, '-w', 'promote']);
      const sql = postgres(standby.url, { max: 1, onnotice: () => {} });
      await waitUntil(async () => !(await sql`select pg_is_in_recovery() as r`)[0]!.r, 10_000, 'the standby promoted');
      await sql.end();
    },
    async dispose() {
      for (const n of [primary, standby]) {
        const pid = postmasterPid(n.data);
        if (pid) {
          try {
            process.kill(pid, 'SIGKILL');
          } catch {
            // gone
          }
        }
      }
      // Orphaned backends of a killed postmaster end by themselves (postmaster death); give them a moment.
      await new Promise((r) => setTimeout(r, 200));
      fs.rmSync(dir, { recursive: true, force: true });
    },
  };
}

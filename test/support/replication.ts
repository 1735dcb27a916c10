// A PostgreSQL 15 primary and its synchronous streaming standby (Debian's
// /usr/lib/postgresql/15/bin, run as the `postgres` OS user when we are root,
// as .ci/run does): initdb, pg_basebackup -R, synchronous_standby_names, so
// that a commit is acknowledged only once the standby has it. The primary
// can be killed (SIGKILL of its postmaster: no shutdown, no checkpoint) and
// the standby promoted (pg_ctl promote). Used by test/process/failover.test.ts;
// test/process/replicas.test.ts uses the standby as a read replica
// (asynchronous, applying WAL late: ReplicationOptions), stopped and started.
import fs from 'node:fs';
import path from 'node:path';
import postgres from 'postgres';
import { pg15Program, runAsPostgres } from '../../gateway/tooling/pg15.ts';
import { postgresUser } from '../../gateway/core/process/postgres-binaries.ts';
import { freePort, waitUntil } from './processes.ts';

export interface Node {
  port: number;
  data: string;
  /** A single-host URL of the node's `app` database. */
  url: string;
}

/** The moments of a planned switchover (Date.now()), and how long its steps took. */
export interface Switchover {
  /** The old primary refuses new writes (default_transaction_read_only reloaded). */
  readOnlyAt: number;
  /** No transaction begun before that is still open on it. */
  drainedAt: number;
  /** The old primary stopped (fast: its connections closed). */
  stoppedAt: number;
  /** The standby promoted: it takes writes. */
  promotedAt: number;
  /** The old primary streaming from the new one, and replication synchronous again. */
  rejoinedAt: number;
}

export interface ReplicatedPair {
  /** The node that takes writes now (a switchover swaps the two). */
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
  /**
   * A planned switchover (docs/operations/failover.md#planned-switchover), nothing
   * acknowledged lost: the primary made read-only (ALTER SYSTEM SET
   * default_transaction_read_only = on, reloaded: new transactions only),
   * every transaction begun before that waited for, the standby's replay
   * checked up to the primary's last WAL position, the primary stopped
   * (fast), the standby promoted, the old primary started as a standby of
   * the new one, and replication made synchronous again. `primary` and
   * `standby` swap.
   */
  switchover(onPromoted?: () => void): Promise<Switchover>;
  dispose(): Promise<void>;
}

export const pg15Installed = Boolean(pg15Program('pg_ctl') && pg15Program('initdb') && fs.existsSync('/usr/lib/postgresql/15/bin/pg_basebackup'));


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

/**
 * The first steps of a planned switchover (docs/operations/failover.md#planned-switchover)
 * on the primary at `url` (a superuser's): it refuses new writes
 * (ALTER SYSTEM SET default_transaction_read_only = on, reloaded; a write
 * then fails with SQLSTATE 25006, nothing written, which the gateway answers
 * 503), and every transaction begun before that, which may still write and
 * COMMIT, has ended. After this, stopping it cuts no COMMIT of a write.
 */
export async function drainWrites(url: string): Promise<{ readOnlyAt: number; drainedAt: number }> {
  const sql = postgres(url, { max: 1, onnotice: () => {} });
  try {
    await sql`alter system set default_transaction_read_only = on`;
    await sql`select pg_reload_conf()`;
    // The postmaster reloads, then signals its backends: once a new backend (forked after the reload) sees the setting, every backend has been signalled, and applies it before its next statement.
    await waitUntil(
      async () => {
        const fresh = postgres(url, { max: 1, onnotice: () => {} });
        try {
          return (await fresh<{ on: string }[]>`select current_setting('default_transaction_read_only') as on`)[0]!.on === 'on';
        } finally {
          await fresh.end();
        }
      },
      10_000,
      'the primary read-only',
    );
    const readOnlyAt = Date.now();
    // One that has not written yet has no backend_xid: its start time says it began before.
    const since = (await sql<{ since: Date }[]>`select clock_timestamp() as since`)[0]!.since;
    for (;;) {
      const [open] = await sql<{ n: number }[]>`
        select count(*)::int as n from pg_stat_activity
         where backend_type = 'client backend' and pid <> pg_backend_pid() and xact_start < ${since}`;
      if (open!.n === 0) break;
      await new Promise((r) => setTimeout(r, 10));
    }
    return { readOnlyAt, drainedAt: Date.now() };
  } finally {
    await sql.end();
  }
}

export async function startReplicatedPair(dir: string, { synchronous = true, applyDelayMs = 0 }: ReplicationOptions = {}): Promise<ReplicatedPair> {
  fs.mkdirSync(dir, { recursive: true, mode: 0o755 });
  const owner = postgresUser();
  if (owner) fs.chownSync(dir, owner.uid, owner.gid);
  const node = (name: string): Node => {
    const port = freePort();
    return { port, data: path.join(dir, name), url: `postgres://postgres@127.0.0.1:${port}/app` };
  };
  const primary = node('primary');
  const standby = node('standby');
  const options = (n: Node) =>
    `-p ${n.port} -c listen_addresses=127.0.0.1 -c unix_socket_directories=${dir} -c fsync=off -c max_connections=200 -c wal_level=replica -c max_wal_senders=5 -c hot_standby=on -c wal_receiver_status_interval=1s`;
  const start = (n: Node) => runAsPostgres(bin('pg_ctl'), ['-D', n.data, '-l', `${n.data}.log`, '-w', 'start', '-o', options(n)]);

  runAsPostgres(bin('initdb'), ['-D', primary.data, '-U', 'postgres', '--auth=trust', '-E', 'UTF8', '--locale=C', '--no-sync']);
  fs.appendFileSync(path.join(primary.data, 'pg_hba.conf'), 'host replication all 127.0.0.1/32 trust\n');
  start(primary);
  const admin = postgres(`postgres://postgres@127.0.0.1:${primary.port}/postgres`, { max: 1, onnotice: () => {} });
  await admin`create database app`;
  await admin.end();
  runAsPostgres(bin('pg_basebackup'), ['-h', '127.0.0.1', '-p', String(primary.port), '-U', 'postgres', '-D', standby.data, '-R', '-X', 'stream', '--checkpoint=fast', '--no-sync']);
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

  const adminUrl = (n: Node) => `postgres://postgres@127.0.0.1:${n.port}/postgres`;
  const nodes = { primary, standby };

  /** pg_ctl promote of a standby, waiting until it takes writes. */
  async function promote(node: Node): Promise<void> {
    runAsPostgres(bin('pg_ctl'), ['-D', node.data, '-w', 'promote']);
    const sql = postgres(node.url, { max: 1, onnotice: () => {} });
    try {
      await waitUntil(async () => !(await sql`select pg_is_in_recovery() as r`)[0]!.r, 10_000, 'the standby promoted');
    } finally {
      await sql.end();
    }
  }

  async function switchover(onPromoted: () => void = () => {}): Promise<Switchover> {
    const old = nodes.primary;
    const next = nodes.standby;
    const sql = postgres(adminUrl(old), { max: 1, onnotice: () => {} });
    const replica = postgres(adminUrl(next), { max: 1, onnotice: () => {} });
    let readOnlyAt = 0;
    let drainedAt = 0;
    try {
      // 1-2. No new write, and every transaction that could still write ended.
      ({ readOnlyAt, drainedAt } = await drainWrites(adminUrl(old)));
      // 3. The standby has everything (synchronous replication says so already; checked all the same).
      const lsn = (await sql<{ lsn: string }[]>`select pg_current_wal_lsn()::text as lsn`)[0]!.lsn;
      await waitUntil(
        async () => (await replica<{ behind: boolean }[]>`select pg_wal_lsn_diff(${lsn}::pg_lsn, pg_last_wal_replay_lsn()) > 0 as behind`)[0]!.behind === false,
        10_000,
        'the standby replaying up to the primary',
      );
    } finally {
      await sql.end();
    }
    // 4. Stop the old primary (fast: its sessions are ended, its last WAL, the shutdown checkpoint, sent to the standby), 5. promote the standby.
    runAsPostgres(bin('pg_ctl'), ['-D', old.data, '-m', 'fast', '-w', 'stop']);
    const stoppedAt = Date.now();
    await promote(next);
    const promotedAt = Date.now();
    onPromoted();
    // 6. The old primary follows the new one (its own WAL ends where the new timeline starts): writable again later, a standby now.
    const autoConf = path.join(old.data, 'postgresql.auto.conf');
    const kept = fs
      .readFileSync(autoConf, 'utf8')
      .split('\n')
      .filter((line) => !/^\s*(default_transaction_read_only|synchronous_standby_names|primary_conninfo)\b/.test(line));
    fs.writeFileSync(autoConf, [...kept, `primary_conninfo = 'host=127.0.0.1 port=${next.port} user=postgres application_name=${path.basename(old.data)}'`, ''].join('\n'));
    fs.writeFileSync(path.join(old.data, 'standby.signal'), '');
    start(old);
    // 7. Synchronous again once it streams (not before: every commit would wait for a standby not there yet).
    await waitUntil(async () => (await replica`select count(*)::int as n from pg_stat_replication where state = 'streaming'`)[0]!.n === 1, 30_000, 'the old primary streaming');
    await replica`alter system set synchronous_standby_names = '*'`;
    await replica`select pg_reload_conf()`;
    await waitUntil(async () => (await replica`select count(*)::int as n from pg_stat_replication where sync_state = 'sync'`)[0]!.n === 1, 10_000, 'a sync standby again');
    await replica.end();
    nodes.primary = next;
    nodes.standby = old;
    return { readOnlyAt, drainedAt, stoppedAt, promotedAt, rejoinedAt: Date.now() };
  }

  return {
    get primary() {
      return nodes.primary;
    },
    get standby() {
      return nodes.standby;
    },
    switchover,
    multiHostUrl: (order = [primary, standby]) =>
      `postgres://postgres@${order.map((n) => `127.0.0.1:${n.port}`).join(',')}/app?target_session_attrs=read-write`,
    killPrimary() {
      const pid = postmasterPid(nodes.primary.data);
      if (!pid) throw new Error('the primary is not running');
      process.kill(pid, 'SIGKILL');
    },
    stopStandby() {
      runAsPostgres(bin('pg_ctl'), ['-D', nodes.standby.data, '-m', 'immediate', 'stop']);
    },
    startStandby() {
      start(nodes.standby);
    },
    freezeStandby(frozen) {
      const pid = postmasterPid(nodes.standby.data);
      if (!pid) throw new Error('the standby is not running');
      for (const p of [pid, ...childrenOf(pid)]) process.kill(p, frozen ? 'SIGSTOP' : 'SIGCONT');
    },
    promoteStandby: () => promote(nodes.standby),
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

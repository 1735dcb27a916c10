// pg_auto_failover on one machine (Debian's postgresql-15-auto-failover,
// /usr/bin/pg_autoctl): a monitor and two PostgreSQL 15 nodes, each run by
// its own `pg_autoctl run` in a process group of its own (as the `postgres`
// OS user when we are root), the nodes made with --auth trust and --no-ssl,
// their configuration and state kept inside the folder (XDG_CONFIG_HOME,
// XDG_DATA_HOME, XDG_RUNTIME_DIR).
//
// The monitor's failure detection is one of three profiles (MONITOR_PROFILES,
// docs/operations/failover.md#with-pg_auto_failover):
//   default  pg_auto_failover's own (health checks every 5 s, a node
//            unhealthy after 20 s without a report, 30 s for the old primary
//            to demote itself before the standby is promoted)
//   safe     what the docs recommend: about half of each (a node unhealthy
//            after 10 s; the keepers' network_partition_timeout lowered to
//            10 s, primary_demote_timeout 15 s above it)
//   fast     health checks every 0.5 s, a node unhealthy after 1 s, 1 s to
//            demote: a failover within seconds on an idle machine, and
//            failovers of a healthy primary on a busy one (the docs listed
//            these once)
//
//   failover    the primary's machine dies: SIGKILL of its `pg_autoctl run`
//               process group (the keeper and its Postgres together; killing
//               Postgres alone, the keeper would restart it), and the monitor
//               fails over by itself; then the node is started again and
//               rejoins as a standby
//   switchover  `pg_autoctl perform switchover`: its primary goes to
//               `draining`, which stops Postgres (fast) at once, COMMITs in
//               flight included; `drained`: the primary first made read-only
//               and drained (drainWrites in test/support/replication.ts, the
//               first steps of docs/operations/failover.md#planned-switchover)
//   stall       the primary's machine stops for `seconds` and goes on (SIGSTOP,
//               then SIGCONT, of its process group: a VM paused, an I/O
//               stall, a swap storm): a healthy primary, which a failover
//               would be a false one of
//   failovers   how many failovers the monitor began since a moment (its
//               events with a node's goal set to prepare_promotion): a calm
//               phase with no fault injected must have none
//
// Used by `npm run bench -- failover` (test/bench/failover.bench.ts) through
// test/support/outage.ts.
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import postgres from 'postgres';
import { freePort, waitUntil } from './processes.ts';
import { drainWrites } from './replication.ts';
import { postgresUser } from '../../gateway/core/process/postgres-binaries.ts';

export const pgAutoctlInstalled = fs.existsSync('/usr/bin/pg_autoctl') && fs.existsSync('/usr/lib/postgresql/15/bin/pg_ctl');

const PG_CTL = '/usr/lib/postgresql/15/bin/pg_ctl';

/** A profile of the monitor's failure detection (pgautofailover.* settings) and the keepers' partition timeout. */
export interface FailoverProfile {
  monitor: Record<string, string>;
  /** `pg_autoctl config set` on each node before it runs (timeout.network_partition_timeout). */
  keeper: Record<string, string>;
}

export type FailoverProfileName = 'default' | 'safe' | 'fast';

export const MONITOR_PROFILES: Record<FailoverProfileName, FailoverProfile> = {
  default: { monitor: {}, keeper: {} },
  safe: {
    monitor: {
      'pgautofailover.health_check_period': '2000',
      'pgautofailover.health_check_timeout': '2000',
      'pgautofailover.health_check_max_retries': '2',
      'pgautofailover.health_check_retry_delay': '1000',
      'pgautofailover.node_considered_unhealthy_timeout': '10000',
      'pgautofailover.primary_demote_timeout': '15000',
    },
    keeper: { 'timeout.network_partition_timeout': '10' },
  },
  fast: {
    monitor: {
      'pgautofailover.health_check_period': '500',
      'pgautofailover.health_check_timeout': '500',
      'pgautofailover.health_check_max_retries': '1',
      'pgautofailover.health_check_retry_delay': '200',
      'pgautofailover.node_considered_unhealthy_timeout': '1000',
      'pgautofailover.primary_demote_timeout': '1000',
      'pgautofailover.startup_grace_period': '1000',
    },
    keeper: {},
  },
};

export interface AutoFailoverNode {
  name: string;
  port: number;
  data: string;
}

export interface AutoFailoverCluster {
  /** The formation's URL (`pg_autoctl show uri --formation default`) with the user: multi-host, target_session_attrs=read-write. */
  url: string;
  nodes: AutoFailoverNode[];
  /** The node the monitor has as primary, and when it takes writes (Date.now()). */
  failover(onWritable: () => void): Promise<Record<string, number>>;
  switchover(onWritable: () => void, drained: boolean): Promise<Record<string, number>>;
  /** The primary's machine stopped for `seconds` (its process group SIGSTOPped), then going on: when it stopped and when it went on. */
  stall(seconds: number): Promise<Record<string, number>>;
  /** Failovers the monitor began since `since` (Date.now()): its events setting a node's goal to prepare_promotion (not the node's report of it). */
  failoversSince(since: number): Promise<number>;
  /** The monitor's events since `since`: each a time (ms after it), a node, its reported and goal states, and the monitor's description. */
  eventsSince(since: number): Promise<string[]>;
  dispose(): Promise<void>;
}

export async function startAutoFailover(dir: string, profile: FailoverProfile = MONITOR_PROFILES.safe): Promise<AutoFailoverCluster> {
  fs.mkdirSync(dir, { recursive: true, mode: 0o755 });
  const user = postgresUser();
  if (user) fs.chownSync(dir, user.uid, user.gid);
  const env = {
    PATH: `/usr/lib/postgresql/15/bin:${process.env.PATH ?? '/usr/bin:/bin'}`,
    HOME: dir,
    XDG_CONFIG_HOME: path.join(dir, 'config'),
    XDG_DATA_HOME: path.join(dir, 'share'),
    XDG_RUNTIME_DIR: path.join(dir, 'run'),
    PG_CONFIG: '/usr/lib/postgresql/15/bin/pg_config',
  };
  const options = { env, cwd: dir, ...(user ?? {}) };
  const autoctl = (args: string[]): string => {
    const result = spawnSync('pg_autoctl', args, { ...options, encoding: 'utf8' });
    if (result.status !== 0) throw new Error(`pg_autoctl ${args.slice(0, 2).join(' ')}: ${result.stderr || result.stdout}`);
    return result.stdout;
  };
  /** `pg_autoctl run` of each data folder: its process group is the node's machine. */
  const running = new Map<string, ChildProcess>();
  const run = (data: string) => {
    const log = fs.openSync(`${data}.log`, 'a');
    const child = spawn('pg_autoctl', ['run', '--pgdata', data], { ...options, detached: true, stdio: ['ignore', log, log] });
    fs.closeSync(log);
    running.set(data, child);
  };
  const signalGroup = (data: string, signal: NodeJS.Signals) => {
    const pid = running.get(data)?.pid;
    if (pid) process.kill(-pid, signal);
  };
  const killGroup = (data: string) => {
    const child = running.get(data);
    running.delete(data);
    if (!child?.pid) return;
    try {
      process.kill(-child.pid, 'SIGKILL');
    } catch {
      // gone
    }
  };

  const monitorPort = freePort();
  const monitorData = path.join(dir, 'monitor');
  const common = ['--hostname', '127.0.0.1', '--auth', 'trust', '--no-ssl', '--pgctl', PG_CTL];
  const nodes: AutoFailoverNode[] = [];
  let monitor: postgres.Sql | undefined;
  const dispose = async () => {
    for (const data of [...running.keys()]) killGroup(data);
    await monitor?.end({ timeout: 1 }).catch(() => {});
    // Orphaned backends of a killed postmaster end by themselves (postmaster death); give them a moment.
    await new Promise((r) => setTimeout(r, 300));
    fs.rmSync(dir, { recursive: true, force: true });
  };
  try {
    autoctl(['create', 'monitor', '--pgdata', monitorData, '--pgport', String(monitorPort), ...common]);
    run(monitorData);
    monitor = postgres(`postgres://postgres@127.0.0.1:${monitorPort}/pg_auto_failover`, { max: 1, onnotice: () => {} });
    const mon = monitor;
    await waitUntil(async () => mon`select 1`.then(() => true, () => false), 30_000, 'the pg_auto_failover monitor');
    for (const [name, value] of Object.entries(profile.monitor)) await mon.unsafe(`alter system set ${name} = '${value}'`);
    await mon`select pg_reload_conf()`;
    const monitorUri = `postgres://autoctl_node@127.0.0.1:${monitorPort}/pg_auto_failover?sslmode=disable`;
    const states = async () =>
      (await mon<{ name: string; reported: string; goal: string }[]>`select nodename as name, reportedstate::text as reported, goalstate::text as goal from pgautofailover.node order by nodeid`).map(
        (r) => `${r.name}:${r.reported}/${r.goal}`,
      );
    const stable = async () => {
      const s = await states();
      return s.length === 2 && s.filter((x) => /:primary\/primary$/.test(x)).length === 1 && s.filter((x) => /:secondary\/secondary$/.test(x)).length === 1;
    };
    for (const name of ['node1', 'node2']) {
      const node = { name, port: freePort(), data: path.join(dir, name) };
      autoctl(['create', 'postgres', '--pgdata', node.data, '--pgport', String(node.port), '--name', name, '--dbname', 'app', '--monitor', monitorUri, ...common]);
      for (const [key, value] of Object.entries(profile.keeper)) autoctl(['config', 'set', '--pgdata', node.data, key, value]);
      run(node.data);
      nodes.push(node);
      await waitUntil(async () => (await states()).some((s) => s.startsWith(`${name}:`) && /:(single|primary|secondary)\/(single|primary|secondary)$/.test(s)), 60_000, `${name} running`);
    }
    await waitUntil(stable, 60_000, 'a primary and a secondary');
    // The URL the formation gives, for the `postgres` user; --no-ssl nodes: no TLS (node-postgres reads sslmode=prefer as require).
    const uri = autoctl(['show', 'uri', '--pgdata', monitorData, '--formation', 'default']).trim();
    const url = uri.replace(/^postgres(ql)?:\/\//, 'postgres://postgres@').replace('sslmode=prefer', 'sslmode=disable');

    const primaryNode = async () => {
      const [row] = await mon<{ port: number }[]>`select nodeport as port from pgautofailover.node where reportedstate = 'primary' and goalstate = 'primary'`;
      const node = nodes.find((n) => n.port === row?.port);
      if (!node) throw new Error(`no primary: ${(await states()).join(', ')}`);
      return node;
    };
    /** Polls `node` until it takes writes (out of recovery, default_transaction_read_only off): when it left recovery and when it took writes. */
    const watchWritable = async (node: AutoFailoverNode, onWritable: () => void) => {
      const sql = postgres(`postgres://postgres@127.0.0.1:${node.port}/app`, { max: 1, onnotice: () => {}, connect_timeout: 1 });
      let promoted = 0;
      try {
        for (const started = Date.now(); Date.now() - started < 120_000; ) {
          const row = await sql<{ recovery: boolean; ro: string }[]>`select pg_is_in_recovery() as recovery, current_setting('default_transaction_read_only') as ro`.then(
            ([r]) => r,
            () => undefined,
          );
          if (row && !row.recovery && !promoted) promoted = Date.now();
          if (row && !row.recovery && row.ro === 'off') {
            onWritable();
            return { promoted, writable: Date.now() };
          }
          await new Promise((r) => setTimeout(r, 25));
        }
        throw new Error(`${node.name} never took writes: ${(await states()).join(', ')}`);
      } finally {
        await sql.end({ timeout: 1 });
      }
    };

    return {
      url,
      nodes,
      async failover(onWritable) {
        const old = await primaryNode();
        const other = nodes.find((n) => n !== old)!;
        const watching = watchWritable(other, onWritable);
        const killed = Date.now();
        killGroup(old.data);
        const { promoted, writable } = await watching;
        // The machine comes back: its keeper finds it demoted and makes it the new primary's standby.
        run(old.data);
        await waitUntil(stable, 120_000, `${old.name} back as a standby`);
        return { killed, promoted, writable, rejoined: Date.now() };
      },
      async switchover(onWritable, drained) {
        const old = await primaryNode();
        const other = nodes.find((n) => n !== old)!;
        const watching = watchWritable(other, onWritable);
        const started = Date.now();
        // pg_autoctl sets default_transaction_read_only itself (ALTER SYSTEM) when the node is promoted again later.
        const drain = drained ? await drainWrites(`postgres://postgres@127.0.0.1:${old.port}/postgres`) : null;
        const performing = new Promise<void>((resolve, reject) => {
          const child = spawn('pg_autoctl', ['perform', 'switchover', '--pgdata', monitorData, '--formation', 'default'], { ...options, stdio: ['ignore', 'pipe', 'pipe'] });
          let output = '';
          child.stdout.on('data', (d: Buffer) => (output += d.toString()));
          child.stderr.on('data', (d: Buffer) => (output += d.toString()));
          child.on('exit', (code) => (code === 0 ? resolve() : reject(new Error(`pg_autoctl perform switchover: exit ${code}\n${output}`))));
        });
        const [{ promoted, writable }] = await Promise.all([watching, performing]);
        await waitUntil(stable, 120_000, `${old.name} back as a standby`);
        return { started, ...(drain ? { readOnly: drain.readOnlyAt, drained: drain.drainedAt } : {}), promoted, writable, rejoined: Date.now() };
      },
      async stall(seconds) {
        const node = await primaryNode();
        const stopped = Date.now();
        signalGroup(node.data, 'SIGSTOP');
        try {
          await new Promise((r) => setTimeout(r, seconds * 1000));
        } finally {
          signalGroup(node.data, 'SIGCONT');
        }
        const resumed = Date.now();
        // A failover begun meanwhile (a false one) runs its course: a primary and a secondary again.
        await waitUntil(stable, 120_000, 'a primary and a secondary after the stall');
        return { stopped, resumed, settled: Date.now() };
      },
      async failoversSince(since) {
        const [row] = await mon<{ n: number }[]>`
          select count(*)::int as n from pgautofailover.event
           where goalstate = 'prepare_promotion' and reportedstate <> 'prepare_promotion' and eventtime >= to_timestamp(${since / 1000})`;
        return row?.n ?? 0;
      },
      async eventsSince(since) {
        const rows = await mon<{ ms: number; node: string; reported: string; goal: string; description: string | null }[]>`
          select (extract(epoch from eventtime) * 1000 - ${since})::int as ms, nodename as node, reportedstate::text as reported,
                 goalstate::text as goal, description
            from pgautofailover.event where eventtime >= to_timestamp(${since / 1000}) order by eventid`;
        return rows.map((r) => `+${(r.ms / 1000).toFixed(1)} s ${r.node} ${r.reported}/${r.goal}: ${r.description ?? ''}`);
      },
      dispose,
    };
  } catch (err) {
    await dispose();
    throw err;
  }
}

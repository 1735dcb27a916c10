// Database faults under load, measured: shared by test/process/outage.test.ts
// and `npm run bench -- faults`. No Vitest here (the bench runs outside it).
//
//   1. A Postgres of its own that can be stopped, killed, frozen and started
//      again: the embedded Postgres 18, or Debian's PostgreSQL 15 when
//      `server` says so; optionally behind Debian's PgBouncer in transaction
//      mode (test/support/pgbouncer.ts), the gateway then using
//      DATABASE_POOL_MODE=transaction and DATABASE_DIRECT_URL.
//   2. A real gateway process on it (`npm start`'s entry point, DATABASE_URL;
//      WEB_CONCURRENCY processes), with the default statement timeout (5 s:
//      what an operator who sets nothing gets) and the realtime safety poll
//      off, so that a change reaching a stream soon after a fault can only
//      have come through LISTEN.
//   3. `clients` users each reading their profile in a loop (a new request as
//      soon as the last is answered), or, with `writes`, alternating that read
//      with the creation of a task with a unique title (every other client
//      sends an Idempotency-Key); one SSE stream open throughout.
//   4. The faults, one after the other, each measured on its own:
//        stop               `pg_ctl stop -m fast` (every backend terminated in the
//                           middle of requests), started again `seconds` later
//        immediate          `pg_ctl stop -m immediate` (as a crash: crash recovery at
//                           the next start), started again `seconds` later
//        freeze             SIGSTOP of the postmaster and every backend (a hung
//                           disk, a network partition: connections stay open and
//                           nothing answers), SIGCONT `seconds` later
//        pgbouncer-restart  PgBouncer stopped at once and started again on its port
//        failover           (server 'pg15-standby': a PostgreSQL 15 primary and its
//                           synchronous standby, the gateway on a multi-host
//                           DATABASE_URL with target_session_attrs=read-write)
//                           SIGKILL of the primary's postmaster, the standby
//                           promoted `seconds` later; "back" is the promotion
//        switchover         (server 'pg15-standby') a planned switchover: the
//                           primary made read-only, drained, stopped, the standby
//                           promoted, the old primary rejoining as its standby
//                           (ReplicatedPair.switchover); "back" is the promotion
//        calm               nothing at all for `seconds` (server 'pg-auto-failover':
//                           a failover the monitor begins meanwhile is a false one)
//        stall              (server 'pg-auto-failover') the primary's machine stopped
//                           for `seconds` (SIGSTOP of its keeper and Postgres), then
//                           going on: a failover begun for it is a false one
//      `killWorker`: one gateway process is SIGKILLed 0.5 s into the outage
//      (its replacement starts while the database is down: a stop lasts until
//      the replacement has found it down, however slow the machine).
//   5. Measured from the moment the database (or PgBouncer) is back: /health
//      200, the first profile answered 200, the first change delivered to the
//      stream (events are created every 100 ms from then on). And for every
//      write: whether it was saved, against what its answer said (a write
//      answered 201 and not saved is an acknowledged write lost).
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import postgres from 'postgres';
import { ensureDatabase, isAlive, startEmbeddedPostgres, type RunningPostgres } from '../../gateway/core/process/embedded-postgres.ts';
import { createLogger } from '../../gateway/core/process/log.ts';
import { DEFAULT_STATEMENT_TIMEOUT_MS } from '../../gateway/core/process/config.ts';
import { runMigrations } from '../../gateway/core/database/migrate.ts';
import { pg15Program, runAsPostgres } from '../../gateway/tooling/pg15.ts';
import { postgresUser } from '../../gateway/core/process/postgres-binaries.ts';
import { startPgBouncer, type RunningPgBouncer } from './pgbouncer.ts';
import { startReplicatedPair, type Switchover } from './replication.ts';
import { MONITOR_PROFILES, startAutoFailover, type FailoverProfileName } from './pg-auto-failover.ts';
import { freePort, startGatewayProcess, stopProcess, waitUntil, type GatewayProcess } from './processes.ts';

/** The gateway's statement timeout during the outage runs, its default: every answer is due within it + 2 s. */
export const OUTAGE_STATEMENT_TIMEOUT_MS = DEFAULT_STATEMENT_TIMEOUT_MS;
/** A client gives up on a request after this long (and counts it as unanswered). */
const CLIENT_TIMEOUT_MS = 30_000;
/** While the database is down or frozen, a request that was not already running is answered within this. */
export const FAIL_FAST_MS = 2_000;

export type FaultKind = 'stop' | 'immediate' | 'freeze' | 'pgbouncer-restart' | 'failover' | 'switchover' | 'calm' | 'stall';

export interface Fault {
  kind: FaultKind;
  /** How long the database stays down or frozen (0: started again at once). */
  seconds: number;
  /** SIGKILL one gateway process 0.5 s into the outage (with WEB_CONCURRENCY > 1). */
  killWorker?: boolean;
  /**
   * 'freeze': this many writes certain to be cut off. The load pauses until
   * nothing is in flight (the pool's connections are idle and open), Postgres
   * is frozen, then these writes go out on those connections, long before the
   * gateway's watch could find the database silent (it probes after 0.5 s and
   * waits 1 s): each one's BEGIN … COMMIT is sent and unread, so its outcome
   * is unknown to the gateway (504 outcome_unknown), and it is saved when
   * Postgres resumes. Then the load goes on, frozen.
   */
  cutOffWrites?: number;
  /** switchover on 'pg-auto-failover': the primary made read-only and drained first (on 'pg15-standby' it always is). */
  drained?: boolean;
}

export interface OutageOptions {
  /** A folder for the cluster's data (removed afterwards). */
  dir: string;
  clients: number;
  faults: Fault[];
  /**
   * 'embedded' (Postgres 18 from npm), 'pg15' (Debian's, /usr/lib/postgresql/15),
   * 'pg15-standby' (a PG15 primary and its synchronous standby: test/support/replication.ts),
   * or 'pg-auto-failover' (a monitor and two nodes: test/support/pg-auto-failover.ts).
   */
  server?: 'embedded' | 'pg15' | 'pg15-standby' | 'pg-auto-failover';
  /** 'pg-auto-failover': the monitor's failure detection (test/support/pg-auto-failover.ts; default 'safe'). */
  failoverProfile?: FailoverProfileName;
  /** The gateway's pool through PgBouncer in transaction mode. */
  pgbouncer?: boolean;
  /** Clients alternate reads and task creations (saved writes are checked against their answers). */
  writes?: boolean;
  /** WEB_CONCURRENCY of the gateway. */
  processes?: number;
  /** Extra environment for the gateway process. */
  env?: Record<string, string>;
  /** Before each fault, this many jobs added (due 1.5 s later, so across the fault), and counted as run after it. */
  jobs?: number;
}

export interface FaultReport {
  fault: string;
  server: string;
  requests: number;
  /** Answers by status, with the error code of 5xx answers (`504 outcome_unknown`). */
  byStatus: Record<string, number>;
  ok: number;
  /** Requests refused while the database was down (or coming back). */
  failedWhileDown: number;
  /** Requests answered 200 that were sent after the database was back. */
  okAfter: number;
  /** Requests refused though sent once the gateway served again (a pool that lost connections refuses them). */
  refusedAfter: number;
  /** Requests with no answer within the client's timeout, or a broken connection (but those in flight on a gateway process the test killed: cutByKill). */
  unanswered: string[];
  cutByKill: number;
  /** Gateway processes serving at the end of the fault (WEB_CONCURRENCY: all of them again). */
  processes: number;
  /** Answers other than success, 503 with Retry-After, or (for a write) 504 outcome_unknown. */
  unexpected: string[];
  longestMs: number;
  /** How long the 503 answers to requests sent while the database was down took: median and 95th percentile. */
  refusedP50Ms: number;
  refusedP95Ms: number;
  /** Requests sent while the database was down or frozen (FAIL_FAST_MS after it went) that took longer than FAIL_FAST_MS. */
  slowWhileDown: string[];
  healthBackMs: number;
  servedBackMs: number;
  listenBackMs: number;
  /** From the return to the first write answered 201 that was sent after it (-1: none). */
  writesBackMs: number;
  /** A failover's or switchover's steps, in ms from its start (a switchover's: readOnly, drained, stopped, promoted, rejoined). */
  steps: Record<string, number> | null;
  /** 'pg-auto-failover': the failovers the monitor began during the phase (a calm phase: false ones), and its events. */
  failovers: number | null;
  events: string[];
  /** Writes sent during this fault. */
  writes: number;
  /** Writes answered with a failure (not 504 outcome_unknown) that were saved all the same. */
  savedButFailed: string[];
  /** Writes answered 201 that are not in the database afterwards (acknowledged and lost). */
  ackedButMissing: string[];
  /** Writes answered 504 outcome_unknown: saved, and not saved. */
  unknownSaved: number;
  unknownLost: number;
  /** Gateway processes that ended, and whether the service is still up at the end. */
  gatewayAlive: boolean;
  /** Events created after the return that never reached the open stream. */
  streamGaps: string[];
  /** Events the stream delivered more than once. */
  streamDuplicates: string[];
  /** Jobs added (committed) just before the fault (OutageOptions.jobs), and those of them not run within 15 s of the return. */
  jobsAdded: number;
  jobsNotRun: string[];
  streamInOrder: boolean;
  summary: string;
}

export interface OutageRun {
  reports: FaultReport[];
  /** Lines the gateway logged at level error or above. */
  errorLines: string[];
  /** The gateway's whole output. */
  output: string;
}

/** A Postgres server that can be stopped, killed, frozen and started again on the same data. */
export interface Server {
  url: string;
  name: string;
  stop(mode: 'fast' | 'immediate'): Promise<void>;
  start(): Promise<void>;
  /** The postmaster and its children (SIGSTOP/SIGCONT). */
  pids(): number[];
  /**
   * 'pg15-standby': SIGKILL of the primary, and `seconds` later the standby
   * promoted; 'pg-auto-failover': the primary's machine killed, the monitor
   * failing over by itself. `onBack` is called as soon as a node takes
   * writes; the promise resolves with the moments of its steps (Date.now())
   * once the pair is whole again.
   */
  failover?(seconds: number, onBack: () => void): Promise<Record<string, number>>;
  /** A planned switchover ('pg15-standby': ReplicatedPair.switchover; 'pg-auto-failover': `pg_autoctl perform switchover`), as failover. */
  switchover?(seconds: number, onBack: () => void, drained: boolean): Promise<Record<string, number>>;
  /** Failovers begun since a moment (Date.now()), where the server has something that fails over by itself. */
  failoversSince?(since: number): Promise<number>;
  /** What that something recorded since a moment (pg_auto_failover's monitor events). */
  eventsSince?(since: number): Promise<string[]>;
  /** 'pg-auto-failover': the primary's machine stopped for `seconds`, then going on. */
  stall?(seconds: number): Promise<Record<string, number>>;
  dispose(): Promise<void>;
}

/** The postmaster of a data folder and every process it started. */
function clusterPids(dataDir: string): number[] {
  const pidFile = path.join(dataDir, 'postmaster.pid');
  if (!fs.existsSync(pidFile)) return [];
  const postmaster = Number(fs.readFileSync(pidFile, 'utf8').split('\n')[0]);
  const children: number[] = [];
  for (const entry of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = fs.readFileSync(`/proc/${entry}/stat`, 'utf8');
      if (Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]) === postmaster) children.push(Number(entry));
    } catch {
      // gone meanwhile
    }
  }
  return [postmaster, ...children];
}

async function embedded(dir: string): Promise<Server> {
  const port = freePort();
  const quiet = createLogger('silent');
  const clusterDir = path.join(dir, 'postgres');
  const start = () => startEmbeddedPostgres({ dir: clusterDir, port, persistent: true, log: quiet });
  let cluster: RunningPostgres | null = await start();
  await ensureDatabase(cluster.urlFor('postgres'), 'app');
  const dataDir = () => {
    // As root the cluster may live elsewhere (a folder user postgres can reach): find it by the postmaster's pid.
    const pid = cluster?.pid;
    const cwd = pid ? fs.readlinkSync(`/proc/${pid}/cwd`) : path.join(clusterDir, 'data');
    return cwd;
  };
  let data = dataDir();
  return {
    url: cluster.urlFor('app'),
    name: 'embedded Postgres 18',
    async stop(mode) {
      if (mode === 'immediate' && cluster?.pid) {
        const pid = cluster.pid;
        process.kill(pid, 'SIGQUIT');
        while (isAlive(pid)) await new Promise((r) => setTimeout(r, 20));
      }
      await cluster?.stop(); // SIGINT: fast shutdown (nothing left to do after SIGQUIT)
      cluster = null;
    },
    async start() {
      cluster = await start();
      data = dataDir();
    },
    pids: () => clusterPids(data),
    async dispose() {
      await cluster?.stop();
      fs.rmSync(dir, { recursive: true, force: true });
    },
  };
}

async function pg15(dir: string): Promise<Server> {
  const pgCtl = pg15Program('pg_ctl');
  const initdb = pg15Program('initdb');
  if (!pgCtl || !initdb) throw new Error('PostgreSQL 15 is not installed (apt-get install postgresql-15)');
  fs.mkdirSync(dir, { recursive: true, mode: 0o755 });
  const owner = postgresUser();
  if (owner) fs.chownSync(dir, owner.uid, owner.gid);
  const run = (program: string, args: string[]): void => void runAsPostgres(program, args);

  const data = path.join(dir, 'data');
  const port = freePort();
  run(initdb, ['-D', data, '-U', 'postgres', '--auth=trust', '-E', 'UTF8', '--locale=C', '--no-sync']);
  const start = async () =>
    run(pgCtl, ['-D', data, '-l', path.join(dir, 'server.log'), '-w', 'start', '-o', `-p ${port} -c listen_addresses=127.0.0.1 -c unix_socket_directories=${dir} -c fsync=off -c max_connections=200`]);
  await start();
  await ensureDatabase(`postgres://postgres@127.0.0.1:${port}/postgres`, 'app');
  return {
    url: `postgres://postgres@127.0.0.1:${port}/app`,
    name: 'PostgreSQL 15',
    stop: async (mode) => run(pgCtl, ['-D', data, '-m', mode, '-w', 'stop']),
    start,
    pids: () => clusterPids(data),
    async dispose() {
      for (const pid of clusterPids(data)) {
        try {
          process.kill(pid, 'SIGCONT');
        } catch {
          // gone
        }
      }
      try {
        run(pgCtl, ['-D', data, '-m', 'immediate', '-w', 'stop']);
      } catch {
        // already stopped
      }
      fs.rmSync(dir, { recursive: true, force: true });
    },
  };
}

async function pg15Standby(dir: string): Promise<Server> {
  const pair = await startReplicatedPair(dir);
  const url = pair.multiHostUrl();
  const unsupported = async () => {
    throw new Error('pg15-standby: only the failover fault');
  };
  return {
    url,
    name: 'PostgreSQL 15 primary + synchronous standby',
    stop: unsupported,
    start: unsupported,
    pids: () => clusterPids(pair.primary.data),
    async failover(seconds, onBack) {
      const killed = Date.now();
      pair.killPrimary();
      await new Promise((r) => setTimeout(r, seconds * 1000));
      await pair.promoteStandby();
      onBack();
      return { killed, promoted: Date.now() };
    },
    async switchover(_seconds, onBack) {
      const steps: Switchover = await pair.switchover(onBack);
      return { ...steps };
    },
    dispose: () => pair.dispose(),
  };
}

async function autoFailover(dir: string, profile: FailoverProfileName): Promise<Server> {
  const cluster = await startAutoFailover(dir, MONITOR_PROFILES[profile]);
  const unsupported = async () => {
    throw new Error('pg-auto-failover: only the failover and switchover faults');
  };
  return {
    url: cluster.url,
    name: 'pg_auto_failover, 2 PostgreSQL 15 nodes',
    stop: unsupported,
    start: unsupported,
    pids: () => [],
    failover: (_seconds, onBack) => cluster.failover(onBack),
    switchover: (_seconds, onBack, drained) => cluster.switchover(onBack, drained),
    failoversSince: (since) => cluster.failoversSince(since),
    eventsSince: (since) => cluster.eventsSince(since),
    stall: (seconds) => cluster.stall(seconds),
    dispose: () => cluster.dispose(),
  };
}

interface Sample {
  client: number;
  startedAt: number;
  endedAt: number;
  status: number | string;
  /** The `error` code of an Error body. */
  code: string | null;
  retryAfter: string | null;
  /** The title of the task a write created. */
  write: string | null;
}

async function call(base: string, method: string, urlPath: string, token?: string, body?: unknown, headers: Record<string, string> = {}) {
  const res = await fetch(base + urlPath, {
    method,
    headers: { ...(token ? { authorization: `Bearer ${token}` } : {}), ...(body ? { 'content-type': 'application/json' } : {}), ...headers },
    body: body ? JSON.stringify(body) : undefined,
    signal: AbortSignal.timeout(CLIENT_TIMEOUT_MS),
  });
  const text = await res.text();
  let json: any;
  try {
    json = text ? JSON.parse(text) : undefined;
  } catch {
    json = undefined;
  }
  return { status: res.status, headers: res.headers, json };
}

/**
 * An SSE stream reduced to what the measure needs: the time each event title
 * arrived. A stream that ends (its gateway process was killed) is opened
 * again with Last-Event-ID, as an EventSource does.
 */
async function watchStream(base: string, token: string) {
  const controller = new AbortController();
  const arrived = new Map<string, number>();
  /** Every insert message's title, in order of arrival (duplicates included). */
  const inserts: string[] = [];
  let lastEventId: string | null = null;
  let reopened = 0;
  const open = async () => {
    const res = await fetch(`${base}/api/mobile/events/upcoming/stream`, {
      headers: { authorization: `Bearer ${token}`, accept: 'text/event-stream', ...(lastEventId ? { 'last-event-id': lastEventId } : {}) },
      signal: controller.signal,
    });
    if (res.status !== 200) throw new Error(`stream: ${res.status}`);
    return res;
  };
  const read = async (res: Response) => {
    const decoder = new TextDecoder();
    let buffer = '';
    try {
      for await (const chunk of res.body as unknown as AsyncIterable<Uint8Array>) {
        buffer += decoder.decode(chunk, { stream: true });
        let end: number;
        while ((end = buffer.indexOf('\n\n')) !== -1) {
          const message = buffer.slice(0, end);
          buffer = buffer.slice(end + 2);
          const id = /^id: (\d+)$/m.exec(message)?.[1];
          if (id) lastEventId = id;
          const title = /"title":"(outage [^"]*)"/.exec(message)?.[1];
          if (!title || !/^event: insert$/m.test(message)) continue;
          inserts.push(title);
          if (!arrived.has(title)) arrived.set(title, Date.now());
        }
      }
    } catch {
      // closed
    }
  };
  const first = await open();
  void (async () => {
    let res: Response | null = first;
    while (!controller.signal.aborted) {
      if (res) await read(res);
      if (controller.signal.aborted) return;
      await new Promise((r) => setTimeout(r, 200));
      res = await open().catch(() => null);
      if (res) reopened++;
    }
  })();
  return { arrived, inserts, reopened: () => reopened, close: () => controller.abort() };
}

/** The gateway processes serving requests: the process itself, or its cluster workers. */
function gatewayWorkers(gateway: GatewayProcess): number[] {
  const parent = gateway.child.pid!;
  const workers: number[] = [];
  for (const entry of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = fs.readFileSync(`/proc/${entry}/stat`, 'utf8');
      if (Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]) !== parent) continue;
      if (fs.readFileSync(`/proc/${entry}/cmdline`, 'utf8').includes('gateway/main.ts')) workers.push(Number(entry));
    } catch {
      // gone meanwhile
    }
  }
  return workers;
}

function signalAll(pids: number[], signal: NodeJS.Signals): void {
  for (const pid of pids) {
    try {
      process.kill(pid, signal);
    } catch {
      // gone
    }
  }
}

/** A Postgres server of its own in `dir` ('embedded': Postgres 18 from npm; 'pg15': Debian's PostgreSQL 15), with an `app` database. */
export function stoppableServer(dir: string, server: OutageOptions['server'] = 'embedded', profile: FailoverProfileName = 'safe'): Promise<Server> {
  return server === 'pg-auto-failover' ? autoFailover(dir, profile) : server === 'pg15-standby' ? pg15Standby(dir) : server === 'pg15' ? pg15(dir) : embedded(dir);
}

export async function runOutage(options: OutageOptions): Promise<OutageRun> {
  const server = await stoppableServer(options.dir, options.server, options.failoverProfile);
  const quiet = createLogger('silent');
  // With DATABASE_URL the gateway applies committed migrations only: current/ too, first.
  await runMigrations(server.url, quiet, { includeCurrent: true }).catch(async (err: unknown) => {
    await server.dispose();
    throw err;
  });
  let bouncer: RunningPgBouncer | undefined;
  let gateway: GatewayProcess | undefined;
  let admin = postgres(server.url, { max: 2, onnotice: () => {} });
  const samples: Sample[] = [];
  const writes = new Map<string, Sample>();
  let stream: Awaited<ReturnType<typeof watchStream>> | undefined;
  let loading = true;
  let load: Promise<void>[] = [];
  const reports: FaultReport[] = [];
  /** The samples of each report's fault. */
  const phases: Sample[][] = [];
  try {
    if (options.pgbouncer) bouncer = await startPgBouncer(server.url, { poolSize: 40 });
    gateway = await startGatewayProcess({
      DATABASE_URL: bouncer?.url ?? server.url,
      ...(bouncer ? { DATABASE_POOL_MODE: 'transaction', DATABASE_DIRECT_URL: server.url } : {}),
      PORT: String(freePort()),
      DATA_DIR: options.dir,
      LOG_LEVEL: 'info',
      REALTIME_POLL_SECONDS: '600',
      WEB_CONCURRENCY: String(options.processes ?? 1),
      ...options.env,
    });
    const base = gateway.url;
    // Every process serving (the first to listen says so first).
    await waitUntil(() => (gateway!.output().match(/gateway listening on/g)?.length ?? 0) >= (options.processes ?? 1), 60_000, 'every gateway process');
    const users: { email: string; token: string }[] = [];
    for (let i = 0; i < options.clients; i++) {
      const email = `outage-${crypto.randomBytes(6).toString('hex')}@example.com`;
      const registered = await call(base, 'POST', '/api/auth/register', undefined, { email, password: 'password123' });
      if (registered.status !== 201) throw new Error(`register: ${registered.status} ${JSON.stringify(registered.json)}`);
      const login = await call(base, 'POST', '/api/auth/login', undefined, { email, password: 'password123' });
      if (login.status !== 200) throw new Error(`login: ${login.status} ${JSON.stringify(login.json)}`);
      users.push({ email, token: login.json.access_token });
    }
    const [community] = await admin`select admin.create_community(${'Outage ' + crypto.randomBytes(3).toString('hex')}, null, '{}', ${users[0]!.email}) as id`;
    stream = await watchStream(base, users[0]!.token);

    /** A write or a read of a client, recorded as a sample (and a write among the writes). */
    const request = async (user: { token: string }, client: number, write: string | null): Promise<Sample> => {
      const startedAt = Date.now();
      let status: number | string;
      let code: string | null = null;
      let retryAfter: string | null = null;
      try {
        const res = write
          ? await call(base, 'POST', '/api/mobile/tasks', user.token, { title: write }, client % 2 ? { 'idempotency-key': crypto.randomUUID() } : {})
          : await call(base, 'GET', '/api/mobile/profile', user.token);
        status = res.status;
        code = typeof res.json?.error === 'string' && res.status >= 500 ? res.json.error : null;
        retryAfter = res.headers.get('retry-after');
      } catch (err) {
        const e = err as Error & { cause?: { code?: string } };
        status = e.name === 'TimeoutError' ? 'no answer' : `no answer (${e.cause?.code ?? e.message})`;
      }
      const sample: Sample = { client, startedAt, endedAt: Date.now(), status, code, retryAfter, write };
      samples.push(sample);
      if (write) writes.set(write, sample);
      return sample;
    };
    // The load can be paused (a fault that needs nothing in flight as it begins): clients wait before their next request.
    let resumeLoad: (() => void) | null = null;
    let paused: Promise<void> | null = null;
    let inFlight = 0;
    const pauseLoad = async () => {
      paused = new Promise<void>((resolve) => (resumeLoad = resolve));
      await waitUntil(() => inFlight === 0, 60_000, 'the load to pause');
    };
    const resume = () => {
      paused = null;
      resumeLoad?.();
    };

    load = users.map(async (user, client) => {
      for (let i = 0; loading; i++) {
        if (paused) await paused;
        const write = options.writes && i % 2 === 1 ? `outage w${client}-${i}` : null;
        inFlight++;
        const { status } = await request(user, client, write).finally(() => inFlight--);
        // A refused request is retried after a short pause, as a client honouring Retry-After soon would.
        if (typeof status !== 'number' || status >= 300) await new Promise((r) => setTimeout(r, 50));
      }
    });

    let eventNumber = 0;
    for (const fault of options.faults) {
      await new Promise((r) => setTimeout(r, 1_000));
      const phaseStart = Date.now();
      const jobKeys: string[] = [];
      for (let j = 0; j < (options.jobs ?? 0); j++) {
        const key = `outage-job-${crypto.randomBytes(4).toString('hex')}`;
        await admin`select graphile_worker.add_job('prune_auth_failures', '{}'::json, run_at => now() + interval '1.5 seconds', job_key => ${key})`;
        jobKeys.push(key);
      }
      await admin.end({ timeout: 1 });
      const downAt = Date.now();
      let killed: Promise<void> | undefined;
      let killedAt: number | null = null;
      let switching: Promise<Record<string, number>> | null = null;
      if (fault.killWorker) {
        killed = (async () => {
          // Early in the outage: its replacement starts while the database is still down.
          await new Promise((r) => setTimeout(r, 500));
          const [victim] = gatewayWorkers(gateway!);
          if (!victim) throw new Error('killWorker: no gateway worker process (WEB_CONCURRENCY > 1 is needed)');
          killedAt = Date.now();
          process.kill(victim, 'SIGKILL');
        })();
      }
      if (fault.kind === 'pgbouncer-restart') {
        if (!bouncer) throw new Error('pgbouncer-restart needs pgbouncer: true');
        await bouncer.restart();
      } else if (fault.kind === 'switchover' || fault.kind === 'failover') {
        const act = fault.kind === 'switchover' ? server.switchover : server.failover;
        if (!act) throw new Error(`${fault.kind} needs server: 'pg15-standby' or 'pg-auto-failover'`);
        let back: () => void = () => {};
        const isBack = new Promise<void>((r) => (back = r));
        switching = act.call(server, fault.seconds, back, fault.drained ?? false);
        await Promise.race([isBack, switching]);
      } else if (fault.kind === 'calm') {
        await new Promise((r) => setTimeout(r, fault.seconds * 1000));
      } else if (fault.kind === 'stall') {
        if (!server.stall) throw new Error("stall needs server: 'pg-auto-failover'");
        switching = server.stall(fault.seconds);
        await switching;
      } else if (fault.kind === 'freeze') {
        const pids = server.pids();
        const cutOff = fault.cutOffWrites ?? 0;
        if (cutOff > 0) await pauseLoad();
        signalAll(pids, 'SIGSTOP');
        const cutOffAnswers = Array.from({ length: cutOff }, (_, n) => request(users[n % users.length]!, n, `outage w-cut-off-${phases.length}-${n}`));
        resume();
        await new Promise((r) => setTimeout(r, fault.seconds * 1000));
        signalAll(pids, 'SIGCONT');
        await Promise.all(cutOffAnswers);
      } else {
        await server.stop(fault.kind === 'immediate' ? 'immediate' : 'fast');
        await new Promise((r) => setTimeout(r, fault.seconds * 1000));
        if (fault.killWorker) {
          // The scenario is a replacement starting while the database is down:
          // on a loaded machine it may take longer than the stop to reach its
          // database check, so the database stays down until it has (or 60 s).
          await killed;
          await waitUntil(() => /database not answering: waiting for it before starting/.test(gateway!.output()), 60_000, 'the replacement process finding the database down').catch(() => {});
        }
        await server.start();
      }
      await killed;
      const upAt = Date.now();
      admin = postgres(server.url, { max: 2, onnotice: () => {} });

      // Events every 100 ms from now on; the first to reach the stream says when LISTEN was back.
      let creating = true;
      const created: string[] = [];
      const arrivedBefore = new Set(stream.arrived.keys());
      const creator = (async () => {
        while (creating) {
          const title = `outage ${eventNumber++}`;
          await admin`select admin.create_event(${community!.id}, ${title}, now() + interval '1 day')`.then(() => created.push(title), () => {});
          await new Promise((r) => setTimeout(r, 100));
        }
      })();
      const gone = () => {
        const child = gateway!.child;
        if (child.exitCode === null && child.signalCode === null) return;
        throw new Error(`the gateway exited (${child.exitCode ?? child.signalCode}) during ${fault.kind}:\n${gateway!.output().split('\n').slice(-30).join('\n')}`);
      };
      const health = (async () => {
        await waitUntil(async () => {
          gone();
          return (await fetch(`${base}/health`, { signal: AbortSignal.timeout(CLIENT_TIMEOUT_MS) }).catch(() => null))?.status === 200;
        }, 60_000, '/health 200');
        return Date.now() - upAt;
      })();
      const served = (async () => {
        await waitUntil(() => (gone(), samples.some((s) => s.status === 200 && s.endedAt > upAt)), 60_000, 'a profile answered 200');
        return Math.min(...samples.filter((s) => s.status === 200 && s.endedAt > upAt).map((s) => s.endedAt)) - upAt;
      })();
      const listen = (async () => {
        await waitUntil(() => [...stream!.arrived.keys()].some((t) => !arrivedBefore.has(t)), 60_000, 'a change on the stream');
        return Math.min(...[...stream!.arrived.entries()].filter(([t]) => !arrivedBefore.has(t)).map(([, at]) => at)) - upAt;
      })();
      const [healthBackMs, servedBackMs, listenBackMs] = await Promise.all([health, served, listen]);
      const jobsLeft = async () =>
        (await admin<{ key: string }[]>`select key from graphile_worker.jobs where key = any(${jobKeys}::text[])`).map((r) => r.key);
      await waitUntil(async () => (await jobsLeft()).length === 0, 15_000, 'the jobs run').catch(() => {});
      const jobsNotRun = jobKeys.length ? await jobsLeft() : [];
      // Long enough for every request of the fault to be answered (the deadline), then a few seconds served.
      await new Promise((r) => setTimeout(r, Math.max(3_000, OUTAGE_STATEMENT_TIMEOUT_MS + 2_000 - (Date.now() - upAt))));
      creating = false;
      await creator;
      const phaseEnd = Date.now();
      const steps = switching ? await switching : null;
      await waitUntil(() => created.every((t) => stream!.inserts.includes(t)), 10_000, 'every change on the stream').catch(() => {});
      const inserts = stream.inserts.filter((t) => created.includes(t));
      const phase = samples.filter((s) => s.startedAt >= phaseStart && s.startedAt < phaseEnd);
      phases.push(phase);
      reports.push(
        {
          ...measure({ fault, server: server.name, through: bouncer ? 'PgBouncer' : 'direct', phase, downAt, upAt, killedAt, healthBackMs, servedBackMs, listenBackMs, created, inserts, gateway }),
          steps: steps ? Object.fromEntries(Object.entries(steps).map(([k, at]) => [k.replace(/At$/, ''), at - downAt])) : null,
          failovers: server.failoversSince ? await server.failoversSince(downAt) : null,
          events: server.eventsSince ? await server.eventsSince(downAt) : [],
          jobsAdded: jobKeys.length,
          jobsNotRun,
        },
      );
    }
    loading = false;
    await Promise.all(load);
    // Which writes were saved, against what their answers said.
    const saved = new Set(
      (await admin<{ title: string }[]>`select meta->>'title' as title from app.tasks where meta->>'title' like 'outage w%'`).map((r) => r.title),
    );
    reports.forEach((report, i) => settleWrites(report, phases[i]!, writes, saved));
    const output = gateway.output();
    return { reports, errorLines: output.split('\n').filter((line) => /"level":(50|60)/.test(line) || /^\s*(Error|Unhandled|node:internal)/.test(line)), output };
  } finally {
    loading = false;
    await Promise.all(load);
    stream?.close();
    if (gateway) {
      await stopProcess(gateway.child, 30_000);
    }
    await admin.end({ timeout: 1 });
    await bouncer?.stop();
    await server.dispose();
  }
}

interface Phase {
  fault: Fault;
  server: string;
  through: string;
  phase: Sample[];
  downAt: number;
  upAt: number;
  /** When a gateway process was killed (killWorker). */
  killedAt: number | null;
  healthBackMs: number;
  servedBackMs: number;
  listenBackMs: number;
  created: string[];
  inserts: string[];
  gateway: GatewayProcess;
}

const describeSample = (s: Sample, downAt: number) =>
  `client ${s.client} at ${s.startedAt - downAt} ms (${s.endedAt - s.startedAt} ms): ${s.status}${s.code ? ` ${s.code}` : ''}${s.write ? ` [${s.write}]` : ''}`;

function measure(p: Phase): FaultReport {
  const { phase, downAt, upAt } = p;
  const success = (s: Sample) => s.status === 200 || s.status === 201;
  const byStatus: Record<string, number> = {};
  for (const s of phase) {
    const key = typeof s.status === 'string' ? 'no answer' : `${s.status}${s.code ? ` ${s.code}` : ''}`;
    byStatus[key] = (byStatus[key] ?? 0) + 1;
  }
  const allowed = (s: Sample) =>
    success(s) || (s.status === 503 && s.retryAfter !== null) || (s.write !== null && s.status === 504 && s.code === 'outcome_unknown');
  // Requests on the gateway process the test killed lose their connection with it (in flight, or
  // sent on a kept-alive connection to it before the client saw it close).
  const cutByKill = (s: Sample) =>
    p.killedAt !== null && typeof s.status === 'string' && s.status !== 'no answer' && s.endedAt >= p.killedAt && s.endedAt < p.killedAt + 1_000;
  const unanswered = phase.filter((s) => typeof s.status === 'string' && !cutByKill(s)).map((s) => describeSample(s, downAt));
  const unexpected = phase.filter((s) => typeof s.status === 'number' && !allowed(s)).map((s) => describeSample(s, downAt));
  const slowWhileDown = phase
    .filter((s) => s.startedAt >= downAt + FAIL_FAST_MS && s.startedAt < upAt && s.endedAt - s.startedAt > FAIL_FAST_MS)
    .map((s) => describeSample(s, downAt));
  const refusedWhileDown = phase
    .filter((s) => s.status === 503 && s.startedAt >= downAt && s.startedAt < upAt)
    .map((s) => s.endedAt - s.startedAt)
    .sort((a, b) => a - b);
  const fault = `${p.fault.kind}${p.fault.seconds ? ` ${p.fault.seconds} s` : ''}${p.fault.killWorker ? ', a gateway process killed meanwhile' : ''}${p.fault.drained ? ', drained first' : ''} (${p.through})`;
  const streamDuplicates = p.inserts.filter((t, i) => p.inserts.indexOf(t) !== i);
  const report: FaultReport = {
    fault,
    server: p.server,
    requests: phase.length,
    byStatus,
    ok: phase.filter(success).length,
    failedWhileDown: phase.filter((s) => !success(s) && s.startedAt >= downAt - 100).length,
    okAfter: phase.filter((s) => success(s) && s.startedAt >= upAt).length,
    refusedAfter: phase.filter((s) => !success(s) && s.startedAt >= upAt + p.servedBackMs + 500).length,
    unanswered,
    cutByKill: phase.filter(cutByKill).length,
    processes: gatewayWorkers(p.gateway).length || (p.gateway.child.exitCode === null ? 1 : 0),
    unexpected,
    longestMs: Math.max(0, ...phase.map((s) => s.endedAt - s.startedAt)),
    refusedP50Ms: percentile(refusedWhileDown, 0.5),
    refusedP95Ms: percentile(refusedWhileDown, 0.95),
    slowWhileDown,
    healthBackMs: p.healthBackMs,
    servedBackMs: p.servedBackMs,
    listenBackMs: p.listenBackMs,
    writesBackMs: (() => {
      const back = phase.filter((s) => s.write && s.status === 201 && s.startedAt >= upAt).map((s) => s.endedAt);
      return back.length ? Math.min(...back) - upAt : -1;
    })(),
    steps: null,
    failovers: null,
    events: [],
    writes: phase.filter((s) => s.write).length,
    savedButFailed: [],
    ackedButMissing: [],
    unknownSaved: 0,
    unknownLost: 0,
    gatewayAlive: p.gateway.child.exitCode === null && p.gateway.child.signalCode === null,
    streamGaps: p.created.filter((t) => !p.inserts.includes(t)),
    streamDuplicates,
    jobsAdded: 0,
    jobsNotRun: [],
    streamInOrder: p.inserts.every((t, i) => i === 0 || Number(t.split(' ')[1]) > Number(p.inserts[i - 1]!.split(' ')[1])),
    summary: '',
  };
  return report;
}

function percentile(sorted: number[], q: number): number {
  return sorted.length === 0 ? 0 : sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))]!;
}

/** Counts the phase's writes against the titles saved, and writes the summary. */
function settleWrites(report: FaultReport, phase: Sample[], writes: Map<string, Sample>, saved: Set<string>): void {
  for (const s of phase) {
    if (!s.write || writes.get(s.write) !== s) continue;
    const kept = saved.has(s.write);
    if (s.status === 504 && s.code === 'outcome_unknown') {
      if (kept) report.unknownSaved++;
      else report.unknownLost++;
    } else if (typeof s.status === 'number' && s.status >= 300 && kept) {
      report.savedButFailed.push(`${s.write}: answered ${s.status}${s.code ? ` ${s.code}` : ''}`);
    } else if (s.status === 201 && !kept) {
      report.ackedButMissing.push(`${s.write}: answered 201`);
    }
  }
  const seconds = (ms: number) => (ms / 1000).toFixed(2);
  report.summary =
    `${report.server}, ${report.fault}: ${report.requests} requests (${statusesOf(report)}), ${report.unanswered.length} unanswered` +
    `${report.cutByKill ? ` (and ${report.cutByKill} cut with the killed process)` : ''}, ` +
    `${report.unexpected.length} unexpected, longest answer ${seconds(report.longestMs)} s, 503 while down p50 ${report.refusedP50Ms} ms / p95 ${report.refusedP95Ms} ms, ${report.slowWhileDown.length} slower than ${seconds(FAIL_FAST_MS)} s while down; ` +
    `writes: ${report.writes}, ${report.ackedButMissing.length} acknowledged but missing, ${report.savedButFailed.length} saved though answered as failed, outcome_unknown ${report.unknownSaved} saved / ${report.unknownLost} not; ` +
    `after the return: /health 200 in ${seconds(report.healthBackMs)} s, served in ${seconds(report.servedBackMs)} s, a write in ${seconds(report.writesBackMs)} s, LISTEN in ${seconds(report.listenBackMs)} s; ` +
    `${report.steps ? `steps (ms from the start): ${Object.entries(report.steps).map(([k, v]) => `${k} ${v}`).join(', ')}; ` : ''}` +
    `${report.failovers !== null ? `failovers begun by the monitor: ${report.failovers}; ` : ''}` +
    `stream: ${report.streamGaps.length} missing, ${report.streamDuplicates.length} duplicated; ` +
    `${report.jobsAdded ? `jobs: ${report.jobsAdded} added before, ${report.jobsNotRun.length} not run after; ` : ''}gateway ${report.gatewayAlive ? 'up' : 'GONE'}, ${report.processes} processes serving`;
}

/** A report's answers by status, as its summary and the benches' tables give them: `1120 × 200, 5 × 503 service_unavailable`. */
export function statusesOf(report: FaultReport): string {
  return Object.entries(report.byStatus)
    .sort()
    .map(([k, v]) => `${v} × ${k}`)
    .join(', ');
}

/** A report as the benches' JSON gives it: each list (unanswered, missing writes, ...) as its length; the summary line left out. */
export function reportCounts(report: FaultReport): Record<string, unknown> {
  return Object.fromEntries(
    Object.entries(report)
      .filter(([key]) => key !== 'summary')
      .map(([key, value]) => [key, Array.isArray(value) ? value.length : value]),
  );
}

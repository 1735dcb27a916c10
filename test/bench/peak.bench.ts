// The peak moment (issue 25): an event's doors open. Through a real gateway
// process (gateway-process.ts; NODE_ENV=production) on the bench database,
// with the CPU of both sides read from /proc (the gateway and its MCP
// process; every Postgres process):
//
//   1. the requests of the moment alone, 10 connections each: GET profile,
//      POST login, POST event check-in (300 users), POST platform events,
//      POST tasks: req/s, p50/p99, Postgres and gateway CPU per request;
//   2. 1,000 users arrive at one event: 500 register and 500 have an
//      account; each logs in, joins the community, checks in and opens the
//      SSE stream (which stays open), step by step with 10 connections: the
//      same figures per step, and the time the 1,000 took;
//   3. other users read their profile (10 connections) alone, then while 20
//      clients log in continuously: their rate and p99 against idle;
//   4. 20 clients logging in with 1 and with 2 gateway processes;
//   5. one user's logins (one at a time, from their own address) alone, then
//      while another address floods the doors that hash (from a process of
//      its own): bursts of 600 POST /api/auth/register for a taken address,
//      50 at once (the fourth security review's attack), a second apart;
//      then bursts of 600 wrong-password logins (every one a bcrypt
//      comparison): the p50/p99 of the user's logins that overlapped a
//      burst against idle, and what the flood got. A gateway process of its
//      own with the default limits (TRUST_PROXY=1: each client's address is
//      its X-Forwarded-For).
//
// Run it on PostgreSQL 15 with BENCH_DATABASE_URL (the server must be on this
// machine for its CPU). Knobs: BENCH_SECONDS (per measurement, default 10),
// BENCH_USERS (default 1000), BENCH_POOL (default 10), BENCH_PARTS (e.g.
// 1,3: only those parts; part 3 then runs without the streams of part 2;
// default 1,2,3,4,5).
import { spawn } from 'node:child_process';
import crypto from 'node:crypto';
import http from 'node:http';
import autocannon from 'autocannon';
import type { Bench, BenchContext } from './harness.ts';
import { percentile } from './harness.ts';
import { startGatewayProcess, type GatewayProcess } from './gateway-process.ts';
import { postgresCpu, type PostgresCpu } from './postgres-cpu.ts';

const SECONDS = Number(process.env.BENCH_SECONDS ?? 10);
const USERS = Number(process.env.BENCH_USERS ?? 1000);
const CONNECTIONS = 10;
const LOGIN_CLIENTS = 20;
const PASSWORD = 'bench-password';
const PARTS = new Set((process.env.BENCH_PARTS ?? '1,2,3,4,5').split(',').map(Number));

interface Row {
  label: string;
  n: number;
  rps: number;
  p50: number;
  p99: number;
  /** ms of CPU per request: all of Postgres's processes, and the same less what the idle server spends in as long. */
  pgCpuMs: number;
  pgNetCpuMs: number;
  gwCpuMs: number;
}

const fmt = (n: number, digits = 0) => (Number.isFinite(n) ? n.toFixed(digits) : '-');

function table(header: string[], rows: string[][]): string {
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i]!.length)));
  const line = (cells: string[]) => cells.map((c, i) => (i === 0 ? c.padEnd(widths[i]!) : c.padStart(widths[i]!))).join('  ');
  return [line(header), line(widths.map((w) => '-'.repeat(w))), ...rows.map(line)].join('\n');
}

const rowCells = (r: Row) => [r.label, String(r.n), fmt(r.rps), fmt(r.p50, 1), fmt(r.p99, 1), fmt(r.pgCpuMs, 2), fmt(r.pgNetCpuMs, 2), fmt(r.gwCpuMs, 2)];
const ROW_HEADER = ['scenario', 'requests', 'req/s', 'p50 ms', 'p99 ms', 'Postgres CPU ms/req', '(net of idle)', 'gateway CPU ms/req'];

/**
 * Part 5's flood (a script for `node -e`): bursts of 600 POSTs, 50 at once
 * (the fourth security review's), one second apart, until stdin ends; prints
 * the statuses and when each burst began and ended (ms since the epoch).
 */
const FLOOD = `
const statuses = {}, bursts = [];
let on = true;
process.stdin.resume();
process.stdin.on('end', () => (on = false));
(async () => {
  while (on) {
    const began = Date.now();
    let left = 600;
    await Promise.all(Array.from({ length: 50 }, async () => {
      while (left-- > 0) {
        const res = await fetch(process.env.URL, { method: 'POST', body: process.env.BODY,
          headers: { 'content-type': 'application/json', 'x-forwarded-for': process.env.FROM } });
        await res.arrayBuffer();
        statuses[res.status] = (statuses[res.status] || 0) + 1;
      }
    }));
    bursts.push([began, Date.now()]);
    for (let i = 0; i < 10 && on; i++) await new Promise((r) => setTimeout(r, 100));
  }
  process.stdout.write(JSON.stringify({ statuses, bursts }));
})();
`;

/** One HTTP request on a keep-alive agent; resolves with the status and body. */
const agent = new http.Agent({ keepAlive: true, maxSockets: 256 });
function request(
  base: string,
  method: string,
  path: string,
  options: { token?: string; body?: unknown; from?: string } = {},
): Promise<{ status: number; body: string }> {
  const payload = options.body === undefined ? undefined : JSON.stringify(options.body);
  return new Promise((resolve, reject) => {
    const req = http.request(
      `${base}${path}`,
      {
        method,
        agent,
        headers: {
          ...(options.token ? { authorization: `Bearer ${options.token}` } : {}),
          ...(options.from ? { 'x-forwarded-for': options.from } : {}),
          ...(payload ? { 'content-type': 'application/json', 'content-length': Buffer.byteLength(payload) } : {}),
        },
      },
      (res) => {
        let body = '';
        res.setEncoding('utf8');
        res.on('data', (c) => (body += c));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
      },
    );
    req.on('error', reject);
    req.end(payload);
  });
}

class Meter {
  /** What the idle server spends (background processes, the gateway's realtime polling): CPU µs per ms. */
  private idleUsPerMs = 0;

  constructor(
    private readonly gw: GatewayProcess,
    private readonly pg: PostgresCpu | null,
  ) {}

  /** Measures the idle server for `seconds` (nothing else running). */
  async calibrate(seconds = 3): Promise<number> {
    const pg0 = this.pg?.cpuUs() ?? NaN;
    const t0 = performance.now();
    await new Promise((r) => setTimeout(r, seconds * 1000));
    this.idleUsPerMs = Math.max(0, ((this.pg?.cpuUs() ?? NaN) - pg0) / (performance.now() - t0)) || 0;
    return this.idleUsPerMs;
  }

  private row(label: string, n: number, ms: number, pgUs: number, gwUs: number, latency: { p50: number; p99: number }): Row {
    return {
      label,
      n,
      rps: n / (ms / 1000),
      p50: latency.p50,
      p99: latency.p99,
      pgCpuMs: pgUs / n / 1000,
      pgNetCpuMs: Math.max(0, pgUs - this.idleUsPerMs * ms) / n / 1000,
      gwCpuMs: gwUs / n / 1000,
    };
  }

  /** `total` calls of fn over `connections` workers (or, with total = Infinity, for `seconds`). */
  async run(label: string, connections: number, fn: (i: number) => Promise<void>, limit: { total?: number; seconds?: number }): Promise<Row> {
    const latencies: number[] = [];
    const gw0 = this.gw.cpuUs();
    const pg0 = this.pg?.cpuUs() ?? NaN;
    const t0 = performance.now();
    const end = limit.seconds ? Date.now() + limit.seconds * 1000 : Infinity;
    const total = limit.total ?? Infinity;
    let next = 0;
    await Promise.all(
      Array.from({ length: connections }, async () => {
        while (next < total && Date.now() < end) {
          const i = next++;
          const s = performance.now();
          await fn(i);
          latencies.push(performance.now() - s);
        }
      }),
    );
    const seconds = (performance.now() - t0) / 1000;
    latencies.sort((a, b) => a - b);
    const n = latencies.length;
    console.log(`  ${label}: ${n} in ${seconds.toFixed(1)} s`);
    return this.row(label, n, seconds * 1000, (this.pg?.cpuUs() ?? NaN) - pg0, this.gw.cpuUs() - gw0, {
      p50: percentile(latencies, 50),
      p99: percentile(latencies, 99),
    });
  }

  /** autocannon on one GET/POST route for `seconds`. */
  async cannon(label: string, url: string, options: { token: string; method?: 'GET' | 'POST'; body?: unknown; seconds: number }): Promise<Row> {
    const gw0 = this.gw.cpuUs();
    const pg0 = this.pg?.cpuUs() ?? NaN;
    const result = await autocannon({
      url,
      method: options.method ?? 'GET',
      connections: CONNECTIONS,
      duration: options.seconds,
      headers: {
        authorization: `Bearer ${options.token}`,
        ...(options.body === undefined ? {} : { 'content-type': 'application/json' }),
      },
      body: options.body === undefined ? undefined : JSON.stringify(options.body),
    });
    const n = result.requests.total;
    if (result.non2xx > 0 || result.errors > 0) throw new Error(`${label}: ${result.non2xx} non-2xx and ${result.errors} errors of ${n}`);
    return this.row(label, n, options.seconds * 1000, (this.pg?.cpuUs() ?? NaN) - pg0, this.gw.cpuUs() - gw0, result.latency);
  }
}

/** n accounts with the bench password (one bcrypt hash for all, made once by pgcrypto), with profile and node. */
async function createAccounts(ctx: BenchContext, prefix: string, n: number): Promise<string[]> {
  const rows = await ctx.sql<{ email: string }[]>`
    with h as (select extensions.crypt(encode(extensions.digest(${PASSWORD}, 'sha256'), 'base64'), extensions.gen_salt('bf', 10)) as hash),
    u as (
      insert into identity.users (email, password_hash)
      select ${prefix} || '-' || g || '-' || md5(random()::text) || '@example.com', h.hash from generate_series(1, ${n}) g, h
      returning id, email
    ), numbered as (select id, email, row_number() over () as r from u),
    n as (insert into app.nodes (kind) select 'user' from numbered returning id),
    nn as (select id, row_number() over () as r from n),
    p as (insert into app.profiles (id, name, name_source, node_id)
          select numbered.id, 'bench', 'email', nn.id from numbered join nn using (r) returning id)
    select email from numbered`;
  return rows.map((r) => r.email);
}

function expectStatus(label: string, got: { status: number; body: string }, ...wanted: number[]): void {
  if (!wanted.includes(got.status)) throw new Error(`${label}: ${got.status} ${got.body.slice(0, 200)}`);
}

async function login(base: string, email: string): Promise<{ access_token: string; user_id: string }> {
  const res = await request(base, 'POST', '/api/auth/login', { body: { email, password: PASSWORD } });
  expectStatus('login', res, 200);
  return JSON.parse(res.body);
}

/** fn for every item, CONNECTIONS at a time (setup steps). */
async function inTurn<T, R>(items: T[], fn: (item: T) => Promise<R>): Promise<R[]> {
  const out: R[] = new Array(items.length);
  let next = 0;
  await Promise.all(
    Array.from({ length: CONNECTIONS }, async () => {
      while (next < items.length) {
        const i = next++;
        out[i] = await fn(items[i]!);
      }
    }),
  );
  return out;
}

/** Opens the SSE stream and resolves when its first message (the snapshot) arrives; the stream stays open. */
function openStream(base: string, token: string, open: http.ClientRequest[]): Promise<void> {
  return new Promise((resolve, reject) => {
    const req = http.get(`${base}/api/mobile/events/upcoming/stream`, { headers: { authorization: `Bearer ${token}`, accept: 'text/event-stream' } }, (res) => {
      if (res.statusCode !== 200) {
        res.resume();
        reject(new Error(`stream: ${res.statusCode}`));
        return;
      }
      res.once('data', () => resolve());
      res.on('error', () => {});
    });
    req.on('error', () => {});
    open.push(req);
  });
}

/** LOGIN_CLIENTS clients logging in as fast as they can until `stop()`; their rate and latencies. */
function loginFlood(base: string, emails: string[]) {
  let on = true;
  const latencies: number[] = [];
  const t0 = performance.now();
  const done = Promise.all(
    emails.map(async (email) => {
      while (on) {
        const s = performance.now();
        const res = await request(base, 'POST', '/api/auth/login', { body: { email, password: PASSWORD } });
        expectStatus('login (flood)', res, 200);
        latencies.push(performance.now() - s);
      }
    }),
  );
  return async () => {
    on = false;
    await done;
    const seconds = (performance.now() - t0) / 1000;
    latencies.sort((a, b) => a - b);
    return { n: latencies.length, rps: latencies.length / seconds, p50: percentile(latencies, 50), p99: percentile(latencies, 99) };
  };
}

const bench: Bench = {
  name: 'peak',
  description: `the peak moment: ${USERS} users arrive at one event, logins against profile reads; ${CONNECTIONS} connections, ${SECONDS}s per measurement`,
  async throughput(ctx) {
    const pg = await postgresCpu(ctx.sql);
    if (!pg) console.log('  (the database server is not on this machine: no Postgres CPU figures)');
    // Every bench client is one address: its limits would count all of them as one client.
    const gatewayEnv = { LOGIN_MAX_FAILURES_PER_IP: '1000000', PASSWORD_SET_MAX_PER_IP: '1000000', DB_POOL_MAX: process.env.BENCH_POOL ?? '10' };

    ctx.progress(`accounts: ${USERS / 2} arriving with one, ${LOGIN_CLIENTS} logging in continuously, ${CONNECTIONS + 300} for the single scenarios`);
    const existing = await createAccounts(ctx, 'arrive', USERS / 2);
    const flooders = await createAccounts(ctx, 'flood', LOGIN_CLIENTS);
    const singles = await createAccounts(ctx, 'single', 300 + CONNECTIONS);
    const manager = (await createAccounts(ctx, 'manager', 1))[0]!;
    const [community] = await ctx.sql`select admin.create_community('The peak', 'Doors open', '{}', ${manager}) as id`;
    const communityId = community!.id as string;
    const eventAt = new Date(Date.now() + 3600_000);
    const [eventA] = await ctx.sql`select admin.create_event(${communityId}, 'Opening night', ${eventAt}, ${new Date(eventAt.getTime() + 3 * 3600_000)}) as id`;
    const [eventB] = await ctx.sql`select admin.create_event(${communityId}, 'Second night', ${eventAt}, ${new Date(eventAt.getTime() + 3 * 3600_000)}) as id`;
    // No autovacuum of the loaded rows during the measurements.
    await ctx.sql`vacuum analyze`;

    const results: Record<string, unknown> = { users: USERS, seconds: SECONDS };
    let gw = await startGatewayProcess(ctx, 1, gatewayEnv);
    const streams: http.ClientRequest[] = [];
    try {
      const meter = new Meter(gw, pg);
      const base = gw.url;
      const idleUsPerMs = await meter.calibrate();
      ctx.progress(`the idle server: Postgres ${idleUsPerMs.toFixed(2)} ms of CPU per second (subtracted in the "net of idle" column)`);
      results.postgresIdleMsPerSecond = idleUsPerMs;

      // 1. The requests of the moment alone ------------------------------------
      const reader = await login(base, singles[0]!);
      const managerToken = (await login(base, manager)).access_token;
      const singleRows: Row[] = [];
      if (PARTS.has(1)) {
        await meter.cannon('warm-up', `${base}/api/mobile/profile`, { token: reader.access_token, seconds: 3 });
        singleRows.push(await meter.cannon('GET /api/mobile/profile', `${base}/api/mobile/profile`, { token: reader.access_token, seconds: SECONDS }));
        const tenUsers = singles.slice(0, CONNECTIONS);
        singleRows.push(
          await meter.run('POST /api/auth/login', CONNECTIONS, async (i) => void (await login(base, tenUsers[i % CONNECTIONS]!)), { seconds: SECONDS }),
        );
        const checkers = await inTurn(singles.slice(CONNECTIONS, CONNECTIONS + 300), (e) => login(base, e));
        await inTurn(checkers, async (c) =>
          expectStatus('join', await request(base, 'POST', `/api/mobile/communities/${communityId}/join`, { token: c.access_token }), 200),
        );
        singleRows.push(
          await meter.run(
            'POST event check-in (300 users)',
            CONNECTIONS,
            async (i) => expectStatus('check-in', await request(base, 'POST', `/api/mobile/events/${eventB!.id}/checkin`, { token: checkers[i]!.access_token, body: {} }), 201),
            { total: 300 },
          ),
        );
        singleRows.push(
          await meter.run(
            'POST /api/v1/platform/events',
            CONNECTIONS,
            async () =>
              expectStatus(
                'platform event',
                await request(base, 'POST', '/api/v1/platform/events', {
                  token: managerToken,
                  body: {
                    community_id: communityId,
                    external_platform: 'platform_a',
                    external_id: crypto.randomUUID(),
                    title: 'Pushed',
                    description: 'pushed by the peak bench',
                    date: new Date(Date.now() + 86_400_000).toISOString(),
                    venue: { name: `Hall ${crypto.randomInt(20)}`, address: 'Bench St' },
                  },
                }),
                201,
              ),
            { seconds: SECONDS },
          ),
        );
        singleRows.push(
          await meter.cannon('POST /api/mobile/tasks', `${base}/api/mobile/tasks`, {
            token: reader.access_token,
            method: 'POST',
            body: { title: 'bench task', description: 'peak' },
            seconds: SECONDS,
          }),
        );
        console.log(`\n1. The requests of the moment alone (1 gateway process, ${CONNECTIONS} connections)`);
        console.log(table(ROW_HEADER, singleRows.map(rowCells)));
        results.single = singleRows;
      }

      // 2. 1,000 users arrive ---------------------------------------------------
      if (PARTS.has(2)) {
        const fresh = Array.from({ length: USERS / 2 }, (_, i) => `new-${i}-${crypto.randomBytes(4).toString('hex')}@example.com`);
        const arrivals = [...fresh, ...existing];
        const tokens: string[] = new Array(arrivals.length);
        const started = performance.now();
        const steps: Row[] = [];
        steps.push(
          await meter.run(
            'register (new users)',
            CONNECTIONS,
            async (i) => expectStatus('register', await request(base, 'POST', '/api/auth/register', { body: { email: fresh[i]!, password: PASSWORD } }), 201),
            { total: fresh.length },
          ),
        );
        steps.push(await meter.run('log in', CONNECTIONS, async (i) => void (tokens[i] = (await login(base, arrivals[i]!)).access_token), { total: arrivals.length }));
        steps.push(
          await meter.run(
            'join the community',
            CONNECTIONS,
            async (i) => expectStatus('join', await request(base, 'POST', `/api/mobile/communities/${communityId}/join`, { token: tokens[i]! }), 200),
            { total: arrivals.length },
          ),
        );
        steps.push(
          await meter.run(
            'check in',
            CONNECTIONS,
            async (i) => expectStatus('check-in', await request(base, 'POST', `/api/mobile/events/${eventA!.id}/checkin`, { token: tokens[i]!, body: {} }), 201),
            { total: arrivals.length },
          ),
        );
        steps.push(await meter.run('open the SSE stream (to its snapshot)', CONNECTIONS, (i) => openStream(base, tokens[i]!, streams), { total: arrivals.length }));
        const arrivalSeconds = (performance.now() - started) / 1000;
        console.log(`\n2. ${arrivals.length} users arrive (${fresh.length} register; each logs in, joins, checks in, opens the stream; ${CONNECTIONS} connections): ${arrivalSeconds.toFixed(1)} s in all`);
        console.log(table(ROW_HEADER, steps.map(rowCells)));
        results.arrival = { seconds: arrivalSeconds, steps };
      }

      // 3. Profile reads against a login flood (the streams stay open) ---------
      if (PARTS.has(3)) {
        const profileUrl = `${base}/api/mobile/profile`;
        const idle = await meter.cannon('GET profile, alone', profileUrl, { token: reader.access_token, seconds: SECONDS });
        const stop = loginFlood(base, flooders);
        const during = await meter.cannon(`GET profile, with ${LOGIN_CLIENTS} clients logging in`, profileUrl, { token: reader.access_token, seconds: SECONDS });
        const flood = await stop();
        console.log(`\n3. Other users' profile reads (${CONNECTIONS} connections) against ${LOGIN_CLIENTS} clients logging in continuously (1 gateway process)`);
        console.log(
          table(
            ['profile reads', 'req/s', 'p50 ms', 'p99 ms', '% of idle rate', 'logins/s', 'login p50 ms', 'login p99 ms'],
            [
              [idle.label, fmt(idle.rps), fmt(idle.p50, 1), fmt(idle.p99, 1), '100', '-', '-', '-'],
              [during.label, fmt(during.rps), fmt(during.p50, 1), fmt(during.p99, 1), fmt((100 * during.rps) / idle.rps), fmt(flood.rps, 1), fmt(flood.p50), fmt(flood.p99)],
            ],
          ),
        );
        results.flood = { idle, during, ratio: during.rps / idle.rps, logins: flood };
      }

      for (const s of streams) s.destroy();
      streams.length = 0;

      // 4. Login rate with 1 and 2 gateway processes ----------------------------
      if (PARTS.has(4)) {
        const loginRows: Row[] = [];
        loginRows.push(await meter.run(`POST /api/auth/login, ${LOGIN_CLIENTS} clients, 1 process`, LOGIN_CLIENTS, async (i) => void (await login(base, flooders[i % LOGIN_CLIENTS]!)), { seconds: SECONDS }));
        await gw.stop();
        gw = await startGatewayProcess(ctx, 2, gatewayEnv);
        const meter2 = new Meter(gw, pg);
        await meter2.calibrate();
        await meter2.run('warm-up', LOGIN_CLIENTS, async (i) => void (await login(gw.url, flooders[i % LOGIN_CLIENTS]!)), { seconds: 2 });
        loginRows.push(
          await meter2.run(`POST /api/auth/login, ${LOGIN_CLIENTS} clients, 2 processes`, LOGIN_CLIENTS, async (i) => void (await login(gw.url, flooders[i % LOGIN_CLIENTS]!)), {
            seconds: SECONDS,
          }),
        );
        console.log(`\n4. Logins with 1 and 2 gateway processes (gateway CPU: all its processes)`);
        console.log(table(ROW_HEADER, loginRows.map(rowCells)));
        results.logins = loginRows;
      }
      // 5. One user's logins against a flood of the doors that hash ------------
      if (PARTS.has(5)) {
        await gw.stop();
        gw = await startGatewayProcess(ctx, 1, {
          DB_POOL_MAX: process.env.BENCH_POOL ?? '10',
          TRUST_PROXY: '1',
          // The login flood goes on hashing (its failures are not throttled here); registrations keep the default limit.
          LOGIN_MAX_FAILURES_PER_IP: '1000000',
          LOGIN_MAX_FAILURES_PER_EMAIL: '1000000',
          LOGIN_MAX_FAILURES_PER_EMAIL_ALL_CLIENTS: '1000000',
        });
        const base5 = gw.url;
        const [user, taken] = [singles[1]!, singles[2]!];
        const signIn = async () =>
          expectStatus('login (the user)', await request(base5, 'POST', '/api/auth/login', { body: { email: user, password: PASSWORD }, from: '198.51.100.10' }), 200);
        /** The user's logins, one at a time, for `seconds`: when each began and ended, and its latency. */
        const timed = async (seconds: number) => {
          const logins: { began: number; ended: number; ms: number }[] = [];
          const until = Date.now() + seconds * 1000;
          while (Date.now() < until) {
            const began = Date.now();
            const s0 = performance.now();
            await signIn();
            logins.push({ began, ended: Date.now(), ms: performance.now() - s0 });
          }
          return logins;
        };
        /**
         * A flood from one address in a process of its own (its own session,
         * as an attacker's machine would be: the kernel's autogroup shares the
         * CPU between it, the gateway, Postgres and this process as peers):
         * bursts of `body` POSTed to `path`; the answers by status, and when
         * each burst began and ended.
         */
        const flooding = (path: string, body: unknown, from: string) => {
          const child = spawn(process.execPath, ['-e', FLOOD], {
            env: { ...process.env, URL: `${base5}${path}`, BODY: JSON.stringify(body), FROM: from },
            stdio: ['pipe', 'pipe', 'inherit'],
            detached: true,
          });
          let report = '';
          child.stdout!.on('data', (chunk) => (report += chunk));
          const exited = new Promise((resolve) => child.once('exit', resolve));
          return async () => {
            child.stdin!.end();
            await exited;
            return JSON.parse(report) as { statuses: Record<string, number>; bursts: [number, number][] };
          };
        };
        /** The latencies of the logins that overlapped a burst, sorted; and the bursts' mean length. */
        const during = (logins: { began: number; ended: number; ms: number }[], flood: { bursts: [number, number][] }) => ({
          ms: logins
            .filter((l) => flood.bursts.some(([b, e]) => l.began < e && l.ended > b))
            .map((l) => l.ms)
            .sort((a, b) => a - b),
          burstMs: flood.bursts.reduce((sum, [b, e]) => sum + (e - b), 0) / Math.max(1, flood.bursts.length),
        });
        await timed(1); // warm-up
        const idle = (await timed(Math.min(SECONDS, 5))).map((l) => l.ms).sort((a, b) => a - b);
        const stopRegister = flooding('/api/auth/register', { email: taken, password: 'another password' }, '203.0.113.66');
        const loginsRegister = await timed(SECONDS);
        const registerFlood = await stopRegister();
        const stopLogins = flooding('/api/auth/login', { email: taken, password: 'wrong password' }, '203.0.113.67');
        const loginsLogins = await timed(SECONDS);
        const loginFlood = await stopLogins();
        const duringRegister = during(loginsRegister, registerFlood);
        const duringLogins = during(loginsLogins, loginFlood);
        const p50 = (xs: number[]) => percentile(xs, 50);
        const got = (f: { statuses: Record<string, number>; bursts: [number, number][] }, d: { burstMs: number }) =>
          `${JSON.stringify(f.statuses)} in ${f.bursts.length} bursts of ${fmt(d.burstMs)} ms`;
        const rows5 = [
          ['alone', idle, '-'],
          ['during bursts of 600 registrations of a taken address', duringRegister.ms, got(registerFlood, duringRegister)],
          ['during bursts of 600 wrong-password logins', duringLogins.ms, got(loginFlood, duringLogins)],
        ] as const;
        console.log(
          `\n5. One user's logins (one at a time, their own address) against bursts of 600 POSTs, 50 at once, from another address, ` +
            `a second apart (1 gateway process, default limits; logins that overlapped a burst)`,
        );
        console.log(
          table(
            ["the user's logins", 'n', 'p50 ms', 'p99 ms', 'p50 × idle', 'the flood got (status: count)'],
            rows5.map(([label, xs, flood]) => [label, String(xs.length), fmt(p50(xs), 1), fmt(percentile(xs, 99), 1), fmt(p50(xs) / p50(idle), 2), flood]),
          ),
        );
        results.hashFlood = rows5.map(([label, xs, flood]) => ({ label, n: xs.length, p50: p50(xs), p99: percentile(xs, 99), ratio: p50(xs) / p50(idle), flood }));
      }
    } finally {
      for (const s of streams) s.destroy();
      agent.destroy();
      await gw.stop();
    }
    return results;
  },
};

export default bench;

// The realtime feed under load. The gateway runs in this process; the SSE
// streams are opened by separate client processes (realtime-client.ts, a
// minimal HTTP client holding many sockets each), so the figures are the
// server's. For each size in BENCH_REALTIME_STREAMS (default "1000,10000";
// one stream per user, every user a member of one community):
//
//   * open: all streams opened (BENCH_REALTIME_OPEN_CONCURRENCY in flight per
//     client process) until the last one has its `ready` message;
//   * a change seen by all: an event update of that community; delay from
//     its commit to its arrival on each stream (p50, p99, last stream);
//   * a change seen by 1%: an event of a second community whose members are
//     1% of the users;
//   * sustained rate: updates seen by all at increasing rates for a few
//     seconds each; the highest rate at which the last stream's delay does not
//     grow (the last changes of the window arrive no later than the first);
//   * gateway memory per stream (RSS and heap growth while they are open) and
//     gateway CPU per change (this process, user + system).
//
// BENCH_DATABASE_URL runs it on another server (e.g. the PG15 one). The
// client processes raise `ulimit -n`; this process needs a limit above the
// stream count too (run `ulimit -n 30000` first if it is lower).
import { fork } from 'node:child_process';
import path from 'node:path';
import { SignJWT } from 'jose';
import type { Bench, BenchContext, Stats } from './harness.ts';
import { percentile } from './harness.ts';

const STREAM_PATH = '/api/mobile/events/upcoming/stream';
const STREAMS_PER_CLIENT = 2500;

interface Client {
  send(message: unknown): void;
  next(type: string): Promise<any>;
  kill(): void;
}

function startClient(): Promise<Client> {
  const child = fork(path.join(import.meta.dirname, 'realtime-client.ts'), [], {
    execArgv: ['--import', 'tsx'],
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
  });
  const waiting = new Map<string, { resolve: (m: any) => void; reject: (err: Error) => void }[]>();
  let exited: Error | undefined;
  child.on('message', (m: any) => waiting.get(m.type)?.shift()?.resolve(m));
  child.on('exit', (code) => {
    exited = new Error(`client exited (${code})`);
    for (const list of waiting.values()) for (const w of list.splice(0)) w.reject(exited);
  });
  const client: Client = {
    send: (message) => {
      if (!exited) child.send(message as never);
    },
    next: (type) =>
      new Promise((resolve, reject) => {
        if (exited) return reject(exited);
        const list = waiting.get(type) ?? [];
        list.push({ resolve, reject });
        waiting.set(type, list);
      }),
    kill: () => child.kill(),
  };
  return client.next('started').then(() => client);
}

const wallNow = () => performance.timeOrigin + performance.now();
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Arrival times per marker, gathered from every client. */
class Arrivals {
  readonly byMark = new Map<number, number[]>();
  constructor(private readonly clients: Client[]) {}

  async collect(): Promise<void> {
    const answers = await Promise.all(
      this.clients.map((c) => {
        const answer = c.next('arrivals');
        c.send({ type: 'collect' });
        return answer;
      }),
    );
    for (const a of answers) {
      for (const [mark, times] of a.arrivals as [number, number[]][]) {
        const list = this.byMark.get(mark);
        if (list) list.push(...times);
        else this.byMark.set(mark, times);
      }
    }
  }

  count(mark: number): number {
    return this.byMark.get(mark)?.length ?? 0;
  }

  /** Waits until each marker has `expected` arrivals (or the timeout). */
  async waitFor(marks: number[], expected: number, timeoutMs: number): Promise<boolean> {
    const until = Date.now() + timeoutMs;
    for (;;) {
      await this.collect();
      if (marks.every((m) => this.count(m) >= expected)) return true;
      if (Date.now() > until) return false;
      await sleep(200);
    }
  }
}

interface Row {
  streams: number;
  scenario: string;
  value: string;
}

async function makeUsers(ctx: BenchContext, count: number) {
  const { sql, env } = ctx;
  const [community] = await sql`select admin.create_community('Bench feed') as id`;
  const [hash] = await sql`select identity.hash_password('bench-password') as h`;
  const users = await sql<{ id: string; node_id: string }[]>`
    with u as (
      insert into identity.users (email, password_hash)
      select 'feed-' || g || '-' || md5(random()::text) || '@example.com', ${hash!.h} from generate_series(1, ${count}) g
      returning id
    ), n as (
      insert into app.nodes (kind) select 'user' from u returning id
    ), pairs as (
      select u.id as user_id, n.id as node_id
        from (select id, row_number() over () as r from u) u
        join (select id, row_number() over () as r from n) n using (r)
    ), p as (
      insert into app.profiles (id, name, node_id) select user_id, 'Feed', node_id from pairs returning id, node_id
    ), m as (
      insert into app.community_members (community_id, member_node_id)
      select ${community!.id}, node_id from p
    )
    select id, node_id from p`;
  // Upcoming events in the snapshot of every stream (a realistic feed).
  for (let i = 0; i < 5; i++) {
    await sql`select admin.create_event(${community!.id}, ${`feed-${i}`}, now() + make_interval(days => ${i + 2}))`;
  }
  const [event] = await sql`select admin.create_event(${community!.id}, 'bench-start', now() + interval '1 day') as id`;
  const secret = new TextEncoder().encode(env.jwtSecret);
  const tokens = await Promise.all(
    users.map((u) =>
      new SignJWT({ role: 'authenticated' })
        .setProtectedHeader({ alg: 'HS256', typ: 'JWT' })
        .setSubject(u.id)
        .setAudience('authenticated')
        .setIssuer(`${env.config.publicUrl}/api/auth`)
        .setIssuedAt()
        .setExpirationTime('2h')
        .sign(secret),
    ),
  );
  return { community: community!.id as string, event: event!.id as string, users, tokens };
}

async function runSize(ctx: BenchContext, n: number, data: Awaited<ReturnType<typeof makeUsers>>, markBase: number): Promise<Row[]> {
  const { sql, env } = ctx;
  const hub = env.gateway.realtime;
  const rows: Row[] = [];
  const add = (scenario: string, value: string) => {
    rows.push({ streams: n, scenario, value });
    ctx.progress(`${n} streams: ${scenario}: ${value}`);
  };
  let mark = markBase;

  // 1% of the users in a second community with its own event.
  const fewCount = Math.max(1, Math.floor(n / 100));
  const [quiet] = await sql`select admin.create_community(${`Bench 1% ${n}`}) as id`;
  await sql`
    insert into app.community_members (community_id, member_node_id)
    select ${quiet!.id}, node_id from unnest(${data.users.slice(0, fewCount).map((u) => u.node_id)}::uuid[]) node_id`;
  const [quietEvent] = await sql`select admin.create_event(${quiet!.id}, 'quiet', now() + interval '1 day') as id`;

  const clientCount = Math.ceil(n / STREAMS_PER_CLIENT);
  const clients = await Promise.all(Array.from({ length: clientCount }, () => startClient()));
  const arrivals = new Arrivals(clients);
  const url = new URL(env.baseUrl);
  const concurrency = Number(process.env.BENCH_REALTIME_OPEN_CONCURRENCY ?? 50);
  try {
    global.gc?.();
    const memBefore = process.memoryUsage();
    const cpuOpen = process.cpuUsage();
    const batchesBefore = hub.opener.stats.batches;
    const t0 = performance.now();
    const opened = await Promise.all(
      clients.map((c, i) => {
        const answer = c.next('opened');
        c.send({
          type: 'open',
          host: '127.0.0.1',
          port: Number(url.port),
          path: STREAM_PATH,
          tokens: data.tokens.slice(i * STREAMS_PER_CLIENT, Math.min(n, (i + 1) * STREAMS_PER_CLIENT)),
          concurrency,
        });
        return answer;
      }),
    );
    const openWall = performance.now() - t0;
    const openCpu = process.cpuUsage(cpuOpen);
    const times = opened.flatMap((o) => o.times as number[]).filter((t) => t >= 0).sort((a, b) => a - b);
    const failures = opened.reduce((s, o) => s + (o.failures as number), 0);
    const reasons = new Map<string, number>();
    for (const o of opened) for (const [r, k] of o.reasons as [string, number][]) reasons.set(r, (reasons.get(r) ?? 0) + k);
    const why = failures > 0 ? ` (${[...reasons].map(([r, k]) => `${k} ${r}`).join(', ')})` : '';
    add('all open and ready', `${(openWall / 1000).toFixed(1)} s (${concurrency}×${clientCount} in flight; per stream p50 ${percentile(times, 50).toFixed(0)} ms, p99 ${percentile(times, 99).toFixed(0)} ms; ${failures} failed${why}; ${hub.opener.stats.batches - batchesBefore} batches; gateway CPU ${((openCpu.user + openCpu.system) / 1000 / n).toFixed(2)} ms per open)`);
    await sleep(500);
    global.gc?.();
    const memAfter = process.memoryUsage();
    add('gateway memory per stream', `${((memAfter.rss - memBefore.rss) / n / 1024).toFixed(1)} KB RSS, ${((memAfter.heapUsed - memBefore.heapUsed) / n / 1024).toFixed(1)} KB heap`);
    const live = n - failures;

    const measure = async (label: string, eventId: string, expected: number, count: number, spacingMs: number) => {
      const commits = new Map<number, number>();
      const marks: number[] = [];
      const cpu = process.cpuUsage();
      const statsBefore = { ...hub.stats };
      for (let k = 0; k < count; k++) {
        const m = ++mark;
        await sql`update app.events set title = ${`mark-${m}`} where id = ${eventId}`;
        commits.set(m, wallNow());
        marks.push(m);
        await sleep(spacingMs);
      }
      const complete = await arrivals.waitFor(marks, expected, 60_000);
      const used = process.cpuUsage(cpu);
      const delays: number[] = [];
      const lasts: number[] = [];
      for (const m of marks) {
        const list = (arrivals.byMark.get(m) ?? []).map((t) => t - commits.get(m)!);
        delays.push(...list);
        lasts.push(Math.max(...list));
      }
      delays.sort((a, b) => a - b);
      lasts.sort((a, b) => a - b);
      const reads = hub.stats.fanoutReads - statsBefore.fanoutReads;
      const readMs = (hub.stats.fanoutReadMs - statsBefore.fanoutReadMs) / Math.max(1, reads);
      const deliverMs = (hub.stats.deliverMs - statsBefore.deliverMs) / Math.max(1, reads);
      add(
        label,
        `p50 ${percentile(delays, 50).toFixed(0)} ms, p99 ${percentile(delays, 99).toFixed(0)} ms, last stream ${percentile(lasts, 50).toFixed(0)} ms (worst ${lasts[lasts.length - 1]!.toFixed(0)} ms)` +
          `${complete ? '' : ' INCOMPLETE'}; ${count} changes, ${reads} fan-out reads (${readMs.toFixed(0)} ms to read, ${deliverMs.toFixed(0)} ms to write, each); gateway CPU ${((used.user + used.system) / 1000 / count).toFixed(1)} ms per change`,
      );
      return { delays, lasts, complete };
    };

    await measure('change seen by all: commit → delivery', data.event, live, 8, 700);
    await measure(`change seen by 1% (${fewCount} streams): commit → delivery`, quietEvent!.id, fewCount, 8, 300);

    // Sustained: rates until the lag grows.
    let sustained = 0;
    for (const rate of (process.env.BENCH_REALTIME_RATES ?? '5,10,20,40').split(',').map(Number)) {
      const seconds = 4;
      const count = rate * seconds;
      const commits = new Map<number, number>();
      const marks: number[] = [];
      const startAt = performance.now();
      for (let k = 0; k < count; k++) {
        const due = startAt + (k * 1000) / rate;
        const wait = due - performance.now();
        if (wait > 0) await sleep(wait);
        const m = ++mark;
        await sql`update app.events set title = ${`mark-${m}`} where id = ${data.event}`;
        commits.set(m, wallNow());
        marks.push(m);
      }
      const sentRate = count / ((performance.now() - startAt) / 1000);
      const complete = await arrivals.waitFor(marks, live, 60_000);
      const lasts = marks.map((m) => Math.max(...(arrivals.byMark.get(m) ?? [Infinity]).map((t) => t - commits.get(m)!)));
      const firstQuarter = lasts.slice(0, Math.ceil(count / 4));
      const lastQuarter = lasts.slice(-Math.ceil(count / 4));
      const early = Math.max(...firstQuarter);
      const late = Math.max(...lastQuarter);
      const holds = complete && late < 1000 && late <= Math.max(2 * early, 500);
      add(
        `sustained ${rate}/s (sent ${sentRate.toFixed(1)}/s)`,
        `last-stream delay: first quarter ≤ ${early.toFixed(0)} ms, last quarter ≤ ${late.toFixed(0)} ms → ${holds ? 'holds' : 'lag grows'}`,
      );
      if (!holds) break;
      sustained = rate;
    }
    add('sustained changes per second (seen by all)', `≥ ${sustained}/s`);
  } finally {
    for (const c of clients) {
      c.send({ type: 'close' });
    }
    await sleep(1500);
    for (const c of clients) c.kill();
  }
  return rows;
}

const bench: Bench = {
  name: 'realtime',
  description: 'SSE upcoming stream: streams from separate client processes, open time, commit-to-delivery, sustained rate',
  async run(ctx) {
    const sizes = (process.env.BENCH_REALTIME_STREAMS ?? '1000,10000').split(',').map(Number);
    const max = Math.max(...sizes);
    ctx.progress(`creating ${max} users in one community`);
    const data = await makeUsers(ctx, max);
    const rows: Row[] = [];
    let markBase = 0;
    for (const n of sizes) {
      rows.push(...(await runSize(ctx, n, data, markBase)));
      markBase += 100_000;
      await new Promise((r) => setTimeout(r, 2000));
    }
    console.log('\nrealtime figures:');
    for (const r of rows) console.log(`  ${String(r.streams).padStart(6)} streams | ${r.scenario}: ${r.value}`);
    console.log(`  load average at the end: ${(await import('node:os')).loadavg().map((l) => l.toFixed(1)).join(' ')}`);
    const stats: Stats[] = [];
    return stats;
  },
};
export default bench;

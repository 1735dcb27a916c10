// Gateway throughput against Postgres itself (issue 11): for each route, the
// requests per second through the real gateway (a separate `node
// gateway/main.ts` process, loaded by autocannon over keep-alive
// connections) and through postgres.js in this process doing exactly the SQL
// the pipeline sends for that route (BEGIN, the settings, the call, COMMIT,
// pipelined on one pooled connection), with the same pool size and the same
// concurrency. The ratio gateway ÷ direct is what the gateway costs; the floor
// (`select 1` through the same pool) is the most either side could do.
//
// Then the list SQL: each list function against a plain select of the same
// rows, both looped inside Postgres, and the gateway at WEB_CONCURRENCY=N.
//
// A third column runs the same statements one at a time (each awaited
// before the next: four round trips), as a client that does not pipeline
// would; the gateway is judged against the pipelined direct side. A fourth
// is the ceiling of any gateway on node:http and postgres.js: a bare
// node:http server (bare-server.ts) running the direct side's transaction
// with no pipeline at all, loaded by the same autocannon.
//
// Knobs: BENCH_SECONDS (per run, default 5), BENCH_REPEAT (alternating
// gateway/direct runs per route; medians reported, default 3),
// BENCH_WARMUP (seconds of gateway load before measuring a route, default 10),
// BENCH_CONNECTIONS (default 32), BENCH_POOL (default 10); BENCH_ONLY=sql
// measures the list SQL only; BENCH_ROUTES=profile,tasks picks routes by a
// word of their label; BENCH_CPU_PROF=dir profiles the gateway process.
import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import autocannon from 'autocannon';
import postgres from 'postgres';
import type { Bench, BenchContext } from './harness.ts';
import { directTransaction, settings, routeCases, type DirectClaims, type RouteCase } from './gateway-sql.ts';
import { freePort } from '../../gateway/core/process/free-port.ts';
import { startGatewayProcess, type GatewayProcess } from './gateway-process.ts';
import { measurePipelinePieces } from './pipeline-pieces.ts';
import { postgresCpu, processCpuUs, type PostgresCpu } from './postgres-cpu.ts';

const SECONDS = Number(process.env.BENCH_SECONDS ?? 5);
const REPEAT = Number(process.env.BENCH_REPEAT ?? 3);
const WARMUP = Number(process.env.BENCH_WARMUP ?? 10);
const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 32);
const POOL = Number(process.env.BENCH_POOL ?? 10);
const CORES = os.availableParallelism();

const median = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2]! : (s[s.length / 2 - 1]! + s[s.length / 2]!) / 2;
};

interface Measured {
  rps: number;
  p50: number;
  p99: number;
  /** CPU time per request (µs) of the serving process: the gateway's, or this process's on the direct side. */
  cpuUs: number;
  /** Postgres's CPU time per request (µs), all its processes (NaN when the server is not on this machine). */
  pgCpuUs: number;
}

/** The bench database's server, for its CPU (set once the bench starts). */
let pg: PostgresCpu | null = null;
const pgCpu = () => pg?.cpuUs() ?? NaN;

/**
 * The bench's ceiling (bare-server.ts): node:http running the direct side's
 * transaction with no pipeline, as a separate process like the gateway.
 */
async function startBareServer(ctx: BenchContext, claims: DirectClaims): Promise<GatewayProcess> {
  const port = await freePort();
  const child: ChildProcess = spawn(process.execPath, ['--import', 'tsx', path.join('test', 'bench', 'bare-server.ts')], {
    cwd: path.resolve(import.meta.dirname, '..', '..'),
    env: {
      ...process.env,
      NODE_ENV: 'production',
      BARE_DATABASE_URL: ctx.env.databaseUrl,
      BARE_PORT: String(port),
      BARE_POOL: String(POOL),
      BARE_CLAIMS: claims.json,
      BARE_SESSION: claims.session ?? '',
      BARE_PUBLIC_URL: ctx.env.config.publicUrl,
    },
    stdio: ['ignore', 'ignore', 'inherit', 'ipc'],
  });
  await new Promise<void>((resolve, reject) => {
    child.once('message', () => resolve());
    child.once('exit', (code) => reject(new Error(`bare server exited with ${code}`)));
  });
  return {
    url: `http://127.0.0.1:${port}`,
    cpuUs: () => processCpuUs(child.pid!),
    stop: () =>
      new Promise<void>((resolve) => {
        if (child.exitCode !== null) return resolve();
        child.once('exit', () => resolve());
        child.kill('SIGTERM');
      }),
  };
}

async function loadGateway(gateway: GatewayProcess, route: RouteCase, token: string, seconds: number): Promise<Measured> {
  const cpu0 = gateway.cpuUs();
  const pg0 = pgCpu();
  const result = await autocannon({
    url: gateway.url + route.path,
    method: route.method,
    connections: CONNECTIONS,
    duration: seconds,
    headers: {
      authorization: `Bearer ${token}`,
      ...(route.body === undefined ? {} : { 'content-type': 'application/json' }),
    },
    body: route.body === undefined ? undefined : JSON.stringify(route.body),
  });
  if (result.non2xx > 0 || result.errors > 0) {
    throw new Error(`${route.label}: ${result.non2xx} non-2xx and ${result.errors} errors of ${result.requests.total}`);
  }
  const cpuUs = (gateway.cpuUs() - cpu0) / result.requests.total;
  const pgCpuUs = (pgCpu() - pg0) / result.requests.total;
  return { rps: result.requests.total / seconds, p50: result.latency.p50, p99: result.latency.p99, cpuUs, pgCpuUs };
}

/** CONNECTIONS workers calling `fn` in a loop for `seconds`. */
async function loadDirect(fn: () => Promise<unknown>, seconds: number): Promise<Measured> {
  const latencies: number[] = [];
  const cpu0 = process.cpuUsage();
  const pg0 = pgCpu();
  const end = Date.now() + seconds * 1000;
  await Promise.all(
    Array.from({ length: CONNECTIONS }, async () => {
      while (Date.now() < end) {
        const t0 = process.hrtime.bigint();
        await fn();
        latencies.push(Number(process.hrtime.bigint() - t0) / 1e6);
      }
    }),
  );
  const cpu = process.cpuUsage(cpu0);
  latencies.sort((a, b) => a - b);
  const at = (p: number) => latencies[Math.min(latencies.length - 1, Math.floor((p / 100) * latencies.length))]!;
  return {
    rps: latencies.length / seconds,
    p50: at(50),
    p99: at(99),
    cpuUs: (cpu.user + cpu.system) / latencies.length,
    pgCpuUs: (pgCpu() - pg0) / latencies.length,
  };
}

/**
 * The same statements as most clients send them: each awaited before the
 * next (four round trips; what the gateway did before issue 11).
 */
async function directOneByOne(sql: postgres.Sql, claims: DirectClaims, route: RouteCase) {
  const tx = await sql.reserve();
  try {
    await tx.unsafe(route.readOnly ? 'begin read only' : 'begin');
    await settings(tx, claims);
    const result = await route.call(tx);
    await tx`commit`;
    return result;
  } catch (err) {
    await tx`rollback`.catch(() => {});
    throw err;
  } finally {
    tx.release();
  }
}

const summary = (xs: Measured[]): Measured => ({
  rps: median(xs.map((x) => x.rps)),
  p50: median(xs.map((x) => x.p50)),
  p99: median(xs.map((x) => x.p99)),
  cpuUs: median(xs.map((x) => x.cpuUs)),
  pgCpuUs: median(xs.map((x) => x.pgCpuUs)),
});

const fmt = (n: number, digits = 0) => n.toFixed(digits);

function table(header: string[], rows: string[][]): string {
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i]!.length)));
  const line = (cells: string[]) => cells.map((c, i) => (i === 0 ? c.padEnd(widths[i]!) : c.padStart(widths[i]!))).join('  ');
  return [line(header), line(widths.map((w) => '-'.repeat(w))), ...rows.map(line)].join('\n');
}

async function loadData(ctx: BenchContext, userId: string, email: string): Promise<void> {
  const { sql } = ctx;
  ctx.progress(
    'loading 2,000 communities (the user in 60, managing 2; 120 other members in the first) and 10,000 events (20 upcoming for the user)',
  );
  await sql`alter table app.events disable trigger _900_log_change`;
  await sql`
    with n as (insert into app.nodes (kind) select 'community' from generate_series(1, 2000) returning id)
    insert into app.communities (node_id, name, description, tags)
    select id, 'Bench community ' || row_number() over (), 'A community for benchmarks', array['bench', 'tag']
      from n`;
  await sql`
    insert into app.community_members (community_id, member_node_id, role, joined_at)
    select c.id, p.node_id, case when c.r <= 2 then 'manager' else 'member' end, now() - c.r * interval '1 hour'
      from (select id, row_number() over (order by id) as r from app.communities order by id limit 60) c,
           app.profiles p
     where p.id = ${userId}`;
  // 120 other members (names derived from their e-mail: shown to the user as
  // a manager) in the user's first community, so a page of its members is 50.
  await sql`
    with u as (
      insert into identity.users (email, password_hash)
      select 'bench-member-' || g || '-' || md5(random()::text) || '@example.com', null from generate_series(1, 120) g
      returning id
    ), n as (
      insert into app.nodes (kind) select 'user' from u returning id
    ), pairs as (
      select u.id as user_id, n.id as node_id
        from (select id, row_number() over () as r from u) u
        join (select id, row_number() over () as r from n) n using (r)
    ), p as (
      insert into app.profiles (id, name, name_source, node_id) select user_id, 'member', 'email', node_id from pairs returning node_id
    )
    insert into app.community_members (community_id, member_node_id, joined_at)
    select (select id from app.communities order by id limit 1), p.node_id, now() - interval '1 day' from p`;
  // Every community: 4 past events and one upcoming; the user's first 20
  // communities hold the user's 20 upcoming events.
  await sql`
    with plan as (
      select c.id as community_id, c.r, g,
             case when g < 5 then now() - g * interval '30 days' else now() + c.r * interval '1 hour' end as starts_at
        from (select id, row_number() over (order by id) as r from app.communities) c, generate_series(1, 5) g
       where g < 5 or c.r <= 20 or c.r > 60
    ),
    numbered as (select *, row_number() over () as k from plan),
    n as (insert into app.nodes (kind) select 'event' from numbered returning id),
    nn as (select id, row_number() over () as k from n)
    insert into app.events (node_id, community_id, title, description, starts_at, ends_at, location, platform_a_url)
    select nn.id, p.community_id, 'Bench event ' || p.k, 'An event for benchmarks', p.starts_at,
           case when p.k % 3 = 0 then null else p.starts_at + interval '3 hours' end, 'Somewhere',
           case when p.k % 2 = 0 then 'https://a.example/' || p.k end
      from numbered p join nn using (k)`;
  await sql`alter table app.events enable trigger _900_log_change`;
  await sql`analyze`;
  void email;
}

const bench: Bench = {
  name: 'gateway',
  description: `gateway vs postgres.js doing the same SQL; ${CONNECTIONS} connections, pool ${POOL}, ${SECONDS}s × ${REPEAT}, ${CORES} cores`,
  async throughput(ctx) {
    const me = await ctx.user();
    await loadData(ctx, me.userId, me.email);
    const upcoming = (await ctx.call('GET', '/api/mobile/events/upcoming', { token: me.token })) as unknown[];
    const mine = (await ctx.call('GET', '/api/mobile/communities', { token: me.token })) as { data: unknown[] };
    ctx.progress(`the user sees ${upcoming.length} upcoming events and ${mine.data.length} communities on a page`);

    // The claims the gateway puts in request.jwt.claims: the token's payload and the role.
    const payload = JSON.parse(Buffer.from(me.token.split('.')[1]!, 'base64url').toString()) as Record<string, unknown>;
    const claims: DirectClaims = {
      json: JSON.stringify({ ...payload, role: 'authenticated' }),
      session: typeof payload.session_id === 'string' ? payload.session_id : null,
    };
    const routes = routeCases(ctx.env.config.publicUrl);

    if (process.env.BENCH_ONLY === 'sql') return { listSql: await measureListSql(ctx, me.userId) };
    if (process.env.BENCH_ONLY === 'pieces') return { pipelinePieces: await pieces(ctx, claims) };
    const picked = process.env.BENCH_ROUTES?.split(',').filter(Boolean);
    if (picked) routes.splice(0, routes.length, ...routes.filter((r) => picked.some((word) => r.label.includes(word))));
    let bare: GatewayProcess | undefined;
    const direct = postgres(ctx.env.databaseUrl, { max: POOL, onnotice: () => {} });
    pg = await postgresCpu(direct);
    const results: Record<string, unknown>[] = [];
    const lines: string[][] = [];
    try {
      const floor = await loadDirect(() => direct`select 1`, SECONDS);
      lines.push(['floor: select 1 (direct)', '-', '-', '-', fmt(floor.rps), fmt(floor.p50, 1), fmt(floor.p99, 1), '-', fmt(floor.cpuUs), '-', fmt(floor.pgCpuUs), '-', '-', '-', '-', '-']);
      results.push({ route: 'select 1', direct: floor });

      bare = await startBareServer(ctx, claims);
      for (const workers of [1, CORES > 1 ? CORES : 0].filter((w) => w > 0)) {
        const gateway = await startGatewayProcess(ctx, workers);
        try {
          for (const route of workers === 1 ? routes : routes.slice(0, 1)) {
            // Warm up both sides (prepared statements; the JIT needs tens of
            // thousands of requests before the gateway's CPU per request settles), then alternate.
            await loadGateway(gateway, route, me.token, WARMUP);
            await loadDirect(() => directTransaction(direct, claims, route), 1);
            if (workers === 1) await loadGateway(bare, route, me.token, 2);
            const g: Measured[] = [];
            const b: Measured[] = [];
            const d: Measured[] = [];
            const seq: Measured[] = [];
            for (let i = 0; i < REPEAT; i++) {
              g.push(await loadGateway(gateway, route, me.token, SECONDS));
              d.push(await loadDirect(() => directTransaction(direct, claims, route), SECONDS));
              if (workers === 1) seq.push(await loadDirect(() => directOneByOne(direct, claims, route), SECONDS));
              if (workers === 1) b.push(await loadGateway(bare, route, me.token, SECONDS));
            }
            const ratios = g.map((x, i) => x.rps / d[i]!.rps);
            const row = {
              route: route.label,
              workers,
              gateway: summary(g),
              direct: summary(d),
              ratio: median(ratios),
              ratios,
              ...(seq.length > 0 ? { directOneByOne: summary(seq), ratioOneByOne: median(g.map((x, i) => x.rps / seq[i]!.rps)) } : {}),
              ...(b.length > 0 ? { bare: summary(b), ratioBare: median(b.map((x, i) => x.rps / d[i]!.rps)) } : {}),
            };
            results.push(row);
            lines.push([
              `${route.label}${workers > 1 ? ` [${workers} processes]` : ''}`,
              fmt(row.gateway.rps),
              fmt(row.gateway.p50, 1),
              fmt(row.gateway.p99, 1),
              fmt(row.direct.rps),
              fmt(row.direct.p50, 1),
              fmt(row.direct.p99, 1),
              fmt(row.gateway.cpuUs),
              fmt(row.direct.cpuUs),
              fmt(row.gateway.pgCpuUs),
              fmt(row.direct.pgCpuUs),
              `${row.ratio.toFixed(2)} (${ratios.map((r) => r.toFixed(2)).join(' ')})`,
              row.directOneByOne ? fmt(row.directOneByOne.rps) : '-',
              row.ratioOneByOne !== undefined ? row.ratioOneByOne.toFixed(2) : '-',
              row.bare ? fmt(row.bare.rps) : '-',
              row.ratioBare !== undefined ? row.ratioBare.toFixed(2) : '-',
            ]);
            ctx.progress(`${lines.at(-1)!.join('  ')}`);
          }
        } finally {
          await gateway.stop();
        }
      }
    } finally {
      await bare?.stop();
      await direct.end({ timeout: 5 });
    }
    console.log(`\n${CORES} cores; ${CONNECTIONS} connections; pool ${POOL} on both sides; medians of ${REPEAT} × ${SECONDS}s`);
    console.log(
      table(
        ['route', 'gw rps', 'gw p50', 'gw p99', 'direct rps', 'd p50', 'd p99', 'gw cpu µs/req', 'd cpu µs/req', 'pg cpu µs/req (gw)', 'pg cpu µs/req (d)', 'gw ÷ direct (runs)', '1-by-1 rps', 'gw ÷ 1-by-1', 'bare rps', 'bare ÷ direct'],
        lines,
      ),
    );

    const listRatios = await measureListSql(ctx, me.userId);
    const pipelinePieces = await pieces(ctx, claims);
    return { cores: CORES, connections: CONNECTIONS, pool: POOL, routes: results, listSql: listRatios, pipelinePieces };
  },
};

/** The request's transaction in pieces (pipeline-pieces.ts), as Postgres CPU per transaction. */
async function pieces(ctx: BenchContext, claims: DirectClaims) {
  const sql = postgres(ctx.env.databaseUrl, { max: POOL, onnotice: () => {} });
  try {
    const server = await postgresCpu(sql);
    if (!server) {
      console.log('\nPipeline pieces: skipped (the database server is not on this machine: no /proc to read)');
      return [];
    }
    const results = await measurePipelinePieces(sql, server, claims, SECONDS, REPEAT);
    console.log(`\nThe request's transaction in pieces (pipelined, 10 connections, medians of ${REPEAT} × ${SECONDS}s): Postgres CPU per transaction`);
    console.log(table(['pieces', 'tx/s', 'pg cpu µs/tx', '÷ skeleton'], results.map((r) => [r.label, fmt(r.txPerSecond), fmt(r.pgCpuUs), r.ratio.toFixed(2)])));
    return results;
  } finally {
    await sql.end({ timeout: 5 });
  }
}

/**
 * Each list function against a plain select of the rows it returns (no
 * function, no per-row work beyond to_jsonb), both looped inside Postgres as
 * the user, output as text (what the client receives).
 */
async function measureListSql(ctx: BenchContext, userId: string): Promise<Record<string, number>[]> {
  const { sql } = ctx;
  const publicUrl = ctx.env.config.publicUrl;
  const [{ node_id: node, community_id: community }] = (await sql`
    select p.node_id,
           (select m.community_id from app.community_members m where m.member_node_id = p.node_id
             order by (select count(*) from app.community_members o where o.community_id = m.community_id) desc limit 1) as community_id
      from app.profiles p where p.id = ${userId}`) as unknown as [{ node_id: string; community_id: string }];
  const [{ has_page: hasPage }] = (await sql`
    select to_regprocedure('api.events_upcoming_page(text)') is not null as has_page`) as unknown as [{ has_page: boolean }];
  const cases: { label: string; fn: string; plain: string }[] = [
    {
      label: 'api.events_upcoming_page (20)',
      // (before issue 11 the list was api.events_upcoming's rows)
      fn: hasPage
        ? `select length(api.events_upcoming_page('${publicUrl}')::text)`
        : `select sum(length(e::text)) from api.events_upcoming('${publicUrl}') e`,
      plain: `select sum(length(to_jsonb(e)::text)) from (select e.* from app.events e
                where e.community_id in (select community_id from app.community_members where member_node_id = '${node}')
                  and coalesce(e.ends_at, e.starts_at + interval '2 hours') >= now()
                order by e.starts_at, e.id limit 100) e`,
    },
    {
      label: 'api.communities_mine (50)',
      fn: `select length(api.communities_mine(50, 0)::text)`,
      plain: `select sum(length(to_jsonb(x)::text)) from (select c.*, m.joined_at, m.role from app.community_members m
                join app.communities c on c.id = m.community_id where m.member_node_id = '${node}'
                order by m.joined_at desc, c.id limit 50) x`,
    },
    {
      label: 'api.communities_search (50)',
      fn: `select length(api.communities_search('community 1', 50, 0)::text)`,
      plain: `select sum(length(to_jsonb(x)::text)) from (select c.*, m.role from app.communities c
                left join app.community_members m on m.community_id = c.id and m.member_node_id = '${node}'
                where c.search_text like '%community 1%' order by lower(c.name), c.id limit 50) x`,
    },
    {
      label: 'api.community_members (50)',
      fn: `select length(api.community_members('${community}', 50, 0)::text)`,
      plain: `select sum(length(to_jsonb(x)::text)) from (select m.*, p.name from app.community_members m
                left join app.profiles p on p.node_id = m.member_node_id
                where m.community_id = '${community}' order by m.role, m.joined_at limit 50) x`,
    },
    {
      label: 'api.tasks_list (20)',
      fn: `select sum(length(t::text)) from api.tasks_list(null, 1, 20) t`,
      plain: `select sum(length(to_jsonb(t)::text)) from (select * from app.tasks where created_by = '${userId}'
                order by inserted_at desc, id limit 20) t`,
    },
  ];
  const LOOPS = 300;
  const claims = JSON.stringify({ role: 'authenticated', sub: userId });
  const out: Record<string, number>[] = [];
  const lines: string[][] = [];
  for (const c of cases) {
    // Static SQL in a PL/pgSQL loop (its plan is cached like the function's).
    const timer = (body: string) => `
      create or replace function pg_temp.bench_loop(n integer) returns double precision language plpgsql as $$
      declare t0 timestamptz; begin
        ${body.replace(/^select /, 'perform ')};
        t0 := clock_timestamp();
        for i in 1..n loop ${body.replace(/^select /, 'perform ')}; end loop;
        return extract(epoch from clock_timestamp() - t0) * 1000 / n;
      end $$`;
    const run = async (body: string) =>
      sql.begin(async (tx) => {
        await tx.unsafe(timer(body));
        await tx.unsafe('grant execute on function pg_temp.bench_loop(integer) to authenticated');
        await tx`select set_config('role', 'authenticated', true), set_config('request.jwt.claims', ${claims}, true)`;
        const samples: number[] = [];
        for (let i = 0; i < 3; i++) samples.push(Number((await tx`select pg_temp.bench_loop(${LOOPS}) as ms`)[0]!.ms));
        return median(samples);
      });
    const fnMs = await run(c.fn);
    const plainMs = await run(c.plain);
    out.push({ [c.label]: fnMs / plainMs });
    lines.push([c.label, fmt(fnMs, 3), fmt(plainMs, 3), (fnMs / plainMs).toFixed(2)]);
  }
  console.log(`\nList SQL (as the user, looped ${LOOPS}× inside Postgres, median of 3): function vs a plain select of its rows`);
  console.log(table(['function', 'fn ms', 'plain ms', 'ratio'], lines));
  return out;
}

export default bench;

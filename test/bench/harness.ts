// The benchmark harness behind `npm run bench`. Each *.bench.ts file in this
// folder exports a Bench; every bench runs in its own throwaway environment
// (support/environment.ts; BENCH_DATABASE_URL to use another server), first
// measures a baseline request through the same gateway, and reports each
// scenario as median/p95 latency and as a ratio to that baseline, so figures
// from different machines can be compared.
import crypto from 'node:crypto';
import postgres from 'postgres';
import type { Sql } from '../../gateway/core/database/pool.ts';
import type { TestEnvironment } from '../support/environment.ts';
import { postgresCpu, type PostgresCpu } from './postgres-cpu.ts';

export interface Stats {
  label: string;
  n: number;
  medianMs: number;
  p95Ms: number;
  /** Reported by scenarios that measure it (e.g. realtime delivery delays). */
  p99Ms?: number;
  /** median / baseline median */
  ratio?: number;
  /** ms of CPU per request (measure()): every Postgres process (when the server runs on this machine), and this process (the gateway and the client). */
  pgCpuMs?: number;
  nodeCpuMs?: number;
}

export interface BenchContext {
  env: TestEnvironment;
  /** Superuser connection to the bench database, for loading data. */
  sql: Sql;
  /** An HTTP call against the gateway; throws on an unexpected status. */
  call(method: string, path: string, options?: { token?: string; body?: unknown; expect?: number }): Promise<unknown>;
  /** Registers and logs in a user; returns the access token and ids. */
  user(): Promise<{ token: string; userId: string; email: string }>;
  /** Times `fn` `n` times (after `warmup` untimed runs), sequentially. */
  measure(label: string, n: number, fn: (i: number) => Promise<unknown>, warmup?: number): Promise<Stats>;
  /** Prints progress for long steps (data loading). */
  progress(message: string): void;
}

export interface Bench {
  name: string;
  description: string;
  /** Latency benches: scenarios reported against the baseline request. */
  run?(ctx: BenchContext): Promise<Stats[]>;
  /** Throughput benches print their own tables; what they return goes into the JSON summary. */
  throughput?(ctx: BenchContext): Promise<Record<string, unknown>>;
  /** Benches that start their own database and processes (no shared environment); like throughput otherwise. */
  standalone?(): Promise<Record<string, unknown>>;
}

export function percentile(sorted: number[], p: number): number {
  if (sorted.length === 0) return NaN;
  const index = Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1);
  return sorted[Math.max(0, index)]!;
}

export function makeContext(env: TestEnvironment): BenchContext & { close(): Promise<void> } {
  const sql = postgres(env.databaseUrl, { max: 10, onnotice: () => {} });
  const started = Date.now();
  let server: Promise<PostgresCpu | null> | undefined;
  const call: BenchContext['call'] = async (method, path, options = {}) => {
    const headers: Record<string, string> = {};
    if (options.token) headers.authorization = `Bearer ${options.token}`;
    if (options.body !== undefined) headers['content-type'] = 'application/json';
    const res = await fetch(env.baseUrl + path, {
      method,
      headers,
      body: options.body === undefined ? undefined : JSON.stringify(options.body),
    });
    const text = await res.text();
    const wanted = options.expect ?? (method === 'POST' ? [200, 201] : [200]);
    if (!(Array.isArray(wanted) ? wanted : [wanted]).includes(res.status)) {
      throw new Error(`${method} ${path}: ${res.status} ${text.slice(0, 200)}`);
    }
    return text ? JSON.parse(text) : undefined;
  };
  return {
    env,
    sql,
    call,
    async user() {
      const email = `bench-${crypto.randomBytes(6).toString('hex')}@example.com`;
      const password = 'bench-password';
      const reg = (await call('POST', '/api/auth/register', { body: { email, password } })) as { user_id: string };
      const login = (await call('POST', '/api/auth/login', { body: { email, password } })) as { access_token: string };
      return { token: login.access_token, userId: reg.user_id, email };
    },
    async measure(label, n, fn, warmup = Math.min(20, Math.ceil(n / 10))) {
      for (let i = 0; i < warmup; i++) await fn(i);
      const pg = await (server ??= postgresCpu(sql).catch(() => null));
      const times: number[] = [];
      const pg0 = pg?.cpuUs() ?? NaN;
      const node0 = process.cpuUsage();
      for (let i = 0; i < n; i++) {
        const t0 = process.hrtime.bigint();
        await fn(i);
        times.push(Number(process.hrtime.bigint() - t0) / 1e6);
      }
      const node = process.cpuUsage(node0);
      const pgCpuMs = ((pg?.cpuUs() ?? NaN) - pg0) / 1000 / n;
      times.sort((a, b) => a - b);
      return {
        label,
        n,
        medianMs: percentile(times, 50),
        p95Ms: percentile(times, 95),
        ...(Number.isFinite(pgCpuMs) ? { pgCpuMs } : {}),
        nodeCpuMs: (node.user + node.system) / 1000 / n,
      };
    },
    progress(message) {
      console.log(`  [${((Date.now() - started) / 1000).toFixed(1)}s] ${message}`);
    },
    close: () => sql.end({ timeout: 5 }),
  };
}

/** The baseline every bench measures first: one authenticated request calling a trivial SQL function. */
export async function measureBaseline(ctx: BenchContext): Promise<Stats> {
  const { token } = await ctx.user();
  return ctx.measure('baseline: GET /api/mobile/hat_types', 300, () => ctx.call('GET', '/api/mobile/hat_types', { token }));
}

/** Median, p95 and p99 of a list of samples (ms). */
export function summarize(label: string, samples: number[]): Stats {
  const sorted = [...samples].sort((a, b) => a - b);
  return { label, n: sorted.length, medianMs: percentile(sorted, 50), p95Ms: percentile(sorted, 95), p99Ms: percentile(sorted, 99) };
}

export function formatTable(rows: Stats[]): string {
  const withP99 = rows.some((r) => r.p99Ms !== undefined);
  const withCpu = rows.some((r) => r.nodeCpuMs !== undefined);
  const cpu = (ms: number | undefined) => (ms === undefined ? '-' : ms.toFixed(3));
  const header = ['scenario', 'n', 'median ms', 'p95 ms', ...(withP99 ? ['p99 ms'] : []), 'x baseline', ...(withCpu ? ['Postgres CPU ms/req', 'node CPU ms/req'] : [])];
  const body = rows.map((r) => [
    r.label,
    String(r.n),
    r.medianMs.toFixed(2),
    r.p95Ms.toFixed(2),
    ...(withP99 ? [r.p99Ms === undefined ? '-' : r.p99Ms.toFixed(2)] : []),
    r.ratio === undefined ? '-' : r.ratio.toFixed(2),
    ...(withCpu ? [cpu(r.pgCpuMs), cpu(r.nodeCpuMs)] : []),
  ]);
  const widths = header.map((h, i) => Math.max(h.length, ...body.map((row) => row[i]!.length)));
  const line = (cells: string[]) => cells.map((c, i) => (i === 0 ? c.padEnd(widths[i]!) : c.padStart(widths[i]!))).join('  ');
  return [line(header), line(widths.map((w) => '-'.repeat(w))), ...body.map(line)].join('\n');
}

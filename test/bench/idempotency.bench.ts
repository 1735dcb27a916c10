// What an Idempotency-Key costs (docs/api/web.md#calendars-share-previews-and-safe-retries):
// the same POST /api/mobile/tasks without a key, with a new key for a caller
// with few records, with a new key for a caller at the cap (1,000 records:
// every claim trims the oldest), and the same request again (a replay: the
// route runs for its authorization, is rolled back, and the stored answer is
// sent). Each scenario against the baseline request of the same run, with the
// CPU per request of Postgres (every server process, from /proc) and of this
// process (the in-process gateway and the client together).
import crypto from 'node:crypto';
import { percentile, type Bench, type BenchContext } from './harness.ts';
import { postgresCpu, processCpuUs } from './postgres-cpu.ts';

const N = Number(process.env.BENCH_N ?? 300);

interface Row {
  label: string;
  n: number;
  medianMs: number;
  p95Ms: number;
  ratio?: number;
  postgresCpuUs: number | null;
  nodeCpuUs: number;
}

async function post(ctx: BenchContext, token: string, key: string | null, title: string): Promise<number> {
  const headers: Record<string, string> = { authorization: `Bearer ${token}`, 'content-type': 'application/json' };
  if (key) headers['idempotency-key'] = key;
  const res = await fetch(`${ctx.env.baseUrl}/api/mobile/tasks`, { method: 'POST', headers, body: JSON.stringify({ title }) });
  await res.text();
  if (res.status !== 201) throw new Error(`POST /api/mobile/tasks: ${res.status}`);
  return res.status;
}

const bench: Bench = {
  name: 'idempotency',
  description: `Idempotency-Key: ${N} keyed POSTs per scenario (new key, at the 1,000-record cap, replay) against the same POST without a key`,
  async throughput(ctx) {
    const pg = await postgresCpu(ctx.sql);
    const measure = async (label: string, fn: (i: number) => Promise<unknown>): Promise<Row> => {
      for (let i = 0; i < 30; i++) await fn(-1 - i);
      const times: number[] = [];
      const pg0 = pg?.cpuUs() ?? 0;
      const node0 = processCpuUs(process.pid);
      for (let i = 0; i < N; i++) {
        const t0 = process.hrtime.bigint();
        await fn(i);
        times.push(Number(process.hrtime.bigint() - t0) / 1e6);
      }
      const pgUs = pg ? (pg.cpuUs() - pg0) / N : null;
      const nodeUs = (processCpuUs(process.pid) - node0) / N;
      times.sort((a, b) => a - b);
      return { label, n: N, medianMs: percentile(times, 50), p95Ms: percentile(times, 95), postgresCpuUs: pgUs, nodeCpuUs: nodeUs };
    };

    const baselineUser = await ctx.user();
    const baseline = await measure('baseline: GET /api/mobile/hat_types', () =>
      ctx.call('GET', '/api/mobile/hat_types', { token: baselineUser.token }),
    );
    const rows: Row[] = [baseline];

    const plain = await ctx.user();
    rows.push(await measure('POST /api/mobile/tasks, no key', (i) => post(ctx, plain.token, null, `plain ${i}`)));

    const fresh = await ctx.user();
    rows.push(await measure('POST, a new key (few records)', (i) => post(ctx, fresh.token, crypto.randomUUID(), `fresh ${i}`)));

    const capped = await ctx.user();
    ctx.progress('filling 1,000 keyed records by HTTP');
    for (let i = 0; i < 1000; i++) await post(ctx, capped.token, crypto.randomUUID(), `fill ${i}`);
    rows.push(await measure('POST, a new key at the 1,000-record cap', (i) => post(ctx, capped.token, crypto.randomUUID(), `capped ${i}`)));

    const replayed = await ctx.user();
    const key = crypto.randomUUID();
    await post(ctx, replayed.token, key, 'replayed');
    rows.push(await measure('POST, the same request again (replay)', () => post(ctx, replayed.token, key, 'replayed')));

    const [records] = await ctx.sql`select count(*)::int as n from app.idempotency_keys where user_id = ${capped.userId}`;
    ctx.progress(`records of the capped caller after the run: ${records!.n as number}`);

    for (const row of rows) row.ratio = row.medianMs / baseline.medianMs;
    const header = ['scenario', 'n', 'median ms', 'p95 ms', 'x baseline', 'Postgres CPU µs/req', 'node CPU µs/req'];
    const body = rows.map((r) => [
      r.label,
      String(r.n),
      r.medianMs.toFixed(2),
      r.p95Ms.toFixed(2),
      r.ratio!.toFixed(2),
      r.postgresCpuUs === null ? '-' : r.postgresCpuUs.toFixed(0),
      r.nodeCpuUs.toFixed(0),
    ]);
    const widths = header.map((h, i) => Math.max(h.length, ...body.map((b) => b[i]!.length)));
    const line = (cells: string[]) => cells.map((c, i) => (i === 0 ? c.padEnd(widths[i]!) : c.padStart(widths[i]!))).join('  ');
    console.log([line(header), line(widths.map((w) => '-'.repeat(w))), ...body.map(line)].join('\n'));
    return { rows, cappedRecords: records!.n };
  },
};

export default bench;

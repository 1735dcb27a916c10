// What seeing inside the service costs (`npm run bench -- observability`):
// the same route through three real gateway processes on the bench
// database, loaded in turn (A/B/C alternated, BENCH_REPEAT rounds, medians):
//
//   off      no ADMIN_PORT, no OTLP endpoint: nothing recorded
//   metrics  ADMIN_PORT set: every metric recorded (tracing off: the SDK not loaded)
//   traces   ADMIN_PORT and OTEL_EXPORTER_OTLP_ENDPOINT: a server span and a
//            SQL span per request, exported over OTLP/HTTP (JSON) to a
//            receiver in this process
//
// Reported: requests per second, the ratio to `off` of the same round, and
// the gateway's CPU per request (its processes, from /proc), whose
// difference to `off` is the cost per request.
//
// On a shared machine that difference is within the noise of a few µs, so
// the recording itself is measured too, in this process: what metrics record
// for one request (its duration, its SQL call's, its pool wait, the api
// function of its query), as core/process/metrics.ts records it, against the
// same with prom-client's labelled histograms (`recording` rows; CPU µs per
// request, alternated rounds, medians).
// Knobs: BENCH_SECONDS (default 5), BENCH_REPEAT (default 5),
// BENCH_CONNECTIONS (default 32), BENCH_ROUTE (default /api/mobile/profile).
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import autocannon from 'autocannon';
import client from 'prom-client';
import { enableMetrics, observeRequest, observeSql, operationOfQuery, poolWait } from '../../gateway/core/process/metrics.ts';
import { freePort } from '../../gateway/core/process/free-port.ts';
import type { Bench } from './harness.ts';
import { startGatewayProcess, type GatewayProcess } from './gateway-process.ts';

const SECONDS = Number(process.env.BENCH_SECONDS ?? 5);
const REPEAT = Number(process.env.BENCH_REPEAT ?? 5);
const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 32);
const ROUTE = process.env.BENCH_ROUTE ?? '/api/mobile/profile';

const median = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2]! : (s[s.length / 2 - 1]! + s[s.length / 2]!) / 2;
};

/** An OTLP/HTTP receiver that accepts and counts (the spans are not kept). */
async function startReceiver(): Promise<{ url: string; requests: () => number; close(): Promise<void> }> {
  let requests = 0;
  const server = http.createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      requests++;
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end('{}');
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    requests: () => requests,
    close: () => new Promise((resolve) => server.close(() => resolve())),
  };
}

async function load(gateway: GatewayProcess, token: string, seconds: number): Promise<{ rps: number; cpuUs: number; p99: number }> {
  const cpu0 = gateway.cpuUs();
  const result = await autocannon({ url: gateway.url + ROUTE, connections: CONNECTIONS, duration: seconds, headers: { authorization: `Bearer ${token}` } });
  if (result.non2xx > 0 || result.errors > 0) throw new Error(`${result.non2xx} non-2xx and ${result.errors} errors of ${result.requests.total}`);
  return { rps: result.requests.total / seconds, cpuUs: (gateway.cpuUs() - cpu0) / result.requests.total, p99: result.latency.p99 };
}

/** CPU µs per request of what metrics record for one request: ours (metrics.ts) and prom-client's labelled histograms. */
function recordingCost(): { ours: number; promClient: number } {
  enableMetrics('bench');
  const registry = new client.Registry();
  const buckets = [0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10];
  const http = new client.Histogram({ name: 'h', help: 'h', labelNames: ['m', 'r', 's'], buckets, registers: [registry] });
  const sql = new client.Histogram({ name: 's', help: 's', labelNames: ['d', 'o', 'e'], buckets, registers: [registry] });
  const wait = new client.Histogram({ name: 'w', help: 'w', buckets: [0.0005, 0.001, 0.005, 0.01], registers: [registry] });
  const children = new Map<string, client.Histogram.Internal<string>>();
  const child = (h: client.Histogram<string>, key: string, labels: Record<string, string | number>) => {
    let c = children.get(key);
    if (!c) children.set(key, (c = h.labels(labels)));
    return c;
  };
  const strings = ['select * from api.profile_get(', ')'];
  const promClientRequest = (i: number) => {
    child(http, `GET /api/mobile/profile ${200}`, { m: 'GET', r: '/api/mobile/profile', s: 200 }).observe(0.001 + i * 1e-9);
    child(sql, 'api.profile_get ', { d: 'postgresql', o: 'api.profile_get', e: '' }).observe(0.0005);
    wait.observe(0.00001);
    strings.join('$').match(/\b(api|private|admin)\.([a-z_][a-z0-9_]*)\s*\(/);
  };
  const oursRequest = (i: number) => {
    observeRequest('GET', '/api/mobile/profile', 200, 0.001 + i * 1e-9);
    observeSql(operationOfQuery(strings), '', 0.0005);
    poolWait.observe(0.00001);
  };
  const N = 200_000;
  const time = (fn: (i: number) => void) => {
    const start = process.cpuUsage();
    for (let i = 0; i < N; i++) fn(i);
    const used = process.cpuUsage(start);
    return (used.user + used.system) / N;
  };
  const ours: number[] = [];
  const theirs: number[] = [];
  time(oursRequest);
  time(promClientRequest);
  for (let round = 0; round < 7; round++) {
    ours.push(time(oursRequest));
    theirs.push(time(promClientRequest));
  }
  return { ours: median(ours), promClient: median(theirs) };
}

const bench: Bench = {
  name: 'observability',
  description: `metrics and traces on vs off, ${ROUTE}; ${CONNECTIONS} connections, ${SECONDS}s × ${REPEAT} alternated`,
  async throughput(ctx) {
    const me = await ctx.user();
    const receiver = await startReceiver();
    const variants: { name: string; env: Record<string, string> }[] = [
      { name: 'off', env: {} },
      { name: 'metrics', env: { ADMIN_PORT: String(await freePort()) } },
      {
        name: 'traces',
        env: { ADMIN_PORT: String(await freePort()), OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url, OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json' },
      },
    ];
    const gateways: GatewayProcess[] = [];
    try {
      for (const v of variants) gateways.push(await startGatewayProcess(ctx, 1, { WORKER: 'off', ...v.env }));
      for (const g of gateways) await load(g, me.token, 3); // warm-up
      const runs = variants.map(() => ({ rps: [] as number[], cpuUs: [] as number[], p99: [] as number[], ratio: [] as number[] }));
      for (let round = 0; round < REPEAT; round++) {
        // Alternated, the order turned each round (no variant always first after a pause).
        const order = variants.map((_, i) => (i + round) % variants.length);
        const measured: { rps: number; cpuUs: number; p99: number }[] = [];
        for (const i of order) measured[i] = await load(gateways[i]!, me.token, SECONDS);
        measured.forEach((m, i) => {
          runs[i]!.rps.push(m.rps);
          runs[i]!.cpuUs.push(m.cpuUs);
          runs[i]!.p99.push(m.p99);
          runs[i]!.ratio.push(m.rps / measured[0]!.rps);
        });
        ctx.progress(`round ${round + 1}: ${measured.map((m, i) => `${variants[i]!.name} ${Math.round(m.rps)} rps ${Math.round(m.cpuUs)} µs`).join(', ')}`);
      }
      const rows = variants.map((v, i) => ({
        variant: v.name,
        rps: Math.round(median(runs[i]!.rps)),
        ratio: Number(median(runs[i]!.ratio).toFixed(3)),
        cpuUsPerRequest: Math.round(median(runs[i]!.cpuUs)),
        cpuUsOverOff: Math.round(median(runs[i]!.cpuUs) - median(runs[0]!.cpuUs)),
        p99Ms: median(runs[i]!.p99),
      }));
      console.log('variant   req/s   ratio (same round)   CPU µs/request   over off   p99 ms');
      for (const r of rows) {
        console.log(`${r.variant.padEnd(9)} ${String(r.rps).padStart(6)}   ${r.ratio.toFixed(3).padStart(18)}   ${String(r.cpuUsPerRequest).padStart(14)}   ${String(r.cpuUsOverOff).padStart(8)}   ${r.p99Ms}`);
      }
      console.log(`OTLP export requests received: ${receiver.requests()}`);
      const recording = recordingCost();
      console.log(`recording one request's metrics: ${recording.ours.toFixed(3)} CPU µs (metrics.ts), ${recording.promClient.toFixed(3)} CPU µs (prom-client's labelled histograms)`);
      return { rows, otlpRequests: receiver.requests(), recordingCpuUs: recording };
    } finally {
      await Promise.all(gateways.map((g) => g.stop()));
      await receiver.close();
    }
  },
};

export default bench;

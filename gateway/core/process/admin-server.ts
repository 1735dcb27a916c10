// The admin server (ADMIN_PORT; ADMIN_HOST, default 127.0.0.1): what an
// operator's probes and Prometheus read, apart from the public port, as
// PostgREST's admin server does. Off unless ADMIN_PORT is set.
//
//   GET /live     200 while the process runs. Never asks the database: a
//                 liveness probe that failed during a database outage would
//                 restart every replica for nothing.
//   GET /ready    200 only when every readiness check passes (the database
//                 answers, migrations are applied, the LISTEN connection is
//                 up, the MCP process answers, the job worker polls: each
//                 process gives its own); else 503. The body names each check
//                 and, for those that fail, why.
//   GET /metrics  Prometheus text (prom-client): this process's metrics
//                 aggregated with those of the processes it runs (the
//                 WEB_CONCURRENCY workers, the MCP process), asked over
//                 their IPC channel with prom-client's own cluster protocol
//                 (a cluster primary adds only its process metrics), and
//                 the readiness checks of /ready, run at each scrape, as
//                 readiness_check_ok{check} (1 passing, 0 failing): alert
//                 rules see what /ready says.
//
// The answers are small JSON or text; nothing here reads a request body.
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { AggregatorRegistry } from 'prom-client';
import type { Logger } from './log.ts';
import { readinessMetric, registry } from './metrics.ts';

/** A readiness check: resolves to null when ready, else why not (a short sentence). */
export type ReadinessCheck = () => Promise<string | null>;

/** A process that answers prom-client's metrics request over IPC (a cluster worker, the MCP child). */
export interface MetricsSource {
  send(message: unknown): boolean;
  on(event: 'message', listener: (message: unknown) => void): unknown;
  off(event: 'message', listener: (message: unknown) => void): unknown;
}

export interface AdminServerOptions {
  host: string;
  port: number;
  log: Logger;
  /** Checks by name, run at each /ready (at once, each given CHECK_TIMEOUT_MS). */
  checks: () => Record<string, ReadinessCheck>;
  /** Other processes whose metrics /metrics adds (asked at each scrape). */
  sources?: () => MetricsSource[];
  /**
   * Include this process's own registry: all of it (true, the default), or
   * only its process metrics ('process': a cluster primary, which serves no
   * requests but has its own CPU and memory), or nothing (false).
   */
  own?: boolean | 'process';
}

export interface AdminServer {
  url: string;
  close(): Promise<void>;
}

/** How long a readiness check, or another process's metrics, may take. */
const CHECK_TIMEOUT_MS = 2_000;

const GET_METRICS_REQ = 'prom-client:getMetricsReq';
const GET_METRICS_RES = 'prom-client:getMetricsRes';

export async function startAdminServer(options: AdminServerOptions): Promise<AdminServer> {
  const server = http.createServer((req, res) => {
    const path = (req.url ?? '/').split('?')[0];
    const send = (status: number, type: string, body: string) => {
      res.writeHead(status, { 'content-type': type, 'cache-control': 'no-store' });
      res.end(req.method === 'HEAD' ? undefined : body);
    };
    const json = (status: number, body: unknown) => send(status, 'application/json; charset=utf-8', JSON.stringify(body));
    if (req.method !== 'GET' && req.method !== 'HEAD') return json(405, { error: 'method_not_allowed' });
    if (path === '/live') return json(200, { status: 'live' });
    if (path === '/ready') {
      return void readiness(options.checks()).then(
        (checks) => {
          const ready = Object.values(checks).every((c) => c === 'ok');
          json(ready ? 200 : 503, { status: ready ? 'ready' : 'not_ready', checks });
        },
        () => json(503, { status: 'not_ready', checks: {} }),
      );
    }
    if (path === '/metrics') {
      return void gather(options.own ?? true, options.sources?.() ?? [], options.checks()).then(
        (text) => send(200, registry.contentType, text),
        (err: unknown) => {
          options.log.warn({ err }, 'admin: the metrics could not be gathered');
          send(500, 'text/plain; charset=utf-8', 'the metrics could not be gathered\n');
        },
      );
    }
    json(404, { error: 'not_found', paths: ['/live', '/ready', '/metrics'] });
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.port, options.host, () => resolve());
  });
  const { port } = server.address() as AddressInfo;
  const url = `http://${options.host.includes(':') ? `[${options.host}]` : options.host}:${port}`;
  options.log.info({ url }, `admin server listening on ${url} (/live, /ready, /metrics)`);
  return {
    url,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}

/** Every check's outcome: 'ok', or why not. */
async function readiness(checks: Record<string, ReadinessCheck>): Promise<Record<string, string>> {
  const entries = await Promise.all(
    Object.entries(checks).map(async ([name, check]) => {
      const outcome = await withTimeout(check(), `no answer within ${CHECK_TIMEOUT_MS / 1000} s`).catch((err: unknown) => (err as Error).message || 'failed');
      return [name, outcome ?? 'ok'] as const;
    }),
  );
  return Object.fromEntries(entries);
}

function withTimeout<T>(work: Promise<T>, message: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(message)), CHECK_TIMEOUT_MS);
  });
  return Promise.race([work, timeout]).finally(() => clearTimeout(timer));
}

let requests = 0;

/** One process's metrics as prom-client exchanges them. */
type MetricsJson = Awaited<ReturnType<typeof registry.getMetricsAsJSON>>;

/** This process's metrics (as `own` says), each source's, aggregated as prom-client aggregates a cluster's, and the readiness checks. */
async function gather(own: boolean | 'process', sources: MetricsSource[], checks: Record<string, ReadinessCheck>): Promise<string> {
  const [mine, ready] = await Promise.all([own ? registry.getMetricsAsJSON() : [], readiness(checks)]);
  const parts: MetricsJson[] = [own === 'process' ? mine.filter((m) => /^(process|nodejs)_/.test(m.name)) : mine, [readinessMetric(ready)]];
  // A process that does not answer in time (restarting, stuck) is left out of this scrape.
  const answers = await Promise.all(sources.map((source) => askMetrics(source).catch(() => [] as MetricsJson[])));
  for (const answer of answers) parts.push(...answer);
  return AggregatorRegistry.aggregate(parts).metrics();
}

function askMetrics(source: MetricsSource): Promise<MetricsJson[]> {
  return ask<{ metrics?: MetricsJson[] }>(source, GET_METRICS_REQ, GET_METRICS_RES).then((m) => m.metrics ?? []);
}

/** Sends `type` over the source's IPC channel and resolves with its answer of type `answer` (same requestId), within CHECK_TIMEOUT_MS. */
function ask<T>(source: MetricsSource, type: string, answer: string): Promise<T> {
  const requestId = `admin-${process.pid}-${requests++}`;
  return new Promise((resolve, reject) => {
    const done = (err: Error | null, message?: T) => {
      clearTimeout(timer);
      source.off('message', listener);
      if (err) reject(err);
      else resolve(message as T);
    };
    const listener = (message: unknown) => {
      const m = message as { type?: unknown; requestId?: unknown; error?: string } | null;
      if (m?.type !== answer || m.requestId !== requestId) return;
      done(m.error ? new Error(m.error) : null, m as T);
    };
    const timer = setTimeout(() => done(new Error('no answer')), CHECK_TIMEOUT_MS);
    source.on('message', listener);
    try {
      source.send({ type, requestId });
    } catch (err) {
      done(err as Error);
    }
  });
}

const READY_REQ = 'admin:readyReq';
const READY_RES = 'admin:readyRes';

/** In a process the admin server's process started (a cluster worker): answer its readiness requests with these checks. */
export function answerReadinessRequests(checks: () => Record<string, ReadinessCheck>): void {
  process.on('message', (message: unknown) => {
    const m = message as { type?: unknown; requestId?: unknown } | null;
    if (m?.type !== READY_REQ) return;
    void readiness(checks()).then((outcomes) => process.send?.({ type: READY_RES, requestId: m.requestId, checks: outcomes }));
  });
}

/** A readiness check asking another process (a cluster worker) for its own: null when all of its checks pass. */
export function readinessOf(source: MetricsSource): ReadinessCheck {
  return async () => {
    const { checks } = await ask<{ checks?: Record<string, string> }>(source, READY_REQ, READY_RES);
    const failing = Object.entries(checks ?? {}).filter(([, outcome]) => outcome !== 'ok');
    return failing.length === 0 ? null : failing.map(([name, outcome]) => `${name}: ${outcome}`).join('; ');
  };
}

/**
 * In a process asked for its metrics over IPC by the one that started it
 * (the MCP child; cluster workers answer through prom-client itself):
 * answers with this process's registry.
 */
export function answerMetricsRequests(): void {
  if (!process.send) return;
  process.on('message', (message: unknown) => {
    const m = message as { type?: unknown; requestId?: unknown } | null;
    if (m?.type !== GET_METRICS_REQ) return;
    void registry.getMetricsAsJSON().then(
      (metrics) => process.send?.({ type: GET_METRICS_RES, requestId: m.requestId, metrics: [metrics] }),
      (err: unknown) => process.send?.({ type: GET_METRICS_RES, requestId: m.requestId, error: String(err) }),
    );
  });
}

/**
 * In a cluster worker: answer the primary's metrics requests (prom-client
 * installs its listener when an AggregatorRegistry is made in a worker).
 */
export function answerClusterMetricsRequests(): void {
  new AggregatorRegistry();
}

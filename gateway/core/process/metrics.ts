// The service's metrics (prom-client), named after OpenTelemetry's semantic
// conventions where one exists (http.server.request.duration is the
// Prometheus http_server_request_duration_seconds; db.client.* the pool and
// the SQL calls), and served by the admin server (admin-server.ts) when
// ADMIN_PORT is set. docs/operations/monitoring.md says what each one means
// and what to alert on.
//
// Kept only when metrics are on (enableMetrics, called by the processes when
// ADMIN_PORT is set): the pipeline's hooks (the request log line, the
// request's transaction) test one boolean otherwise.
//
// Labels are bounded: a route template (`/api/mobile/tasks/{id}`, never the
// path), an `api` function name taken from the code's own SQL, a status, a
// task name, an error code. Nothing a client sends becomes a label.
import fs from 'node:fs/promises';
import client from 'prom-client';

export const registry = client.register;

let on = false;
/** The `service` label of this process's series (gateway, worker, mcp). */
let serviceName: string | undefined;

/** Whether metrics are kept (ADMIN_PORT is set in this process or its cluster primary). */
export function metricsOn(): boolean {
  return on;
}

/**
 * Turns metrics on in this process: the process metrics (CPU, memory,
 * event-loop delay, handles) start being sampled, and the hooks record.
 * `service` labels every series (gateway, worker, mcp).
 */
export function enableMetrics(service: string): void {
  if (on) return;
  on = true;
  serviceName = service;
  registry.setDefaultLabels({ service });
  client.collectDefaultMetrics({ register: registry });
}

/** OpenTelemetry's recommended buckets for http.server.request.duration, in seconds. */
const DURATION_BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10];

type LabelValues = Record<string, string | number>;

/** One series of a LeanHistogram (one set of label values): its bucket counts (not cumulative; the last is above every bound), sum and count. */
class Series {
  readonly counts: Float64Array;
  sum = 0;
  count = 0;
  constructor(
    readonly labels: LabelValues,
    private readonly bounds: readonly number[],
  ) {
    this.counts = new Float64Array(bounds.length + 1);
  }
  /** Records one value: no allocation, no lookup. */
  observe(value: number): void {
    const bounds = this.bounds;
    let i = 0;
    while (i < bounds.length && value > bounds[i]!) i++;
    this.counts[i]!++;
    this.sum += value;
    this.count++;
  }
}

/**
 * A histogram for the per-request measurements, served by prom-client's
 * registry like its own (the same text, the same cluster aggregation: sum)
 * but recorded without its per-call work: prom-client's observe() allocates,
 * checks and hashes the label values on every call, even on a labelled child
 * (about 1.5 µs a call, three calls a request: most of what metrics cost a
 * request; `npm run bench -- observability`). A caller looks its series up
 * once (seriesOf, by a key it builds without allocating) and keeps it.
 */
class LeanHistogram {
  readonly type = 'histogram';
  readonly aggregator = 'sum';
  private readonly all: Series[] = [];
  constructor(
    readonly name: string,
    readonly help: string,
    readonly labelNames: readonly string[],
    readonly buckets: readonly number[],
  ) {
    registry.registerMetric(this as unknown as client.Metric);
  }
  /** A new series with these label values (callers keep theirs). */
  series(labels: LabelValues): Series {
    const series = new Series(labels, this.buckets);
    this.all.push(series);
    return series;
  }
  /** What prom-client's Histogram.get() returns: per series the cumulative buckets (le), +Inf, _sum and _count. */
  async get(): Promise<{ name: string; help: string; type: 'histogram'; values: client.MetricValueWithName<string>[]; aggregator: 'sum' }> {
    const values: client.MetricValueWithName<string>[] = [];
    for (const s of this.all) {
      let cumulative = 0;
      this.buckets.forEach((le, i) => {
        cumulative += s.counts[i]!;
        values.push({ labels: { ...s.labels, le }, value: cumulative, metricName: `${this.name}_bucket` });
      });
      values.push({ labels: { ...s.labels, le: '+Inf' }, value: s.count, metricName: `${this.name}_bucket` });
      values.push({ labels: { ...s.labels }, value: s.sum, metricName: `${this.name}_sum` });
      values.push({ labels: { ...s.labels }, value: s.count, metricName: `${this.name}_count` });
    }
    return { name: this.name, help: this.help, type: 'histogram', values, aggregator: 'sum' };
  }
  reset(): void {
    for (const s of this.all) {
      s.counts.fill(0);
      s.sum = 0;
      s.count = 0;
    }
  }
}

const httpDuration = new LeanHistogram(
  'http_server_request_duration_seconds',
  'Duration of HTTP server requests (OpenTelemetry http.server.request.duration), by method, route template and status.',
  ['http_request_method', 'http_route', 'http_response_status_code'],
  DURATION_BUCKETS,
);

/** The series of a request's duration, by route, then method, then status (maps of maps: no key string built per request). */
const httpSeries = new Map<string, Map<string, Map<number, Series>>>();
export function observeRequest(method: string, route: string, status: number, seconds: number): void {
  let byMethod = httpSeries.get(route);
  if (byMethod === undefined) httpSeries.set(route, (byMethod = new Map()));
  let byStatus = byMethod.get(method);
  if (byStatus === undefined) byMethod.set(method, (byStatus = new Map()));
  let series = byStatus.get(status);
  if (series === undefined) {
    series = httpDuration.series({ http_request_method: method, http_route: route, http_response_status_code: status });
    byStatus.set(status, series);
  }
  series.observe(seconds);
}

/**
 * Why a 503 was answered: the `cause` label's values, and nothing else (a
 * value not in this list is counted as `other`):
 *   database    the database unreachable, not answering, restarting, or
 *               switching primaries (the pipeline's, /health's and the MCP
 *               process's 503s of a database error)
 *   overloaded  a bound of this process refused the request: the password
 *               hashing queue, the image queue, a stream not accepted
 *   starting    the gateway is still migrating (or stopping)
 *   mcp         /mcp and the OAuth paths while the MCP process is not up
 *   other       any other 503 (none is known: the log says what it was)
 */
export const UNAVAILABLE_CAUSES = ['database', 'overloaded', 'starting', 'mcp', 'other'] as const;
export type UnavailableCause = (typeof UNAVAILABLE_CAUSES)[number];

export const unavailableAnswers = new client.Counter({
  name: 'http_server_unavailable_responses_total',
  help: '503 answers by cause: database (unreachable, not answering, restarting, switching primaries), overloaded (a queue of this process full, a stream refused), starting (migrating or stopping), mcp (the MCP process not up), other.',
  labelNames: ['cause'] as const,
});

/** Counts a 503 under its cause (an unknown one as `other`). */
export function countUnavailable(cause: string | undefined): void {
  unavailableAnswers.inc({ cause: (UNAVAILABLE_CAUSES as readonly string[]).includes(cause ?? '') ? cause : 'other' });
}

export const throttleRefusals = new client.Counter({
  name: 'http_server_throttled_responses_total',
  help: '429 answers by door (the first part of the route template: auth, mobile, platform, mcp, storage, ...).',
  labelNames: ['door'] as const,
});

export const idempotentReplays = new client.Counter({
  name: 'http_server_idempotent_replays_total',
  help: 'Answers replayed for a repeated Idempotency-Key.',
});

/** The request pools' counts of the process (transaction.ts keeps them; read at each scrape). */
let poolReader: (() => { used: number; pending: number }) | undefined;
export function readPoolWith(read: typeof poolReader): void {
  poolReader = read;
}
let maxConnections = 0;

export const poolConnections = new client.Gauge({
  name: 'db_client_connection_count',
  help: 'Connections of the request pool (OpenTelemetry db.client.connection.count) by state: used (held by a request) or idle.',
  labelNames: ['db_client_connection_state'] as const,
  collect() {
    const used = poolReader?.().used ?? 0;
    this.set({ db_client_connection_state: 'used' }, used);
    this.set({ db_client_connection_state: 'idle' }, Math.max(0, maxConnections - used));
  },
});

export const poolMax = new client.Gauge({
  name: 'db_client_connection_max',
  help: 'The most connections the request pool may open (DB_POOL_MAX; OpenTelemetry db.client.connection.max).',
});

/** The request pool's size (DB_POOL_MAX), for the gauges. */
export function setPoolMax(max: number): void {
  maxConnections = max;
  poolMax.set(max);
}

export const poolPending = new client.Gauge({
  name: 'db_client_connection_pending_requests',
  help: 'Requests waiting for a connection of the pool (OpenTelemetry db.client.connection.pending_requests).',
  collect() {
    this.set(poolReader?.().pending ?? 0);
  },
});

const poolWaitTime = new LeanHistogram(
  'db_client_connection_wait_time_seconds',
  'Time a request waited for a connection of the pool (OpenTelemetry db.client.connection.wait_time).',
  [],
  [0.0005, 0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
);
/** Records how long a request waited for its connection. */
export const poolWait = poolWaitTime.series({});

const sqlDuration = new LeanHistogram(
  'db_client_operation_duration_seconds',
  'Duration of a request transaction (one round trip: BEGIN, settings, the call, COMMIT) by the api function it called (OpenTelemetry db.client.operation.duration); error_type: the SQLSTATE of a failure the database answered, else the code of the driver or the pool (CONNECTION_CLOSED, ECONNREFUSED, DATABASE_WAIT_TIMEOUT, OUTCOME_UNKNOWN, ...), empty on success.',
  ['db_system_name', 'db_operation_name', 'error_type'],
  DURATION_BUCKETS,
);

/** Observes a SQL call's duration: the series of each (function, error) pair is made once, then kept. */
const sqlSeries = new Map<string, Map<string, Series>>();
export function observeSql(operation: string, errorType: string, seconds: number): void {
  let byError = sqlSeries.get(operation);
  if (byError === undefined) sqlSeries.set(operation, (byError = new Map()));
  let series = byError.get(errorType);
  if (series === undefined) {
    series = sqlDuration.series({ db_system_name: 'postgresql', db_operation_name: operation, error_type: errorType });
    byError.set(errorType, series);
  }
  series.observe(seconds);
}

export const statementTimeouts = new client.Counter({
  name: 'db_client_statement_timeouts_total',
  help: 'Request transactions cut by the statement timeout (SQLSTATE 57014), by api function.',
  labelNames: ['db_operation_name'] as const,
});

export const jobs = new client.Counter({
  name: 'jobs_total',
  help: 'Jobs the job worker ran, by task and outcome (succeeded, failed).',
  labelNames: ['task', 'outcome'] as const,
});

export const jobsRunning = new client.Gauge({
  name: 'jobs_running',
  help: 'Jobs running in this process now, by task.',
  labelNames: ['task'] as const,
});

/** How jobs_queued is read (set by the job worker of the process; none: the gauge is absent). */
let queueReader: (() => Promise<{ task: string; n: string }[]>) | undefined;
export function readQueueWith(read: typeof queueReader): void {
  queueReader = read;
}

export const jobsQueued = new client.Gauge({
  name: 'jobs_queued',
  help: 'Jobs waiting in the queue (not locked), by task; read from the database at each scrape by the processes that run a job worker.',
  labelNames: ['task'] as const,
  // Every process with a worker reads the same queue: a cluster's scrape takes one reading, not their sum.
  aggregator: 'max',
  async collect() {
    const rows = queueReader ? await queueReader().catch(() => undefined) : undefined;
    this.reset();
    for (const row of rows ?? []) this.set({ task: row.task }, Number(row.n));
  },
});

export const webhookDeliveries = new client.Histogram({
  name: 'webhook_delivery_duration_seconds',
  help: 'Webhook delivery attempts and their latency, by outcome: delivered (2xx), refused (another status), no_answer (timeout, refused connection, forbidden address).',
  labelNames: ['outcome'] as const,
  buckets: [0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
});

export const emails = new client.Counter({
  name: 'emails_total',
  help: 'E-mails the job worker handed to SMTP, by outcome (sent, failed).',
  labelNames: ['outcome'] as const,
});

/** A route template as OpenTelemetry's http.route writes it: `/api/mobile/tasks/{id}` for `/api/mobile/tasks/:id`. */
export function routeTemplate(path: string): string {
  return path.replace(/:([A-Za-z0-9_]+)/g, '{$1}');
}

/** The door a route template belongs to (bounded: the templates are the code's). */
export function doorOf(route: string): string {
  const [first, second] = route.split('/').filter(Boolean);
  if (first === 'api' && second) return second;
  return first ?? 'root';
}

/** The api function a request's SQL calls (`api.x(` in the statement the code wrote), or `other`. */
export function operationOf(text: string | undefined): string {
  if (!text) return 'other';
  const match = /\b(api|private|admin)\.([a-z_][a-z0-9_]*)\s*\(/.exec(text);
  return match ? `${match[1]}.${match[2]}` : 'other';
}

/**
 * The same for a tagged-template query: its strings (the same array at each
 * call of one place in the code) are read once.
 */
const operations = new WeakMap<readonly string[], string>();
export function operationOfQuery(strings: readonly string[] | undefined): string {
  if (strings === undefined) return 'other';
  let name = operations.get(strings);
  if (name === undefined) {
    name = operationOf(strings.join('$'));
    operations.set(strings, name);
  }
  return name;
}

/** What the realtime hub of the process reports at each scrape (set by it; none: zero). */
export interface RealtimeCounts {
  streams: number;
  websockets: number;
  /** Messages written to SSE streams since the start. */
  messages: number;
}
let realtimeReader: (() => RealtimeCounts) | undefined;
export function readRealtimeWith(read: typeof realtimeReader): void {
  realtimeReader = read;
}

export const realtimeConnections = new client.Gauge({
  name: 'realtime_open_connections',
  help: 'Realtime connections open now, by kind: sse (GET /api/stream) or websocket (/realtime/v1/websocket).',
  labelNames: ['kind'] as const,
  collect() {
    const counts = realtimeReader?.();
    this.set({ kind: 'sse' }, counts?.streams ?? 0);
    this.set({ kind: 'websocket' }, counts?.websockets ?? 0);
  },
});

export const realtimeMessages = new client.Counter({
  name: 'realtime_messages_sent_total',
  help: 'Change messages written to SSE streams.',
  collect() {
    const counts = realtimeReader?.();
    this.reset();
    this.inc(counts?.messages ?? 0);
  },
});

export const realtimeSlowCloses = new client.Counter({
  name: 'realtime_slow_closes_total',
  help: 'Realtime streams and websocket channels closed because they fell behind what the change log keeps (a slow or stalled client), by kind.',
  labelNames: ['kind'] as const,
});

/** The password hashing queue of the process (set by it; none: zero). */
let hashingReader: (() => { waiting: number; running: number }) | undefined;
export function readHashingWith(read: typeof hashingReader): void {
  hashingReader = read;
}

export const hashingQueue = new client.Gauge({
  name: 'password_hashing_queue_depth',
  help: 'Password hashing work (sign-ins, new passwords) by state: waiting for a hashing thread, or running.',
  labelNames: ['state'] as const,
  collect() {
    const counts = hashingReader?.();
    this.set({ state: 'waiting' }, counts?.waiting ?? 0);
    this.set({ state: 'running' }, counts?.running ?? 0);
  },
});

export const hashingDuration = new client.Histogram({
  name: 'password_hashing_duration_seconds',
  help: 'Time a bcrypt hash or verification took on its thread, by operation (hash, verify).',
  labelNames: ['operation'] as const,
  buckets: [0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5],
});

/** The read replicas of the process (core/database/replicas.ts sets it; none: no series). */
let replicaReader: (() => { name: string; used: boolean; lagMs: number | null }[]) | undefined;
export function readReplicasWith(read: typeof replicaReader): void {
  replicaReader = read;
}

export const replicaLag = new client.Gauge({
  name: 'db_replica_lag_seconds',
  help: 'How far each read replica (replica N: the Nth URL of DATABASE_REPLICA_URLS) is behind the primary, as its monitor measures it (the time since the newest primary position it has replayed past); absent until it first caught up.',
  labelNames: ['replica'] as const,
  // Every process of a cluster monitors the same replicas: the worst reading, not a sum.
  aggregator: 'max',
  collect() {
    this.reset();
    for (const r of replicaReader?.() ?? []) if (r.lagMs !== null) this.set({ replica: r.name }, r.lagMs / 1000);
  },
});

export const replicaUsed = new client.Gauge({
  name: 'db_replica_used',
  help: 'Whether each read replica takes reads now (1), or is skipped (0: not answering, no longer a standby, or further behind than REPLICA_MAX_LAG_MS).',
  labelNames: ['replica'] as const,
  aggregator: 'min',
  collect() {
    this.reset();
    for (const r of replicaReader?.() ?? []) this.set({ replica: r.name }, r.used ? 1 : 0);
  },
});

/** The folder whose volume the storage gauges measure (STORAGE_DIR; set by the processes that store files). */
let storageDir: string | undefined;
export function measureStorageVolume(dir: string): void {
  storageDir = dir;
}

/** STORAGE_DIR's file system (statfs at each scrape; absent while the folder does not exist). */
async function storageVolume(): Promise<{ size: number; free: number } | undefined> {
  if (!storageDir) return undefined;
  const stats = await fs.statfs(storageDir).catch(() => undefined);
  // bavail: what a process that is not root may still write.
  return stats ? { size: stats.blocks * stats.bsize, free: stats.bavail * stats.bsize } : undefined;
}

export const storageVolumeSize = new client.Gauge({
  name: 'storage_volume_size_bytes',
  help: 'The size of the file system holding STORAGE_DIR (the fs byte store, temporary files, resumable uploads staged on this machine).',
  aggregator: 'max',
  async collect() {
    const volume = await storageVolume();
    this.reset();
    if (volume) this.set(volume.size);
  },
});

export const storageVolumeFree = new client.Gauge({
  name: 'storage_volume_free_bytes',
  help: 'The bytes still free for the service on the file system holding STORAGE_DIR; at 0, uploads are refused with 507 storage_full.',
  aggregator: 'max',
  async collect() {
    const volume = await storageVolume();
    this.reset();
    if (volume) this.set(volume.free);
  },
});

/**
 * The readiness checks of the admin server's /ready as a gauge, one series
 * per check: 1 passing, 0 failing (admin-server.ts runs the checks at each
 * scrape and adds it). Not in the registry: the checks are the admin
 * server's, and a cluster's primary answers for all its processes.
 */
export function readinessMetric(outcomes: Record<string, string>): Awaited<ReturnType<typeof registry.getMetricsAsJSON>>[number] {
  return {
    name: 'readiness_check_ok',
    help: "The admin server's /ready checks (database, realtime, jobs, mcp; with WEB_CONCURRENCY each gateway process): 1 while the check passes, 0 while it fails (/ready says why).",
    type: 'gauge',
    aggregator: 'first',
    values: Object.entries(outcomes).map(([check, outcome]) => ({ labels: { check, ...(serviceName ? { service: serviceName } : {}) }, value: outcome === 'ok' ? 1 : 0 })),
  } as unknown as Awaited<ReturnType<typeof registry.getMetricsAsJSON>>[number];
}

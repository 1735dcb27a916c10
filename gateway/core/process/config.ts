// Configuration, read once from the environment. Both processes (gateway and
// MCP server) use this; docs/operations/running.md#configuration says what each variable does.
import os from 'node:os';
import path from 'node:path';
import { z } from 'zod';
import { StartupProblem } from './startup-error.ts';
import { databaseHosts } from './database-url.ts';

const optionalString = z
  .string()
  .optional()
  .transform((v) => (v === undefined || v.trim() === '' ? undefined : v.trim()));

/**
 * STATEMENT_TIMEOUT_MS's default: a request's statement is cancelled after
 * 5 s, and every request is answered within it + 1 s, behind a pooler too,
 * where a request sent while the server is away waits in the pooler until
 * then (docs/operations/deploying.md#poolers). It was 15 s: 16 s of waiting for a 503.
 */
export const DEFAULT_STATEMENT_TIMEOUT_MS = 5_000;

const port = (fallback: number) =>
  z.coerce.number().int().min(0).max(65535).optional().default(fallback);

const EnvSchema = z.object({
  DATABASE_URL: optionalString,
  DATABASE_DIRECT_URL: optionalString,
  DATABASE_POOL_MODE: z.enum(['session', 'transaction']).optional(),
  // Read replicas (comma-separated database URLs, each possibly multi-host): docs/operations/scaling.md#read-replicas.
  DATABASE_REPLICA_URLS: optionalString,
  REPLICA_MAX_LAG_MS: z.coerce.number().int().min(0).max(3_600_000).optional().default(1000),
  PORT: port(3000),
  HOST: optionalString,
  // The admin server (/live, /ready, /metrics): off unless ADMIN_PORT is set (docs/operations/monitoring.md).
  ADMIN_PORT: z.coerce.number().int().min(0).max(65535).optional(),
  ADMIN_HOST: optionalString,
  PUBLIC_URL: optionalString,
  // The address a verified /auth/v1 link goes to by default (default PUBLIC_URL), and the
  // others its redirect_to may name (comma-separated): docs/supabase-sdks.md#links.
  SITE_URL: optionalString,
  AUTH_REDIRECT_URLS: optionalString,
  APP_SCHEME: optionalString,
  // An IANA time zone name; checked against the database's at start (private.time_zone_name).
  DEFAULT_TIMEZONE: optionalString.pipe(z.string().regex(/^[A-Za-z0-9_+\-/]{1,64}$/, { message: 'an IANA time zone name, such as Europe/Paris' }).optional()),
  JWT_SECRET: optionalString,
  JWT_SIGNING_KEYS: optionalString,
  ACCESS_TOKEN_TTL: z.coerce.number().int().min(30).max(86_400).optional().default(3600),
  LOG_LEVEL: z
    .enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'])
    .optional()
    .default('info'),
  DATA_DIR: optionalString,
  // Unset: a free port, kept with the data (gateway/core/process/embedded-postgres.ts).
  EMBEDDED_PG_PORT: optionalString.pipe(z.coerce.number<string | undefined>().int().min(1).max(65535).optional()),
  DB_POOL_MAX: z.coerce.number().int().min(1).max(500).optional().default(10),
  STATEMENT_TIMEOUT_MS: z.coerce.number().int().min(100).optional().default(DEFAULT_STATEMENT_TIMEOUT_MS),
  STREAM_KEEPALIVE_SECONDS: z.coerce.number().min(0.05).max(3600).optional().default(15),
  STREAM_MAX_BUFFER_BYTES: z.coerce.number().int().min(1024).optional().default(1_048_576),
  CHANGE_LOG_RETENTION_HOURS: z.coerce.number().min(0).optional().default(24),
  SMTP_URL: optionalString,
  MAIL_FROM: optionalString,
  LOGIN_MAX_FAILURES_PER_EMAIL: z.coerce.number().int().min(1).optional().default(10),
  LOGIN_MAX_FAILURES_PER_EMAIL_ALL_CLIENTS: z.coerce.number().int().min(1).optional().default(100),
  LOGIN_MAX_FAILURES_PER_IP: z.coerce.number().int().min(1).optional().default(100),
  LOGIN_FAILURE_WINDOW_SECONDS: z.coerce.number().int().min(1).max(86_400).optional().default(900),
  PASSWORD_SET_MAX_PER_IP: z.coerce.number().int().min(1).optional().default(100),
  AUTH_ANONYMOUS_USERS: z.enum(['on', 'off']).optional().default('on'),
  GUEST_SIGN_INS_PER_IP: z.coerce.number().int().min(1).optional().default(30),
  GUEST_RETENTION_DAYS: z.coerce.number().min(0.001).optional().default(30),
  BCRYPT_COST: z.coerce.number().int().min(10).max(20).optional().default(10),
  PASSWORD_HASH_CONCURRENCY: z.coerce.number().int().min(1).max(64).optional(),
  PASSWORD_HASH_MAX_QUEUED: z.coerce.number().int().min(0).optional().default(64),
  TRUST_PROXY: optionalString,
  CORS_ORIGINS: optionalString,
  FAIR_SHARE_PER_CLIENT: z.coerce.number().int().min(1).optional(),
  FAIR_SHARE_MAX_QUEUED: z.coerce.number().int().min(0).optional().default(500),
  FAIR_SHARE_MAX_WAIT_MS: z.coerce.number().int().min(100).optional().default(10_000),
  REALTIME_MAX_CONNECTIONS: z.coerce.number().int().min(1).optional().default(2000),
  REALTIME_MAX_CONNECTIONS_PER_IP: z.coerce.number().int().min(1).optional().default(50),
  REALTIME_AUTH_GRACE_SECONDS: z.coerce.number().min(0.05).max(600).optional().default(10),
  REALTIME_POLL_SECONDS: z.coerce.number().min(0.1).max(3600).optional().default(5),
  // The MCP server (agent interface): see docs/agents.md.
  MCP_PORT: z.coerce.number().int().min(0).max(65535).optional(),
  MCP_HOST: optionalString,
  MCP_UPSTREAM_URL: optionalString,
  MCP_REQUESTS_PER_MINUTE: z.coerce.number().int().min(1).optional().default(120),
  MCP_ALLOWED_HOSTS: optionalString,
  MCP_PROXY_SECRET: optionalString,
  // Background jobs (graphile-worker) and webhooks: see gateway/jobs/.
  WORKER: z.enum(['on', 'off', '1', '0', 'true', 'false']).optional().default('on'),
  WORKER_CONCURRENCY: z.coerce.number().int().min(1).max(100).optional().default(4),
  WEBHOOK_ALLOW_PRIVATE_TARGETS: z.enum(['0', '1', 'true', 'false']).optional(),
  WEBHOOK_RETRY_SCHEDULE: z
    .string()
    .regex(/^\s*\d+(\.\d+)?(\s*,\s*\d+(\.\d+)?)*\s*$/, { message: 'comma-separated seconds, such as 1,2,4' })
    .optional(),
  WEBHOOK_ALLOWED_PORTS: z
    .string()
    .regex(/^\s*\d{1,5}(\s*,\s*\d{1,5})*\s*$/, { message: 'comma-separated port numbers, such as 443,8443' })
    .refine((v) => v.split(',').every((p) => Number(p) >= 1 && Number(p) <= 65535), { message: 'ports are 1 to 65535' })
    .optional(),
  WEBHOOK_COMMUNITY_CONCURRENCY: z.coerce.number().int().min(1).max(100).optional(),
  // File storage (/storage/v1): see docs/storage.md.
  STORAGE_BACKEND: z.enum(['fs', 's3']).optional().default('fs'),
  STORAGE_DIR: optionalString,
  STORAGE_S3_BUCKET: optionalString,
  STORAGE_S3_ENDPOINT: optionalString,
  STORAGE_S3_REGION: optionalString,
  STORAGE_S3_ACCESS_KEY_ID: optionalString,
  STORAGE_S3_SECRET_ACCESS_KEY: optionalString,
  STORAGE_S3_FORCE_PATH_STYLE: z.enum(['0', '1', 'true', 'false']).optional(),
  STORAGE_S3_PREFIX: optionalString,
  STORAGE_RESUMABLE_STAGING: z.enum(['fs', 's3']).optional().default('fs'),
  STORAGE_MAX_IMAGE_PIXELS: z.coerce.number().int().min(1_000_000).max(500_000_000).optional().default(50_000_000),
  STORAGE_IMAGE_CONCURRENCY: z.coerce.number().int().min(1).max(64).optional(),
  STORAGE_IMAGE_MAX_QUEUED: z.coerce.number().int().min(0).optional().default(64),
  STORAGE_RENDER_CACHE_BYTES: z.coerce.number().int().min(0).optional().default(1024 * 1024 * 1024),
  STORAGE_RENDER_VARIANTS: z.coerce.number().int().min(1).max(1000).optional().default(12),
  STORAGE_RENDER_MISSES_PER_MINUTE: z.coerce.number().int().min(1).optional().default(120),
});

/** Where verified /auth/v1 links may redirect (core/web/redirects.ts): the site's address (the fallback) and the allow-list. */
export interface AuthRedirects {
  siteUrl: string;
  allowed: readonly string[];
}

export interface Config {
  /** Postgres to use; when unset an embedded Postgres is started. */
  databaseUrl: string | undefined;
  /** A session connection to the same database (not through a pooler), for LISTEN. */
  databaseDirectUrl: string | undefined;
  /**
   * 'transaction' behind PgBouncer/Supavisor in transaction mode: no prepared
   * statements, no session state. Detected for Supabase's transaction pooler
   * port (6543) when DATABASE_POOL_MODE is unset.
   */
  databasePoolMode: 'session' | 'transaction';
  /**
   * DATABASE_REPLICA_URLS: read replicas (hot standbys of DATABASE_URL's
   * primary) that take the read-only work (core/database/replicas.ts); empty:
   * none, and everything runs on the primary.
   */
  databaseReplicaUrls: string[];
  /** REPLICA_MAX_LAG_MS: a replica further behind the primary than this is not used until it catches up. */
  replicaMaxLagMs: number;
  port: number;
  host: string | undefined;
  /** ADMIN_PORT and ADMIN_HOST (default 127.0.0.1): the admin server; undefined: none, and no metrics kept. */
  admin: { port: number; host: string } | undefined;
  publicUrl: string;
  /** Where verified /auth/v1 links may redirect (SITE_URL, AUTH_REDIRECT_URLS). */
  authRedirects: AuthRedirects;
  appScheme: string;
  /** DEFAULT_TIMEZONE: the time zone of events that have none of their own, their venue's or their community's. */
  defaultTimezone: string;
  jwtSecret: string | undefined;
  /** JSON: one JWK or an array of JWKs with private parts; the first signs. */
  jwtSigningKeys: string | undefined;
  accessTokenTtlSeconds: number;
  logLevel: z.infer<typeof EnvSchema>['LOG_LEVEL'];
  /** Git-ignored folder for the embedded database and the dev JWT secret. */
  dataDir: string;
  /** EMBEDDED_PG_PORT; undefined: a free port, kept with the data. */
  embeddedPgPort: number | undefined;
  /** SMTP server for the e-mail outbox (smtp://user:pass@host:port); unset: messages wait for operators. */
  smtpUrl: string | undefined;
  mailFrom: string;
  dbPoolMax: number;
  statementTimeoutMs: number;
  /** Per-client share of the pool (gateway/http/fair-share.ts). */
  fairShare: FairShareOptions;
  realtime: RealtimeConfig;
  /** Failed-login and refresh/verify throttling (counted in Postgres). */
  authLimits: AuthLimits;
  /** Guests (supabase-js signInAnonymously): AUTH_ANONYMOUS_USERS, and GUEST_RETENTION_DAYS (unconverted guests are deleted after it, private.guests_prune). */
  guests: { enabled: boolean; retentionSeconds: number };
  /** Password hashing in this process (gateway/core/auth/passwords.ts). */
  passwords: PasswordOptions;
  /** TRUST_PROXY: how to read the client IP (see gateway/core/web/client-ip.ts). */
  trustProxy: TrustProxy;
  /** CORS_ORIGINS: browser origins allowed to call the API (see gateway/http/cors.ts); empty: CORS off. */
  corsOrigins: string[];
  mcp: McpConfig;
  worker: WorkerConfig;
  webhooks: WebhookConfig;
  storage: StorageConfig;
}

/** File storage: where bytes live (gateway/storage/byte-store.ts) and the image work (gateway/storage/images.ts). */
export interface StorageConfig {
  /** STORAGE_BACKEND: fs (a folder, STORAGE_DIR) or s3 (an S3-compatible bucket). */
  backend: 'fs' | 's3';
  /** STORAGE_DIR: the folder of the fs backend, and the temporary files of image work and resumable uploads (default DATA_DIR/storage). */
  dir: string;
  /** The S3-compatible bucket (STORAGE_S3_*), when backend is s3. */
  s3?: S3Config;
  /**
   * STORAGE_RESUMABLE_STAGING: where resumable uploads wait for their last
   * chunk: fs (STORAGE_DIR/tus, this machine) or s3 (the bucket, shared by
   * every machine; the server must have multipart ListParts).
   */
  resumableStaging: 'fs' | 's3';
  /** STORAGE_MAX_IMAGE_PIXELS: an image with more pixels (width × height × frames) is refused (decompression bombs). */
  maxImagePixels: number;
  /** STORAGE_IMAGE_CONCURRENCY: images processed at once in this process (uploads and transformations); STORAGE_IMAGE_MAX_QUEUED waiting at most. */
  imageConcurrency: number;
  imageMaxQueued: number;
  /**
   * The cache of transformations (gateway/storage/routes/render.ts, SQL's
   * app.storage_renders): STORAGE_RENDER_CACHE_BYTES kept at most in all
   * (the oldest evicted first), STORAGE_RENDER_VARIANTS per object version,
   * and STORAGE_RENDER_MISSES_PER_MINUTE transformations made (not served
   * from the cache) per client address a minute.
   */
  renderCacheBytes: number;
  renderVariants: number;
  renderMissesPerMinute: number;
}

export interface S3Config {
  bucket: string;
  /** An S3-compatible server (MinIO, R2, ...); unset: AWS. */
  endpoint?: string;
  region: string;
  /** Unset: the AWS SDK's default credential chain (environment, instance role, ...). */
  credentials?: { accessKeyId: string; secretAccessKey: string };
  forcePathStyle: boolean;
  /** Keys are written under this prefix (a bucket shared with other data). */
  prefix: string;
}

/** Password hashing in a process: gateway/core/auth/passwords.ts. */
export interface PasswordOptions {
  /** BCRYPT_COST: the cost new hashes get; stored hashes below it are re-hashed at the next sign-in. */
  cost: number;
  /** PASSWORD_HASH_CONCURRENCY: hashes and verifications running at once in this process. */
  concurrency: number;
  /** PASSWORD_HASH_MAX_QUEUED: waiting at most, all clients together (fair-queue.ts); past it, 503 with Retry-After. */
  maxQueued: number;
}

/** The job worker (graphile-worker) a process runs: gateway/jobs/worker.ts. */
export interface WorkerConfig {
  /** WORKER=off: this process runs no worker (a replica that only serves HTTP). */
  enabled: boolean;
  /** WORKER_CONCURRENCY: jobs one worker runs at once. */
  concurrency: number;
}

/** Outbound webhooks: gateway/jobs/webhooks.ts. */
export interface WebhookConfig {
  /** WEBHOOK_ALLOW_PRIVATE_TARGETS=1: http and private, loopback or link-local targets allowed (tests, development). */
  allowPrivateTargets: boolean;
  /** WEBHOOK_RETRY_SCHEDULE: seconds before each retry (jittered ±20 % in SQL); its length is the number of retries. */
  retrySchedule: number[];
  /** WEBHOOK_ALLOWED_PORTS: the ports a webhook URL may name (any with allowPrivateTargets). */
  allowedPorts: number[];
  /** WEBHOOK_COMMUNITY_CONCURRENCY: a community's deliveries sent at once, across every worker. */
  communityConcurrency: number;
}

/** The usual HTTPS ports: what a webhook URL may name unless WEBHOOK_ALLOWED_PORTS says otherwise. */
export const DEFAULT_WEBHOOK_PORTS: readonly number[] = [443, 8443];
/** WEBHOOK_COMMUNITY_CONCURRENCY's default. */
export const DEFAULT_COMMUNITY_CONCURRENCY = 2;

/** About 5 s, 5 min, 30 min, 2 h, 5 h, 10 h, 10 h: eight attempts over about 28 hours. */
export const DEFAULT_WEBHOOK_RETRY_SCHEDULE = [5, 300, 1800, 7200, 18000, 36000, 36000];

/**
 * Failed sign-ins (every door that checks a password) and failed
 * refresh/verify attempts, counted in Postgres (private.password_attempt_start / _finish).
 */
/** The per-client share of the pool (gateway/http/fair-share.ts). */
export interface FairShareOptions {
  /** Transactions one client may always run at once. */
  perKey: number;
  /**
   * The pool's size: past perKey, a client alone on the pool may start more
   * while perKey connections stay free. Absent: never more than perKey.
   */
  capacity?: number;
  /** Requests one client may have waiting; more are refused with 429. */
  maxQueued: number;
  /** A request that waited this long is refused with 429. */
  maxWaitMs: number;
}

export interface AuthLimits {
  /** LOGIN_MAX_FAILURES_PER_EMAIL: failures of one e-mail from one client address. */
  maxFailuresPerEmailAndClient: number;
  /** LOGIN_MAX_FAILURES_PER_EMAIL_ALL_CLIENTS: failures of one e-mail from all clients together. */
  maxFailuresPerEmail: number;
  /** LOGIN_MAX_FAILURES_PER_IP: failures from one client address (and separately refreshes, verifies). */
  maxFailuresPerIp: number;
  /** PASSWORD_SET_MAX_PER_IP: requests from one client address at the doors that set a password (register, signup, set-password); and, counted apart, at those that e-mail a link (recover, the deletion page). */
  maxPasswordSetsPerIp: number;
  /** LOGIN_FAILURE_WINDOW_SECONDS: the window of every count above. */
  windowSeconds: number;
  /** GUEST_SIGN_INS_PER_IP: guest sign-ins (supabase-js signInAnonymously) per client address in an hour. */
  maxGuestSignInsPerIp: number;
}

/** The MCP server (agent interface). */
export interface McpConfig {
  /**
   * MCP_PORT: where the MCP process listens. Unset: under `npm start` a free
   * port the MCP process tells the gateway (gateway/mcp-child.ts), so that a
   * port taken by another program never takes /mcp down; `npm run mcp` alone
   * listens on PORT + 1 (mcpStandalonePort).
   */
  port: number | undefined;
  host: string;
  /**
   * Where the gateway sends /mcp and the OAuth paths: MCP_UPSTREAM_URL, or
   * MCP_PORT's address on MCP_HOST. Unset: the address the MCP process
   * `npm start` runs tells the gateway.
   */
  upstreamUrl: string | undefined;
  /** Requests per minute per client IP on /mcp and the OAuth endpoints (default 120). */
  requestsPerMinute: number;
  /** Extra Host header values accepted besides PUBLIC_URL's host and localhost (DNS-rebinding protection). */
  allowedHosts: string[];
  /**
   * MCP_PROXY_SECRET: shared by the gateway and the MCP process. The gateway
   * sends it with every request it passes on; the MCP process then believes
   * X-Forwarded-For only from requests that carry it. Unset: only from a
   * loopback peer (the gateway on the same machine).
   */
  proxySecret: string | undefined;
}

/** The realtime feed (SSE stream and websocket); see gateway/realtime/hub.ts. */
export interface RealtimeConfig {
  /** Keep-alive comment interval of SSE streams. */
  keepAliveMs: number;
  /** A connection whose unsent backlog grows past this is dropped (it resumes with Last-Event-ID). */
  maxBufferBytes: number;
  /** A stream that cannot write (client not reading) for this long is dropped. */
  drainTimeoutMs: number;
  /** Change-log entries older than this are pruned (by the worker's crontab, every 5 minutes). */
  retentionSeconds: number;
  /** How often ended events are logged as expired (their delete messages are this late at most). */
  expiryIntervalMs: number;
  /** Stream registrations (per-user cap) live this long unless renewed; renewed every third of it. */
  registrationTtlSeconds: number;
  /** Safety poll of the change log, in case a notification was lost. */
  pollIntervalMs: number;
  /** Most per-user change queries in flight at once (the rest of the pool serves requests). */
  queryConcurrency: number;
  /** Most change ids read per query. */
  batchSize: number;
  /** Most users whose reads share one transaction (pipelined). */
  usersPerTransaction: number;
  /** A websocket that sends nothing (not even a heartbeat) for this long is closed. */
  socketIdleTimeoutMs: number;
  /** Most open websockets per process, and per client IP. */
  maxSockets: number;
  maxSocketsPerIp: number;
  /** A websocket with no authorised channel this long after it opened is closed (its state dropped). */
  socketAuthGraceMs: number;
}

export class ConfigError extends StartupProblem {}

/**
 * The configuration, or, when it is invalid, its problem as one line on
 * stderr and exit code 1: the first step of every process (`npm start`,
 * `npm run mcp`, `npm run worker`, the admin and db commands).
 */
export function loadConfigOrExit(env: NodeJS.ProcessEnv = process.env): Config {
  try {
    return loadConfig(env);
  } catch (err) {
    if (err instanceof ConfigError) {
      console.error(err.message);
      process.exit(1);
    }
    throw err;
  }
}

export function loadConfig(env: NodeJS.ProcessEnv = process.env): Config {
  const parsed = EnvSchema.safeParse(env);
  if (!parsed.success) {
    const problems = parsed.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`);
    throw new ConfigError(`invalid configuration: ${problems.join('; ')}`);
  }
  const e = parsed.data;
  const dataDir = path.resolve(e.DATA_DIR ?? path.join(projectRoot(), '.data'));
  return {
    databaseUrl: e.DATABASE_URL,
    databaseDirectUrl: e.DATABASE_DIRECT_URL,
    databasePoolMode: e.DATABASE_POOL_MODE ?? detectPoolMode(e.DATABASE_URL),
    databaseReplicaUrls: splitDatabaseUrls(e.DATABASE_REPLICA_URLS),
    replicaMaxLagMs: e.REPLICA_MAX_LAG_MS,
    port: e.PORT,
    host: e.HOST,
    admin: e.ADMIN_PORT === undefined ? undefined : { port: e.ADMIN_PORT, host: e.ADMIN_HOST ?? '127.0.0.1' },
    publicUrl: (e.PUBLIC_URL ?? `http://localhost:${e.PORT}`).replace(/\/+$/, ''),
    appScheme: e.APP_SCHEME ?? 'communityapp',
    authRedirects: {
      siteUrl: (e.SITE_URL ?? e.PUBLIC_URL ?? `http://localhost:${e.PORT}`).replace(/\/+$/, ''),
      allowed: (e.AUTH_REDIRECT_URLS ?? '').split(',').map((entry) => entry.trim()).filter((entry) => entry !== ''),
    },
    defaultTimezone: e.DEFAULT_TIMEZONE ?? 'UTC',
    jwtSecret: e.JWT_SECRET,
    jwtSigningKeys: e.JWT_SIGNING_KEYS,
    accessTokenTtlSeconds: e.ACCESS_TOKEN_TTL,
    logLevel: e.LOG_LEVEL,
    dataDir,
    embeddedPgPort: e.EMBEDDED_PG_PORT,
    smtpUrl: e.SMTP_URL,
    mailFrom: e.MAIL_FROM ?? 'Community <no-reply@localhost>',
    dbPoolMax: e.DB_POOL_MAX,
    statementTimeoutMs: e.STATEMENT_TIMEOUT_MS,
    authLimits: {
      maxFailuresPerEmailAndClient: e.LOGIN_MAX_FAILURES_PER_EMAIL,
      maxFailuresPerEmail: e.LOGIN_MAX_FAILURES_PER_EMAIL_ALL_CLIENTS,
      maxFailuresPerIp: e.LOGIN_MAX_FAILURES_PER_IP,
      maxPasswordSetsPerIp: e.PASSWORD_SET_MAX_PER_IP,
      windowSeconds: e.LOGIN_FAILURE_WINDOW_SECONDS,
      maxGuestSignInsPerIp: e.GUEST_SIGN_INS_PER_IP,
    },
    guests: { enabled: e.AUTH_ANONYMOUS_USERS === 'on', retentionSeconds: Math.round(e.GUEST_RETENTION_DAYS * 86_400) },
    passwords: {
      cost: e.BCRYPT_COST,
      // About the core count, and never all of libuv's 4 threads (file and DNS work share them).
      concurrency: e.PASSWORD_HASH_CONCURRENCY ?? Math.max(1, Math.min(os.availableParallelism(), 3)),
      maxQueued: e.PASSWORD_HASH_MAX_QUEUED,
    },
    trustProxy: trustProxyFrom(e.TRUST_PROXY),
    corsOrigins: (e.CORS_ORIGINS ?? '').split(',').map((o) => o.trim().replace(/\/+$/, '')).filter(Boolean),
    fairShare: {
      perKey: e.FAIR_SHARE_PER_CLIENT ?? Math.max(1, Math.floor(e.DB_POOL_MAX / 4)),
      capacity: e.DB_POOL_MAX,
      maxQueued: e.FAIR_SHARE_MAX_QUEUED,
      maxWaitMs: e.FAIR_SHARE_MAX_WAIT_MS,
    },
    realtime: {
      keepAliveMs: Math.round(e.STREAM_KEEPALIVE_SECONDS * 1000),
      maxBufferBytes: e.STREAM_MAX_BUFFER_BYTES,
      drainTimeoutMs: 30_000,
      retentionSeconds: Math.round(e.CHANGE_LOG_RETENTION_HOURS * 3600),
      expiryIntervalMs: 5_000,
      registrationTtlSeconds: 60,
      pollIntervalMs: Math.round(e.REALTIME_POLL_SECONDS * 1000),
      queryConcurrency: Math.max(1, Math.floor(e.DB_POOL_MAX / 2)),
      batchSize: 500,
      usersPerTransaction: 32,
      socketIdleTimeoutMs: 90_000,
      maxSockets: e.REALTIME_MAX_CONNECTIONS,
      maxSocketsPerIp: e.REALTIME_MAX_CONNECTIONS_PER_IP,
      socketAuthGraceMs: Math.round(e.REALTIME_AUTH_GRACE_SECONDS * 1000),
    },
    mcp: mcpConfig(e),
    worker: { enabled: ['on', '1', 'true'].includes(e.WORKER), concurrency: e.WORKER_CONCURRENCY },
    webhooks: {
      allowPrivateTargets: e.WEBHOOK_ALLOW_PRIVATE_TARGETS === '1' || e.WEBHOOK_ALLOW_PRIVATE_TARGETS === 'true',
      retrySchedule: e.WEBHOOK_RETRY_SCHEDULE
        ? e.WEBHOOK_RETRY_SCHEDULE.split(',').map((v) => Number(v.trim()))
        : DEFAULT_WEBHOOK_RETRY_SCHEDULE,
      allowedPorts: e.WEBHOOK_ALLOWED_PORTS ? e.WEBHOOK_ALLOWED_PORTS.split(',').map((v) => Number(v.trim())) : [...DEFAULT_WEBHOOK_PORTS],
      communityConcurrency: e.WEBHOOK_COMMUNITY_CONCURRENCY ?? DEFAULT_COMMUNITY_CONCURRENCY,
    },
    storage: storageConfig(e, dataDir),
  };
}

function storageConfig(e: z.infer<typeof EnvSchema>, dataDir: string): StorageConfig {
  let s3: S3Config | undefined;
  if (e.STORAGE_BACKEND === 's3') {
    if (!e.STORAGE_S3_BUCKET) throw new ConfigError('invalid configuration: STORAGE_BACKEND=s3 needs STORAGE_S3_BUCKET');
    if (Boolean(e.STORAGE_S3_ACCESS_KEY_ID) !== Boolean(e.STORAGE_S3_SECRET_ACCESS_KEY)) {
      throw new ConfigError('invalid configuration: STORAGE_S3_ACCESS_KEY_ID and STORAGE_S3_SECRET_ACCESS_KEY go together');
    }
    s3 = {
      bucket: e.STORAGE_S3_BUCKET,
      endpoint: e.STORAGE_S3_ENDPOINT,
      region: e.STORAGE_S3_REGION ?? 'us-east-1',
      credentials:
        e.STORAGE_S3_ACCESS_KEY_ID && e.STORAGE_S3_SECRET_ACCESS_KEY
          ? { accessKeyId: e.STORAGE_S3_ACCESS_KEY_ID, secretAccessKey: e.STORAGE_S3_SECRET_ACCESS_KEY }
          : undefined,
      forcePathStyle: e.STORAGE_S3_FORCE_PATH_STYLE === '1' || e.STORAGE_S3_FORCE_PATH_STYLE === 'true',
      prefix: (e.STORAGE_S3_PREFIX ?? '').replace(/^\/+/, ''),
    };
  }
  if (e.STORAGE_RESUMABLE_STAGING === 's3' && e.STORAGE_BACKEND !== 's3') {
    throw new ConfigError('invalid configuration: STORAGE_RESUMABLE_STAGING=s3 needs STORAGE_BACKEND=s3');
  }
  return {
    backend: e.STORAGE_BACKEND,
    resumableStaging: e.STORAGE_RESUMABLE_STAGING,
    dir: path.resolve(e.STORAGE_DIR ?? path.join(dataDir, 'storage')),
    s3,
    maxImagePixels: e.STORAGE_MAX_IMAGE_PIXELS,
    // libvips uses threads of its own per image: a few images at once keep the cores busy.
    imageConcurrency: e.STORAGE_IMAGE_CONCURRENCY ?? Math.max(1, Math.min(os.availableParallelism(), 4)),
    imageMaxQueued: e.STORAGE_IMAGE_MAX_QUEUED,
    renderCacheBytes: e.STORAGE_RENDER_CACHE_BYTES,
    renderVariants: e.STORAGE_RENDER_VARIANTS,
    renderMissesPerMinute: e.STORAGE_RENDER_MISSES_PER_MINUTE,
  };
}

function mcpConfig(e: z.infer<typeof EnvSchema>): McpConfig {
  const host = e.MCP_HOST ?? '127.0.0.1';
  return {
    port: e.MCP_PORT,
    host,
    // MCP_PORT 0 (any free port) is an address only the MCP process knows, as when it is unset.
    upstreamUrl: (e.MCP_UPSTREAM_URL ?? (e.MCP_PORT ? mcpAddress(host, e.MCP_PORT) : undefined))?.replace(/\/+$/, ''),
    requestsPerMinute: e.MCP_REQUESTS_PER_MINUTE,
    allowedHosts: (e.MCP_ALLOWED_HOSTS ?? '').split(',').map((h) => h.trim()).filter(Boolean),
    proxySecret: e.MCP_PROXY_SECRET,
  };
}

/** The address the gateway reaches an MCP process at, listening on `host` (a wildcard: loopback) and `port`. */
export function mcpAddress(host: string, port: number): string {
  const reachable = host === '0.0.0.0' || host === '::' ? '127.0.0.1' : host.includes(':') ? `[${host}]` : host;
  return `http://${reachable}:${port}`;
}

/** Where `npm run mcp` alone listens without MCP_PORT: PORT + 1 (0 with PORT 0: any free port). */
export function mcpStandalonePort(config: Pick<Config, 'port' | 'mcp'>): number {
  return config.mcp.port ?? (config.port === 0 ? 0 : config.port + 1);
}

/** Supabase's transaction-mode pooler listens on 6543; anything else is taken as a session. (A database URL may name several hosts: not a WHATWG URL.) */
function detectPoolMode(url: string | undefined): 'session' | 'transaction' {
  if (!url) return 'session';
  return databaseHosts(url).some((h) => h.port === 6543) ? 'transaction' : 'session';
}

/** The repository root (this file lives in gateway/core/process/). */
export function projectRoot(): string {
  return path.resolve(import.meta.dirname, '..', '..', '..');
}

function trustProxyFrom(value: string | undefined): TrustProxy {
  try {
    return parseTrustProxy(value);
  } catch (err) {
    throw new ConfigError(`invalid configuration: ${(err as Error).message}`);
  }
}

export type TrustProxy = number | 'all' | undefined;

/** Parses TRUST_PROXY (how gateway/core/web/client-ip.ts reads the client address): a hop count, `true`/`all`, or unset/`false`/`0` (trust none). */
function parseTrustProxy(value: string | undefined): TrustProxy {
  if (value === undefined) return undefined;
  const v = value.trim().toLowerCase();
  if (v === '' || v === 'false' || v === '0' || v === 'no') return undefined;
  if (v === 'true' || v === 'all' || v === 'yes') return 'all';
  const hops = Number(v);
  if (Number.isInteger(hops) && hops > 0) return hops;
  throw new Error(`TRUST_PROXY must be a number of proxy hops, true or false (got "${value}")`);
}

/**
 * DATABASE_REPLICA_URLS split into URLs. A comma separates URLs, but a
 * multi-host URL has commas of its own (`postgres://u@h1:5432,h2:5432/db`):
 * a part that does not start with postgres:// or postgresql:// continues
 * the URL before it.
 */
export function splitDatabaseUrls(value: string | undefined): string[] {
  const urls: string[] = [];
  for (const part of (value ?? '').split(',')) {
    const trimmed = part.trim();
    if (trimmed === '') continue;
    if (/^postgres(ql)?:\/\//i.test(trimmed) || urls.length === 0) urls.push(trimmed);
    else urls[urls.length - 1] += `,${trimmed}`;
  }
  return urls;
}

// Configuration, read once from the environment. Both processes (gateway and
// MCP server) use this; see README.md "Configuration" for what each variable does.
import path from 'node:path';
import { z } from 'zod';

const optionalString = z
  .string()
  .optional()
  .transform((v) => (v === undefined || v.trim() === '' ? undefined : v.trim()));

const port = (fallback: number) =>
  z.coerce.number().int().min(0).max(65535).optional().default(fallback);

const EnvSchema = z.object({
  DATABASE_URL: optionalString,
  PORT: port(3000),
  HOST: optionalString,
  PUBLIC_URL: optionalString,
  APP_SCHEME: optionalString,
  JWT_SECRET: optionalString,
  JWT_SIGNING_KEYS: optionalString,
  ACCESS_TOKEN_TTL: z.coerce.number().int().min(30).max(86_400).optional().default(3600),
  LOG_LEVEL: z
    .enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'])
    .optional()
    .default('info'),
  DATA_DIR: optionalString,
  EMBEDDED_PG_PORT: port(54329),
  DB_POOL_MAX: z.coerce.number().int().min(1).max(500).optional().default(10),
  STATEMENT_TIMEOUT_MS: z.coerce.number().int().min(100).optional().default(15_000),
  STREAM_KEEPALIVE_SECONDS: z.coerce.number().min(0.05).max(3600).optional().default(15),
  STREAM_MAX_BUFFER_BYTES: z.coerce.number().int().min(1024).optional().default(1_048_576),
  CHANGE_LOG_RETENTION_HOURS: z.coerce.number().min(0).optional().default(24),
  // The MCP server (agent interface): see mcp-server/README.md.
  MCP_PORT: z.coerce.number().int().min(0).max(65535).optional(),
  MCP_HOST: optionalString,
  MCP_UPSTREAM_URL: optionalString,
  MCP_REQUESTS_PER_MINUTE: z.coerce.number().int().min(1).optional().default(120),
  MCP_ALLOWED_HOSTS: optionalString,
  TRUST_PROXY: optionalString,
});

export interface Config {
  /** Postgres to use; when unset an embedded Postgres is started. */
  databaseUrl: string | undefined;
  port: number;
  host: string | undefined;
  publicUrl: string;
  appScheme: string;
  jwtSecret: string | undefined;
  /** JSON: one JWK or an array of JWKs with private parts; the first signs. */
  jwtSigningKeys: string | undefined;
  accessTokenTtlSeconds: number;
  logLevel: z.infer<typeof EnvSchema>['LOG_LEVEL'];
  /** Git-ignored folder for the embedded database and the dev JWT secret. */
  dataDir: string;
  embeddedPgPort: number;
  dbPoolMax: number;
  statementTimeoutMs: number;
  realtime: RealtimeConfig;
  /** Proxy hops whose X-Forwarded-For is believed (Express `trust proxy` syntax); none when unset. */
  trustProxy: boolean | number | string;
  mcp: McpConfig;
}

/** The MCP server (agent interface). */
export interface McpConfig {
  /** Where the MCP process listens (default PORT + 1, loopback). */
  port: number;
  host: string;
  /** Where the gateway sends /mcp and the OAuth paths. */
  upstreamUrl: string;
  /** Requests per minute per client IP on /mcp and the OAuth endpoints (spec: 120). */
  requestsPerMinute: number;
  /** Extra Host header values accepted besides PUBLIC_URL's host and localhost (DNS-rebinding protection). */
  allowedHosts: string[];
}

/** The realtime feed (SSE stream and websocket); see gateway/realtime/hub.ts. */
export interface RealtimeConfig {
  /** Keep-alive comment interval of SSE streams. */
  keepAliveMs: number;
  /** A connection whose unsent backlog grows past this is dropped (it resumes with Last-Event-ID). */
  maxBufferBytes: number;
  /** A stream that cannot write (client not reading) for this long is dropped. */
  drainTimeoutMs: number;
  /** Change-log entries older than this are pruned. */
  retentionSeconds: number;
  /** How often the change log is pruned. */
  pruneIntervalMs: number;
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
}

export class ConfigError extends Error {}

export function loadConfig(env: NodeJS.ProcessEnv = process.env): Config {
  const parsed = EnvSchema.safeParse(env);
  if (!parsed.success) {
    const problems = parsed.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`);
    throw new ConfigError(`invalid configuration: ${problems.join('; ')}`);
  }
  const e = parsed.data;
  return {
    databaseUrl: e.DATABASE_URL,
    port: e.PORT,
    host: e.HOST,
    publicUrl: (e.PUBLIC_URL ?? `http://localhost:${e.PORT}`).replace(/\/+$/, ''),
    appScheme: e.APP_SCHEME ?? 'communityapp',
    jwtSecret: e.JWT_SECRET,
    jwtSigningKeys: e.JWT_SIGNING_KEYS,
    accessTokenTtlSeconds: e.ACCESS_TOKEN_TTL,
    logLevel: e.LOG_LEVEL,
    dataDir: path.resolve(e.DATA_DIR ?? path.join(projectRoot(), '.data')),
    embeddedPgPort: e.EMBEDDED_PG_PORT,
    dbPoolMax: e.DB_POOL_MAX,
    statementTimeoutMs: e.STATEMENT_TIMEOUT_MS,
    realtime: {
      keepAliveMs: Math.round(e.STREAM_KEEPALIVE_SECONDS * 1000),
      maxBufferBytes: e.STREAM_MAX_BUFFER_BYTES,
      drainTimeoutMs: 30_000,
      retentionSeconds: Math.round(e.CHANGE_LOG_RETENTION_HOURS * 3600),
      pruneIntervalMs: 5 * 60_000,
      expiryIntervalMs: 5_000,
      registrationTtlSeconds: 60,
      pollIntervalMs: 5_000,
      queryConcurrency: Math.max(1, Math.floor(e.DB_POOL_MAX / 2)),
      batchSize: 500,
      usersPerTransaction: 32,
      socketIdleTimeoutMs: 90_000,
    },
    trustProxy: parseTrustProxy(e.TRUST_PROXY),
    mcp: mcpConfig(e),
  };
}

function parseTrustProxy(value: string | undefined): boolean | number | string {
  if (value === undefined || value === 'false') return false;
  if (value === 'true') return true;
  if (/^\d+$/.test(value)) return Number(value);
  return value;
}

function mcpConfig(e: z.infer<typeof EnvSchema>): McpConfig {
  const port = e.MCP_PORT ?? (e.PORT === 0 ? 0 : e.PORT + 1);
  const host = e.MCP_HOST ?? '127.0.0.1';
  const reachable = host === '0.0.0.0' || host === '::' ? '127.0.0.1' : host.includes(':') ? `[${host}]` : host;
  return {
    port,
    host,
    upstreamUrl: (e.MCP_UPSTREAM_URL ?? `http://${reachable}:${port}`).replace(/\/+$/, ''),
    requestsPerMinute: e.MCP_REQUESTS_PER_MINUTE,
    allowedHosts: (e.MCP_ALLOWED_HOSTS ?? '').split(',').map((h) => h.trim()).filter(Boolean),
  };
}

/** The repository root (this file lives in gateway/lib/). */
export function projectRoot(): string {
  return path.resolve(import.meta.dirname, '..', '..');
}

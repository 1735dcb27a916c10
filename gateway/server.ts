// Starts the gateway on a database: listen first (so /health can say 503
// while migrating), migrate, then serve. Used by `npm start` and the tests.
import crypto from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { createApp, routes } from './app.ts';
import type { Services } from './http/route.ts';
import type { Config } from './core/process/config.ts';
import { createPool, withDeadline, type Sql } from './core/database/pool.ts';
import { replicaPoolMax, Replicas } from './core/database/replicas.ts';
import { discoverEndpoints, syncEndpoints } from './http/endpoints.ts';
import { FairShare } from './http/fair-share.ts';
import { createTokenService } from './core/auth/jwt.ts';
import { Passwords } from './core/auth/passwords.ts';
import type { Logger } from './core/process/log.ts';
import { runMigrations } from './core/database/migrate.ts';
import { jobWorkerOptions, startJobWorker, type JobWorker } from './jobs/worker.ts';
import { ChangeHub } from './realtime/hub.ts';
import { SessionWatch } from './realtime/session-watch.ts';
import { attachRealtimeWebSocket } from './realtime/websocket.ts';
import { StorageService } from './storage/service.ts';
import type { ReadinessCheck } from './core/process/admin-server.ts';
import { measureStorageVolume, setPoolMax } from './core/process/metrics.ts';

/** Pending connections the kernel may queue for accept (see listen below). */
const LISTEN_BACKLOG = 8192;

export interface RunningGateway {
  url: string;
  server: http.Server;
  /** The realtime hub (SSE stream and websocket). */
  realtime: ChangeHub;
  /** What the admin server's /ready asks of this gateway (core/process/admin-server.ts). */
  readiness: Record<string, ReadinessCheck>;
  close(): Promise<void>;
}

export async function startGateway(
  config: Config,
  databaseUrl: string,
  log: Logger,
  {
    includeCurrentMigration,
    waitForDatabase = false,
    mcpUpstream,
  }: {
    includeCurrentMigration: boolean;
    /** Wait for a database that does not answer (as long as it takes) rather than fail to start. */
    waitForDatabase?: boolean;
    /** Where /mcp goes when MCP_UPSTREAM_URL (or MCP_PORT) does not say: the MCP process `npm start` runs, as it tells its address. */
    mcpUpstream?: () => string | undefined;
  },
): Promise<RunningGateway> {
  let ready = false;
  const sql = createPool(databaseUrl, { max: config.dbPoolMax, applicationName: gatewayApplicationName(config.publicUrl), mode: config.databasePoolMode, log, publicUrl: config.publicUrl });
  // LISTEN needs a session: behind a transaction-mode pooler it uses DATABASE_DIRECT_URL.
  const listenSql = config.databaseDirectUrl
    ? createPool(config.databaseDirectUrl, { max: 1, applicationName: 'gateway-listen' })
    : undefined;
  if (config.databasePoolMode === 'transaction' && !listenSql) {
    log.warn('DATABASE_POOL_MODE=transaction without DATABASE_DIRECT_URL: realtime changes arrive by polling only');
  }
  // Read replicas (DATABASE_REPLICA_URLS): none, no monitor, nothing changes.
  const replicas =
    config.databaseReplicaUrls.length > 0
      ? new Replicas(databaseUrl, config.databaseReplicaUrls, {
          maxLagMs: config.replicaMaxLagMs,
          pool: { max: replicaPoolMax(config.dbPoolMax), applicationName: gatewayApplicationName(config.publicUrl), mode: config.databasePoolMode, log, publicUrl: config.publicUrl },
          log,
        }).start()
      : undefined;
  setPoolMax(config.dbPoolMax);
  // storage_volume_*_bytes: the file system of STORAGE_DIR (uploads on it are refused when it is full).
  measureStorageVolume(config.storage.dir);
  const tokens = await createTokenService(config, {
    sql,
    listenSql,
    onReloadError: (err) => log.warn({ err }, 'signing keys: reloading the key set failed; the keys loaded before stay in use'),
  });
  const realtime = new ChangeHub(sql, config.realtime, log, {
    publicUrl: config.publicUrl,
    statementTimeoutMs: config.statementTimeoutMs,
    listenSql,
    replicas,
  });
  const sessions = new SessionWatch(listenSql ?? sql, log, replicas ? (id) => replicas.noteSessionEnded(id) : undefined);
  const services: Services = {
    sql,
    replicas,
    tokens,
    statementTimeoutMs: config.statementTimeoutMs,
    publicUrl: config.publicUrl,
    appScheme: config.appScheme,
    authRedirects: config.authRedirects,
    realtime,
    authLimits: config.authLimits,
    guestsEnabled: config.guests.enabled,
    trustProxy: config.trustProxy,
    fairShare: new FairShare(config.fairShare),
    sessions,
    passwords: new Passwords(config.passwords),
    webhooks: { allowPrivateTargets: config.webhooks.allowPrivateTargets, allowedPorts: config.webhooks.allowedPorts },
    storage: new StorageService(config.storage),
  };
  const app = await createApp({
    services,
    log,
    isReady: () => ready,
    corsOrigins: config.corsOrigins,
    mcp: { upstreamUrl: () => config.mcp.upstreamUrl ?? mcpUpstream?.(), trustProxy: config.trustProxy, proxySecret: config.mcp.proxySecret },
  });

  const server = app.server;
  server.headersTimeout = 66_000;
  const websocket = attachRealtimeWebSocket(server, {
    hub: realtime,
    sql,
    tokens,
    log,
    statementTimeoutMs: config.statementTimeoutMs,
    isReady: () => ready,
    sessions,
    trustProxy: config.trustProxy,
  });
  let port = 0;
  const listen = async () => {
    // A deep accept queue: after a restart thousands of realtime clients
    // reconnect at once, and a connection the queue cannot hold is dropped
    // and retried by the client's TCP 1, 3, 7 s later (Node's default is 511;
    // the kernel caps it at net.core.somaxconn).
    await app.listen({ port: config.port, host: config.host ?? '0.0.0.0', backlog: LISTEN_BACKLOG });
    port = (server.address() as AddressInfo).port;
    services.selfUrl = selfUrl(config.host, port);
  };
  // A process replacing one that died (waitForDatabase) takes connections
  // only once it serves: the other processes on the port serve meanwhile.
  if (!waitForDatabase) await listen();

  // First stop accepting connections (requests already on their way are
  // still served, and answered with Connection: close); then end streams and
  // websockets (they would keep the server open) and the LISTEN connection;
  // then wait for the requests in flight; then the pool.
  let worker: JobWorker | undefined;
  let closing = false;
  const close = async () => {
    closing = true;
    // Fastify's close: no new connections, idle ones closed at once, requests
    // being served finish and are answered with Connection: close (those still
    // arriving on open connections too). In-flight requests may run until
    // their statement timeout; then whatever is left is cut.
    const drained = app.close();
    setTimeout(() => server.closeAllConnections(), config.statementTimeoutMs + 1_000).unref();
    // Jobs running finish (a webhook is given up to 5 s, then retried by the next worker).
    await worker?.stop(config.statementTimeoutMs);
    await websocket.close();
    await realtime.close();
    await sessions.close();
    await tokens.close();
    await drained;
    ready = false;
    await sql.end({ timeout: 5 });
    await replicas?.close();
    await listenSql?.end({ timeout: 5 });
    await services.passwords.close();
  };

  try {
    if (waitForDatabase) await untilDatabaseAnswers(sql, config.databaseDirectUrl ? [listenSql!] : [], log, () => closing);
    // Behind a pooler, migrations (advisory locks, DDL) go to the database directly.
    await runMigrations(config.databaseDirectUrl ?? databaseUrl, log, { includeCurrent: includeCurrentMigration });
    await warnAboutOtherIssuers(sql, config.publicUrl, log);
    // The signing keys (identity.signing_keys) are there once the migrations are.
    await tokens.start();
    // SQL outside requests (webhook payloads) builds links with PUBLIC_URL.
    await sql`select private.service_setting_set('public_url', ${config.publicUrl})`;
    // Time zones: the copy of pg_timezone_names gains what this server's tzdata
    // added; DEFAULT_TIMEZONE must be one of them (else the start fails, saying so).
    await sql`select private.time_zones_refresh()`;
    await sql`select private.service_setting_set('default_timezone', private.time_zone_name(${config.defaultTimezone}))`;
    await realtime.start();
    await sessions.start();
    // The job worker (WORKER=off: none in this process).
    if (config.worker.enabled) worker = await startJobWorker(jobWorkerOptions(config, config.databaseDirectUrl ?? databaseUrl, log));
    await syncEndpoints(sql, discoverEndpoints(app.served, routes), log);
    if (waitForDatabase) await listen();
  } catch (err) {
    await close();
    throw err;
  }
  ready = true;
  const readiness: Record<string, ReadinessCheck> = {
    database: async () => {
      if (!ready) return closing ? 'shutting down' : 'migrations are not applied yet';
      await withDeadline(sql, 2_000, () => sql`select 1`.then(() => undefined));
      return null;
    },
    realtime: async () => realtime.notReady(),
    ...(worker ? { jobs: async () => worker!.notPolling() } : {}),
  };
  return { url: `http://localhost:${port}`, server, realtime, readiness, close };
}

/**
 * Waits until the pool (and the other pools given: the direct connection
 * behind a pooler) answers, trying every half second; one line when it has
 * to wait, one when it is over. Stops waiting when `stopped()` says so.
 */
async function untilDatabaseAnswers(sql: Sql, others: Sql[], log: Logger, stopped: () => boolean): Promise<void> {
  const started = Date.now();
  let said = false;
  for (;;) {
    try {
      for (const pool of [sql, ...others]) await withDeadline(pool, 2_000, () => pool`select 1`.then(() => undefined));
      if (said) log.info({ seconds: (Date.now() - started) / 1000 }, 'database answering: starting');
      return;
    } catch (err) {
      if (stopped()) throw err;
      if (!said) log.warn({ cause: { code: (err as { code?: unknown }).code, message: (err as Error).message } }, 'database not answering: waiting for it before starting');
      said = true;
      await new Promise((resolve) => setTimeout(resolve, 500));
    }
  }
}

/**
 * The gateway's connections carry a digest of PUBLIC_URL in their
 * application_name: PUBLIC_URL is the issuer of the access tokens, and a
 * replica with another one refuses the tokens the others issue (401).
 */
function gatewayApplicationName(publicUrl: string): string {
  return `gateway iss:${crypto.createHash('sha256').update(publicUrl).digest('hex').slice(0, 12)}`;
}

/** One error line when another gateway connected to this database has another PUBLIC_URL. */
async function warnAboutOtherIssuers(sql: Sql, publicUrl: string, log: Logger): Promise<void> {
  const others = await sql<{ application_name: string }[]>`
    select distinct application_name from pg_stat_activity
     where datname = current_database() and application_name like 'gateway iss:%'
       and split_part(application_name, ' ', 2) <> split_part(${gatewayApplicationName(publicUrl)}, ' ', 2)`;
  if (others.length === 0) return;
  log.error(
    { publicUrl, others: others.map((o) => o.application_name) },
    'another gateway on this database has a different PUBLIC_URL (the token issuer): each refuses the tokens the other issues; give every replica the same PUBLIC_URL and JWT_SECRET',
  );
}

/** A loopback URL of this server (the bound address when it is a specific one). */
function selfUrl(host: string | undefined, port: number): string {
  if (!host || host === '0.0.0.0') return `http://127.0.0.1:${port}`;
  if (host === '::') return `http://[::1]:${port}`;
  return `http://${host.includes(':') ? `[${host}]` : host}:${port}`;
}

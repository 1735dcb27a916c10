// A throwaway environment: a database (a temporary embedded cluster, or a
// fresh database on the server of TEST_DATABASE_URL) migrated with the
// committed migrations and current/, and the real gateway on a random port.
// Used by the test run (global-setup.ts) and by the benchmarks.
import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import postgres from 'postgres';
import { loadConfig, type Config } from '../../gateway/core/process/config.ts';
import { ensureDatabase, startEmbeddedPostgres, type RunningPostgres } from '../../gateway/core/process/embedded-postgres.ts';
import { createLogger, type Logger } from '../../gateway/core/process/log.ts';
import { startGateway, type RunningGateway } from '../../gateway/server.ts';
import { startPgBouncer, type RunningPgBouncer } from './pgbouncer.ts';
import { startMcpServer, type RunningMcpServer } from '../../mcp-server/server.ts';
import { freePort } from '../../gateway/core/process/free-port.ts';

export interface TestEnvironment {
  baseUrl: string;
  /** The MCP process's own address (the gateway proxies /mcp to it). */
  mcpUrl: string;
  databaseUrl: string;
  jwtSecret: string;
  config: Config;
  /** A temporary folder removed by stop(). */
  dir: string;
  /** The gateway running in this process (benchmarks read its realtime hub's counters). */
  gateway: RunningGateway;
  stop(): Promise<void>;
}

export interface EnvironmentOptions {
  /** Server URL (any database) on which to create the throwaway database. */
  serverUrl?: string;
  /**
   * A migrated database on serverUrl to copy (CREATE DATABASE … TEMPLATE, as
   * the test run's global setup makes one): the copy needs no migrating.
   */
  template?: string;
  /** The start of the throwaway database's name (default `test_`). */
  databasePrefix?: string;
  /** The folder in which the environment's temporary folder is made (default: the OS's). */
  parentDir?: string;
  /** Logger for the gateway (default: silent). */
  gatewayLog?: (dir: string) => Logger;
  dbPoolMax?: number;
  /** Extra Postgres settings for the embedded cluster. */
  settings?: Record<string, string>;
  /**
   * Put the gateway behind PgBouncer in transaction mode (DATABASE_POOL_MODE=transaction,
   * DATABASE_DIRECT_URL for LISTEN and migrations). databaseUrl stays direct.
   */
  pgbouncer?: boolean;
  /** Extra configuration (environment variables) for the gateway. */
  env?: Record<string, string>;
}

export async function startTestEnvironment(options: EnvironmentOptions = {}): Promise<TestEnvironment> {
  const dir = fs.mkdtempSync(path.join(options.parentDir ?? os.tmpdir(), 'community-backend-test-'));
  fs.chmodSync(dir, 0o755);
  const quiet = createLogger(process.env.TEST_LOG_LEVEL ?? 'warn', 'test-setup');
  const databaseName = `${options.databasePrefix ?? 'test_'}${crypto.randomBytes(4).toString('hex')}`;
  let cluster: RunningPostgres | undefined;
  let dropDatabase: (() => Promise<void>) | undefined;
  let databaseUrl: string;

  if (options.serverUrl) {
    const serverUrl = options.serverUrl;
    if (options.template) await cloneDatabase(serverUrl, options.template, databaseName);
    else await ensureDatabase(serverUrl, databaseName);
    databaseUrl = Object.assign(new URL(serverUrl), { pathname: `/${databaseName}` }).toString();
    dropDatabase = async () => {
      const sql = postgres(serverUrl, { max: 1, onnotice: () => {} });
      await sql`drop database if exists ${sql(databaseName)} with (force)`;
      await sql.end();
    };
  } else {
    cluster = await startEmbeddedPostgres({
      dir: path.join(dir, 'postgres'),
      port: await freePort(),
      persistent: false,
      log: quiet,
      settings: { fsync: 'off', synchronous_commit: 'off', full_page_writes: 'off', ...options.settings },
    });
    await ensureDatabase(cluster.urlFor('postgres'), databaseName);
    databaseUrl = cluster.urlFor(databaseName);
  }

  let pooler: RunningPgBouncer | undefined;
  const jwtSecret = crypto.randomBytes(32).toString('base64url');
  // A real port, so that PUBLIC_URL (OAuth discovery, event links) names it.
  const gatewayPort = await freePort();
  const baseConfig = loadConfig({
    PORT: String(gatewayPort),
    HOST: '127.0.0.1',
    JWT_SECRET: jwtSecret,
    DATA_DIR: dir,
    DB_POOL_MAX: String(options.dbPoolMax ?? 20),
    MCP_PORT: '0',
    // Every test client is 127.0.0.1: per-IP limits (logins, registrations, /mcp) would couple test files; they have their own tests.
    LOGIN_MAX_FAILURES_PER_IP: '1000000',
    PASSWORD_SET_MAX_PER_IP: '1000000',
    MCP_REQUESTS_PER_MINUTE: '1000000',
    STORAGE_RENDER_MISSES_PER_MINUTE: '1000000',
    // The gateway vouches for the client address it forwards to the MCP process with this secret.
    MCP_PROXY_SECRET: crypto.randomBytes(24).toString('base64url'),
    // Webhook tests use receivers on loopback, and retries about a second apart.
    WEBHOOK_ALLOW_PRIVATE_TARGETS: '1',
    WEBHOOK_RETRY_SCHEDULE: '1,1',
    ...options.env,
  });
  const log = options.gatewayLog?.(dir) ?? createLogger('silent');
  let gateway: RunningGateway;
  let mcp: RunningMcpServer | undefined;
  let config: Config = baseConfig;
  try {
    pooler = options.pgbouncer ? await startPgBouncer(databaseUrl) : undefined;
    // The MCP process believes the client address its one proxy (the gateway) forwards with the shared secret.
    mcp = await startMcpServer(baseConfig, databaseUrl, log);
    config = {
      ...baseConfig,
      ...(pooler ? { databasePoolMode: 'transaction' as const, databaseDirectUrl: databaseUrl } : {}),
      mcp: { ...baseConfig.mcp, port: mcp.port, upstreamUrl: mcp.url },
    };
    gateway = await startGateway(config, pooler?.url ?? databaseUrl, log, {
      includeCurrentMigration: true,
    });
  } catch (err) {
    await mcp?.close();
    await pooler?.stop();
    await dropDatabase?.();
    await cluster?.stop();
    throw err;
  }

  const runningMcp = mcp;
  return {
    baseUrl: gateway.url,
    mcpUrl: runningMcp.url,
    databaseUrl,
    jwtSecret,
    config,
    dir,
    gateway,
    async stop() {
      await gateway.close();
      await runningMcp.close();
      await pooler?.stop();
      await dropDatabase?.();
      await cluster?.stop();
      fs.rmSync(dir, { recursive: true, force: true });
    },
  };
}

/**
 * Creates `database` on the server as a copy of `template`, a migrated
 * database no one is connected to (graphile-worker's and PostgREST's test
 * suites do the same): a file's own database in a fraction of a second,
 * where migrating a new one takes many.
 */
export async function cloneDatabase(serverUrl: string, template: string, database: string): Promise<void> {
  const sql = postgres(serverUrl, { max: 1, onnotice: () => {} });
  try {
    // FILE_COPY (PostgreSQL 15+): a checkpoint and a copy of the files, several times faster
    // for a small database than WAL_LOG, the default, which writes every block to the WAL.
    await sql`create database ${sql(database)} template ${sql(template)} strategy file_copy`;
  } finally {
    await sql.end();
  }
}

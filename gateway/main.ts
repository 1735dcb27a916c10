// `npm start`: the database (embedded unless DATABASE_URL is set), migrations,
// and the gateway on PORT. SIGINT/SIGTERM stop everything, Postgres included.
import cluster from 'node:cluster';
import { REPLACEMENT_ENV, startWorkers, type PrimaryMessage, type WorkerMessage } from './cluster.ts';
import { loadConfigOrExit } from './core/process/config.ts';
import { openDatabase, type Database } from './core/process/open-database.ts';
import { createLogger } from './core/process/log.ts';
import { onShutdown } from './core/process/shutdown.ts';
import { startupMessage } from './core/process/startup-error.ts';
import { startGateway, type RunningGateway } from './server.ts';
import { startMcpChild, type McpChild } from './mcp-child.ts';
import { answerClusterMetricsRequests, answerReadinessRequests, startAdminServer, type AdminServer, type ReadinessCheck } from './core/process/admin-server.ts';
import { enableMetrics } from './core/process/metrics.ts';
import { startTracing, stopTracing } from './core/process/tracing.ts';

async function main(): Promise<void> {
  const config = loadConfigOrExit();
  const log = createLogger(config.logLevel);
  // WEB_CONCURRENCY > 1: this process only supervises the gateway processes.
  if (await startWorkers(config, log, (databaseUrl) => startMcpChild(config, databaseUrl, log))) return;
  // ADMIN_PORT: metrics are kept in every gateway process (a cluster's primary gathers its workers').
  if (config.admin) enableMetrics('gateway');
  // OTEL_EXPORTER_OTLP_ENDPOINT (or ..._TRACES_ENDPOINT): traces; else the SDK is not loaded.
  await startTracing('community-backend');
  const started = Date.now();
  let database: Database | undefined;
  let gateway: RunningGateway | undefined;
  let mcp: McpChild | undefined;
  let admin: AdminServer | undefined;
  // In a WEB_CONCURRENCY worker: the address of the MCP process the primary runs, as it tells it (cluster.ts).
  let primaryMcpUrl: string | undefined;
  if (cluster.isWorker) {
    process.on('message', (message: PrimaryMessage | null) => {
      if (message?.type === 'mcp-upstream') primaryMcpUrl = message.url;
    });
  }
  if (config.admin && cluster.isWorker) {
    answerClusterMetricsRequests();
    answerReadinessRequests(() => gateway?.readiness ?? { database: starting });
  }
  const shutdown = onShutdown(log, async () => {
    await Promise.all([mcp?.stop(), gateway?.close()]);
    await admin?.close();
    await stopTracing();
    await database?.stop();
  });
  // Under `npm start` (its script execs this process, so npm passes SIGTERM and
  // SIGINT on): if npm itself is killed outright, leave too rather than run on
  // orphaned, serving requests, with Postgres.
  if (process.env.npm_lifecycle_event === 'start') onParentGone(() => void shutdown('parent exited'));

  try {
    // The admin server (one process: here; WEB_CONCURRENCY: the primary's, cluster.ts) answers from the start: /live at once, /ready once all is up.
    if (config.admin && !cluster.isWorker) {
      admin = await startAdminServer({
        ...config.admin,
        log,
        checks: () => ({
          ...(gateway?.readiness ?? { database: starting }),
          ...(mcp ? { mcp: () => mcp!.notAnswering() } : {}),
        }),
        sources: () => {
          const child = mcp?.current();
          return child ? [child] : [];
        },
      });
    }
    database = await openDatabase(config, log);
    gateway = await startGateway(config, database.url, log, {
      includeCurrentMigration: database.embedded,
      // Where /mcp goes: the MCP process this process runs, or (WEB_CONCURRENCY) the one the primary runs.
      mcpUpstream: () => (cluster.isWorker ? primaryMcpUrl : mcp?.url()),
      // A WEB_CONCURRENCY worker replacing one that died waits for the database (gateway/cluster.ts).
      waitForDatabase: cluster.isWorker && process.env[REPLACEMENT_ENV] === '1',
    });
    // In a WEB_CONCURRENCY worker the primary runs the one MCP process.
    // (Not once shutting down: a SIGTERM during startup must not leave a child behind.)
    if (!cluster.isWorker && !shutdown.stopping) {
      mcp = startMcpChild(config, database.url, log);
      // A first start that fails (MCP_PORT taken, ...) fails `npm start`, loudly: later exits are restarted.
      mcp.started.catch((err: Error) => {
        console.error(`could not start: the MCP server: ${err.message}`);
        void shutdown('the MCP server could not start', 1);
      });
    }
  } catch (err) {
    // One line for the user; the details only at debug level.
    log.debug({ err }, 'could not start');
    await database?.stop().catch(() => {});
    // A worker of WEB_CONCURRENCY tells the primary, which says it once for all and stops.
    if (cluster.isWorker) return tellPrimary({ type: 'gateway-failed', message: startupMessage(err) }, () => process.exit(1));
    console.error(`could not start: ${startupMessage(err)}`);
    process.exit(1);
  }
  if (cluster.isWorker) tellPrimary({ type: 'gateway-ready' });
  log.info(
    { database: database.embedded ? 'embedded' : 'DATABASE_URL', ms: Date.now() - started },
    `gateway listening on ${gateway.url} (public URL ${config.publicUrl})`,
  );
}

/** The readiness of a gateway still starting. */
const starting: ReadinessCheck = async () => 'starting: the database is being opened and migrated';

function tellPrimary(message: WorkerMessage, then?: () => void): void {
  process.send!(message, undefined, {}, () => then?.());
}

/** Calls `fn` once this process has been orphaned (re-parented, e.g. to init). */
function onParentGone(fn: () => void): void {
  const parent = process.ppid;
  const timer = setInterval(() => {
    if (process.ppid === parent) return;
    clearInterval(timer);
    fn();
  }, 1_000);
  timer.unref();
}

void main();

// `npm run mcp`: the MCP server alone, on MCP_PORT (default PORT + 1;
// loopback unless MCP_HOST says otherwise), for scaling it apart from the
// gateway. It uses DATABASE_URL, or joins the embedded database of a running
// `npm start`. It does not migrate: the gateway does.
//
// `npm start` runs this file as a child process (with an IPC channel): the
// child exits when its parent goes away, so it is never orphaned. Without
// MCP_PORT it listens on a free port and tells its parent which
// ({ ready, port }); a start that fails is told too ({ failed: why }), in one
// line, before it exits.
import { loadConfigOrExit } from '../gateway/core/process/config.ts';
import { startupMessage } from '../gateway/core/process/startup-error.ts';
import { openDatabase, type Database } from '../gateway/core/process/open-database.ts';
import { createLogger } from '../gateway/core/process/log.ts';
import { onShutdown } from '../gateway/core/process/shutdown.ts';
import { startMcpServer, type RunningMcpServer } from './server.ts';
import { answerMetricsRequests, startAdminServer, type AdminServer } from '../gateway/core/process/admin-server.ts';
import { enableMetrics } from '../gateway/core/process/metrics.ts';
import { startTracing, stopTracing } from '../gateway/core/process/tracing.ts';

async function main(): Promise<void> {
  const config = loadConfigOrExit();
  const log = createLogger(config.logLevel, 'mcp-server');
  let database: Database | undefined;
  let server: RunningMcpServer | undefined;
  let admin: AdminServer | undefined;
  const shutdown = onShutdown(
    log,
    async () => {
      await server?.close();
      await admin?.close();
      await stopTracing();
      await database?.stop();
    },
    { limitMs: 10_000 },
  );
  // Started by `npm start`: leave with the parent, also when it went away
  // while this process was still loading. Whether it has is known only once
  // the event loop has read the channel's end: Node 20 had turned it while
  // loading the modules (the 'disconnect' event is then already past), Node 24
  // runs this before its first turn (process.connected still says true), so
  // let it turn once before asking.
  if (process.send) {
    process.on('disconnect', () => void shutdown('parent exited'));
    await new Promise((resolve) => setImmediate(resolve));
    if (!process.connected) return void shutdown('parent exited');
  }

  // ADMIN_PORT: metrics kept. Started by `npm start`, the gateway's admin
  // server (or its cluster primary's) asks for them over the IPC channel and
  // its /ready asks this server's /health; alone, this process serves its own.
  // OTEL_EXPORTER_OTLP_ENDPOINT: traces (a /mcp request continues the gateway's).
  await startTracing('community-backend-mcp');
  if (config.admin) {
    enableMetrics('mcp');
    if (process.send) answerMetricsRequests();
  }
  try {
    if (config.admin && !process.send) {
      admin = await startAdminServer({
        ...config.admin,
        log,
        checks: () => ({ mcp: async () => (server ? null : 'starting') }),
      });
    }
    database = await openDatabase(config, log, { reuseRunning: true });
    server = await startMcpServer(config, database.url, log);
  } catch (err) {
    const why = mcpStartupMessage(err, config.mcp.port);
    log.debug({ err }, 'could not start');
    log.fatal(`could not start: ${why}`);
    await database?.stop().catch(() => {});
    if (process.connected) process.send?.({ failed: why }, undefined, {}, () => process.exit(1));
    else process.exit(1);
    return;
  }
  if (shutdown.stopping) return;
  log.info(`MCP server listening on ${config.mcp.host}:${server.port} (public ${config.publicUrl}/mcp)`);
  // The parent may go in the meantime: a failed send is that too (without a
  // callback it would be an unhandled 'error' event on the process).
  if (process.connected) process.send?.({ ready: true, port: server.port }, undefined, {}, (err) => {
    if (err) void shutdown('parent exited');
  });
}

/** Why the MCP server could not start, in one line (a taken port names MCP_PORT, not PORT). */
function mcpStartupMessage(err: unknown, port: number | undefined): string {
  const e = err as { code?: unknown; syscall?: unknown; port?: unknown } | null;
  if (e?.code === 'EADDRINUSE' && e.syscall === 'listen') {
    return `port ${String(e.port)} is already in use: ${port === undefined ? 'set MCP_PORT to a free port' : 'set MCP_PORT to a free port, or unset it under `npm start` (a free port is then chosen)'}, or stop what uses it`;
  }
  return startupMessage(err);
}

void main();

// `npm start`: the database (embedded unless DATABASE_URL is set), migrations,
// and the gateway on PORT. SIGINT/SIGTERM stop everything, Postgres included.
import cluster from 'node:cluster';
import { startWorkers } from './lib/cluster.ts';
import { ConfigError, loadConfig } from './lib/config.ts';
import { openDatabase, type Database } from './lib/database.ts';
import { createLogger } from './lib/log.ts';
import { startupMessage } from './lib/startup-error.ts';
import { startGateway, type RunningGateway } from './server.ts';
import { startMcpChild, type McpChild } from '../mcp-server/child.ts';

async function main(): Promise<void> {
  let config;
  try {
    config = loadConfig();
  } catch (err) {
    if (err instanceof ConfigError) {
      console.error(err.message);
      process.exit(1);
    }
    throw err;
  }
  const log = createLogger(config.logLevel);
  // WEB_CONCURRENCY > 1: this process only supervises the gateway processes.
  if (await startWorkers(config, log, (databaseUrl) => startMcpChild(config, databaseUrl, log))) return;
  const started = Date.now();
  let database: Database | undefined;
  let gateway: RunningGateway | undefined;
  let mcp: McpChild | undefined;
  let stopping = false;

  const shutdown = async (signal: string) => {
    if (stopping) return;
    stopping = true;
    log.info({ signal }, 'shutting down');
    try {
      await mcp?.stop();
      await gateway?.close();
      await database?.stop();
    } catch (err) {
      log.error({ err }, 'error while shutting down');
    }
    process.exit(0);
  };
  process.on('SIGINT', () => void shutdown('SIGINT'));
  process.on('SIGTERM', () => void shutdown('SIGTERM'));

  try {
    database = await openDatabase(config, log);
    gateway = await startGateway(config, database.url, log, { includeCurrentMigration: database.embedded });
    // In a WEB_CONCURRENCY worker the primary runs the one MCP process.
    // (Not once shutting down: a SIGTERM during startup must not leave a child behind.)
    if (!cluster.isWorker && !stopping) mcp = startMcpChild(config, database.url, log);
  } catch (err) {
    // One line for the user; the details only at debug level.
    log.debug({ err }, 'could not start');
    console.error(`could not start: ${startupMessage(err)}`);
    await database?.stop().catch(() => {});
    process.exit(1);
  }
  log.info(
    { database: database.embedded ? 'embedded' : 'DATABASE_URL', ms: Date.now() - started },
    `gateway listening on ${gateway.url} (public URL ${config.publicUrl})`,
  );
}

void main();

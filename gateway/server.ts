// Starts the gateway on a database: listen first (so /health can say 503
// while migrating), migrate, then serve. Used by `npm start` and the tests.
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { createApp } from './http/app.ts';
import type { Config } from './lib/config.ts';
import { createPool } from './lib/db.ts';
import { createTokenService } from './lib/jwt.ts';
import type { Logger } from './lib/log.ts';
import { runMigrations } from './lib/migrate.ts';
import { ChangeHub } from './realtime/hub.ts';
import { attachRealtimeWebSocket } from './realtime/websocket.ts';

export interface RunningGateway {
  url: string;
  server: http.Server;
  /** The realtime hub (SSE stream and websocket). */
  realtime: ChangeHub;
  close(): Promise<void>;
}

export async function startGateway(
  config: Config,
  databaseUrl: string,
  log: Logger,
  { includeCurrentMigration }: { includeCurrentMigration: boolean },
): Promise<RunningGateway> {
  let ready = false;
  const sql = createPool(databaseUrl, { max: config.dbPoolMax, applicationName: 'gateway' });
  const tokens = await createTokenService(config);
  const realtime = new ChangeHub(sql, config.realtime, log, {
    publicUrl: config.publicUrl,
    statementTimeoutMs: config.statementTimeoutMs,
  });
  const app = createApp({
    services: {
      sql,
      tokens,
      statementTimeoutMs: config.statementTimeoutMs,
      publicUrl: config.publicUrl,
      appScheme: config.appScheme,
      realtime,
    },
    log,
    isReady: () => ready,
    mcp: { upstreamUrl: config.mcp.upstreamUrl, trustProxy: config.trustProxy },
  });

  const server = http.createServer(app);
  server.keepAliveTimeout = 65_000;
  server.headersTimeout = 66_000;
  const websocket = attachRealtimeWebSocket(server, {
    hub: realtime,
    sql,
    tokens,
    log,
    statementTimeoutMs: config.statementTimeoutMs,
    isReady: () => ready,
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(config.port, config.host ?? '0.0.0.0', () => resolve());
  });
  const { port } = server.address() as AddressInfo;

  // Streams and websockets first (they would keep the server open), then the
  // LISTEN connection, then the HTTP server, then the pool.
  const close = async () => {
    ready = false;
    await websocket.close();
    await realtime.close();
    await new Promise<void>((resolve) => {
      server.close(() => resolve());
      server.closeIdleConnections();
      setTimeout(() => server.closeAllConnections(), 5_000).unref();
    });
    await sql.end({ timeout: 5 });
  };

  try {
    await runMigrations(databaseUrl, log, { includeCurrent: includeCurrentMigration });
    await realtime.start();
  } catch (err) {
    await close();
    throw err;
  }
  ready = true;
  return { url: `http://localhost:${port}`, server, realtime, close };
}

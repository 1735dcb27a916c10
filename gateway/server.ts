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

export interface RunningGateway {
  url: string;
  server: http.Server;
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
  const app = createApp({
    services: {
      sql,
      tokens,
      statementTimeoutMs: config.statementTimeoutMs,
      publicUrl: config.publicUrl,
      appScheme: config.appScheme,
    },
    log,
    isReady: () => ready,
  });

  const server = http.createServer(app);
  server.keepAliveTimeout = 65_000;
  server.headersTimeout = 66_000;
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(config.port, config.host ?? '0.0.0.0', () => resolve());
  });
  const { port } = server.address() as AddressInfo;

  const close = async () => {
    await new Promise<void>((resolve) => {
      server.close(() => resolve());
      server.closeIdleConnections();
      setTimeout(() => server.closeAllConnections(), 5_000).unref();
    });
    await sql.end({ timeout: 5 });
  };

  try {
    await runMigrations(databaseUrl, log, { includeCurrent: includeCurrentMigration });
  } catch (err) {
    await close();
    throw err;
  }
  ready = true;
  return { url: `http://localhost:${port}`, server, close };
}

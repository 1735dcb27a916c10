// Which Postgres to use: DATABASE_URL when set, else the embedded cluster in
// DATA_DIR/postgres (started here, database `app`).
import path from 'node:path';
import type { Config } from './config.ts';
import { makeDataFolder } from './data-folder.ts';
import type { Logger } from './log.ts';

export interface Database {
  url: string;
  /** True for the embedded development cluster. */
  embedded: boolean;
  stop(): Promise<void>;
}

export const EMBEDDED_DATABASE = 'app';

/**
 * `reuseRunning`: for command-line tools, connect to the embedded cluster a
 * running `npm start` holds instead of refusing to start a second one.
 */
export async function openDatabase(config: Config, log: Logger, { reuseRunning = false } = {}): Promise<Database> {
  if (config.databaseUrl) {
    return { url: config.databaseUrl, embedded: false, stop: async () => {} };
  }
  makeDataFolder(config.dataDir);
  // Development tooling, loaded only when it is used: a deployment (DATABASE_URL) never loads it.
  const { ensureDatabase, startEmbeddedPostgres } = await import('./embedded-postgres.ts');
  const cluster = await startEmbeddedPostgres({
    dir: path.join(config.dataDir, 'postgres'),
    port: config.embeddedPgPort,
    persistent: true,
    log,
    reuseRunning,
  });
  try {
    await ensureDatabase(cluster.urlFor('postgres'), EMBEDDED_DATABASE);
  } catch (err) {
    await cluster.stop();
    throw err;
  }
  return { url: cluster.urlFor(EMBEDDED_DATABASE), embedded: true, stop: () => cluster.stop() };
}

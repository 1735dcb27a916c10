// Which Postgres to use: DATABASE_URL when set, else the embedded cluster in
// DATA_DIR/postgres (started here, database `app`).
import path from 'node:path';
import type { Config } from './config.ts';
import { makeDataFolder } from './data-folder.ts';
import { StartupProblem } from './startup-error.ts';
import type { Logger } from './log.ts';

export interface Database {
  url: string;
  /** True for the embedded development cluster. */
  embedded: boolean;
  /** Which database it is, for a person: DATABASE_URL without its password, or the embedded cluster's folder. */
  description: string;
  stop(): Promise<void>;
}

export const EMBEDDED_DATABASE = 'app';

/**
 * `reuseRunning`: for command-line tools, connect to the embedded cluster a
 * running `npm start` holds instead of refusing to start a second one.
 * `mustExist`: never create the embedded cluster (a command that reads data
 * would only find it empty): a StartupProblem instead.
 */
export async function openDatabase(config: Config, log: Logger, { reuseRunning = false, mustExist = false } = {}): Promise<Database> {
  if (config.databaseUrl) {
    return { url: config.databaseUrl, embedded: false, description: `${withoutPassword(config.databaseUrl)} (DATABASE_URL)`, stop: async () => {} };
  }
  const dir = path.join(config.dataDir, 'postgres');
  const description = `the embedded development database in ${dir} (DATABASE_URL is unset)`;
  // Development tooling, loaded only when it is used: a deployment (DATABASE_URL) never loads it.
  const { embeddedClusterExists, ensureDatabase, startEmbeddedPostgres } = await import('./embedded-postgres.ts');
  if (mustExist && !embeddedClusterExists(dir)) {
    throw new StartupProblem(
      `DATABASE_URL is unset and there is no embedded development database in ${dir} (\`npm start\` never ran with DATA_DIR ${config.dataDir}): set DATABASE_URL to the service's database`,
    );
  }
  makeDataFolder(config.dataDir);
  const cluster = await startEmbeddedPostgres({
    dir,
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
  return { url: cluster.urlFor(EMBEDDED_DATABASE), embedded: true, description, stop: () => cluster.stop() };
}

/** A database URL (one host or several) without the password of its user. */
export function withoutPassword(url: string): string {
  return url.replace(/^([a-z]+:\/\/[^:@/]*):[^@/]*@/i, '$1@');
}

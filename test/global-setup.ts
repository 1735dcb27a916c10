// Once per `npm test`: a throwaway database (a temporary embedded cluster, or a
// fresh database on the server of TEST_DATABASE_URL), migrated, and the real
// gateway listening on a random port. Tests reach both through inject().
import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import postgres from 'postgres';
import { destination } from 'pino';
import type { TestProject } from 'vitest/node';
import type {} from 'vitest';
import { loadConfig } from '../gateway/lib/config.ts';
import { ensureDatabase, startEmbeddedPostgres, type RunningPostgres } from '../gateway/lib/embedded-postgres.ts';
import { createLogger } from '../gateway/lib/log.ts';
import { startGateway, type RunningGateway } from '../gateway/server.ts';

declare module 'vitest' {
  export interface ProvidedContext {
    baseUrl: string;
    databaseUrl: string;
    jwtSecret: string;
    publicUrl: string;
    logFile: string;
    testDir: string;
  }
}

let cluster: RunningPostgres | undefined;
let gateway: RunningGateway | undefined;
let dropDatabase: (() => Promise<void>) | undefined;
let tmp: string | undefined;

export async function setup(project: TestProject): Promise<void> {
  tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'community-backend-test-'));
  fs.chmodSync(tmp, 0o755);
  const quiet = createLogger(process.env.TEST_LOG_LEVEL ?? 'warn', 'test-setup');
  const databaseName = `test_${crypto.randomBytes(4).toString('hex')}`;
  let databaseUrl: string;

  if (process.env.TEST_DATABASE_URL) {
    const serverUrl = process.env.TEST_DATABASE_URL;
    await ensureDatabase(serverUrl, databaseName);
    databaseUrl = Object.assign(new URL(serverUrl), { pathname: `/${databaseName}` }).toString();
    dropDatabase = async () => {
      const sql = postgres(serverUrl, { max: 1, onnotice: () => {} });
      await sql`drop database if exists ${sql(databaseName)} with (force)`;
      await sql.end();
    };
  } else {
    const port = 20000 + crypto.randomInt(20000);
    cluster = await startEmbeddedPostgres({
      dir: path.join(tmp, 'postgres'),
      port,
      persistent: false,
      log: quiet,
      settings: { fsync: 'off', synchronous_commit: 'off', full_page_writes: 'off' },
    });
    await ensureDatabase(cluster.urlFor('postgres'), databaseName);
    databaseUrl = cluster.urlFor(databaseName);
  }

  // The gateway logs everything (debug) to a file, so tests can check that no
  // password or token ever reaches the logs.
  const logFile = path.join(tmp, 'gateway.log');
  const jwtSecret = crypto.randomBytes(32).toString('base64url');
  const config = loadConfig({
    PORT: '0',
    HOST: '127.0.0.1',
    JWT_SECRET: jwtSecret,
    DATA_DIR: tmp,
    DB_POOL_MAX: '20',
    LOG_LEVEL: 'debug',
  });
  const log = createLogger('debug', 'gateway', destination({ dest: logFile, sync: true }));
  gateway = await startGateway(config, databaseUrl, log, { includeCurrentMigration: true });

  project.provide('baseUrl', gateway.url);
  project.provide('databaseUrl', databaseUrl);
  project.provide('jwtSecret', jwtSecret);
  project.provide('publicUrl', config.publicUrl);
  project.provide('logFile', logFile);
  project.provide('testDir', tmp);
}

export async function teardown(): Promise<void> {
  await gateway?.close();
  await dropDatabase?.();
  await cluster?.stop();
  if (tmp) fs.rmSync(tmp, { recursive: true, force: true });
}

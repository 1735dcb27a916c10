// Once per `npm test`: a throwaway database and the real gateway (see
// support/environment.ts). Tests reach both through inject().
import path from 'node:path';
import { destination } from 'pino';
import type { TestProject } from 'vitest/node';
import type {} from 'vitest';
import { createLogger } from '../gateway/core/process/log.ts';
import { startTestEnvironment, type TestEnvironment } from './support/environment.ts';

declare module 'vitest' {
  export interface ProvidedContext {
    baseUrl: string;
    mcpUrl: string;
    databaseUrl: string;
    jwtSecret: string;
    publicUrl: string;
    logFile: string;
    testDir: string;
  }
}

let environment: TestEnvironment | undefined;

export async function setup(project: TestProject): Promise<void> {
  // The gateway logs everything (debug) to a file, so tests can check that no
  // password or token ever reaches the logs.
  let logFile = '';
  environment = await startTestEnvironment({
    serverUrl: process.env.TEST_DATABASE_URL,
    // TEST_PGBOUNCER=1: the whole suite through PgBouncer in transaction mode.
    pgbouncer: process.env.TEST_PGBOUNCER === '1',
    gatewayLog: (dir) => {
      logFile = path.join(dir, 'gateway.log');
      return createLogger('debug', 'gateway', destination({ dest: logFile, sync: true }));
    },
  });
  project.provide('baseUrl', environment.baseUrl);
  project.provide('mcpUrl', environment.mcpUrl);
  project.provide('databaseUrl', environment.databaseUrl);
  project.provide('jwtSecret', environment.jwtSecret);
  project.provide('publicUrl', environment.config.publicUrl);
  project.provide('logFile', logFile);
  project.provide('testDir', environment.dir);
}

export async function teardown(): Promise<void> {
  await environment?.stop();
}

// A gateway of its own, for the tests of a file that need settings the shared
// test gateway does not have (no job worker, small limits, a trusted proxy):
// another copy of the run's template database (support/environment.ts), started
// before the file's (or the describe block's) tests and stopped after them.
import postgres from 'postgres';
import { afterAll, beforeAll } from 'vitest';
import { databaseServer } from '../helpers.ts';
import { startTestEnvironment, type TestEnvironment } from './environment.ts';

export interface OwnGateway {
  /** The environment (base URL, config, JWT secret); set once the hook has run. */
  readonly env: TestEnvironment;
  /** A superuser connection to its database. */
  readonly sql: postgres.Sql;
}

/** Registers the hooks that start and stop a gateway with `settings` (environment variables). */
export function ownGateway(settings: Record<string, string>): OwnGateway {
  let env: TestEnvironment | undefined;
  let sql: postgres.Sql | undefined;
  beforeAll(async () => {
    env = await startTestEnvironment({ ...databaseServer, env: settings });
    sql = postgres(env.databaseUrl, { max: 2, onnotice: () => {} });
  }, 180_000);
  afterAll(async () => {
    await sql?.end();
    await env?.stop();
  });
  return {
    get env() {
      if (!env) throw new Error('the gateway is not started yet');
      return env;
    },
    get sql() {
      if (!sql) throw new Error('the gateway is not started yet');
      return sql;
    },
  };
}

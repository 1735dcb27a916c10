// Once per test run: a database server (a throwaway embedded Postgres, or the
// server of TEST_DATABASE_URL) holding one migrated template database. Every
// test file that imports test/helpers.ts then gets its own copy of the
// template (CREATE DATABASE … TEMPLATE) and its own gateway and MCP server
// (support/environment.ts), so files run in parallel and never share state.
import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import postgres from 'postgres';
import type { TestProject } from 'vitest/node';
import type {} from 'vitest';
import { createLogger } from '../gateway/core/process/log.ts';
import { ensureDatabase, startEmbeddedPostgres, type RunningPostgres } from '../gateway/core/process/embedded-postgres.ts';
import { freePort } from '../gateway/core/process/free-port.ts';
import { runMigrations } from '../gateway/core/database/migrate.ts';

declare module 'vitest' {
  export interface ProvidedContext {
    /** A URL of the test server (its `postgres` database, or TEST_DATABASE_URL's). */
    testServerUrl: string;
    /** The migrated database each file's database is copied from. */
    testTemplate: string;
    /** The prefix of every database this run makes (`test_<run>_`), so that it can drop what a crashed file left. */
    testDatabasePrefix: string;
    /** The run's temporary folder: each file's environment makes its own folder in it. */
    testRoot: string;
  }
}

let cluster: RunningPostgres | undefined;
let serverUrl: string | undefined;
let template: string | undefined;
let prefix: string | undefined;
let root: string | undefined;

export async function setup(project: TestProject): Promise<void> {
  root = fs.mkdtempSync(path.join(os.tmpdir(), 'community-backend-tests-'));
  fs.chmodSync(root, 0o755);
  const log = createLogger(process.env.TEST_LOG_LEVEL ?? 'warn', 'test-setup');
  if (process.env.TEST_DATABASE_URL) {
    serverUrl = process.env.TEST_DATABASE_URL;
  } else {
    cluster = await startEmbeddedPostgres({
      dir: path.join(root, 'postgres'),
      port: await freePort(),
      persistent: false,
      log,
      // Each parallel file holds a gateway's, an MCP server's, a worker's and its own connections.
      settings: { fsync: 'off', synchronous_commit: 'off', full_page_writes: 'off', max_connections: '1000' },
    });
    serverUrl = cluster.urlFor('postgres');
  }
  prefix = `test_${crypto.randomBytes(3).toString('hex')}_`;
  template = `${prefix}template`;
  await ensureDatabase(serverUrl, template);
  const templateUrl = Object.assign(new URL(serverUrl), { pathname: `/${template}` }).toString();
  await runMigrations(templateUrl, log, { includeCurrent: true });
  // What every gateway start would otherwise do again in each copy.
  const sql = postgres(templateUrl, { max: 1, onnotice: () => {} });
  await sql`select private.time_zones_refresh()`;
  await sql.end();
  project.provide('testServerUrl', serverUrl);
  project.provide('testTemplate', template);
  project.provide('testDatabasePrefix', prefix);
  project.provide('testRoot', root);
}

export async function teardown(): Promise<void> {
  if (serverUrl && prefix && !cluster) {
    // On a server of the caller's (TEST_DATABASE_URL): leave nothing of this run behind.
    const sql = postgres(serverUrl, { max: 1, onnotice: () => {} });
    const left = await sql<{ datname: string }[]>`select datname from pg_database where starts_with(datname, ${prefix})`;
    for (const { datname } of left) await sql`drop database if exists ${sql(datname)} with (force)`;
    await sql.end();
  }
  await cluster?.stop();
  if (root) fs.rmSync(root, { recursive: true, force: true });
}

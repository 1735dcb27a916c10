// The documented recipes, run as written: the deployment on a PostgreSQL 15
// server with no superuser at run time (docs/operations.md#on-any-postgres-15:
// a superuser runs the SQL block once, then the gateway migrates and serves as
// the owner), the backup and restore as the owner
// (docs/operations.md#backup-and-restore), and the curl examples of the
// README's "Run it". A recipe that no longer works fails here.
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { createLogger } from '../../gateway/core/process/log.ts';
import { runMigrations } from '../../gateway/core/database/migrate.ts';
import { pg15Program, startThrowawayPg15 } from '../../gateway/tooling/pg15.ts';
import { baseUrl } from '../helpers.ts';
import { exited, freePort, projectRoot, startGatewayProcess } from '../support/processes.ts';
import { testDir } from '../support/test-dir.ts';

const readme = fs.readFileSync(path.join(projectRoot, 'README.md'), 'utf8');
const operations = fs.readFileSync(path.join(projectRoot, 'docs', 'operations.md'), 'utf8');

/** The first fenced block of `language` after `marker` in docs/operations.md. */
function blockAfter(marker: string, language: string): string {
  const from = operations.indexOf(marker);
  expect(from, `docs/operations.md has ${marker}`).toBeGreaterThan(-1);
  const match = new RegExp('```' + language + '\\n([\\s\\S]*?)```').exec(operations.slice(from));
  expect(match, `a ${language} block after ${marker}`).not.toBeNull();
  return match![1]!;
}

describe.skipIf(!pg15Program('psql'))('deploying on PostgreSQL 15 without a superuser at run time', () => {
  it('the documented recipe: a superuser creates the roles once, the owner migrates and serves', { timeout: 180_000 }, async () => {
    const recipe = blockAfter('<!-- recipe: owner-without-superuser', 'sql');
    const cluster = await startThrowawayPg15();
    try {
      const psql = spawnSync(pg15Program('psql')!, [cluster.url('postgres'), '-v', 'ON_ERROR_STOP=1', '-q', '-f', '-'], { input: recipe, encoding: 'utf8' });
      expect(psql.status, psql.stderr).toBe(0);
      const ownerUrl = cluster.url('app').replace('postgres://postgres@', 'postgres://app_owner:change%20me@');
      // As the owner (no superuser, no CREATEROLE): every migration, then the gateway.
      await runMigrations(ownerUrl, createLogger('silent'), { includeCurrent: true });
      const gw = await startGatewayProcess({ DATABASE_URL: ownerUrl, PORT: String(freePort()), DATA_DIR: path.join(testDir, 'recipe'), JWT_SECRET: 'a-secret-of-at-least-32-characters-long' });
      try {
        expect((await fetch(`${gw.url}/health`)).status).toBe(200);
        const body = JSON.stringify({ email: 'owner-recipe@example.com', password: 'password123' });
        const headers = { 'content-type': 'application/json' };
        expect((await fetch(`${gw.url}/api/auth/register`, { method: 'POST', headers, body })).status).toBe(201);
        const login = await fetch(`${gw.url}/api/auth/login`, { method: 'POST', headers, body });
        expect(login.status).toBe(200);
        const { access_token } = (await login.json()) as { access_token: string };
        // A request runs as `authenticated` (set role): the grant of the recipe.
        const profile = await fetch(`${gw.url}/api/mobile/profile`, { headers: { authorization: `Bearer ${access_token}` } });
        expect(profile.status).toBe(200);
      } finally {
        gw.child.kill('SIGTERM');
        await exited(gw.child);
      }
    } finally {
      cluster.stop();
    }
  });
});

describe.skipIf(!pg15Program('pg_dump'))('backup and restore as the owner, without a superuser', () => {
  it('the documented commands: pg_dump and pg_restore as the owner into a fresh database, and the service runs on it with its data', { timeout: 180_000 }, async () => {
    const roles = blockAfter('<!-- recipe: owner-without-superuser', 'sql');
    const commands = blockAfter('<!-- recipe: backup-restore', 'sh');
    const cluster = await startThrowawayPg15();
    const work = fs.mkdtempSync(path.join(testDir, 'backup-'));
    try {
      const superuser = (sql: string) => {
        const psql = spawnSync(pg15Program('psql')!, [cluster.url('postgres'), '-v', 'ON_ERROR_STOP=1', '-q', '-f', '-'], { input: sql, encoding: 'utf8' });
        expect(psql.status, psql.stderr).toBe(0);
      };
      superuser(roles);
      const owner = (database: string) => cluster.url(database).replace('postgres://postgres@', 'postgres://app_owner:change%20me@');
      await runMigrations(owner('app'), createLogger('silent'), { includeCurrent: true });
      // The same JWT_SECRET and PUBLIC_URL on both sides (the issuer of the access tokens), as the docs say.
      const env = { PORT: String(freePort()), PUBLIC_URL: 'http://localhost:3000', DATA_DIR: path.join(work, 'data'), JWT_SECRET: 'a-secret-of-at-least-32-characters-long' };
      const headers = { 'content-type': 'application/json' };
      const alice = JSON.stringify({ email: 'backup-alice@example.com', password: 'password123' });
      const first = await startGatewayProcess({ ...env, DATABASE_URL: owner('app') });
      let token: string;
      try {
        expect((await fetch(`${first.url}/api/auth/register`, { method: 'POST', headers, body: alice })).status).toBe(201);
        token = ((await (await fetch(`${first.url}/api/auth/login`, { method: 'POST', headers, body: alice })).json()) as { access_token: string }).access_token;
        const task = await fetch(`${first.url}/api/mobile/tasks`, { method: 'POST', headers: { ...headers, authorization: `Bearer ${token}` }, body: JSON.stringify({ title: 'Kept by the backup' }) });
        expect(task.status).toBe(201);
      } finally {
        first.child.kill('SIGTERM');
        await exited(first.child);
      }

      // The fresh database, owned by the owner; then the commands as written, as the owner.
      superuser('create database app_restored owner app_owner;');
      const run = spawnSync('sh', ['-euc', commands], {
        cwd: work,
        env: { ...process.env, PATH: `${path.dirname(pg15Program('pg_dump')!)}:${process.env.PATH}`, DATABASE_URL: owner('app'), RESTORE_URL: owner('app_restored') },
        encoding: 'utf8',
      });
      expect(run.status, run.stderr).toBe(0);

      const restored = await startGatewayProcess({ ...env, PORT: String(freePort()), DATABASE_URL: owner('app_restored') });
      try {
        expect((await fetch(`${restored.url}/health`)).status).toBe(200);
        // Nothing left to migrate, and the data is there: the old access token, the account, its task.
        expect(restored.output()).not.toMatch(/migrations applied/);
        const tasks = await fetch(`${restored.url}/api/mobile/tasks`, { headers: { authorization: `Bearer ${token!}` } });
        expect(tasks.status).toBe(200);
        expect(((await tasks.json()) as { tasks: { meta: { title: string } }[] }).tasks.map((t) => t.meta.title)).toEqual(['Kept by the backup']);
        expect((await fetch(`${restored.url}/api/auth/login`, { method: 'POST', headers, body: alice })).status).toBe(200);
        // And it takes new writes.
        const bob = JSON.stringify({ email: 'backup-bob@example.com', password: 'password123' });
        expect((await fetch(`${restored.url}/api/auth/register`, { method: 'POST', headers, body: bob })).status).toBe(201);
      } finally {
        restored.child.kill('SIGTERM');
        await exited(restored.child);
      }
    } finally {
      cluster.stop();
    }
  });
});

describe("the README's curl examples", () => {
  it('run as written (against this test gateway)', () => {
    const from = readme.indexOf('curl -s localhost:3000/health');
    expect(from, 'README.md has the curl examples').toBeGreaterThan(-1);
    const block = readme.slice(from, readme.indexOf('```', from)).replaceAll('localhost:3000', new URL(baseUrl).host);
    const result = spawnSync('bash', ['-euo', 'pipefail', '-c', block], { encoding: 'utf8' });
    expect(result.status, result.stderr).toBe(0);
    // (curl prints no newline: the answers run together.) The profile and the
    // hat, read and made with the access token the login gave.
    expect(result.stdout).toContain('"email":"ada@example.com"');
    expect(result.stdout).toContain('"name":"At work","hat_type":"professional"');
  });
});

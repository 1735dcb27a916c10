// The documented recipes, run as written: the deployment on a PostgreSQL 15
// server with no superuser at run time (docs/operations.md#on-any-postgres-15:
// a superuser runs the SQL block once, then the gateway migrates and serves as
// the owner), and the curl examples of the README's "Run it". A recipe that no
// longer works fails here.
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { describe, expect, inject, it } from 'vitest';
import { createLogger } from '../../gateway/core/log.ts';
import { runMigrations } from '../../gateway/core/migrate.ts';
import { pg15Program, startThrowawayPg15 } from '../../gateway/tooling/pg15.ts';
import { baseUrl } from '../helpers.ts';
import { exited, freePort, projectRoot, startGatewayProcess } from '../support/processes.ts';

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
      const gw = await startGatewayProcess({ DATABASE_URL: ownerUrl, PORT: String(freePort()), DATA_DIR: path.join(inject('testDir'), 'recipe'), JWT_SECRET: 'a-secret-of-at-least-32-characters-long' });
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

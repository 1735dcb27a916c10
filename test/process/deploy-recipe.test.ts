// The documented recipes, run as written: the deployment on a PostgreSQL 15
// server with no superuser at run time (docs/operations/deploying.md#on-any-postgres-15:
// a superuser runs the SQL block once, then the gateway migrates and serves as
// the owner), the backup and restore as the owner, stored files included
// (docs/operations/backup.md#backup-and-restore: a backup while the service runs,
// restored into a fresh database and an empty data folder, every object then
// downloaded byte for byte), and the curl examples of the README's "Run it".
// A recipe that no longer works fails here.
import { execFile, spawnSync } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';
import sharp from 'sharp';
import { describe, expect, it } from 'vitest';
import { createLogger } from '../../gateway/core/process/log.ts';
import { runMigrations } from '../../gateway/core/database/migrate.ts';
import { pg15Program, startThrowawayPg15 } from '../../gateway/tooling/pg15.ts';
import { baseUrl } from '../helpers.ts';
import { exited, freePort, projectRoot, startGatewayProcess } from '../support/processes.ts';
import { testDir } from '../support/test-dir.ts';

const readme = fs.readFileSync(path.join(projectRoot, 'README.md'), 'utf8');
/** The first fenced block of `language` after `marker` in docs/operations/`page`.md. */
function blockAfter(page: 'deploying' | 'backup', marker: string, language: string): string {
  const doc = fs.readFileSync(path.join(projectRoot, 'docs', 'operations', `${page}.md`), 'utf8');
  const from = doc.indexOf(marker);
  expect(from, `docs/operations/${page}.md has ${marker}`).toBeGreaterThan(-1);
  const match = new RegExp('```' + language + '\\n([\\s\\S]*?)```').exec(doc.slice(from));
  expect(match, `a ${language} block after ${marker}`).not.toBeNull();
  return match![1]!;
}

describe.skipIf(!pg15Program('psql'))('deploying on PostgreSQL 15 without a superuser at run time', () => {
  it('the documented recipe: a superuser creates the roles once, the owner migrates and serves', { timeout: 180_000 }, async () => {
    const recipe = blockAfter('deploying', '<!-- recipe: owner-without-superuser', 'sql');
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

describe.skipIf(!pg15Program('pg_dump'))('backup and restore with the stored files, as the owner', () => {
  it('the documented commands: backup while the service runs, restore into a fresh database and an empty data folder; every object downloads byte for byte', { timeout: 300_000 }, async () => {
    const roles = blockAfter('deploying', '<!-- recipe: owner-without-superuser', 'sql');
    const backupCommands = blockAfter('backup', '<!-- recipe: backup', 'sh');
    const restoreCommands = blockAfter('backup', '<!-- recipe: restore', 'sh');
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
      // The same PUBLIC_URL on both sides; no JWT_SECRET: the generated DATA_DIR/jwt-secret goes with the backup.
      const env = { PORT: String(freePort()), PUBLIC_URL: 'http://localhost:3000' };
      const first = { ...env, DATABASE_URL: owner('app'), DATA_DIR: path.join(work, 'data') };
      const headers = { 'content-type': 'application/json' };
      const alice = JSON.stringify({ email: 'backup-alice@example.com', password: 'password123' });
      const service = await startGatewayProcess(first);
      let token: string;
      let userId: string;
      /** Every object the service stores, as it served it: path → bytes. */
      const stored = new Map<string, Buffer>();
      const backupDir = path.join(work, 'backup');
      let backupRun: ReturnType<typeof spawnSync>;
      try {
        expect((await fetch(`${service.url}/api/auth/register`, { method: 'POST', headers, body: alice })).status).toBe(201);
        const login = (await (await fetch(`${service.url}/api/auth/login`, { method: 'POST', headers, body: alice })).json()) as { access_token: string; user_id: string };
        token = login.access_token;
        userId = login.user_id;
        const auth = { authorization: `Bearer ${token}` };
        const task = await fetch(`${service.url}/api/mobile/tasks`, { method: 'POST', headers: { ...headers, ...auth }, body: JSON.stringify({ title: 'Kept by the backup' }) });
        expect(task.status).toBe(201);
        // 20 files: private attachments of 1 byte to 1 MB, and avatars (images: stored re-encoded, so compared as served).
        const put = async (bucket: string, name: string, body: Buffer, type: string, upsert = false) => {
          const res = await fetch(`${service.url}/storage/v1/object/${bucket}/${userId}/${name}`, {
            method: 'POST',
            headers: { ...auth, 'content-type': type, ...(upsert ? { 'x-upsert': 'true' } : {}) },
            body: new Uint8Array(body),
          });
          expect(res.status, await res.clone().text()).toBe(200);
        };
        for (let i = 0; i < 16; i++) await put('attachments', `doc-${i}.bin`, crypto.randomBytes([1, 100, 65_536, 1_048_576][i % 4]! + i), 'application/octet-stream');
        for (let i = 0; i < 4; i++) {
          const png = await sharp({ create: { width: 64 + i, height: 48, channels: 3, background: { r: 10 * i, g: 80, b: 160 } } }).png().toBuffer();
          await put('avatars', `face-${i}.png`, png, 'image/png');
        }
        // Replaced and deleted before the backup: their old bytes are garbage, not in it.
        await put('attachments', 'doc-0.bin', crypto.randomBytes(2_000), 'application/octet-stream', true);
        const removed = await fetch(`${service.url}/storage/v1/object/attachments/${userId}/doc-1.bin`, { method: 'DELETE', headers: auth });
        expect(removed.status).toBe(200);
        for (const [bucket, prefix, count] of [['attachments', 'doc-', 16], ['avatars', 'face-', 4]] as const) {
          for (let i = 0; i < count; i++) {
            const name = `${bucket}/${userId}/${prefix}${i}.${bucket === 'avatars' ? 'png' : 'bin'}`;
            const res = await fetch(`${service.url}/storage/v1/object/authenticated/${name}`, { headers: auth });
            if (name.endsWith('doc-1.bin')) expect(res.status).toBe(404);
            else stored.set(name, Buffer.from(await res.arrayBuffer()));
          }
        }
        expect(stored.size).toBe(19);

        // The documented backup, as the owner, with the service's configuration, while it runs.
        backupRun = spawnSync('sh', ['-euc', backupCommands], {
          cwd: projectRoot,
          env: { ...process.env, ...first, PATH: `${path.dirname(pg15Program('pg_dump')!)}:${process.env.PATH}`, BACKUP: backupDir },
          encoding: 'utf8',
        });
        expect(backupRun.status, String(backupRun.stderr)).toBe(0);
        expect(String(backupRun.stdout)).toMatch(/backed up into .*: the database \(database\.dump\) and 19 stored files \(\d+ bytes, from fs:.*\), and the generated JWT secret/);
      } finally {
        service.child.kill('SIGTERM');
        await exited(service.child);
      }

      // A fresh database owned by the owner and an empty data folder; then the documented restore.
      superuser('create database app_restored owner app_owner;');
      const second = { ...env, PORT: String(freePort()), DATABASE_URL: owner('app_restored'), DATA_DIR: path.join(work, 'restored') };
      const restoreRun = spawnSync('sh', ['-euc', restoreCommands], {
        cwd: projectRoot,
        env: { ...process.env, ...second, PATH: `${path.dirname(pg15Program('pg_dump')!)}:${process.env.PATH}`, BACKUP: backupDir },
        encoding: 'utf8',
      });
      expect(restoreRun.status, restoreRun.stderr).toBe(0);
      expect(restoreRun.stdout).toMatch(/restored 19 stored files into fs:.*restored.* and the database of .* into .*app_restored.*, and the generated JWT secret into/);
      // Restoring again is refused: the database is no longer empty.
      const again = spawnSync('sh', ['-euc', restoreCommands], { cwd: projectRoot, env: { ...process.env, ...second, BACKUP: backupDir }, encoding: 'utf8' });
      expect(again.status).toBe(1);
      expect(again.stderr).toMatch(/is not empty/);

      const restored = await startGatewayProcess(second);
      try {
        expect((await fetch(`${restored.url}/health`)).status).toBe(200);
        // Nothing left to migrate, and the data is there: the old access token, the account, its task.
        expect(restored.output()).not.toMatch(/migrations applied/);
        const auth = { authorization: `Bearer ${token!}` };
        const tasks = await fetch(`${restored.url}/api/mobile/tasks`, { headers: auth });
        expect(tasks.status).toBe(200);
        expect(((await tasks.json()) as { tasks: { meta: { title: string } }[] }).tasks.map((t) => t.meta.title)).toEqual(['Kept by the backup']);
        expect((await fetch(`${restored.url}/api/auth/login`, { method: 'POST', headers, body: alice })).status).toBe(200);
        // Every object, byte for byte; the deleted one stays deleted.
        for (const [name, bytes] of stored) {
          const res = await fetch(`${restored.url}/storage/v1/object/authenticated/${name}`, { headers: auth });
          expect(res.status, name).toBe(200);
          expect(Buffer.from(await res.arrayBuffer()).equals(bytes), name).toBe(true);
        }
        expect((await fetch(`${restored.url}/storage/v1/object/authenticated/attachments/${userId!}/doc-1.bin`, { headers: auth })).status).toBe(404);
        // And it takes new writes, files included.
        const bob = JSON.stringify({ email: 'backup-bob@example.com', password: 'password123' });
        expect((await fetch(`${restored.url}/api/auth/register`, { method: 'POST', headers, body: bob })).status).toBe(201);
        const upload = await fetch(`${restored.url}/storage/v1/object/attachments/${userId!}/after.txt`, { method: 'POST', headers: { ...auth, 'content-type': 'text/plain' }, body: 'after' });
        expect(upload.status).toBe(200);
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
  it('run as written (against this test gateway)', async () => {
    const from = readme.indexOf('curl -s localhost:3000/health');
    expect(from, 'README.md has the curl examples').toBeGreaterThan(-1);
    const block = readme.slice(from, readme.indexOf('```', from)).replaceAll('localhost:3000', new URL(baseUrl).host);
    // Asynchronous: the gateway serves from this process, which a
    // synchronous spawn would block (curl would wait for ever).
    const result = await promisify(execFile)('bash', ['-euo', 'pipefail', '-c', block], { encoding: 'utf8', timeout: 60_000 });
    // (curl prints no newline: the answers run together.) The profile and the
    // hat, read and made with the access token the login gave.
    expect(result.stdout).toContain('"email":"ada@example.com"');
    expect(result.stdout).toContain('"name":"At work","hat_type":"professional"');
  });
});

// A full storage volume, for real: STORAGE_DIR on a 24 MB tmpfs mounted
// here (as root; skipped with a message where mounting is not possible),
// filled to the brim. Uploads are answered 507 storage_full (a raw body, a
// form as supabase-js sends a Blob, an image), with one warning line and no
// stack in the log; downloads go on; the storage gauges say so. Deleting an
// object frees nothing at once (its bytes wait 10 minutes for downloads
// under way); `npm run admin -- storage-collect --now` has the job worker
// delete them at once, and the next upload is stored.
//
// Its own database on the test server: the test gateway's job workers have
// another STORAGE_DIR and must not collect this volume's garbage.
import { spawnSync } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import postgres from 'postgres';
import sharp from 'sharp';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ensureDatabase } from '../../gateway/core/process/embedded-postgres.ts';
import { createLogger } from '../../gateway/core/process/log.ts';
import { runMigrations } from '../../gateway/core/database/migrate.ts';
import { databaseUrl as testDatabaseUrl } from '../helpers.ts';
import { checkContract } from '../support/contract.ts';
import { exited, freePort, projectRoot, startGatewayProcess, waitUntil, type GatewayProcess } from '../support/processes.ts';
import { testDir } from '../support/test-dir.ts';

const dir = path.join(testDir, `storage-full-${crypto.randomBytes(3).toString('hex')}`);
const volume = path.join(dir, 'volume');
const VOLUME_BYTES = 24 * 1024 * 1024;

/** Mounts a small tmpfs on `volume`: as root only. Why not, when it cannot. */
function mountVolume(): string | null {
  if (process.getuid?.() !== 0) return 'not root: a file system of its own cannot be mounted';
  fs.mkdirSync(volume, { recursive: true });
  const mounted = spawnSync('mount', ['-t', 'tmpfs', '-o', `size=${VOLUME_BYTES},mode=0755`, 'tmpfs', volume], { encoding: 'utf8' });
  return mounted.status === 0 ? null : `mount -t tmpfs failed: ${(mounted.stderr || mounted.error?.message || '').trim()}`;
}

const cannotMount = mountVolume();
if (cannotMount) console.log(`skipped: a full storage volume needs a tmpfs of its own (${cannotMount})`);

const database = `storage_full_${crypto.randomBytes(4).toString('hex')}`;
const serverUrl = Object.assign(new URL(testDatabaseUrl), { pathname: '/postgres' }).toString();
const databaseUrl = Object.assign(new URL(testDatabaseUrl), { pathname: `/${database}` }).toString();
let gateway: GatewayProcess;
let adminPort: number;
let token: string;
let userId: string;

beforeAll(async () => {
  if (cannotMount) return;
  await ensureDatabase(serverUrl, database);
  await runMigrations(databaseUrl, createLogger('silent'), { includeCurrent: true });
  adminPort = freePort();
  gateway = await startGatewayProcess({
    DATABASE_URL: databaseUrl,
    PORT: String(freePort()),
    ADMIN_PORT: String(adminPort),
    DATA_DIR: dir,
    STORAGE_DIR: volume,
    JWT_SECRET: crypto.randomBytes(32).toString('hex'),
  });
  const credentials = JSON.stringify({ email: `full-${crypto.randomBytes(4).toString('hex')}@example.com`, password: 'password-full' });
  const json = { 'content-type': 'application/json' };
  const registered = await fetch(`${gateway.url}/api/auth/register`, { method: 'POST', headers: json, body: credentials });
  expect(registered.status).toBe(201);
  userId = ((await registered.json()) as { user_id: string }).user_id;
  const login = await fetch(`${gateway.url}/api/auth/login`, { method: 'POST', headers: json, body: credentials });
  token = ((await login.json()) as { access_token: string }).access_token;
}, 180_000);

afterAll(async () => {
  if (cannotMount) return;
  if (gateway) {
    gateway.child.kill('SIGTERM');
    await exited(gateway.child);
  }
  spawnSync('umount', [volume]);
  const sql = postgres(serverUrl, { max: 1, onnotice: () => {} });
  await sql`drop database if exists ${sql(database)} with (force)`.catch(() => {});
  await sql.end();
});

/** An upload of `body` (raw, with its type, or a form) to `bucket`/`name`; the answer checked against the OpenAPI document. */
async function upload(bucket: string, name: string, body: Buffer | FormData, type = 'application/octet-stream') {
  const urlPath = `/storage/v1/object/${bucket}/${name}`;
  const res = await fetch(gateway.url + urlPath, {
    method: 'POST',
    headers: { authorization: `Bearer ${token}`, ...(body instanceof FormData ? {} : { 'content-type': type }) },
    body: body instanceof FormData ? body : new Uint8Array(body),
  });
  const text = await res.text();
  const json = text ? JSON.parse(text) : undefined;
  await checkContract(gateway.url, 'POST', urlPath, res.status, res.headers.get('content-type'), json);
  return { status: res.status, body: json };
}

async function metric(name: string, labels = ''): Promise<number> {
  const text = await (await fetch(`http://127.0.0.1:${adminPort}/metrics`)).text();
  const line = text.split('\n').find((l) => l.startsWith(name) && l.includes(labels));
  return Number(line?.slice(line.lastIndexOf(' ') + 1) ?? NaN);
}

const free = () => fs.statfsSync(volume).bavail * fs.statfsSync(volume).bsize;
const FULL = { statusCode: '507', error: 'InsufficientStorage', code: 'storage_full', message: 'the storage volume is full: the file was not stored; try again later' };

describe.skipIf(cannotMount !== null)('a full storage volume (STORAGE_DIR on a 24 MB tmpfs)', () => {
  it('uploads are 507 storage_full with no stack in the log; downloads go on; storage-collect --now frees deleted bytes at once', { timeout: 180_000 }, async () => {
    const kept = crypto.randomBytes(6 * 1024 * 1024);
    expect((await upload('attachments', `${userId}/kept.bin`, kept)).status).toBe(200);
    const doomed = crypto.randomBytes(6 * 1024 * 1024);
    expect((await upload('attachments', `${userId}/doomed.bin`, doomed)).status).toBe(200);

    // The rest of the volume taken by something else, to the last block.
    const filler = fs.openSync(path.join(volume, 'filler'), 'w');
    const chunk = Buffer.alloc(64 * 1024, 1);
    try {
      for (;;) fs.writeSync(filler, chunk);
    } catch (err) {
      expect((err as NodeJS.ErrnoException).code).toBe('ENOSPC');
    }
    for (const size of [4096, 512, 1]) {
      try {
        for (;;) fs.writeSync(filler, Buffer.alloc(size, 1));
      } catch {
        // full at this grain too
      }
    }
    fs.closeSync(filler);
    expect(free()).toBe(0);

    const file = crypto.randomBytes(2 * 1024 * 1024);
    // A raw body, a form (supabase-js's Blob), an image (written to a temporary file first).
    expect(await upload('attachments', `${userId}/raw.bin`, file)).toEqual({ status: 507, body: FULL });
    const form = new FormData();
    form.append('cacheControl', '3600');
    form.append('', new Blob([file], { type: 'application/octet-stream' }), 'form.bin');
    expect(await upload('attachments', `${userId}/form.bin`, form)).toEqual({ status: 507, body: FULL });
    const png = await sharp({ create: { width: 600, height: 600, channels: 3, background: '#808080', noise: { type: 'gaussian', mean: 128, sigma: 60 } } }).png().toBuffer();
    expect(await upload('avatars', `${userId}/me.png`, png, 'image/png')).toEqual({ status: 507, body: FULL });
    // Nothing of them is visible.
    const list = await fetch(`${gateway.url}/storage/v1/object/list/attachments`, {
      method: 'POST',
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
      body: JSON.stringify({ prefix: userId }),
    });
    expect(((await list.json()) as { name: string }[]).map((o) => o.name).sort()).toEqual(['doomed.bin', 'kept.bin']);

    // Downloads go on.
    const download = await fetch(`${gateway.url}/storage/v1/object/authenticated/attachments/${userId}/kept.bin`, { headers: { authorization: `Bearer ${token}` } });
    expect(download.status).toBe(200);
    expect(Buffer.from(await download.arrayBuffer()).equals(kept)).toBe(true);

    // The log (written in blocks, flushed within 250 ms): one warning line per refusal, no stack, no internal_error.
    const refusals = () => gateway.output().match(/storage volume full: upload refused \(507\)/g)?.length ?? 0;
    await waitUntil(() => refusals() >= 3, 10_000, 'the three warning lines');
    const output = gateway.output();
    expect(refusals()).toBe(3);
    expect(output).not.toMatch(/\n\s+at /);
    expect(output).not.toMatch(/"level":50/);
    // The gauges an alert reads.
    expect(await metric('storage_volume_free_bytes')).toBe(0);
    expect(await metric('storage_volume_size_bytes')).toBe(VOLUME_BYTES);
    expect(await metric('http_server_request_duration_seconds_count', 'http_response_status_code="507"')).toBe(3);

    // Deleting an object frees nothing yet: its bytes wait for downloads under way.
    const removed = await fetch(`${gateway.url}/storage/v1/object/attachments/${userId}/doomed.bin`, { method: 'DELETE', headers: { authorization: `Bearer ${token}` } });
    expect(removed.status).toBe(200);
    expect((await upload('attachments', `${userId}/raw.bin`, file)).status).toBe(507);

    // Reclaimed at once.
    const collect = spawnSync(process.execPath, ['--import', 'tsx', 'gateway/tooling/admin.ts', 'storage-collect', '--now'], {
      cwd: projectRoot,
      env: { ...process.env, DATABASE_URL: databaseUrl, DATA_DIR: dir, STORAGE_DIR: volume },
      encoding: 'utf8',
    });
    expect(collect.status, collect.stderr).toBe(0);
    // (The deleted object's key, and those of the refused uploads, which are due at once anyway.)
    expect(collect.stderr).toMatch(/^database: .*\(DATABASE_URL\)$/m);
    expect(Number(/^(\d+) byte-store keys collected, 0 left/.exec(collect.stdout)?.[1])).toBeGreaterThanOrEqual(1);
    expect(free()).toBeGreaterThanOrEqual(doomed.length);
    expect((await upload('attachments', `${userId}/raw.bin`, file)).status).toBe(200);
    const stored = await fetch(`${gateway.url}/storage/v1/object/authenticated/attachments/${userId}/raw.bin`, { headers: { authorization: `Bearer ${token}` } });
    expect(Buffer.from(await stored.arrayBuffer()).equals(file)).toBe(true);
  });
});

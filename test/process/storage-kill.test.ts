// A gateway process killed (SIGKILL) in the middle of an upload: no object
// appears, the upload it registered expires, and the storage_collect job of
// another process (the test gateway's, sharing the byte store as replicas
// do) collects what the killed one left: its registration and its half
// written temporary file.
import crypto from 'node:crypto';
import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { dataDir, databaseUrl, db, jwtSecret, uniqueEmail } from '../helpers.ts';
import { exited, freePort, startGatewayProcess, waitUntil } from '../support/processes.ts';
import { eventually } from '../support/wait.ts';
import { testDir } from '../support/test-dir.ts';

// The test gateway's byte store (DATA_DIR/storage), which its collector sweeps.
const storageDir = path.join(dataDir, 'storage');

async function collect(): Promise<void> {
  const [job] = await db()`select (graphile_worker.add_job('storage_collect', '{}'::json)).id`;
  await eventually('the storage_collect job to run', async () => {
    const [row] = await db()`select count(*)::int as n from graphile_worker.jobs where id = ${job!.id}`;
    return row!.n === 0;
  }, 20_000);
}

describe('a gateway killed mid-upload', () => {
  it('leaves no visible object, and what it left is collected', { timeout: 180_000 }, async () => {
    const gateway = await startGatewayProcess({
      DATABASE_URL: databaseUrl,
      PORT: String(freePort()),
      DATA_DIR: path.join(testDir, `kill-upload-${crypto.randomBytes(3).toString('hex')}`),
      STORAGE_DIR: storageDir,
      JWT_SECRET: jwtSecret,
      WORKER: 'off',
      WEB_CONCURRENCY: '1',
      // The suite registers far more than the default 100 accounts per address in this database.
      PASSWORD_SET_MAX_PER_IP: '1000000',
    });
    const email = uniqueEmail('kill-up');
    const register = await fetch(`${gateway.url}/api/auth/register`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ email, password: 'password-kill' }) });
    expect(register.status).toBe(201);
    const userId = ((await register.json()) as { user_id: string }).user_id;
    const login = await fetch(`${gateway.url}/api/auth/login`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ email, password: 'password-kill' }) });
    expect(login.status).toBe(200);
    const token = ((await login.json()) as { access_token: string }).access_token;
    const name = `${userId}/killed.bin`;

    const url = new URL(`${gateway.url}/storage/v1/object/attachments/${name}`);
    const socket = net.connect(Number(url.port), url.hostname);
    socket.on('error', () => {});
    let answered = '';
    socket.on('data', (chunk: Buffer) => (answered += chunk.toString()));
    await new Promise((resolve) => socket.once('connect', resolve));
    socket.write(
      `POST ${url.pathname} HTTP/1.1\r\nHost: ${url.host}\r\nAuthorization: Bearer ${token}\r\n` +
        `Content-Type: application/octet-stream\r\nContent-Length: ${20 * 1024 * 1024}\r\n\r\n`,
    );
    socket.write(Buffer.alloc(4 * 1024 * 1024, 9));
    // The upload is registered and its bytes are being written.
    const [upload] = await eventually('the upload to be registered', async () => {
      if (answered) throw new Error(`the gateway answered before the body ended: ${answered.slice(0, 300)}`);
      const rows = await db()`select id, storage_key from app.storage_uploads where name = ${name}`;
      return rows.length > 0 ? rows : undefined;
    }, 60_000);
    const tmp = path.join(storageDir, 'tmp');
    await waitUntil(() => fs.readdirSync(tmp).some((f) => f.endsWith('.part') && fs.statSync(path.join(tmp, f)).size > 0), 20_000, 'bytes written');
    const before = new Set(fs.readdirSync(tmp));

    gateway.child.kill('SIGKILL');
    await exited(gateway.child);
    socket.destroy();

    // Nothing visible.
    const [objects] = await db()`select count(*)::int as n from app.storage_objects where name = ${name}`;
    expect(objects!.n).toBe(0);
    expect(fs.existsSync(path.join(storageDir, upload!.storage_key as string))).toBe(false);
    const leftovers = fs.readdirSync(tmp).filter((f) => f.endsWith('.part') && before.has(f));
    expect(leftovers.length).toBeGreaterThan(0);

    // An hour later (its expiry) and a day later (a temporary file's age), the collector cleans up.
    await db()`update app.storage_uploads set expires_at = now() - interval '1 second' where id = ${upload!.id}`;
    const old = new Date(Date.now() - 2 * 24 * 3600 * 1000);
    for (const f of leftovers) fs.utimesSync(path.join(tmp, f), old, old);
    await collect();
    const [pending] = await db()`select count(*)::int as n from app.storage_uploads where id = ${upload!.id}`;
    expect(pending!.n).toBe(0);
    const [garbage] = await db()`select count(*)::int as n from app.storage_garbage where storage_key = ${upload!.storage_key}`;
    expect(garbage!.n).toBe(0);
    for (const f of leftovers) expect(fs.existsSync(path.join(tmp, f))).toBe(false);
  });
});

// Storage limits and faults over HTTP: the per-user quota (413) and upload
// rate (429 with Retry-After), counted in SQL; an upload cut off half-way
// leaves no object and its bytes are collected; deleted and replaced
// objects' bytes are collected by the storage_collect job (after the grace
// period for downloads under way); an account's objects go with it
// (storage_purge). Parallel uploads cannot pass the quota together.
import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { baseUrl, dataDir, db, registerUser } from '../helpers.ts';
import { storageClient } from '../support/storage.ts';
import { eventually } from '../support/wait.ts';

const storedFile = (key: string) => path.join(dataDir, 'storage', key);

/** Runs the storage_collect job now (the test gateway's worker takes it at once). */
async function collect(): Promise<void> {
  const [job] = await db()`select (graphile_worker.add_job('storage_collect', '{}'::json)).id`;
  await eventually('the storage_collect job to run', async () => {
    const [row] = await db()`select count(*)::int as n from graphile_worker.jobs where id = ${job!.id}`;
    return row!.n === 0;
  }, 20_000);
}

describe('quota and upload rate', () => {
  it('past the quota: 413 quota_exceeded, before and after the bytes; parallel uploads cannot pass it together', async () => {
    const user = await registerUser('q-quota');
    await db()`select admin.storage_set_limits(${user.email}, 1000, 1000)`;
    const files = storageClient(baseUrl, user.accessToken).from('attachments');
    expect((await files.upload(`${user.userId}/a.bin`, Buffer.alloc(600))).error).toBeNull();
    const over = await files.upload(`${user.userId}/b.bin`, Buffer.alloc(600));
    expect(over.error).toMatchObject({ status: 413, statusCode: '413', message: expect.stringContaining('quota') });
    // A stream of unknown length: refused at the finish, nothing kept.
    const streamed = await fetch(`${baseUrl}/storage/v1/object/attachments/${user.userId}/c.bin`, {
      method: 'POST',
      headers: { authorization: `Bearer ${user.accessToken}`, 'content-type': 'application/octet-stream' },
      body: new ReadableStream({ start: (c) => (c.enqueue(new Uint8Array(600)), c.close()) }),
      duplex: 'half',
    } as RequestInit);
    expect(streamed.status).toBe(413);
    expect((await streamed.json()).code).toBe('quota_exceeded');

    // 10 uploads of 150 bytes at once into the 400 bytes left: at most 2 fit.
    const results = await Promise.all(
      Array.from({ length: 10 }, (_, i) =>
        fetch(`${baseUrl}/storage/v1/object/attachments/${user.userId}/p${i}.bin`, {
          method: 'POST',
          headers: { authorization: `Bearer ${user.accessToken}`, 'content-type': 'application/octet-stream' },
          body: new Uint8Array(150),
        }).then((r) => r.status),
      ),
    );
    expect(results.filter((s) => s === 200).length).toBe(2);
    expect(results.filter((s) => s === 413).length).toBe(8);
    const [usage] = await db()`select bytes::int from app.storage_usage where user_id = ${user.userId}`;
    expect(usage!.bytes).toBe(900);
  });

  it('past the uploads per minute: 429 too_many_uploads with Retry-After', async () => {
    const user = await registerUser('q-rate');
    await db()`select admin.storage_set_limits(${user.email}, null, 3)`;
    const files = storageClient(baseUrl, user.accessToken).from('attachments');
    for (let i = 0; i < 3; i++) expect((await files.upload(`${user.userId}/${i}.txt`, Buffer.from('x'))).error).toBeNull();
    const res = await fetch(`${baseUrl}/storage/v1/object/attachments/${user.userId}/3.txt`, {
      method: 'POST',
      headers: { authorization: `Bearer ${user.accessToken}`, 'content-type': 'text/plain' },
      body: 'x',
    });
    expect(res.status).toBe(429);
    // The minute's remaining seconds, from the SQL refusal's DETAIL (not the 1 s a 429 gets without one).
    const retryAfter = Number(res.headers.get('retry-after'));
    expect(retryAfter).toBeGreaterThanOrEqual(30);
    expect(retryAfter).toBeLessThanOrEqual(60);
    expect(await res.json()).toMatchObject({ statusCode: '429', error: 'too_many_requests', code: 'too_many_uploads' });
  });
});

describe('faults', () => {
  it('an upload cut off half-way leaves no object; its bytes are collected', async () => {
    const user = await registerUser('f-cut');
    const name = `${user.userId}/cut.bin`;
    const url = new URL(`${baseUrl}/storage/v1/object/attachments/${name}`);
    // Announces 2 MB, sends 1 MB, and hangs up.
    await new Promise<void>((resolve, reject) => {
      const socket = net.connect(Number(url.port), url.hostname, () => {
        socket.write(
          `POST ${url.pathname} HTTP/1.1\r\nHost: ${url.host}\r\nAuthorization: Bearer ${user.accessToken}\r\n` +
            `Content-Type: application/octet-stream\r\nContent-Length: ${2 * 1024 * 1024}\r\n\r\n`,
        );
        socket.write(Buffer.alloc(1024 * 1024, 7), () => setTimeout(() => (socket.destroy(), resolve()), 300));
      });
      socket.on('error', reject);
    });
    // Given up (aborted), not left to expire.
    await eventually('the cut-off upload to be given up', async () => {
      const [pending] = await db()`select count(*)::int as n from app.storage_uploads where name = ${name}`;
      return pending!.n === 0;
    });
    expect((await storageClient(baseUrl, user.accessToken).from('attachments').exists(name)).data).toBe(false);
    const [objects] = await db()`select count(*)::int as n from app.storage_objects where name = ${name}`;
    expect(objects!.n).toBe(0);
    await collect();
    const [left] = await db()`select count(*)::int as n from app.storage_garbage where collect_after <= now()`;
    expect(left!.n).toBe(0);
    // Nothing of it in the byte store: no object file, no temporary file left behind.
    const files = fs.readdirSync(path.join(dataDir, 'storage', 'objects'));
    const known = new Set((await db()`select storage_key from app.storage_objects union select storage_key from app.storage_garbage union select storage_key from app.storage_uploads`).map((r) => String(r.storage_key).replace('objects/', '')));
    expect(files.filter((f) => !known.has(f))).toEqual([]);
  });

  it('a deleted or replaced object\'s bytes are collected after the grace period; their transformations too', async () => {
    const user = await registerUser('f-gc');
    const files = storageClient(baseUrl, user.accessToken).from('attachments');
    await files.upload(`${user.userId}/gone.txt`, Buffer.from('soon gone'));
    await files.upload(`${user.userId}/kept.txt`, Buffer.from('first'));
    const keys = await db()`select name, storage_key from app.storage_objects where owner_id = ${user.userId} order by name`;
    const gone = keys.find((k) => String(k.name).endsWith('gone.txt'))!.storage_key as string;
    const first = keys.find((k) => String(k.name).endsWith('kept.txt'))!.storage_key as string;
    await files.remove([`${user.userId}/gone.txt`]);
    await files.update(`${user.userId}/kept.txt`, Buffer.from('second'));
    expect(fs.existsSync(storedFile(gone))).toBe(true);
    expect(fs.existsSync(storedFile(first))).toBe(true);
    // Within the grace period: kept (a download may be reading them).
    await collect();
    expect(fs.existsSync(storedFile(gone))).toBe(true);
    await db()`update app.storage_garbage set collect_after = now() where storage_key in (${gone}, ${first})`;
    await collect();
    expect(fs.existsSync(storedFile(gone))).toBe(false);
    expect(fs.existsSync(storedFile(first))).toBe(false);
    expect(await (await files.download(`${user.userId}/kept.txt`)).data!.text()).toBe('second');
  });

  it("deleting an account deletes its objects (storage_purge), then their bytes", async () => {
    const user = await registerUser('f-purge');
    const storage = storageClient(baseUrl, user.accessToken);
    await storage.from('attachments').upload(`${user.userId}/doc.txt`, Buffer.from('mine'));
    const { png } = await import('../support/storage.ts');
    await storage.from('avatars').upload(`${user.userId}/me.png`, await png(4, 4), { contentType: 'image/png' });
    const keys = (await db()`select storage_key from app.storage_objects where owner_id = ${user.userId}`).map((r) => r.storage_key as string);
    expect(keys).toHaveLength(2);
    await db()`delete from identity.users where id = ${user.userId}`;
    await eventually('the purge of the account\'s objects', async () => {
      const [row] = await db()`select count(*)::int as n from app.storage_objects where name like ${`${user.userId}/%`}`;
      return row!.n === 0;
    }, 20_000);
    await db()`update app.storage_garbage set collect_after = now() where storage_key = any(${keys})`;
    await collect();
    for (const key of keys) expect(fs.existsSync(storedFile(key))).toBe(false);
  });
});

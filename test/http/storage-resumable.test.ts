// Resumable uploads with tus-js-client, as Supabase documents them: the
// upload is cut off after its first chunk (nothing visible yet), resumed
// from its offset by a new client (HEAD, then PATCH), and ends as one object
// with the same bytes; its staging is gone. Another user cannot see or
// continue it; an image sent this way is checked and stripped like any other.
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import exifr from 'exifr';
import * as tus from 'tus-js-client';
import { describe, expect, it } from 'vitest';
import { baseUrl, dataDir, db, registerUser, type TestUser } from '../helpers.ts';
import { phonePhoto, storageClient } from '../support/storage.ts';

const endpoint = `${baseUrl}/storage/v1/upload/resumable`;

interface Options {
  user: TestUser;
  bucket: string;
  name: string;
  contentType?: string;
  chunkSize?: number;
  uploadUrl?: string;
  /** Stop after this many chunks. */
  stopAfter?: number;
}

/** Runs (part of) an upload; resolves with its URL when it succeeds or is stopped. */
function run(data: Buffer, options: Options): Promise<{ url: string; done: boolean }> {
  return new Promise((resolve, reject) => {
    let chunks = 0;
    const upload: tus.Upload = new tus.Upload(data, {
      endpoint,
      uploadUrl: options.uploadUrl,
      retryDelays: [],
      headers: { authorization: `Bearer ${options.user.accessToken}`, 'x-upsert': 'true' },
      uploadDataDuringCreation: true,
      removeFingerprintOnSuccess: true,
      metadata: { bucketName: options.bucket, objectName: options.name, contentType: options.contentType ?? 'application/octet-stream', cacheControl: '3600' },
      chunkSize: options.chunkSize ?? 256 * 1024,
      onChunkComplete: () => {
        chunks++;
        if (options.stopAfter !== undefined && chunks >= options.stopAfter) {
          void upload.abort().then(() => resolve({ url: upload.url!, done: false }));
        }
      },
      onError: reject,
      onSuccess: () => resolve({ url: upload.url!, done: true }),
    });
    upload.start();
  });
}

describe('resumable uploads (TUS) with tus-js-client', () => {
  it('an upload cut off after a chunk resumes from its offset and ends as one object', async () => {
    const user = await registerUser('tus-ann');
    const data = crypto.randomBytes(700 * 1024);
    const name = `${user.userId}/big.bin`;
    const first = await run(data, { user, bucket: 'attachments', name, stopAfter: 1 });
    expect(first.done).toBe(false);
    expect(first.url).toMatch(new RegExp(`^${endpoint}/[0-9a-f-]{36}$`));
    const id = first.url.split('/').pop()!;

    // Nothing visible yet; the upload is registered, its first chunk staged.
    expect((await storageClient(baseUrl, user.accessToken).from('attachments').exists(name)).data).toBe(false);
    const head = await fetch(first.url, { method: 'HEAD', headers: { authorization: `Bearer ${user.accessToken}`, 'tus-resumable': '1.0.0' } });
    expect(head.status).toBe(200);
    expect(head.headers.get('upload-offset')).toBe(String(256 * 1024));
    expect(head.headers.get('upload-length')).toBe(String(data.length));

    // Another client (the app restarted) resumes with the URL.
    const second = await run(data, { user, bucket: 'attachments', name, uploadUrl: first.url });
    expect(second.done).toBe(true);
    const down = await storageClient(baseUrl, user.accessToken).from('attachments').download(name);
    expect(Buffer.from(await down.data!.arrayBuffer()).equals(data)).toBe(true);
    const [row] = await db()`select count(*)::int as n from app.storage_uploads where id = ${id}`;
    expect(row!.n).toBe(0);
    expect(fs.existsSync(path.join(dataDir, 'storage', 'tus', id))).toBe(false);
  });

  it("another user's upload is not there for them; without a credential, 401", async () => {
    const owner = await registerUser('tus-own');
    const other = await registerUser('tus-oth');
    const data = crypto.randomBytes(300 * 1024);
    const cut = await run(data, { user: owner, bucket: 'attachments', name: `${owner.userId}/x.bin`, stopAfter: 1 });
    for (const method of ['HEAD', 'PATCH', 'DELETE']) {
      const res = await fetch(cut.url, {
        method,
        headers: { authorization: `Bearer ${other.accessToken}`, 'tus-resumable': '1.0.0', 'upload-offset': String(256 * 1024), 'content-type': 'application/offset+octet-stream' },
        body: method === 'PATCH' ? new Uint8Array(data.subarray(256 * 1024)) : undefined,
      });
      expect([method, res.status]).toEqual([method, 404]);
      if (method !== 'HEAD') expect(await res.json()).toMatchObject({ statusCode: '404', code: 'upload_not_found' });
    }
    const anonymous = await fetch(cut.url, { method: 'HEAD', headers: { 'tus-resumable': '1.0.0' } });
    expect(anonymous.status).toBe(401);
    // Nor may they start one in the owner's folder.
    await expect(run(data, { user: other, bucket: 'attachments', name: `${owner.userId}/planted.bin` })).rejects.toThrow(/403/);
    // The owner cancels it: gone.
    const cancel = await fetch(cut.url, { method: 'DELETE', headers: { authorization: `Bearer ${owner.accessToken}`, 'tus-resumable': '1.0.0' } });
    expect(cancel.status).toBe(204);
    const after = await fetch(cut.url, { method: 'HEAD', headers: { authorization: `Bearer ${owner.accessToken}`, 'tus-resumable': '1.0.0' } });
    expect(after.status).toBe(404);
  });

  it('an image sent this way is checked and stored without its metadata', async () => {
    const user = await registerUser('tus-img');
    const photo = await phonePhoto(64, 32);
    const done = await run(photo, { user, bucket: 'avatars', name: `${user.userId}/photo.jpg`, contentType: 'image/jpeg', chunkSize: 1024 });
    expect(done.done).toBe(true);
    const stored = Buffer.from(await (await storageClient(baseUrl, user.accessToken).from('avatars').download(`${user.userId}/photo.jpg`)).data!.arrayBuffer());
    expect(await exifr.parse(stored, { gps: true })).toBeUndefined();
    // A refused image is answered as the refusal, in Supabase Storage's body, on the last chunk.
    await expect(
      run(Buffer.from('<svg xmlns="http://www.w3.org/2000/svg"><script>alert(1)</script></svg>'), { user, bucket: 'avatars', name: `${user.userId}/x.svg`, contentType: 'image/svg+xml' }),
    ).rejects.toThrow(/svg_not_allowed/);
  });
});

/** A TUS creation request as any client sends it (no body: creation alone). */
async function create(user: TestUser, name: string, length: number, bucket = 'attachments'): Promise<Response> {
  const meta = (k: string, v: string) => `${k} ${Buffer.from(v).toString('base64')}`;
  return fetch(endpoint, {
    method: 'POST',
    headers: {
      authorization: `Bearer ${user.accessToken}`,
      'tus-resumable': '1.0.0',
      'upload-length': String(length),
      'upload-metadata': [meta('bucketName', bucket), meta('objectName', name), meta('contentType', 'application/octet-stream')].join(','),
    },
  });
}

/** Sends `data` at `offset` of an upload (a PATCH). */
function patch(user: TestUser, url: string, offset: number, data: Buffer): Promise<Response> {
  return fetch(url, {
    method: 'PATCH',
    headers: {
      authorization: `Bearer ${user.accessToken}`,
      'tus-resumable': '1.0.0',
      'upload-offset': String(offset),
      'content-type': 'application/offset+octet-stream',
    },
    body: new Uint8Array(data),
  });
}

const staging = path.join(dataDir, 'storage', 'tus');
/** Bytes staged for these uploads (their data files). */
const stagedBytes = (ids: string[]) => ids.reduce((sum, id) => sum + (fs.existsSync(path.join(staging, id)) ? fs.statSync(path.join(staging, id)).size : 0), 0);
const idOf = (res: Response) => res.headers.get('location')!.split('/').pop()!;

describe('creation-with-upload: a file smaller than a chunk, sent whole in the creation (security review round 5)', () => {
  it('is stored and answered 201 with Upload-Offset; tus-js-client succeeds (5 bytes, 200 KB)', async () => {
    const user = await registerUser('tus-small');
    for (const size of [5, 200 * 1024]) {
      const data = crypto.randomBytes(size);
      const name = `${user.userId}/small-${size}.bin`;
      const answers: { status: number; offset: string | null }[] = [];
      const done = await new Promise<{ url: string }>((resolve, reject) => {
        const upload: tus.Upload = new tus.Upload(data, {
          endpoint,
          retryDelays: [],
          headers: { authorization: `Bearer ${user.accessToken}`, 'x-upsert': 'true' },
          uploadDataDuringCreation: true,
          removeFingerprintOnSuccess: true,
          metadata: { bucketName: 'attachments', objectName: name, contentType: 'application/octet-stream', cacheControl: '3600' },
          chunkSize: 6 * 1024 * 1024,
          onAfterResponse: (req, res) => {
            if (req.getMethod() === 'POST') answers.push({ status: res.getStatus(), offset: res.getHeader('Upload-Offset') ?? null });
          },
          onError: reject,
          onSuccess: () => resolve({ url: upload.url! }),
        });
        upload.start();
      });
      expect(answers).toEqual([{ status: 201, offset: String(size) }]);
      const down = await storageClient(baseUrl, user.accessToken).from('attachments').download(name);
      expect(Buffer.from(await down.data!.arrayBuffer()).equals(data)).toBe(true);
      const id = done.url.split('/').pop()!;
      expect(fs.existsSync(path.join(staging, id))).toBe(false);
      const [row] = await db()`select count(*)::int as n from app.storage_uploads where id = ${id}`;
      expect(row!.n).toBe(0);
    }
  });
});

describe('resumable uploads and the quota (security review round 5)', () => {
  it('6 uploads of 25 MB declared at once with a 100 MB quota: 4 are reserved, 2 refused; staged bytes stay within the quota', async () => {
    const user = await registerUser('tus-fill');
    const length = 25 * 1024 * 1024;
    const created = await Promise.all(Array.from({ length: 6 }, (_, i) => create(user, `${user.userId}/fill-${i}.bin`, length)));
    expect(created.map((r) => r.status).sort()).toEqual([201, 201, 201, 201, 413, 413]);
    const refused = created.find((r) => r.status === 413)!;
    expect(await refused.json()).toMatchObject({ statusCode: '413', code: 'quota_exceeded' });
    const ids = created.filter((r) => r.status === 201).map(idOf);
    const [reserved] = await db()`select sum(declared_size)::bigint as bytes from app.storage_uploads where owner_id = ${user.userId}`;
    expect(Number(reserved!.bytes)).toBe(4 * length);
    // A chunk of each: what is staged is what was reserved, at most (TUS refuses bytes past Upload-Length).
    const chunk = crypto.randomBytes(1024 * 1024);
    for (const id of ids) expect((await patch(user, `${endpoint}/${id}`, 0, chunk)).status).toBe(204);
    expect(stagedBytes(ids)).toBe(4 * chunk.length);
    // Even a direct upload of a size not declared is refused while the reservations fill the quota.
    const direct = await fetch(`${baseUrl}/storage/v1/object/attachments/${user.userId}/more.bin`, {
      method: 'POST',
      headers: { authorization: `Bearer ${user.accessToken}`, 'content-type': 'application/octet-stream' },
      body: new ReadableStream({ start: (c) => (c.enqueue(new Uint8Array(10)), c.close()) }),
      duplex: 'half',
    } as RequestInit);
    expect(direct.status).toBe(413);

    // Cancelled (TUS termination): its staged bytes go at once, and its reservation with it.
    const cancel = await fetch(`${endpoint}/${ids[0]}`, { method: 'DELETE', headers: { authorization: `Bearer ${user.accessToken}`, 'tus-resumable': '1.0.0' } });
    expect(cancel.status).toBe(204);
    expect(fs.existsSync(path.join(staging, ids[0]!))).toBe(false);
    expect(stagedBytes(ids)).toBe(3 * chunk.length);
    expect((await create(user, `${user.userId}/fill-again.bin`, length)).status).toBe(201);
    expect((await create(user, `${user.userId}/fill-more.bin`, 1)).status).toBe(413);
  });

  it('a finish that is refused deletes the staged bytes at once and frees the reservation', async () => {
    const user = await registerUser('tus-refused');
    const data = crypto.randomBytes(300 * 1024);
    const started = await create(user, `${user.userId}/not-an-image.png`, data.length, 'avatars');
    expect(started.status).toBe(201);
    const id = idOf(started);
    expect((await patch(user, `${endpoint}/${id}`, 0, data.subarray(0, 200 * 1024))).status).toBe(204);
    expect(stagedBytes([id])).toBe(200 * 1024);
    const last = await patch(user, `${endpoint}/${id}`, 200 * 1024, data.subarray(200 * 1024));
    expect(last.status).toBe(415);
    expect(await last.json()).toMatchObject({ code: 'not_an_image' });
    expect(fs.existsSync(path.join(staging, id))).toBe(false);
    const [row] = await db()`select count(*)::int as n from app.storage_uploads where owner_id = ${user.userId}`;
    expect(row!.n).toBe(0);
  });

  it('at most 10 resumable uploads open at once per user', async () => {
    const user = await registerUser('tus-open');
    const answers = [];
    for (let i = 0; i < 11; i++) answers.push(await create(user, `${user.userId}/open-${i}.bin`, 1024));
    expect(answers.map((r) => r.status)).toEqual([...Array(10).fill(201), 429]);
    expect(await answers[10]!.json()).toMatchObject({ statusCode: '429', code: 'too_many_open_uploads' });
    expect(Number(answers[10]!.headers.get('retry-after'))).toBeGreaterThan(0);
    // One cancelled: room for another.
    await fetch(`${endpoint}/${idOf(answers[0]!)}`, {
      method: 'DELETE',
      headers: { authorization: `Bearer ${user.accessToken}`, 'tus-resumable': '1.0.0' },
    });
    expect((await create(user, `${user.userId}/open-again.bin`, 1024)).status).toBe(201);
  });
});

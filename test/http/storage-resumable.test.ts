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

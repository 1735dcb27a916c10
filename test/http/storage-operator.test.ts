// The service-role key on /storage/v1 (the operator) and the bucket API, with
// supabase-js as a server or an admin script uses it: createClient(URL,
// SERVICE_ROLE_KEY). The operator reaches every bucket and object (past the
// folder rules, in SQL: private.storage_operator) but not past the checks of
// the bytes; the key is no user's credential anywhere else; a user's key
// manages no bucket and writes only in its own folder of a created bucket.
import fs from 'node:fs';
import { createClient } from '@supabase/supabase-js';
import sharp from 'sharp';
import { describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import { api, apiKey, baseUrl, db, logFile, registerUser } from '../helpers.ts';
import { contractFetch, phonePhoto, png, storageClient } from '../support/storage.ts';

const SERVICE_KEY = await apiKey('service_role');

/** supabase-js as a server makes it: the service-role key as the client's key, nothing else. */
function serviceStorage() {
  return createClient(baseUrl, SERVICE_KEY, {
    auth: { persistSession: false, autoRefreshToken: false },
    global: { fetch: contractFetch(baseUrl) },
    realtime: { transport: WebSocket as never },
  }).storage;
}

const text = (body: string, type = 'text/plain') => new Blob([body], { type });
const bucketId = (what: string) => `${what}-${Date.now().toString(36)}-${Math.random().toString(36).slice(2, 6)}`;

describe('the service-role key on /storage/v1: the operator', () => {
  it('reads, lists, writes and removes any object of any bucket, and is logged as service_role', async () => {
    const ana = await registerUser('op-ana');
    const mine = storageClient(baseUrl, ana.accessToken).from('attachments');
    expect((await mine.upload(`${ana.userId}/private.txt`, text('ana only'))).error).toBeNull();

    const operator = serviceStorage().from('attachments');
    const read = await operator.download(`${ana.userId}/private.txt`);
    expect(read.error).toBeNull();
    expect(await read.data!.text()).toBe('ana only');
    const listed = await operator.list(ana.userId);
    expect(listed.error).toBeNull();
    expect(listed.data!.map((e) => e.name)).toEqual(['private.txt']);
    // In a user's folder and outside every folder.
    expect((await operator.upload(`${ana.userId}/from-the-operator.txt`, text('hello'))).error).toBeNull();
    expect((await operator.upload('operator/notes.txt', text('notes'))).error).toBeNull();
    expect(await (await mine.download(`${ana.userId}/from-the-operator.txt`)).data!.text()).toBe('hello');
    const signed = await operator.createSignedUrl('operator/notes.txt', 60);
    expect(signed.error).toBeNull();
    expect(await (await fetch(signed.data!.signedUrl)).text()).toBe('notes');
    const upload = await operator.createSignedUploadUrl('operator/signed.txt');
    expect(upload.error).toBeNull();
    expect((await operator.uploadToSignedUrl('operator/signed.txt', upload.data!.token, text('signed'))).error).toBeNull();
    expect((await operator.move('operator/signed.txt', `${ana.userId}/moved.txt`)).error).toBeNull();
    const removed = await operator.remove([`${ana.userId}/private.txt`, 'operator/notes.txt']);
    expect(removed.error).toBeNull();
    expect(removed.data!.map((o) => o.name).sort()).toEqual([`${ana.userId}/private.txt`, 'operator/notes.txt']);
    const [row] = await db()<{ owner_id: string | null }[]>`
      select owner_id from app.storage_objects where bucket_id = 'attachments' and name = ${`${ana.userId}/from-the-operator.txt`}`;
    expect(row!.owner_id).toBeNull();

    const logs = fs.readFileSync(logFile, 'utf8').split('\n').filter((line) => line.includes(`/storage/v1/object/attachments/operator/notes.txt`));
    expect(logs.some((line) => /"role":"service_role"/.test(line))).toBe(true);
  });

  it('is held to the checks of the bytes: an image bucket sniffs, refuses what is no image and strips GPS', async () => {
    const ana = await registerUser('op-img');
    const operator = serviceStorage().from('avatars');
    const photo = await operator.upload(`${ana.userId}/photo.jpg`, new Blob([new Uint8Array(await phonePhoto(40, 20))], { type: 'image/jpeg' }));
    expect(photo.error).toBeNull();
    const stored = Buffer.from(await (await operator.download(`${ana.userId}/photo.jpg`)).data!.arrayBuffer());
    const meta = await sharp(stored).metadata();
    expect(meta.exif).toBeUndefined();
    expect([meta.width, meta.height]).toEqual([20, 40]);
    const html = await operator.upload(`${ana.userId}/page.png`, text('<html><script>alert(1)</script></html>', 'image/png'));
    expect(html.error).not.toBeNull();
    expect((html.error as { statusCode?: string }).statusCode).toBe('415');
    const big = await operator.upload(`${ana.userId}/big.bin`, new Blob([new Uint8Array(6 * 1024 * 1024)], { type: 'image/png' }));
    expect(big.error).toMatchObject({ message: 'The object exceeded the maximum allowed size', statusCode: '413' });
  });

  it('acts as no user elsewhere: the mobile API and a user route of /auth/v1 refuse it (401)', async () => {
    for (const [method, path] of [
      ['GET', '/api/mobile/profile'],
      ['GET', '/api/mobile/tasks'],
      ['DELETE', '/api/mobile/account'],
    ] as const) {
      const res = await api(method, path, { token: SERVICE_KEY, body: method === 'DELETE' ? { password: 'x' } : undefined });
      expect(res.status, `${method} ${path}`).toBe(401);
    }
    const user = await fetch(`${baseUrl}/auth/v1/user`, { headers: { apikey: SERVICE_KEY, authorization: `Bearer ${SERVICE_KEY}` } });
    expect(user.status).toBeGreaterThanOrEqual(401);
    expect(user.status).toBeLessThan(404);
    // The anon key is no operator either.
    const anon = await fetch(`${baseUrl}/storage/v1/object/list/attachments`, {
      method: 'POST',
      headers: { authorization: `Bearer ${await apiKey('anon')}`, 'content-type': 'application/json' },
      body: '{"prefix":""}',
    });
    expect(anon.status).toBe(401);
  });
});

describe('the bucket API (the service-role key)', () => {
  it('creates, reads, lists, changes, empties and deletes a bucket in Storage\'s wire format', async () => {
    const storage = serviceStorage();
    const id = bucketId('receipts');
    const made = await storage.createBucket(id, { public: false, fileSizeLimit: '1KB', allowedMimeTypes: ['text/plain', 'application/pdf'] });
    expect(made).toMatchObject({ data: { name: id }, error: null });
    const got = await storage.getBucket(id);
    expect(got.error).toBeNull();
    expect(got.data).toMatchObject({ id, name: id, public: false, file_size_limit: 1000, allowed_mime_types: ['text/plain', 'application/pdf'] });
    expect((await storage.listBuckets()).data!.map((b) => b.id)).toEqual(expect.arrayContaining([id, 'avatars', 'attachments']));
    expect((await storage.createBucket(id)).error).toMatchObject({ statusCode: '409', message: 'The resource already exists' });
    expect((await storage.createBucket('Not A Name')).error).toMatchObject({ statusCode: '400', message: 'Bucket name invalid' });

    // Storage's refusals for size and type, in its words.
    const bucket = storage.from(id);
    const tooBig = await bucket.upload('a/big.txt', text('x'.repeat(2000)));
    expect(tooBig.error).toMatchObject({ statusCode: '413', message: 'The object exceeded the maximum allowed size' });
    const wrongType = await bucket.upload('a/pic.png', new Blob([new Uint8Array(await png(4, 4))], { type: 'image/png' }));
    expect(wrongType.error).toMatchObject({ statusCode: '415', message: 'mime type image/png is not supported' });

    const changed = await storage.updateBucket(id, { public: true, fileSizeLimit: 4096, allowedMimeTypes: ['text/*'] });
    expect(changed).toMatchObject({ data: { message: 'Successfully updated' }, error: null });
    expect((await storage.getBucket(id)).data).toMatchObject({ public: true, file_size_limit: 4096, allowed_mime_types: ['text/*'] });
    expect((await bucket.upload('a/big.txt', text('x'.repeat(2000)))).error).toBeNull();
    expect(await (await fetch(bucket.getPublicUrl('a/big.txt').data.publicUrl)).text()).toBe('x'.repeat(2000));

    expect((await storage.deleteBucket(id)).error).toMatchObject({ statusCode: '409', message: 'The bucket you tried to delete is not empty' });
    expect(await storage.emptyBucket(id)).toMatchObject({ data: { message: 'Successfully emptied' }, error: null });
    expect((await bucket.list('a')).data).toEqual([]);
    expect(await storage.deleteBucket(id)).toMatchObject({ data: { message: 'Successfully deleted' }, error: null });
    expect((await storage.getBucket(id)).error).toMatchObject({ statusCode: '404', message: 'Bucket not found' });
  });

  it('never deletes the four built-in buckets', async () => {
    const storage = serviceStorage();
    for (const id of ['avatars', 'community-images', 'event-images', 'attachments']) {
      const refused = await storage.deleteBucket(id);
      expect(refused.error, id).toMatchObject({ statusCode: '409' });
      expect((await storage.getBucket(id)).error).toBeNull();
    }
  });

  it('a user\'s key creates, changes, empties and deletes no bucket, and writes only under its own id in a created bucket', async () => {
    const ana = await registerUser('bk-ana');
    const ben = await registerUser('bk-ben');
    const operator = serviceStorage();
    const id = bucketId('shared');
    expect((await operator.createBucket(id, { public: false })).error).toBeNull();
    expect((await operator.from(id).upload('operator/keep.txt', text('keep'))).error).toBeNull();

    const user = storageClient(baseUrl, ana.accessToken);
    expect((await user.createBucket(bucketId('mine'))).error).toMatchObject({ statusCode: '403' });
    expect((await user.updateBucket(id, { public: true })).error).toMatchObject({ statusCode: '403' });
    expect((await user.emptyBucket(id)).error).toMatchObject({ statusCode: '403' });
    expect((await user.deleteBucket(id)).error).toMatchObject({ statusCode: '403' });
    expect((await operator.getBucket(id)).data).toMatchObject({ public: false });
    expect((await operator.from(id).download('operator/keep.txt')).error).toBeNull();

    // Their own folder, yes; another user's or none, no; nor may they read the operator's.
    expect((await user.from(id).upload(`${ana.userId}/a.txt`, text('a'))).error).toBeNull();
    expect((await user.from(id).upload(`${ben.userId}/a.txt`, text('a'))).error).toMatchObject({ statusCode: '403' });
    expect((await user.from(id).upload('operator/a.txt', text('a'))).error).toMatchObject({ statusCode: '403' });
    expect((await user.from(id).download('operator/keep.txt')).error).not.toBeNull();
    expect((await storageClient(baseUrl, ben.accessToken).from(id).download(`${ana.userId}/a.txt`)).error).not.toBeNull();

    // An operator's rule in SQL: the bucket's folders become communities'.
    await db()`update app.storage_buckets set folder_owner = 'community' where id = ${id}`;
    expect((await user.from(id).upload(`${ana.userId}/b.txt`, text('b'))).error).toMatchObject({ statusCode: '403' });
  });
});

describe('Storage\'s remaining wire details', () => {
  it('listV2 pages with a cursor, by name or date, with folders under with_delimiter, in the caller\'s folders only', async () => {
    const ana = await registerUser('v2-ana');
    const ben = await registerUser('v2-ben');
    const att = storageClient(baseUrl, ana.accessToken).from('attachments');
    const names = ['zz', 'bb', 'xx', 'aa', 'yy'];
    for (const n of names) expect((await att.upload(`${ana.userId}/docs/f-${n}.txt`, text(n))).error).toBeNull();
    expect((await att.upload(`${ana.userId}/top.txt`, text('top'))).error).toBeNull();
    expect((await storageClient(baseUrl, ben.accessToken).from('attachments').upload(`${ben.userId}/docs/f-ben.txt`, text('b'))).error).toBeNull();

    for (const [sortBy, expected] of [
      [undefined, [...names].sort()],
      [{ column: 'name', order: 'desc' }, [...names].sort().reverse()],
      [{ column: 'created_at', order: 'asc' }, names],
      [{ column: 'created_at', order: 'desc' }, [...names].reverse()],
    ] as const) {
      const seen: string[] = [];
      let cursor: string | undefined;
      let pages = 0;
      do {
        const page = await att.listV2({ prefix: `${ana.userId}/docs/`, limit: 2, with_delimiter: true, ...(cursor ? { cursor } : {}), ...(sortBy ? { sortBy } : {}) });
        expect(page.error).toBeNull();
        seen.push(...page.data!.objects.map((o) => o.name));
        cursor = page.data!.hasNext ? page.data!.nextCursor : undefined;
        pages++;
      } while (cursor);
      expect(pages).toBe(3);
      expect(seen).toEqual(expected.map((n) => `${ana.userId}/docs/f-${n}.txt`));
    }
    const folders = await att.listV2({ prefix: `${ana.userId}/`, with_delimiter: true });
    expect(folders.data).toMatchObject({ hasNext: false, folders: [{ key: 'docs', name: `${ana.userId}/docs/` }], objects: [{ name: `${ana.userId}/top.txt` }] });
    const flat = await att.listV2({ prefix: ana.userId });
    expect(flat.data!.folders).toEqual([]);
    expect(flat.data!.objects).toHaveLength(6);
    expect(flat.data!.objects[0]).toMatchObject({ id: expect.any(String), metadata: { size: expect.any(Number) } });
    // Ben's object is not there for Ana; the operator sees both.
    expect((await att.listV2({ prefix: '' })).data!.objects.every((o) => o.name.startsWith(ana.userId))).toBe(true);
    expect((await serviceStorage().from('attachments').listV2({ prefix: `${ben.userId}/` })).data!.objects).toHaveLength(1);
    const bad = await att.listV2({ cursor: 'not-a-cursor' });
    expect(bad.error).toMatchObject({ statusCode: '400' });
  });

  it('info() gives metadata {} when none was attached', async () => {
    const ana = await registerUser('info-ana');
    const att = storageClient(baseUrl, ana.accessToken).from('attachments');
    await att.upload(`${ana.userId}/plain.txt`, text('plain'));
    await att.upload(`${ana.userId}/meta.txt`, text('meta'), { metadata: { a: 1 } });
    expect((await att.info(`${ana.userId}/plain.txt`)).data!.metadata).toEqual({});
    expect((await att.info(`${ana.userId}/meta.txt`)).data!.metadata).toEqual({ a: 1 });
  });

  it('transforms an image of any bucket the caller may read, with x-transformations (signed too)', async () => {
    const ana = await registerUser('tx-ana');
    const att = storageClient(baseUrl, ana.accessToken).from('attachments');
    expect((await att.upload(`${ana.userId}/scan.png`, new Blob([new Uint8Array(await png(400, 300))], { type: 'image/png' }))).error).toBeNull();
    const small = await att.download(`${ana.userId}/scan.png`, { transform: { width: 100, height: 100, resize: 'contain' } });
    expect(small.error).toBeNull();
    // Sizes are rounded up to a few steps (docs/storage.md): smaller than the original all the same.
    expect((await sharp(Buffer.from(await small.data!.arrayBuffer())).metadata()).width).toBeLessThan(400);

    const signed = await att.createSignedUrl(`${ana.userId}/scan.png`, 600, { transform: { width: 200, height: 200, quality: 60 } });
    expect(signed.error).toBeNull();
    const res = await fetch(signed.data!.signedUrl);
    expect(res.status).toBe(200);
    expect(res.headers.get('x-transformations')).toBe('height:200,width:200,resizing_type:fill,quality:60');
    // Sniffed, not taken at its word: image bytes uploaded as text are transformed; text declared an image is not.
    expect((await att.upload(`${ana.userId}/declared-text.bin`, new Blob([new Uint8Array(await png(300, 300))], { type: 'text/plain' }))).error).toBeNull();
    expect((await att.download(`${ana.userId}/declared-text.bin`, { transform: { width: 64 } })).error).toBeNull();
    await att.upload(`${ana.userId}/fake.png`, text('<svg xmlns="http://www.w3.org/2000/svg"/>', 'image/png'));
    expect((await att.download(`${ana.userId}/fake.png`, { transform: { width: 50 } })).error).toMatchObject({ statusCode: '415' });
    // Not an image: still refused.
    await att.upload(`${ana.userId}/note.txt`, text('not an image'));
    expect((await att.download(`${ana.userId}/note.txt`, { transform: { width: 50 } })).error).not.toBeNull();
  });

  it('answers what it does not serve clearly, never "Bucket not found"', async () => {
    // The CDN purge: no route (404 "no route for ..."), not a bucket of that name.
    const res = await serviceStorage().from('avatars').purgeCache('x/y.png');
    expect(res.error).toMatchObject({ statusCode: '404' });
    expect(res.error!.message).toMatch(/^no route for DELETE/);
    // An analytics bucket: 400, not made.
    const analytics = await serviceStorage().createBucket(bucketId('iceberg'), { type: 'ANALYTICS' } as never);
    expect(analytics.error).toMatchObject({ statusCode: '400' });
  });
});

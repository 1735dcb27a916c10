// The S3 byte store against a real S3-compatible server (s3rver, started
// here): a second gateway on its own database with STORAGE_BACKEND=s3 takes
// uploads (a file, a form, an image) and serves them back (whole, a range, a
// transformation cached in the bucket), copies, resumable uploads (staged on
// the machine, STORAGE_RESUMABLE_STAGING's default: s3rver has no multipart
// ListParts for @tus/s3-store) resumed and stored in the bucket, and its
// storage_collect job deletes the bytes of removed objects from the bucket.
import crypto from 'node:crypto';
import { HeadObjectCommand, ListObjectsV2Command, S3Client } from '@aws-sdk/client-s3';
import sharp from 'sharp';
import * as tus from 'tus-js-client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import postgres from 'postgres';
import { s3ClientConfig } from '../../gateway/storage/s3-store.ts';
import { databaseServer, databaseUrl } from '../helpers.ts';
import { startTestEnvironment, type TestEnvironment } from '../support/environment.ts';
import { startS3, type RunningS3 } from '../support/s3rver.ts';
import { phonePhoto, storageClient } from '../support/storage.ts';
import { eventually } from '../support/wait.ts';

let s3: RunningS3;
let env: TestEnvironment;
let client: S3Client;
let sql: postgres.Sql;

beforeAll(async () => {
  s3 = await startS3();
  env = await startTestEnvironment({ ...databaseServer, env: s3.env });
  client = new S3Client(s3ClientConfig(env.config.storage.s3!));
  sql = postgres(env.databaseUrl, { max: 2, onnotice: () => {} });
}, 180_000);

afterAll(async () => {
  await sql?.end();
  await env?.stop();
  await s3?.stop();
});

async function signUp(prefix: string): Promise<{ id: string; token: string }> {
  const email = `${prefix}-${crypto.randomBytes(4).toString('hex')}@example.com`;
  const password = 'password-s3-test';
  const reg = await fetch(`${env.baseUrl}/api/auth/register`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ email, password }) });
  const login = await fetch(`${env.baseUrl}/api/auth/login`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ email, password }) });
  return { id: ((await reg.json()) as { user_id: string }).user_id, token: ((await login.json()) as { access_token: string }).access_token };
}

const inBucket = async (key: string) =>
  client.send(new HeadObjectCommand({ Bucket: s3.bucket, Key: `community/${key}` })).then(
    () => true,
    () => false,
  );

describe('the S3 byte store (s3rver)', () => {
  it('stores, serves, copies and transforms objects in the bucket', async () => {
    const user = await signUp('s3-ann');
    const storage = storageClient(env.baseUrl, user.token);
    const big = crypto.randomBytes(7 * 1024 * 1024 + 123); // more than one 5 MB part
    expect((await storage.from('attachments').upload(`${user.id}/big.bin`, big)).error).toBeNull();
    expect((await storage.from('attachments').upload(`${user.id}/form.txt`, new Blob(['a form']))).error).toBeNull();
    const [row] = await sql`select storage_key from app.storage_objects where name = ${`${user.id}/big.bin`}`;
    expect(await inBucket(row!.storage_key)).toBe(true);

    const down = await storage.from('attachments').download(`${user.id}/big.bin`);
    expect(Buffer.from(await down.data!.arrayBuffer()).equals(big)).toBe(true);
    const part = await fetch(`${env.baseUrl}/storage/v1/object/attachments/${user.id}/big.bin`, {
      headers: { authorization: `Bearer ${user.token}`, range: 'bytes=5242878-5242881' },
    });
    expect(part.status).toBe(206);
    expect(Buffer.from(await part.arrayBuffer()).equals(big.subarray(5242878, 5242882))).toBe(true);

    expect((await storage.from('attachments').copy(`${user.id}/form.txt`, `${user.id}/copy.txt`)).error).toBeNull();
    expect(await (await storage.from('attachments').download(`${user.id}/copy.txt`)).data!.text()).toBe('a form');

    const photo = await phonePhoto(300, 200);
    expect((await storage.from('avatars').upload(`${user.id}/me.jpg`, photo, { contentType: 'image/jpeg' })).error).toBeNull();
    const url = storage.from('avatars').getPublicUrl(`${user.id}/me.jpg`, { transform: { width: 64, height: 64 } }).data.publicUrl;
    const rendered = await fetch(url, { headers: { accept: 'image/webp' } });
    expect(rendered.status).toBe(200);
    const meta = await sharp(Buffer.from(await rendered.arrayBuffer())).metadata();
    expect([meta.format, meta.width, meta.height]).toEqual(['webp', 64, 64]);
    const [avatar] = await sql`select storage_key from app.storage_objects where name = ${`${user.id}/me.jpg`}`;
    const renders = await client.send(new ListObjectsV2Command({ Bucket: s3.bucket, Prefix: `community/renders/${String(avatar!.storage_key).replace('objects/', '')}/` }));
    expect(renders.Contents?.map((c) => c.Key!.split('/').pop())).toEqual(['64x64-cover-q80.webp']);
  });

  it('a resumable upload is cut off, resumed and stored in the bucket', async () => {
    const user = await signUp('s3-tus');
    const data = crypto.randomBytes(6 * 1024 * 1024 + 7);
    const endpoint = `${env.baseUrl}/storage/v1/upload/resumable`;
    const options = (extra: Partial<tus.UploadOptions>): tus.UploadOptions => ({
      endpoint,
      retryDelays: [],
      headers: { authorization: `Bearer ${user.token}` },
      metadata: { bucketName: 'attachments', objectName: `${user.id}/resumed.bin`, contentType: 'application/octet-stream' },
      chunkSize: 5 * 1024 * 1024,
      ...extra,
    });
    const cutUrl = await new Promise<string>((resolve, reject) => {
      const upload: tus.Upload = new tus.Upload(data, options({ onChunkComplete: () => void upload.abort().then(() => resolve(upload.url!)), onError: reject }));
      upload.start();
    });
    await new Promise<void>((resolve, reject) => {
      new tus.Upload(data, options({ uploadUrl: cutUrl, onSuccess: () => resolve(), onError: reject })).start();
    });
    const down = await storageClient(env.baseUrl, user.token).from('attachments').download(`${user.id}/resumed.bin`);
    expect(Buffer.from(await down.data!.arrayBuffer()).equals(data)).toBe(true);
  });

  it('the storage_collect job deletes removed objects\' bytes from the bucket', async () => {
    const user = await signUp('s3-gc');
    const storage = storageClient(env.baseUrl, user.token);
    await storage.from('attachments').upload(`${user.id}/gone.txt`, Buffer.from('soon gone'));
    const [row] = await sql`select storage_key from app.storage_objects where name = ${`${user.id}/gone.txt`}`;
    const key = row!.storage_key as string;
    expect(await inBucket(key)).toBe(true);
    await storage.from('attachments').remove([`${user.id}/gone.txt`]);
    await sql`update app.storage_garbage set collect_after = now() where storage_key = ${key}`;
    await sql`select graphile_worker.add_job('storage_collect', '{}'::json)`;
    await eventually('the bytes to leave the bucket', async () => !(await inBucket(key)), 20_000);
    const [garbage] = await sql`select count(*)::int as n from app.storage_garbage where storage_key = ${key}`;
    expect(garbage!.n).toBe(0);
  });
});

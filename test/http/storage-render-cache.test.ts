// The cache of image transformations cannot fill a disk (security review
// round 5, item 1): a gateway of its own (its own database and byte store)
// with a small cache budget, a few variants per object and a low rate of
// transformations per client address, behind one trusted proxy so that the
// test can speak from many addresses.
//   * anonymous requests of distinct options (sizes, quality, resize, format)
//     for public noise images, each from another address: every one is
//     answered, and the transformations kept on disk stay within the budget
//     and within the bound per object;
//   * options that make the same image make one variant: quality for PNG,
//     sizes within one step;
//   * one address past its rate of transformations is refused with 429 and
//     Retry-After; what is in the cache is still served to it.
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import sharp from 'sharp';
import { describe, expect, it } from 'vitest';
import { ownGateway } from '../support/own-gateway.ts';

const BUDGET = 400_000;
const VARIANTS = 4;
const PER_MINUTE = 10;

const gateway = ownGateway({
  STORAGE_RENDER_CACHE_BYTES: String(BUDGET),
  STORAGE_RENDER_VARIANTS: String(VARIANTS),
  STORAGE_RENDER_MISSES_PER_MINUTE: String(PER_MINUTE),
  TRUST_PROXY: '1',
});

/** A user's public image of random noise (it compresses badly: large transformations). */
async function noiseImage(prefix: string, side: number): Promise<{ name: string; storageKey: string }> {
  const email = `${prefix}-${crypto.randomBytes(4).toString('hex')}@example.com`;
  const json = { 'content-type': 'application/json' };
  const reg = await fetch(`${gateway.env.baseUrl}/api/auth/register`, { method: 'POST', headers: json, body: JSON.stringify({ email, password: 'password-render' }) });
  const login = await fetch(`${gateway.env.baseUrl}/api/auth/login`, { method: 'POST', headers: json, body: JSON.stringify({ email, password: 'password-render' }) });
  const userId = ((await reg.json()) as { user_id: string }).user_id;
  const token = ((await login.json()) as { access_token: string }).access_token;
  const noise = await sharp(crypto.randomBytes(side * side * 3), { raw: { width: side, height: side, channels: 3 } }).png().toBuffer();
  const name = `${userId}/noise.png`;
  const put = await fetch(`${gateway.env.baseUrl}/storage/v1/object/avatars/${name}`, {
    method: 'POST',
    headers: { authorization: `Bearer ${token}`, 'content-type': 'image/png' },
    body: new Uint8Array(noise),
  });
  expect(put.status).toBe(200);
  const [row] = await gateway.sql<{ storage_key: string }[]>`select storage_key from app.storage_objects where bucket_id = 'avatars' and name = ${name}`;
  return { name, storageKey: row!.storage_key };
}

function render(name: string, query: string, address: string, accept = 'image/png'): Promise<Response> {
  return fetch(`${gateway.env.baseUrl}/storage/v1/render/image/public/avatars/${name}?${query}`, { headers: { 'x-forwarded-for': address, accept } });
}

/** The transformations on disk: their files under renders/, per object version. */
function onDisk(): { bytes: number; perVersion: Map<string, number> } {
  const root = path.join(gateway.env.config.storage.dir, 'renders');
  const perVersion = new Map<string, number>();
  let bytes = 0;
  for (const version of fs.existsSync(root) ? fs.readdirSync(root) : []) {
    for (const file of fs.readdirSync(path.join(root, version))) {
      bytes += fs.statSync(path.join(root, version, file)).size;
      perVersion.set(version, (perVersion.get(version) ?? 0) + 1);
    }
  }
  return { bytes, perVersion };
}

let address = 0;
const nextAddress = () => `198.51.100.${++address}`;

describe('the cache of transformations', () => {
  it('anonymous requests of distinct options, from many addresses, stay within the budget and the bound per object', { timeout: 120_000 }, async () => {
    const images = [await noiseImage('render-a', 600), await noiseImage('render-b', 600), await noiseImage('render-c', 600)];
    const sizes = [60, 130, 200, 260, 330, 400, 490, 520, 600];
    let answered = 0;
    let written = 0;
    for (const [i, size] of sizes.entries()) {
      for (const image of images) {
        const res = await render(image.name, `width=${size}&height=${size - 7 * i}&resize=${['cover', 'contain', 'fill'][i % 3]}&quality=${20 + 10 * (i % 9)}`, nextAddress());
        expect(res.status).toBe(200);
        written += (await res.arrayBuffer()).byteLength;
        answered++;
      }
    }
    expect(answered).toBe(27);
    // Far more was made than the budget: it was evicted.
    expect(written).toBeGreaterThan(2 * BUDGET);
    const disk = onDisk();
    expect(disk.bytes).toBeLessThanOrEqual(BUDGET);
    for (const count of disk.perVersion.values()) expect(count).toBeLessThanOrEqual(VARIANTS);
    const [recorded] = await gateway.sql<{ bytes: string; rows: number }[]>`select coalesce(sum(size), 0)::bigint as bytes, count(*)::int as rows from app.storage_renders`;
    expect(Number(recorded!.bytes)).toBeLessThanOrEqual(BUDGET);
    expect(Number(recorded!.bytes)).toBe(disk.bytes);
  });

  it('options that make the same image make one variant: quality for PNG, sizes within a step, resize with one side', async () => {
    const image = await noiseImage('render-same', 300);
    const version = image.storageKey.replace(/^objects\//, '');
    const before = onDisk().perVersion.get(version) ?? 0;
    const tags = new Set<string>();
    for (const query of ['width=100&quality=20', 'width=100&quality=90', 'width=110&quality=55', 'width=128&resize=fill', 'width=97&resize=contain&quality=100']) {
      const res = await render(image.name, query, nextAddress());
      expect(res.status).toBe(200);
      expect(res.headers.get('content-type')).toBe('image/png');
      tags.add(res.headers.get('etag')!);
      expect((await sharp(Buffer.from(await res.arrayBuffer())).metadata()).width).toBe(128);
    }
    expect(tags.size).toBe(1);
    expect(onDisk().perVersion.get(version)).toBe(before + 1);
    // WebP uses quality: a multiple of 10 apart is another variant, within 10 the same.
    const webp = async (quality: number) => (await render(image.name, `width=100&quality=${quality}`, nextAddress(), 'image/webp')).headers.get('etag');
    expect(await webp(61)).toBe(await webp(64));
    expect(await webp(61)).not.toBe(await webp(71));
  });

  it('one address past its rate of transformations made is refused; the cache still serves it', async () => {
    const image = await noiseImage('render-rate', 200);
    const me = '203.0.113.77';
    const widths = [16, 32, 48, 64, 96, 128, 192, 256, 320, 384]; // PER_MINUTE distinct variants
    const statuses = [];
    for (const width of widths) statuses.push((await render(image.name, `width=${width}`, me)).status);
    expect(statuses).toEqual(Array(PER_MINUTE).fill(200));
    const refused = await render(image.name, 'width=480', me);
    expect(refused.status).toBe(429);
    expect(Number(refused.headers.get('retry-after'))).toBeGreaterThan(0);
    expect(await refused.json()).toMatchObject({ statusCode: '429', code: 'too_many_renders' });
    // A transformation in the cache is served to it (not counted); another address may have it made.
    expect((await render(image.name, 'width=384', me)).status).toBe(200);
    expect((await render(image.name, 'width=480', nextAddress())).status).toBe(200);
  });
});

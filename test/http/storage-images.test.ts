// Images through supabase-js: what an image bucket refuses (a declared type
// the bytes contradict, SVG with a script, HTML, what is not an image, a
// decompression bomb, a file over the bucket's limit), what it does to a
// phone photo (turned upright, its EXIF and GPS position gone: read back
// with sharp and an EXIF reader), and transformations (size, resize, the
// format by Accept, cached: the repeat is the same bytes from the byte
// store, and a 304 for the ETag held).
import fs from 'node:fs';
import path from 'node:path';
import exifr from 'exifr';
import sharp from 'sharp';
import { describe, expect, it } from 'vitest';
import { inject } from 'vitest';
import { baseUrl, dataDir, db, registerUser } from '../helpers.ts';
import { HTML_PAGE, phonePhoto, pixelBomb, png, storageClient, SVG_WITH_SCRIPT } from '../support/storage.ts';


async function user(prefix: string) {
  const u = await registerUser(prefix);
  return { ...u, storage: storageClient(baseUrl, u.accessToken) };
}

async function objectCount(userId: string): Promise<number> {
  const [row] = await db()`select count(*)::int as n from app.storage_objects where owner_id = ${userId}`;
  return row!.n as number;
}

describe('what an image bucket takes', () => {
  it('a phone photo is stored upright, without its EXIF and GPS position', async () => {
    const ana = await user('img-ana');
    const photo = await phonePhoto(40, 20);
    // The fixture does carry a position and a turn.
    expect((await exifr.parse(photo, { gps: true }))?.latitude).toBeCloseTo(52.52, 2);
    expect((await sharp(photo).metadata()).orientation).toBe(6);

    const avatars = ana.storage.from('avatars');
    const up = await avatars.upload(`${ana.userId}/me.jpg`, new Blob([new Uint8Array(photo)], { type: 'image/jpeg' }));
    expect(up.error).toBeNull();
    const down = await avatars.download(`${ana.userId}/me.jpg`);
    const stored = Buffer.from(await down.data!.arrayBuffer());
    expect(await exifr.parse(stored, { gps: true, tiff: true, xmp: true, iptc: true })).toBeUndefined();
    const meta = await sharp(stored).metadata();
    expect([meta.format, meta.width, meta.height, meta.orientation, meta.exif]).toEqual(['jpeg', 20, 40, undefined, undefined]);
    const info = await avatars.info(`${ana.userId}/me.jpg`);
    expect(info.data).toMatchObject({ contentType: 'image/jpeg', size: stored.length });
  });

  it('refuses a declared type the bytes contradict, SVG, HTML and what is not an image, with their codes', async () => {
    const ben = await user('img-ben');
    const avatars = ben.storage.from('avatars');
    const cases: [string, Buffer, string, number, string][] = [
      ['png.jpg', await png(8, 8), 'image/jpeg', 415, 'mime_type_mismatch'],
      ['icon.svg', SVG_WITH_SCRIPT, 'image/svg+xml', 415, 'svg_not_allowed'],
      ['icon.png', SVG_WITH_SCRIPT, 'image/png', 415, 'svg_not_allowed'],
      ['page.png', HTML_PAGE, 'image/png', 415, 'html_not_allowed'],
      ['page.html', HTML_PAGE, 'text/html', 415, 'html_not_allowed'],
      ['note.png', Buffer.from('just some text'), 'image/png', 415, 'not_an_image'],
      ['doc.pdf', Buffer.from('%PDF-1.7\n%\u00e2\u00e3\n1 0 obj'), 'application/pdf', 415, 'not_an_image'],
    ];
    for (const [name, bytes, type, status, code] of cases) {
      const res = await fetch(`${baseUrl}/storage/v1/object/avatars/${ben.userId}/${name}`, {
        method: 'POST',
        headers: { authorization: `Bearer ${ben.accessToken}`, 'content-type': type },
        body: new Uint8Array(bytes),
      });
      expect([name, res.status, (await res.json()).code]).toEqual([name, status, code]);
    }
    // supabase-js sees the same refusal.
    const viaClient = await avatars.upload(`${ben.userId}/evil.svg`, new Blob([SVG_WITH_SCRIPT], { type: 'image/svg+xml' }));
    expect(viaClient.error).toMatchObject({ status: 415, statusCode: '415' });
    expect(await objectCount(ben.userId)).toBe(0);
  });

  it('refuses a decompression bomb by its header, before decoding it', async () => {
    const cat = await user('img-cat');
    const bomb = await pixelBomb(30_000, 30_000);
    expect(bomb.length).toBeLessThan(1000);
    const res = await fetch(`${baseUrl}/storage/v1/object/avatars/${cat.userId}/bomb.png`, {
      method: 'POST',
      headers: { authorization: `Bearer ${cat.accessToken}`, 'content-type': 'image/png' },
      body: new Uint8Array(bomb),
    });
    expect(res.status).toBe(422);
    expect(await res.json()).toMatchObject({ code: 'image_too_many_pixels', error: 'invalid_image' });
    expect(await objectCount(cat.userId)).toBe(0);
  });

  it('refuses a file over the bucket\'s limit as its bytes pass it', async () => {
    const dee = await user('img-dee');
    const big = Buffer.alloc(5 * 1024 * 1024 + 1, 1);
    const up = await dee.storage.from('avatars').upload(`${dee.userId}/big.png`, big, { contentType: 'image/png' });
    expect(up.error).toMatchObject({ status: 413, statusCode: '413' });
    // Without Content-Length (a stream): refused all the same.
    const streamed = await fetch(`${baseUrl}/storage/v1/object/avatars/${dee.userId}/big2.png`, {
      method: 'POST',
      headers: { authorization: `Bearer ${dee.accessToken}`, 'content-type': 'image/png' },
      body: new ReadableStream({
        start(controller) {
          for (let i = 0; i < 6; i++) controller.enqueue(new Uint8Array(1024 * 1024));
          controller.close();
        },
      }),
      duplex: 'half',
    } as RequestInit);
    expect(streamed.status).toBe(413);
    expect((await streamed.json()).code).toBe('object_too_large');
    expect(await objectCount(dee.userId)).toBe(0);
  });
});

describe('transformations', () => {
  it('resizes by the query, in the format Accept asks for, and serves a repeat from the cache', async () => {
    const eve = await user('img-eve');
    const avatars = eve.storage.from('avatars');
    await avatars.upload(`${eve.userId}/wide.png`, await png(800, 400), { contentType: 'image/png' });
    const url = avatars.getPublicUrl(`${eve.userId}/wide.png`, { transform: { width: 256, height: 256 } }).data.publicUrl;
    expect(url).toBe(`${baseUrl}/storage/v1/render/image/public/avatars/${eve.userId}/wide.png?width=256&height=256`);

    const first = await fetch(url, { headers: { accept: 'image/avif,image/webp,*/*' } });
    expect(first.status).toBe(200);
    expect(first.headers.get('content-type')).toBe('image/webp');
    expect(first.headers.get('vary')).toBe('Accept');
    const bytes = Buffer.from(await first.arrayBuffer());
    const meta = await sharp(bytes).metadata();
    expect([meta.format, meta.width, meta.height]).toEqual(['webp', 256, 256]);

    // Kept beside the image in the byte store.
    const [object] = await db()`select storage_key from app.storage_objects where name = ${`${eve.userId}/wide.png`}`;
    const cached = path.join(dataDir, 'storage', 'renders', String(object!.storage_key).replace('objects/', ''));
    expect(fs.readdirSync(cached)).toEqual(['256x256-cover-q80.webp']);
    const again = await fetch(url, { headers: { accept: 'image/avif,image/webp,*/*' } });
    expect(Buffer.from(await again.arrayBuffer()).equals(bytes)).toBe(true);
    expect(again.headers.get('etag')).toBe(first.headers.get('etag'));
    const held = await fetch(url, { headers: { accept: 'image/webp', 'if-none-match': first.headers.get('etag')! } });
    expect(held.status).toBe(304);

    const avif = await fetch(url, { headers: { accept: 'image/avif' } });
    expect(avif.headers.get('content-type')).toBe('image/avif');
    const original = await fetch(`${url}&resize=contain`, { headers: { accept: 'image/png,*/*' } });
    expect(original.headers.get('content-type')).toBe('image/png');
    expect((await sharp(Buffer.from(await original.arrayBuffer())).metadata()).height).toBe(128);
  });

  it('at most 2,500 px a side; only images; a signed URL carries its transformation', async () => {
    const fay = await user('img-fay');
    const avatars = fay.storage.from('avatars');
    await avatars.upload(`${fay.userId}/p.png`, await png(300, 300), { contentType: 'image/png' });
    const tooWide = await fetch(`${baseUrl}/storage/v1/render/image/public/avatars/${fay.userId}/p.png?width=2501`);
    expect(tooWide.status).toBe(400);
    expect(await tooWide.json()).toMatchObject({ code: 'bad_request', message: 'query.width: Too big: expected number to be <=2500' });

    await fay.storage.from('attachments').upload(`${fay.userId}/doc.txt`, Buffer.from('text'));
    const notImage = await fetch(`${baseUrl}/storage/v1/render/image/authenticated/attachments/${fay.userId}/doc.txt?width=10`, {
      headers: { authorization: `Bearer ${fay.accessToken}` },
    });
    expect(notImage.status).toBe(415);
    expect((await notImage.json()).code).toBe('not_an_image');

    const signed = await avatars.createSignedUrl(`${fay.userId}/p.png`, 60, { transform: { width: 64, height: 32, resize: 'fill' } });
    expect(signed.data!.signedUrl).toContain('/storage/v1/render/image/sign/avatars/');
    const res = await fetch(signed.data!.signedUrl, { headers: { accept: 'image/webp' } });
    expect(res.status).toBe(200);
    const meta = await sharp(Buffer.from(await res.arrayBuffer())).metadata();
    expect([meta.width, meta.height]).toEqual([64, 32]);

    // A size between two steps is rounded up to the next (100 → 128).
    const download = await avatars.download(`${fay.userId}/p.png`, { transform: { width: 100 } });
    expect(download.error).toBeNull();
    expect((await sharp(Buffer.from(await download.data!.arrayBuffer())).metadata()).width).toBe(128);
  });
});

// Storage test helpers: supabase-js's storage client against the test gateway
// (every JSON answer checked against the OpenAPI document, as api() does),
// images made with sharp (with EXIF and GPS, turned by their EXIF
// orientation, of huge declared dimensions), and reads of the byte store
// and the storage tables.
import zlib from 'node:zlib';
import { createClient } from '@supabase/supabase-js';
import sharp from 'sharp';
import WebSocket from 'ws';
import { checkContract } from './contract.ts';

/** fetch, with the contract check of every JSON answer. */
export function contractFetch(baseUrl: string): typeof fetch {
  return async (input, init) => {
    const res = await fetch(input, init);
    const url = new URL(typeof input === 'string' ? input : input instanceof URL ? input.href : input.url);
    const type = res.headers.get('content-type');
    if (type && /\bjson\b/.test(type)) {
      const body = await res.clone().json().catch(() => undefined);
      await checkContract(baseUrl, init?.method ?? 'GET', url.pathname, res.status, type, body);
    } else {
      await checkContract(baseUrl, init?.method ?? 'GET', url.pathname, res.status, type, undefined);
    }
    return res;
  };
}

/** supabase-js's storage client, signed in with `token` (or anonymous), as an app would make it. */
export function storageClient(baseUrl: string, token?: string) {
  const client = createClient(baseUrl, 'any-anon-key', {
    ...(token ? { accessToken: async () => token } : {}),
    global: { fetch: contractFetch(baseUrl) },
    auth: { persistSession: false, autoRefreshToken: false },
    // Node 20 has no WebSocket of its own (the client makes a realtime client it never opens here).
    realtime: { transport: WebSocket as never },
  });
  return client.storage;
}

/** A PNG of one colour. */
export function png(width: number, height: number, color = { r: 30, g: 120, b: 200 }): Promise<Buffer> {
  return sharp({ create: { width, height, channels: 3, background: color } }).png().toBuffer();
}

/** A JPEG as a phone writes it: turned by EXIF orientation 6 (90° clockwise), with a camera and a GPS position. */
export function phonePhoto(width: number, height: number): Promise<Buffer> {
  return sharp({ create: { width, height, channels: 3, background: { r: 200, g: 60, b: 20 } } })
    .jpeg({ quality: 90 })
    .withMetadata({ orientation: 6 })
    .withExifMerge({
      IFD0: { Make: 'PhoneCo', Model: 'Pocket 12' },
      IFD3: { GPSLatitudeRef: 'N', GPSLatitude: '52/1 31/1 12/1', GPSLongitudeRef: 'E', GPSLongitude: '13/1 24/1 36/1' },
    })
    .toBuffer();
}

/** A tiny PNG whose header claims `width` × `height` pixels (a decompression bomb: it says so before anything is decoded). */
export async function pixelBomb(width: number, height: number): Promise<Buffer> {
  const image = Buffer.from(await png(8, 8));
  // IHDR is the first chunk: length (4), type (4), width (4), height (4), ..., CRC over type and data.
  image.writeUInt32BE(width, 16);
  image.writeUInt32BE(height, 20);
  const crc = zlib.crc32(image.subarray(12, 29));
  image.writeUInt32BE(crc >>> 0, 29);
  return image;
}

export const SVG_WITH_SCRIPT = Buffer.from(
  '<?xml version="1.0"?>\n<svg xmlns="http://www.w3.org/2000/svg" width="10" height="10"><script>fetch("/steal?c="+document.cookie)</script><rect width="10" height="10"/></svg>',
);
export const HTML_PAGE = Buffer.from('<!DOCTYPE html><html><body><script>alert(document.domain)</script></body></html>');

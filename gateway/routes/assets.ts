// GET /assets/event.png: the image of an event that has none of its own, so
// that every share preview and schema.org Event names one (Google's Event
// rich result wants an image; chat apps show a large card only with one).
// A plain calendar drawn in the service's blue, 1200×630 (the 1.91:1 of Open
// Graph cards), made once per process as a PNG (RFC 2083: IHDR, one
// deflated IDAT, IEND; no image library needed for flat shapes).
import zlib from 'node:zlib';
import { defineRoute } from '../http/route.ts';
import { content } from '../http/responses.ts';

export const DEFAULT_EVENT_IMAGE_PATH = '/assets/event.png';
export const DEFAULT_EVENT_IMAGE_SIZE = { width: 1200, height: 630 } as const;

type Rgb = readonly [number, number, number];
const BLUE: Rgb = [0x25, 0x63, 0xeb];
const DARK: Rgb = [0x1e, 0x40, 0xaf];
const WHITE: Rgb = [0xff, 0xff, 0xff];
const LIGHT: Rgb = [0xdb, 0xea, 0xfe];

/** The colour of one pixel: a calendar sheet (a dark band, two rings, a grid of days) on blue. */
function pixel(x: number, y: number): Rgb {
  const left = 420;
  const top = 150;
  const width = 360;
  const height = 330;
  const inSheet = x >= left && x < left + width && y >= top && y < top + height;
  // The rings above the sheet.
  for (const ring of [left + 90, left + width - 90]) {
    if (x >= ring - 12 && x < ring + 12 && y >= top - 30 && y < top + 20) return DARK;
  }
  if (!inSheet) return BLUE;
  if (y < top + 80) return DARK;
  // Days: 7 columns × 4 rows of squares.
  const col = Math.floor((x - left - 24) / 46);
  const row = Math.floor((y - top - 100) / 54);
  const inDay = col >= 0 && col < 7 && row >= 0 && row < 4 && (x - left - 24) % 46 < 32 && (y - top - 100) % 54 < 36;
  if (inDay) return col === 4 && row === 1 ? BLUE : LIGHT;
  return WHITE;
}

/** CRC-32 of PNG chunks (zlib.crc32 where this Node has it). */
function crc32(bytes: Buffer): number {
  const native = (zlib as { crc32?: (data: Buffer) => number }).crc32;
  if (native) return native(bytes);
  let crc = ~0;
  for (const byte of bytes) {
    crc ^= byte;
    for (let k = 0; k < 8; k++) crc = (crc >>> 1) ^ (0xedb88320 & -(crc & 1));
  }
  return ~crc >>> 0;
}

function chunk(type: string, data: Buffer): Buffer {
  const head = Buffer.alloc(8);
  head.writeUInt32BE(data.length, 0);
  head.write(type, 4, 'ascii');
  const crc = Buffer.alloc(4);
  crc.writeUInt32BE(crc32(Buffer.concat([head.subarray(4), data])) >>> 0, 0);
  return Buffer.concat([head, data, crc]);
}

/** The PNG bytes. */
export function drawDefaultEventImage(): Buffer {
  const { width, height } = DEFAULT_EVENT_IMAGE_SIZE;
  const raw = Buffer.alloc((width * 3 + 1) * height);
  for (let y = 0; y < height; y++) {
    const row = y * (width * 3 + 1);
    raw[row] = 0; // filter: none
    for (let x = 0; x < width; x++) {
      const [r, g, b] = pixel(x, y);
      raw[row + 1 + x * 3] = r;
      raw[row + 2 + x * 3] = g;
      raw[row + 3 + x * 3] = b;
    }
  }
  const header = Buffer.alloc(13);
  header.writeUInt32BE(width, 0);
  header.writeUInt32BE(height, 4);
  header[8] = 8; // bit depth
  header[9] = 2; // colour type: truecolour
  const signature = Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]);
  return Buffer.concat([signature, chunk('IHDR', header), chunk('IDAT', zlib.deflateSync(raw, { level: 9 })), chunk('IEND', Buffer.alloc(0))]);
}

let image: Buffer | undefined;

export const assetRoutes = [
  defineRoute({
    method: 'get',
    path: DEFAULT_EVENT_IMAGE_PATH,
    summary: "The image of an event that has none of its own (its share previews and schema.org Event name it): a PNG, 1200×630.",
    description:
      "The image that an event's public page names (og:image, the schema.org Event's image) when the event has none of its own: a calendar on blue, 1200×630 pixels, PNG. No credential; cached for a day.",
    auth: 'public',
    responses: { 200: content('image/png', 'A PNG image, 1200×630.') },
    async handler() {
      image ??= drawDefaultEventImage();
      return { status: 200, contentType: 'image/png', text: image, headers: { 'Cache-Control': 'public, max-age=86400' } };
    },
  }),
];

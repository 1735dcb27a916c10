// Images: what an image bucket takes, and transformations.
//
// On upload (normalize), the bytes are sniffed (file-type, and a look at the
// first bytes for SVG and HTML, which are text): SVG and HTML are refused
// (they can carry script, and a browser opening the object would run it), so
// is anything that is not a JPEG, PNG, WebP, AVIF or GIF image, and a
// declared type the bytes contradict. The image's size is read from its
// header before it is decoded: more than STORAGE_MAX_IMAGE_PIXELS pixels (a
// small file of huge dimensions, a decompression bomb) is refused. Then sharp
// (libvips) writes it again, turned as its EXIF orientation says and
// without its metadata: no EXIF (a phone photo's GPS position, camera,
// times), XMP, IPTC or comments leave with the object.
//
// Transformations (render): width and height (at most 2,500 px a side),
// resize cover, contain or fill, quality; the format follows the client's
// Accept (WebP when accepted, else AVIF when accepted, else the original's),
// as Supabase's image transformations do.
//
// sharp works on libuv's threads, off the event loop. How many images a
// process works on at once is bounded by a fair queue (core/auth/fair-queue.ts:
// STORAGE_IMAGE_CONCURRENCY running, STORAGE_IMAGE_MAX_QUEUED waiting, one
// client's flood waits behind the others); libvips' own operation cache is off
// so that memory follows the work in hand.
import fsp from 'node:fs/promises';
import type { Readable } from 'node:stream';
import { fileTypeFromFile } from 'file-type';
import sharp, { type OutputOptions } from 'sharp';
import { HttpError } from '../core/web/errors.ts';
import { FairQueue } from '../core/auth/fair-queue.ts';

sharp.cache(false);

/** What an image bucket takes: MIME type → sharp's output format. */
export const IMAGE_FORMATS = {
  'image/jpeg': 'jpeg',
  'image/png': 'png',
  'image/webp': 'webp',
  'image/avif': 'avif',
  'image/gif': 'gif',
} as const;
export type ImageType = keyof typeof IMAGE_FORMATS;
type Format = (typeof IMAGE_FORMATS)[ImageType];

const MIME_OF: Record<Format, ImageType> = { jpeg: 'image/jpeg', png: 'image/png', webp: 'image/webp', avif: 'image/avif', gif: 'image/gif' };

/** Declared types that say nothing about the bytes (a client's default): the sniffed type stands. */
const UNDECLARED = new Set(['', 'application/octet-stream', 'binary/octet-stream', 'text/plain']);

/** The largest side of a transformation, in pixels. */
export const MAX_RENDER_SIDE = 2500;

export interface ImageInfo {
  contentType: ImageType;
  width: number;
  height: number;
}

export interface RenderOptions {
  width?: number;
  height?: number;
  resize: 'cover' | 'contain' | 'fill';
  /** 20 to 100; after normalizeRender, only for the formats that use it (JPEG, WebP, AVIF). */
  quality?: number;
  /** `origin`: the original's format whatever the client accepts. */
  format?: 'origin';
}

/**
 * The sizes the larger side of a transformation is rounded up to; the other
 * side keeps the ratio asked for. A few steps make the many sizes clients ask
 * for a few cached variants.
 */
export const RENDER_STEPS = [16, 32, 48, 64, 96, 128, 192, 256, 320, 384, 480, 512, 640, 768, 1024, 1200, 1280, 1600, 1920, 2048, MAX_RENDER_SIDE] as const;

/** The output formats whose encoder takes a quality. */
const QUALITY_TYPES: ReadonlySet<ImageType> = new Set(['image/jpeg', 'image/webp', 'image/avif']);

/**
 * The options a transformation is made (and cached) with: the larger side
 * asked for rounded up to a step of RENDER_STEPS, the other scaled by the
 * same factor; `resize` only when both sides are given (one side keeps the
 * image's ratio whatever it says); `quality` rounded to a multiple of 10, and
 * only for an output that uses it (PNG and GIF do not). Options that make the
 * same image make the same variant.
 */
export function normalizeRender(options: RenderOptions, output: ImageType): RenderOptions {
  let { width, height } = options;
  if (width !== undefined || height !== undefined) {
    const larger = Math.max(width ?? 0, height ?? 0);
    const step = RENDER_STEPS.find((s) => s >= larger) ?? MAX_RENDER_SIDE;
    const scale = (side: number | undefined) => (side === undefined ? undefined : Math.min(MAX_RENDER_SIDE, Math.max(1, Math.round((side * step) / larger))));
    width = scale(width);
    height = scale(height);
  }
  return {
    width,
    height,
    resize: width !== undefined && height !== undefined ? options.resize : 'cover',
    quality: QUALITY_TYPES.has(output) ? Math.min(100, Math.max(20, Math.round((options.quality ?? DEFAULT_QUALITY) / 10) * 10)) : undefined,
    format: options.format,
  };
}

/** The quality of a transformation that names none. */
export const DEFAULT_QUALITY = 80;

/** The name of a transformation among an object version's cached ones (normalized options and output type). */
export function renderVariant(options: RenderOptions, output: ImageType): string {
  const quality = options.quality === undefined ? '' : `-q${options.quality}`;
  return `${options.width ?? 0}x${options.height ?? 0}-${options.resize}${quality}.${output.slice('image/'.length)}`;
}

/** Whose turn it is in the image queue (core/auth/fair-queue.ts): the user, else the client address. */
export function imageClient(caller: { user: { sub?: string } | null; clientIp: string }): string {
  return caller.user?.sub ?? `ip:${caller.clientIp}`;
}

export interface ImageWorkOptions {
  maxPixels: number;
  concurrency: number;
  maxQueued: number;
}

/** The media type without parameters, lower case (`image/JPEG; q=1` → `image/jpeg`). */
export function bareType(contentType: string | undefined): string {
  return (contentType ?? '').split(';')[0]!.trim().toLowerCase();
}

/** Whether the first bytes of a file are SVG or HTML (text file-type does not name). */
async function activeContent(file: string): Promise<'svg' | 'html' | null> {
  const handle = await fsp.open(file, 'r');
  try {
    const { buffer, bytesRead } = await handle.read(Buffer.alloc(4096), 0, 4096, 0);
    const head = buffer
      .subarray(0, bytesRead)
      .toString('utf8')
      .replace(/^\ufeff/, '')
      .replace(/\u0000/g, '')
      .trimStart()
      .toLowerCase();
    if (/<svg[\s>/]/.test(head) || (head.startsWith('<?xml') && head.includes('<svg'))) return 'svg';
    if (/^(<!--[\s\S]*?-->\s*)*<(!doctype\s+html|html|head|body|script|iframe|meta|title|div|a\s)/.test(head)) return 'html';
    return null;
  } finally {
    await handle.close();
  }
}

export class ImageWork {
  private readonly queue: FairQueue;

  constructor(readonly options: ImageWorkOptions) {
    this.queue = new FairQueue({ concurrency: options.concurrency, maxQueued: options.maxQueued, what: 'images' });
  }

  /** Work running and waiting now (tests, diagnostics). */
  get load() {
    return this.queue.load;
  }

  /**
   * Checks an uploaded file for an image bucket and writes it again to
   * `output`, turned upright and without metadata. Refusals are HttpErrors
   * with the codes of the register (415, 422).
   */
  async normalize(client: string, input: string, output: string, declared: string | undefined): Promise<ImageInfo> {
    const active = await activeContent(input);
    if (active === 'svg') throw new HttpError(415, 'svg_not_allowed', 'SVG images are not allowed in this bucket');
    if (active === 'html') throw new HttpError(415, 'html_not_allowed', 'HTML is not allowed in this bucket');
    const claimed = bareType(declared);
    if (claimed === 'image/svg+xml') throw new HttpError(415, 'svg_not_allowed', 'SVG images are not allowed in this bucket');
    if (claimed === 'text/html' || claimed === 'application/xhtml+xml') throw new HttpError(415, 'html_not_allowed', 'HTML is not allowed in this bucket');
    const sniffed = (await fileTypeFromFile(input))?.mime as string | undefined;
    if (!sniffed || !(sniffed in IMAGE_FORMATS)) {
      throw new HttpError(415, 'not_an_image', `the content is not a JPEG, PNG, WebP, AVIF or GIF image${sniffed ? ` (it is ${sniffed})` : ''}`);
    }
    const type = sniffed as ImageType;
    const same = claimed === type || (claimed === 'image/jpg' && type === 'image/jpeg');
    if (!UNDECLARED.has(claimed) && !same) {
      throw new HttpError(415, 'mime_type_mismatch', `the content is ${type}, not the declared ${claimed}`);
    }
    return this.queue.run(client, async () => {
      const meta = await this.header(input);
      const frames = meta.pages ?? 1;
      if (meta.width * meta.height * frames > this.options.maxPixels) {
        throw new HttpError(422, 'image_too_many_pixels',
          `the image is ${meta.width}x${meta.height}${frames > 1 ? `x${frames} frames` : ''}: more than ${this.options.maxPixels} pixels`);
      }
      const format = IMAGE_FORMATS[type];
      try {
        const info = await sharp(input, { limitInputPixels: this.options.maxPixels, animated: frames > 1, failOn: 'error' })
          .rotate() // the EXIF orientation applied; no metadata is kept (sharp keeps none unless asked)
          .toFormat(format, outputOptions(format, 90))
          .toFile(output);
        return { contentType: type, width: info.width, height: info.height / (frames > 1 ? frames : 1) };
      } catch (err) {
        throw decodeFailure(err);
      }
    });
  }

  /** The size of an image from its header (nothing decoded). */
  private async header(input: string): Promise<{ width: number; height: number; pages?: number }> {
    try {
      const meta = await sharp(input, { limitInputPixels: false }).metadata();
      if (!meta.width || !meta.height) throw new Error('no dimensions');
      return { width: meta.width, height: meta.height, pages: meta.pages };
    } catch (err) {
      throw decodeFailure(err);
    }
  }

  /** The output type of a transformation of an image of `type` for a client accepting `accept`. */
  outputType(type: string, options: RenderOptions, accept: string | undefined): ImageType {
    const original = (type in IMAGE_FORMATS ? type : 'image/jpeg') as ImageType;
    if (options.format === 'origin') return original;
    const accepted = (accept ?? '').toLowerCase();
    if (/\bimage\/webp\b/.test(accepted)) return 'image/webp';
    if (/\bimage\/avif\b/.test(accepted)) return 'image/avif';
    return original;
  }

  /** A transformation of the image read from `source`, as `output` (a small file: at most 2,500 px a side). */
  async render(client: string, source: Readable, options: RenderOptions, output: ImageType): Promise<Buffer> {
    return this.queue.run(client, async () => {
      const format = IMAGE_FORMATS[output];
      const pipeline = sharp({ limitInputPixels: this.options.maxPixels, failOn: 'error' }).rotate();
      if (options.width || options.height) {
        pipeline.resize({
          width: options.width,
          height: options.height,
          fit: options.resize === 'contain' ? 'inside' : options.resize,
          withoutEnlargement: true,
        });
      } else {
        pipeline.resize({ width: MAX_RENDER_SIDE, height: MAX_RENDER_SIDE, fit: 'inside', withoutEnlargement: true });
      }
      pipeline.toFormat(format, outputOptions(format, options.quality ?? DEFAULT_QUALITY));
      source.on('error', (err) => pipeline.destroy(err));
      try {
        return await source.pipe(pipeline).toBuffer();
      } catch (err) {
        throw decodeFailure(err);
      }
    });
  }
}

/** The MIME type of sharp's format name. */
export function mimeOf(format: Format): ImageType {
  return MIME_OF[format];
}

function outputOptions(format: Format, quality: number): OutputOptions & Record<string, unknown> {
  switch (format) {
    case 'avif':
      return { quality: Math.max(1, quality - 25), effort: 2 };
    case 'png':
      return { compressionLevel: 6 };
    case 'gif':
      return {};
    default:
      return { quality };
  }
}

function decodeFailure(err: unknown): HttpError {
  if (err instanceof HttpError) return err;
  const message = (err as Error)?.message ?? '';
  if (/pixel limit/i.test(message)) return new HttpError(422, 'image_too_many_pixels', 'the image has more pixels than the service decodes');
  return new HttpError(422, 'invalid_image', 'the image cannot be decoded');
}

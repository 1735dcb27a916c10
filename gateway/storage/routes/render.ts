// Image transformations at /storage/v1/render/image (docs/storage.md): the
// URLs supabase-js makes with `{ transform: { width, height, resize,
// quality } }` (getPublicUrl, download, createSignedUrl). Who may read the
// image is SQL's (the same functions as the object routes); the work is
// gateway/storage/images.ts (sharp, off the event loop, bounded), and the
// result is kept in the byte store beside the image, so that a repeat is a
// plain read. The format follows Accept (WebP, else AVIF, else the
// original's): answers vary with Accept.
import { fileTypeFromStream } from 'file-type';
import { z } from 'zod';
import { defineRoute, type Context, type Reply } from '../../http/route.ts';
import { noneMatch } from '../../http/conditional.ts';
import { HttpError } from '../../core/web/errors.ts';
import { QueryInteger } from '../../core/web/schemas.ts';
import { content, errors, noContent } from '../../http/responses.ts';
import type { Tx } from '../../core/database/transaction.ts';
import { NotStoredError } from '../byte-store.ts';
import { readObject, readSigned, servedCacheControl, streamTo } from '../downloads.ts';
import { IMAGE_FORMATS, imageClient, MAX_RENDER_SIDE, type ImageType, type RenderOptions } from '../images.ts';
import type { RenderCache, StorageService } from '../service.ts';
import { DownloadQuery, ObjectParams, storageRoute, type ObjectRow, type Transform } from '../shapes.ts';

/** The transformation options of a render query. */
const RenderQuery = DownloadQuery.extend({
  width: QueryInteger(1, MAX_RENDER_SIDE).optional().describe('Width in pixels (at most 2,500).').meta({ example: 256 }),
  height: QueryInteger(1, MAX_RENDER_SIDE).optional().describe('Height in pixels (at most 2,500).').meta({ example: 256 }),
  resize: z.enum(['cover', 'contain', 'fill']).optional().describe('cover (default): fill the size, cropping; contain: fit inside it; fill: stretch to it.'),
  quality: QueryInteger(20, 100).optional().describe('Quality, 20 to 100 (default 80).').meta({ example: 80 }),
  format: z.enum(['origin']).optional().describe('`origin`: keep the original format whatever the client accepts.'),
});

/** Render options with their defaults (gateway/storage/images.ts normalizeRender makes them a cached variant's). */
function renderOptions(t: Partial<z.infer<typeof Transform>>): RenderOptions {
  return { width: t.width, height: t.height, resize: t.resize ?? 'cover', quality: t.quality, format: t.format };
}

const AcceptHeaders = z.object({
  accept: z.string().max(1024).optional().describe('WebP is answered when accepted (image/webp), else AVIF (image/avif), else the original format.').meta({ example: 'image/webp,image/*' }),
  'if-none-match': z.string().max(4096).optional().describe("The ETag held: 304 when it is still the transformation's.").meta({ example: '"7b8f2e0c1a9d4e6f8a7b6c5d4e3f2a1b"' }),
});

const IMAGE = content('image/webp', 'The transformed image (WebP, AVIF, or the original format, as Accept and `format` say), with ETag, Cache-Control, Vary: Accept and X-Transformations (what was applied, as Supabase Storage says it: `height:200,width:200,resizing_type:fill,quality:60`).');
const NOT_MODIFIED = noContent('Not modified: the ETag sent is still the transformation\'s (no body).');
const RENDER_ERRORS = {
  404: errors('bucket_not_found', 'object_not_found'),
  415: errors('not_an_image'),
  422: errors('image_too_many_pixels', 'invalid_image'),
  429: errors('too_many_renders'),
} as const;

type RenderContext = Context<z.infer<typeof ObjectParams>, z.infer<typeof RenderQuery>, undefined, z.infer<typeof AcceptHeaders>>;

/** The transformation of an object (options from the query, or from a signed URL's token). */
async function renderReply(ctx: RenderContext, object: ObjectRow, transform: Partial<z.infer<typeof RenderQuery>>): Promise<Reply> {
  const { storage } = ctx.services;
  // An image bucket's objects were sniffed at upload; another bucket's are sniffed now (their first bytes), and
  // transformed when they are JPEG, PNG, WebP, AVIF or GIF, whatever type they were uploaded with.
  const type = object.images ? object.content_type : await sniffedImage(storage, object.storage_key);
  if (!type) throw new HttpError(415, 'not_an_image', 'only JPEG, PNG, WebP, AVIF and GIF images can be transformed');
  const options = renderOptions(transform);
  const output = storage.images.outputType(type, options, ctx.headers.accept);
  const { renderMissesPerMinute, renderVariants, renderCacheBytes } = storage.config;
  // The cache's records (SQL, as the gateway's own role, on the primary): a
  // miss counted per client address and recorded, then its size; each answers
  // what to evict.
  const record = async (call: (tx: Tx) => Promise<{ keys: string[] }[]>) => (await ctx.db(call, null, { readOnly: false }))[0]!.keys;
  const cache: RenderCache = {
    begin: (variant) =>
      record((tx) => tx`select private.storage_render_begin(${object.storage_key}, ${variant}, ${ctx.clientIp}, ${renderMissesPerMinute}, ${renderVariants}) as keys`),
    stored: (variant, size) =>
      record((tx) => tx`select private.storage_render_stored(${object.storage_key}, ${variant}, ${size}, ${renderCacheBytes}) as keys`),
  };
  let rendered;
  try {
    rendered = await storage.render(imageClient(ctx), object, options, output, cache);
  } catch (err) {
    if (err instanceof NotStoredError) throw new HttpError(404, 'object_not_found', 'Object not found');
    throw err;
  }
  const headers: Record<string, string> = {
    ETag: rendered.etag,
    'Cache-Control': servedCacheControl(object),
    Vary: 'Accept',
    'X-Content-Type-Options': 'nosniff',
    'Content-Security-Policy': "default-src 'none'; sandbox",
  };
  const applied = transformationsApplied(transform);
  if (applied) headers['X-Transformations'] = applied;
  if (noneMatch(ctx.headers['if-none-match'], rendered.etag)) return { status: 304, headers };
  headers['Content-Type'] = rendered.contentType;
  headers['Content-Length'] = String(rendered.size);
  if (ctx.query.download !== undefined) {
    headers['Content-Disposition'] = `attachment; filename*=UTF-8''${encodeURIComponent(ctx.query.download || object.name.split('/').pop()!)}`;
  }
  if (ctx.request.method === 'HEAD') return { status: 200, headers, stream: (res) => res.end() };
  const body = await rendered.body();
  return { status: 200, headers, stream: (res) => streamTo(body, res) };
}

/** The image type of stored bytes, read from their first bytes (file-type), if it is one a transformation takes. */
async function sniffedImage(storage: StorageService, key: string): Promise<ImageType | null> {
  let stream;
  try {
    stream = await storage.bytes.get(key);
  } catch (err) {
    if (err instanceof NotStoredError) throw new HttpError(404, 'object_not_found', 'Object not found');
    throw err;
  }
  try {
    const sniffed = await fileTypeFromStream(stream);
    return sniffed && sniffed.mime in IMAGE_FORMATS ? (sniffed.mime as ImageType) : null;
  } finally {
    stream.destroy();
  }
}

const RESIZING_TYPES = { cover: 'fill', contain: 'fit', fill: 'force' } as const;

/** What Supabase Storage's `x-transformations` header says of a transformation asked for (`height:200,width:200,resizing_type:fill,quality:60`). */
export function transformationsApplied(t: Partial<z.infer<typeof Transform>>): string {
  const segments: string[] = [];
  if (t.height) segments.push(`height:${t.height}`);
  if (t.width) segments.push(`width:${t.width}`);
  if (t.width || t.height) segments.push(`resizing_type:${RESIZING_TYPES[t.resize ?? 'cover']}`);
  if (t.quality) segments.push(`quality:${t.quality}`);
  return segments.join(',');
}

const LIMITS = [
  'Width and height are at most 2,500 px; an image is not enlarged. The larger side asked for is rounded up to one of a few sizes (16 to 2,500 px), the other keeps the ratio; quality is rounded to a multiple of 10 and ignored for PNG and GIF.',
  'Transformations are made a few at a time per process, in turn between clients: past the queue, 503 with Retry-After. A client address has at most STORAGE_RENDER_MISSES_PER_MINUTE (120) made a minute (a repeat served from the cache is not counted): past it, 429 `too_many_renders` with Retry-After.',
];

export const storageRenderRoutes = [
  defineRoute({
    method: 'get',
    path: '/storage/v1/render/image/public/:bucket/:path*',
    summary: 'A transformation of an image of a public bucket (no credential).',
    description:
      'A resized image of a public bucket, without a credential: the URL supabase-js `getPublicUrl(path, { transform })` makes, and the event page\'s og:image (1200×630, cover). A repeat is served from the cache.',
    limits: LIMITS,
    auth: 'public',
    errorShape: 'supabase_storage',
    invalidStatus: 400,
    params: ObjectParams,
    query: RenderQuery,
    headers: AcceptHeaders,
    responses: { 200: IMAGE, 304: NOT_MODIFIED, ...RENDER_ERRORS },
    async handler(ctx) {
      return renderReply(ctx, await readObject(ctx, ctx.params.bucket, ctx.params.path, true), ctx.query);
    },
  }),

  defineRoute({
    method: 'get',
    path: '/storage/v1/render/image/authenticated/:bucket/:path*',
    summary: 'A transformation of an image the caller may read.',
    description: 'A resized image the caller may read (supabase-js `download(path, { transform })`).',
    limits: LIMITS,
    auth: 'user',
    ...storageRoute,
    params: ObjectParams,
    query: RenderQuery,
    headers: AcceptHeaders,
    responses: { 200: IMAGE, 304: NOT_MODIFIED, ...RENDER_ERRORS },
    async handler(ctx) {
      return renderReply(ctx, await readObject(ctx, ctx.params.bucket, ctx.params.path, false), ctx.query);
    },
  }),

  defineRoute({
    method: 'get',
    path: '/storage/v1/render/image/sign/:bucket/:path*',
    summary: 'A transformation through a signed URL (no credential).',
    description:
      'The transformation a signed URL was made with (supabase-js `createSignedUrl(path, expiresIn, { transform })`), without a credential; the query\'s own transformation options are ignored.',
    limits: LIMITS,
    auth: 'public',
    errorShape: 'supabase_storage',
    invalidStatus: 400,
    params: ObjectParams,
    query: RenderQuery.extend({ token: z.string().min(1).max(8192).describe("The signed URL's token.").meta({ example: 'eyJhbGciOiJIUzI1NiJ9.e30.sig' }) }),
    headers: AcceptHeaders,
    responses: { 200: IMAGE, 304: NOT_MODIFIED, 400: errors('invalid_signature', 'signature_expired'), ...RENDER_ERRORS },
    async handler(ctx) {
      const object = await readSigned(ctx, ctx.params.bucket, ctx.params.path, ctx.query.token);
      return renderReply(ctx as unknown as RenderContext, object, object.transform ?? {});
    },
  }),
];

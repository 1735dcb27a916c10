// File storage (docs/storage.md): the subset of Supabase Storage's HTTP
// interface that supabase-js's storage client speaks, at /storage/v1, so that
// `supabase.storage.from(bucket)` works unchanged against this service.
//
//   buckets    GET /bucket, /bucket/{id}
//   objects    upload (POST), update/upsert (PUT), download and exists (GET,
//              HEAD), info, list, remove, move, copy
//   signed     signed download URLs (one or many), signed upload URLs
//   public     downloads of public buckets without a credential
//   render     image transformations (routes/storage-render.ts)
//   resumable  TUS uploads (routes/storage-resumable.ts)
//
// Who may do what is SQL's (sql/areas/storage.sql: api.storage_*): these
// handlers validate, call it, move bytes (gateway/storage/) and shape the
// answer. An upload is two transactions with the bytes in between: the
// begin checks everything that can be checked before a byte is read, the
// finish makes the object visible once its bytes are durable (and runs as
// the gateway's own role: it records what the gateway measured). Errors are
// Supabase Storage's body ({statusCode, error, code, message}); statuses are
// the real ones (Supabase answers 400 for most client errors, with the real
// one in statusCode: docs/decisions.md).
import { pipeline } from 'node:stream/promises';
import type { Readable } from 'node:stream';
import { z } from 'zod';
import { defineRoute, type Context, type RawBody, type Reply } from '../http/route.ts';
import { HttpError } from '../core/web/errors.ts';
import { QueryInteger } from '../core/web/schemas.ts';
import { entityTags } from '../http/calendar.ts';
import { content, DateTime, errors, Id, noContent } from '../http/responses.ts';
import { NotStoredError, type ByteRange } from '../storage/byte-store.ts';
import { MAX_RENDER_SIDE, type RenderOptions } from '../storage/images.ts';
import type { StorageService } from '../storage/service.ts';
import { cacheControlOf, userMetadataOf, type Received, type UploadTarget } from '../storage/uploads.ts';

declare module '../http/route.ts' {
  interface Services {
    /** File storage: the byte store, uploads, images (gateway/storage/service.ts). */
    storage: StorageService;
  }
}

// ---------------------------------------------------------------------------
// Shapes
// ---------------------------------------------------------------------------

export const Bucket = z
  .string()
  .regex(/^[a-z0-9][a-z0-9_-]{0,62}$/, { message: 'must be a bucket id (a-z, 0-9, _ and -)' })
  .describe('The bucket: avatars, community-images, event-images, attachments (or one an operator made).')
  .meta({ example: 'avatars' });
export const ObjectPath = z
  .string()
  .min(1)
  .max(1024)
  .describe("The object's path in the bucket, folders included (slashes are part of it); the first folder is the id of its owner.")
  .meta({ example: '5f0c8a9e-3b1d-4c62-9a7e-2d4b6f8a1c03/me.png' });
export const ObjectParams = z.object({ bucket: Bucket, path: ObjectPath });

const ObjectMetadata = z
  .object({
    eTag: z.string().describe('A digest of the bytes (quoted).').meta({ example: '"5d41402abc4b2a76b9719d911017c592"' }),
    size: z.number().int().describe('Bytes.').meta({ example: 48213 }),
    mimetype: z.string().describe('The content type it is served with.').meta({ example: 'image/png' }),
    cacheControl: z.string().describe('The Cache-Control it is served with.').meta({ example: 'max-age=3600' }),
    lastModified: DateTime.describe('When its bytes were last written.'),
    contentLength: z.number().int().describe('Bytes (as size).').meta({ example: 48213 }),
    httpStatusCode: z.number().int().describe('Always 200.').meta({ example: 200 }),
  })
  .meta({ id: 'StorageObjectMetadata', description: "An object's metadata, as Supabase Storage lists it." });

const UserMetadata = z
  .record(z.string(), z.unknown())
  .nullable()
  .describe('The metadata the uploader attached (supabase-js `metadata`), or null.')
  .meta({ example: { alt: 'Ada at the climbing wall' } });

const StoredObject = z
  .object({
    id: Id.describe("The object's id."),
    name: z.string().describe('Its path in the bucket.').meta({ example: '5f0c8a9e-3b1d-4c62-9a7e-2d4b6f8a1c03/me.png' }),
    bucket_id: z.string().describe('Its bucket.').meta({ example: 'avatars' }),
    owner: Id.nullable().describe('The user who uploaded it (null once that account is gone).'),
    owner_id: Id.nullable().describe('The same, as Supabase Storage also names it.'),
    version: Id.describe('The version of its bytes: a new one on every replacement.'),
    created_at: DateTime.describe('When it was created.'),
    updated_at: DateTime.describe('When it last changed.'),
    last_accessed_at: DateTime.describe('When it last changed (reads are not tracked).'),
    metadata: ObjectMetadata,
    user_metadata: UserMetadata,
  })
  .meta({ id: 'StorageObject', description: 'A stored object, as Supabase Storage answers it.' });

const ListEntry = z
  .object({
    name: z.string().describe('The name under the prefix: a folder, or an object.').meta({ example: 'me.png' }),
    id: Id.nullable().describe("The object's id; null for a folder."),
    updated_at: DateTime.nullable().describe('When it last changed; null for a folder.'),
    created_at: DateTime.nullable().describe('When it was created; null for a folder.'),
    last_accessed_at: DateTime.nullable().describe('When it last changed; null for a folder.'),
    metadata: ObjectMetadata.nullable().describe('Its metadata; null for a folder.'),
  })
  .meta({ id: 'StorageListEntry', description: 'A folder or an object directly under the listed prefix.' });

const ObjectInfo = z
  .object({
    id: Id.describe("The object's id."),
    name: z.string().describe('Its path in the bucket.').meta({ example: '5f0c8a9e-3b1d-4c62-9a7e-2d4b6f8a1c03/me.png' }),
    version: Id.describe('The version of its bytes.'),
    bucket_id: z.string().describe('Its bucket.').meta({ example: 'avatars' }),
    size: z.number().int().describe('Bytes.').meta({ example: 48213 }),
    content_type: z.string().describe('The content type it is served with.').meta({ example: 'image/png' }),
    cache_control: z.string().describe('The Cache-Control it is served with.').meta({ example: 'max-age=3600' }),
    etag: z.string().describe('A digest of the bytes (quoted).').meta({ example: '"5d41402abc4b2a76b9719d911017c592"' }),
    metadata: UserMetadata,
    last_modified: DateTime.describe('When its bytes were last written.'),
    created_at: DateTime.describe('When it was created.'),
  })
  .meta({ id: 'StorageObjectInfo', description: "An object's information (supabase-js `info()`)." });

const BucketShape = z
  .object({
    id: z.string().describe("The bucket's id.").meta({ example: 'avatars' }),
    name: z.string().describe('Its name (its id).').meta({ example: 'avatars' }),
    owner: z.string().describe('Always empty: buckets are the service\'s.').meta({ example: '' }),
    public: z.boolean().describe('Whether anyone may read its objects (public URLs).'),
    file_size_limit: z.number().int().describe('The largest object, in bytes.').meta({ example: 5242880 }),
    allowed_mime_types: z.array(z.string()).nullable().describe('The types it takes (null: any).').meta({ example: ['image/*'] }),
    created_at: DateTime.describe('When it was made.'),
    updated_at: DateTime.describe('When it last changed.'),
  })
  .meta({ id: 'StorageBucket', description: 'A bucket, as Supabase Storage describes it.' });

const Uploaded = z
  .object({
    Id: Id.describe("The object's id."),
    Key: z.string().describe('The bucket and the path, `bucket/path`.').meta({ example: 'avatars/5f0c8a9e-3b1d-4c62-9a7e-2d4b6f8a1c03/me.png' }),
  })
  .meta({ id: 'StorageUploaded', description: 'Where an upload went.' });

const Message = (example: string) =>
  z.object({ message: z.string().describe('What happened.').meta({ example }) }).describe('Done.');

export const Transform = z
  .object({
    width: z.number().int().min(1).max(MAX_RENDER_SIDE).optional().describe('Width in pixels (at most 2,500).').meta({ example: 256 }),
    height: z.number().int().min(1).max(MAX_RENDER_SIDE).optional().describe('Height in pixels (at most 2,500).').meta({ example: 256 }),
    resize: z.enum(['cover', 'contain', 'fill']).optional().describe('cover (default): fill the size, cropping; contain: fit inside it; fill: stretch to it.'),
    quality: z.number().int().min(20).max(100).optional().describe('Quality, 20 to 100 (default 80).').meta({ example: 80 }),
    format: z.enum(['origin']).optional().describe('`origin`: keep the original format whatever the client accepts.'),
  })
  .describe('An image transformation: width and height at most 2,500 px; the format follows the Accept header (WebP, AVIF) unless `origin`.');

/** Options of the object routes that serve bytes. */
const DownloadQuery = z.object({
  download: z.string().max(255).optional().describe('Serve as an attachment (a download), under this file name if not empty.').meta({ example: 'photo.png' }),
  cacheNonce: z.string().max(255).optional().describe('Ignored: supabase-js sends it to get past caches.').meta({ example: '1' }),
});

const ConditionalHeaders = z.object({
  range: z.string().max(200).optional().describe('One byte range (`bytes=0-1023`, `bytes=1024-`, `bytes=-512`): 206 with that part.').meta({ example: 'bytes=0-1023' }),
  'if-none-match': z.string().max(4096).optional().describe("The ETag held: 304 when it is still the object's.").meta({ example: '"5d41402abc4b2a76b9719d911017c592"' }),
});

const UploadHeaders = z.object({
  'x-upsert': z.enum(['true', 'false']).optional().describe('`true`: replace an object at the path (default false: 409 if one is there).'),
  'cache-control': z.string().max(255).optional().describe('How long it may be cached (`max-age=3600`, the default), when the body is the file; a form sends `cacheControl`.').meta({ example: 'max-age=3600' }),
  'x-metadata': z.string().max(12_000).optional().describe('Metadata to attach: base64 of a JSON object (at most 8 KB).').meta({ example: 'eyJhbHQiOiJtZSJ9' }),
});

// One media type in the document: the multipart form is described in words.
// Generated clients (orval's fetch client) do not compile an operation whose
// body may be either a binary or a form, and supabase-js builds its request
// itself.
const UPLOAD_BODY: RawBody = {
  description:
    "The file: either the body itself, with its Content-Type (as supabase-js sends a Buffer, ArrayBuffer or stream: any Content-Type, the type it is stored with), or a multipart/form-data form (as it sends a Blob or File) with the fields `cacheControl` (seconds, default 3600) and `metadata` (a JSON object) and one file part, whose Content-Type is the object's.",
  content: {
    'application/octet-stream': z.string().meta({ format: 'binary' }).describe('The file (any Content-Type: the type it is stored with).'),
  },
};

const BYTES = content('application/octet-stream', "The object's bytes, with its Content-Type, ETag, Last-Modified, Cache-Control and Content-Length (HEAD: the headers only).");
const PARTIAL = content('application/octet-stream', 'The range asked for, with Content-Range.');
const NOT_MODIFIED = noContent("Not modified: the ETag sent is still the object's (no body).");

/** The object routes' refusals that come from the object itself. */
const READ_ERRORS = { 404: errors('bucket_not_found', 'object_not_found'), 416: errors('invalid_range') } as const;
const UPLOAD_ERRORS = {
  400: errors('invalid_key'),
  403: errors('storage_access_denied'),
  404: errors('bucket_not_found', 'upload_not_found'),
  409: errors('object_exists'),
  413: errors('object_too_large', 'quota_exceeded'),
  415: errors('invalid_mime_type', 'mime_type_mismatch', 'svg_not_allowed', 'html_not_allowed', 'not_an_image'),
  422: errors('image_too_many_pixels', 'invalid_image'),
  429: errors('too_many_uploads'),
  507: errors('storage_full'),
} as const;

// ---------------------------------------------------------------------------
// What the handlers share
// ---------------------------------------------------------------------------

/** A row of api.storage_object_get / api.storage_object_signed. */
export interface ObjectRow {
  id: string;
  bucket_id: string;
  name: string;
  storage_key: string;
  size: string | number;
  content_type: string;
  cache_control: string;
  etag: string;
  width: number | null;
  height: number | null;
  user_metadata: Record<string, unknown> | null;
  version: string;
  created_at: Date;
  updated_at: Date;
  public: boolean;
  images: boolean;
  download_as_attachment: boolean;
  transform?: z.infer<typeof Transform> | null;
}

type AnyContext = Context<unknown, unknown, unknown, unknown>;

/** Whose turn it is in the image queue (core/auth/fair-queue.ts): the user, else the client address. */
export const clientKey = (ctx: Pick<AnyContext, 'user' | 'clientIp'>): string => ctx.user?.sub ?? `ip:${ctx.clientIp}`;

/** The object a route serves: api.storage_object_get (a credential, or a public bucket's /public/ route). */
export async function readObject(ctx: Pick<AnyContext, 'db'>, bucket: string, path: string, publicOnly: boolean): Promise<ObjectRow> {
  const [row] = await ctx.db((tx) => tx<ObjectRow[]>`select * from api.storage_object_get(${bucket}, ${path}, ${publicOnly})`);
  return row!;
}

/**
 * The object a signed URL names: api.storage_object_signed. The URL's path is
 * percent-encoded where it needs to be (a space, `?`), and supabase-js encodes
 * the URL it is given once more (`encodeURI`), so such a character arrives
 * escaped twice: a name never holds `%`, so an escape left after the router's
 * decoding is decoded again.
 */
export async function readSigned(ctx: Pick<AnyContext, 'db'>, bucket: string, encodedPath: string, token: string): Promise<ObjectRow> {
  let path = encodedPath;
  if (path.includes('%')) {
    try {
      path = decodeURIComponent(path);
    } catch {
      // Not an escape: the name is refused as it is.
    }
  }
  const [row] = await ctx.db((tx) => tx<ObjectRow[]>`select * from api.storage_object_signed(${bucket}, ${path}, ${token})`);
  return row!;
}

/** Whether If-None-Match names `etag` (weak comparison, `*` included). */
export function notModified(ifNoneMatch: string | undefined, etag: string): boolean {
  const tags = entityTags(ifNoneMatch);
  return tags !== null && (tags.includes('*') || tags.includes(etag));
}

/** One byte range of `size` bytes; null: the whole (no Range, or one this serves whole); 'unsatisfiable': 416. */
export function byteRange(header: string | undefined, size: number): ByteRange | 'unsatisfiable' | null {
  const m = header === undefined ? null : /^\s*bytes\s*=\s*(\d*)\s*-\s*(\d*)\s*$/i.exec(header);
  if (!m || (m[1] === '' && m[2] === '')) return null; // absent, several ranges, or not bytes: the whole object
  if (m[1] === '') {
    const suffix = Number(m[2]);
    if (suffix === 0 || size === 0) return 'unsatisfiable';
    return { start: Math.max(0, size - suffix), end: size - 1 };
  }
  const start = Number(m[1]);
  const end = m[2] === '' ? size - 1 : Math.min(Number(m[2]), size - 1);
  if (start >= size || start > end) return 'unsatisfiable';
  return { start, end };
}

/** Content-Disposition: attachment, with a file name (ASCII quoted, and UTF-8 encoded). */
export function attachment(name: string): string {
  const ascii = name.replace(/[^\x20-\x7e]|["\\]/g, '_');
  return `attachment; filename="${ascii}"; filename*=UTF-8''${encodeURIComponent(name)}`;
}

/**
 * The Cache-Control an object (or a transformation of it) is served with: its
 * own; a private bucket's never sits in a shared cache, whatever its uploader
 * asked (`public` and `s-maxage` are dropped, `private` comes first).
 */
export function servedCacheControl(object: Pick<ObjectRow, 'public' | 'cache_control'>): string {
  if (object.public) return object.cache_control;
  const kept = object.cache_control
    .split(',')
    .map((d) => d.trim())
    .filter((d) => d !== '' && !/^(public|private|s-maxage\s*=.*)$/i.test(d));
  return ['private', ...kept].join(', ');
}

/** The headers every answer of an object's bytes carries (its type, validators, caching, and that browsers run nothing of it). */
export function objectHeaders(object: ObjectRow, download: string | undefined): Record<string, string> {
  const headers: Record<string, string> = {
    'Content-Type': object.content_type,
    ETag: object.etag,
    'Last-Modified': new Date(object.updated_at).toUTCString(),
    'Cache-Control': servedCacheControl(object),
    'Accept-Ranges': 'bytes',
    'X-Content-Type-Options': 'nosniff',
    // An object opened by itself runs nothing (an HTML or SVG attachment).
    'Content-Security-Policy': "default-src 'none'; sandbox",
  };
  if (object.download_as_attachment || download !== undefined) {
    headers['Content-Disposition'] = attachment(download || object.name.split('/').pop()!);
  }
  return headers;
}

/** The answer of GET (or HEAD) of an object's bytes: 200, 206, 304 or 416, streamed from the byte store. */
export async function serveObject(
  ctx: Pick<AnyContext, 'services' | 'request'>,
  object: ObjectRow,
  headers: z.infer<typeof ConditionalHeaders>,
  download: string | undefined,
): Promise<Reply> {
  const base = objectHeaders(object, download);
  if (notModified(headers['if-none-match'], object.etag)) {
    return { status: 304, headers: { ETag: base.ETag!, 'Cache-Control': base['Cache-Control']!, 'Last-Modified': base['Last-Modified']! } };
  }
  const size = Number(object.size);
  const range = byteRange(headers.range, size);
  if (range === 'unsatisfiable') throw new HttpError(416, 'invalid_range', `the object has ${size} bytes`);
  const length = range ? range.end - range.start + 1 : size;
  const status = range ? 206 : 200;
  const answer: Record<string, string> = { ...base, 'Content-Length': String(length) };
  if (range) answer['Content-Range'] = `bytes ${range.start}-${range.end}/${size}`;
  if (ctx.request.method === 'HEAD') return { status, headers: answer, stream: (res) => res.end() };
  let body: Readable;
  try {
    body = await ctx.services.storage.bytes.get(object.storage_key, range ?? undefined);
  } catch (err) {
    if (err instanceof NotStoredError) throw new HttpError(404, 'object_not_found', 'Object not found');
    throw err;
  }
  return { status, headers: answer, stream: (res) => streamTo(body, res) };
}

/** Streams `body` as the response; a failure half-way ends the connection (the client sees a short body). */
export function streamTo(body: Readable, res: import('node:http').ServerResponse): void {
  pipeline(body, res).catch(() => res.destroy());
}

/** The Content-Length of a request whose body is the file itself (not a form); null when unknown. */
function declaredSize(ctx: AnyContext): number | null {
  const type = ctx.request.headers['content-type'] ?? '';
  const length = ctx.request.headers['content-length'];
  if (/^multipart\//i.test(type) || length === undefined || !/^\d{1,15}$/.test(length)) return null;
  return Number(length);
}

/** base64 of a JSON object (x-metadata). */
function headerMetadata(value: string | undefined): Record<string, unknown> | undefined {
  if (value === undefined) return undefined;
  return userMetadataOf(Buffer.from(value, 'base64').toString('utf8'));
}

/**
 * Records an upload whose bytes are written (private.storage_upload_finish,
 * as the gateway's role); when that fails, the upload is given up (its bytes
 * to the garbage, never those of a visible object).
 */
export async function finishUpload(
  ctx: Pick<AnyContext, 'db' | 'log'>,
  target: UploadTarget,
  received: Received,
  cacheControl: string | undefined,
  metadata: Record<string, unknown> | undefined,
): Promise<{ id: string }> {
  try {
    const [row] = await ctx.db(
      (tx) => tx<{ object: { id: string } }[]>`
        select private.storage_upload_finish(${target.upload_id}, ${received.size}, ${received.etag}, ${received.contentType},
          ${cacheControl ?? null}, ${metadata ? tx.json(metadata as never) : null}::jsonb, ${received.width}, ${received.height}) as object`,
      null,
    );
    return row!.object;
  } catch (err) {
    await abortUpload(ctx, target);
    throw err;
  }
}

/** Gives up an upload: forgotten, its key to the garbage (best effort: an upload left over expires and is collected). */
export async function abortUpload(ctx: Pick<AnyContext, 'db' | 'log'>, target: Pick<UploadTarget, 'upload_id' | 'storage_key'>): Promise<void> {
  await ctx
    .db((tx) => tx`select private.storage_upload_abort(${target.upload_id}, ${target.storage_key})`, null)
    .catch((err: unknown) => ctx.log.warn({ err, upload: target.upload_id }, 'storage: giving up an upload failed; it expires and is collected'));
}

/** Receives an upload's bytes; on any failure the upload is given up before the error is answered. */
export async function receive(ctx: AnyContext, target: UploadTarget, read: () => Promise<Received>): Promise<Received> {
  try {
    return await read();
  } catch (err) {
    await abortUpload(ctx, target);
    throw err;
  }
}

/** POST / PUT of an object: begin (SQL, as the caller), the bytes, finish (SQL). */
async function upload(
  ctx: AnyContext,
  headers: z.infer<typeof UploadHeaders>,
  begin: (declared: number | null) => Promise<UploadTarget>,
): Promise<{ id: string }> {
  // Checked before anything is stored.
  const headerCache = cacheControlOf(headers['cache-control']);
  const metadata = headerMetadata(headers['x-metadata']);
  const target = await begin(declaredSize(ctx));
  const received = await receive(ctx, target, () => ctx.services.storage.uploads.fromRequest(ctx.request, target, clientKey(ctx)));
  let cacheControl = headerCache;
  let userMetadata = metadata;
  try {
    if (received.cacheControl !== undefined) cacheControl = cacheControlOf(received.cacheControl);
    userMetadata = (received.userMetadata as Record<string, unknown> | undefined) ?? metadata;
  } catch (err) {
    await abortUpload(ctx, target);
    throw err;
  }
  return finishUpload(ctx, target, received, cacheControl, userMetadata);
}

const limits = {
  upload: [
    "An object is at most its bucket's size limit (avatars 5 MB, community-images and event-images 10 MB, attachments 25 MB): past it, 413 `object_too_large` as soon as the bytes pass it.",
    "A user stores at most their plan's quota (100 MB basic, 1 GB premium) and starts at most its uploads per minute (30, 60): 413 `quota_exceeded`, 429 `too_many_uploads` with Retry-After.",
    'An image bucket takes JPEG, PNG, WebP, AVIF and GIF images of at most 50 million pixels, without SVG or HTML; the image is stored upright and without metadata (EXIF, GPS, XMP).',
  ],
};

const storageRoute = { errorShape: 'supabase_storage' as const, invalidStatus: 400 as const };

// ---------------------------------------------------------------------------
// The routes
// ---------------------------------------------------------------------------

export const storageRoutes = [
  defineRoute({
    method: 'get',
    path: '/storage/v1/bucket',
    summary: 'The buckets.',
    description: 'Every bucket, with whether it is public, its size limit and the types it takes (supabase-js `listBuckets()`).',
    auth: 'user',
    ...storageRoute,
    responses: { 200: z.array(BucketShape).describe('The buckets, by id.') },
    async handler({ db }) {
      const [row] = await db((tx) => tx<{ buckets: string }[]>`select api.storage_buckets_list()::text as buckets`);
      return { status: 200, json: row!.buckets };
    },
  }),

  defineRoute({
    method: 'get',
    path: '/storage/v1/bucket/:bucket',
    summary: 'One bucket.',
    description: 'One bucket (supabase-js `getBucket()`).',
    auth: 'user',
    ...storageRoute,
    params: z.object({ bucket: Bucket }),
    responses: { 200: BucketShape, 404: errors('bucket_not_found') },
    async handler({ params, db }) {
      const [row] = await db((tx) => tx<{ bucket: string }[]>`select api.storage_bucket_get(${params.bucket})::text as bucket`);
      return { status: 200, json: row!.bucket };
    },
  }),

  defineRoute({
    method: 'post',
    path: '/storage/v1/object/list/:bucket',
    summary: 'The folders and objects under a prefix.',
    description:
      'What is directly under a folder of the bucket (supabase-js `list(prefix, {limit, offset, search, sortBy})`): its folders first (id null), then its objects, in the folders the caller owns.',
    auth: 'user',
    ...storageRoute,
    params: z.object({ bucket: Bucket }),
    body: z.object({
      prefix: z.string().max(1024).default('').describe('The folder to list (`` for the bucket\'s top).').meta({ example: '5f0c8a9e-3b1d-4c62-9a7e-2d4b6f8a1c03' }),
      limit: z.number().int().min(1).max(1000).default(100).describe('At most this many (default 100).').meta({ example: 100 }),
      offset: z.number().int().min(0).max(1_000_000).default(0).describe('Skip this many.').meta({ example: 0 }),
      search: z.string().max(1024).default('').describe('Only names that start with this (case-insensitive).').meta({ example: 'me' }),
      sortBy: z
        .object({
          column: z.enum(['name', 'created_at', 'updated_at', 'last_accessed_at']).default('name').describe('What to sort by (default name).'),
          order: z.enum(['asc', 'desc']).default('asc').describe('asc (default) or desc.'),
        })
        .default({ column: 'name', order: 'asc' })
        .describe('The order of the objects (folders are by name).'),
    }),
    responses: { 200: z.array(ListEntry).describe('Folders first, then objects.'), 404: errors('bucket_not_found') },
    async handler({ params, body, db }) {
      const [row] = await db(
        (tx) => tx<{ list: string }[]>`
          select api.storage_objects_list(${params.bucket}, ${body.prefix}, ${body.limit}, ${body.offset}, ${body.search},
                                          ${body.sortBy.column}, ${body.sortBy.order})::text as list`,
      );
      return { status: 200, json: row!.list };
    },
  }),

  defineRoute({
    method: 'post',
    path: '/storage/v1/object/move',
    summary: 'Move (rename) an object.',
    description: "Moves an object the caller may write to a free path they may write, in the same or another bucket (supabase-js `move()`); its id, bytes and the images pointing at it stay.",
    auth: 'user',
    ...storageRoute,
    body: z.object({
      bucketId: Bucket.describe('The bucket of the object.'),
      sourceKey: ObjectPath.describe('Its path.'),
      destinationKey: ObjectPath.describe('Its new path.'),
      destinationBucket: Bucket.optional().describe('Another bucket to move it to (default: the same).'),
    }),
    responses: {
      200: Message('Successfully moved'),
      400: errors('invalid_key'),
      403: errors('storage_access_denied'),
      404: errors('bucket_not_found', 'object_not_found'),
      409: errors('object_exists'),
      413: errors('object_too_large'),
      415: errors('invalid_mime_type'),
    },
    async handler({ body, db }) {
      await db((tx) => tx`select api.storage_object_move(${body.bucketId}, ${body.sourceKey}, ${body.destinationBucket ?? null}, ${body.destinationKey})`);
      return { status: 200, body: { message: 'Successfully moved' } };
    },
  }),

  defineRoute({
    method: 'post',
    path: '/storage/v1/object/copy',
    summary: 'Copy an object.',
    description:
      'Copies an object the caller may read to a path they may write, in the same or another bucket (supabase-js `copy()`; `x-upsert: true` replaces an object there). The copy counts against the caller\'s quota.',
    limits: limits.upload.slice(0, 2),
    auth: 'user',
    ...storageRoute,
    headers: UploadHeaders.pick({ 'x-upsert': true }),
    body: z.object({
      bucketId: Bucket.describe('The bucket of the object.'),
      sourceKey: ObjectPath.describe('Its path.'),
      destinationKey: ObjectPath.describe('The path of the copy.'),
      destinationBucket: Bucket.optional().describe('Another bucket to copy it to (default: the same).'),
    }),
    responses: {
      200: Uploaded,
      400: errors('invalid_key'),
      403: errors('storage_access_denied'),
      404: errors('bucket_not_found', 'object_not_found', 'upload_not_found'),
      409: errors('object_exists'),
      413: errors('object_too_large', 'quota_exceeded'),
      415: errors('invalid_mime_type'),
      429: errors('too_many_uploads'),
      507: errors('storage_full'),
    },
    async handler(ctx) {
      const { body, headers, db, services } = ctx;
      const [started] = await db(
        (tx) => tx<(UploadTarget & CopySource)[]>`
          select * from api.storage_object_copy_begin(${body.bucketId}, ${body.sourceKey}, ${body.destinationBucket ?? null},
                                                      ${body.destinationKey}, ${headers['x-upsert'] === 'true'})`,
      );
      const target = started!;
      try {
        await services.storage.bytes.copy(target.source_key, target.storage_key);
      } catch (err) {
        await abortUpload(ctx, target);
        throw err instanceof NotStoredError ? new HttpError(404, 'object_not_found', 'Object not found') : err;
      }
      const object = await finishUpload(
        ctx,
        target,
        { size: Number(target.size), etag: target.etag, contentType: target.content_type, width: target.width, height: target.height },
        target.cache_control,
        target.user_metadata ?? undefined,
      );
      return { status: 200, body: { Id: object.id, Key: `${body.destinationBucket ?? body.bucketId}/${body.destinationKey}` } };
    },
  }),

  defineRoute({
    method: 'post',
    path: '/storage/v1/object/sign/:bucket',
    summary: 'Signed download URLs of several objects.',
    description:
      'A signed URL for each path the caller may read (supabase-js `createSignedUrls(paths, expiresIn)`), valid `expiresIn` seconds; anyone with one may download the object without a credential. A path that is not there (or not readable) gets an `error` instead.',
    auth: 'user',
    ...storageRoute,
    params: z.object({ bucket: Bucket }),
    body: z.object({
      expiresIn: z.number().int().min(1).max(31_536_000).describe('Seconds the URLs are valid (at most a year).').meta({ example: 3600 }),
      paths: z.array(ObjectPath).min(1).max(1000).describe('The objects.').meta({ example: ['5f0c8a9e-3b1d-4c62-9a7e-2d4b6f8a1c03/doc.pdf'] }),
    }),
    responses: {
      200: z
        .array(
          z.object({
            path: z.string().describe('The path asked for.').meta({ example: '5f0c8a9e-3b1d-4c62-9a7e-2d4b6f8a1c03/doc.pdf' }),
            signedURL: z.string().nullable().describe('The URL, relative to /storage/v1; null with an error.').meta({ example: '/object/sign/attachments/5f0c8a9e-3b1d-4c62-9a7e-2d4b6f8a1c03/doc.pdf?token=eyJhbGciOiJIUzI1NiJ9.e30.sig' }),
            error: z.string().nullable().describe('Why there is no URL, or null.').meta({ example: null }),
          }),
        )
        .describe('One entry per path, in order.'),
      404: errors('bucket_not_found'),
    },
    async handler({ params, body, db }) {
      const [row] = await db((tx) => tx<{ urls: string }[]>`select api.storage_sign(${params.bucket}, ${body.paths}, ${body.expiresIn}, null)::text as urls`);
      return { status: 200, json: row!.urls };
    },
  }),

  defineRoute({
    method: 'post',
    path: '/storage/v1/object/sign/:bucket/:path*',
    summary: 'A signed download URL of an object (optionally of a transformation).',
    description:
      'A signed URL of an object the caller may read (supabase-js `createSignedUrl(path, expiresIn, {transform})`), valid `expiresIn` seconds: anyone with it may download the object (or the transformation signed with it) without a credential. It stops working when the signer\'s credentials end (a password reset).',
    auth: 'user',
    ...storageRoute,
    params: ObjectParams,
    body: z.object({
      expiresIn: z.number().int().min(1).max(31_536_000).describe('Seconds the URL is valid (at most a year).').meta({ example: 3600 }),
      transform: Transform.optional(),
    }),
    responses: {
      200: z.object({
        signedURL: z.string().describe('The URL, relative to /storage/v1.').meta({ example: '/object/sign/attachments/5f0c8a9e-3b1d-4c62-9a7e-2d4b6f8a1c03/doc.pdf?token=eyJhbGciOiJIUzI1NiJ9.e30.sig' }),
      }),
      404: errors('bucket_not_found', 'object_not_found'),
    },
    async handler({ params, body, db }) {
      const transform = body.transform && Object.keys(body.transform).length > 0 ? body.transform : null;
      const [row] = await db(
        (tx) => tx<{ urls: { signedURL: string | null }[] }[]>`
          select api.storage_sign(${params.bucket}, ${[params.path]}, ${body.expiresIn}, ${transform ? tx.json(transform) : null}::jsonb) as urls`,
      );
      const url = row!.urls[0]?.signedURL;
      if (!url) throw new HttpError(404, 'object_not_found', 'Object not found');
      return { status: 200, body: { signedURL: url } };
    },
  }),

  defineRoute({
    method: 'get',
    path: '/storage/v1/object/sign/:bucket/:path*',
    summary: 'Download through a signed URL (no credential).',
    description: 'The object a signed URL names, without a credential (the URL supabase-js `createSignedUrl()` makes). A tampered or expired token is refused.',
    auth: 'public',
    ...storageRoute,
    params: ObjectParams,
    query: DownloadQuery.extend({ token: z.string().min(1).max(8192).describe('The signed URL\'s token.').meta({ example: 'eyJhbGciOiJIUzI1NiJ9.e30.sig' }) }),
    headers: ConditionalHeaders,
    responses: {
      200: BYTES,
      206: PARTIAL,
      304: NOT_MODIFIED,
      400: errors('invalid_signature', 'signature_expired'),
      ...READ_ERRORS,
    },
    async handler(ctx) {
      const object = await readSigned(ctx, ctx.params.bucket, ctx.params.path, ctx.query.token);
      return serveObject(ctx, object, ctx.headers, ctx.query.download);
    },
  }),

  defineRoute({
    method: 'post',
    path: '/storage/v1/object/upload/sign/:bucket/:path*',
    summary: 'A signed upload URL.',
    description:
      'A URL to upload one object to a path the caller may write, once, within 2 hours (supabase-js `createSignedUploadUrl(path, {upsert})`): whoever has it uploads as the caller, without a credential (`uploadToSignedUrl`). It ends early when the caller\'s password changes, they sign out everywhere or the account is deleted.',
    auth: 'user',
    ...storageRoute,
    params: ObjectParams,
    headers: UploadHeaders.pick({ 'x-upsert': true }),
    responses: {
      200: z.object({
        url: z.string().describe('The URL, relative to /storage/v1.').meta({ example: '/object/upload/sign/attachments/5f0c8a9e-3b1d-4c62-9a7e-2d4b6f8a1c03/doc.pdf?token=eyJhbGciOiJIUzI1NiJ9.e30.sig' }),
        token: z.string().describe('Its token.').meta({ example: 'eyJhbGciOiJIUzI1NiJ9.e30.sig' }),
      }),
      400: errors('invalid_key'),
      403: errors('storage_access_denied'),
      404: errors('bucket_not_found'),
    },
    async handler({ params, headers, db }) {
      const [row] = await db(
        (tx) => tx<{ signed: string }[]>`select api.storage_sign_upload(${params.bucket}, ${params.path}, ${headers['x-upsert'] === 'true'})::text as signed`,
      );
      return { status: 200, json: row!.signed };
    },
  }),

  defineRoute({
    method: 'put',
    path: '/storage/v1/object/upload/sign/:bucket/:path*',
    summary: 'Upload through a signed upload URL (no credential).',
    description:
      'Uploads the object a signed upload URL names, as the user who signed it (supabase-js `uploadToSignedUrl(path, token, file)`). A signed upload URL uploads once: another upload with it is 409 `signed_url_used` (an upload through it that is refused or cut off gives it back).',
    limits: limits.upload,
    auth: 'public',
    ...storageRoute,
    params: ObjectParams,
    query: z.object({ token: z.string().min(1).max(8192).describe("The signed upload URL's token.").meta({ example: 'eyJhbGciOiJIUzI1NiJ9.e30.sig' }) }),
    headers: UploadHeaders,
    rawBody: UPLOAD_BODY,
    responses: {
      200: Uploaded.pick({ Key: true }).extend({ Id: Id.describe("The object's id.") }),
      ...UPLOAD_ERRORS,
      400: errors('invalid_key', 'invalid_signature', 'signature_expired'),
      409: errors('object_exists', 'signed_url_used'),
    },
    async handler(ctx) {
      const { params, query } = ctx;
      const object = await upload(ctx, ctx.headers, async (declared) => {
        const [target] = await ctx.db(
          (tx) => tx<UploadTarget[]>`select * from api.storage_upload_begin_signed(${params.bucket}, ${params.path}, ${query.token}, ${declared})`,
        );
        return target!;
      });
      return { status: 200, body: { Id: object.id, Key: `${params.bucket}/${params.path}` } };
    },
  }),

  ...(['', 'authenticated/'] as const).map((via) =>
    defineRoute({
      method: 'get',
      path: `/storage/v1/object/info/${via}:bucket/:path*`,
      summary: "An object's information.",
      description: "An object's size, type, digest, cache control, dates and metadata, for a caller who may read it (supabase-js `info()`).",
      auth: 'user',
      ...storageRoute,
      params: ObjectParams,
      responses: { 200: ObjectInfo, 404: errors('bucket_not_found', 'object_not_found') },
      async handler(ctx) {
        return { status: 200, body: info(await readObject(ctx, ctx.params.bucket, ctx.params.path, false)) };
      },
    }),
  ),

  defineRoute({
    method: 'get',
    path: '/storage/v1/object/info/public/:bucket/:path*',
    summary: "A public object's information (no credential).",
    description: "The information of an object of a public bucket, without a credential.",
    auth: 'public',
    ...storageRoute,
    params: ObjectParams,
    responses: { 200: ObjectInfo, 404: errors('bucket_not_found', 'object_not_found') },
    async handler(ctx) {
      return { status: 200, body: info(await readObject(ctx, ctx.params.bucket, ctx.params.path, true)) };
    },
  }),

  defineRoute({
    method: 'get',
    path: '/storage/v1/object/public/:bucket/:path*',
    summary: 'Download an object of a public bucket (no credential).',
    description:
      "An object of a public bucket, without a credential: the URL supabase-js `getPublicUrl()` makes, and a profile's `avatar_url` or a community's `image_url`. Range (206), If-None-Match (304), Cache-Control.",
    auth: 'public',
    ...storageRoute,
    params: ObjectParams,
    query: DownloadQuery,
    headers: ConditionalHeaders,
    responses: { 200: BYTES, 206: PARTIAL, 304: NOT_MODIFIED, ...READ_ERRORS },
    async handler(ctx) {
      const object = await readObject(ctx, ctx.params.bucket, ctx.params.path, true);
      return serveObject(ctx, object, ctx.headers, ctx.query.download);
    },
  }),

  ...(['', 'authenticated/'] as const).map((via) =>
    defineRoute({
      method: 'get',
      path: `/storage/v1/object/${via}:bucket/:path*`,
      summary: via ? 'Download an object (with a credential).' : 'Download an object; HEAD: whether it exists.',
      description:
        "An object the caller may read: any object of a public bucket, and those of a private bucket's folders the caller owns (supabase-js `download()`; HEAD is `exists()`). Range (206), If-None-Match (304), Cache-Control; an attachment (the attachments bucket) comes with Content-Disposition: attachment and X-Content-Type-Options: nosniff whatever its type.",
      auth: 'user',
      ...storageRoute,
      params: ObjectParams,
      query: DownloadQuery,
      headers: ConditionalHeaders,
      responses: { 200: BYTES, 206: PARTIAL, 304: NOT_MODIFIED, ...READ_ERRORS },
      async handler(ctx) {
        const object = await readObject(ctx, ctx.params.bucket, ctx.params.path, false);
        return serveObject(ctx, object, ctx.headers, ctx.query.download);
      },
    }),
  ),

  ...(['post', 'put'] as const).map((method) =>
    defineRoute({
      method,
      path: '/storage/v1/object/:bucket/:path*',
      summary: method === 'post' ? 'Upload an object.' : 'Replace an object (or upload it).',
      description:
        method === 'post'
          ? 'Uploads an object to a path the caller may write (supabase-js `upload()`): a taken path is 409 `object_exists` unless `x-upsert: true`. The object appears once its bytes are stored; an upload cut off leaves nothing.'
          : 'Uploads an object to a path the caller may write, replacing one that is there (supabase-js `update()`, or `upload()` with `upsert: true`). Its id stays; the old bytes go.',
      limits: limits.upload,
      auth: 'user',
      ...storageRoute,
      params: ObjectParams,
      headers: UploadHeaders,
      rawBody: UPLOAD_BODY,
      responses: { 200: Uploaded, ...UPLOAD_ERRORS },
      async handler(ctx) {
        const { params, headers } = ctx;
        const upsert = method === 'put' || headers['x-upsert'] === 'true';
        const object = await upload(ctx, headers, async (declared) => {
          const [target] = await ctx.db(
            (tx) => tx<UploadTarget[]>`select * from api.storage_upload_begin(${params.bucket}, ${params.path}, ${upsert}, ${declared}, 'direct')`,
          );
          return target!;
        });
        return { status: 200, body: { Id: object.id, Key: `${params.bucket}/${params.path}` } };
      },
    }),
  ),

  defineRoute({
    method: 'delete',
    path: '/storage/v1/object/:bucket',
    summary: 'Remove objects.',
    description:
      'Removes the named objects the caller may write (supabase-js `remove(paths)`) and answers them; paths that are not there, or not the caller\'s, are left out. Their bytes are deleted in the background.',
    auth: 'user',
    ...storageRoute,
    params: z.object({ bucket: Bucket }),
    body: z.object({
      prefixes: z.array(ObjectPath).min(1).max(1000).describe('The paths of the objects to remove.').meta({ example: ['5f0c8a9e-3b1d-4c62-9a7e-2d4b6f8a1c03/old.png'] }),
    }),
    responses: { 200: z.array(StoredObject).describe('The objects removed.'), 404: errors('bucket_not_found') },
    async handler({ params, body, db }) {
      const [row] = await db((tx) => tx<{ removed: string }[]>`select api.storage_objects_remove(${params.bucket}, ${body.prefixes})::text as removed`);
      return { status: 200, json: row!.removed };
    },
  }),

  defineRoute({
    method: 'delete',
    path: '/storage/v1/object/:bucket/:path*',
    summary: 'Remove one object.',
    description: 'Removes one object the caller may write.',
    auth: 'user',
    ...storageRoute,
    params: ObjectParams,
    responses: { 200: Message('Successfully deleted'), 404: errors('bucket_not_found', 'object_not_found') },
    async handler({ params, db }) {
      const [row] = await db((tx) => tx<{ removed: unknown[] }[]>`select api.storage_objects_remove(${params.bucket}, ${[params.path]}) as removed`);
      if (row!.removed.length === 0) throw new HttpError(404, 'object_not_found', 'Object not found');
      return { status: 200, body: { message: 'Successfully deleted' } };
    },
  }),
];

/** What api.storage_object_copy_begin answers besides the upload: the source's bytes and metadata. */
interface CopySource {
  source_key: string;
  size: string | number;
  content_type: string;
  cache_control: string;
  etag: string;
  width: number | null;
  height: number | null;
  user_metadata: Record<string, unknown> | null;
}

function info(object: ObjectRow): z.infer<typeof ObjectInfo> {
  return {
    id: object.id,
    name: object.name,
    version: object.version,
    bucket_id: object.bucket_id,
    size: Number(object.size),
    content_type: object.content_type,
    cache_control: object.cache_control,
    etag: object.etag,
    metadata: object.user_metadata,
    last_modified: new Date(object.updated_at).toISOString(),
    created_at: new Date(object.created_at).toISOString(),
  };
}

/** The transformation options of a render query. */
export const RenderQuery = DownloadQuery.extend({
  width: QueryInteger(1, MAX_RENDER_SIDE).optional().describe('Width in pixels (at most 2,500).').meta({ example: 256 }),
  height: QueryInteger(1, MAX_RENDER_SIDE).optional().describe('Height in pixels (at most 2,500).').meta({ example: 256 }),
  resize: z.enum(['cover', 'contain', 'fill']).optional().describe('cover (default): fill the size, cropping; contain: fit inside it; fill: stretch to it.'),
  quality: QueryInteger(20, 100).optional().describe('Quality, 20 to 100 (default 80).').meta({ example: 80 }),
  format: z.enum(['origin']).optional().describe('`origin`: keep the original format whatever the client accepts.'),
});

/** Render options with their defaults (gateway/storage/images.ts normalizeRender makes them a cached variant's). */
export function renderOptions(t: Partial<z.infer<typeof Transform>>): RenderOptions {
  return { width: t.width, height: t.height, resize: t.resize ?? 'cover', quality: t.quality, format: t.format };
}

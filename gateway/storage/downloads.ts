// Downloads (docs/storage.md): the object a route serves, read by SQL as the
// caller (api.storage_object_get: who may read what; api.storage_object_signed:
// a signed URL's object), and its bytes answered from the byte store:
// validators (ETag, Last-Modified; If-None-Match read by
// gateway/http/conditional.ts), one byte range, caching that keeps a private
// bucket's objects out of shared caches, and headers under which a browser
// runs nothing of an object.
import { pipeline } from 'node:stream/promises';
import type { ServerResponse } from 'node:http';
import type { Readable } from 'node:stream';
import type { z } from 'zod';
import type { Context, Reply } from '../http/route.ts';
import { noneMatch } from '../http/conditional.ts';
import { HttpError } from '../core/web/errors.ts';
import { NotStoredError, type ByteRange } from './byte-store.ts';
import type { ConditionalHeaders, ObjectRow } from './shapes.ts';

type AnyContext = Context<unknown, unknown, unknown, unknown>;

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
  if (noneMatch(headers['if-none-match'], object.etag)) {
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
export function streamTo(body: Readable, res: ServerResponse): void {
  pipeline(body, res).catch(() => res.destroy());
}

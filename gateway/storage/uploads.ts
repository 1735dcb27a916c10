// Receiving an upload's bytes: the step between the SQL that begins an
// upload (api.storage_upload_begin: who may write what, the limits) and the
// SQL that finishes it (private.storage_upload_finish: the object appears).
//
// The body is a stream: the file itself (any Content-Type), or a
// multipart/form-data form as supabase-js sends a Blob (fields
// `cacheControl` and `metadata` before one file part). Its bytes are
// counted against the bucket's limit as they arrive (413 object_too_large
// the moment they pass it), hashed for the ETag, and written to the byte
// store under the upload's key; an image bucket's bytes go to a temporary
// file first, which images.ts checks and writes again (upright, without
// metadata). Memory stays a few chunks whatever the size.
//
// What the gateway measured (size, digest, type, pixel size) is what the
// finish records; until then no object points at the key.
import crypto from 'node:crypto';
import fs from 'node:fs';
import fsp from 'node:fs/promises';
import type { IncomingMessage } from 'node:http';
import path from 'node:path';
import { PassThrough, Transform, type Readable, type TransformCallback } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import busboy from 'busboy';
import { HttpError, isDiskFull, storageFull } from '../core/web/errors.ts';
import type { ByteStore } from './byte-store.ts';
import { bareType, type ImageWork } from './images.ts';

/** What api.storage_upload_begin answers: where to write, and the bucket's limits. */
export interface UploadTarget {
  upload_id: string;
  storage_key: string;
  file_size_limit: string | number;
  allowed_mime_types: string[] | null;
  images: boolean;
}

/** What was written: what private.storage_upload_finish records. */
export interface Received {
  size: number;
  etag: string;
  contentType: string;
  width: number | null;
  height: number | null;
  /** A multipart form's `cacheControl` field (seconds), if any. */
  cacheControl?: string;
  /** A multipart form's `metadata` field (JSON), if any. */
  userMetadata?: unknown;
}

/** The Cache-Control an object is served with, from the seconds a client gives (supabase-js: `cacheControl`, default 3600). */
export function cacheControlOf(value: string | undefined): string | undefined {
  if (value === undefined) return undefined;
  const trimmed = value.trim();
  if (/^\d{1,9}$/.test(trimmed)) return `max-age=${trimmed}`;
  if (/^[\x20-\x7e]{1,255}$/.test(trimmed) && /^(public|private|no-cache|no-store|max-age=\d+|s-maxage=\d+|must-revalidate|immutable)(\s*,\s*(public|private|no-cache|no-store|max-age=\d+|s-maxage=\d+|must-revalidate|immutable))*$/i.test(trimmed)) {
    return trimmed;
  }
  throw new HttpError(400, 'bad_request', 'cacheControl must be a number of seconds (or a Cache-Control value)');
}

/** A client's metadata (x-metadata: base64 of JSON; the form's `metadata`: JSON): an object of at most 8 KB. */
export function userMetadataOf(json: string | undefined): Record<string, unknown> | undefined {
  if (json === undefined || json === '') return undefined;
  let value: unknown;
  try {
    value = JSON.parse(json);
  } catch {
    throw new HttpError(400, 'bad_request', 'metadata must be a JSON object');
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value) || Buffer.byteLength(json) > 8192) {
    throw new HttpError(400, 'bad_request', 'metadata must be a JSON object of at most 8 KB');
  }
  return value as Record<string, unknown>;
}

/** Counts and hashes the bytes passing, and fails the moment they pass `limit`. */
class Measure extends Transform {
  size = 0;
  private readonly hash = crypto.createHash('md5');

  constructor(private readonly limit: number) {
    super();
  }

  override _transform(chunk: Buffer, _encoding: BufferEncoding, done: TransformCallback): void {
    this.size += chunk.length;
    if (this.size > this.limit) {
      done(new HttpError(413, 'object_too_large', `The object exceeded the maximum allowed size (${this.limit} bytes)`));
      return;
    }
    this.hash.update(chunk);
    done(null, chunk);
  }

  get etag(): string {
    return `"${this.hash.digest('hex')}"`;
  }
}

/**
 * `body` read through a stream of our own: a failure downstream (the size
 * limit) stops reading it without destroying it, so that a request can still
 * be answered (http/route.ts reads the rest and closes the connection); a
 * request cut off fails it.
 */
function fed(body: Readable): Readable {
  const pass = new PassThrough();
  const request = typeof (body as Partial<IncomingMessage>).complete === 'boolean';
  const cutOff = () => new HttpError(400, 'bad_request', 'the request was aborted');
  body.on('error', (err) => pass.destroy(request ? cutOff() : err));
  body.on('close', () => {
    if (request && !(body as IncomingMessage).complete) pass.destroy(cutOff());
  });
  body.pipe(pass);
  return pass;
}

export class Uploads {
  private readonly tmp: string;

  constructor(
    readonly bytes: ByteStore,
    readonly images: ImageWork,
    /** A local folder for image work (STORAGE_DIR/tmp). */
    dir: string,
  ) {
    this.tmp = path.join(dir, 'tmp');
  }

  /**
   * Reads an upload from a request: a multipart form (supabase-js sends a
   * Blob so) or the file as the body. `client` is whose turn it is in the
   * image queue (core/auth/fair-queue.ts).
   */
  async fromRequest(req: IncomingMessage, target: UploadTarget, client: string): Promise<Received> {
    const type = bareType(req.headers['content-type']);
    if (type !== 'multipart/form-data') {
      return this.fromStream(req, req.headers['content-type'], target, client);
    }
    let form: busboy.Busboy;
    try {
      form = busboy({ headers: req.headers, limits: { files: 1, fields: 10, fieldSize: 16 * 1024, parts: 12 } });
    } catch {
      throw new HttpError(400, 'bad_request', 'the multipart form cannot be read (boundary)');
    }
    return new Promise<Received>((resolve, reject) => {
      const fields: Record<string, string> = {};
      let settled = false;
      let file: Promise<Received> | undefined;
      const fail = (err: unknown) => {
        if (settled) return;
        settled = true;
        req.unpipe(form);
        // (A full storage volume is the server's, not a malformed form: 507.)
        reject(err instanceof HttpError ? err : isDiskFull(err) ? storageFull() : new HttpError(400, 'bad_request', 'the multipart form cannot be read'));
      };
      form.on('field', (name, value) => (fields[name] = value));
      form.on('file', (_name, stream, info) => {
        if (file) return stream.resume();
        file = this.fromStream(stream, info.mimeType, target, client).then((received) => {
          const metadata = userMetadataOf(fields.metadata);
          return { ...received, cacheControl: fields.cacheControl, ...(metadata ? { userMetadata: metadata } : {}) };
        });
        file.catch(fail);
      });
      form.on('error', fail);
      form.on('close', () => {
        if (settled) return;
        if (!file) return fail(new HttpError(400, 'bad_request', 'the multipart form has no file'));
        file.then(
          (received) => {
            settled = true;
            resolve(received);
          },
          fail,
        );
      });
      req.on('close', () => {
        if (!req.complete) fail(new HttpError(400, 'bad_request', 'the request was aborted'));
      });
      req.pipe(form);
    });
  }

  /** Receives an upload's bytes from a stream (a request body, a form's file, a resumable upload's staged file). */
  async fromStream(body: Readable, declaredType: string | undefined, target: UploadTarget, client: string): Promise<Received> {
    const limit = Number(target.file_size_limit);
    const measure = new Measure(limit);
    const source = fed(body);
    if (!target.images) {
      const contentType = bareType(declaredType) === '' ? 'application/octet-stream' : declaredType!.trim();
      if (!/^[\x20-\x7e]{1,255}$/.test(contentType)) throw new HttpError(400, 'bad_request', 'Content-Type must be printable ASCII, at most 255 characters');
      const through = new PassThrough();
      const writing = this.bytes.put(target.storage_key, through, { contentType });
      await Promise.all([pipeline(source, measure, through), writing]).catch(async (err) => {
        through.destroy();
        await writing.catch(() => {});
        throw err;
      });
      return { size: measure.size, etag: measure.etag, contentType, width: null, height: null };
    }
    await fsp.mkdir(this.tmp, { recursive: true });
    const base = path.join(this.tmp, crypto.randomUUID());
    const input = `${base}.in`;
    const output = `${base}.out`;
    try {
      await pipeline(source, measure, fs.createWriteStream(input, { mode: 0o600 }));
      const image = await this.images.normalize(client, input, output, declaredType);
      const written = new Measure(Number.MAX_SAFE_INTEGER);
      const through = new PassThrough();
      await Promise.all([pipeline(fs.createReadStream(output), written, through), this.bytes.put(target.storage_key, through, { contentType: image.contentType })]);
      return { size: written.size, etag: written.etag, contentType: image.contentType, width: image.width, height: image.height };
    } finally {
      await fsp.rm(input, { force: true });
      await fsp.rm(output, { force: true });
    }
  }
}

// An upload, from its first byte to its commit or its abort: the one owner
// of every way an object's bytes arrive (a request's body or form, a signed
// upload URL, a resumable upload's last chunk, a copy), as supabase/storage's
// Uploader is. One way through, each step a method below:
//
//   begin    SQL, as the caller (api.storage_upload_begin,
//            api.storage_upload_begin_signed, api.storage_object_copy_begin):
//            who may write what, the size limit, the quota and the upload rate,
//            checked before a byte is read; the upload gets a key of its own
//   receive  the bytes: the file itself (any Content-Type), or a
//            multipart/form-data form as supabase-js sends a Blob (fields
//            `cacheControl` and `metadata` before one file part), or a
//            resumable upload's staged file. They are counted against the
//            bucket's limit as they arrive (413 object_too_large the moment
//            they pass it), hashed for the ETag, and written to the byte store
//            under the upload's key; an image bucket's bytes go to a temporary
//            file first, which images.ts checks and writes again (upright,
//            without metadata). Memory stays a few chunks whatever the size.
//   finish   SQL, as the gateway's own role (private.storage_upload_finish):
//            the object appears, with what the gateway measured (size,
//            digest, type, pixel size); until then no object points at the key
//   abort    on any failure after the begin: the upload is forgotten and its
//            key goes to the garbage (private.storage_upload_abort), before
//            the error is answered
import crypto from 'node:crypto';
import fs from 'node:fs';
import fsp from 'node:fs/promises';
import type { IncomingMessage } from 'node:http';
import path from 'node:path';
import { PassThrough, Transform, type Readable, type TransformCallback } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import busboy from 'busboy';
import type { Context } from '../http/route.ts';
import { HttpError, isDiskFull, storageFull } from '../core/web/errors.ts';
import { NotStoredError, type ByteStore } from './byte-store.ts';
import { bareType, imageClient, type ImageWork } from './images.ts';

/**
 * Whose upload it is, as its route knows it: the request's transaction (as
 * the caller; null claims: as the gateway's own role), its log, and whose
 * turn it is in the image queue.
 */
export type Uploading = Pick<Context<unknown, unknown, unknown, unknown>, 'db' | 'log' | 'user' | 'clientIp'>;

/** Where an upload goes, and whose right writes it: the caller's, or a signed upload URL's. */
export type Destination =
  | { via: 'direct' | 'resumable'; bucket: string; path: string; upsert: boolean }
  | { via: 'signed'; bucket: string; path: string; token: string };

/** What a request says of its upload besides the bytes: Cache-Control, and x-metadata (base64 of a JSON object). */
export interface Sent {
  cacheControl?: string;
  metadata?: string;
}

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

/** What api.storage_upload_begin answers: where to write, and the bucket's limits. */
export interface UploadTarget {
  upload_id: string;
  storage_key: string;
  file_size_limit: string | number;
  allowed_mime_types: string[] | null;
  images: boolean;
}

/** What was written: what private.storage_upload_finish records. */
interface Received {
  size: number;
  etag: string;
  contentType: string;
  width: number | null;
  height: number | null;
  /** The Cache-Control it is served with (a form's `cacheControl`, the Cache-Control header...), if any. */
  cacheControl?: string;
  /** The metadata its uploader attached (a form's `metadata`, x-metadata), if any. */
  userMetadata?: Record<string, unknown>;
}

/** The Cache-Control an object is served with, from the seconds a client gives (supabase-js: `cacheControl`, default 3600). */
function cacheControlOf(value: string | undefined): string | undefined {
  if (value === undefined) return undefined;
  const trimmed = value.trim();
  if (/^\d{1,9}$/.test(trimmed)) return `max-age=${trimmed}`;
  if (/^[\x20-\x7e]{1,255}$/.test(trimmed) && /^(public|private|no-cache|no-store|max-age=\d+|s-maxage=\d+|must-revalidate|immutable)(\s*,\s*(public|private|no-cache|no-store|max-age=\d+|s-maxage=\d+|must-revalidate|immutable))*$/i.test(trimmed)) {
    return trimmed;
  }
  throw new HttpError(400, 'bad_request', 'cacheControl must be a number of seconds (or a Cache-Control value)');
}

/** A client's metadata (x-metadata: base64 of JSON; the form's `metadata`: JSON): an object of at most 8 KB. */
function userMetadataOf(json: string | undefined): Record<string, unknown> | undefined {
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
      done(new HttpError(413, 'object_too_large', 'The object exceeded the maximum allowed size'));
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

/** base64 of a JSON object (x-metadata). */
function base64Metadata(value: string | undefined): Record<string, unknown> | undefined {
  if (value === undefined) return undefined;
  return userMetadataOf(Buffer.from(value, 'base64').toString('utf8'));
}

/** The Content-Length of a request whose body is the file itself (not a form); null when unknown. */
function declaredSize(request: IncomingMessage): number | null {
  const type = request.headers['content-type'] ?? '';
  const length = request.headers['content-length'];
  if (/^multipart\//i.test(type) || length === undefined || !/^\d{1,15}$/.test(length)) return null;
  return Number(length);
}

/**
 * A multipart form (supabase-js sends a Blob so): its one file part handed
 * to `receive`, its fields `cacheControl` (seconds) and `metadata` (JSON)
 * checked.
 */
async function fromForm(req: IncomingMessage, receive: (body: Readable, type: string | undefined) => Promise<Received>): Promise<Received> {
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
      file = receive(stream, info.mimeType).then((received) => {
        const metadata = userMetadataOf(fields.metadata);
        return { ...received, cacheControl: cacheControlOf(fields.cacheControl), ...(metadata ? { userMetadata: metadata } : {}) };
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

export class Uploader {
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
   * An upload whose bytes are a request's body (POST and PUT of an object, a
   * signed upload URL's PUT): the file itself, or a multipart/form-data form
   * as supabase-js sends a Blob.
   */
  async upload(caller: Uploading, to: Destination, request: IncomingMessage, sent: Sent): Promise<{ id: string }> {
    // Checked before anything is stored.
    const headerCache = cacheControlOf(sent.cacheControl);
    const headerMetadata = base64Metadata(sent.metadata);
    const target = await this.begin(caller, to, declaredSize(request));
    return this.settle(caller, target, async () => {
      const receive = (body: Readable, type: string | undefined) => this.fromStream(body, type, target, imageClient(caller));
      const type = request.headers['content-type'];
      const received = bareType(type) === 'multipart/form-data' ? await fromForm(request, receive) : await receive(request, type);
      return { ...received, cacheControl: received.cacheControl ?? headerCache, userMetadata: received.userMetadata ?? headerMetadata };
    });
  }

  /**
   * The begin (SQL, as the caller): `declared` is the size the client
   * announced (the Content-Length of a file sent as the body, a resumable
   * upload's Upload-Length), refused at once when it is past a limit.
   */
  async begin(caller: Uploading, to: Destination, declared: number | null): Promise<UploadTarget> {
    const [target] = await caller.db((tx) =>
      to.via === 'signed'
        ? tx<UploadTarget[]>`select * from api.storage_upload_begin_signed(${to.bucket}, ${to.path}, ${to.token}, ${declared})`
        : tx<UploadTarget[]>`select * from api.storage_upload_begin(${to.bucket}, ${to.path}, ${to.upsert}, ${declared}, ${to.via})`,
    );
    return target!;
  }

  /** The caller's resumable upload under way (api.storage_resumable_upload: 404 when it is not theirs). */
  async resumed(caller: Uploading, id: string): Promise<UploadTarget> {
    if (!/^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/.test(id)) {
      throw new HttpError(404, 'upload_not_found', 'Upload not found');
    }
    const [row] = await caller.db((tx) => tx<(UploadTarget & { upload_id?: string })[]>`select * from api.storage_resumable_upload(${id})`);
    return { ...row!, upload_id: id };
  }

  /** A resumable upload's last chunk: its staged bytes, received as a direct upload's are. */
  async finishStaged(
    caller: Uploading,
    target: UploadTarget,
    staged: () => Promise<Readable>,
    metadata: { contentType?: string | null; cacheControl?: string | null },
  ): Promise<{ id: string }> {
    return this.settle(caller, target, async () => {
      const cacheControl = cacheControlOf(metadata.cacheControl ?? undefined);
      const received = await this.fromStream(await staged(), metadata.contentType ?? undefined, target, imageClient(caller));
      return { ...received, cacheControl };
    });
  }

  /**
   * A copy (POST /object/copy): begun (the right to read the source, to
   * write the destination), its bytes copied in the byte store under a key
   * of its own, recorded with the source's metadata.
   */
  async copy(
    caller: Uploading,
    copy: { bucket: string; path: string; toBucket: string | null; toPath: string; upsert: boolean },
  ): Promise<{ id: string }> {
    const [started] = await caller.db(
      (tx) => tx<(UploadTarget & CopySource)[]>`
        select * from api.storage_object_copy_begin(${copy.bucket}, ${copy.path}, ${copy.toBucket}, ${copy.toPath}, ${copy.upsert})`,
    );
    const target = started!;
    return this.settle(caller, target, async () => {
      await this.bytes.copy(target.source_key, target.storage_key).catch((err: unknown) => {
        throw err instanceof NotStoredError ? new HttpError(404, 'object_not_found', 'Object not found') : err;
      });
      return {
        size: Number(target.size),
        etag: target.etag,
        contentType: target.content_type,
        width: target.width,
        height: target.height,
        cacheControl: target.cache_control,
        userMetadata: target.user_metadata ?? undefined,
      };
    });
  }

  /** Gives up an upload: forgotten, its key to the garbage (best effort: an upload left over expires and is collected). */
  async abort(caller: Pick<Uploading, 'db' | 'log'>, target: Pick<UploadTarget, 'upload_id' | 'storage_key'>): Promise<void> {
    await caller
      .db((tx) => tx`select private.storage_upload_abort(${target.upload_id}, ${target.storage_key})`, null)
      .catch((err: unknown) => caller.log.warn({ err, upload: target.upload_id }, 'storage: giving up an upload failed; it expires and is collected'));
  }

  /**
   * The end of every upload: its bytes received (`receive`), then recorded
   * (private.storage_upload_finish, as the gateway's role: the object
   * appears, with what the gateway measured). On any failure the upload is
   * given up (its bytes to the garbage, never those of a visible object)
   * before the error is answered.
   */
  private async settle(caller: Uploading, target: UploadTarget, receive: () => Promise<Received>): Promise<{ id: string }> {
    const giveUp = async (err: unknown): Promise<never> => {
      await this.abort(caller, target);
      throw err;
    };
    const received = await receive().catch(giveUp);
    const [row] = await caller
      .db(
        (tx) => tx<{ object: { id: string } }[]>`
          select private.storage_upload_finish(${target.upload_id}, ${received.size}, ${received.etag}, ${received.contentType},
            ${received.cacheControl ?? null}, ${received.userMetadata ? tx.json(received.userMetadata as never) : null}::jsonb,
            ${received.width}, ${received.height}) as object`,
        null,
      )
      .catch(giveUp);
    return row!.object;
  }

  /** Receives an upload's bytes from a stream (a request body, a form's file, a resumable upload's staged file). */
  private async fromStream(body: Readable, declaredType: string | undefined, target: UploadTarget, client: string): Promise<Received> {
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

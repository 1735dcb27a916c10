// The JSON request body, read for requests that have one (GETs don't):
//
// - Content-Type application/json or application/*+json; an HTML form
//   (application/x-www-form-urlencoded) becomes FormFields, read only by the
//   routes that declare a form body (the web pages); any other type leaves
//   the body undefined (the route's schema then refuses it).
// - charset, when given, must be UTF-8 (415 otherwise); Content-Encoding
//   identity, gzip, deflate or br (415 otherwise).
// - At most 1 MB after decompression (413), checked against Content-Length
//   before reading when there is one.
// - Strict: the document must be an object or an array (400 invalid_json, as
//   for text that is not JSON). An empty body is `{}`.
// - A refused body (413, 415, 400) is answered once the rest of it has been
//   read and thrown away (discardRest: at most 8 MB, for at most 5 s), with
//   Connection: close: a client still sending when the server closes gets a
//   broken pipe instead of the answer.
// The same answers Express's body parser gave, without its per-request cost.
import type { IncomingMessage } from 'node:http';
import type { Readable } from 'node:stream';
import zlib from 'node:zlib';
import { HttpError } from '../core/web/errors.ts';

export const MAX_BODY_BYTES = 1024 * 1024;

const JSON_TYPE = /^application\/(?:json|[^\s;/]+\+json)\s*(?:;|$)/i;
const CHARSET = /;\s*charset\s*=\s*"?([^";\s]*)"?/i;

export function hasBody(req: IncomingMessage): boolean {
  return req.headers['transfer-encoding'] !== undefined || (req.headers['content-length'] ?? '0') !== '0';
}

/**
 * The fields of an HTML form (application/x-www-form-urlencoded): only the
 * routes that declare a form body (the web pages without JavaScript) read
 * them; to every other route the body is absent, as any other type is.
 * A field sent twice keeps its first value.
 */
export class FormFields {
  constructor(readonly fields: Record<string, string>) {}
}

const FORM_TYPE = /^application\/x-www-form-urlencoded\s*(?:;|$)/i;

export async function readJsonBody(req: IncomingMessage): Promise<unknown> {
  const type = req.headers['content-type'];
  if (typeof type !== 'string') return undefined;
  const form = FORM_TYPE.test(type);
  if (!form && !JSON_TYPE.test(type)) return undefined;
  const charset = CHARSET.exec(type)?.[1]?.toLowerCase();
  if (charset !== undefined && charset !== 'utf-8' && charset !== 'utf8') {
    throw new HttpError(415, 'unsupported_media_type', `unsupported charset "${charset.toUpperCase()}"`);
  }
  const encoding = (req.headers['content-encoding'] ?? 'identity').toLowerCase();
  const declared = Number(req.headers['content-length']);
  if (encoding === 'identity' && declared > MAX_BODY_BYTES) throw tooLarge();
  const text = (await readAll(req, decoded(req, encoding))).toString('utf8');
  if (form) {
    const fields: Record<string, string> = Object.create(null);
    for (const [name, value] of new URLSearchParams(text)) if (!(name in fields)) fields[name] = value;
    return new FormFields({ ...fields });
  }
  if (text.length === 0) return {};
  const first = /^[\x20\x09\x0a\x0d\ufeff]*(.)/.exec(text)?.[1];
  if (first !== '{' && first !== '[') throw invalidJson();
  try {
    return JSON.parse(text.charCodeAt(0) === 0xfeff ? text.slice(1) : text);
  } catch {
    throw invalidJson();
  }
}

function decoded(req: IncomingMessage, encoding: string): Readable {
  switch (encoding) {
    case 'identity':
      return req;
    case 'gzip':
    case 'x-gzip':
      return req.pipe(zlib.createGunzip());
    case 'deflate':
      return req.pipe(zlib.createInflate());
    case 'br':
      return req.pipe(zlib.createBrotliDecompress());
    default:
      throw new HttpError(415, 'unsupported_media_type', `unsupported content encoding "${encoding}"`);
  }
}

/**
 * Reads `stream` (the request, or its decompression) to the end. Past the
 * limit it stops reading and refuses; the request is not destroyed, so the
 * refusal can still be sent (with Connection: close, see app.ts).
 */
function readAll(req: IncomingMessage, stream: Readable): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let length = 0;
    let done = false;
    const fail = (err: HttpError) => {
      if (done) return;
      done = true;
      if (stream !== req) {
        req.unpipe();
        stream.destroy();
      }
      stream.removeAllListeners('data');
      req.pause();
      reject(err);
    };
    stream.on('data', (chunk: Buffer) => {
      length += chunk.length;
      if (length > MAX_BODY_BYTES) fail(tooLarge());
      else chunks.push(chunk);
    });
    stream.on('end', () => {
      if (done) return;
      done = true;
      resolve(chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks, length));
    });
    // A broken compressed stream is the client's fault; so is a request that stops half-way.
    stream.on('error', () => fail(new HttpError(400, 'bad_request', 'the request body could not be read')));
    req.on('close', () => {
      if (!req.complete) fail(new HttpError(400, 'bad_request', 'the request was aborted'));
    });
  });
}

/** How much of a refused body is read (and thrown away) so that its client can read the answer. */
export const DISCARD_MAX_BYTES = 8 * 1024 * 1024;
export const DISCARD_MAX_MS = 5_000;

/**
 * Reads and throws away what is left of a refused request body, up to
 * DISCARD_MAX_BYTES or DISCARD_MAX_MS, whichever comes first; resolves then
 * (or when the body ends, or the request goes away). The connection is
 * closed after the answer either way.
 */
export function discardRest(req: IncomingMessage): Promise<void> {
  if (req.complete || req.destroyed) return Promise.resolve();
  return new Promise((resolve) => {
    let read = 0;
    const done = () => {
      clearTimeout(timer);
      req.off('data', onData);
      req.off('end', done);
      req.off('close', done);
      req.off('error', done);
      req.pause();
      resolve();
    };
    const onData = (chunk: Buffer) => {
      read += chunk.length;
      if (read > DISCARD_MAX_BYTES) done();
    };
    const timer = setTimeout(done, DISCARD_MAX_MS);
    timer.unref();
    req.on('data', onData);
    req.once('end', done);
    req.once('close', done);
    req.once('error', done);
    req.resume();
  });
}

const tooLarge = () => new HttpError(413, 'payload_too_large', 'the request body is larger than 1 MB');
const invalidJson = () => new HttpError(400, 'invalid_json', 'the request body is not valid JSON');

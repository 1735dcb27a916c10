// Request bodies, read by Fastify's content-type parsers (registered here,
// for the routes whose body is not the handler's to stream: gateway/app.ts):
//
// - Content-Type application/json or application/*+json; an HTML form
//   (application/x-www-form-urlencoded) becomes FormFields, read only by the
//   routes that declare a form body (the web pages); any other type leaves
//   the body undefined, unread (the route's schema then refuses it).
// - charset, when given, must be UTF-8 (415 otherwise); Content-Encoding
//   identity, gzip, deflate or br (415 otherwise), decompressed by a
//   preParsing hook.
// - At most 1 MB after decompression (413: Fastify's bodyLimit), checked
//   against Content-Length before reading when there is one.
// - Strict: the document must be an object or an array (400 invalid_json, as
//   for text that is not JSON). An empty body is `{}`.
// - A refused body (413, 415, 400) is answered once the rest of it has been
//   read and thrown away (discardRest: at most 8 MB, for at most 5 s), with
//   Connection: close: a client still sending when the server closes gets a
//   broken pipe instead of the answer (app.ts's error handler).
import type { IncomingMessage } from 'node:http';
import type { Readable } from 'node:stream';
import zlib from 'node:zlib';
import type { FastifyInstance } from 'fastify';
import { HttpError } from '../core/web/errors.ts';

export const MAX_BODY_BYTES = 1024 * 1024;

const JSON_TYPE = /^application\/(?:json|[^\s;/]+\+json)\s*(?:;|$)/i;
const FORM_TYPE = /^application\/x-www-form-urlencoded\s*(?:;|$)/i;
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

/** The JSON and form parsers, and the decompression before them, in `app` (an encapsulated context: its routes). */
export function registerBodyParsers(app: FastifyInstance): void {
  app.removeAllContentTypeParsers();
  app.addHook('preParsing', async (request, _reply, payload) => {
    const type = request.headers['content-type'];
    if (!hasBody(request.raw) || typeof type !== 'string' || !(JSON_TYPE.test(type) || FORM_TYPE.test(type))) return payload;
    checkCharset(type);
    const encoding = (request.headers['content-encoding'] ?? 'identity').toLowerCase();
    const decoder = decoderOf(encoding);
    if (!decoder) return payload;
    // Fastify compares what it read with Content-Length: the encoded bytes.
    const decoded = payload.pipe(decoder) as unknown as Readable & { receivedEncodedLength: number };
    decoded.receivedEncodedLength = 0;
    payload.on('data', (chunk: Buffer) => (decoded.receivedEncodedLength += chunk.length));
    return decoded;
  });
  app.addContentTypeParser(JSON_TYPE, { parseAs: 'string' }, (_request, text, done) => {
    try {
      done(null, parseJson(text as string));
    } catch (err) {
      done(err as Error, undefined);
    }
  });
  app.addContentTypeParser(FORM_TYPE, { parseAs: 'string' }, (_request, text, done) => {
    const fields: Record<string, string> = Object.create(null);
    for (const [name, value] of new URLSearchParams(text as string)) if (!(name in fields)) fields[name] = value;
    done(null, new FormFields({ ...fields }));
  });
  // Any other type is no body: left unread (thrown away once answered).
  app.addContentTypeParser('*', (_request, _payload, done) => done(null, undefined));
}

/** The parser of the routes whose handlers stream the body themselves (file uploads): it reads nothing. */
export function registerRawBody(app: FastifyInstance): void {
  app.removeAllContentTypeParsers();
  app.addContentTypeParser('*', (_request, _payload, done) => done(null, undefined));
}

function checkCharset(type: string): void {
  const charset = CHARSET.exec(type)?.[1]?.toLowerCase();
  if (charset !== undefined && charset !== 'utf-8' && charset !== 'utf8') {
    throw new HttpError(415, 'unsupported_media_type', `unsupported charset "${charset.toUpperCase()}"`);
  }
}

function parseJson(text: string): unknown {
  if (text.length === 0) return {};
  const first = /^[\x20\x09\x0a\x0d\ufeff]*(.)/.exec(text)?.[1];
  if (first !== '{' && first !== '[') throw invalidJson();
  try {
    return JSON.parse(text.charCodeAt(0) === 0xfeff ? text.slice(1) : text);
  } catch {
    throw invalidJson();
  }
}

function decoderOf(encoding: string): zlib.Gunzip | zlib.Inflate | zlib.BrotliDecompress | undefined {
  switch (encoding) {
    case 'identity':
      return undefined;
    case 'gzip':
    case 'x-gzip':
      return zlib.createGunzip();
    case 'deflate':
      return zlib.createInflate();
    case 'br':
      return zlib.createBrotliDecompress();
    default:
      throw new HttpError(415, 'unsupported_media_type', `unsupported content encoding "${encoding}"`);
  }
}

/**
 * A body that could not be read, as the answer says it: the refusals above,
 * Fastify's (too large, a length that does not match), a broken compressed
 * stream or a request that stopped half-way; undefined for anything else.
 */
export function bodyErrorOf(err: unknown): HttpError | undefined {
  if (err instanceof HttpError) return err.status < 500 ? err : undefined;
  const code = (err as { code?: unknown })?.code;
  if (code === 'FST_ERR_CTP_BODY_TOO_LARGE') return tooLarge();
  if (typeof code === 'string' && (code.startsWith('FST_ERR_CTP_') || code.startsWith('Z_') || code.startsWith('ERR__'))) {
    return new HttpError(400, 'bad_request', 'the request body could not be read');
  }
  const status = (err as { statusCode?: unknown })?.statusCode;
  if (typeof status === 'number' && status >= 400 && status < 500) return new HttpError(400, 'bad_request', 'the request body could not be read');
  return undefined;
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

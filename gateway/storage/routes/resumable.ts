// Resumable uploads at /storage/v1/upload/resumable (docs/storage.md), the
// TUS protocol as Supabase documents it for tus-js-client: the headers
// `authorization` and `x-upsert`, the metadata `bucketName`, `objectName`,
// `contentType` and `cacheControl`. @tus/server speaks the protocol; its
// staging area is the storage service's (a folder beside the fs byte store,
// or the S3 bucket). These routes put it behind the request pipeline (the
// credential, fair share, the log, Supabase Storage's error body) and hook the
// rules in:
//
//   POST   the Uploader's begin (api.storage_upload_begin, kind resumable)
//          names the upload: the same checks as a direct upload, before a
//          byte is staged; its id is the upload's URL
//   HEAD, PATCH, DELETE
//          the Uploader's resumed (api.storage_resumable_upload): only the
//          caller's own upload, under way (404 otherwise)
//   the last PATCH
//          the Uploader's finishStaged: the staged bytes go through the same
//          receiver as a direct upload (limits, images) into the byte store,
//          then private.storage_upload_finish makes the object; the staging
//          is removed
//
// An upload cut off after some chunks resumes from its offset (HEAD), on any
// process sharing the staging area. One never finished is dropped after 24
// hours (its registration expires; the staging area's expiry).
import type { IncomingMessage, ServerResponse } from 'node:http';
import { Readable } from 'node:stream';
import type { ReadableStream as WebReadableStream } from 'node:stream/web';
import { Server, type ServerOptions } from '@tus/server';
import type { Upload } from '@tus/utils';
import { z } from 'zod';
import { defineRoute, type Context, type Reply, type Services } from '../../http/route.ts';
import { defaultCode, errorBody, HttpError, toHttpError } from '../../core/web/errors.ts';
import { errors, noContent } from '../../http/responses.ts';
import { retryAfterOf } from '../../core/web/throttle.ts';
import type { UploadTarget } from '../uploader.ts';
import { storageRoute } from '../shapes.ts';

export const RESUMABLE_PATH = '/storage/v1/upload/resumable';

type AnyContext = Context<unknown, unknown, unknown, unknown>;

/**
 * The request's pipeline context, for the hooks (@tus/server hands them
 * the web Request made of the node one: webRequest); `ended`: the upload whose last chunk this request carried,
 * whose staged bytes go once the request is answered (finished or refused).
 */
interface TusEntry {
  ctx: AnyContext;
  target?: UploadTarget;
  ended?: string;
  /** A hook's refusal's Retry-After (a limit's), which @tus/server's answer does not carry. */
  retryAfter?: string;
}
const contexts = new WeakMap<Request, TusEntry>();

function contextOf(req: Request): TusEntry {
  const entry = contexts.get(req);
  if (!entry) throw new Error('a resumable upload request outside the pipeline');
  return entry;
}

/** The node request as @tus/server's web handler takes it: its body streamed, unread until the handler reads it. */
function webRequest(req: IncomingMessage): Request {
  const headers = new Headers();
  for (const [name, value] of Object.entries(req.headers)) {
    if (value === undefined) continue;
    for (const one of Array.isArray(value) ? value : [value]) headers.append(name, one);
  }
  const method = req.method ?? 'GET';
  const body = method === 'GET' || method === 'HEAD' ? undefined : (Readable.toWeb(req) as unknown as ReadableStream<Uint8Array>);
  return new Request(`http://${req.headers.host ?? 'localhost'}${req.url ?? '/'}`, { method, headers, body, duplex: 'half' } as RequestInit);
}

/** A web Response written to the node response (its body streamed; none for HEAD). */
function sendResponse(res: ServerResponse, response: Response): void {
  res.statusCode = response.status;
  response.headers.forEach((value, name) => res.setHeader(name, value));
  // An answer given before the chunk was read (a refusal, an unknown upload):
  // the rest of the body is still on the connection, held by the web stream,
  // so the connection closes after this answer rather than serve the next
  // request after bytes nobody reads.
  if (!res.req.complete) res.setHeader('Connection', 'close');
  if (!response.body || res.req.method === 'HEAD') {
    res.end();
    return;
  }
  const body = Readable.fromWeb(response.body as unknown as WebReadableStream<Uint8Array>);
  body.on('error', () => res.destroy());
  body.pipe(res);
}

/** An HttpError (or anything) as @tus/server expects a hook to refuse: its status and Supabase Storage's body. */
function refusal(err: unknown): { status_code: number; body: string } {
  const httpError = toHttpError(err);
  return { status_code: httpError.status, body: JSON.stringify(errorBody('supabase_storage', httpError)) };
}

/** Runs a hook (its first argument is the request); what it throws is answered as the storage error it is. */
function hook<A extends [Request, ...unknown[]], T>(fn: (...args: A) => Promise<T>): (...args: A) => Promise<T> {
  return async (...args) => {
    try {
      return await fn(...args);
    } catch (err) {
      if (!(err instanceof HttpError) && (err as { status_code?: unknown })?.status_code !== undefined) throw err;
      const retryAfter = retryAfterOf(toHttpError(err));
      if (retryAfter) contextOf(args[0]).retryAfter = retryAfter;
      throw refusal(err);
    }
  };
}

const servers = new WeakMap<Services, Server>();

/** The TUS server of a process (one per set of services). */
function tusServer(services: Services): Server {
  let server = servers.get(services);
  if (server) return server;
  const { storage } = services;
  const options: Omit<ServerOptions, 'locker'> & { datastore: typeof storage.staging } = {
    path: RESUMABLE_PATH,
    datastore: storage.staging,
    relativeLocation: true,
    respectForwardedHeaders: false,
    // The bucket's limit is SQL's (the begin refuses a larger Upload-Length); this bounds the staging.
    maxSize: 5 * 1024 * 1024 * 1024,
    namingFunction: hook(async (req: Request, metadata?: Record<string, string | null>) => {
      const { ctx } = contextOf(req);
      const bucket = metadata?.bucketName;
      const name = metadata?.objectName;
      if (!bucket || !name) throw new HttpError(400, 'bad_request', 'the Upload-Metadata must name bucketName and objectName');
      const length = req.headers.get('upload-length');
      if (length === null || !/^\d{1,15}$/.test(length)) {
        throw new HttpError(400, 'bad_request', 'Upload-Length is required (a deferred length is not supported)');
      }
      const upsert = req.headers.get('x-upsert') === 'true';
      const target = await storage.uploader.begin(ctx, { via: 'resumable', bucket, path: name, upsert }, Number(length));
      return target.upload_id;
    }),
    onIncomingRequest: hook(async (req: Request, id: string) => {
      const entry = contextOf(req);
      entry.target ??= await storage.uploader.resumed(entry.ctx, id);
    }),
    onUploadFinish: hook(async (req: Request, upload: Upload) => {
      const entry = contextOf(req);
      const { ctx } = entry;
      // Stored or refused, the staged bytes are not needed after this request
      // (tusReply removes them once @tus/server is done with the upload: a
      // creation that carried the whole file still reads it for its answer).
      entry.ended = upload.id;
      const target = entry.target ?? (await storage.uploader.resumed(ctx, upload.id));
      const metadata = upload.metadata ?? {};
      await storage.uploader.finishStaged(ctx, target, () => storage.staged(upload.id), metadata);
      return {};
    }),
  };
  server = new Server(options);
  servers.set(services, server);
  return server;
}

/** @tus/server's own refusals (text) as Supabase Storage's body. */
async function asStorageError(response: Response): Promise<Response> {
  if (response.status < 400 || /\bjson\b/.test(response.headers.get('content-type') ?? '')) return response;
  const text = (await response.text()).trim();
  let body: string;
  try {
    const parsed = JSON.parse(text) as { statusCode?: unknown };
    if (typeof parsed.statusCode !== 'string') throw new Error('not ours');
    body = text;
  } catch {
    const code = response.status === 404 ? 'upload_not_found' : response.status >= 500 ? defaultCode(response.status) : 'resumable_upload_refused';
    body = JSON.stringify(errorBody('supabase_storage', new HttpError(response.status, code, text || 'the resumable upload was refused')));
  }
  const headers = new Headers(response.headers);
  headers.set('Content-Type', 'application/json; charset=utf-8');
  headers.set('Content-Length', String(Buffer.byteLength(body)));
  return new Response(body, { status: response.status, headers });
}

/** Hands the request to the TUS server; its answer (or refusal) goes out as it is, refusals in the storage body. */
function tusReply(ctx: AnyContext, target?: UploadTarget): Reply {
  const server = tusServer(ctx.services);
  const entry: TusEntry = { ctx, target };
  const request = webRequest(ctx.request);
  contexts.set(request, entry);
  return {
    status: 200,
    stream: (res: ServerResponse) => {
      void (async () => {
        try {
          const response = await asStorageError(await server.handleWeb(request));
          if (entry.retryAfter && response.status >= 400) response.headers.set('Retry-After', entry.retryAfter);
          if (entry.ended) {
            // At once, stored or refused: a refused finish leaves nothing staged (the upload is given up, its quota free).
            await ctx.services.storage.staging
              .remove(entry.ended)
              .catch((err: unknown) => ctx.log.warn({ err }, 'storage: removing a resumable upload\'s staged bytes failed; they expire'));
          }
          sendResponse(res, response);
        } catch (err) {
          ctx.log.error({ err }, 'storage: a resumable upload request failed');
          res.destroy();
        }
      })();
    },
  };
}

const TusHeaders = z.object({
  'tus-resumable': z.string().max(20).optional().describe('The protocol version: 1.0.0 (tus-js-client sends it).').meta({ example: '1.0.0' }),
});

const TUS_ERRORS = {
  400: errors('bad_request', 'invalid_key', 'resumable_upload_refused'),
  403: errors('storage_access_denied'),
  404: errors('bucket_not_found', 'upload_not_found'),
  409: errors('object_exists', 'resumable_upload_refused'),
  412: errors('resumable_upload_refused'),
  413: errors('object_too_large', 'quota_exceeded'),
  415: errors('invalid_mime_type', 'mime_type_mismatch', 'svg_not_allowed', 'html_not_allowed', 'not_an_image', 'resumable_upload_refused'),
  422: errors('image_too_many_pixels', 'invalid_image'),
  429: errors('too_many_uploads', 'too_many_open_uploads'),
} as const;

const IdParams = z.object({ id: z.string().max(100).describe('The upload, as the Location of its creation names it.').meta({ example: '5f0c8a9e-3b1d-4c62-9a7e-2d4b6f8a1c03' }) });

const common = { auth: 'user' as const, ...storageRoute };

const TUS_BODY = {
  description: 'A chunk of the file (Content-Type application/offset+octet-stream), at the offset Upload-Offset names.',
  content: { 'application/offset+octet-stream': z.string().meta({ format: 'binary' }).describe('The bytes from Upload-Offset on.') },
};

export const storageResumableRoutes = [
  defineRoute({
    method: 'post',
    path: RESUMABLE_PATH,
    summary: 'Start a resumable upload (TUS).',
    description:
      "Creates a resumable upload (the TUS protocol's creation, with creation-with-upload): Upload-Length, Upload-Metadata naming `bucketName`, `objectName` and optionally `contentType` and `cacheControl` (tus-js-client's `metadata`), `x-upsert: true` to replace an object. The same checks as a direct upload come first. Answers 201 with the upload's URL in Location.",
    limits: [
      "Upload-Length is required and at most the bucket's size limit; a deferred length is not supported. It is reserved against the quota until the upload finishes, is cancelled or expires (413 `quota_exceeded` past it).",
      'At most 10 resumable uploads open at once per user (429 `too_many_open_uploads`). An upload not finished within 24 hours is dropped.',
    ],
    ...common,
    headers: TusHeaders,
    rawBody: TUS_BODY,
    responses: {
      201: noContent('Created: Location names the upload; Upload-Offset says how much of it the request carried (creation-with-upload). When that is the whole file, the object is stored.'),
      ...TUS_ERRORS,
    },
    async handler(ctx) {
      return tusReply(ctx as AnyContext);
    },
  }),

  defineRoute({
    method: 'patch',
    path: `${RESUMABLE_PATH}/:id`,
    summary: 'Send a chunk of a resumable upload (TUS).',
    description:
      'Appends a chunk at Upload-Offset (which must be the upload\'s offset: HEAD says it). The last chunk makes the object (checked, and an image processed, as a direct upload).',
    ...common,
    params: IdParams,
    headers: TusHeaders,
    rawBody: TUS_BODY,
    responses: { 204: noContent('Stored: Upload-Offset is the new offset.'), ...TUS_ERRORS },
    async handler(ctx) {
      return tusReply(ctx as AnyContext);
    },
  }),

  defineRoute({
    method: 'get',
    path: `${RESUMABLE_PATH}/:id`,
    summary: 'HEAD: the offset of a resumable upload (TUS).',
    description: 'HEAD answers Upload-Offset and Upload-Length of the caller\'s upload under way, to resume it. GET is not served (404).',
    ...common,
    params: IdParams,
    headers: TusHeaders,
    responses: { 200: noContent('Upload-Offset and Upload-Length (HEAD).'), 404: errors('upload_not_found') },
    async handler(ctx) {
      if (ctx.request.method !== 'HEAD') throw new HttpError(404, 'upload_not_found', 'Upload not found');
      return tusReply(ctx as AnyContext);
    },
  }),

  defineRoute({
    method: 'delete',
    path: `${RESUMABLE_PATH}/:id`,
    summary: 'Cancel a resumable upload (TUS).',
    description: "Cancels the caller's upload under way (TUS termination): its staged bytes are deleted at once and the quota it reserved is free again.",
    ...common,
    params: IdParams,
    headers: TusHeaders,
    responses: { 204: noContent('Cancelled.'), 404: errors('upload_not_found'), 412: errors('resumable_upload_refused') },
    async handler(ctx) {
      const { uploader } = ctx.services.storage;
      const target = await uploader.resumed(ctx as AnyContext, ctx.params.id);
      // Forgotten first: whatever the staging does, the upload can no longer finish.
      await uploader.abort(ctx, target);
      return tusReply(ctx as AnyContext, target);
    },
  }),
];

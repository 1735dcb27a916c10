// POST /api/docs/test, the live test executor (docs/api/integration.md#developer-docs:
// LiveTestRequest → LiveTestResponse, an ApiTestResult recorded). Called with an API token; the
// described request is replayed against THIS gateway (its loopback address,
// never a host taken from the request) with that same token, timed, and
// recorded. What may be replayed is SQL (api.api_test_prepare: token
// required, known endpoint, its method, one of its paths, not the executor
// itself); so is the record and its `success` (api.api_test_record).
//
// Only relative paths: a path must start with a single `/`, hold no
// backslash, whitespace or control character, and be its own normal form
// (no `.`/`..` segments, encoded or not), so the URL built on the loopback
// base can only ever name this server.
import { z } from 'zod';
import { defineRoute, type Route } from '../http/route.ts';
import { HttpError } from '../core/web/errors.ts';
import { LIMITS } from '../core/web/limits.ts';
import { DateTime, errors, Id } from '../http/responses.ts';

const METHODS = ['GET', 'POST', 'PUT', 'DELETE', 'PATCH'] as const;

/** Headers the caller may not set on the replay (the credential is the caller's own token; the rest is transport). */
const RESERVED_HEADERS = new Set([
  'authorization', 'host', 'content-length', 'connection', 'transfer-encoding', 'keep-alive', 'upgrade', 'te',
  'trailer', 'expect', 'cookie', 'proxy-authorization', 'proxy-connection', 'forwarded', 'x-forwarded-for',
  'x-forwarded-host', 'x-forwarded-proto', 'x-real-ip',
]);

const HeaderName = z
  .string()
  .regex(/^[A-Za-z0-9!#$%&'*+.^_`|~-]{1,100}$/, { message: 'must be an HTTP header name' })
  .refine((name) => !RESERVED_HEADERS.has(name.toLowerCase()), { message: 'this header cannot be set (the request carries your token)' });
const HeaderValue = z.string().max(4096).regex(/^[^\r\n\0]*$/, { message: 'must be a single-line value' });
const ParamValue = z.union([z.string().max(2000), z.number(), z.boolean()]);

const RelativePath = z
  .string()
  .min(1)
  .max(LIMITS.liveTestPathMaxLength)
  .regex(/^\/(?![/\\])[^\\\s\u0000-\u001f\u007f]*$/, {
    message: 'must be a relative path starting with a single / (no host, no backslash, no whitespace)',
  });

/** LiveTestRequest: the request to replay. */
export const LiveTestRequest = z
  .object({
    endpoint_id: z.guid({ message: 'must be a uuid' }).describe('The endpoint to call: an `id` from GET /api/docs/endpoints.'),
    method: z.enum(METHODS).describe("The endpoint's method."),
    path: RelativePath.describe("The path to call: the endpoint's path with its parameters filled in, optionally with a query string.").meta({
      example: '/api/mobile/profile',
    }),
    headers: z
      .record(HeaderName, HeaderValue)
      .nullish()
      .describe('Headers to send (not the credential: your API token is sent; nor transport headers).')
      .meta({ example: { accept: 'application/json' } }),
    params: z
      .record(z.string().min(1).max(200), z.union([ParamValue, z.array(ParamValue).max(50)]))
      .nullish()
      .describe('Query parameters to add, by name (a list repeats the name).')
      .meta({ example: { limit: 10 } }),
    body: z
      .record(z.string(), z.unknown())
      .nullish()
      .describe('The JSON body to send (not with GET).')
      .meta({ example: { name: 'Ada Lovelace' } }),
  })
  .refine((r) => !(r.method === 'GET' && r.body != null), { message: 'a GET request has no body', path: ['body'] })
  .meta({
    id: 'LiveTestRequest',
    description: 'A request to replay against this server with your API token.',
    example: { endpoint_id: '5f0c8a9e-3b1d-4c62-9a7e-2d4b6f8a1c03', method: 'GET', path: '/api/mobile/profile', headers: { accept: 'application/json' } },
  });

/** LiveTestResponse: what the replay answered. */
export const LiveTestResponse = z
  .object({
    test_result_id: Id.describe('The id of the recorded result (ApiTestResult).'),
    status: z.number().int().min(100).max(599).describe('The status the request was answered with (504 when it was not answered in time).').meta({ example: 200 }),
    response_time_ms: z.number().int().min(0).describe('How long the answer took, in milliseconds.').meta({ example: 12 }),
    success: z.boolean().describe('Whether the request succeeded: answered with a status below 400.'),
    executed_at: DateTime.describe('When the request was sent.'),
    headers: z
      .record(z.string(), z.string())
      .nullable()
      .describe('The response headers, or null when there was no answer.')
      .meta({ example: { 'content-type': 'application/json; charset=utf-8' } }),
    body: z
      .unknown()
      .describe('The response body parsed as JSON (object or array); null when it is not JSON.')
      .meta({ example: { success: true, data: { id: '5f0c8a9e-3b1d-4c62-9a7e-2d4b6f8a1c03', name: 'Ada Lovelace' } } }),
    error_message: z.string().nullable().describe('Why there is no answer or no recorded body, or null.').meta({ example: null }),
  })
  .meta({ id: 'LiveTestResponse', description: 'What the replayed request was answered, as recorded.' });

const TIMEOUT_MS = 15_000;
const MAX_BODY_BYTES = 4 * 1024 * 1024; // the OpenAPI document itself (1.3 MB) must fit

interface Replay {
  status: number;
  headers: Record<string, string> | null;
  body: unknown;
  errorMessage: string | null;
  ms: number;
}

/** Reads at most MAX_BODY_BYTES; a stream (text/event-stream) is not read. */
async function readBody(res: Response): Promise<{ text: string | null; error: string | null }> {
  const type = res.headers.get('content-type') ?? '';
  if (!res.body) return { text: null, error: null };
  if (type.startsWith('text/event-stream')) {
    await res.body.cancel();
    return { text: null, error: null };
  }
  const reader = res.body.getReader();
  const chunks: Uint8Array[] = [];
  let size = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    size += value.byteLength;
    if (size > MAX_BODY_BYTES) {
      await reader.cancel();
      return { text: null, error: 'the response body is larger than 4 MB; it is not recorded' };
    }
    chunks.push(value);
  }
  return { text: Buffer.concat(chunks).toString('utf8'), error: null };
}

async function replay(url: URL, method: string, headers: Record<string, string>, body: unknown): Promise<Replay> {
  const started = performance.now();
  const elapsed = () => Math.max(0, Math.round(performance.now() - started));
  try {
    const res = await fetch(url, {
      method,
      headers,
      body: body == null ? undefined : JSON.stringify(body),
      redirect: 'manual',
      signal: AbortSignal.timeout(TIMEOUT_MS),
    });
    const { text, error } = await readBody(res);
    const ms = elapsed();
    let parsed: unknown = null;
    if (text && /\bjson\b/.test(res.headers.get('content-type') ?? '')) {
      try {
        parsed = JSON.parse(text);
      } catch {
        parsed = null;
      }
    }
    return { status: res.status, headers: Object.fromEntries(res.headers), body: parsed, errorMessage: error, ms };
  } catch (err) {
    const timedOut = (err as { name?: string } | null)?.name === 'TimeoutError';
    return {
      status: 504,
      headers: null,
      body: null,
      errorMessage: timedOut ? `no response within ${TIMEOUT_MS / 1000} s` : 'the request could not be sent',
      ms: elapsed(),
    };
  }
}

export const liveTestRoute: Route = defineRoute({
  method: 'post',
  path: '/api/docs/test',
  summary: 'Replay a request against this server with your API token, timed, and record the result (ApiTestResult).',
  description:
    'Replays a request against this server with your API token (the request carries it), times it and records the result (ApiTestResult). Only endpoints of GET /api/docs/endpoints, with their own method and one of their paths, on this server; not this endpoint itself. Call it with an API token.',
  limits: ['The answer is read up to 4 MB (a larger body is not kept); no answer within 15 s is 504 in `status`.'],
  auth: 'user',
  security: ['apiToken'],
  body: LiveTestRequest,
  invalidStatus: 400,
  headers: z.object({ authorization: z.string() }),
  responses: {
    200: LiveTestResponse,
    400: errors('unknown_endpoint', 'endpoint_deprecated', 'method_mismatch', 'path_mismatch', 'recursive_test'),
    401: errors('api_token_required'),
  },
  async handler({ body, headers, db, services }) {
    if (!services.selfUrl) throw new HttpError(503, 'service_unavailable', 'the server is starting');
    const base = new URL(services.selfUrl);
    const url = new URL(body.path, base);
    // Its own normal form, on this server: nothing but the path (and query) given.
    if (url.origin !== base.origin || url.pathname !== body.path.split('?')[0]) {
      throw new HttpError(400, 'bad_request', 'path must be a normalised relative path (no `.` or `..` segments)');
    }
    await db((tx) => tx`select api.api_test_prepare(${body.endpoint_id}, ${body.method}, ${url.pathname})`);

    for (const [name, value] of Object.entries(body.params ?? {})) {
      for (const item of Array.isArray(value) ? value : [value]) url.searchParams.append(name, String(item));
    }
    const sent: Record<string, string> = { ...(body.headers ?? {}) };
    const hasBody = body.body != null;
    if (hasBody && !Object.keys(sent).some((name) => name.toLowerCase() === 'content-type')) sent['content-type'] = 'application/json';
    const result = await replay(url, body.method, { ...sent, authorization: headers.authorization }, body.body);

    const [row] = await db(
      (tx) => tx<{ recorded: { id: string; success: boolean; executed_at: string } }[]>`
        select api.api_test_record(
          ${body.endpoint_id}, ${body.method}, ${body.path},
          ${Object.keys(sent).length ? tx.json(sent) : null}::jsonb,
          ${body.params ? tx.json(body.params as never) : null}::jsonb,
          ${hasBody ? tx.json(body.body as never) : null}::jsonb,
          ${result.status}, ${result.ms},
          ${result.headers ? tx.json(result.headers) : null}::jsonb,
          ${result.body === null ? null : tx.json(result.body as never)}::jsonb,
          ${result.errorMessage}) as recorded`,
    );
    const recorded = row!.recorded;
    return {
      status: 200,
      body: {
        test_result_id: recorded.id,
        status: result.status,
        response_time_ms: result.ms,
        success: recorded.success,
        executed_at: recorded.executed_at,
        headers: result.headers,
        body: result.body,
        error_message: result.errorMessage,
      },
    };
  },
});

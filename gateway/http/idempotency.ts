// Idempotency keys (Stripe's `Idempotency-Key` convention), for every POST,
// PATCH and DELETE of the mobile, platform and token interfaces. The rules are
// SQL (api.idempotency_claim / _store); the request pipeline (route.ts) wires
// them into the request's one transaction:
//
//   BEGIN, settings, api.idempotency_claim(key, request hash),
//   the route's call                                    ← one round trip
//   the answer is made (TypeScript)
//   api.idempotency_store(key, answer), COMMIT          ← a second round trip
//
// so the key's record commits with the request's effect or not at all. A
// record belongs to the credential that made it (an API token and its scope,
// or an access token's session), and only successes are stored: a refusal
// rolls the transaction back, the claim with it, and its retry runs again.
// A claim that finds the same request answered for the same credential
// returns the stored answer; the route still runs in the transaction (so it
// applies its authorization now), and the stored answer is sent with
// `Idempotent-Replayed: true` unless the route refuses the caller (401, 403);
// either way the transaction rolls back. Requests without the header take the
// usual path (no extra statement, no extra round trip). serveKeyed is that
// step of the pipeline.
import crypto from 'node:crypto';
import type { ServerResponse } from 'node:http';
import { z } from 'zod';
import { namedCall, type InTransaction, type Tx } from '../core/database/transaction.ts';
import { idempotentReplays, metricsOn } from '../core/process/metrics.ts';
import { locationHeader, sendText } from './exchange.ts';

export const IDEMPOTENCY_HEADER = 'idempotency-key';
export const REPLAYED_HEADER = 'Idempotent-Replayed';

/** The paths whose POST, PATCH and DELETE take an Idempotency-Key (signed-in routes only: keys are per caller). */
const KEYED_PATHS = /^\/api\/(mobile\/|v1\/platform\/|docs\/tokens(\/|$))/;

export function takesIdempotencyKey(route: { method: string; path: string; auth: string }): boolean {
  return route.auth === 'user' && ['post', 'patch', 'delete'].includes(route.method) && KEYED_PATHS.test(route.path);
}

/** The key: 1 to 255 printable ASCII characters. */
export const IdempotencyKey = z
  .string()
  .regex(/^[\x20-\x7e]{1,255}$/, { message: 'must be 1 to 255 printable ASCII characters' })
  .meta({
    description:
      'Makes a retry safe: the same request again (the same key, method, path and body, from the same credential) within ' +
      '48 hours takes no effect again and gets the first answer (status and body) with `Idempotent-Replayed: true`, unless the ' +
      'route refuses the credential now (401, 403). A key belongs to the credential that sends it (an API token, or the session ' +
      'of an access token): another credential using the same key runs its own request. The same key with another request is ' +
      '422 `idempotency_key_reused`; while the first request is still running, 409 `idempotency_key_in_progress`. Only a ' +
      'success is kept: a refused request keeps nothing and may be sent again with its key. Use a random value, e.g. a UUID.',
    example: '3f2a7c1e-8d4b-4e0a-9b6f-1c2d3e4f5a6b',
  });

/** The header as the pipeline validates it (with the route's invalid-input status). */
export const IdempotencyKeyHeaders = z.object({ [IDEMPOTENCY_HEADER]: IdempotencyKey });

/** The same for the OpenAPI document: optional, by its usual spelling. */
export const DocumentedIdempotencyKeyHeaders = z.object({ 'Idempotency-Key': IdempotencyKey.optional() });

/** SHA-256 (hex) of what makes two requests "the same": method, path, query string and JSON body. */
export function requestHash(method: string, path: string, search: string, body: unknown): string {
  return crypto
    .createHash('sha256')
    .update(`${method.toUpperCase()}\n${path}\n${search}\n${body === undefined ? '' : JSON.stringify(body)}`)
    .digest('hex');
}

/** An answer as sent: status, headers (content type included) and body text. */
export interface Answer {
  status: number;
  headers: Record<string, string>;
  body?: string;
}

/** Sends an answer; a replayed one says so. */
export function sendAnswer(res: ServerResponse, answer: Answer, replayed = false): void {
  const { 'content-type': contentType, ...headers } = answer.headers;
  for (const [name, value] of Object.entries(headers)) res.setHeader(name, value);
  if (replayed) {
    res.setHeader(REPLAYED_HEADER, 'true');
    if (metricsOn()) idempotentReplays.inc();
  }
  if (answer.body !== undefined) {
    sendText(res, answer.status, contentType ?? 'application/json; charset=utf-8', answer.body);
    return;
  }
  if (contentType) res.setHeader('Content-Type', contentType);
  res.statusCode = answer.status;
  res.end();
}

/** What a route's reply sends (streams excepted: they are not replayable). */
export function answerOf(reply: { status: number; body?: unknown; json?: string; page?: { html: string; headers: Record<string, string> }; redirect?: string; headers?: Record<string, string>; stream?: unknown }): Answer {
  if (reply.stream) throw new Error('a streamed reply cannot be stored for an idempotency key');
  const headers: Record<string, string> = {};
  for (const [name, value] of Object.entries({ ...reply.page?.headers, ...reply.headers })) headers[name.toLowerCase()] = value;
  if (reply.redirect !== undefined) headers.location = locationHeader(reply.redirect);
  if (reply.page !== undefined) return { status: reply.status, headers: { ...headers, 'content-type': 'text/html; charset=utf-8' }, body: reply.page.html };
  const json = reply.json ?? (reply.body !== undefined ? JSON.stringify(reply.body) : undefined);
  if (json !== undefined) return { status: reply.status, headers: { ...headers, 'content-type': 'application/json; charset=utf-8' }, body: json };
  return { status: reply.status, headers };
}

/** A refusal of the caller (no valid credential, not allowed): a replay never wins over it. */
function refusesCaller(status: number): boolean {
  return status === 401 || status === 403;
}

/** Codes of the refusals of api.idempotency_claim: the same status and Error body on every route. */
const REFUSAL_CODES = new Set(['idempotency_key_in_progress', 'idempotency_key_reused']);

export function isIdempotencyRefusal(code: string): boolean {
  return REFUSAL_CODES.has(code);
}

export interface KeyedRequest {
  key: string;
  hash: string;
}

/**
 * An answer sent without keeping a record (the transaction rolled back): the
 * stored answer of a replay, or a reply that is no success.
 */
class AnswerWithoutRecord extends Error {
  constructor(
    readonly answer: Answer,
    readonly replayed: boolean,
  ) {
    super('answered without a record of the idempotency key');
  }
}

interface Stored {
  status: number;
  answer: { headers: Record<string, string>; body: string | null };
}

/**
 * Serves a request with an Idempotency-Key: the claim of the key, the route
 * (`handle`: validation, the handler and its answer) and the storing of its
 * answer in one transaction. A refusal rolls it all back (nothing is kept).
 * When the claim returns the stored answer of the same request by the same
 * credential, the route has run behind it all the same: a refusal of the
 * caller (401, 403; `statusOf` gives the status the route answers an error
 * with) is the answer, else the stored one; the route's work is rolled back.
 */
export async function serveKeyed(
  res: ServerResponse,
  request: KeyedRequest,
  transaction: InTransaction,
  handle: (db: InTransaction) => Promise<Answer>,
  statusOf: (err: unknown) => number,
): Promise<void> {
  let answer: Answer;
  try {
    answer = await transaction(
      async (tx) => {
        const stored = claim(tx, request);
        let outcome: { answer: Answer } | { error: unknown };
        try {
          // Every call the route makes runs in this transaction, behind the claim
          // (and names it, for the metrics and the SQL span: core/database/transaction.ts).
          outcome = { answer: await handle((fn, claims, options) => (claims !== undefined ? transaction(fn, claims, options) : namedCall(tx, fn(tx)))) };
        } catch (error) {
          outcome = { error };
        }
        // The claim's refusal (or the failure before it) is the answer, not what it caused.
        const replay = await stored;
        if (replay) {
          if ('error' in outcome && refusesCaller(statusOf(outcome.error))) throw outcome.error;
          throw new AnswerWithoutRecord(replay, true);
        }
        if ('error' in outcome) throw outcome.error;
        // Only a success is kept (api.idempotency_store refuses anything else).
        if (outcome.answer.status >= 400) throw new AnswerWithoutRecord(outcome.answer, false);
        return outcome.answer;
      },
      undefined,
      { finish: (tx, made) => [store(tx, request, made)] },
    );
  } catch (err) {
    if (!(err instanceof AnswerWithoutRecord)) throw err;
    sendAnswer(res, err.answer, err.replayed);
    return;
  }
  sendAnswer(res, answer);
}

/**
 * The claim, written behind BEGIN and the settings (not awaited: pipelined
 * with the route's call). Null: the key is claimed; otherwise the stored
 * answer of the same request by the same credential.
 */
function claim(tx: Tx, request: KeyedRequest): Promise<Answer | null> {
  const claimed = tx<{ stored: Stored | null }[]>`select api.idempotency_claim(${request.key}, ${request.hash}) as stored`.execute();
  const answer = claimed.then(([row]) =>
    row?.stored ? { status: row.stored.status, headers: row.stored.answer.headers, body: row.stored.answer.body ?? undefined } : null,
  );
  // Its failure is read by the pipeline; never unhandled.
  answer.catch(() => {});
  return answer;
}

/** The statement sent with COMMIT: store the answer (a success). */
function store(tx: Tx, request: KeyedRequest, answer: Answer): Promise<unknown> {
  const stored = tx.json({ headers: answer.headers, body: answer.body ?? null });
  return tx`select api.idempotency_store(${request.key}, ${answer.status}, ${stored}::jsonb)`.execute();
}

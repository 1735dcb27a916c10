// Idempotency keys (Stripe's `Idempotency-Key` convention), for every POST,
// PATCH and DELETE of the mobile, platform and token interfaces. The rules are
// SQL (api.idempotency_claim / _store / _replay); the request pipeline
// (route.ts) wires them into the request's one transaction:
//
//   BEGIN, settings, api.idempotency_claim(key, request hash), SAVEPOINT,
//   the route's call                                    ← one round trip
//   the answer is made (TypeScript)
//   [ROLLBACK TO SAVEPOINT, for a 4xx,] api.idempotency_store(key, answer),
//   COMMIT                                              ← a second round trip
//
// so the key's record commits with the request's effect or not at all.
// A claim that finds the key answered raises PTRPL (idempotent_replay): the
// transaction rolls back and the stored answer is read in a read-only one and
// sent again with `Idempotent-Replayed: true`. Requests without the header
// take the usual path (no extra statement, no extra round trip).
import crypto from 'node:crypto';
import type { ServerResponse } from 'node:http';
import postgres from 'postgres';
import { z } from 'zod';
import type { Tx } from '../core/db.ts';
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
      'Makes a retry safe: a second request with the same key, method, path and body within 24 hours is not run again; ' +
      'it gets the first answer (the same status and body, refusals included) with `Idempotent-Replayed: true`. The same ' +
      'key with another request is 422 `idempotency_key_reused`; while the first is still running, 409 ' +
      '`idempotency_key_in_progress`. Keys are per caller (a user, or an API token\'s owner). Use a random value, e.g. a UUID.',
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
  if (replayed) res.setHeader(REPLAYED_HEADER, 'true');
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

/** Which refusals are kept and replayed: every 4xx but 401 (no caller) and 429 (try later). */
export function keepsRefusal(status: number): boolean {
  return status >= 400 && status < 500 && status !== 401 && status !== 408 && status !== 429;
}

export interface KeyedRequest {
  key: string;
  hash: string;
}

const SAVEPOINT = 'idempotent_request';

/** The claim and a savepoint, written behind BEGIN and the settings (not awaited: pipelined with the call). */
export function claim(tx: Tx, request: KeyedRequest): { claimed: Promise<unknown>; savepoint: Promise<unknown> } {
  const claimed = tx`select api.idempotency_claim(${request.key}, ${request.hash})`.execute();
  const savepoint = tx.unsafe(`savepoint ${SAVEPOINT}`).execute();
  // Their failures are read by the pipeline; never unhandled.
  claimed.catch(() => {});
  savepoint.catch(() => {});
  return { claimed, savepoint };
}

/** The statements sent with COMMIT: undo a refused request's work (its savepoint), then store the answer. */
export function store(tx: Tx, request: KeyedRequest, answer: Answer, refused: boolean): Promise<unknown>[] {
  const stored = tx.json({ headers: answer.headers, body: answer.body ?? null });
  return [
    ...(refused ? [tx.unsafe(`rollback to savepoint ${SAVEPOINT}`).execute()] : []),
    tx`select api.idempotency_store(${request.key}, ${answer.status}, ${stored}::jsonb)`.execute(),
  ];
}

/** The stored answer of a replayed request; undefined when it is gone (expired meanwhile). */
export async function storedAnswer(tx: Tx, request: KeyedRequest): Promise<Answer | undefined> {
  const [row] = await tx<{ status: number; answer: { headers: Record<string, string>; body: string | null } }[]>`
    select status, answer from api.idempotency_replay(${request.key}, ${request.hash})`;
  if (!row) return undefined;
  return { status: row.status, headers: row.answer.headers, body: row.answer.body ?? undefined };
}

/** The claim found the same request answered before (api.idempotency_claim raises PTRPL). */
export function isReplay(err: unknown): boolean {
  return err instanceof postgres.PostgresError && err.code === 'PTRPL';
}

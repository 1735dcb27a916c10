// The one request pipeline every REST route goes through: defineRoute builds
// each route's handler (registered as a Fastify route by gateway/app.ts, and
// given the request through the thin adapter of http/exchange.ts), which runs
// these steps, each a function below:
//
//   1. authenticate        the bearer credential, when the route needs a
//                          caller: an API token (SQL) or an access token
//                          (its signature, cached until it expires); the
//                          caller's claims come from core/auth/identity.ts
//   2. transactionOf       how the handler reaches the database: one
//                          transaction per call, as the caller (anon on
//                          public routes), read-only for a GET, within the
//                          client's fair share of the pool, on the primary
//                          or a replica as the MCP tools' are
//                          (core/database/request-transaction.ts); one
//                          pipelined round trip (core/database/transaction.ts)
//   3. validatedContext    params, query, body and headers validated with the
//                          route's zod schemas; the handler then calls one SQL
//                          function inside ctx.db(...)
//   4. serveKeyed          with an Idempotency-Key (POST, PATCH, DELETE of the
//                          mobile, platform and token interfaces): steps 3 and
//                          the handler in one transaction with the key's claim
//                          and the storing of the answer, or the stored answer
//                          replayed (http/idempotency.ts)
//   5. send, or fail       the reply (JSON, JSON text from SQL as is, HTML, a
//                          redirect, a stream), or the error mapped to a status
//                          and one of the three error bodies of
//                          docs/api/conventions.md#errors (chosen per route and status), or
//                          the route's HTML error page. SQL text never reaches
//                          the client (core/web/errors.ts).
//
// Before it (app.ts, Fastify's hooks): the request id and the request log
// line (one per request, written when the response finishes), CORS
// (@fastify/cors), the readiness gate, and the body read by Fastify's
// content-type parsers for requests that have one (http/body.ts; not on
// routes with a rawBody, whose handlers stream it).
//
// Route modules only declare routes; they never build SQL strings, filter rows
// by user or re-check a rule the database enforces.
import type { AuthRedirects } from '../core/process/config.ts';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { z } from 'zod';
import { authenticateApiToken, isApiTokenSecret, type ApiTokenInfo } from '../core/auth/api-tokens.ts';
import { bearerToken } from '../core/auth/bearer.ts';
import { callerOf, claimsOf, type Caller } from '../core/auth/identity.ts';
import { clientIp } from '../core/web/client-ip.ts';
import type { AuthLimits, TrustProxy } from '../core/process/config.ts';
import type { InTransaction, RequestClaims, Tx } from '../core/database/transaction.ts';
import { requestTransaction } from '../core/database/request-transaction.ts';
import { DEADLINE_MARGIN_MS, type Sql } from '../core/database/pool.ts';
import { CONSISTENCY_TOKEN_HEADER, type Replicas } from '../core/database/replicas.ts';
import { defaultCode, errorBody, HttpError, restatedFor, toHttpError, unavailable, type ErrorShape } from '../core/web/errors.ts';
import { fairShareKey, type FairShare } from './fair-share.ts';
import { InvalidTokenError, type AccessClaims, type ApiKeyRole, type TokenService } from '../core/auth/jwt.ts';
import type { Logger } from '../core/process/log.ts';
import type { Passwords } from '../core/auth/passwords.ts';
import { retryAfterOf } from '../core/web/throttle.ts';
import { noteUnavailable } from '../core/database/unavailable-log.ts';
import { locationHeader, sendHtml, sendJson, sendText, type Exchange } from './exchange.ts';
import {
  answerOf,
  IDEMPOTENCY_HEADER,
  IdempotencyKeyHeaders,
  isIdempotencyRefusal,
  requestHash,
  sendAnswer,
  serveKeyed,
  takesIdempotencyKey,
  type Answer,
  type KeyedRequest,
} from './idempotency.ts';
import type { Page } from '../core/web/html.ts';
import { assertStorable } from '../core/web/input.ts';
import { discardRest, FormFields } from './body.ts';
import type { Responses, SecurityScheme } from './responses.ts';

export type Method = 'get' | 'post' | 'put' | 'patch' | 'delete';

/**
 * What every route is built with (the composition root, gateway/server.ts,
 * makes it once per process). A front door that needs more declares it
 * where it is defined, by adding fields to this interface (`declare module`,
 * as routes/stream.ts adds the realtime hub), so that this layer depends on
 * none of them.
 */
export interface Services {
  sql: Sql;
  /** Read replicas (DATABASE_REPLICA_URLS, core/database/replicas.ts); absent: everything runs on sql. */
  replicas?: Replicas;
  tokens: TokenService;
  statementTimeoutMs: number;
  publicUrl: string;
  appScheme: string;
  /** Where verified /auth/v1 links may redirect (absent: only to publicUrl). */
  authRedirects?: AuthRedirects;
  /** Failed-login and refresh/verify throttling (defaults when absent). */
  authLimits?: AuthLimits;
  /** AUTH_ANONYMOUS_USERS: whether guests may sign in (absent: yes). */
  guestsEnabled?: boolean;
  /** How to read the client IP (TRUST_PROXY); absent: the socket address. */
  trustProxy?: TrustProxy;
  /** Per-client share of the pool (gateway/http/fair-share.ts); none: unlimited. */
  fairShare?: FairShare;
  /** This gateway's own address (loopback), known once it listens: the live test executor replays requests here. */
  selfUrl?: string;
  /** Password hashing in this process, bounded (core/auth/passwords.ts). */
  passwords: Passwords;
  /** Webhook registration: WEBHOOK_ALLOW_PRIVATE_TARGETS (gateway/jobs/webhook-targets.ts); absent: not allowed. */
  webhooks?: { allowPrivateTargets: boolean; allowedPorts: readonly number[] };
}

/**
 * What a handler answers: `body` is sent as JSON; `page` as text/html;
 * charset=utf-8 with the security headers it carries; `redirect` sets
 * Location (with `page`, if given, as the body). `headers` are set as given
 * (after the page's). `stream` takes over the response (after status and
 * headers are set) for long-lived replies such as server-sent events; it
 * writes and ends the response itself.
 */
export interface Reply {
  status: number;
  body?: unknown;
  /** A JSON document as text (e.g. jsonb::text from SQL), sent as is with the JSON content type. */
  json?: string;
  /**
   * An HTML page and the headers it needs (core/web/html.ts page()): they travel
   * together, so a page never goes out with another page's nonce (its style
   * and script would be blocked).
   */
  page?: Page;
  /** Other text (e.g. an iCalendar file), sent as is with `contentType` (bytes: already encoded, e.g. compressed, with its Content-Encoding in `headers`). */
  text?: string | Uint8Array;
  contentType?: string;
  redirect?: string;
  headers?: Record<string, string>;
  stream?: (res: ServerResponse) => void;
}

export interface Context<P, Q, B, H = undefined> {
  params: P;
  query: Q;
  body: B;
  /** The request headers the route's `headers` schema names. */
  headers: H;
  /**
   * Who the request runs as: its claims (core/auth/identity.ts: an access
   * token's verified claims, or an API token's); null on public routes.
   */
  user: AccessClaims | null;
  /** The API token the request was authenticated with; null for an access token or a public route. */
  apiToken: ApiTokenInfo | null;
  /** The role of the request's API key (`apikey`) on routes that require one; null elsewhere. */
  apiKeyRole: ApiKeyRole | null;
  /** The client's IP address (gateway/core/web/client-ip.ts), for limits per client. */
  clientIp: string;
  /** The request's User-Agent (at most 512 characters), or null: recorded with a session. */
  userAgent: string | null;
  /**
   * The request itself: on a route with `rawBody`, its body is read from it
   * as a stream (nothing has read it before the handler).
   */
  request: IncomingMessage;
  services: Services;
  log: Logger;
  /**
   * Runs `fn` in the request's transaction, as the request's role and claims
   * (or the claims given). GET routes run read-only. `null` claims: as the
   * gateway's own database role, for the private functions only the
   * processes may run (the sign-in's password attempts: a request role never
   * reaches a password hash). `{ readOnly: false }`: a write from a GET
   * route (on the primary), such as a cache's record.
   */
  db<T>(fn: (tx: Tx) => Promise<T>, claims?: RequestClaims | null, options?: { readOnly: false }): Promise<T>;
}

type AnySchema = z.ZodType;
type Out<S> = S extends z.ZodType ? z.output<S> : undefined;

export interface RouteDefinition<
  P extends AnySchema | undefined,
  Q extends AnySchema | undefined,
  B extends AnySchema | undefined,
  H extends AnySchema | undefined = undefined,
> {
  method: Method;
  path: string;
  /** One line for the docs. */
  summary: string;
  /**
   * What the operation does, for a client developer (the OpenAPI
   * operation's description, before the limits and errors the document
   * adds). A test lists the routes without one.
   */
  description?: string;
  /** Limits a client meets on this route beyond its schemas (rates, counts), one line each; shown in the docs. */
  limits?: string[];
  /**
   * 'user': a valid bearer credential is required (401 otherwise): an access
   * token, or an API token whose permissions match the path (403 otherwise).
   */
  auth: 'public' | 'user';
  /**
   * 'operator' (the /storage/v1 routes): the service-role key as the bearer
   * token acts as the operator, as on Supabase: the request runs as Postgres
   * role service_role with the claims core/auth/identity.ts gives that key
   * (no user), which the rules of sql/areas/storage.sql recognise
   * (private.storage_operator); ctx.user is null. Elsewhere the key is no
   * user's credential (401).
   */
  serviceRole?: 'operator';
  /**
   * Also accept the access token as `?access_token=` (for clients that cannot
   * set headers, such as a browser EventSource). The request log never holds
   * query strings.
   */
  tokenInQuery?: boolean;
  /** GET routes run read-only; true when a GET must write (e.g. registering a stream). */
  readWrite?: boolean;
  params?: P;
  query?: Q;
  body?: B;
  /** Request headers the handler reads (names in lower case). */
  headers?: H;
  /** Status for a request that fails validation: 400 or 422, per route (docs/api/conventions.md#errors). */
  invalidStatus?: 400 | 422;
  /**
   * Status for path parameters that fail validation, when it differs from
   * invalidStatus: 404 for ids that cannot name anything (e.g. not a uuid).
   */
  invalidParamsStatus?: 400 | 404 | 422;
  /** Error body per status (the Simple and Flagged bodies of older interfaces); everything else uses `errorShape`. */
  errorShapes?: Partial<Record<number, ErrorShape>>;
  /**
   * The error body of the route's group (a name in ERROR_SHAPES, core/web/errors.ts) for every
   * status errorShapes does not name, the pipeline's errors included: 'default' (the Error body)
   * unless said; /storage/v1 answers 'supabase_storage', /auth/v1 'supabase_auth'.
   */
  errorShape?: ErrorShape;
  /**
   * 'required': the request must carry an API key (docs/supabase-sdks.md#api-keys) in the
   * `apikey` header, as the Supabase SDKs send it: 401 without one or with
   * one that is not this service's. Its role is the context's apiKeyRole.
   */
  apiKey?: 'required';
  /**
   * The body is not JSON and is not read before the handler, which streams it
   * from `ctx.request` (file uploads): what it may be, for the docs.
   */
  rawBody?: RawBody;
  /** Per-route status changes for errors raised by SQL (e.g. duplicate e-mail: 409 → 400). */
  statusOverrides?: Partial<Record<number, number>>;
  /** Web pages: errors are answered with this HTML page, sent with the security headers it brings. */
  renderError?: (err: HttpError) => Page;
  /** The documented responses, status → body (see http/openapi.ts); the OpenAPI document is built from them. */
  responses?: Responses;
  /** Security schemes for the docs when not both (e.g. API token only). */
  security?: SecurityScheme[];
  /** The path holds a secret (a token): the request log line shows the route's template instead. */
  secretPath?: boolean;
  /**
   * false: the route takes no Idempotency-Key although its method and path
   * would (http/idempotency.ts): a route that checks the caller's password
   * again before it acts, whose retry checks it again.
   */
  idempotencyKey?: false;
  /** 'form': the body is an HTML form (application/x-www-form-urlencoded, http/body.ts FormFields), for the web pages; default JSON. */
  bodyType?: 'json' | 'form';
  /** The success answers carry the object's ETag (set by the handler from SQL's version, http/versions.ts): for the docs. */
  etag?: true;
  handler(ctx: Context<Out<P>, Out<Q>, Out<B>, Out<H>>): Promise<Reply>;
}

/** A request body the handler streams itself (http/openapi.ts documents it). */
export interface RawBody {
  description: string;
  /** Media type → the schema of the body in it (a multipart form's fields; a binary body). */
  content: Record<string, z.ZodType>;
}

export interface Route {
  method: Method;
  path: string;
  summary: string;
  auth: 'public' | 'user';
  schemas: { params?: AnySchema; query?: AnySchema; body?: AnySchema; headers?: AnySchema };
  /** What the OpenAPI document needs besides the schemas. */
  docs: {
    description?: string;
    limits?: string[];
    responses?: Responses;
    security?: SecurityScheme[];
    errorShapes?: Partial<Record<number, ErrorShape>>;
    errorShape?: ErrorShape;
    apiKey?: 'required';
    rawBody?: RawBody;
    invalidStatus?: 400 | 422;
    invalidParamsStatus?: 400 | 404 | 422;
    htmlErrors: boolean;
    /** POST, PATCH and DELETE of the mobile, platform and token interfaces take an Idempotency-Key (http/idempotency.ts). */
    idempotencyKey: boolean;
    /** The request body's media type. */
    bodyType: 'json' | 'form';
    /** A GET that runs read-only: with read replicas it may run on one (it takes X-Consistency-Token); the others answer one. */
    readOnly: boolean;
    /** The success answers carry an ETag. */
    etag: boolean;
  };
  build(services: Services): RouteHandler;
}

/** A route's handler, given the request once its route is found and its body read. */
export type RouteHandler = (exchange: Exchange) => Promise<void>;

/** What the pipeline's steps read of a route's definition (everything but its handler). */
type RouteRules = Omit<RouteDefinition<AnySchema | undefined, AnySchema | undefined, AnySchema | undefined, AnySchema | undefined>, 'handler'>;

/** A GET runs read-only unless it declares readWrite (it registers something); with read replicas it may run on one. */
function runsReadOnly(def: RouteRules): boolean {
  return def.method === 'get' && !def.readWrite;
}

export function defineRoute<
  P extends AnySchema | undefined = undefined,
  Q extends AnySchema | undefined = undefined,
  B extends AnySchema | undefined = undefined,
  H extends AnySchema | undefined = undefined,
>(def: RouteDefinition<P, Q, B, H>): Route {
  const keyed = keyedRoute(def);
  return {
    method: def.method,
    path: def.path,
    summary: def.summary,
    auth: def.auth,
    schemas: { params: def.params, query: def.query, body: def.body, headers: def.headers },
    docs: {
      description: def.description,
      limits: def.limits,
      responses: def.responses,
      security: def.security,
      errorShapes: def.errorShapes,
      errorShape: def.errorShape,
      apiKey: def.apiKey,
      rawBody: def.rawBody,
      invalidStatus: def.invalidStatus,
      invalidParamsStatus: def.invalidParamsStatus,
      htmlErrors: def.renderError !== undefined,
      idempotencyKey: keyed,
      bodyType: def.bodyType ?? 'json',
      readOnly: runsReadOnly(def),
      etag: def.etag ?? false,
    },
    build: (services) => async (exchange) => {
      if (def.secretPath) exchange.logPath = def.path;
      try {
        const apiKeyRole = def.apiKey ? requireApiKey(exchange, services) : null;
        const authenticated = def.auth === 'user' ? await authenticate(exchange, services, def.tokenInQuery ?? false, def.serviceRole === 'operator') : null;
        const caller = authenticated === OPERATOR ? null : authenticated;
        if (caller) exchange.userId = caller.user.sub;
        if (authenticated === OPERATOR) exchange.requestLog.role = OPERATOR_CLAIMS.role;
        const ip = clientIp(exchange.req.socket.remoteAddress, exchange.req.headers['x-forwarded-for'], services.trustProxy);
        const claims = authenticated === OPERATOR ? OPERATOR_CLAIMS : (caller?.user ?? claimsOf({ kind: 'anon' }));
        const transaction = transactionOf(def, services, claims, caller, ip, exchange);
        const run = (db: InTransaction) => def.handler(validatedContext(def, exchange, { services, caller, ip, db, apiKeyRole }));
        const key = keyed ? idempotencyKeyOf(exchange, def.invalidStatus ?? 400) : null;
        if (key) await serveKeyed(exchange.res, key, transaction, async (db) => answerOf(await run(db)), (err) => httpErrorOf(def, err).status);
        else send(exchange.res, await run(transaction));
      } catch (err) {
        await fail(exchange, def, err);
      }
    },
  };
}

/** The operator (the service-role key on a route that takes it): no user. */
const OPERATOR = Symbol('operator');
const OPERATOR_CLAIMS = claimsOf({ kind: 'service_role' });

/**
 * Step 1, on routes for signed-in callers: the bearer credential (or, on
 * routes that allow it, `?access_token=`), verified: an API token by SQL
 * (its use counted, its permissions matched to the path: 401/403), an access
 * token by its signature (cached until it expires; its session is checked in
 * the request's transaction); on a route that takes it, the service-role key
 * (the operator).
 */
async function authenticate(exchange: Exchange, services: Services, tokenInQuery: boolean, operator: boolean): Promise<Caller | typeof OPERATOR> {
  const header = exchange.req.headers.authorization;
  const inQuery = tokenInQuery && !header ? exchange.query.access_token : undefined;
  const token = bearerToken(header) ?? (typeof inQuery === 'string' ? inQuery : undefined);
  if (!token) throw new HttpError(401, 'unauthorized', 'missing bearer token');
  if (operator && header !== undefined && services.tokens.apiKeyRole(token) === 'service_role') return OPERATOR;
  if (isApiTokenSecret(token)) {
    const apiToken = await authenticateApiToken(services.sql, token, exchange.path, services.statementTimeoutMs + DEADLINE_MARGIN_MS);
    return callerOf({ kind: 'api_token', token: apiToken });
  }
  try {
    return callerOf({ kind: 'access_token', claims: await services.tokens.verify(token) });
  } catch (err) {
    if (err instanceof InvalidTokenError) throw new HttpError(401, 'unauthorized', err.message, null, 'bad_credential');
    throw err;
  }
}

/** Step 1, on routes that require one: the API key of the `apikey` header, verified (its role), or 401. */
function requireApiKey(exchange: Exchange, services: Services): ApiKeyRole {
  const header = exchange.req.headers.apikey;
  if (typeof header !== 'string' || header === '') throw new HttpError(401, 'unauthorized', 'No API key found in request', { error_code: 'no_api_key' });
  const role = services.tokens.apiKeyRole(header);
  if (!role) throw new HttpError(401, 'unauthorized', 'Invalid API key', { error_code: 'invalid_api_key' });
  return role;
}

/**
 * Step 2: the request's transactions (core/database/request-transaction.ts:
 * the primary or a replica, as the caller, anon on public routes), read-only
 * for a GET, each within the client's fair share of the pool
 * (fair-share.ts); a read-write one answers its consistency token.
 */
function transactionOf(def: RouteRules, services: Services, claims: RequestClaims, caller: Caller | null, ip: string, exchange: Exchange): InTransaction {
  const trace = exchange.requestLog;
  const db = requestTransaction({
    sql: services.sql,
    replicas: services.replicas,
    claims,
    readOnly: runsReadOnly(def),
    statementTimeoutMs: services.statementTimeoutMs,
    traceId: trace.traceId,
    traceparent: trace.traceparent,
    traceContext: trace.span?.context,
    consistencyToken: exchange.req.headers[CONSISTENCY_TOKEN_HEADER],
    onToken: (token) => {
      if (!exchange.res.headersSent) exchange.res.setHeader(CONSISTENCY_TOKEN_HEADER, token);
    },
  });
  const share = services.fairShare;
  if (!share) return db;
  const shareKey = fairShareKey(caller?.user.sub, ip);
  return (fn, asClaims, options) => share.run(shareKey, () => db(fn, asClaims, options));
}

/** Step 3: the handler's context, its params, query, body and headers validated with the route's schemas (400, 404 or 422). */
function validatedContext<P, Q, B, H>(
  def: RouteRules,
  exchange: Exchange,
  request: { services: Services; caller: Caller | null; ip: string; db: InTransaction; apiKeyRole: ApiKeyRole | null },
): Context<P, Q, B, H> {
  const invalid = def.invalidStatus ?? 400;
  return {
    params: validate(def.params, exchange.params, 'path', def.invalidParamsStatus ?? invalid) as P,
    query: validate(def.query, def.query ? exchange.query : undefined, 'query', invalid) as Q,
    body: validate(def.body, bodyFor(def.bodyType ?? 'json', exchange.body), 'body', invalid) as B,
    headers: validate(def.headers, exchange.req.headers, 'header', invalid) as H,
    user: request.caller?.user ?? null,
    apiToken: request.caller?.apiToken ?? null,
    apiKeyRole: request.apiKeyRole,
    clientIp: request.ip,
    request: exchange.req,
    userAgent: userAgentOf(exchange.req.headers['user-agent']),
    services: request.services,
    get log() {
      return exchange.log;
    },
    db: request.db,
  };
}

/** Whether a route takes an Idempotency-Key: its method and path say so, unless it opts out. */
function keyedRoute(def: { method: string; path: string; auth: string; idempotencyKey?: false }): boolean {
  return def.idempotencyKey !== false && takesIdempotencyKey(def);
}

/** The body a route reads: an HTML form's fields for a form route, JSON for the others (each absent to the other kind). */
function bodyFor(kind: 'json' | 'form', body: unknown): unknown {
  if (kind === 'form') return body instanceof FormFields ? body.fields : undefined;
  return body instanceof FormFields ? undefined : body;
}

/** The User-Agent recorded with a session: at most 512 characters, or null. */
function userAgentOf(header: string | undefined): string | null {
  return header ? header.slice(0, 512) : null;
}

/** Step 4, where the route takes one: the request's Idempotency-Key (validated) and what makes it the same request. */
function idempotencyKeyOf(exchange: Exchange, invalidStatus: number): KeyedRequest | null {
  if (exchange.req.headers[IDEMPOTENCY_HEADER] === undefined) return null;
  const headers = validate(IdempotencyKeyHeaders, exchange.req.headers, 'header', invalidStatus) as { [IDEMPOTENCY_HEADER]: string };
  return { key: headers[IDEMPOTENCY_HEADER], hash: requestHash(exchange.method, exchange.path, exchange.search, exchange.body) };
}

/** Step 5: the handler's reply, sent. */
function send(res: ServerResponse, reply: Reply): void {
  for (const [name, value] of Object.entries({ ...reply.page?.headers, ...reply.headers })) res.setHeader(name, value);
  res.statusCode = reply.status;
  if (reply.stream) return reply.stream(res);
  if (reply.redirect !== undefined) res.setHeader('Location', locationHeader(reply.redirect));
  if (reply.page !== undefined) sendHtml(res, reply.status, reply.page.html);
  else if (reply.text !== undefined) sendText(res, reply.status, reply.contentType ?? 'text/plain; charset=utf-8', reply.text);
  else if (reply.json !== undefined) sendJson(res, reply.status, reply.json);
  else if (reply.body !== undefined) sendJson(res, reply.status, JSON.stringify(reply.body));
  else res.end();
}

/** Or step 5 when any step failed: the error, logged and answered as the route answers it (a response already started is cut). */
async function fail(exchange: Exchange, def: RouteRules, err: unknown): Promise<void> {
  const httpError = httpErrorOf(def, err);
  exchange.requestLog.cause = causeOf(httpError, err);
  logFailure(exchange, httpError, err);
  if (exchange.res.headersSent) {
    exchange.res.destroy();
    return;
  }
  if (def.rawBody && !exchange.req.complete) {
    // A refused upload: answered once the rest of its body is read (and
    // thrown away, bounded), with Connection: close, as app.ts does for a body refused.
    exchange.res.setHeader('Connection', 'close');
    await discardRest(exchange.req);
  }
  sendAnswer(exchange.res, failure(def, httpError));
}

/**
 * Why a request failed, for the metrics: a 503 the pipeline made of a
 * database error (unreachable, not answering, restarting) is `database`; one
 * a step refused itself (the password queue full, a stream not accepted) is
 * `overloaded`; other failures, their error code.
 */
function causeOf(httpError: HttpError, err: unknown): string {
  if (httpError.status !== 503) return httpError.code;
  return err instanceof HttpError ? 'overloaded' : 'database';
}

/** An error as the route answers it (the SQLSTATE table, then the route's status overrides). */
function httpErrorOf(def: RouteRules, err: unknown): HttpError {
  let httpError = toHttpError(err);
  // A GET changes nothing the client asked for (at most bookkeeping, such as
  // a stream's registration): trying again is always safe, so say so.
  if (httpError.code === 'outcome_unknown' && def.method === 'get') httpError = unavailable('the database is not answering');
  const override = isIdempotencyRefusal(httpError.code) ? undefined : def.statusOverrides?.[httpError.status];
  return override === undefined ? httpError : new HttpError(override, httpError.code, httpError.message, httpError.details);
}

/** The answer to an error: the route's HTML page, or the route's error body for the status. */
function failure(def: RouteRules, refused: HttpError): Answer {
  // The idempotency refusals are the same Error body on every route.
  const shape = isIdempotencyRefusal(refused.code) ? 'default' : (def.errorShapes?.[refused.status] ?? def.errorShape ?? 'default');
  const httpError = restatedFor(shape, refused);
  const headers: Record<string, string> = {};
  if (httpError.status === 401) headers['www-authenticate'] = 'Bearer';
  const retryAfter = retryAfterOf(httpError);
  if (retryAfter) headers['retry-after'] = retryAfter;
  if (def.renderError) {
    const page = def.renderError(httpError);
    for (const [name, value] of Object.entries(page.headers)) headers[name.toLowerCase()] = value;
    return { status: httpError.status, headers: { ...headers, 'content-type': 'text/html; charset=utf-8' }, body: page.html };
  }
  return {
    status: httpError.status,
    headers: { ...headers, 'content-type': 'application/json; charset=utf-8' },
    body: JSON.stringify(errorBody(shape, httpError)),
  };
}

function logFailure(exchange: Exchange, httpError: HttpError, err: unknown): void {
  if (httpError.status === 503 || httpError.code === 'outcome_unknown') noteUnavailable(exchange.log, err);
  // A full storage volume: a line per refused upload, no stack (the operator's alert says the rest).
  else if (httpError.code === 'storage_full') exchange.log.warn({ code: (err as { code?: unknown }).code }, 'storage volume full: upload refused (507)');
  else if (httpError.status === 504) exchange.log.warn({ code: (err as { code?: unknown }).code }, 'statement timeout');
  else if (httpError.status >= 500) exchange.log.error({ err }, 'request failed');
  else exchange.log.debug({ status: httpError.status, error: httpError.message }, 'request refused');
}

function validate(schema: AnySchema | undefined, value: unknown, where: string, status: number): unknown {
  if (!schema) return undefined;
  assertStorable(value, where, status);
  const result = schema.safeParse(value ?? (where === 'body' ? undefined : {}));
  if (result.success) return result.data;
  const issues = result.error.issues.map((issue) => ({
    path: [where, ...issue.path.map(String)].join('.'),
    message: issue.message,
  }));
  const first = issues[0];
  const message = first ? `${first.path}: ${first.message}` : `invalid ${where}`;
  throw new HttpError(status, defaultCode(status), message, { issues });
}

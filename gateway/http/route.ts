// The one request pipeline every REST route goes through (one handler per
// route, built by defineRoute, found by http/dispatch.ts; plain node:http,
// see http/exchange.ts):
//
//   authenticate (bearer JWT, when the route needs a user; verified tokens are
//     cached until they expire, see core/jwt.ts)
//   → validate params, query and body with zod
//   → run the handler, which calls one SQL function inside ctx.db(...): one
//     transaction as `anon` or `authenticated` with request.jwt.claims set,
//     sent as one pipelined round trip (BEGIN, settings, call, COMMIT; see
//     core/db.ts withClaims); errors roll it back
//   → with an Idempotency-Key (POST, PATCH, DELETE of the mobile, platform
//     and token interfaces): the same, in one transaction with the key's
//     claim and the storing of the answer, or the stored answer replayed
//     (http/idempotency.ts)
//   → send the reply (JSON by default, or JSON text from SQL passed through
//     as is; HTML or a redirect for the web pages), or map the error to a
//     status and one of the three error bodies of docs/api.md#errors (chosen per
//     route and status), or to the route's HTML error page. SQL text never
//     reaches the client (core/errors.ts).
//
// Before it (app.ts): the request id and the request log line (one per
// request, written when the response finishes), CORS, the readiness gate,
// and JSON body parsing for requests that have a body (http/body.ts).
//
// Route modules only declare routes; they never build SQL strings, filter rows
// by user or re-check a rule the database enforces.
import type { IncomingMessage, ServerResponse } from 'node:http';
import { z } from 'zod';
import { apiTokenCaller, authenticateApiToken, isApiTokenSecret, type ApiTokenInfo, type Caller } from '../core/api-tokens.ts';
import { clientIp, type TrustProxy } from '../core/client-ip.ts';
import type { AuthLimits } from '../core/config.ts';
import { ANON_CLAIMS, DEADLINE_MARGIN_MS, withClaims, type RequestClaims, type Sql, type TransactionOptions, type Tx } from '../core/db.ts';
import { defaultCode, errorBody, HttpError, toHttpError, unavailable, type ErrorShape } from '../core/errors.ts';
import { fairShareKey, type FairShare } from './fair-share.ts';
import { InvalidTokenError, type AccessClaims, type TokenService } from '../core/jwt.ts';
import type { Logger } from '../core/log.ts';
import type { Passwords } from '../core/passwords.ts';
import { retryAfterOf } from '../core/throttle.ts';
import { noteUnavailable } from '../core/unavailable-log.ts';
import { discardRest } from './body.ts';
import { locationHeader, sendHtml, sendJson, sendText, type Exchange } from './exchange.ts';
import {
  answerOf,
  AnswerWithoutRecord,
  claim,
  IDEMPOTENCY_HEADER,
  IdempotencyKeyHeaders,
  refusesCaller,
  requestHash,
  sendAnswer,
  store,
  takesIdempotencyKey,
  type Answer,
  type KeyedRequest,
} from './idempotency.ts';
import type { Page } from '../core/html.ts';
import { assertStorable } from '../core/input.ts';
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
  tokens: TokenService;
  statementTimeoutMs: number;
  publicUrl: string;
  appScheme: string;
  /** Failed-login and refresh/verify throttling (defaults when absent). */
  authLimits?: AuthLimits;
  /** How to read the client IP (TRUST_PROXY); absent: the socket address. */
  trustProxy?: TrustProxy;
  /** Per-client share of the pool (gateway/http/fair-share.ts); none: unlimited. */
  fairShare?: FairShare;
  /** This gateway's own address (loopback), known once it listens: the live test executor replays requests here. */
  selfUrl?: string;
  /** Password hashing in this process, bounded (core/passwords.ts). */
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
   * An HTML page and the headers it needs (core/html.ts page()): they travel
   * together, so a page never goes out with another page's nonce (its style
   * and script would be blocked).
   */
  page?: Page;
  /** Other text (e.g. an iCalendar file), sent as is with `contentType`. */
  text?: string;
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
  /** The verified access-token claims; null on public routes. */
  user: AccessClaims | null;
  /** The API token the request was authenticated with; null for an access token or a public route. */
  apiToken: ApiTokenInfo | null;
  /** The client's IP address (gateway/core/client-ip.ts), for limits per client. */
  clientIp: string;
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
   * reaches a password hash).
   */
  db<T>(fn: (tx: Tx) => Promise<T>, claims?: RequestClaims | null): Promise<T>;
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
  /** Status for a request that fails validation: 400 or 422, per route (docs/api.md#errors). */
  invalidStatus?: 400 | 422;
  /**
   * Status for path parameters that fail validation, when it differs from
   * invalidStatus: 404 for ids that cannot name anything (e.g. not a uuid).
   */
  invalidParamsStatus?: 400 | 404 | 422;
  /** Error body per status; everything else uses `errorShape` (default: the Error shape). */
  errorShapes?: Partial<Record<number, ErrorShape>>;
  /** The error body of every status errorShapes does not name (e.g. Supabase Storage's body on /storage/v1). */
  errorShape?: ErrorShape;
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
    rawBody?: RawBody;
    invalidStatus?: 400 | 422;
    invalidParamsStatus?: 400 | 404 | 422;
    htmlErrors: boolean;
    /** POST, PATCH and DELETE of the mobile, platform and token interfaces take an Idempotency-Key (http/idempotency.ts). */
    idempotencyKey: boolean;
  };
  build(services: Services): RouteHandler;
}

/** A route's handler, given the request once its route is found and its body read. */
export type RouteHandler = (exchange: Exchange) => Promise<void>;

export function defineRoute<
  P extends AnySchema | undefined = undefined,
  Q extends AnySchema | undefined = undefined,
  B extends AnySchema | undefined = undefined,
  H extends AnySchema | undefined = undefined,
>(def: RouteDefinition<P, Q, B, H>): Route {
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
      rawBody: def.rawBody,
      invalidStatus: def.invalidStatus,
      invalidParamsStatus: def.invalidParamsStatus,
      htmlErrors: def.renderError !== undefined,
      idempotencyKey: takesIdempotencyKey(def),
    },
    build: (services) => {
      const keyed = takesIdempotencyKey(def);
      return async (exchange: Exchange) => {
        const { req, res } = exchange;
        if (def.secretPath) exchange.logPath = def.path;
        try {
          const caller = def.auth === 'user' ? await authenticate(exchange, services, def.tokenInQuery ?? false) : null;
          const user = caller?.user ?? null;
          const requestClaims: RequestClaims = caller?.claims ?? ANON_CLAIMS;
          const ip = clientIp(req.socket.remoteAddress, req.headers['x-forwarded-for'], services.trustProxy);
          if (user) exchange.userId = user.sub;
          const transaction = <T>(fn: (tx: Tx) => Promise<T>, claims?: RequestClaims | null, extra: TransactionOptions<T> = {}): Promise<T> => {
            const run = () =>
              withClaims(services.sql, claims === undefined ? requestClaims : claims, fn, {
                readOnly: def.method === 'get' && !def.readWrite,
                statementTimeoutMs: services.statementTimeoutMs,
                // API-token callers carry extra claims (token_id, ...); theirs are serialised per request.
                claimsJson: claims === undefined && user && !caller?.apiToken ? claimsJson(user) : undefined,
                ...extra,
              });
            const share = services.fairShare;
            return share ? share.run(fairShareKey(user?.sub, ip), run) : run();
          };
          const context = (db: Context<Out<P>, Out<Q>, Out<B>, Out<H>>['db']): Context<Out<P>, Out<Q>, Out<B>, Out<H>> => {
            const invalid = def.invalidStatus ?? 400;
            const params = validate(def.params, exchange.params, 'path', def.invalidParamsStatus ?? invalid);
            const query = validate(def.query, def.query ? exchange.query : undefined, 'query', invalid);
            const body = validate(def.body, exchange.body, 'body', invalid);
            const headers = validate(def.headers, req.headers, 'header', invalid);
            return {
              params: params as Out<P>,
              query: query as Out<Q>,
              body: body as Out<B>,
              headers: headers as Out<H>,
              user,
              apiToken: caller?.apiToken ?? null,
              clientIp: ip,
              request: req,
              services,
              get log() {
                return exchange.log;
              },
              db,
            };
          };
          if (keyed && req.headers[IDEMPOTENCY_HEADER] !== undefined) {
            const { [IDEMPOTENCY_HEADER]: key } = validate(IdempotencyKeyHeaders, req.headers, 'header', def.invalidStatus ?? 400) as { [IDEMPOTENCY_HEADER]: string };
            const request: KeyedRequest = { key, hash: requestHash(exchange.method, exchange.path, exchange.search, exchange.body) };
            await serveKeyed(exchange, request, transaction, context);
            return;
          }
          send(res, await def.handler(context((fn, claims) => transaction(fn, claims))));
        } catch (err) {
          const httpError = httpErrorOf(err);
          logFailure(exchange, httpError, err);
          if (res.headersSent) {
            res.destroy();
            return;
          }
          if (def.rawBody && !req.complete) {
            // A refused upload: answered once the rest of its body is read (and
            // thrown away, bounded), with Connection: close, as http/body.ts does.
            res.setHeader('Connection', 'close');
            await discardRest(req);
          }
          sendAnswer(res, failure(httpError));
        }
      };
    },
  };

  /** An error as this route answers it (the SQLSTATE table, then the route's status overrides). */
  function httpErrorOf(err: unknown): HttpError {
    let httpError = toHttpError(err);
    // A GET changes nothing the client asked for (at most bookkeeping, such as
    // a stream's registration): trying again is always safe, so say so.
    if (httpError.code === 'outcome_unknown' && def.method === 'get') httpError = unavailable('the database is not answering');
    const override = IDEMPOTENCY_CODES.has(httpError.code) ? undefined : def.statusOverrides?.[httpError.status];
    return override === undefined ? httpError : new HttpError(override, httpError.code, httpError.message, httpError.details);
  }

  /** The answer to an error: the route's HTML page, or the route's error body for the status. */
  function failure(httpError: HttpError): Answer {
    const headers: Record<string, string> = {};
    if (httpError.status === 401) headers['www-authenticate'] = 'Bearer';
    const retryAfter = retryAfterOf(httpError);
    if (retryAfter) headers['retry-after'] = retryAfter;
    if (def.renderError) {
      const page = def.renderError(httpError);
      for (const [name, value] of Object.entries(page.headers)) headers[name.toLowerCase()] = value;
      return { status: httpError.status, headers: { ...headers, 'content-type': 'text/html; charset=utf-8' }, body: page.html };
    }
    // The idempotency refusals are the same Error body on every route.
    const shape = IDEMPOTENCY_CODES.has(httpError.code) ? 'error' : (def.errorShapes?.[httpError.status] ?? def.errorShape ?? 'error');
    return {
      status: httpError.status,
      headers: { ...headers, 'content-type': 'application/json; charset=utf-8' },
      body: JSON.stringify(errorBody(shape, httpError)),
    };
  }

  /**
   * A request with an Idempotency-Key (http/idempotency.ts): the claim of the
   * key, validation, the handler and the storing of its answer in one
   * transaction. A refusal rolls it all back (nothing is kept). When the
   * claim returns the stored answer of the same request by the same
   * credential, the handler has run behind it all the same: a refusal of the
   * caller (401, 403) is the answer, else the stored one; the handler's work
   * is rolled back.
   */
  async function serveKeyed(
    exchange: Exchange,
    request: KeyedRequest,
    transaction: <T>(fn: (tx: Tx) => Promise<T>, claims?: RequestClaims | null, extra?: TransactionOptions<T>) => Promise<T>,
    context: (db: Context<Out<P>, Out<Q>, Out<B>, Out<H>>['db']) => Context<Out<P>, Out<Q>, Out<B>, Out<H>>,
  ): Promise<void> {
    let answer: Answer;
    try {
      answer = await transaction(
        async (tx) => {
          const stored = claim(tx, request);
          let outcome: { answer: Answer } | { error: unknown };
          try {
            // Every call the handler makes runs in this transaction, behind the claim.
            const ctx = context((fn, claims) => (claims !== undefined ? transaction(fn, claims) : fn(tx)));
            outcome = { answer: answerOf(await def.handler(ctx)) };
          } catch (error) {
            outcome = { error };
          }
          // The claim's refusal (or the failure before it) is the answer, not what it caused.
          const replay = await stored;
          if (replay) {
            if ('error' in outcome && refusesCaller(httpErrorOf(outcome.error).status)) throw outcome.error;
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
      sendAnswer(exchange.res, err.answer, err.replayed);
      return;
    }
    sendAnswer(exchange.res, answer);
  }
}

/** Codes of the idempotency refusals (api.idempotency_claim). */
const IDEMPOTENCY_CODES = new Set(['idempotency_key_in_progress', 'idempotency_key_reused']);

function logFailure(exchange: Exchange, httpError: HttpError, err: unknown): void {
  if (httpError.status === 503 || httpError.code === 'outcome_unknown') noteUnavailable(exchange.log, err);
  else if (httpError.status === 504) exchange.log.warn({ code: (err as { code?: unknown }).code }, 'statement timeout');
  else if (httpError.status >= 500) exchange.log.error({ err }, 'request failed');
  else exchange.log.debug({ status: httpError.status, error: httpError.message }, 'request refused');
}

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

/** request.jwt.claims of a verified token, serialised once per token (verified claims are cached and frozen). */
const claimsJsonCache = new WeakMap<AccessClaims, string>();
function claimsJson(user: AccessClaims): string {
  let json = claimsJsonCache.get(user);
  if (json === undefined) {
    json = JSON.stringify({ ...user, role: 'authenticated' });
    claimsJsonCache.set(user, json);
  }
  return json;
}

async function authenticate(exchange: Exchange, services: Services, tokenInQuery: boolean): Promise<Caller> {
  const header = exchange.req.headers.authorization;
  const match = header ? /^Bearer\s+(\S+)\s*$/i.exec(header) : null;
  const inQuery = tokenInQuery && !header ? exchange.query.access_token : undefined;
  const token = match?.[1] ?? (typeof inQuery === 'string' ? inQuery : undefined);
  if (!token) throw new HttpError(401, 'unauthorized', 'missing bearer token');
  if (isApiTokenSecret(token)) {
    return apiTokenCaller(await authenticateApiToken(services.sql, token, exchange.path, services.statementTimeoutMs + DEADLINE_MARGIN_MS));
  }
  try {
    const user = await services.tokens.verify(token);
    return { user, claims: { ...user, role: 'authenticated' }, apiToken: null };
  } catch (err) {
    if (err instanceof InvalidTokenError) throw new HttpError(401, 'unauthorized', err.message);
    throw err;
  }
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

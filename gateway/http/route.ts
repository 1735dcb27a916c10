// The one request pipeline every REST route goes through:
//
//   authenticate (bearer JWT, when the route needs a user)
//   → validate params, query and body with zod
//   → run the handler, which calls one SQL function inside ctx.db(...): one
//     transaction as `anon` or `authenticated` with request.jwt.claims set
//   → send the reply (JSON by default; HTML or a redirect for the web pages),
//     or map the error to a status and one of the three error bodies of spec
//     section 7 (chosen per route and status), or to the route's HTML error
//     page.
//
// Route modules only declare routes; they never build SQL strings, filter rows
// by user or re-check a rule the database enforces.
import type { Request, RequestHandler, Response } from 'express';
import { z } from 'zod';
import type { ChangeHub } from '../realtime/hub.ts';
import { apiTokenCaller, authenticateApiToken, isApiTokenSecret, type ApiTokenInfo, type Caller } from '../lib/api-tokens.ts';
import { ANON_CLAIMS, withClaims, type RequestClaims, type Sql, type Tx } from '../lib/db.ts';
import { defaultCode, errorBody, HttpError, toHttpError, type ErrorShape } from '../lib/errors.ts';
import { InvalidTokenError, type AccessClaims, type TokenService } from '../lib/jwt.ts';
import type { Logger } from '../lib/log.ts';

export type Method = 'get' | 'post' | 'put' | 'patch' | 'delete';

export interface Services {
  sql: Sql;
  tokens: TokenService;
  statementTimeoutMs: number;
  publicUrl: string;
  appScheme: string;
  /** The realtime feed (LISTEN hub shared by the SSE stream and the websocket). */
  realtime: ChangeHub;
}

/**
 * What a handler answers: `body` is sent as JSON; `html` as
 * text/html; charset=utf-8; `redirect` sets Location (with `html`, if given,
 * as the body). `headers` are set as given. `stream` takes over the response
 * (after status and headers are set) for long-lived replies such as
 * server-sent events; it writes and ends the response itself.
 */
export interface Reply {
  status: number;
  body?: unknown;
  html?: string;
  redirect?: string;
  headers?: Record<string, string>;
  stream?: (res: Response) => void;
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
  services: Services;
  log: Logger;
  /**
   * Runs `fn` in the request's transaction, as the request's role and claims
   * (or the claims given). GET routes run read-only.
   */
  db<T>(fn: (tx: Tx) => Promise<T>, claims?: RequestClaims): Promise<T>;
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
  /** Status for a request that fails validation (spec: 400 or 422 per endpoint). */
  invalidStatus?: 400 | 422;
  /**
   * Status for path parameters that fail validation, when it differs from
   * invalidStatus: 404 for ids that cannot name anything (e.g. not a uuid).
   */
  invalidParamsStatus?: 400 | 404 | 422;
  /** Error body per status; everything else uses the Error shape. */
  errorShapes?: Partial<Record<number, ErrorShape>>;
  /** Per-route status changes for errors raised by SQL (e.g. duplicate e-mail: 409 → 400). */
  statusOverrides?: Partial<Record<number, number>>;
  /** Web pages: errors are answered with this HTML page instead of a JSON body. */
  renderError?: (err: HttpError) => string;
  handler(ctx: Context<Out<P>, Out<Q>, Out<B>, Out<H>>): Promise<Reply>;
}

export interface Route {
  method: Method;
  path: string;
  summary: string;
  auth: 'public' | 'user';
  schemas: { params?: AnySchema; query?: AnySchema; body?: AnySchema; headers?: AnySchema };
  build(services: Services): RequestHandler;
}

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
    build: (services) => async (req: Request, res: Response) => {
      const log: Logger = res.locals.log;
      try {
        const caller = def.auth === 'user' ? await authenticate(req, services, def.tokenInQuery ?? false) : null;
        const user = caller?.user ?? null;
        const invalid = def.invalidStatus ?? 400;
        const params = validate(def.params, req.params, 'path', def.invalidParamsStatus ?? invalid);
        const query = validate(def.query, req.query, 'query', invalid);
        const body = validate(def.body, req.body, 'body', invalid);
        const headers = validate(def.headers, req.headers, 'header', invalid);
        const requestClaims: RequestClaims = caller?.claims ?? ANON_CLAIMS;
        if (user) res.locals.userId = user.sub;
        const ctx: Context<Out<P>, Out<Q>, Out<B>, Out<H>> = {
          params: params as Out<P>,
          query: query as Out<Q>,
          body: body as Out<B>,
          headers: headers as Out<H>,
          user,
          apiToken: caller?.apiToken ?? null,
          services,
          log,
          db: (fn, claims) =>
            withClaims(services.sql, claims ?? requestClaims, fn, {
              readOnly: def.method === 'get' && !def.readWrite,
              statementTimeoutMs: services.statementTimeoutMs,
            }),
        };
        send(res, await def.handler(ctx));
      } catch (err) {
        let httpError = toHttpError(err);
        const override = def.statusOverrides?.[httpError.status];
        if (override !== undefined) {
          httpError = new HttpError(override, httpError.code, httpError.message, httpError.details);
        }
        if (httpError.status >= 500) log.error({ err }, 'request failed');
        else log.debug({ status: httpError.status, error: httpError.message }, 'request refused');
        if (httpError.status === 401) res.setHeader('WWW-Authenticate', 'Bearer');
        if (def.renderError) {
          res.status(httpError.status).type('html').send(def.renderError(httpError));
          return;
        }
        const shape = def.errorShapes?.[httpError.status] ?? 'error';
        res.status(httpError.status).json(errorBody(shape, httpError));
      }
    },
  };
}

function send(res: Response, reply: Reply): void {
  for (const [name, value] of Object.entries(reply.headers ?? {})) res.setHeader(name, value);
  res.status(reply.status);
  if (reply.stream) return reply.stream(res);
  if (reply.redirect !== undefined) res.location(reply.redirect);
  if (reply.html !== undefined) res.type('html').send(reply.html);
  else if (reply.body !== undefined) res.json(reply.body);
  else res.end();
}

async function authenticate(req: Request, services: Services, tokenInQuery: boolean): Promise<Caller> {
  const header = req.headers.authorization;
  const match = header ? /^Bearer\s+(\S+)\s*$/i.exec(header) : null;
  const fromQuery = tokenInQuery && !header && typeof req.query.access_token === 'string' ? req.query.access_token : undefined;
  const token = match?.[1] ?? fromQuery;
  if (!token) throw new HttpError(401, 'unauthorized', 'missing bearer token');
  if (isApiTokenSecret(token)) return apiTokenCaller(await authenticateApiToken(services.sql, token, req.path));
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

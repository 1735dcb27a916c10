// The gateway's HTTP application: a Fastify 5 instance (the MCP process keeps
// Express). Per request, in order (Fastify's hooks): the path repaired
// (rewriteUrl: undecodable percent-encoding, core/web/input.ts), the request
// id and log line (onRequest), CORS (@fastify/cors, http/cors.ts), GET
// /health, the readiness gate (503 while migrating), the MCP process's paths
// (passed through before any body is read), the route (Fastify's router, from
// the route declarations; none: JSON 404), the body (Fastify's content-type
// parsers, http/body.ts), and the route's handler (the pipeline of
// http/route.ts). No route logic lives here; anything unforeseen becomes a
// JSON 500 without details.
import { HttpError, type ErrorShape } from './core/web/errors.ts';
import type { Logger } from './core/process/log.ts';
import { accountPageRoutes } from './routes/account-pages.ts';
import { accountRoutes } from './routes/account.ts';
import { agentCallRoutes } from './routes/agent-calls.ts';
import { assetRoutes } from './routes/assets.ts';
import { authSignupRoutes } from './auth/api/signup.ts';
import { authTokenRoutes } from './auth/api/token.ts';
import { authLogoutRoutes } from './auth/api/logout.ts';
import { authVerifyRoutes } from './auth/api/verify.ts';
import { authRecoverRoutes } from './auth/api/recover.ts';
import { supabaseAuthSignupRoutes } from './auth/v1/signup.ts';
import { supabaseAuthTokenRoutes } from './auth/v1/token.ts';
import { supabaseAuthUserRoutes } from './auth/v1/user.ts';
import { supabaseAuthLogoutRoutes } from './auth/v1/logout.ts';
import { supabaseAuthRecoverRoutes } from './auth/v1/recover.ts';
import { supabaseAuthVerifyRoutes } from './auth/v1/verify.ts';
import { supabaseAuthOtpRoutes } from './auth/v1/otp.ts';
import { supabaseAuthSettingsRoutes } from './auth/v1/settings.ts';
import { supabaseAuthAdminRoutes } from './auth/v1/admin.ts';
import { calendarRoutes } from './routes/calendars.ts';
import { communityRoutes } from './routes/communities.ts';
import { connectionRoutes } from './routes/connections.ts';
import { deeplinkRoutes } from './routes/deeplinks.ts';
import { docsRoutes } from './routes/docs.ts';
import { eventRoutes } from './routes/events.ts';
import { healthHandler } from './routes/health.ts';
import { platformRoutes } from './routes/platform.ts';
import { profileRoutes } from './routes/profile.ts';
import { storageBucketRoutes } from './storage/routes/bucket.ts';
import { storageSignRoutes } from './storage/routes/sign.ts';
import { storageObjectRoutes } from './storage/routes/object.ts';
import { storageRenderRoutes } from './storage/routes/render.ts';
import { storageResumableRoutes } from './storage/routes/resumable.ts';
import { streamRoutes } from './routes/stream.ts';
import { dealRoutes, taskRoutes } from './routes/tasks.ts';
import { tokenRoutes } from './routes/tokens.ts';
import { webhookRoutes } from './routes/webhooks.ts';
import querystring from 'node:querystring';
import Fastify, { type FastifyInstance, type FastifyReply, type FastifyRequest } from 'fastify';
import fastifyCors from '@fastify/cors';
import { bodyErrorOf, discardRest, MAX_BODY_BYTES, registerBodyParsers, registerRawBody } from './http/body.ts';
import { corsDelegator } from './http/cors.ts';
import { adoptReply, exchangeOf, sendError } from './http/exchange.ts';
import { mcpPathOf, mcpProxy, type McpProxyOptions } from './http/mcp-proxy.ts';
import { routeTemplate } from './core/process/metrics.ts';
import { answerClientError, repairPath } from './core/web/input.ts';
import { startRequestLog } from './core/web/request-log.ts';
import type { Route, Services } from './http/route.ts';

/** Every REST route the gateway serves, in one list (the docs read it too). */
export const routes: Route[] = [
  // Sign-in (gateway/auth/): this service's own door, /api/auth ...
  ...authSignupRoutes,
  ...authTokenRoutes,
  ...authLogoutRoutes,
  ...authVerifyRoutes,
  // ... Supabase Auth's, /auth/v1 ...
  ...supabaseAuthSignupRoutes,
  ...supabaseAuthTokenRoutes,
  ...supabaseAuthUserRoutes,
  ...supabaseAuthLogoutRoutes,
  ...supabaseAuthRecoverRoutes,
  ...supabaseAuthVerifyRoutes,
  ...supabaseAuthOtpRoutes,
  ...supabaseAuthSettingsRoutes,
  ...supabaseAuthAdminRoutes,
  // ... and the set-password link's.
  ...authRecoverRoutes,
  ...accountRoutes,
  ...accountPageRoutes,
  ...profileRoutes,
  ...communityRoutes,
  ...taskRoutes,
  ...dealRoutes,
  ...streamRoutes,
  ...eventRoutes,
  ...connectionRoutes,
  ...deeplinkRoutes,
  ...assetRoutes,
  ...calendarRoutes,
  ...tokenRoutes,
  ...platformRoutes,
  ...webhookRoutes,
  // Storage (gateway/storage/): the signed URLs' paths before the objects' (/object/sign/... is not a bucket).
  ...storageBucketRoutes,
  ...storageSignRoutes,
  ...storageObjectRoutes,
  ...storageRenderRoutes,
  ...storageResumableRoutes,
  ...docsRoutes(() => routes),
  ...agentCallRoutes,
];

export interface AppOptions {
  services: Services;
  log: Logger;
  /** False until migrations have run; requests then get 503. */
  isReady: () => boolean;
  /** CORS_ORIGINS (gateway/http/cors.ts); empty or absent: no CORS. */
  corsOrigins?: string[];
  /** Where /mcp and the OAuth paths go (the MCP process); unset: not served. */
  mcp?: Omit<McpProxyOptions, 'log'>;
}

/** The gateway's Fastify instance (not listening yet), with the method and path of every route it serves (http/endpoints.ts records them). */
export type App = FastifyInstance & { served: readonly { method: string; path: string }[] };

/** What the pipeline knows of a route, in Fastify's route config. */
interface RouteConfig {
  /** The route as the metrics label it (OpenTelemetry's http.route). */
  template: string;
  /** The body is the handler's to stream (a file upload): no parser reads it. */
  rawBody: boolean;
  /** The error body of a body that cannot be read (Supabase Storage's on its routes). */
  bodyErrorShape: ErrorShape;
  /** The name of the route's last-segment wildcard (`:path*`), if any. */
  wildcard?: string;
}

const WILDCARD = /\/:([A-Za-z0-9_]+)\*$/;

/**
 * A declaration's path as Fastify's router writes it: a last-segment
 * wildcard `:path*` becomes `*` (renamed back in the handler's params);
 * parameters with a literal suffix (`:shortlink.ics`) are the router's own.
 */
function routerPath(path: string): { url: string; wildcard?: string } {
  const wildcard = WILDCARD.exec(path)?.[1];
  return wildcard ? { url: path.replace(WILDCARD, '/*'), wildcard } : { url: path };
}

/** The path of an origin-form request target; of an absolute-form one (`GET http://host/x`), its pathname. */
function pathOf(target: string): string {
  if (target.startsWith('/')) return target;
  try {
    return new URL(target).pathname;
  } catch {
    return target === '*' ? '*' : `/${target}`;
  }
}

/** The request target with its path repaired (core/web/input.ts): every path parameter then decodes. */
function repairedUrl(url: string): string {
  const q = url.indexOf('?');
  const path = repairPath(pathOf(q === -1 ? url : url.slice(0, q)));
  return q === -1 ? path : path + url.slice(q);
}

export async function createApp({ services, log, isReady, corsOrigins, mcp }: AppOptions): Promise<App> {
  const app = Fastify({
    logger: false,
    // As the hand-written router was: case-insensitive, one trailing slash allowed.
    // A path parameter is as long as the path (a token, an object's name): the request line's limit (16 KB) bounds it.
    routerOptions: { caseSensitive: false, ignoreTrailingSlash: true, maxParamLength: 16 * 1024, querystringParser: (s: string) => querystring.parse(s) },
    rewriteUrl: (req) => repairedUrl(req.url ?? '/'),
    bodyLimit: MAX_BODY_BYTES,
    keepAliveTimeout: 65_000,
    // Node's own default, which Fastify would turn off: a request must arrive whole within 5 minutes.
    requestTimeout: 300_000,
    // Draining (server.ts): requests arriving while closing are still served, with Connection: close.
    return503OnClosing: false,
    forceCloseConnections: 'idle',
    // The request id is the request log's (core/web/request-log.ts).
    genReqId: () => '',
    // Requests Node's parser refuses get a JSON Error body too.
    clientErrorHandler: answerClientError,
  }) as unknown as FastifyInstance;
  const health = healthHandler(services.sql, isReady);
  const proxy = mcp ? mcpProxy({ ...mcp, log }) : undefined;

  app.decorateRequest('requestLog', null);
  app.addHook('onRequest', (request, reply, done) => {
    request.requestLog = startRequestLog(request.raw, reply.raw, log);
    done();
  });
  if ((corsOrigins ?? []).length > 0) await app.register(fastifyCors, { delegator: corsDelegator(corsOrigins!) });
  app.addHook('onRequest', (request, reply, done) => {
    const requestLog = request.requestLog!;
    const path = request.url.split('?', 1)[0]!;
    if ((request.method === 'GET' || request.method === 'HEAD') && /^\/health\/?$/i.test(path)) {
      requestLog.route = '/health';
      adoptReply(reply);
      void health(reply.raw, requestLog);
      return;
    }
    if (!isReady()) {
      requestLog.cause = 'starting';
      adoptReply(reply);
      sendError(reply.raw, new HttpError(503, 'service_unavailable', 'the service is starting'));
      return;
    }
    // Before any body is read: the MCP process reads it itself.
    const mcpPath = proxy ? mcpPathOf(path) : undefined;
    if (mcpPath) {
      requestLog.route = mcpPath;
      adoptReply(reply);
      proxy!(exchangeOf(request, reply));
      return;
    }
    const config = request.routeOptions.config as Partial<RouteConfig>;
    if (config.template) requestLog.route = config.template;
    done();
  });
  app.setNotFoundHandler((request, reply) => {
    adoptReply(reply);
    sendError(reply.raw, notFound(request));
  });
  app.setErrorHandler(async (err: unknown, request: FastifyRequest, reply: FastifyReply) => {
    const config = request.routeOptions.config as Partial<RouteConfig>;
    const bodyError = bodyErrorOf(err);
    adoptReply(reply);
    if (bodyError) {
      // The connection closes after the answer; the rest of the body is
      // read first (a bounded amount, thrown away), so that a client still
      // sending it reads the answer instead of a broken pipe.
      reply.raw.setHeader('Connection', 'close');
      await discardRest(request.raw);
      return sendError(reply.raw, bodyError, config.bodyErrorShape ?? 'default');
    }
    const httpError = err instanceof HttpError ? err : new HttpError(500, 'internal_error', 'internal server error');
    if (httpError.status >= 500) (request.requestLog?.log ?? log).error({ err }, 'unhandled error');
    sendError(reply.raw, httpError);
  });
  // Two contexts: the routes whose body the parsers read (JSON, forms), and those that stream it themselves.
  const contexts = { parsed: [] as Route[], raw: [] as Route[] };
  for (const route of routes) (route.docs.rawBody === undefined ? contexts.parsed : contexts.raw).push(route);
  await app.register(async (parsed) => {
    registerBodyParsers(parsed);
    for (const route of contexts.parsed) register(parsed, route);
  });
  await app.register(async (raw) => {
    registerRawBody(raw);
    for (const route of contexts.raw) register(raw, route);
  });

  function register(app: FastifyInstance, route: Route): void {
    const handle = route.build(services);
    const { url, wildcard } = routerPath(route.path);
    const config: RouteConfig = {
      template: routeTemplate(route.path),
      rawBody: route.docs.rawBody !== undefined,
      bodyErrorShape: route.docs.errorShape ?? 'default',
      wildcard,
    };
    app.route({
      method: route.method.toUpperCase() as 'GET',
      url,
      config,
      handler: async (request, reply) => {
        adoptReply(reply);
        const exchange = exchangeOf(request, reply);
        if (wildcard) {
          const params = exchange.params as Record<string, string>;
          // One or more segments (`a/b/` is `a/b`); none names no object.
          const rest = (params['*'] ?? '').replace(/\/$/, '');
          if (rest === '') return sendError(reply.raw, notFound(request));
          exchange.params = { ...params, [wildcard]: rest };
          delete exchange.params['*'];
        }
        await handle(exchange);
      },
    });
  }

  await app.ready();
  const served = [{ method: 'get', path: '/health' }, ...routes.map((r) => ({ method: r.method.toLowerCase(), path: r.path }))];
  return Object.assign(app, { served });
}

function notFound(request: FastifyRequest): HttpError {
  return new HttpError(404, 'not_found', `no route for ${request.method} ${request.url.split('?', 1)[0]}`);
}

declare module 'fastify' {
  interface FastifyRequest {
    /** The request id, its log line and its logger (core/web/request-log.ts). */
    requestLog: import('./core/web/request-log.ts').RequestLog | null;
  }
}

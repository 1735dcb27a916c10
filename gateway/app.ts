// The gateway's HTTP application, on plain node:http (why not Express:
// http/exchange.ts). Per request, in order: the request id and log line,
// CORS, GET /health, the readiness gate (503 while migrating), the MCP
// process's paths (passed through before any body is read), the route
// (http/dispatch.ts; none: JSON 404), the JSON body (http/body.ts), and the
// route's handler (the pipeline of http/route.ts). No route logic lives here;
// anything unforeseen becomes a JSON 500 without details.
import type { IncomingMessage, ServerResponse } from 'node:http';
import { HttpError, type ErrorShape } from './core/web/errors.ts';
import type { Logger } from './core/process/log.ts';
import { accountPageRoutes } from './routes/account-pages.ts';
import { accountRoutes } from './routes/account.ts';
import { agentCallRoutes } from './routes/agent-calls.ts';
import { assetRoutes } from './routes/assets.ts';
import { authRoutes } from './routes/auth.ts';
import { supabaseAuthRoutes } from './routes/supabase-auth.ts';
import { calendarRoutes } from './routes/calendars.ts';
import { communityRoutes } from './routes/communities.ts';
import { connectionRoutes } from './routes/connections.ts';
import { deeplinkRoutes } from './routes/deeplinks.ts';
import { docsRoutes } from './routes/docs.ts';
import { eventRoutes } from './routes/events.ts';
import { healthHandler } from './routes/health.ts';
import { passwordRoutes } from './routes/password.ts';
import { platformRoutes } from './routes/platform.ts';
import { profileRoutes } from './routes/profile.ts';
import { storageRoutes } from './routes/storage.ts';
import { storageRenderRoutes } from './routes/storage-render.ts';
import { storageResumableRoutes } from './routes/storage-resumable.ts';
import { streamRoutes } from './routes/stream.ts';
import { dealRoutes, taskRoutes } from './routes/tasks.ts';
import { tokenRoutes } from './routes/tokens.ts';
import { webhookRoutes } from './routes/webhooks.ts';
import { discardRest, hasBody, readJsonBody } from './http/body.ts';
import { cors } from './http/cors.ts';
import { RouteTable } from './http/dispatch.ts';
import { beginExchange, sendError, type Exchange } from './http/exchange.ts';
import { mcpPathOf, mcpProxy, type McpProxyOptions } from './http/mcp-proxy.ts';
import { routeTemplate } from './core/process/metrics.ts';
import type { Route, RouteHandler, Services } from './http/route.ts';

/** Every REST route the gateway serves, in one list (the docs read it too). */
export const routes: Route[] = [
  ...authRoutes,
  ...supabaseAuthRoutes,
  ...passwordRoutes,
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
  ...storageRoutes,
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

/** The request listener (http.createServer(app)), with the method and path of every route it serves (http/endpoints.ts records them). */
export type App = ((req: IncomingMessage, res: ServerResponse) => void) & { served: readonly { method: string; path: string }[] };

export function createApp({ services, log, isReady, corsOrigins, mcp }: AppOptions): App {
  const table = new RouteTable<{ handle: RouteHandler; rawBody: boolean; bodyErrorShape: ErrorShape; template: string }>(
    routes.map((route) => ({
      method: route.method,
      path: route.path,
      // A body that cannot be read is answered in the Error shape, except on
      // the routes of an interface with its own body (Supabase Storage's).
      handler: {
        handle: route.build(services),
        rawBody: route.docs.rawBody !== undefined,
        bodyErrorShape: route.docs.errorShape ?? 'default',
        // The route as the metrics label it (OpenTelemetry's http.route).
        template: routeTemplate(route.path),
      },
    })),
  );
  const health = healthHandler(services.sql, isReady);
  const corsHeaders = cors(corsOrigins ?? []);
  const proxy = mcp ? mcpProxy({ ...mcp, log }) : undefined;

  async function serve(exchange: Exchange): Promise<void> {
    const { req, res, path, method } = exchange;
    if (corsHeaders(req, res)) return;
    if ((method === 'GET' || method === 'HEAD') && /^\/health\/?$/i.test(path)) {
      exchange.requestLog.route = '/health';
      return health(res, exchange.requestLog);
    }
    if (!isReady()) {
      exchange.requestLog.cause = 'starting';
      return sendError(res, new HttpError(503, 'service_unavailable', 'the service is starting'));
    }
    // Before any body is read: the MCP process reads it itself.
    const mcpPath = proxy ? mcpPathOf(path) : undefined;
    if (mcpPath) {
      exchange.requestLog.route = mcpPath;
      return proxy!(exchange);
    }
    const route = table.find(method, path);
    if (!route) return sendError(res, new HttpError(404, 'not_found', `no route for ${method} ${path}`));
    exchange.params = route.params;
    exchange.requestLog.route = route.handler.template;
    // A route with a raw body (a file upload) streams it itself.
    if (!route.handler.rawBody && hasBody(req)) {
      try {
        exchange.body = await readJsonBody(req);
      } catch (err) {
        // The connection closes after the answer; the rest of the body is
        // read first (a bounded amount, thrown away), so that a client still
        // sending it reads the answer instead of a broken pipe.
        res.setHeader('Connection', 'close');
        await discardRest(req);
        if (route.handler.bodyErrorShape !== 'default' && err instanceof HttpError) return sendError(res, err, route.handler.bodyErrorShape);
        throw err;
      }
    }
    await route.handler.handle(exchange);
  }

  const handle = (req: IncomingMessage, res: ServerResponse) => {
    let exchange: Exchange;
    try {
      exchange = beginExchange(req, res, log);
    } catch (err) {
      // A request line nothing can be made of (the HTTP parser lets few through).
      log.warn({ err }, 'unreadable request');
      sendError(res, new HttpError(400, 'bad_request', 'the request URL is not valid'));
      return;
    }
    serve(exchange).catch((err: unknown) => {
      const httpError = err instanceof HttpError ? err : new HttpError(500, 'internal_error', 'internal server error');
      if (httpError.status >= 500) exchange.log.error({ err }, 'unhandled error');
      sendError(res, httpError);
    });
  };
  return Object.assign(handle, { served: [{ method: 'get', path: '/health' }, ...table.served] });
}

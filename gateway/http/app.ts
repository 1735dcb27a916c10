// The Express application: request ids and logs, the readiness gate, JSON
// parsing (1 MB), every route module, JSON 404 and the last-resort error
// handler. No route logic lives here.
import express, { type ErrorRequestHandler } from 'express';
import { defaultCode, errorBody, HttpError } from '../lib/errors.ts';
import type { Logger } from '../lib/log.ts';
import { agentCallRoutes } from '../routes/agent-calls.ts';
import { authRoutes } from '../routes/auth.ts';
import { communityRoutes } from '../routes/communities.ts';
import { connectionRoutes } from '../routes/connections.ts';
import { deeplinkRoutes } from '../routes/deeplinks.ts';
import { docsRoutes } from '../routes/docs.ts';
import { eventRoutes } from '../routes/events.ts';
import { healthHandler } from '../routes/health.ts';
import { passwordRoutes } from '../routes/password.ts';
import { platformRoutes } from '../routes/platform.ts';
import { profileRoutes } from '../routes/profile.ts';
import { streamRoutes } from '../routes/stream.ts';
import { dealRoutes, taskRoutes } from '../routes/tasks.ts';
import { tokenRoutes } from '../routes/tokens.ts';
import { cors } from './cors.ts';
import { dispatch } from './dispatch.ts';
import { repairPathEncoding } from './input.ts';
import { mcpProxy } from './mcp-proxy.ts';
import { requestLogger } from './request-log.ts';
import type { TrustProxy } from '../lib/client-ip.ts';
import type { Route, Services } from './route.ts';

/** Every REST route the gateway serves, in one list (the docs read it too). */
export const routes: Route[] = [
  ...authRoutes,
  ...passwordRoutes,
  ...profileRoutes,
  ...communityRoutes,
  ...taskRoutes,
  ...dealRoutes,
  ...streamRoutes,
  ...eventRoutes,
  ...connectionRoutes,
  ...deeplinkRoutes,
  ...tokenRoutes,
  ...platformRoutes,
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
  mcp?: { upstreamUrl: string; trustProxy: TrustProxy };
}

export function createApp({ services, log, isReady, corsOrigins, mcp }: AppOptions): express.Express {
  const app = express();
  app.disable('x-powered-by');
  app.set('etag', false);
  app.set('query parser', 'simple');

  app.use(requestLogger(log));
  app.use(repairPathEncoding);
  app.use(cors(corsOrigins ?? []));
  app.get('/health', healthHandler(services.sql, isReady));
  app.use((req, res, next) => {
    if (isReady()) return next();
    res.status(503).json(errorBody('error', new HttpError(503, 'service_unavailable', 'the service is starting')));
  });
  // Before the JSON parser: the MCP process reads the body itself.
  if (mcp) app.use(mcpProxy({ ...mcp, log }));
  const json = express.json({ limit: '1mb', type: ['application/json', 'application/*+json'] });
  // Only requests with a body go through the parser (GETs skip it).
  app.use((req, res, next) => (hasBody(req) ? json(req, res, next) : next()));

  // One middleware finds the route (http/dispatch.ts), in this list's order.
  app.use(dispatch(routes.map((route) => ({ method: route.method, path: route.path, handler: route.build(services) }))));

  app.use((req, res) => {
    res.status(404).json(errorBody('error', new HttpError(404, 'not_found', `no route for ${req.method} ${req.path}`)));
  });
  app.use(lastResortErrorHandler);
  return app;
}

function hasBody(req: express.Request): boolean {
  return req.headers['transfer-encoding'] !== undefined || (req.headers['content-length'] ?? '0') !== '0';
}

/** Errors that reach Express itself: body parsing, and anything unforeseen. */
const lastResortErrorHandler: ErrorRequestHandler = (err, req, res, _next) => {
  const type = (err as { type?: unknown } | null)?.type;
  let httpError: HttpError;
  if (type === 'entity.parse.failed') {
    httpError = new HttpError(400, 'invalid_json', 'the request body is not valid JSON');
  } else if (type === 'entity.too.large') {
    httpError = new HttpError(413, 'payload_too_large', 'the request body is larger than 1 MB');
  } else if (type === 'encoding.unsupported' || type === 'charset.unsupported') {
    httpError = new HttpError(415, 'unsupported_media_type', 'unsupported body encoding');
  } else if (type === 'request.aborted') {
    httpError = new HttpError(400, 'bad_request', 'the request was aborted');
  } else if (err instanceof URIError) {
    // e.g. a path parameter that is not valid percent-encoding (%ZZ)
    httpError = new HttpError(400, 'bad_request', 'the request URL is not valid');
  } else if (clientErrorStatus(err) !== undefined) {
    // Anything else Express or its parsers refuse as the client's fault.
    const status = clientErrorStatus(err)!;
    httpError = new HttpError(status, defaultCode(status), 'the request is not valid');
  } else {
    (res.locals.log as Logger | undefined)?.error({ err }, 'unhandled error');
    httpError = new HttpError(500, 'internal_error', 'internal server error');
  }
  if (res.headersSent) return;
  res.status(httpError.status).json(errorBody('error', httpError));
};

function clientErrorStatus(err: unknown): number | undefined {
  const status = (err as { status?: unknown; statusCode?: unknown } | null)?.status ?? (err as { statusCode?: unknown } | null)?.statusCode;
  return typeof status === 'number' && status >= 400 && status < 500 ? status : undefined;
}

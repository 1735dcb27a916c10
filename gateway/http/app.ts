// The Express application: request ids and logs, the readiness gate, JSON
// parsing (1 MB), every route module, JSON 404 and the last-resort error
// handler. No route logic lives here.
import express, { type ErrorRequestHandler } from 'express';
import { errorBody, HttpError } from '../lib/errors.ts';
import type { Logger } from '../lib/log.ts';
import { agentCallRoutes } from '../routes/agent-calls.ts';
import { authRoutes } from '../routes/auth.ts';
import { communityRoutes } from '../routes/communities.ts';
import { connectionRoutes } from '../routes/connections.ts';
import { deeplinkRoutes } from '../routes/deeplinks.ts';
import { eventRoutes } from '../routes/events.ts';
import { healthHandler } from '../routes/health.ts';
import { profileRoutes } from '../routes/profile.ts';
import { streamRoutes } from '../routes/stream.ts';
import { dealRoutes, taskRoutes } from '../routes/tasks.ts';
import { tokenRoutes } from '../routes/tokens.ts';
import { mcpProxy } from './mcp-proxy.ts';
import { requestLogger } from './request-log.ts';
import type { Route, Services } from './route.ts';

/** Every REST route the gateway serves, in one list (the docs read it too). */
export const routes: Route[] = [
  ...authRoutes,
  ...profileRoutes,
  ...communityRoutes,
  ...taskRoutes,
  ...dealRoutes,
  ...streamRoutes,
  ...eventRoutes,
  ...connectionRoutes,
  ...deeplinkRoutes,
  ...tokenRoutes,
  ...agentCallRoutes,
];

export interface AppOptions {
  services: Services;
  log: Logger;
  /** False until migrations have run; requests then get 503. */
  isReady: () => boolean;
  /** Where /mcp and the OAuth paths go (the MCP process); unset: not served. */
  mcp?: { upstreamUrl: string; trustProxy: boolean | number | string };
}

export function createApp({ services, log, isReady, mcp }: AppOptions): express.Express {
  const app = express();
  app.disable('x-powered-by');
  app.set('etag', false);
  app.set('query parser', 'simple');

  app.use(requestLogger(log));
  app.get('/health', healthHandler(services.sql, isReady));
  app.use((req, res, next) => {
    if (isReady()) return next();
    res.status(503).json(errorBody('error', new HttpError(503, 'service_unavailable', 'the service is starting')));
  });
  // Before the JSON parser: the MCP process reads the body itself.
  if (mcp) app.use(mcpProxy({ ...mcp, log }));
  app.use(express.json({ limit: '1mb', type: ['application/json', 'application/*+json'] }));

  for (const route of routes) {
    app[route.method](route.path, route.build(services));
  }

  app.use((req, res) => {
    res.status(404).json(errorBody('error', new HttpError(404, 'not_found', `no route for ${req.method} ${req.path}`)));
  });
  app.use(lastResortErrorHandler);
  return app;
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
  } else {
    (res.locals.log as Logger | undefined)?.error({ err }, 'unhandled error');
    httpError = new HttpError(500, 'internal_error', 'internal server error');
  }
  if (res.headersSent) return;
  res.status(httpError.status).json(errorBody('error', httpError));
};

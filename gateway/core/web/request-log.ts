// The request log line and request id every HTTP process writes (the gateway
// and the MCP server): X-Request-Id (the client's, when well-formed, else a
// new one), a child logger made only when something logs, and one line per
// response with method, path (never the query string: it may carry
// credentials), status, duration and user.
//
// Every line of a request (the request line and whatever the request's logger
// writes) carries reqId and traceId: the trace id of an incoming W3C
// `traceparent` (or of the request's span, when tracing is on), else a new one.
// When metrics are on (core/process/metrics.ts), the same moment records the
// request's duration by method, route template and status, and counts 503s
// by cause and 429s by door.
//
// The line is written by a logger without redaction (its fields are fixed
// and hold no secret): pino's redaction walks every logged object, and on a
// request that costs a few hundred microseconds that was measurable.
import crypto from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { RequestHandler } from 'express';
import { accessLogOf, type Logger } from '../process/log.ts';
import { endServerSpan, startServerSpan, traceparentOfSpan, type ServerSpan } from '../process/tracing.ts';
import { countUnavailable, doorOf, observeRequest, routeTemplate, metricsOn, throttleRefusals } from '../process/metrics.ts';

const REQUEST_ID = /^[A-Za-z0-9._-]{1,64}$/;
/** A W3C traceparent: version, trace id, parent id, flags (lower-case hex); its trace id is the second field. */
const TRACEPARENT = /^([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})$/;

/** The traceparent of a request this one makes (the MCP process): a child of its server span, or of its trace id. */
export function traceparentOf(state: RequestLog): string {
  if (state.span) return traceparentOfSpan(state.span.span);
  return `00-${state.traceId}-${crypto.randomBytes(8).toString('hex')}-01`;
}

/** The trace id of a request: its `traceparent`'s when valid, else a new one. */
export function traceIdOf(header: string | string[] | undefined): string {
  return validTraceparent(header)?.slice(3, 35) ?? crypto.randomBytes(16).toString('hex');
}

/**
 * An incoming `traceparent` when it is a valid W3C one, else undefined (the
 * request then starts a trace of its own): the version 00 form, a version
 * other than `ff` (W3C Trace Context: ff is invalid), trace id and parent id
 * not all zeros.
 */
export function validTraceparent(header: string | string[] | undefined): string | undefined {
  if (typeof header !== 'string') return undefined;
  const value = header.trim();
  const match = TRACEPARENT.exec(value);
  if (!match || match[1] === 'ff' || /^0+$/.test(match[2]!) || /^0+$/.test(match[3]!)) return undefined;
  return `00-${match[2]}-${match[3]}-${match[4]}`;
}

export interface RequestLog {
  readonly id: string;
  /** The W3C trace id the request's log lines carry. */
  traceId: string;
  /** The request's server span, when traces are exported (core/process/tracing.ts). */
  span: ServerSpan | undefined;
  /**
   * The W3C traceparent the jobs the request queues carry (its transactions'
   * request.traceparent): its server span's when traces are exported, else
   * its incoming traceparent when valid, else none.
   */
  traceparent: string | undefined;
  /** The route template that served the request (`/api/mobile/tasks/{id}`), for the metrics; unset: none matched. */
  route: string | undefined;
  /** Why a 503 was answered (the metrics' cause: core/process/metrics.ts UNAVAILABLE_CAUSES); else the error code of a refusal. */
  cause: string | undefined;
  /** The request's logger (with reqId). */
  readonly log: Logger;
  /** The signed-in user, shown on the line. */
  userId: string | undefined;
  /** The role of a request that acts as no user (the service-role key: service_role), shown on the line. */
  role: string | undefined;
  /** Shown instead of the path when the path holds a secret (a route's template, e.g. `/cal/:token.ics`). */
  path: string | undefined;
}

export function startRequestLog(req: IncomingMessage, res: ServerResponse, log: Logger): RequestLog {
  const incoming = req.headers['x-request-id'];
  const id = typeof incoming === 'string' && REQUEST_ID.test(incoming) ? incoming : crypto.randomUUID();
  const started = performance.now();
  let child: Logger | undefined;
  const span = startServerSpan(req.method ?? 'GET', req.headers);
  const incomingTrace = span ? undefined : validTraceparent(req.headers.traceparent);
  const state: RequestLog = {
    id,
    traceId: span ? span.span.spanContext().traceId : (incomingTrace?.slice(3, 35) ?? crypto.randomBytes(16).toString('hex')),
    span,
    traceparent: span ? traceparentOfSpan(span.span) : incomingTrace,
    route: undefined,
    cause: undefined,
    get log() {
      return (child ??= log.child({ reqId: id, traceId: state.traceId }));
    },
    userId: undefined,
    role: undefined,
    path: undefined,
  };
  res.setHeader('X-Request-Id', id);
  const access = accessLogOf(log);
  const logged = access.isLevelEnabled('info');
  const measured = metricsOn();
  if (measured) (res as Noted)[CAUSE] = state;
  // 'close' comes for every response, finished or cut.
  if (span) res.once('close', () => endServerSpan(span, state.route, res.statusCode));
  if (logged || measured) {
    res.once('finish', () => {
      const ms = performance.now() - started;
      if (measured) measure(req.method ?? 'GET', state, res.statusCode, ms);
      if (!logged) return;
      const url = req.url ?? '/';
      const q = url.indexOf('?');
      access.info(
        {
          reqId: id,
          traceId: state.traceId,
          method: req.method,
          path: state.path ?? (q === -1 ? url : url.slice(0, q)),
          status: res.statusCode,
          ms: Math.round(ms * 10) / 10,
          user: state.userId,
          ...(state.role ? { role: state.role } : {}),
        },
        'request',
      );
    });
  }
  return state;
}

/** Where a response keeps its request's state when metrics are on (a property: cheaper per request than a WeakMap entry). */
const CAUSE = Symbol('request log');
type Noted = ServerResponse & { [CAUSE]?: RequestLog };

/** Records the error code a response answers with, unless a cause was given already (when metrics are on). */
export function noteCause(res: ServerResponse, code: string): void {
  const state = (res as Noted)[CAUSE];
  if (state) state.cause ??= code;
}

/** Methods as OpenTelemetry labels them: the known ones, else _OTHER (a label never takes what a client invents). */
const METHODS = new Set(['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS']);

function measure(method: string, state: RequestLog, status: number, ms: number): void {
  const route = state.route ?? 'unmatched';
  observeRequest(METHODS.has(method) ? method : '_OTHER', route, status, ms / 1000);
  if (status === 503) countUnavailable(state.cause);
  else if (status === 429) throttleRefusals.inc({ door: doorOf(route) });
}

/** The same, as Express middleware (the MCP process): res.locals.requestId, .traceId, .log and .userId. */
export function requestLogger(log: Logger): RequestHandler {
  return (req, res, next) => {
    const state = startRequestLog(req, res, log);
    // Express knows the route once it matched: the template, never the path.
    Object.defineProperty(state, 'route', {
      get: () => (req.route ? routeTemplate(`${req.baseUrl ?? ''}${String(req.route.path)}`) : undefined),
      set: () => {},
      configurable: true,
    });
    res.locals.requestId = state.id;
    res.locals.traceId = state.traceId;
    res.locals.traceContext = state.span?.context;
    res.locals.traceparent = state.traceparent;
    Object.defineProperty(res.locals, 'log', { get: () => state.log, configurable: true });
    Object.defineProperty(res.locals, 'userId', {
      get: () => state.userId,
      set: (id: string | undefined) => (state.userId = id),
      configurable: true,
    });
    next();
  };
}

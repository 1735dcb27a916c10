// The request log line and request id every HTTP process writes (the gateway
// and the MCP server): X-Request-Id (the client's, when well-formed, else a
// new one), a child logger made only when something logs, and one line per
// response with method, path (never the query string: it may carry
// credentials), status, duration and user.
//
// The line is written by a logger without redaction (its fields are fixed
// and hold no secret): pino's redaction walks every logged object, and on a
// request that costs a few hundred microseconds that was measurable.
import crypto from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { RequestHandler } from 'express';
import { accessLogOf, type Logger } from '../process/log.ts';

const REQUEST_ID = /^[A-Za-z0-9._-]{1,64}$/;

export interface RequestLog {
  readonly id: string;
  /** The request's logger (with reqId). */
  readonly log: Logger;
  /** The signed-in user, shown on the line. */
  userId: string | undefined;
  /** Shown instead of the path when the path holds a secret (a route's template, e.g. `/cal/:token.ics`). */
  path: string | undefined;
}

export function startRequestLog(req: IncomingMessage, res: ServerResponse, log: Logger): RequestLog {
  const incoming = req.headers['x-request-id'];
  const id = typeof incoming === 'string' && REQUEST_ID.test(incoming) ? incoming : crypto.randomUUID();
  const started = performance.now();
  let child: Logger | undefined;
  const state: RequestLog = {
    id,
    get log() {
      return (child ??= log.child({ reqId: id }));
    },
    userId: undefined,
    path: undefined,
  };
  res.setHeader('X-Request-Id', id);
  const access = accessLogOf(log);
  if (access.isLevelEnabled('info')) {
    res.once('finish', () => {
      const ms = performance.now() - started;
      const url = req.url ?? '/';
      const q = url.indexOf('?');
      access.info(
        { reqId: id, method: req.method, path: state.path ?? (q === -1 ? url : url.slice(0, q)), status: res.statusCode, ms: Math.round(ms * 10) / 10, user: state.userId },
        'request',
      );
    });
  }
  return state;
}

/** The same, as Express middleware (the MCP process): res.locals.requestId, .log and .userId. */
export function requestLogger(log: Logger): RequestHandler {
  return (req, res, next) => {
    const state = startRequestLog(req, res, log);
    res.locals.requestId = state.id;
    Object.defineProperty(res.locals, 'log', { get: () => state.log, configurable: true });
    Object.defineProperty(res.locals, 'userId', {
      get: () => state.userId,
      set: (id: string | undefined) => (state.userId = id),
      configurable: true,
    });
    next();
  };
}

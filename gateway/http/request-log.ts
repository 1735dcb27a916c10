// The request log line and request id every HTTP process writes (the gateway
// and the MCP server): X-Request-Id (the client's, when well-formed, else a
// new one), a child logger in res.locals.log, and one line per response with
// method, path (never the query string: it may carry credentials), status,
// duration and user.
import crypto from 'node:crypto';
import type { RequestHandler } from 'express';
import type { Logger } from '../lib/log.ts';

const REQUEST_ID = /^[A-Za-z0-9._-]{1,64}$/;

export function requestLogger(log: Logger): RequestHandler {
  const logsRequests = () => log.isLevelEnabled('info');
  return (req, res, next) => {
    const incoming = req.headers['x-request-id'];
    const id = typeof incoming === 'string' && REQUEST_ID.test(incoming) ? incoming : crypto.randomUUID();
    const started = performance.now();
    res.locals.requestId = id;
    // The request's logger (with reqId) is made only when something logs.
    let child: Logger | undefined;
    Object.defineProperty(res.locals, 'log', { get: () => (child ??= log.child({ reqId: id })), configurable: true });
    res.setHeader('X-Request-Id', id);
    if (logsRequests()) {
      res.on('finish', () => {
        const ms = performance.now() - started;
        // The path only: query strings may carry credentials.
        log.info(
          { reqId: id, method: req.method, path: req.path, status: res.statusCode, ms: Math.round(ms * 10) / 10, user: res.locals.userId },
          'request',
        );
      });
    }
    next();
  };
}

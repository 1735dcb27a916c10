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
  return (req, res, next) => {
    const incoming = req.headers['x-request-id'];
    const id = typeof incoming === 'string' && REQUEST_ID.test(incoming) ? incoming : crypto.randomUUID();
    const started = process.hrtime.bigint();
    res.locals.requestId = id;
    res.locals.log = log.child({ reqId: id });
    res.setHeader('X-Request-Id', id);
    res.on('finish', () => {
      const ms = Number(process.hrtime.bigint() - started) / 1e6;
      // The path only: query strings may carry credentials.
      res.locals.log.info(
        { method: req.method, path: req.path, status: res.statusCode, ms: Math.round(ms * 10) / 10, user: res.locals.userId },
        'request',
      );
    });
    next();
  };
}

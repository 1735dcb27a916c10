// GET /health: 200 once migrations have run and the database answers; 503 otherwise.
import type { ServerResponse } from 'node:http';
import { z } from 'zod';
import { sendJson } from '../http/exchange.ts';
import type { PlainOperation } from '../http/openapi.ts';
import { withDeadline, type Sql } from '../core/database/pool.ts';
import type { RequestLog } from '../core/web/request-log.ts';

/** The body of both answers. */
const HealthStatus = z
  .object({
    status: z
      .enum(['ok', 'starting', 'unavailable'])
      .describe('`ok`: serving; `starting`: migrations are running (503); `unavailable`: the database does not answer (503).'),
    database: z
      .enum(['ok', 'migrating', 'unreachable'])
      .describe('`ok`: it answered a query within 2 s; `migrating`: the gateway is applying migrations; `unreachable`: no answer within 2 s.'),
  })
  .meta({ id: 'HealthStatus', description: 'Whether the gateway serves and its database answers.', example: { status: 'ok', database: 'ok' } });

/** GET /health in the OpenAPI document (it is answered before the route table, so it is described here). */
export const healthOperation: PlainOperation = {
  method: 'get',
  path: '/health',
  summary: 'Whether the gateway serves requests and its database answers.',
  description:
    'For load balancers and orchestrators: 200 once the migrations have run and the database answers a query within ' +
    '2 seconds; 503 while starting or when the database does not answer. No credential; HEAD is answered too.',
  responses: {
    200: HealthStatus,
    503: HealthStatus,
  },
};

export function healthHandler(sql: Sql, isReady: () => boolean): (res: ServerResponse, requestLog?: Pick<RequestLog, 'cause'>) => Promise<void> {
  const answer = (res: ServerResponse, status: number, body: Record<string, string>) => sendJson(res, status, JSON.stringify(body));
  return async (res, requestLog) => {
    if (!isReady()) {
      if (requestLog) requestLog.cause = 'starting';
      return answer(res, 503, { status: 'starting', database: 'migrating' });
    }
    try {
      // At once 503 while the database does not answer (core/database/watch.ts).
      await withDeadline(sql, 2000, () => sql`select 1`.then(() => undefined));
      answer(res, 200, { status: 'ok', database: 'ok' });
    } catch {
      // The metrics' cause (core/process/metrics.ts): a load balancer polling /health through an outage counts there.
      if (requestLog) requestLog.cause = 'database';
      answer(res, 503, { status: 'unavailable', database: 'unreachable' });
    }
  };
}

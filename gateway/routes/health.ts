// GET /health: 200 once migrations have run and the database answers; 503 otherwise.
import type { ServerResponse } from 'node:http';
import { sendJson } from '../http/exchange.ts';
import type { Sql } from '../core/db.ts';

export function healthHandler(sql: Sql, isReady: () => boolean): (res: ServerResponse) => Promise<void> {
  const answer = (res: ServerResponse, status: number, body: Record<string, string>) => sendJson(res, status, JSON.stringify(body));
  return async (res) => {
    if (!isReady()) return answer(res, 503, { status: 'starting', database: 'migrating' });
    try {
      await Promise.race([
        sql`select 1`,
        new Promise((_, reject) => setTimeout(() => reject(new Error('timeout')), 2000)),
      ]);
      answer(res, 200, { status: 'ok', database: 'ok' });
    } catch {
      answer(res, 503, { status: 'unavailable', database: 'unreachable' });
    }
  };
}

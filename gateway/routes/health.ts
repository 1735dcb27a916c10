// GET /health: 200 once migrations have run and the database answers; 503 otherwise.
import type { RequestHandler } from 'express';
import type { Sql } from '../lib/db.ts';

export function healthHandler(sql: Sql, isReady: () => boolean): RequestHandler {
  return async (_req, res) => {
    if (!isReady()) {
      res.status(503).json({ status: 'starting', database: 'migrating' });
      return;
    }
    try {
      await Promise.race([
        sql`select 1`,
        new Promise((_, reject) => setTimeout(() => reject(new Error('timeout')), 2000)),
      ]);
      res.status(200).json({ status: 'ok', database: 'ok' });
    } catch {
      res.status(503).json({ status: 'unavailable', database: 'unreachable' });
    }
  };
}

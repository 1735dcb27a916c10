// The SQL of the gateway bench's routes, shared by the bench's direct side
// (gateway.bench.ts) and its bare HTTP server (bare-server.ts): for each
// route, the one call its handler sends, and the transaction around it as
// gateway/core/database/transaction.ts sends it.
import type postgres from 'postgres';

export interface RouteCase {
  label: string;
  method: 'GET' | 'POST';
  path: string;
  body?: unknown;
  /** GET routes run read-only. */
  readOnly: boolean;
  /** The route's one SQL call (the gateway's handler sends the same). */
  call(tx: postgres.Sql): postgres.PendingQuery<postgres.Row[]>;
}

export function routeCases(publicUrl: string): RouteCase[] {
  return [
    {
      label: 'GET /api/mobile/profile',
      method: 'GET',
      path: '/api/mobile/profile',
      readOnly: true,
      call: (tx) => tx`select * from api.profile_get()`,
    },
    {
      label: 'GET /api/mobile/communities (50)',
      method: 'GET',
      path: '/api/mobile/communities',
      readOnly: true,
      call: (tx) => tx`select api.communities_mine(${50}, ${0})::text as page`,
    },
    {
      label: 'GET /api/mobile/events/upcoming (20)',
      method: 'GET',
      path: '/api/mobile/events/upcoming',
      readOnly: true,
      call: (tx) => tx`select api.events_upcoming_page(${publicUrl})::text as events`,
    },
    {
      label: 'POST /api/mobile/tasks',
      method: 'POST',
      path: '/api/mobile/tasks',
      body: { title: 'bench task', description: 'created by the gateway bench' },
      readOnly: false,
      call: (tx) => tx`select * from api.task_create(${'bench task'}, ${'created by the gateway bench'}, ${'pending'}, ${null}::jsonb)`,
    },
  ];
}

/** The request's claims as the gateway sets them, and their session (checked per request). */
export interface DirectClaims {
  json: string;
  session: string | null;
}

/** The settings statement of gateway/core/database/transaction.ts: role, claims, timeout and the session check. */
export function settings(tx: postgres.Sql, claims: DirectClaims) {
  return tx`
    select set_config('role', ${'authenticated'}, true),
           set_config('request.jwt.claims', ${claims.json}, true),
           set_config('statement_timeout', ${'15000'}, true),
           private.check_session(${claims.session}::uuid)`;
}

/**
 * The request's transaction as the gateway sends it (gateway/core/database/transaction.ts):
 * BEGIN, the settings with the session check, the call and COMMIT written
 * one after the other on one connection, then the replies awaited together
 * (one round trip).
 */
export async function directTransaction(sql: postgres.Sql, claims: DirectClaims, route: RouteCase): Promise<postgres.Row[]> {
  const tx = await sql.reserve();
  try {
    const begin = tx.unsafe(route.readOnly ? 'begin read only' : 'begin').execute();
    const set = settings(tx, claims).execute();
    const result = route.call(tx).execute();
    const commit = tx`commit`.execute();
    await Promise.all([begin, set, result, commit]);
    return await result;
  } finally {
    tx.release();
  }
}

// Database access shared by the gateway and the MCP server.
//
// The database half of the request pipeline (withClaims), per request:
//
//   take one pooled connection (sql.reserve: no round trip)
//   → write, without waiting in between (postgres.js pipelines them):
//       BEGIN [READ ONLY]
//       select set_config('role', …, true),                  -- transaction-local:
//              set_config('request.jwt.claims', …, true),    -- nothing leaks to the
//              set_config('statement_timeout', …, true)      -- next user of the connection
//       the handler's one call
//       COMMIT
//   → wait for the four replies: ONE network round trip per request.
//   → any error: Postgres skips to the COMMIT, which in a failed transaction
//     is a ROLLBACK, so nothing of a failing request is kept; the first error
//     is thrown (the route maps it; SQL text never reaches the client).
//     Serialization failures and deadlocks retry the whole transaction.
//
// A handler whose fn does more than one query (its result is not a single
// postgres.js query) still gets BEGIN and the settings pipelined with its first
// query; COMMIT (or ROLLBACK on error) is then sent after fn settles.
//
// Behind a transaction-mode pooler (DATABASE_POOL_MODE=transaction) the pool
// uses no prepared statements; nothing else here depends on the session.
import postgres from 'postgres';
import { isRetryable } from './errors.ts';

export type Sql = postgres.Sql;
/**
 * The request's transaction: the connection held for the request, BEGIN
 * already sent (typed as postgres.js's TransactionSql; savepoint() and
 * prepare() are not available on it).
 */
export type Tx = postgres.TransactionSql;

export type PoolMode = 'session' | 'transaction';

export interface PoolOptions {
  max: number;
  applicationName: string;
  /** 'transaction': behind PgBouncer/Supavisor in transaction mode: no prepared statements. */
  mode?: PoolMode;
}

export function createPool(url: string, options: PoolOptions): Sql {
  return postgres(url, {
    max: options.max,
    idle_timeout: 60,
    connect_timeout: 10,
    prepare: options.mode !== 'transaction',
    // Notices (e.g. from migrations) are not errors; ignore them here.
    onnotice: () => {},
    connection: { application_name: options.applicationName },
  });
}

/** The claims a request runs with; `role` picks the Postgres role. */
export interface RequestClaims {
  role: 'anon' | 'authenticated' | 'service_role';
  sub?: string;
  [claim: string]: unknown;
}

export const ANON_CLAIMS: RequestClaims = { role: 'anon' };

export interface TransactionOptions {
  readOnly?: boolean;
  statementTimeoutMs?: number;
  /** The claims already serialised (the pipeline caches them per token). */
  claimsJson?: string;
}

const MAX_ATTEMPTS = 3;

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/** The session an access token belongs to (its session_id claim), if any. */
function sessionOf(claims: RequestClaims): string | null {
  return typeof claims.session_id === 'string' && UUID.test(claims.session_id) ? claims.session_id : null;
}

/**
 * Runs `fn` in a transaction as the role in `claims`, with
 * `request.jwt.claims` set for auth.uid() and row-level security. The same
 * statement refuses (PT401 session_ended) claims whose session was ended by
 * logout or refresh-token reuse (private.check_session). Retries the
 * whole transaction on serialization failures and deadlocks.
 */
export async function withClaims<T>(
  sql: Sql,
  claims: RequestClaims,
  fn: (tx: Tx) => Promise<T>,
  options: TransactionOptions = {},
): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await transaction(sql, claims, fn, options);
    } catch (err) {
      if (attempt < MAX_ATTEMPTS && isRetryable(err)) continue;
      throw err;
    }
  }
}

type PendingQuery = Promise<unknown> & { execute(): unknown };

function isPendingQuery(value: unknown): value is PendingQuery {
  return value instanceof Promise && typeof (value as { execute?: unknown }).execute === 'function';
}

const CONNECTION_ERRORS = new Set(['CONNECTION_CLOSED', 'CONNECTION_DESTROYED', 'CONNECTION_ENDED', 'ECONNRESET']);

async function transaction<T>(sql: Sql, claims: RequestClaims, fn: (tx: Tx) => Promise<T>, options: TransactionOptions): Promise<T> {
  const tx = await sql.reserve();
  let healthy = true;
  const settle = async (pending: Promise<unknown>[]): Promise<unknown[]> => {
    const outcomes = await Promise.allSettled(pending);
    const failed = outcomes.find((o): o is PromiseRejectedResult => o.status === 'rejected');
    if (failed) {
      if (CONNECTION_ERRORS.has((failed.reason as { code?: string } | null)?.code ?? '')) healthy = false;
      throw failed.reason;
    }
    return outcomes.map((o) => (o as PromiseFulfilledResult<unknown>).value);
  };
  try {
    const begin = tx.unsafe(options.readOnly ? 'begin read only' : 'begin').execute();
    const settings = tx`
      select set_config('role', ${claims.role}, true),
             set_config('request.jwt.claims', ${options.claimsJson ?? JSON.stringify(claims)}, true),
             set_config('statement_timeout', ${String(options.statementTimeoutMs ?? 15_000)}, true),
             private.check_session(${sessionOf(claims)}::uuid)`.execute();
    let body: Promise<T>;
    try {
      body = fn(tx as unknown as Tx);
    } catch (err) {
      body = Promise.reject(err);
    }
    if (isPendingQuery(body)) {
      // One statement: COMMIT goes out right behind it.
      body.execute();
      const commit = tx`commit`.execute();
      const [, , result] = await settle([begin, settings, body, commit]);
      return result as T;
    }
    let result: T;
    try {
      [, , result] = (await settle([begin, settings, body])) as [unknown, unknown, T];
    } catch (err) {
      if (healthy) await settle([tx`rollback`.execute()]).catch(() => {});
      throw err;
    }
    await settle([tx`commit`.execute()]);
    return result;
  } finally {
    // A connection that broke is already back in the pool's closed queue.
    if (healthy) tx.release();
  }
}

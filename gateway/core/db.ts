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
//   (A request with an Idempotency-Key adds its claim before the call and
//   sends the storing of its answer with the COMMIT, in a second round trip
//   once the answer is known: options.finish, and http/idempotency.ts.)
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
//
// Outages: every wait is bounded. A request that has no connection, or no
// answer on it, by its statement timeout + DEADLINE_MARGIN_MS is answered
// with a DatabaseWaitError (503 with Retry-After); a connection that arrives
// later is given back unused, and one that went silent is given back when
// its queries settle. (Refused connections fail at once; an unreachable host
// after connect_timeout.)
// postgres.js 3.4.9 loses pool slots around reserve() when the server closes
// connections (porsager/postgres#1195, #1199, #1186, #1208, #1219, #1223), and
// behind PgBouncer a new connection whose first query fails (the server is
// gone) ended the process with an unhandled rejection (#1192): the patch in
// gateway/patches/, applied by `npm install`, fixes the driver, and
// test/unit/postgres-driver.test.ts fails without it.
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
    backoff: reconnectDelaySeconds,
    // Notices (e.g. from migrations) are not errors; ignore them here.
    onnotice: () => {},
    connection: { application_name: options.applicationName },
  });
}

/**
 * Seconds before a closed connection is opened again, after `retries`
 * refused attempts in a row: 25 ms doubling up to 0.5 s, with jitter.
 * postgres.js's default grows to 20 s after a few refusals (and its LISTEN
 * connection shares the count), so a gateway took up to 20 s to notice that
 * the database was back.
 */
export function reconnectDelaySeconds(retries: number): number {
  return Math.min(0.025 * 2 ** retries, 0.5) * (0.5 + Math.random() / 2);
}

/** How long past its statement timeout a request waits for a connection, or for an answer on it. */
export const DEADLINE_MARGIN_MS = 1_000;

/** No connection, or no answer on it, within the bounds above: the database is not reachable now. */
export class DatabaseWaitError extends Error {
  readonly code = 'DATABASE_WAIT_TIMEOUT';
}

/** The claims a request runs with; `role` picks the Postgres role. */
export interface RequestClaims {
  role: 'anon' | 'authenticated' | 'service_role';
  sub?: string;
  [claim: string]: unknown;
}

export const ANON_CLAIMS: RequestClaims = { role: 'anon' };

export interface TransactionOptions<T = unknown> {
  readOnly?: boolean;
  statementTimeoutMs?: number;
  /** The claims already serialised (the pipeline caches them per token). */
  claimsJson?: string;
  /**
   * Statements to send right before COMMIT, in the same round trip, once fn
   * has settled (e.g. storing an idempotent request's answer): they get fn's
   * result and return their queries, already executing. An error in any of
   * them rolls the whole transaction back and is thrown.
   */
  finish?: (tx: Tx, result: T) => Promise<unknown>[];
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
 *
 * `null` claims: the transaction runs as the connection's own role (no role,
 * no claims, no session), for the private functions only the processes call
 * (the password attempts of a sign-in).
 */
export async function withClaims<T>(
  sql: Sql,
  claims: RequestClaims | null,
  fn: (tx: Tx) => Promise<T>,
  options: TransactionOptions<T> = {},
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

async function transaction<T>(sql: Sql, claims: RequestClaims | null, fn: (tx: Tx) => Promise<T>, options: TransactionOptions<T>): Promise<T> {
  const timeoutMs = options.statementTimeoutMs ?? 15_000;
  let late = false;
  const work = (async () => {
    const tx = await sql.reserve();
    if (late) {
      // The request was answered 503 while it waited: give the connection back unused.
      tx.release();
      throw new DatabaseWaitError('the connection came too late');
    }
    try {
      return await run(tx, claims, fn, options, timeoutMs);
    } finally {
      tx.release();
    }
  })();
  // One timer per request: no connection (postgres.js gives up connecting
  // after connect_timeout), or no answer on it, by the deadline is a 503.
  let timer: NodeJS.Timeout | undefined;
  const deadline = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new DatabaseWaitError(`no answer from the database within ${timeoutMs + DEADLINE_MARGIN_MS} ms`)), timeoutMs + DEADLINE_MARGIN_MS);
  });
  try {
    return await Promise.race([work, deadline]);
  } catch (err) {
    late = true;
    work.catch(() => {}); // it settles in the background
    throw err;
  } finally {
    clearTimeout(timer);
  }
}

/** BEGIN, the settings, fn's queries, the finishing statements and COMMIT on the reserved connection; the first error is thrown. */
async function run<T>(tx: postgres.ReservedSql, claims: RequestClaims | null, fn: (tx: Tx) => Promise<T>, options: TransactionOptions<T>, timeoutMs: number): Promise<T> {
  const settle = async (pending: Promise<unknown>[]): Promise<unknown[]> => {
    const outcomes = await Promise.allSettled(pending);
    const failed = outcomes.find((o): o is PromiseRejectedResult => o.status === 'rejected');
    if (failed) throw failed.reason;
    return outcomes.map((o) => (o as PromiseFulfilledResult<unknown>).value);
  };
  const begin = tx.unsafe(options.readOnly ? 'begin read only' : 'begin').execute();
  const settings = (
    claims
      ? tx`
    select set_config('role', ${claims.role}, true),
           set_config('request.jwt.claims', ${options.claimsJson ?? JSON.stringify(claims)}, true),
           set_config('statement_timeout', ${String(timeoutMs)}, true),
           private.check_session(${sessionOf(claims)}::uuid)`
      : tx`select set_config('statement_timeout', ${String(timeoutMs)}, true)`
  ).execute();
  let body: Promise<T>;
  try {
    body = fn(tx as unknown as Tx);
  } catch (err) {
    body = Promise.reject(err);
  }
  if (isPendingQuery(body) && !options.finish) {
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
    // On a closed connection the rollback fails at once (the server rolled back already).
    await settle([tx`rollback`.execute()]).catch(() => {});
    throw err;
  }
  let finals: Promise<unknown>[] = [];
  if (options.finish) {
    try {
      finals = options.finish(tx as unknown as Tx, result);
    } catch (err) {
      finals = [Promise.reject(err)];
    }
  }
  // In a transaction a finishing statement failed in, COMMIT rolls back.
  await settle([...finals, tx`commit`.execute()]);
  return result;
}

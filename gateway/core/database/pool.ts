// The database pool both processes use (postgres.js) and the bounds on waiting
// for it: createPool watches each pool (watch.ts), so a database that stops
// answering is noticed; withDeadline bounds work outside a request's
// transaction; DatabaseWaitError and OutcomeUnknownError are what a client may
// be told when it does not answer (transaction.ts says when each applies).
//
// Behind a transaction-mode pooler (DATABASE_POOL_MODE=transaction) the pool
// uses no prepared statements; nothing else here depends on the session.
//
// postgres.js 3.4.9 loses pool slots around reserve() when the server closes
// connections (porsager/postgres#1195, #1199, #1186, #1208, #1219, #1223), and
// behind PgBouncer a new connection whose first query fails (the server is
// gone) ended the process with an unhandled rejection (#1192): the patch in
// gateway/patches/, applied by `npm install`, fixes the driver, and
// test/unit/postgres-driver.test.ts fails without it. The same patch makes
// target_session_attrs=read-write pass over a hot standby (the driver took
// one for a primary), so a pool on a multi-host URL follows the primary
// (core/database/hosts.ts; test/process/failover.test.ts fails without it).
import postgres from 'postgres';
import { DatabaseWatch } from './watch.ts';
import { queryParam } from '../process/database-url.ts';
import type { Logger } from '../process/log.ts';

export type Sql = postgres.Sql;

export type PoolMode = 'session' | 'transaction';

export interface PoolOptions {
  max: number;
  applicationName: string;
  /** 'transaction': behind PgBouncer/Supavisor in transaction mode: no prepared statements. */
  mode?: PoolMode;
  /** Where the database not answering, and answering again, is logged. */
  log?: Logger;
  /**
   * PUBLIC_URL of the process using the pool: each transaction sets it as
   * `request.public_url` (transaction-local), so the URLs SQL builds
   * (private.public_url(): avatar_url, image_url) name the gateway the
   * request came through, not whichever gateway started last.
   */
  publicUrl?: string;
}

/** What createPool knows of each pool it made. */
interface PoolFacts {
  /** Notices the database not answering (core/database/watch.ts). */
  watch: DatabaseWatch;
  /** The PUBLIC_URL its transactions set (PoolOptions.publicUrl); '' when none was given. */
  publicUrl: string;
  /** The application_name of its connections (a transaction with a trace id shows it after it). */
  applicationName: string;
  /** Its URL asks for the host that takes writes (target_session_attrs read-write or primary). */
  followsWritable: boolean;
}
const pools = new WeakMap<Sql, PoolFacts>();

export function createPool(url: string, options: PoolOptions): Sql {
  const sql = postgres(url, {
    max: options.max,
    idle_timeout: 60,
    connect_timeout: 10,
    prepare: options.mode !== 'transaction',
    backoff: reconnectDelaySeconds,
    // Notices (e.g. from migrations) are not errors; ignore them here.
    onnotice: () => {},
    connection: { application_name: options.applicationName },
  });
  pools.set(sql, {
    watch: new DatabaseWatch(url, { transactionPooler: options.mode === 'transaction', log: options.log }),
    publicUrl: options.publicUrl ?? '',
    applicationName: options.applicationName,
    followsWritable: ['read-write', 'primary'].includes(queryParam(url, 'target_session_attrs') ?? ''),
  });
  return sql;
}

/**
 * Whether the pool's URL asks for the host that takes writes
 * (target_session_attrs=read-write or primary): a connection on a host that
 * stopped taking writes (a switchover) is then dropped, and the next one is
 * made to the host that takes them (core/database/transaction.ts).
 */
export function followsWritable(sql: Sql): boolean {
  return pools.get(sql)?.followsWritable ?? false;
}

/** The PUBLIC_URL a pool's transactions set as request.public_url ('' when none was given: SQL then uses the recorded one). */
export function publicUrlOf(sql: Sql): string {
  return pools.get(sql)?.publicUrl ?? '';
}

/**
 * The application_name a transaction of the pool runs with, for a trace id:
 * the connection's own followed by `trace:<id>` (at most 63 bytes, Postgres's
 * limit). Transaction-local, so pg_stat_activity and the server log
 * (log_line_prefix %a) show which trace a running statement belongs to.
 */
export function tracedApplicationName(sql: Sql, traceId: string): string {
  return `${pools.get(sql)?.applicationName ?? 'gateway'} trace:${traceId}`.slice(-63);
}

/** The watch of a pool made by createPool; none for other pools. */
export function watchOf(sql: Sql): DatabaseWatch | undefined {
  return pools.get(sql)?.watch;
}

/** False while the pool's database does not answer (core/database/watch.ts); true for pools without a watch. */
export function databaseAnswers(sql: Sql): boolean {
  return pools.get(sql)?.watch.responsive ?? true;
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

/** No connection, or no answer on it, within the bounds above, and nothing of the transaction committed: the database is not reachable now. */
export class DatabaseWaitError extends Error {
  readonly code = 'DATABASE_WAIT_TIMEOUT';
}

/**
 * A read-write transaction was refused with SQLSTATE 25006
 * (read_only_sql_transaction): the host it ran on no longer takes writes (a
 * planned switchover turned it read-only, or it became a standby). The
 * statement failed, so nothing of the transaction was written; the
 * connection is dropped (followsWritable), so that the next one finds the
 * primary.
 */
export class NotPrimaryError extends Error {
  readonly code = 'NOT_PRIMARY';
}

/** The transaction's COMMIT was sent and no answer came back (the connection died, or the deadline passed): it may have committed. */
export class OutcomeUnknownError extends Error {
  readonly code = 'OUTCOME_UNKNOWN';
}

/**
 * Runs `work` (database access outside withClaims, e.g. the API-token check)
 * within the pool's bounds: at once DatabaseWaitError while the database does
 * not answer, and DatabaseWaitError if `work` has not settled by `timeoutMs`
 * (it settles in the background). For work whose outcome does not matter to
 * the client when it is cut.
 */
export async function withDeadline<T>(sql: Sql, timeoutMs: number, work: () => Promise<T>): Promise<T> {
  if (!databaseAnswers(sql)) throw new DatabaseWaitError('the database does not answer');
  const running = work();
  let timer: NodeJS.Timeout | undefined;
  const deadline = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new DatabaseWaitError(`no answer from the database within ${timeoutMs} ms`)), timeoutMs);
  });
  try {
    return await Promise.race([running, deadline]);
  } catch (err) {
    running.catch(() => {});
    throw err;
  } finally {
    clearTimeout(timer);
  }
}

// The request's transaction, shared by the gateway and the MCP server: the
// database half of the request pipeline (withClaims), per request:
//
//   take one pooled connection (sql.reserve: no round trip)
//   → write, without waiting in between (postgres.js pipelines them):
//       BEGIN [READ ONLY]
//       select set_config('role', …, true),                  -- transaction-local:
//              set_config('request.jwt.claims', …, true),    -- nothing leaks to the
//              set_config('statement_timeout', …, true),     -- next user of the connection
//              set_config('request.public_url', …, true)     -- (the URLs SQL builds)
//              set_config('application_name', …, true)       -- (the request's trace id)
//              set_config('request.traceparent', …, true)    -- (the trace the jobs it queues carry)
//       the handler's one call
//       COMMIT
//       [select pg_current_wal_lsn()]  -- with read replicas, a read-write transaction's
//                                      -- consistency token (options.onCommit, core/database/replicas.ts)
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
// Outages: every wait is bounded, and an answer never says a write failed
// when it may have been saved.
//   - A request that has no connection, or no answer on it, by its statement
//     timeout + DEADLINE_MARGIN_MS is given up; a connection that arrives
//     later is given back unused, and one that went silent is given back
//     when its queries settle (a transaction whose COMMIT was not sent yet is
//     rolled back then, never committed late).
//   - A database that stops answering (frozen: core/database/watch.ts) is noticed
//     within PROBE_AFTER_MS + PROBE_TIMEOUT_MS: requests waiting for a
//     connection are cut, and none is sent until it answers again.
//   - What the client is told: DatabaseWaitError (503 with Retry-After) when
//     nothing of the transaction can have been committed: nothing was sent,
//     or its COMMIT was not, or the server answered a statement with an error
//     (it then runs nothing after it), or it was read-only. OutcomeUnknownError
//     (504 outcome_unknown) when its COMMIT was sent and neither its answer
//     nor an error of the server came back: the connection died, or the
//     deadline passed. (Refused connections fail at once; an unreachable host
//     after connect_timeout.) NotPrimaryError (503 with Retry-After) when a
//     read-write transaction is refused with SQLSTATE 25006: its host no
//     longer takes writes (a planned switchover), nothing was written, and
//     (target_session_attrs=read-write) the connection is dropped so that
//     the next one finds the primary.
import postgres from 'postgres';
import type { WatchedOperation } from './watch.ts';
import { isRetryable } from '../web/errors.ts';
import { DatabaseWaitError, DEADLINE_MARGIN_MS, followsWritable, NotPrimaryError, OutcomeUnknownError, publicUrlOf, tracedApplicationName, watchOf, type Sql } from './pool.ts';
import { isDatabaseUnavailable, noteServed } from './unavailable-log.ts';
import type { Context } from '@opentelemetry/api';
import { endSqlSpan, startSqlSpan } from '../process/tracing.ts';
import { DEFAULT_STATEMENT_TIMEOUT_MS } from '../process/config.ts';
import { metricsOn, observeSql, operationOfQuery, poolWait, readPoolWith, statementTimeouts } from '../process/metrics.ts';

/**
 * The request's transaction: the connection held for the request, BEGIN
 * already sent (typed as postgres.js's TransactionSql; savepoint() and
 * prepare() are not available on it).
 */
export type Tx = postgres.TransactionSql;

/** The claims a request runs with; `role` picks the Postgres role. */
export interface RequestClaims {
  role: 'anon' | 'authenticated' | 'service_role';
  sub?: string;
  [claim: string]: unknown;
}

export interface TransactionOptions<T = unknown> {
  readOnly?: boolean;
  statementTimeoutMs?: number;
  /** The request's W3C trace id: the transaction's application_name carries it (pool.ts tracedApplicationName). */
  traceId?: string;
  /**
   * The request's W3C traceparent (web/request-log.ts): set as the
   * transaction-local request.traceparent, which private.enqueue_job keeps
   * with the jobs the transaction queues.
   */
  traceparent?: string;
  /** The request's span context, when traces are exported: the transaction is a child span of it (core/process/tracing.ts). */
  traceContext?: Context;
  /**
   * Statements to send right before COMMIT, in the same round trip, once fn
   * has settled (e.g. storing an idempotent request's answer): they get fn's
   * result and return their queries, already executing. An error in any of
   * them rolls the whole transaction back and is thrown.
   */
  finish?: (tx: Tx, result: T) => Promise<unknown>[];
  /**
   * Read-write transactions with read replicas (core/database/replicas.ts):
   * called with the primary's WAL position right after the COMMIT (at or
   * past the commit's), its consistency token. The position is asked for in
   * the same round trip, pipelined behind the COMMIT (outside the
   * transaction), so it costs no extra wait.
   */
  onCommit?: (lsn: string) => void;
}

/**
 * withClaims bound to a request: runs `fn` as the request's caller, or with
 * the claims given (null: the gateway's own role), with the request's options
 * and any given. What a route's handler and the idempotency steps call.
 */
export type InTransaction = <T>(fn: (tx: Tx) => Promise<T>, claims?: RequestClaims | null, options?: TransactionOptions<T>) => Promise<T>;

const MAX_ATTEMPTS = 3;

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/**
 * request.jwt.claims as text. Frozen claims (a verified access token's, the
 * same object for every request that sends the token: auth/identity.ts) are
 * serialised once.
 */
const claimsText = new WeakMap<RequestClaims, string>();
function claimsJson(claims: RequestClaims): string {
  if (!Object.isFrozen(claims)) return JSON.stringify(claims);
  let text = claimsText.get(claims);
  if (text === undefined) {
    text = JSON.stringify(claims);
    claimsText.set(claims, text);
  }
  return text;
}

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

/** Where a measured (or traced) transaction's connection keeps the name of its operation while it runs. */
const OPERATION = Symbol('operation');
type Named = { [OPERATION]?: { name: string } };

/**
 * A call made inside a transaction's fn (an Idempotency-Key's transaction:
 * the claim, the route's call, the storing of the answer) names the
 * transaction's operation after its api function, as a handler's single
 * call does. Returns the call.
 */
export function namedCall<T>(tx: Tx, call: Promise<T>): Promise<T> {
  const operation = (tx as unknown as Named)[OPERATION];
  if (operation && operation.name === 'other' && isPendingQuery(call)) operation.name = operationOfQuery((call as { strings?: readonly string[] }).strings);
  return call;
}

function isPendingQuery(value: unknown): value is PendingQuery {
  return value instanceof Promise && typeof (value as { execute?: unknown }).execute === 'function';
}

/** What the client may be told about a transaction that did not finish (see the top of this file). */
interface Progress {
  /** Its COMMIT has been handed to the connection. */
  commitSent: boolean;
  /** Its outcome is known: the COMMIT was answered, or a statement before it failed with an error of the server. */
  settled: boolean;
  /** The request gave up on it (deadline): whatever comes later must not commit. */
  abandoned: boolean;
  /** The host said it takes no new writes (default_transaction_read_only = on, the first step of a switchover). */
  hostReadOnly: boolean;
}

/**
 * The pipeline's database step, measured once for every route (when metrics
 * are on, core/process/metrics.ts): connections held and waited for (plain
 * counts, read by the gauges at each scrape), the wait, and the
 * transaction's duration by the api function it called.
 */
const pool = { used: 0, pending: 0 };
readPoolWith(() => pool);

async function transaction<T>(sql: Sql, claims: RequestClaims | null, fn: (tx: Tx) => Promise<T>, options: TransactionOptions<T>): Promise<T> {
  const measured = metricsOn();
  if (!measured && !options.traceContext) return unmeasuredTransaction(sql, claims, fn, options);
  const started = performance.now();
  const operation = { name: 'other' };
  const span = startSqlSpan(options.traceContext);
  let errorType = '';
  try {
    return await unmeasuredTransaction(sql, claims, fn, options, operation);
  } catch (err) {
    const code = (err as { code?: unknown }).code;
    errorType = typeof code === 'string' && /^[0-9A-Z_]{1,32}$/.test(code) ? code : 'error';
    if (code === '57014' && measured) statementTimeouts.inc({ db_operation_name: operation.name });
    throw err;
  } finally {
    if (span) endSqlSpan(span, operation.name, errorType);
    if (measured) observeSql(operation.name, errorType, (performance.now() - started) / 1000);
  }
}

/** Takes a connection, counting the requests waiting for one and the connections held, and measuring the wait. */
function reserveMeasured(sql: Sql): Promise<postgres.ReservedSql> {
  const waiting = performance.now();
  pool.pending++;
  const taken = () => {
    pool.pending--;
    poolWait.observe((performance.now() - waiting) / 1000);
  };
  return sql.reserve().then(
    (tx) => {
      taken();
      pool.used++;
      return tx;
    },
    (err: unknown) => {
      taken();
      throw err;
    },
  );
}

async function unmeasuredTransaction<T>(
  sql: Sql,
  claims: RequestClaims | null,
  fn: (tx: Tx) => Promise<T>,
  options: TransactionOptions<T>,
  operation?: { name: string },
): Promise<T> {
  const timeoutMs = options.statementTimeoutMs ?? DEFAULT_STATEMENT_TIMEOUT_MS;
  const watch = watchOf(sql);
  if (watch && !watch.responsive) throw new DatabaseWaitError('the database does not answer');
  const progress: Progress = { commitSent: false, settled: false, abandoned: false, hostReadOnly: false };
  let cut: (err: Error) => void = () => {};
  const cutOff = new Promise<never>((_, reject) => (cut = reject));
  const op: WatchedOperation | undefined = watch?.enter(() => cut(new DatabaseWaitError('the database does not answer')));
  const work = (async () => {
    const counted = operation !== undefined && metricsOn();
    const tx = counted ? await reserveMeasured(sql) : await sql.reserve();
    if (progress.abandoned || (watch && !watch.responsive)) {
      // The request was answered while it waited, or the database stopped answering: give the connection back unused.
      tx.release();
      throw new DatabaseWaitError('the database does not answer');
    }
    op?.sent();
    try {
      const applicationName = options.traceId ? tracedApplicationName(sql, options.traceId) : null;
      return await run(tx, claims, publicUrlOf(sql), applicationName, fn, options, timeoutMs, progress, operation);
    } catch (err) {
      if (!options.readOnly && isReadOnlyRefusal(err)) {
        // This host no longer takes writes (a switchover): nothing was written, and the connection is dropped below.
        progress.hostReadOnly = true;
        throw new NotPrimaryError('the database host no longer takes writes', { cause: err });
      }
      throw err;
    } finally {
      // A connection on a host that takes no new writes (a write refused there, or any transaction there: the settings
      // statement says so) leaves it, when the pool follows the host that takes writes (target_session_attrs; a single
      // host, or a pooler's address, would only be connected to again): the next one finds the primary, and none is left
      // there to be cut when it stops (a write sent as it stops could not be told apart from a lost COMMIT).
      if (progress.hostReadOnly && followsWritable(sql)) await dropConnection(tx);
      if (counted) pool.used--;
      tx.release();
    }
  })();
  // One timer per request: no connection (postgres.js gives up connecting
  // after connect_timeout), or no answer on it, by the deadline.
  let timer: NodeJS.Timeout | undefined;
  const deadline = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new DatabaseWaitError(`no answer from the database within ${timeoutMs + DEADLINE_MARGIN_MS} ms`)), timeoutMs + DEADLINE_MARGIN_MS);
  });
  let answered = true;
  try {
    const result = await Promise.race([work, deadline, cutOff]);
    noteServed();
    return result;
  } catch (err) {
    // A refused or lost connection is no answer either: with waits piling up, the watch then probes.
    answered = !isDatabaseUnavailable(err);
    progress.abandoned = true;
    work.catch(() => {}); // it settles in the background
    if (err instanceof DatabaseWaitError && progress.commitSent && !progress.settled && !options.readOnly) {
      throw new OutcomeUnknownError(`the COMMIT was sent and no answer came within ${timeoutMs + DEADLINE_MARGIN_MS} ms: the change may have been saved`, { cause: err });
    }
    throw err;
  } finally {
    clearTimeout(timer);
    op?.done(answered);
  }
}

/**
 * SQLSTATE 25006 (read_only_sql_transaction) answered to a read-write
 * transaction: the host was made read-only (default_transaction_read_only,
 * a planned switchover) or is a standby now. The statement failed, so
 * nothing of the transaction was written.
 */
function isReadOnlyRefusal(err: unknown): boolean {
  return err instanceof postgres.PostgresError && err.code === '25006';
}

/**
 * Ends a pooled connection from the server's side (postgres.js offers no
 * way to close one reserved connection): the pool replaces it with a new
 * one, which target_session_attrs=read-write sends to the host that takes
 * writes (gateway/patches: a read-only host or a standby is passed over).
 * The transaction is over (rolled back) by then.
 */
async function dropConnection(tx: postgres.ReservedSql): Promise<void> {
  await tx`select pg_terminate_backend(pg_backend_pid())`.execute().catch(() => {});
}

/** An error the server sent (a statement's error, or FATAL before it closed the connection), not a connection that failed. */
const isServerError = (err: unknown): err is postgres.PostgresError => err instanceof postgres.PostgresError;

/**
 * The outcome of a transaction's last round trip: `outcomes` are its
 * statements in order, COMMIT last. Returns the values, or throws the first
 * error; OutcomeUnknownError when the COMMIT may have committed without its
 * answer reaching us (its own failure is the connection's, or FATAL, and no
 * statement before it failed with an error of the server).
 */
function commitOutcome(outcomes: PromiseSettledResult<unknown>[], progress: Progress, readOnly: boolean): unknown[] {
  const failed = outcomes.findIndex((o) => o.status === 'rejected');
  if (failed === -1) {
    progress.settled = true;
    return outcomes.map((o) => (o as PromiseFulfilledResult<unknown>).value);
  }
  const err = (outcomes[failed] as PromiseRejectedResult).reason;
  const isCommit = failed === outcomes.length - 1;
  // A statement the server refused: it ran nothing after it, COMMIT included.
  if (isServerError(err) && (!isCommit || err.severity !== 'FATAL')) {
    progress.settled = true;
    throw err;
  }
  if (readOnly) throw err;
  throw new OutcomeUnknownError('the connection failed after the COMMIT was sent: the change may have been saved', { cause: err });
}

/** BEGIN, the settings, fn's queries, the finishing statements and COMMIT on the reserved connection; the first error is thrown. */
async function run<T>(
  tx: postgres.ReservedSql,
  claims: RequestClaims | null,
  publicUrl: string,
  applicationName: string | null,
  fn: (tx: Tx) => Promise<T>,
  options: TransactionOptions<T>,
  timeoutMs: number,
  progress: Progress,
  operation?: { name: string },
): Promise<T> {
  const settle = async (pending: Promise<unknown>[]): Promise<unknown[]> => {
    const outcomes = await Promise.allSettled(pending);
    const failed = outcomes.find((o): o is PromiseRejectedResult => o.status === 'rejected');
    if (failed) throw failed.reason;
    return outcomes.map((o) => (o as PromiseFulfilledResult<unknown>).value);
  };
  const traceparent = options.traceparent ?? null;
  const begin = tx.unsafe(options.readOnly ? 'begin read only' : 'begin').execute();
  const settings = (
    claims
      ? tx`
    select set_config('role', ${claims.role}, true),
           set_config('request.jwt.claims', ${claimsJson(claims)}, true),
           set_config('statement_timeout', ${String(timeoutMs)}, true),
           set_config('request.public_url', ${publicUrl}, true),
           case when ${applicationName}::text is not null then set_config('application_name', ${applicationName}::text, true) end,
           case when ${traceparent}::text is not null then set_config('request.traceparent', ${traceparent}::text, true) end,
           private.check_session(${sessionOf(claims)}::uuid),
           current_setting('default_transaction_read_only') = 'on' as host_read_only`
      : tx`select set_config('statement_timeout', ${String(timeoutMs)}, true), set_config('request.public_url', ${publicUrl}, true),
                  case when ${applicationName}::text is not null then set_config('application_name', ${applicationName}::text, true) end,
                  case when ${traceparent}::text is not null then set_config('request.traceparent', ${traceparent}::text, true) end,
                  current_setting('default_transaction_read_only') = 'on' as host_read_only`
  ).execute();
  // The host's default_transaction_read_only, as of this transaction: on, it takes no new writes (a switchover's first step).
  settings.then(
    (rows) => {
      if ((rows as unknown as { host_read_only?: boolean }[])[0]?.host_read_only) progress.hostReadOnly = true;
    },
    () => {},
  );
  if (operation) (tx as unknown as Named)[OPERATION] = operation;
  let body: Promise<T>;
  try {
    body = fn(tx as unknown as Tx);
  } catch (err) {
    body = Promise.reject(err);
  }
  const readOnly = options.readOnly ?? false;
  if (operation && isPendingQuery(body)) operation.name = operationOfQuery((body as { strings?: readonly string[] }).strings);
  if (isPendingQuery(body) && !options.finish) {
    // One statement: COMMIT goes out right behind it.
    body.execute();
    const commit = tx`commit`.execute();
    progress.commitSent = true;
    const position = commitPosition(tx, readOnly, options);
    const [, , result] = commitOutcome(await Promise.allSettled([begin, settings, body, commit]), progress, readOnly);
    await tellPosition(position, options);
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
  if (progress.abandoned) {
    // The request was answered (its deadline passed) while the first round
    // trip was on its way: what it did must not be committed now.
    await settle([tx`rollback`.execute()]).catch(() => {});
    throw new DatabaseWaitError('the request was answered before its transaction could commit');
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
  const commit = tx`commit`.execute();
  progress.commitSent = true;
  const position = commitPosition(tx, readOnly, options);
  commitOutcome(await Promise.allSettled([...finals, commit]), progress, readOnly);
  await tellPosition(position, options);
  return result;
}

/**
 * The WAL position after a read-write transaction's COMMIT (for
 * options.onCommit), asked for right behind the COMMIT on the same
 * connection. Never fails: a position that does not come back is no token.
 */
function commitPosition(tx: postgres.ReservedSql, readOnly: boolean, options: { onCommit?: unknown }): Promise<string | null> | null {
  if (readOnly || !options.onCommit) return null;
  return tx<{ lsn: string }[]>`select pg_current_wal_lsn()::text as lsn`.execute().then(
    ([row]) => row?.lsn ?? null,
    () => null,
  );
}

/** Hands a committed transaction's position to options.onCommit (a failed COMMIT threw before: no token). */
async function tellPosition(position: Promise<string | null> | null, options: { onCommit?: (lsn: string) => void }): Promise<void> {
  if (!position || !options.onCommit) return;
  const lsn = await position;
  if (lsn !== null) options.onCommit(lsn);
}

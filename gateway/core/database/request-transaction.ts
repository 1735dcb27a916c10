// A request's transaction, for every door that runs a caller's call (the REST
// routes, gateway/http/route.ts; the MCP tools, mcp-server/protocol.ts):
// where it runs and how it is opened, written once.
//
//   where  without read replicas, the primary. With them
//          (core/database/replicas.ts), a read-only transaction runs on a
//          replica that has the caller's writes (the consistency token the
//          client sent, the newest write of its reader through this process,
//          and what was committed before its access token was issued), else
//          on the primary; a read-write one runs on the primary, and the
//          position of its commit is noted for its reader and handed to
//          onToken, the consistency token the client may send back.
//   how    withClaims (transaction.ts): as the caller (or the claims a call
//          gives), read-only when the request is, with the statement timeout
//          and the request's trace.
import type { Context as TraceContext } from '@opentelemetry/api';
import type { Sql } from './pool.ts';
import { readerOf, type Replicas } from './replicas.ts';
import { withClaims, type InTransaction, type RequestClaims } from './transaction.ts';

/** What is fixed for one request's transactions. */
export interface RequestScope {
  /** The primary's pool. */
  sql: Sql;
  /** Read replicas (DATABASE_REPLICA_URLS); absent: everything runs on the primary. */
  replicas?: Replicas;
  /** The caller's claims (anon's on a public route). */
  claims: RequestClaims;
  /** The request only reads (a GET, a read tool): with replicas it may run on one. */
  readOnly: boolean;
  statementTimeoutMs: number;
  /** The request's W3C trace id, traceparent and span context (core/database/transaction.ts). */
  traceId?: string;
  traceparent?: string;
  traceContext?: TraceContext;
  /** The consistency token the client sent (REST: X-Consistency-Token), if any. */
  consistencyToken?: unknown;
  /** A read-write transaction committed: its consistency token, to answer. */
  onToken?: (token: string) => void;
}

/**
 * The request's transactions: each call runs `fn` in one transaction as
 * the caller (or the claims given; null: the gateway's own role), on the
 * pool chosen above. `{ readOnly: false }` makes a call of a read-only
 * request write, on the primary.
 */
export function requestTransaction(scope: RequestScope): InTransaction {
  const { sql, replicas, claims, readOnly } = scope;
  const reader = replicas ? readerOf(claims) : null;
  // An access token's iat is in whole seconds, and it was signed after what its sign-in committed.
  const iat = (claims as { iat?: unknown }).iat;
  const issuedAt = typeof iat === 'number' ? (iat + 1) * 1000 : undefined;
  const onCommit =
    replicas && !readOnly
      ? (lsn: string) => {
          const token = replicas.noteCommit(reader, lsn);
          if (token !== null) scope.onToken?.(token);
        }
      : undefined;
  return (fn, asClaims, options) => {
    const on = (pool: Sql) =>
      withClaims(pool, asClaims === undefined ? claims : asClaims, fn, {
        readOnly,
        statementTimeoutMs: scope.statementTimeoutMs,
        traceId: scope.traceId,
        traceparent: scope.traceparent,
        traceContext: scope.traceContext,
        ...(onCommit ? { onCommit } : {}),
        ...options,
      });
    return replicas && readOnly && options?.readOnly !== false
      ? replicas.read(sql, replicas.needOf(scope.consistencyToken, reader, issuedAt), on)
      : on(sql);
  };
}

// Database access shared by the gateway and the MCP server.
//
// Every request runs in one transaction that first sets the request role and
// the JWT claims (transaction-local, so nothing leaks to the next user of the
// pooled connection), then calls one SQL function, then commits; any error
// rolls the whole transaction back.
import postgres from 'postgres';
import { isRetryable } from './errors.ts';

export type Sql = postgres.Sql;
export type Tx = postgres.TransactionSql;

export interface PoolOptions {
  max: number;
  applicationName: string;
}

export function createPool(url: string, options: PoolOptions): Sql {
  return postgres(url, {
    max: options.max,
    idle_timeout: 60,
    connect_timeout: 10,
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
  const mode = options.readOnly ? 'read only' : 'read write';
  const timeout = String(options.statementTimeoutMs ?? 15_000);
  for (let attempt = 1; ; attempt++) {
    try {
      const result = await sql.begin(mode, async (tx) => {
        await tx`
          select set_config('role', ${claims.role}, true),
                 set_config('request.jwt.claims', ${JSON.stringify(claims)}, true),
                 set_config('statement_timeout', ${timeout}, true),
                 private.check_session(${sessionOf(claims)}::uuid)`;
        return fn(tx);
      });
      return result as T;
    } catch (err) {
      if (attempt < MAX_ATTEMPTS && isRetryable(err)) continue;
      throw err;
    }
  }
}

// One clear line for a process that cannot start (npm start, npm run admin,
// npm run db): what is wrong and what to do, never a stack trace.
import postgres from 'postgres';

const CONNECTION_CODES: Record<string, string> = {
  ECONNREFUSED: 'connection refused',
  ENOTFOUND: 'host not found',
  EAI_AGAIN: 'host not found',
  ETIMEDOUT: 'connection timed out',
  CONNECT_TIMEOUT: 'connection timed out',
  ECONNRESET: 'connection reset',
  EHOSTUNREACH: 'host unreachable',
};

/** A problem the operator must fix, whose message says what is wrong and what to do (configuration, the embedded Postgres). */
export class StartupProblem extends Error {}

export function startupMessage(err: unknown): string {
  if (err instanceof StartupProblem) return err.message;
  const e = err as { code?: unknown; message?: unknown; port?: unknown; address?: unknown; syscall?: unknown } | null;
  const code = typeof e?.code === 'string' ? e.code : '';
  if (err instanceof postgres.PostgresError) {
    if (code === '28P01' || code === '28000') return `the database refused the credentials (${err.message}): check DATABASE_URL`;
    if (code === '3D000') return `${err.message}: create it, or fix the database name in DATABASE_URL`;
    return `database error while starting (${code}: ${err.message}): check DATABASE_URL and the migrations`;
  }
  // 'bind': in a WEB_CONCURRENCY worker the primary binds the shared port and reports the error.
  if (code === 'EADDRINUSE' && (e?.syscall === 'listen' || e?.syscall === 'bind')) {
    return `port ${String(e.port)} is already in use: set PORT to a free port, or stop what uses it`;
  }
  if (code === 'EACCES' && (e?.syscall === 'listen' || e?.syscall === 'bind')) {
    return `no permission to listen on port ${String(e.port)}: set PORT to a port above 1023`;
  }
  if (CONNECTION_CODES[code]) {
    return `cannot reach the database (${CONNECTION_CODES[code]}): is it running? check DATABASE_URL`;
  }
  const message = typeof e?.message === 'string' && e.message ? e.message.split('\n')[0]! : String(err);
  return code ? `${message} (${code})` : message;
}

// `npm run admin -- sql`: a psql shell on the database the service uses
// (DATABASE_URL, or the embedded cluster). The embedded Postgres ships no psql;
// Debian's psql 15 (postgresql-client-15) works as a shell against the
// embedded Postgres 18 too (only its \d commands may miss newer catalog
// details). The password goes through the environment, not the command line.
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import { pg15Program } from './pg15.ts';
import { databaseHosts, queryParam, withHost } from '../core/process/database-url.ts';

export function findPsql(): string | null {
  const fromPath = (process.env.PATH ?? '').split(':').map((dir) => `${dir}/psql`).find((file) => fs.existsSync(file));
  return process.env.PSQL ?? pg15Program('psql') ?? fromPath ?? null;
}

/** Runs psql (interactive, or with the given arguments such as -c) and returns its exit code. */
export function runPsql(databaseUrl: string, args: string[]): number {
  const psql = findPsql();
  if (!psql) {
    console.error('psql not found: apt-get install postgresql-client-15 (or set PSQL=/path/to/psql)');
    return 1;
  }
  // A DATABASE_URL may name several hosts (not a WHATWG URL): libpq takes them as lists, and target_session_attrs.
  const hosts = databaseHosts(databaseUrl);
  const url = new URL(hosts[0] ? withHost(databaseUrl, hosts[0]) : databaseUrl);
  const targetSessionAttrs = queryParam(databaseUrl, 'target_session_attrs');
  const env: NodeJS.ProcessEnv = {
    ...process.env,
    PGHOST: hosts.map((h) => h.host).join(',') || url.hostname,
    PGPORT: hosts.map((h) => String(h.port)).join(',') || url.port || '5432',
    ...(targetSessionAttrs ? { PGTARGETSESSIONATTRS: targetSessionAttrs } : {}),
    PGUSER: decodeURIComponent(url.username),
    PGDATABASE: decodeURIComponent(url.pathname.slice(1)),
    PGAPPNAME: 'admin-sql',
  };
  if (url.password) env.PGPASSWORD = decodeURIComponent(url.password);
  const sslmode = url.searchParams.get('sslmode');
  if (sslmode) env.PGSSLMODE = sslmode;
  const result = spawnSync(psql, args, { stdio: 'inherit', env });
  return result.status ?? 1;
}

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
  const result = spawnSync(psql, args, { stdio: 'inherit', env: libpqEnvironment(databaseUrl, 'admin-sql') });
  return result.status ?? 1;
}

/**
 * The environment a libpq program (psql, pg_dump, pg_restore) connects to a
 * database URL with: a DATABASE_URL may name several hosts (not a WHATWG
 * URL), which libpq takes as lists, with target_session_attrs; the password
 * goes through the environment, never the command line.
 */
export function libpqEnvironment(databaseUrl: string, applicationName: string): NodeJS.ProcessEnv {
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
    PGAPPNAME: applicationName,
  };
  if (url.password) env.PGPASSWORD = decodeURIComponent(url.password);
  const sslmode = url.searchParams.get('sslmode');
  if (sslmode) env.PGSSLMODE = sslmode;
  return env;
}

/**
 * pg_dump or pg_restore, of major version `atLeast` or newer (a pg_dump
 * older than the server refuses it): PG_DUMP / PG_RESTORE, else the one on
 * PATH, else the newest of Debian's /usr/lib/postgresql/<major>/bin. Throws,
 * saying what to install, when there is none new enough.
 */
export function findClientProgram(name: 'pg_dump' | 'pg_restore', atLeast: number): string {
  const given = process.env[name.toUpperCase()];
  const debian = fs.existsSync('/usr/lib/postgresql')
    ? fs
        .readdirSync('/usr/lib/postgresql')
        .filter((v) => /^\d+$/.test(v))
        .sort((a, b) => Number(b) - Number(a))
        .map((v) => `/usr/lib/postgresql/${v}/bin/${name}`)
    : [];
  const onPath = (process.env.PATH ?? '').split(':').map((dir) => `${dir}/${name}`);
  const candidates = [...new Set(given ? [given] : [...onPath, ...debian])].filter((file) => fs.existsSync(file));
  const versions = candidates.map((file) => ({ file, major: majorVersionOf(file) }));
  const fit = versions.find((v) => v.major !== null && v.major >= atLeast);
  if (fit) return fit.file;
  const found = versions.map((v) => `${v.file} (${v.major ?? '?'})`).join(', ') || 'none';
  throw new Error(
    `${name} ${atLeast} or newer is needed for this PostgreSQL ${atLeast} server (found: ${found}): apt-get install postgresql-client-${atLeast}, or set ${name.toUpperCase()}=/path/to/${name}`,
  );
}

/** The major version a PostgreSQL program says it is (`pg_dump (PostgreSQL) 15.10`), or null. */
function majorVersionOf(file: string): number | null {
  const out = spawnSync(file, ['--version'], { encoding: 'utf8' }).stdout ?? '';
  const match = /\(PostgreSQL\) (\d+)/.exec(out);
  return match ? Number(match[1]) : null;
}

// A throwaway Debian PostgreSQL 15 cluster (temporary folder, random port),
// for the tools that need PG15's client programs: `pg_dump` 15 refuses to dump
// a newer server, and the embedded Postgres ships no `pg_dump` or `psql`.
// As root, Postgres refuses to run, so the server runs as the `postgres` OS
// user (as .ci/run does); the client programs run as whoever we are.
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { freePort } from '../core/process/free-port.ts';
import { postgresUser } from '../core/process/postgres-binaries.ts';

export const PG15_BIN = process.env.PG15_BIN ?? '/usr/lib/postgresql/15/bin';

/** Path of a PostgreSQL 15 program, or null when the binaries are not installed. */
export function pg15Program(name: 'pg_dump' | 'psql' | 'initdb' | 'pg_ctl' | 'postgres'): string | null {
  const file = path.join(PG15_BIN, name);
  return fs.existsSync(file) ? file : null;
}

export interface ThrowawayCluster {
  url(database: string): string;
  stop(): void;
}


/** Runs a server program (initdb, pg_ctl, ...), as the `postgres` OS user when we are root; returns its output. */
export function runAsPostgres(program: string, args: string[]): string {
  const quoted = [program, ...args].map((a) => `'${a.replaceAll("'", `'\\''`)}'`).join(' ');
  const result =
    process.getuid?.() === 0
      ? spawnSync('su', ['postgres', '-s', '/bin/sh', '-c', quoted], { encoding: 'utf8' })
      : spawnSync(program, args, { encoding: 'utf8' });
  if (result.status !== 0) {
    throw new Error(`${path.basename(program)} failed: ${result.stderr || result.stdout || result.error?.message}`);
  }
  return result.stdout;
}

export async function startThrowawayPg15(): Promise<ThrowawayCluster> {
  const initdb = pg15Program('initdb');
  const pgCtl = pg15Program('pg_ctl');
  if (!initdb || !pgCtl) {
    throw new Error(`PostgreSQL 15 is not installed (no ${PG15_BIN}/initdb): apt-get install postgresql-15`);
  }
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'pg15-'));
  fs.chmodSync(dir, 0o755);
  const owner = postgresUser();
  if (owner) fs.chownSync(dir, owner.uid, owner.gid);
  const data = path.join(dir, 'data');
  const port = await freePort();
  try {
    runAsPostgres(initdb, ['-D', data, '-U', 'postgres', '--auth=trust', '-E', 'UTF8', '--locale=C', '--no-sync']);
    runAsPostgres(pgCtl, [
      '-D', data, '-l', path.join(dir, 'server.log'), '-w', 'start',
      '-o', `-p ${port} -c listen_addresses=127.0.0.1 -c unix_socket_directories=${dir} -c fsync=off`,
    ]);
  } catch (err) {
    fs.rmSync(dir, { recursive: true, force: true });
    throw err;
  }
  return {
    url: (database) => `postgres://postgres@127.0.0.1:${port}/${encodeURIComponent(database)}`,
    stop() {
      try {
        runAsPostgres(pgCtl, ['-D', data, '-m', 'immediate', '-w', 'stop']);
      } finally {
        fs.rmSync(dir, { recursive: true, force: true });
      }
    },
  };
}

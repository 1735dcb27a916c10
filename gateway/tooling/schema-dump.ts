// Schema dumps with PostgreSQL 15's pg_dump (schema only, no owners, grants
// kept: they are part of the security model), without the schemas of
// graphile-migrate and graphile-worker (theirs, not the application's) and
// without the lines that vary from run to run. `npm run db -- areas --check`
// compares two of them (areas.ts); `npm run db -- dump` writes one to
// sql/schema.sql, the whole schema in one file: build output made on demand
// and git-ignored (the area files, sql/areas, are what people read and
// review).
//
// pg_dump 15 refuses newer servers and the embedded Postgres ships no
// pg_dump, so dumps are made on a throwaway Debian PostgreSQL 15 cluster
// (pg15.ts).
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { projectRoot } from '../core/process/config.ts';
import { ensureDatabase } from '../core/process/embedded-postgres.ts';
import type { Logger } from '../core/process/log.ts';
import { runMigrations } from '../core/database/migrate.ts';
import { pg15Program, startThrowawayPg15 } from './pg15.ts';

export const SCHEMA_FILE = path.join(projectRoot(), 'sql', 'schema.sql');

const HEADER = `-- The database schema the migrations produce (sql/migrations: committed and current/).
-- Build output of \`npm run db -- dump\`, not kept in git: the source is sql/areas.
-- Find a function: search for "FUNCTION schema.name(".
`;

/**
 * Drops what varies between runs or says nothing about the schema, and sorts
 * the grants of each object (pg_dump writes them in the order they were
 * given, which says nothing either).
 */
export function normalizeDump(raw: string): string {
  const kept = raw
    .split('\n')
    .filter(
      (line) =>
        !/^-- Dumped (from|by) /.test(line) &&
        // pg_dump >= 15.14 guards the script with a random key.
        !/^\\(un)?restrict /.test(line) &&
        !/^SET [a-z_]+ = /.test(line) &&
        !/^SELECT pg_catalog\.set_config\('search_path'/.test(line),
    )
    .join('\n');
  const text = kept
    .replace(/^--\n-- PostgreSQL database dump( complete)?\n--\n/gm, '')
    .replace(/; Owner: -$/gm, '')
    .replace(/\n{3,}/g, '\n\n')
    .trim();
  // Each entry: "--\n-- Name: ...; Type: ACL; Schema: ...\n--\n\nGRANT ...;\nGRANT ...;"
  const sorted = text
    .split(/\n\n(?=--\n-- Name: )/)
    .map((entry) => {
      if (!/^--\n-- Name: [^\n]*; Type: ACL;/.test(entry)) return entry;
      const [head, body = ''] = entry.split(/\n--\n\n/);
      return `${head}\n--\n\n${body.split('\n').sort().join('\n')}`;
    })
    .join('\n\n');
  return `${HEADER}${sorted}\n`;
}

/** The normalized schema dump of a database of a PostgreSQL 15 server. */
export function dumpDatabase(url: string): string {
  const pgDump = pg15Program('pg_dump');
  if (!pgDump) throw new Error('pg_dump 15 not found (apt-get install postgresql-15, or set PG15_BIN)');
  const result = spawnSync(
    pgDump,
    ['--schema-only', '--no-owner', '--exclude-schema=graphile_migrate', '--exclude-schema=graphile_worker', url],
    { encoding: 'utf8', maxBuffer: 64 * 1024 * 1024 },
  );
  if (result.status !== 0) throw new Error(`pg_dump failed: ${result.stderr}`);
  return normalizeDump(result.stdout);
}

/** A unified diff from text `a` to text `b` (empty when they are the same). */
export function unifiedDiff(a: string, b: string, labelA: string, labelB: string): string {
  if (a === b) return '';
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'schema-diff-'));
  try {
    fs.writeFileSync(path.join(dir, 'a.sql'), a);
    fs.writeFileSync(path.join(dir, 'b.sql'), b);
    const diff = spawnSync('diff', ['-u', '--label', labelA, '--label', labelB, path.join(dir, 'a.sql'), path.join(dir, 'b.sql')], {
      encoding: 'utf8',
      maxBuffer: 64 * 1024 * 1024,
    });
    return diff.stdout;
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

/** Migrates a database of a throwaway PG15 cluster (committed migrations and current/) and dumps it. */
export async function dumpSchema(log: Logger): Promise<string> {
  const cluster = await startThrowawayPg15();
  try {
    const url = cluster.url('schema_dump');
    await ensureDatabase(cluster.url('postgres'), 'schema_dump');
    await runMigrations(url, log, { includeCurrent: true });
    return dumpDatabase(url);
  } finally {
    cluster.stop();
  }
}

/** `npm run db -- dump [FILE]`: writes the schema dump (sql/schema.sql unless a file is named); returns the exit code. */
export async function runDumpCommand(log: Logger, args: string[]): Promise<number> {
  if (args.includes('--help')) {
    console.log(
      'Usage: npm run db -- dump [FILE]\n\nWrites the whole schema the migrations make (committed and current/) to FILE,\nsql/schema.sql by default (git-ignored build output; needs PostgreSQL 15 binaries).',
    );
    return 0;
  }
  const file = args.find((a) => !a.startsWith('-')) ?? SCHEMA_FILE;
  try {
    fs.writeFileSync(file, await dumpSchema(log));
    console.log(`wrote ${path.relative(process.cwd(), file) || file}`);
    return 0;
  } catch (err) {
    console.error(`error: ${(err as Error).message}`);
    return 1;
  }
}

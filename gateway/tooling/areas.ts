// The rules by area (`npm run db -- areas`): sql/areas/<area>.sql are the
// declarative source of the schema (areas-build.ts builds a database from
// them); the migrations stay the history that changes a live database. Both
// run on a throwaway PostgreSQL 15 cluster (pg15.ts), whose pg_dump compares
// them (schema-dump.ts).
//
//   --check  the database the migrations make (committed and current/) and the
//            one the area files make do not differ: their schema dumps are
//            the same, or the diff is printed
//   --diff   writes sql/migrations/current/900-areas.sql, the migration from
//            the migrated database to the area files' schema, planned by
//            pg-delta (@supabase/pg-delta), then proves it: applied to a copy
//            of the migrated database, the dumps must not differ
//
// docs/decisions.md says why pg_dump and pg-delta (and not @pgkit/migra).
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import { createRequire } from 'node:module';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import postgres from 'postgres';
import type { Logger } from '../core/process/log.ts';
import { MIGRATIONS_FOLDER, runMigrations } from '../core/database/migrate.ts';
import { ensureDatabase } from '../core/process/embedded-postgres.ts';
import { buildFromAreas, loadAreaMap, readAreaFiles, statementsOf, type AreaFile } from './areas-build.ts';
import { startThrowawayPg15, type ThrowawayCluster } from './pg15.ts';
import { dumpDatabase, unifiedDiff } from './schema-dump.ts';

/** The migration `--diff` writes (after the hand-written changes of current/, numbered below it). */
export const DIFF_FILE = '900-areas.sql';
/** The first line of every migration `--diff` made (earlier versions wrote one file per area, 9NN-<area>.sql). */
export const DIFF_MARKER = '-- Made by `npm run db -- areas --diff`';
/** pg-delta's profile: what it manages (everything but graphile-migrate's and graphile-worker's schemas). */
export const PG_DELTA_PROFILE = path.join(path.dirname(fileURLToPath(import.meta.url)), 'pg-delta-profile.json');
const MIGRATIONS_LABEL = 'the migrations (sql/migrations: committed and current/)';
const AREAS_LABEL = 'the area files (sql/areas)';

/** The files of current/ that `--diff` made. */
export function diffMigrations(folder = path.join(MIGRATIONS_FOLDER, 'current')): string[] {
  if (!fs.existsSync(folder)) return [];
  return fs.readdirSync(folder).filter((f) => f.endsWith('.sql') && fs.readFileSync(path.join(folder, f), 'utf8').startsWith(DIFF_MARKER));
}

/** A new database of the cluster, migrated with the committed migrations and current/ (less `withoutCurrent`). */
export async function migratedDatabase(cluster: ThrowawayCluster, name: string, log: Logger, withoutCurrent: string[] = []): Promise<string> {
  const url = cluster.url(name);
  await ensureDatabase(cluster.url('postgres'), name);
  let folder: string | undefined;
  try {
    if (withoutCurrent.length > 0) {
      folder = fs.mkdtempSync(path.join(os.tmpdir(), 'areas-migrations-'));
      fs.cpSync(path.join(MIGRATIONS_FOLDER, 'committed'), path.join(folder, 'committed'), { recursive: true, dereference: true });
      fs.mkdirSync(path.join(folder, 'current'));
      for (const f of fs.readdirSync(path.join(MIGRATIONS_FOLDER, 'current'))) {
        if (!withoutCurrent.includes(f)) fs.copyFileSync(path.join(MIGRATIONS_FOLDER, 'current', f), path.join(folder, 'current', f));
      }
    }
    await runMigrations(url, log, { includeCurrent: true, migrationsFolder: folder });
  } finally {
    if (folder) fs.rmSync(folder, { recursive: true, force: true });
  }
  return url;
}

/** A new database of the cluster, built from the area files. */
export async function builtDatabase(cluster: ThrowawayCluster, name: string, log: Logger, files: AreaFile[]): Promise<string> {
  const url = cluster.url(name);
  await ensureDatabase(cluster.url('postgres'), name);
  await buildFromAreas(url, log, files);
  return url;
}

/** The diff from the migrated database's schema to the built one's (empty: they do not differ). */
export function schemaDiff(migratedUrl: string, builtUrl: string): string {
  return unifiedDiff(dumpDatabase(migratedUrl), dumpDatabase(builtUrl), MIGRATIONS_LABEL, AREAS_LABEL);
}

export async function withThrowawayCluster<T>(fn: (cluster: ThrowawayCluster) => Promise<T>): Promise<T> {
  const cluster = await startThrowawayPg15();
  try {
    return await fn(cluster);
  } finally {
    cluster.stop();
  }
}

// ---------------------------------------------------------------------------
// --diff

/** pg-delta's command line (its package's bin), run with this Node. */
function pgDelta(args: string[]): { status: number | null; stdout: string; stderr: string } {
  const cli = path.join(path.dirname(createRequire(import.meta.url).resolve('@supabase/pg-delta')), 'cli', 'main.js');
  const result = spawnSync(process.execPath, [cli, ...args], { encoding: 'utf8', maxBuffer: 64 * 1024 * 1024 });
  return { status: result.status, stdout: result.stdout, stderr: result.stderr };
}

/**
 * The statements pg-delta plans from `sourceUrl` to `desiredUrl`, without
 * those that name the role that ran the build (`owner`): ownership follows
 * whoever runs the migration, as in every hand-written one. Null: no change.
 * `extra`: arguments for `pgdelta plan` (`--accept-rename FROM=TO`).
 */
export async function planMigration(sourceUrl: string, desiredUrl: string, owner: string, extra: string[] = []): Promise<{ statements: string[] | null; notes: string }> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'areas-plan-'));
  try {
    const plan = pgDelta(['plan', '--source', sourceUrl, '--desired', desiredUrl, '--profile', PG_DELTA_PROFILE, '--out', path.join(dir, 'plan.json'), ...extra]);
    // Its warnings about graphile-worker's objects it does not manage say nothing here.
    const notes = `${plan.stdout}\n${plan.stderr}`.split('\n').filter((l) => l.trim() !== '' && !/WARNING \[dangling_edge\]/.test(l)).join('\n');
    if (plan.status !== 0 && plan.status !== 1) throw new Error(`pgdelta plan failed:\n${notes}`);
    if (/actions:\s+0\b/.test(notes)) return { statements: null, notes };
    const render = pgDelta(['render', '--plan', path.join(dir, 'plan.json'), '--out', path.join(dir, 'migration.sql'), '--allow-drops']);
    if (render.stdout.includes('"changes":false')) return { statements: null, notes };
    if (render.status !== 0) throw new Error(`pgdelta render failed:\n${render.stdout}${render.stderr}`);
    const named = (s: string) => new RegExp(`^(ALTER [A-Z ]+ .* OWNER TO|GRANT .* TO|REVOKE .* FROM) "${owner.replaceAll('"', '""').replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}"$`).test(s);
    const statements: string[] = [];
    for (const { sql: text } of await statementsOf('migration', fs.readFileSync(path.join(dir, 'migration.sql'), 'utf8'))) {
      const statement = text.trim();
      if (named(statement)) continue;
      statements.push(`${statement};`);
      statements.push(...(await columnGrantsAfter(statement, desiredUrl)));
    }
    return { statements, notes };
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

/**
 * pg-delta (1.0.0-alpha.34) takes a table privilege back with `REVOKE ALL ON
 * TABLE t FROM r` and grants again what stays; PostgreSQL's REVOKE on a table
 * takes r's column privileges on it too, which pg-delta does not grant again.
 * So after each such statement, r's column privileges on t in the desired
 * database are granted again (the proof caught it: docs/decisions.md).
 */
async function columnGrantsAfter(statement: string, desiredUrl: string): Promise<string[]> {
  const m = /^REVOKE ALL ON TABLE "((?:[^"]|"")+)"\."((?:[^"]|"")+)" FROM "((?:[^"]|"")+)"$/.exec(statement);
  if (!m) return [];
  const name = (quoted: string) => quoted.replaceAll('""', '"');
  const [schema, table, role] = [name(m[1]!), name(m[2]!), name(m[3]!)];
  const sql = postgres(desiredUrl, { max: 1, onnotice: () => {} });
  try {
    const rows = await sql<{ statement: string }[]>`
      select format('GRANT %s ON TABLE %I.%I TO %I;', string_agg(format('%s (%I)', x.privilege_type, a.attname), ', ' order by a.attnum, x.privilege_type),
                    n.nspname, c.relname, r.rolname) as statement
        from pg_attribute a join pg_class c on c.oid = a.attrelid join pg_namespace n on n.oid = c.relnamespace
        cross join lateral aclexplode(a.attacl) x join pg_roles r on r.oid = x.grantee
       where n.nspname = ${schema} and c.relname = ${table} and r.rolname = ${role} and a.attnum > 0 and not a.attisdropped
       group by n.nspname, c.relname, r.rolname`;
    return rows.map((r) => r.statement);
  } finally {
    await sql.end({ timeout: 5 });
  }
}

/** The migration file `--diff` writes. */
export function renderMigration(statements: string[]): string {
  return [
    `${DIFF_MARKER} from sql/areas: the statements that make the`,
    '-- migrated database what the area files state, planned by pg-delta. Each run',
    '-- writes it again: edit the area files, not this one. Data changes go in a',
    `-- file of this folder numbered below ${DIFF_FILE.split('-')[0]} (docs/dba.md, "Changing a rule").`,
    '',
    statements.join('\n\n'),
    '',
  ].join('\n');
}

/** Applies a migration's text to a database in one transaction. */
async function applyMigration(url: string, text: string): Promise<void> {
  const sql = postgres(url, { max: 1, onnotice: () => {} });
  try {
    await sql.begin((tx) => tx.unsafe(text));
  } finally {
    await sql.end({ timeout: 5 });
  }
}

async function currentUser(url: string): Promise<string> {
  const sql = postgres(url, { max: 1, onnotice: () => {} });
  try {
    return (await sql<{ u: string }[]>`select current_user as u`)[0]!.u;
  } finally {
    await sql.end({ timeout: 5 });
  }
}

/**
 * `--diff`: plans the migration from the database the migrations make
 * (without the files an earlier `--diff` wrote) to the one the area files
 * make, and proves it on a copy. Returns the migration's text (null: the
 * area files state what the migrations make) and, when the proof fails, the
 * diff that remains.
 */
export async function diffAreas(cluster: ThrowawayCluster, log: Logger, files: AreaFile[], extra: string[] = []): Promise<{ migration: string | null; residue: string; notes: string }> {
  const source = await migratedDatabase(cluster, 'areas_source', log, diffMigrations());
  const desired = await builtDatabase(cluster, 'areas_desired', log, files);
  const { statements, notes } = await planMigration(source, desired, await currentUser(desired), extra);
  if (!statements) return { migration: null, residue: '', notes };
  const migration = renderMigration(statements);
  const copy = cluster.url('areas_proof');
  const admin = postgres(cluster.url('postgres'), { max: 1, onnotice: () => {} });
  try {
    await admin.unsafe('create database areas_proof template areas_source');
  } finally {
    await admin.end({ timeout: 5 });
  }
  let residue: string;
  try {
    await applyMigration(copy, migration);
    residue = schemaDiff(copy, desired);
  } catch (err) {
    residue = `the migration does not apply: ${(err as Error).message}`;
  }
  return { migration, residue, notes };
}

// ---------------------------------------------------------------------------
// The command

const HELP = `Usage: npm run db -- areas --check | --diff [--accept-rename FROM=TO ...]

The rules by area: sql/areas/<area>.sql, applied in the order of
sql/areas/areas.json, are the declarative source of the schema. Both commands
work on a throwaway PostgreSQL 15 cluster (apt-get install postgresql-15).

  --check  fail, with the diff of the two schema dumps, when the database the
           migrations make (committed and current/) and the one the area files
           make differ
  --diff   write sql/migrations/current/${DIFF_FILE}: the migration from the
           migrated database (without the files an earlier --diff wrote) to
           the area files, planned by pg-delta and proved on a copy. pg-delta
           asks before it renames (a column, a table): repeat with
           --accept-rename as it says, or the old one is dropped`;

/** `npm run db -- areas ...`; returns the exit code. */
export async function runAreasCommand(log: Logger, args: string[]): Promise<number> {
  const mode = args.find((a) => ['--check', '--diff'].includes(a));
  if (args.includes('--help') || !mode) {
    console.log(HELP);
    return args.includes('--help') ? 0 : 1;
  }
  const map = loadAreaMap();
  const files = readAreaFiles(map);
  if (mode === '--check') {
    const diff = await withThrowawayCluster(async (cluster) => {
      const migrated = await migratedDatabase(cluster, 'areas_migrated', log);
      const built = await builtDatabase(cluster, 'areas_built', log, files);
      return schemaDiff(migrated, built);
    });
    if (diff) {
      console.error(diff);
      console.error(
        'the area files (sql/areas) and the migrations make different schemas (above: - the migrations, + the area files). ' +
          'After an area-file edit: `npm run db -- areas --diff`; after a migration: state the change in its area file.',
      );
      return 1;
    }
    console.log(`the area files make exactly the schema the migrations make (${map.areas.length} areas)`);
    return 0;
  }
  const extra = args.filter((a, i) => a === '--accept-rename' || args[i - 1] === '--accept-rename');
  const current = path.join(MIGRATIONS_FOLDER, 'current');
  const previous = diffMigrations(current);
  const { migration, residue, notes } = await withThrowawayCluster((cluster) => diffAreas(cluster, log, files, extra));
  for (const f of previous) fs.rmSync(path.join(current, f));
  if (!migration) {
    console.log(`no area file differs from the migrations: nothing to write${previous.length ? ` (removed ${previous.join(', ')})` : ''}`);
    return 0;
  }
  fs.mkdirSync(current, { recursive: true });
  fs.writeFileSync(path.join(current, DIFF_FILE), migration);
  if (/Rename candidates:/.test(notes)) console.error(notes.slice(notes.indexOf('Rename candidates:')));
  console.log(`wrote sql/migrations/current/${DIFF_FILE}${previous.filter((f) => f !== DIFF_FILE).length ? ` (in place of ${previous.filter((f) => f !== DIFF_FILE).join(', ')})` : ''}`);
  if (residue) {
    console.error(residue);
    console.error(`sql/migrations/current/${DIFF_FILE}, applied to the migrated database, leaves the differences above: correct it by hand (or report the case), then \`npm run db -- areas --check\`.`);
    return 1;
  }
  console.log('proved: applied to a copy of the migrated database, it makes exactly what the area files state');
  return 0;
}

// The rules by area (`npm run db -- areas`): sql/areas/<area>.sql holds the
// current definition of every function, view, policy, trigger, grant and
// comment of one area, as a DBA reads and edits it. The migrations stay the
// history that builds the database; the area files are checked against them.
//
//   --write   renders every area file from a freshly migrated database (keeping
//             the prose at the top of each file), placing each object by the
//             map sql/areas/areas.json (areas-map.ts, areas-render.ts)
//   --check   applies every area file to a freshly migrated database, in one
//             transaction that is rolled back: no definition may change, and
//             every definition of the database must be stated by exactly one
//             area file, the one the map places it in (areas-check.ts)
//   --diff    writes, for each area whose file differs from the migrations,
//             sql/migrations/current/9NN-<area>.sql (900, 901, ...: one numeric prefix
//             per file, as graphile-migrate requires): the statements that make
//             the database what the area file says (here)
//
// What the catalog holds and how each object is written: areas-catalog.ts.
import fs from 'node:fs';
import path from 'node:path';
import postgres from 'postgres';
import type { Logger } from '../core/log.ts';
import { MIGRATIONS_FOLDER } from '../core/migrate.ts';
import { grantStatements, readCatalog, type GrantLine } from './areas-catalog.ts';
import { compareAreas, describe, withMigratedDatabase, type Difference } from './areas-check.ts';
import { loadAreaMap, readAreaFiles, shown } from './areas-map.ts';
import { writeAreas } from './areas-render.ts';

/** The prefix of the migrations `--diff` writes into sql/migrations/current/ (after hand-written table changes, numbered lower). */
export const DIFF_PREFIX = '900';
const DIFF_MARKER = '-- Made by `npm run db -- areas --diff`';

// ---------------------------------------------------------------------------
// --diff

const RANK: Record<string, number> = { trigger: 0, policy: 1, view: 2, function: 3, rls: 4, grants: 6, comment: 7 };

/** The statements that make the migrated database what the area files state, for the differences of one area. */
export function migrationStatements(differences: Difference[]): string[] {
  // A function or view that goes takes its grants and comment with it.
  const gone = new Set(
    differences
      .filter((d) => d.stated === null && d.migrated && (d.migrated.kind === 'function' || d.migrated.kind === 'view'))
      .flatMap((d) => {
        const target = d.key.replace(/^view /, 'table ');
        return [`grants on ${target}`, `comment on ${d.key}`, `grants on ${d.key.replace(/^function /, 'procedure ')}`, `comment on ${d.key.replace(/^function /, 'procedure ')}`];
      }),
  );
  const removals = differences.filter((d) => d.stated === null && d.migrated !== null && !gone.has(d.key));
  const changes = differences.filter((d) => d.stated !== null);
  const kindOf = (d: Difference) => (d.stated ?? d.migrated)!.kind;
  const order = (list: Difference[], rank: (d: Difference) => number) =>
    [...list].sort((a, b) => rank(a) - rank(b) || (a.key < b.key ? -1 : 1));
  const statements: string[] = [];
  // Removed first, dependents before what they depend on.
  for (const d of order(removals, (d) => RANK[kindOf(d)] ?? 9)) statements.push(d.migrated!.removal);
  const CREATE_RANK: Record<string, number> = { function: 0, view: 1, rls: 2, policy: 3, trigger: 4, grants: 5, comment: 6 };
  const creates = order(changes, (d) => CREATE_RANK[kindOf(d)] ?? 9);
  const hasFunctions = creates.some((d) => kindOf(d) === 'function');
  if (hasFunctions) statements.push('-- Bodies are checked once every function exists (the check validated them all).\nset local check_function_bodies = off;');
  let reset = hasFunctions;
  for (const d of creates) {
    const s = d.stated!;
    if (reset && s.kind !== 'function') {
      statements.push('set local check_function_bodies to default;');
      reset = false;
    }
    if (s.kind === 'grants') {
      const line = (l: GrantLine) => `${l.grantee} ${l.privilege} ${l.column ?? ''} ${l.grantable}`;
      const had = new Set((d.migrated?.grants ?? []).map(line));
      const has = new Set((s.grants ?? []).map(line));
      const revoke = (d.migrated?.grants ?? []).filter((l) => !has.has(line(l)));
      const grant = (s.grants ?? []).filter((l) => !had.has(line(l)));
      statements.push([...grantStatements(s.grantTarget!, revoke, 'revoke'), ...grantStatements(s.grantTarget!, grant)].join('\n'));
    } else if (s.kind === 'rls') {
      const table = s.key.replace(/^row level security on /, '');
      statements.push(
        `alter table ${table} ${s.definition.startsWith('enabled') ? 'enable' : 'disable'} row level security, ${s.definition.endsWith('forced') ? 'force' : 'no force'} row level security;`,
      );
    } else {
      statements.push(s.statement);
    }
  }
  if (reset) statements.push('set local check_function_bodies to default;');
  return statements;
}

/** The migration `--diff` writes for one area. */
export function renderMigration(area: string, statements: string[]): string {
  return [
    `${DIFF_MARKER} from sql/areas/${area}.sql: the statements that make`,
    `-- the migrated database what that file states. Each run writes it again:`,
    `-- edit the area file, not this one. Table changes go in a file of this`,
    `-- folder numbered below ${DIFF_PREFIX}.`,
    '',
    statements.join('\n\n'),
    '',
  ].join('\n');
}

/** The files of current/ that `--diff` made. */
export function diffMigrations(folder = path.join(MIGRATIONS_FOLDER, 'current')): string[] {
  if (!fs.existsSync(folder)) return [];
  return fs.readdirSync(folder).filter((f) => f.endsWith('.sql') && fs.readFileSync(path.join(folder, f), 'utf8').startsWith(DIFF_MARKER));
}

// ---------------------------------------------------------------------------
// The command

const HELP = `Usage: npm run db -- areas --check | --write | --diff

The rules by area: sql/areas/<area>.sql, placed by sql/areas/areas.json.
Each works on a new database of the development server (the embedded cluster,
or DATABASE_URL's server: it needs a superuser), migrated with the committed
migrations and sql/migrations/current/, and dropped after.

  --check  apply every area file to it (rolled back) and fail when a
           definition changes, or a definition of the database is stated
           by no area file or by the wrong one
  --write  render every area file from it (the prose at the top is kept)
  --diff   write sql/migrations/current/${DIFF_PREFIX}-<area>.sql for each area whose
           file differs from it (rewriting the ones an earlier --diff made)`;

/** `npm run db -- areas ...`; returns the exit code. */
export async function runAreasCommand(log: Logger, serverUrl: string, args: string[]): Promise<number> {
  const mode = args.find((a) => ['--check', '--write', '--diff'].includes(a));
  if (args.includes('--help') || !mode) {
    console.log(HELP);
    return mode || args.includes('--help') ? 0 : 1;
  }
  const map = loadAreaMap();
  if (mode === '--write') {
    const { written, problems } = await withMigratedDatabase(serverUrl, log, {}, async (url) => {
      const sql = postgres(url, { max: 1, onnotice: () => {} });
      try {
        const migrated = await sql.begin((tx) => readCatalog(tx));
        return writeAreas(map, migrated);
      } finally {
        await sql.end({ timeout: 5 });
      }
    });
    for (const p of problems) console.error(p);
    for (const f of written) console.log(`wrote ${shown(f)}`);
    if (problems.length === 0 && written.length === 0) console.log('the area files are as the migrations make them');
    return problems.length > 0 ? 1 : 0;
  }
  if (mode === '--check') {
    const comparison = await withMigratedDatabase(serverUrl, log, {}, (url) => compareAreas(url, map, readAreaFiles()));
    const problems = [...comparison.problems, ...comparison.differences.map(describe)];
    for (const p of problems) console.error(`${p}\n`);
    if (problems.length > 0) {
      console.error(`${problems.length} problem(s): the area files (sql/areas) and the migrations disagree. After a migration: \`npm run db -- areas --write\`; after an area-file edit: \`npm run db -- areas --diff\`.`);
      return 1;
    }
    console.log(`the area files state exactly what the migrations make (${map.areas.length} areas)`);
    return 0;
  }
  // --diff
  const current = path.join(MIGRATIONS_FOLDER, 'current');
  const previous = diffMigrations(current);
  const comparison = await withMigratedDatabase(serverUrl, log, { withoutCurrent: previous }, (url) => compareAreas(url, map, readAreaFiles()));
  const byArea = new Map<string, Difference[]>();
  for (const d of comparison.differences) if (d.area) byArea.set(d.area, [...(byArea.get(d.area) ?? []), d]);
  const unplaced = comparison.differences.filter((d) => !d.area);
  if (comparison.problems.length > 0 || unplaced.length > 0) {
    for (const p of [...comparison.problems, ...unplaced.map(describe)]) console.error(`${p}\n`);
    console.error('nothing written: fix the problems above first');
    return 1;
  }
  fs.mkdirSync(current, { recursive: true });
  const kept = new Set<string>();
  // graphile-migrate wants a numeric prefix of its own for every file of current/: 900, 901, ...
  for (const [index, [area, differences]] of [...byArea].sort().entries()) {
    const name = `${Number(DIFF_PREFIX) + index}-${area}.sql`;
    fs.writeFileSync(path.join(current, name), renderMigration(area, migrationStatements(differences)));
    kept.add(name);
    console.log(`wrote ${shown(path.join(current, name))}: ${differences.map((d) => d.key).join('; ')}`);
  }
  for (const f of previous) {
    if (!kept.has(f)) {
      fs.rmSync(path.join(current, f));
      console.log(`removed ${shown(path.join(current, f))}: its area file states what the migrations make again`);
    }
  }
  if (byArea.size === 0) console.log('no area file differs from the migrations: nothing to write');
  return 0;
}

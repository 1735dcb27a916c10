// The rules by area (`npm run db -- areas`): sql/areas/<area>.sql holds the
// current definition of every function, view, policy, trigger, grant and
// comment of one area, as a DBA reads and edits it. The migrations stay the
// history that builds the database; the area files are checked against them.
//
//   --write   renders every area file from a freshly migrated database (keeping
//             the prose at the top of each file), placing each object by the
//             map sql/areas/areas.json
//   --check   applies every area file to a freshly migrated database, in one
//             transaction that is rolled back: no definition may change, and
//             every definition of the database must be stated by exactly one
//             area file, the one the map places it in
//   --diff    writes, for each area whose file differs from the migrations,
//             sql/migrations/current/900-<area>.sql: the statements that make
//             the database what the area file says
//
// How the check proves "stated": before applying the files it removes what
// the files restate (policies, triggers, row-level security, grants and
// comments of the application schemas), so a statement missing from the files
// shows up as a difference; functions and views cannot be removed (tables and
// policies depend on them), so an event trigger records which file creates
// each of them.
import { spawnSync } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import postgres from 'postgres';
import { z } from 'zod';
import { projectRoot } from '../core/config.ts';
import type { Logger } from '../core/log.ts';
import { MIGRATIONS_FOLDER, runMigrations } from '../core/migrate.ts';
import { AREA_SCHEMAS, grantStatements, inCatalogPath, readCatalog, type CatalogObject, type GrantLine } from './areas-catalog.ts';
import { ensureDatabase } from './embedded-postgres.ts';

export const AREAS_DIR = path.join(projectRoot(), 'sql', 'areas');
export const MAP_FILE = path.join(AREAS_DIR, 'areas.json');
/** The prefix of the migrations `--diff` writes into sql/migrations/current/ (after hand-written table changes, numbered lower). */
export const DIFF_PREFIX = '900';
const DIFF_MARKER = '-- Made by `npm run db -- areas --diff`';

// ---------------------------------------------------------------------------
// The map: which area each object belongs to

const AreaSchema = z.object({
  name: z.string().regex(/^[a-z][a-z0-9-]*$/),
  title: z.string().min(1),
  /** The route modules of the area (gateway/routes/*.ts), or other code that calls its functions. */
  code: z.array(z.string()),
  /** Its pgTAP file(s) (supabase/tests/*.sql). */
  tests: z.array(z.string()),
  /** Names (`schema.name`, or a schema alone) and patterns (`*` for any characters). A name listed exactly wins over any pattern. */
  objects: z.array(z.string().min(1)),
});
const MapSchema = z.object({ $comment: z.array(z.string()).optional(), areas: z.array(AreaSchema).min(1) });

export type AreaDef = z.infer<typeof AreaSchema>;
export type AreaMap = z.infer<typeof MapSchema>;

export function loadAreaMap(file = MAP_FILE): AreaMap {
  const parsed = MapSchema.parse(JSON.parse(fs.readFileSync(file, 'utf8')));
  const names = parsed.areas.map((a) => a.name);
  const twice = names.filter((n, i) => names.indexOf(n) !== i);
  if (twice.length > 0) throw new Error(`${path.relative(projectRoot(), file)}: area ${twice.join(', ')} is listed twice`);
  return parsed;
}

const patternRegex = (pattern: string) => new RegExp(`^${pattern.split('*').map((p) => p.replace(/[.+?^${}()|[\]\\]/g, '\\$&')).join('.*')}$`);

/** Places object names in areas: an exact entry wins; else exactly one area's patterns must match. */
export class Placement {
  private readonly exact = new Map<string, string[]>();
  private readonly patterns: { area: string; pattern: string; regex: RegExp }[] = [];
  private readonly cache = new Map<string, { area: string } | { problem: string }>();

  constructor(readonly map: AreaMap) {
    for (const area of map.areas) {
      for (const entry of area.objects) {
        if (entry.includes('*')) this.patterns.push({ area: area.name, pattern: entry, regex: patternRegex(entry) });
        else this.exact.set(entry, [...(this.exact.get(entry) ?? []), area.name]);
      }
    }
  }

  place(name: string): { area: string } | { problem: string } {
    const known = this.cache.get(name);
    if (known) return known;
    let result: { area: string } | { problem: string };
    const exact = this.exact.get(name);
    if (exact && exact.length === 1) result = { area: exact[0]! };
    else if (exact) result = { problem: `${name} is listed by several areas: ${exact.join(', ')}` };
    else {
      const matches = this.patterns.filter((p) => p.regex.test(name));
      const areas = [...new Set(matches.map((m) => m.area))];
      if (areas.length === 1) result = { area: areas[0]! };
      else if (areas.length === 0) result = { problem: `${name} is in no area: add it to an area of sql/areas/areas.json` };
      else {
        result = {
          problem: `${name} matches the patterns of several areas (${matches.map((m) => `${m.area}: ${m.pattern}`).join(', ')}): list it exactly in one`,
        };
      }
    }
    this.cache.set(name, result);
    return result;
  }

  areaOf(name: string): string | null {
    const placed = this.place(name);
    return 'area' in placed ? placed.area : null;
  }
}

// ---------------------------------------------------------------------------
// Rendering an area file

const RULE = `-- ${'-'.repeat(77)}`;
const BANNER = `-- ${'='.repeat(77)}`;

const SCHEMA_SECTIONS: Record<string, string> = {
  api: 'Functions of api: what the gateway and the MCP server call, as the request\'s role',
  admin: 'Functions of admin: operator functions (psql, `npm run admin`)',
  app: 'Functions of app: helpers of policies and list functions',
  identity: 'Functions of identity: credential helpers',
  private: 'Functions of private: internal helpers and trigger functions (request roles run only those granted here)',
};

/** The hand-written prose of an existing area file: the lines between its title banner and `-- Code:`. */
export function areaProse(text: string | null): string[] {
  if (!text) return [];
  const lines = text.split('\n');
  const end = lines.findIndex((l) => l.startsWith('-- Code:'));
  if (lines[0] !== BANNER || lines[2] !== BANNER || end < 0) return [];
  const prose = lines.slice(3, end);
  while (prose.length > 0 && prose[0] === '--') prose.shift();
  while (prose.length > 0 && prose.at(-1) === '--') prose.pop();
  return prose;
}

const wrap = (words: string, indent: string, width = 80): string[] => {
  const lines: string[] = [];
  let line = indent;
  for (const word of words.split(' ')) {
    if (line.length > indent.length && line.length + 1 + word.length > width) {
      lines.push(line);
      line = indent;
    }
    line += (line.length > indent.length ? ' ' : '') + word;
  }
  if (line.length > indent.length) lines.push(line);
  return lines;
};

/** The text of sql/areas/<area>.sql for these objects (all placed in that area). */
export function renderArea(area: AreaDef, objects: CatalogObject[], prose: string[]): string {
  const blocks = new Map<string, CatalogObject[]>();
  const blockKey = (o: CatalogObject) => `${o.block.kind}\u0000${o.block.name}`;
  for (const o of objects) blocks.set(blockKey(o), [...(blocks.get(blockKey(o)) ?? []), o]);
  for (const list of blocks.values()) list.sort((a, b) => (a.rank < b.rank ? -1 : a.rank > b.rank ? 1 : a.key < b.key ? -1 : 1));
  const ofKind = (kind: string) => [...blocks.entries()].filter(([k]) => k.startsWith(`${kind}\u0000`)).map(([, list]) => list);

  // Tables in the order the map lists them exactly, then by name.
  const listed = (name: string) => {
    const i = area.objects.indexOf(name);
    return i < 0 ? Number.MAX_SAFE_INTEGER : i;
  };
  const mapNameOf = (list: CatalogObject[]) => list[0]!.mapName;
  const byName = (a: CatalogObject[], b: CatalogObject[]) => (a[0]!.block.name < b[0]!.block.name ? -1 : 1);
  const tables = ofKind('table').sort((a, b) => listed(mapNameOf(a)) - listed(mapNameOf(b)) || byName(a, b));
  const types = ofKind('type').sort(byName);
  const views = ofKind('view').sort(byName);
  const schemas = ofKind('schema').sort(byName);
  const functions = ofKind('function').sort(byName);

  const header = [
    BANNER,
    `-- ${area.title}`,
    BANNER,
    ...(prose.length > 0 ? prose : ['-- (What this area is, in a few lines: `npm run db -- areas --write` keeps this text.)']),
    '--',
    ...wrap(`-- Code: ${area.code.length > 0 ? area.code.join(', ') : '(none)'}`, '', 80).map((l, i) => (i === 0 ? l : `--   ${l}`)),
    ...wrap(`-- pgTAP: ${area.tests.length > 0 ? area.tests.join(', ') : '(none)'}`, '', 80).map((l, i) => (i === 0 ? l : `--   ${l}`)),
  ];
  if (tables.length > 0) {
    header.push('--', '-- Its tables (created and altered by the migrations; their comments, row-level');
    header.push('-- security, policies, grants and triggers are below):');
    header.push(...wrap(tables.map((t) => t[0]!.block.name).join(', '), '--   '));
  }
  if (types.length > 0) {
    header.push('--', '-- Its types (made by the migrations):');
    header.push(...wrap(types.map((t) => t[0]!.block.name).join(', '), '--   '));
  }
  header.push(
    '--',
    '-- The current definition of every function, view, policy, trigger, grant and',
    '-- comment of this area. To change a rule: edit it here, then',
    '-- `npm run db -- areas --diff` writes its migration (docs/dba.md, "Changing a',
    '-- rule"). CI (`npm run db -- areas --check`) fails while this file and the',
    '-- migrated database disagree. `npm run db -- areas --write` renders all below',
    '-- `-- Code:` again from a freshly migrated database.',
    BANNER,
  );

  const sections: string[] = [];
  const section = (title: string, lists: CatalogObject[][], label?: (list: CatalogObject[]) => string) => {
    const rendered = lists
      .map((list) => {
        const statements = list.map((o) => o.statement).filter((s) => s !== '');
        if (statements.length === 0) return '';
        return [...(label ? [label(list)] : []), ...statements].join('\n');
      })
      .filter((s) => s !== '');
    if (rendered.length === 0) return;
    sections.push([RULE, ...wrap(title, '-- '), RULE, '', rendered.join('\n\n')].join('\n'));
  };
  for (const schema of AREA_SCHEMAS) {
    section(SCHEMA_SECTIONS[schema] ?? `Functions of ${schema}`, functions.filter((f) => f[0]!.block.schema === schema));
  }
  section('Views', views);
  section('Tables: comments, row-level security, policies, grants, triggers', tables, (list) => `-- ${list[0]!.block.name}`);
  section('Types: comments', types);
  section('Schemas: comments and grants', schemas, (list) => `-- schema ${list[0]!.block.name}`);
  return `${header.join('\n')}\n\n${sections.join('\n\n')}\n`;
}

// ---------------------------------------------------------------------------
// Area files on disk

export interface AreaFile {
  area: string;
  file: string;
  text: string;
}

export function readAreaFiles(dir = AREAS_DIR): AreaFile[] {
  if (!fs.existsSync(dir)) return [];
  return fs
    .readdirSync(dir)
    .filter((f) => f.endsWith('.sql'))
    .sort()
    .map((f) => ({ area: path.basename(f, '.sql'), file: path.join(dir, f), text: fs.readFileSync(path.join(dir, f), 'utf8') }));
}

const shown = (file: string) => path.relative(process.cwd(), file) || file;

// ---------------------------------------------------------------------------
// A freshly migrated database

export interface FreshOptions {
  /** Files of sql/migrations/current/ to leave out (the migrations `--diff` made, when it makes them again). */
  withoutCurrent?: string[];
}

export interface MigratedDatabase {
  url: string;
  drop(): Promise<void>;
}

/** A new database of the server, migrated with the committed migrations and current/. */
export async function createMigratedDatabase(serverUrl: string, log: Logger, options: FreshOptions = {}): Promise<MigratedDatabase> {
  const name = `areas_${crypto.randomBytes(5).toString('hex')}`;
  const admin = Object.assign(new URL(serverUrl), { pathname: '/postgres' }).toString();
  const url = Object.assign(new URL(serverUrl), { pathname: `/${name}` }).toString();
  const drop = async () => {
    const sql = postgres(admin, { max: 1, onnotice: () => {} });
    try {
      await sql`drop database if exists ${sql(name)} with (force)`;
    } finally {
      await sql.end({ timeout: 5 });
    }
  };
  await ensureDatabase(admin, name);
  let folder: string | null = null;
  try {
    if (options.withoutCurrent && options.withoutCurrent.length > 0) {
      folder = fs.mkdtempSync(path.join(os.tmpdir(), 'areas-migrations-'));
      fs.cpSync(path.join(MIGRATIONS_FOLDER, 'committed'), path.join(folder, 'committed'), { recursive: true, dereference: true });
      fs.mkdirSync(path.join(folder, 'current'));
      for (const f of fs.readdirSync(path.join(MIGRATIONS_FOLDER, 'current'))) {
        if (!options.withoutCurrent.includes(f)) fs.copyFileSync(path.join(MIGRATIONS_FOLDER, 'current', f), path.join(folder, 'current', f));
      }
    }
    await runMigrations(url, log, { includeCurrent: true, migrationsFolder: folder ?? undefined });
  } catch (err) {
    await drop();
    throw err;
  } finally {
    if (folder) fs.rmSync(folder, { recursive: true, force: true });
  }
  return { url, drop };
}

/** Runs fn on a new migrated database of the server (createMigratedDatabase), dropped after. */
export async function withMigratedDatabase<T>(serverUrl: string, log: Logger, options: FreshOptions, fn: (url: string) => Promise<T>): Promise<T> {
  const database = await createMigratedDatabase(serverUrl, log, options);
  try {
    return await fn(database.url);
  } finally {
    await database.drop();
  }
}

// ---------------------------------------------------------------------------
// Applying the area files to a migrated database (rolled back)

/** A definition that differs between the migrated database and the area files. */
export interface Difference {
  key: string;
  /** The area the map places it in (null when it is in none). */
  area: string | null;
  /** As the migrations made it (null: the migrations do not make it). */
  migrated: CatalogObject | null;
  /** As the area files state it (null: no area file states it). */
  stated: CatalogObject | null;
}

export interface Comparison {
  /** What is wrong besides differing definitions (placement, files that do not apply, invalid bodies...), one paragraph each. */
  problems: string[];
  /** The definitions that differ (describe() says how, for people). */
  differences: Difference[];
  /** The catalog as the migrations made it (for --write). */
  migrated: CatalogObject[];
}

class Rollback extends Error {
  constructor(readonly result: Comparison) {
    super('rollback');
  }
}

// Records, for each DDL command of an area file, what it touched and which
// file ran it (the setting areas.file). Rolled back with everything else.
const RECORDER = `
  create schema areas_check;
  create table areas_check.commands (tag text, classid oid, objid oid, objsubid int, identity text, file text);
  create function areas_check.record() returns event_trigger language plpgsql as $$
  begin
    insert into areas_check.commands
    select c.command_tag, c.classid, c.objid, c.objsubid, c.object_identity, current_setting('areas.file', true)
      from pg_event_trigger_ddl_commands() c;
  end $$;
  create table areas_check.invalid (function text, message text);
  create event trigger areas_check_record on ddl_command_end execute function areas_check.record();`;

// What each recorded command touched, named as the map and the catalog name it.
const COMMANDS = `
  select c.tag, c.file, c.identity,
         case when c.classid = 'pg_proc'::regclass then (select format('%s.%s', n.nspname, p.proname) from pg_proc p join pg_namespace n on n.oid = p.pronamespace where p.oid = c.objid)
              when c.classid = 'pg_class'::regclass then (select format('%s.%s', n.nspname, r.relname) from pg_class r join pg_namespace n on n.oid = r.relnamespace where r.oid = c.objid)
              when c.classid = 'pg_policy'::regclass then (select format('%s.%s', n.nspname, r.relname) from pg_policy p join pg_class r on r.oid = p.polrelid join pg_namespace n on n.oid = r.relnamespace where p.oid = c.objid)
              when c.classid = 'pg_trigger'::regclass then (select format('%s.%s', n.nspname, r.relname) from pg_trigger t join pg_class r on r.oid = t.tgrelid join pg_namespace n on n.oid = r.relnamespace where t.oid = c.objid)
              when c.classid = 'pg_type'::regclass then (select format('%s.%s', n.nspname, t.typname) from pg_type t join pg_namespace n on n.oid = t.typnamespace where t.oid = c.objid)
              when c.classid = 'pg_namespace'::regclass then (select n.nspname::text from pg_namespace n where n.oid = c.objid)
         end as map_name,
         case when c.classid = 'pg_proc'::regclass then (select p.oid::regprocedure::text from pg_proc p where p.oid = c.objid) end as function,
         case when c.classid = 'pg_class'::regclass then (select format('%I.%I', n.nspname, r.relname) from pg_class r join pg_namespace n on n.oid = r.relnamespace where r.oid = c.objid and r.relkind = 'v') end as view
    from areas_check.commands c`;

// What a table is besides its rules: columns, defaults, constraints, indexes.
// An area file must not change it (tables stay in the migrations).
const TABLE_SHAPES = `
  select format('%I.%I', n.nspname, c.relname) as "table", md5(concat_ws(E'\\n',
           (select string_agg(format('%s %s %s %s', a.attname, format_type(a.atttypid, a.atttypmod), a.attnotnull, pg_get_expr(d.adbin, d.adrelid)), E'\\n' order by a.attnum)
              from pg_attribute a left join pg_attrdef d on d.adrelid = a.attrelid and d.adnum = a.attnum
             where a.attrelid = c.oid and a.attnum > 0 and not a.attisdropped),
           (select string_agg(pg_get_constraintdef(k.oid), E'\\n' order by k.conname) from pg_constraint k where k.conrelid = c.oid),
           (select string_agg(pg_get_indexdef(i.indexrelid), E'\\n' order by i.indexrelid::regclass::text) from pg_index i where i.indrelid = c.oid))) as shape
    from pg_class c join pg_namespace n on n.oid = c.relnamespace
   where n.nspname = any($1::text[]) and c.relkind in ('r', 'p')
   order by 1`;

// Bodies are created unchecked (the files are applied in name order, a
// function may call one of a later file); once all are in, each function an
// area file created is validated by its language's validator.
const VALIDATE = `
  do $$
  declare
    f record;
  begin
    set local check_function_bodies = on;
    for f in
      select distinct p.oid, p.oid::regprocedure::text as name, l.lanvalidator::regproc as validator
        from areas_check.commands c join pg_proc p on p.oid = c.objid join pg_language l on l.oid = p.prolang
       where c.classid = 'pg_proc'::regclass and c.tag in ('CREATE FUNCTION', 'CREATE PROCEDURE') and l.lanvalidator <> 0
    loop
      begin
        execute format('select %s(%s)', f.validator, f.oid);
      exception when others then
        insert into areas_check.invalid values (f.name, sqlerrm);
      end;
    end loop;
  end $$;`;

const ALLOWED_TAGS = new Set([
  'CREATE FUNCTION', 'CREATE PROCEDURE', 'CREATE VIEW', 'ALTER VIEW', 'CREATE POLICY', 'ALTER POLICY', 'DROP POLICY',
  'CREATE TRIGGER', 'DROP TRIGGER', 'ALTER TABLE', 'COMMENT', 'GRANT', 'REVOKE', 'DROP FUNCTION', 'DROP PROCEDURE', 'DROP VIEW',
]);

function unifiedDiff(before: string, after: string, beforeLabel: string, afterLabel: string): string {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'areas-diff-'));
  try {
    fs.writeFileSync(path.join(dir, 'a'), `${before}\n`);
    fs.writeFileSync(path.join(dir, 'b'), `${after}\n`);
    const result = spawnSync('diff', ['-u', '--label', beforeLabel, '--label', afterLabel, path.join(dir, 'a'), path.join(dir, 'b')], { encoding: 'utf8' });
    return result.stdout.trimEnd();
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

const indent = (text: string) => text.split('\n').map((l) => `    ${l}`).join('\n');

/** A difference, for people: which file, what, and the diff. */
export function describe(d: Difference): string {
  const where = d.area ? `sql/areas/${d.area}.sql` : 'no area file';
  if (d.migrated && d.stated) {
    return (
      `${where}: ${d.key} differs from what the migrations made (an area file edited without its migration, or a migration without its area-file edit):\n` +
      indent(unifiedDiff(d.migrated.definition, d.stated.definition, 'migrations', where))
    );
  }
  if (d.migrated) return `${d.key}: made by the migrations, stated by no area file (it belongs in ${where})\n${indent(d.migrated.statement || d.migrated.definition)}`;
  return `${where}: ${d.key} is stated there, but the migrations do not make it\n${indent(d.stated!.statement || d.stated!.definition)}`;
}

/**
 * Applies the area files to the (migrated) database of `url` in one
 * transaction, compares, and rolls back. Needs a superuser (the event trigger).
 */
export async function compareAreas(url: string, map: AreaMap, files: AreaFile[]): Promise<Comparison> {
  const placement = new Placement(map);
  const sql = postgres(url, { max: 1, onnotice: () => {} });
  try {
    await sql.begin(async (tx) => {
      const problems: string[] = [];
      const migrated = await readCatalog(tx);
      const shapes = () => inCatalogPath(tx, () => tx.unsafe<{ table: string; shape: string }[]>(TABLE_SHAPES, [[...AREA_SCHEMAS]]));
      const shapesBefore = await shapes();

      // Files and areas: one file per area of the map.
      const areaNames = new Set(map.areas.map((a) => a.name));
      for (const f of files) if (!areaNames.has(f.area)) problems.push(`${shown(f.file)}: no area "${f.area}" in sql/areas/areas.json`);
      const fileAreas = new Set(files.map((f) => f.area));
      for (const a of map.areas) if (!fileAreas.has(a.name)) problems.push(`area ${a.name}: sql/areas/${a.name}.sql is missing (npm run db -- areas --write)`);

      // Remove what the files restate, then record what they do.
      // (Comments of policies and triggers go with them.)
      const removals = migrated
        .filter((o) => !['function', 'view', 'type'].includes(o.kind) && o.removal && !/^comment on (policy|trigger) /.test(o.key))
        .map((o) => o.removal);
      if (removals.length > 0) await tx.unsafe(removals.join('\n'));
      await tx.unsafe(RECORDER);
      await tx`set local check_function_bodies = off`;

      const grantsOf = async () =>
        new Map((await readCatalog(tx, { only: 'grants' })).map((o) => [o.key, o] as const));
      const grantFiles = new Map<string, { file: string; object: CatalogObject }[]>();
      let grants = await grantsOf();
      let pending = files.filter((f) => areaNames.has(f.area));
      const errors = new Map<string, string>();
      while (pending.length > 0) {
        const failed: AreaFile[] = [];
        for (const f of pending) {
          try {
            await tx.savepoint(async (sp) => {
              await sp`select set_config('areas.file', ${f.area}, true)`;
              await sp.unsafe(f.text);
            });
            errors.delete(f.area);
            const now = await grantsOf();
            for (const [key, object] of now) {
              if (grants.get(key)?.definition !== object.definition) grantFiles.set(key, [...(grantFiles.get(key) ?? []), { file: f.area, object }]);
            }
            grants = now;
          } catch (err) {
            const e = err as { message: string; position?: string };
            errors.set(f.area, `${e.message}${e.position ? ` (at character ${e.position} of the file)` : ''}`);
            failed.push(f);
          }
        }
        if (failed.length === pending.length) break;
        pending = failed;
      }
      for (const [area, message] of errors) problems.push(`sql/areas/${area}.sql does not apply: ${message}`);

      await tx.unsafe(VALIDATE);
      for (const v of await tx<{ function: string; message: string }[]>`select function, message from areas_check.invalid order by 1`) {
        problems.push(`function ${v.function}: its body is invalid: ${v.message}`);
      }
      await tx`set local check_function_bodies = on`;

      const stated = await readCatalog(tx);
      const commands = await inCatalogPath(tx, () =>
        tx.unsafe<{ tag: string; file: string; identity: string | null; map_name: string | null; function: string | null; view: string | null }[]>(COMMANDS),
      );
      for (const c of commands) {
        if (!ALLOWED_TAGS.has(c.tag)) {
          problems.push(`sql/areas/${c.file}.sql: ${c.tag}${c.identity ? ` ${c.identity}` : ''}: an area file states functions, views, policies, triggers, row-level security, grants and comments; tables, types, indexes and the rest belong in a migration`);
        } else if (c.map_name) {
          const area = placement.areaOf(c.map_name);
          if (area && area !== c.file) {
            problems.push(`sql/areas/${c.file}.sql: ${c.tag.toLowerCase()} ${c.identity ?? c.map_name}: the map places ${c.map_name} in area ${area} (sql/areas/${area}.sql)`);
          }
        }
      }
      for (const [key, changes] of grantFiles) {
        for (const { file, object } of changes) {
          const area = placement.areaOf(object.mapName);
          if (area && area !== file) problems.push(`sql/areas/${file}.sql: ${key}: the map places ${object.mapName} in area ${area} (sql/areas/${area}.sql)`);
        }
      }

      const shapesAfter = await shapes();
      const shapeBefore = new Map(shapesBefore.map((s) => [s.table, s.shape]));
      for (const s of shapesAfter) {
        if (shapeBefore.get(s.table) !== s.shape) problems.push(`table ${s.table}: the area files change its columns, constraints or indexes (tables change in migrations only)`);
      }

      // Who states each function and view.
      const creators = new Map<string, string[]>();
      for (const c of commands) {
        const key = c.function && ['CREATE FUNCTION', 'CREATE PROCEDURE'].includes(c.tag) ? `function ${c.function}` : c.view && c.tag === 'CREATE VIEW' ? `view ${c.view}` : null;
        if (key) creators.set(key, [...new Set([...(creators.get(key) ?? []), c.file])]);
      }

      // Placement of everything in the database, before and after.
      const placementProblems = new Set<string>();
      for (const o of [...migrated, ...stated]) {
        const placed = placement.place(o.mapName);
        if ('problem' in placed) placementProblems.add(placed.problem);
      }
      problems.push(...placementProblems);

      const before = new Map(migrated.filter((o) => o.kind !== 'type').map((o) => [o.key, o]));
      const after = new Map(stated.filter((o) => o.kind !== 'type').map((o) => [o.key, o]));
      const differences: Difference[] = [];
      for (const key of [...new Set([...before.keys(), ...after.keys()])].sort()) {
        const m = before.get(key) ?? null;
        let s = after.get(key) ?? null;
        const object = (s ?? m)!;
        if (object.kind === 'function' || object.kind === 'view') {
          const by = creators.get(key) ?? [];
          if (by.length > 1) problems.push(`${key} is stated by several area files: ${by.map((f) => `sql/areas/${f}.sql`).join(', ')}`);
          if (by.length === 0) s = null; // in the database, but no file creates it
        }
        if (m && s && m.definition === s.definition) continue;
        differences.push({ key, area: placement.areaOf(object.mapName), migrated: m, stated: s });
      }
      throw new Rollback({ problems, differences, migrated });
    });
    throw new Error('unreachable: the comparison is always rolled back');
  } catch (err) {
    if (err instanceof Rollback) return err.result;
    throw err;
  } finally {
    await sql.end({ timeout: 5 });
  }
}

// ---------------------------------------------------------------------------
// --write

/** Renders every area file from the catalog of a migrated database; returns the problems (unplaced objects), writing nothing then. */
export function writeAreas(map: AreaMap, migrated: CatalogObject[], dir = AREAS_DIR): { written: string[]; problems: string[] } {
  const placement = new Placement(map);
  const byArea = new Map<string, CatalogObject[]>(map.areas.map((a) => [a.name, []]));
  const problems = new Set<string>();
  for (const o of migrated) {
    const placed = placement.place(o.mapName);
    if ('problem' in placed) problems.add(placed.problem);
    else byArea.get(placed.area)!.push(o);
  }
  if (problems.size > 0) return { written: [], problems: [...problems] };
  fs.mkdirSync(dir, { recursive: true });
  const written: string[] = [];
  for (const area of map.areas) {
    const file = path.join(dir, `${area.name}.sql`);
    const previous = fs.existsSync(file) ? fs.readFileSync(file, 'utf8') : null;
    const text = renderArea(area, byArea.get(area.name)!, areaProse(previous));
    if (text !== previous) {
      fs.writeFileSync(file, text);
      written.push(file);
    }
  }
  for (const f of readAreaFiles(dir)) {
    if (!byArea.has(f.area)) problems.add(`${shown(f.file)}: no area "${f.area}" in sql/areas/areas.json (delete the file, or add the area)`);
  }
  return { written, problems: [...problems] };
}

// ---------------------------------------------------------------------------
// --diff

const RANK: Record<string, number> = { trigger: 0, policy: 1, view: 2, function: 3, rls: 4, grants: 6, comment: 7 };

/** The statements that make the migrated database what the area files state, for the differences of one area. */
export function migrationStatements(differences: Difference[]): string[] {
  const removals = differences.filter((d) => d.stated === null && d.migrated !== null);
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
  for (const [area, differences] of [...byArea].sort()) {
    const name = `${DIFF_PREFIX}-${area}.sql`;
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

// Checking the area files against the migrations (`npm run db -- areas
// --check`, areas.ts): on a freshly migrated database, every area file is
// applied in one transaction that is rolled back, and each definition is
// compared with what the migrations made.
//
// How the check proves "stated": before applying the files it removes what
// the files restate (policies, triggers, row-level security, grants and
// comments of the application schemas), so a statement missing from the files
// shows up as a difference; functions and views cannot be removed (tables and
// policies depend on them), so an event trigger records which file creates
// each of them. The same trigger says which file stated what, checked against
// the map.
import { spawnSync } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import postgres from 'postgres';
import type { Logger } from '../core/process/log.ts';
import { MIGRATIONS_FOLDER, runMigrations } from '../core/database/migrate.ts';
import { AREA_SCHEMAS, inCatalogPath, readCatalog, type CatalogObject } from './areas-catalog.ts';
import { Placement, shown, type AreaFile, type AreaMap } from './areas-map.ts';
import { ensureDatabase } from '../core/process/embedded-postgres.ts';


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

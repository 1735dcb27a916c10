// The area files (sql/areas/<area>.sql) are the declarative source of the
// schema: each holds its area's types, tables, indexes, triggers, policies and
// functions, in reading order. This builds a database from them: into an empty
// database, the baseline (graphile-worker's schema and the Supabase
// compatibility layer, committed migration 000001: roles, extensions, auth.*),
// then every area file in the order of sql/areas/areas.json, each statement
// in file order, in one transaction.
//
// Reading order is not always the order PostgreSQL needs: a trigger or a
// policy is read beside its table but names a function further down, a
// foreign key may name a table of a later area. So function bodies are not
// checked while loading (as pg_dump's scripts do), and a statement that names
// something not made yet (undefined function, table, type or schema) waits:
// it runs again after the statements that follow it, in rounds, until nothing
// waits or a round makes no progress (then each error is reported with its
// file and line). Every body is checked once everything exists.
//
// Statements are split by PostgreSQL's own parser (libpg-query), so dollar
// quotes, strings and comments are read as the server reads them.
import fs from 'node:fs';
import path from 'node:path';
import { parse } from 'libpg-query';
import postgres from 'postgres';
import { z } from 'zod';
import { MIGRATIONS_FOLDER } from '../core/database/migrate.ts';
import { installJobQueue } from '../core/database/job-queue.ts';
import { projectRoot } from '../core/process/config.ts';
import type { Logger } from '../core/process/log.ts';

export const AREAS_DIR = path.join(projectRoot(), 'sql', 'areas');
export const MAP_FILE = path.join(AREAS_DIR, 'areas.json');
/** What the area files assume exists: on a Supabase project it does already; elsewhere this migration makes it. */
export const BASELINE = path.join(MIGRATIONS_FOLDER, 'committed', '000001-supabase-compat.sql');
/** The schemas the area files state (auth and extensions are the baseline's). */
export const AREA_SCHEMAS = ['api', 'admin', 'app', 'identity', 'private'] as const;

const AreaSchema = z.object({
  name: z.string().regex(/^[a-z][a-z0-9-]*$/),
  title: z.string().min(1),
  /** The modules that call the area's functions. */
  code: z.array(z.string()),
  /** Its pgTAP file(s) (supabase/tests/*.sql). */
  tests: z.array(z.string()),
});
const MapSchema = z.object({ $comment: z.array(z.string()).optional(), areas: z.array(AreaSchema).min(1) });

export type AreaDef = z.infer<typeof AreaSchema>;
export type AreaMap = z.infer<typeof MapSchema>;

/** sql/areas/areas.json: the areas, in the order their files are applied. */
export function loadAreaMap(file = MAP_FILE): AreaMap {
  const parsed = MapSchema.parse(JSON.parse(fs.readFileSync(file, 'utf8')));
  const names = parsed.areas.map((a) => a.name);
  const twice = names.filter((n, i) => names.indexOf(n) !== i);
  if (twice.length > 0) throw new Error(`${path.relative(projectRoot(), file)}: area ${twice.join(', ')} is listed twice`);
  return parsed;
}

export interface AreaFile {
  area: string;
  /** As shown in messages: sql/areas/<area>.sql. */
  file: string;
  text: string;
}

/** The area files in the order of the map; a file of no area, or an area without its file, is an error. */
export function readAreaFiles(map = loadAreaMap(), dir = AREAS_DIR): AreaFile[] {
  const onDisk = fs.readdirSync(dir).filter((f) => f.endsWith('.sql'));
  const stray = onDisk.filter((f) => !map.areas.some((a) => `${a.name}.sql` === f));
  const missing = map.areas.filter((a) => !onDisk.includes(`${a.name}.sql`));
  const problems = [
    ...stray.map((f) => `sql/areas/${f}: no area "${path.basename(f, '.sql')}" in sql/areas/areas.json (delete the file, or add the area)`),
    ...missing.map((a) => `area ${a.name}: sql/areas/${a.name}.sql is missing`),
  ];
  if (problems.length > 0) throw new Error(problems.join('\n'));
  return map.areas.map((a) => ({ area: a.name, file: `sql/areas/${a.name}.sql`, text: fs.readFileSync(path.join(dir, `${a.name}.sql`), 'utf8') }));
}

export interface Statement {
  file: string;
  /** The line the statement starts on (1-based). */
  line: number;
  sql: string;
}

/** The statements of a file, split by PostgreSQL's parser; a syntax error names the file and line. */
export async function statementsOf(file: string, text: string): Promise<Statement[]> {
  const bytes = Buffer.from(text, 'utf8');
  let result: Awaited<ReturnType<typeof parse>>;
  try {
    result = await parse(text);
  } catch (err) {
    const at = (err as { sqlDetails?: { cursorPosition?: number } }).sqlDetails?.cursorPosition;
    const line = at === undefined ? '' : `:${bytes.subarray(0, at).toString('utf8').split('\n').length}`;
    throw new Error(`${file}${line}: ${(err as Error).message}`);
  }
  return (result.stmts ?? []).map((s) => {
    const start = s.stmt_location ?? 0;
    const end = s.stmt_len ? start + s.stmt_len : bytes.length;
    const raw = bytes.subarray(start, end).toString('utf8');
    // The statement proper starts after the blank lines and comments before it.
    const lead = /^(\s|--[^\n]*(\n|$)|\/\*[\s\S]*?\*\/)*/.exec(raw)![0];
    const line = bytes.subarray(0, start).toString('utf8').split('\n').length + lead.split('\n').length - 1;
    return { file, line, sql: raw.slice(lead.length) };
  });
}

/** SQLSTATEs of a statement that names something a later statement makes: it waits for the next round. */
const WAITS = new Set(['42883', '42P01', '42704', '3F000']);

class UndoBody extends Error {}

/** Loads the area files into a database that holds the baseline (one transaction; throws, naming file and line, when a statement fails). */
export async function loadAreaFiles(url: string, files: AreaFile[]): Promise<void> {
  const statements = (await Promise.all(files.map((f) => statementsOf(f.file, f.text)))).flat();
  const sql = postgres(url, { max: 1, onnotice: () => {} });
  try {
    await sql.begin(async (tx) => {
      await tx.unsafe('set local check_function_bodies = off');
      let waiting = statements;
      while (waiting.length > 0) {
        const next: Statement[] = [];
        const errors: string[] = [];
        for (const statement of waiting) {
          try {
            await tx.savepoint((sp) => sp.unsafe(statement.sql));
          } catch (err) {
            const error = `${statement.file}:${statement.line}: ${(err as Error).message}`;
            if (!WAITS.has((err as { code?: string }).code ?? '')) throw new Error(error);
            next.push(statement);
            errors.push(error);
          }
        }
        // A round that made nothing new: what still waits names what is missing.
        if (next.length === waiting.length) throw new Error(errors.join('\n'));
        waiting = next;
      }
      // Every body, checked now that everything exists (each definition run again with checks on, then undone).
      await tx.unsafe('set local check_function_bodies = on');
      const functions = await tx<{ name: string; def: string }[]>`
        select p.oid::regprocedure::text as name, pg_get_functiondef(p.oid) as def
          from pg_proc p join pg_namespace n on n.oid = p.pronamespace join pg_language l on l.oid = p.prolang
         where n.nspname = any(${AREA_SCHEMAS as unknown as string[]}) and l.lanname in ('sql', 'plpgsql') and p.prokind in ('f', 'p')
         order by 1`;
      const invalid: string[] = [];
      for (const f of functions) {
        // Run, then undone by rolling back to the savepoint.
        const outcome = await tx
          .savepoint(async (sp) => {
            await sp.unsafe(f.def);
            throw new UndoBody();
          })
          .catch((err: unknown) => err);
        if (!(outcome instanceof UndoBody)) invalid.push(`function ${f.name}: its body is invalid: ${(outcome as Error).message}`);
      }
      if (invalid.length > 0) throw new Error(invalid.join('\n'));
    });
  } finally {
    await sql.end({ timeout: 5 });
  }
}

/** Builds the schema from the area files into an empty database: the baseline, then the files. */
export async function buildFromAreas(url: string, log: Logger, files: AreaFile[]): Promise<void> {
  await installJobQueue(url, log);
  const sql = postgres(url, { max: 1, onnotice: () => {} });
  try {
    await sql.begin((tx) => tx.unsafe(fs.readFileSync(BASELINE, 'utf8')));
  } finally {
    await sql.end({ timeout: 5 });
  }
  await loadAreaFiles(url, files);
}

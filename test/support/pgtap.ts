// Runs the pgTAP tests in supabase/tests/*.sql (plain SQL files, in the
// layout `supabase test db` expects) against a database, the way pg_prove
// would: each file on its own connection, its output read as TAP. The files
// run in name order: the helpers (00-helpers.sql) and the checks of every
// area (01-catalog-guards.sql, 05-rls-isolation.sql) first, then one file per
// area of sql/areas, named after it (tasks.test.sql for sql/areas/tasks.sql).
//
// pgTAP itself: the `pgtap` extension where the server has it (Debian's
// postgresql-15-pgtap), else Debian's extension script pgtap--1.2.0.sql run
// into schema `tap` (how it gets into the embedded Postgres 18, which ships
// no extensions of its own). Neither: the caller skips, saying so.
import fs from 'node:fs';
import path from 'node:path';
import postgres from 'postgres';
import { projectRoot } from '../../gateway/core/config.ts';

export const TESTS_DIR = path.join(projectRoot(), 'supabase', 'tests');
const PGTAP_SCRIPT = process.env.PGTAP_SQL ?? '/usr/share/postgresql/15/extension/pgtap--1.2.0.sql';

export interface TapAssertion {
  number: number;
  ok: boolean;
  description: string;
  /** The reason of pgTAP's todo() when the assertion is marked as one (a known defect not fixed yet). */
  todo: string | null;
  /** The diagnostics pgTAP printed after a failure. */
  diagnostics: string[];
}

export interface TapFileResult {
  file: string;
  planned: number | null;
  assertions: TapAssertion[];
  /** An SQL error that stopped the file, or a plan that does not match. */
  error: string | null;
}

/**
 * Makes pgTAP callable in the database; returns the schema it lives in, or a
 * reason it cannot be had.
 */
export async function ensurePgTap(url: string): Promise<{ schema: string } | { missing: string }> {
  const sql = postgres(url, { max: 1, onnotice: () => {} });
  try {
    const [installed] = await sql`
      select n.nspname as schema from pg_extension e join pg_namespace n on n.oid = e.extnamespace where e.extname = 'pgtap'
      union all
      select 'tap' where to_regprocedure('tap.plan(integer)') is not null`;
    if (installed) return { schema: installed.schema as string };
    const [available] = await sql`select 1 from pg_available_extensions where name = 'pgtap'`;
    await sql`create schema if not exists tap`;
    if (available) {
      await sql`create extension if not exists pgtap with schema tap`;
    } else if (fs.existsSync(PGTAP_SCRIPT)) {
      // The extension script minus psql's `\echo ... \quit` guard lines.
      const script = fs
        .readFileSync(PGTAP_SCRIPT, 'utf8')
        .split('\n')
        .filter((line) => !line.startsWith('\\'))
        .join('\n');
      await sql.begin(async (tx) => {
        await tx`set local search_path = tap, pg_catalog`;
        await tx.unsafe(script);
      });
    } else {
      await sql`drop schema if exists tap`;
      return { missing: `pgTAP not found (no pgtap extension, no ${PGTAP_SCRIPT}): apt-get install postgresql-15-pgtap` };
    }
    // Tests switch to the request roles; the migrations revoke EXECUTE from
    // PUBLIC by default, so pgTAP's functions are granted back explicitly.
    await sql`grant usage on schema tap to public`;
    await sql`grant execute on all functions in schema tap to public`;
    await sql`grant select on all tables in schema tap to public`;
    return { schema: 'tap' };
  } finally {
    await sql.end({ timeout: 5 });
  }
}

/**
 * The test files, in name order. `only` (PGTAP_FILES, e.g. `tasks` or
 * `tasks,auth`) keeps the files of those areas, or of those file names, and
 * the helpers they need.
 */
export function testFiles(dir = TESTS_DIR, only = process.env.PGTAP_FILES): string[] {
  const wanted = only ? new Set(only.split(',').map((name) => name.trim()).filter((name) => name !== '')) : null;
  return fs
    .readdirSync(dir)
    .filter((f) => f.endsWith('.sql'))
    // An area's files: <area>.test.sql, and <area>.<topic>.test.sql beside it.
    .filter((f) => !wanted || f.startsWith('00-') || wanted.has(f) || wanted.has(f.replace(/\.test\.sql$|\.sql$/, '')) || wanted.has(f.split('.')[0]!))
    .sort()
    .map((f) => path.join(dir, f));
}

/** Reads pgTAP's output lines as TAP. */
export function parseTap(lines: string[]): Pick<TapFileResult, 'planned' | 'assertions'> {
  let planned: number | null = null;
  const assertions: TapAssertion[] = [];
  for (const line of lines) {
    const plan = /^1\.\.(\d+)/.exec(line);
    const result = /^(not )?ok (\d+)(?: - (.*))?$/s.exec(line);
    if (plan) planned = Number(plan[1]);
    else if (result) {
      const text = (result[3] ?? '').trim();
      const todo = /^(.*?)\s*# TODO\s*(.*)$/s.exec(text);
      assertions.push({
        number: Number(result[2]),
        ok: !result[1],
        description: todo ? todo[1]! : text,
        todo: todo ? todo[2]! : null,
        diagnostics: [],
      });
    } else if (line.startsWith('#') && assertions.length > 0) {
      assertions.at(-1)!.diagnostics.push(line);
    }
  }
  return { planned, assertions };
}

/** Runs one test file on its own connection with pgTAP on the search path. */
export async function runTapFile(url: string, file: string, tapSchema: string): Promise<TapFileResult> {
  const sql = postgres(url, {
    max: 1,
    onnotice: () => {},
    connection: { search_path: `public, extensions, ${tapSchema}`, application_name: 'pgtap' },
  });
  const name = path.basename(file);
  const lines: string[] = [];
  let error: string | null = null;
  try {
    const results = (await sql.unsafe(fs.readFileSync(file, 'utf8'))) as unknown as unknown[];
    // One statement gives its rows; several give one row list per statement.
    const rowLists = (results.length > 0 && Array.isArray(results[0]) ? results : [results]) as Record<string, unknown>[][];
    for (const rows of rowLists) {
      for (const row of rows) {
        const value = Object.values(row)[0];
        if (typeof value === 'string') lines.push(...value.split('\n'));
      }
    }
  } catch (err) {
    const e = err as { message: string; code?: string; where?: string };
    error = `${name}: SQL error ${e.code ?? ''} ${e.message}${e.where ? ` (${e.where})` : ''}`;
  } finally {
    await sql.end({ timeout: 5 });
  }
  const { planned, assertions } = parseTap(lines);
  if (!error && planned === null) error = `${name}: no plan (select plan(n) first)`;
  if (!error && planned !== assertions.length) error = `${name}: planned ${planned} tests but ran ${assertions.length}`;
  return { file: name, planned, assertions, error };
}

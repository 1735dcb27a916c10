// plpgsql_check over every PL/pgSQL function of the application schemas
// (`npm run test:sql`, part of `npm test`): fails on errors (unknown columns
// or tables, type mismatches, wrong argument counts, unreachable code...) and
// on warnings. A warning that is a false positive is switched off in the
// function itself with a `-- @plpgsql_check_options: ...` comment saying why.
// Runs where the server has the extension (Debian's postgresql-15-plpgsql-check,
// so PostgreSQL 15 in CI); elsewhere it says so in one line and is skipped.
import { describe, expect, it } from 'vitest';
import { db } from '../helpers.ts';

const SCHEMAS = ['api', 'app', 'private', 'admin', 'identity', 'auth'];

const [available] = await db()`select 1 as yes from pg_available_extensions where name = 'plpgsql_check'`;
if (!available) console.warn('[plpgsql_check] skipped: the server has no plpgsql_check extension (apt-get install postgresql-15-plpgsql-check, and run on PG15)');

interface Finding {
  fn: string;
  level: string;
  lineno: number | null;
  message: string;
  detail: string | null;
  query: string | null;
}

/**
 * Checks the PL/pgSQL functions of `schemas`; trigger functions against the
 * first table whose trigger uses them (plpgsql_check needs one for NEW/OLD).
 * Performance warnings are off: the only ones are count(*) (bigint) stored in
 * integer variables, harmless implicit casts.
 */
const check = (schemas: string[]) => db()<Finding[]>`
  select p.oid::regprocedure::text as fn, r.level, r.lineno, r.message, r.detail, r.query
    from pg_proc p
    join pg_namespace n on n.oid = p.pronamespace
    join pg_language l on l.oid = p.prolang
    left join lateral (select t.tgrelid from pg_trigger t where t.tgfoid = p.oid order by t.tgrelid limit 1) trg on true
    cross join lateral plpgsql_check_function_tb(p.oid, coalesce(trg.tgrelid, 0),
      fatal_errors => false, other_warnings => true, extra_warnings => true,
      performance_warnings => false, security_warnings => true) r
   where l.lanname = 'plpgsql' and n.nspname = any(${schemas})
     and (p.prorettype <> 'trigger'::regtype or trg.tgrelid is not null)
   order by 1, r.lineno`;

describe.skipIf(!available)('plpgsql_check', () => {
  it('finds no error or warning in any PL/pgSQL function of the application schemas', async () => {
    await db()`create extension if not exists plpgsql_check`;
    const [{ n }] = (await db()`
      select count(*)::int as n from pg_proc p join pg_namespace s on s.oid = p.pronamespace
       where p.prolang = (select oid from pg_language where lanname = 'plpgsql') and s.nspname = any(${SCHEMAS})`) as unknown as [{ n: number }];
    expect(n).toBeGreaterThan(50);
    const findings = await check(SCHEMAS);
    const report = findings.map((f) => `${f.fn} line ${f.lineno}: ${f.level}: ${f.message}${f.detail ? ` (${f.detail})` : ''}${f.query ? `\n    ${f.query}` : ''}`);
    expect(report, `plpgsql_check findings:\n${report.join('\n')}`).toEqual([]);
  });

  it('reports a function that reads a column that does not exist', async () => {
    await db()`create extension if not exists plpgsql_check`;
    const schema = `plpgsql_check_${Math.random().toString(36).slice(2, 8)}`;
    await db()`create schema ${db()(schema)}`;
    try {
      await db().unsafe(`create function ${schema}.broken() returns int language plpgsql as $$ begin return (select no_such_column from app.tasks limit 1); end $$`);
      const findings = await check([schema]);
      expect(findings).toMatchObject([{ fn: `${schema}.broken()`, level: 'error', message: 'column "no_such_column" does not exist' }]);
    } finally {
      await db()`drop schema ${db()(schema)} cascade`;
    }
  });
});

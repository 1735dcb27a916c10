// The area files (sql/areas/*.sql, `npm run db -- areas`) are the declarative
// source of the schema: built into an empty database they make exactly what
// the migrations make (their schema dumps do not differ), on a throwaway
// PostgreSQL 15 cluster as CI runs it; an area file edited without its
// migration fails the check, and so does a migration without its area-file
// edit; `--diff` plans the migration with pg-delta and proves it, data kept.
// The files build on the test server too (the embedded Postgres 18), where
// pg-delta finds no difference from the migrated database.
import { spawnSync } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import postgres from 'postgres';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createLogger } from '../../gateway/core/process/log.ts';
import { ensureDatabase } from '../../gateway/core/process/embedded-postgres.ts';
import { buildFromAreas, loadAreaMap, readAreaFiles, statementsOf, type AreaFile } from '../../gateway/tooling/areas-build.ts';
import { builtDatabase, diffAreas, migratedDatabase, planMigration, schemaDiff } from '../../gateway/tooling/areas.ts';
import { pg15Program, startThrowawayPg15, type ThrowawayCluster } from '../../gateway/tooling/pg15.ts';
import { databaseUrl } from '../helpers.ts';
import { projectRoot } from '../support/processes.ts';

const log = createLogger('silent');
const map = loadAreaMap();
const files = readAreaFiles(map);
const pg15 = pg15Program('pg_dump') !== null && pg15Program('initdb') !== null;
if (!pg15) console.warn('[areas] the PostgreSQL 15 checks are skipped: no PostgreSQL 15 binaries (apt-get install postgresql-15)');

/** The area files with one of them changed by `edit`. */
function edited(area: string, edit: (text: string) => string): AreaFile[] {
  return files.map((f) => {
    if (f.area !== area) return f;
    const text = edit(f.text);
    expect(text, `the edit of ${area}.sql changed nothing`).not.toBe(f.text);
    return { ...f, text };
  });
}

const replaceOnce = (text: string, from: string, to: string) => {
  expect(text.split(from), `"${from}" once in the file`).toHaveLength(2);
  return text.replace(from, to);
};

async function run(url: string, statements: string): Promise<void> {
  const sql = postgres(url, { max: 1, onnotice: () => {} });
  try {
    await sql.unsafe(statements);
  } finally {
    await sql.end({ timeout: 5 });
  }
}

async function copyOf(cluster: ThrowawayCluster, template: string): Promise<string> {
  const name = `copy_${crypto.randomBytes(4).toString('hex')}`;
  await run(cluster.url('postgres'), `create database ${name} template ${template}`);
  return cluster.url(name);
}

const TASK_POLICY = 'CREATE POLICY "Users can read their own tasks" ON app.tasks FOR SELECT TO authenticated USING ((created_by = ( SELECT auth.uid() AS uid)));';
const TASK_GRANT = 'GRANT SELECT,DELETE ON TABLE app.tasks TO authenticated;';
const TASK_COMMENT = "COMMENT ON TABLE app.tasks IS 'CRM tasks.";

describe('the area files', () => {
  it('are in the order of sql/areas/areas.json, one per area, each in reading order: types, tables, indexes, triggers, policies, api, helpers', () => {
    expect(files.map((f) => f.area)).toEqual(map.areas.map((a) => a.name));
    const SECTIONS = ['Types', 'Tables', 'Indexes', 'Triggers', 'Policies', 'Functions of api', 'Helpers', 'Functions of admin'];
    for (const f of files) {
      const found = [...f.text.matchAll(/^-- ={77}\n-- ([^\n]+)\n-- ={77}$/gm)].map((m) => SECTIONS.findIndex((s) => m[1]!.startsWith(s))).filter((i) => i >= 0);
      expect(found, f.area).toEqual([...found].sort((a, b) => a - b));
    }
  });

  it('a newcomer finds app.tasks with its columns, its policies and api.task_link in sql/areas/tasks.sql, in that order', () => {
    const tasks = files.find((f) => f.area === 'tasks')!.text;
    const at = (s: string) => {
      expect(tasks).toContain(s);
      return tasks.indexOf(s);
    };
    const table = at('CREATE TABLE app.tasks (\n    id uuid DEFAULT gen_random_uuid() NOT NULL,');
    const index = at('CREATE INDEX tasks_created_by_idx ON app.tasks');
    const trigger = at('CREATE TRIGGER _200_guard_status BEFORE UPDATE ON app.tasks');
    const policy = at(TASK_POLICY);
    const fn = at('CREATE FUNCTION api.task_link(task_id uuid, destination_task_id uuid');
    const helper = at('CREATE FUNCTION private.task_link_would_cycle(');
    expect([table, index, trigger, policy, fn, helper]).toEqual([table, index, trigger, policy, fn, helper].sort((a, b) => a - b));
  });

  it('each pgTAP file is named after its area, alone or with a topic (or checks every area: 00-, 01-, 05-)', () => {
    const names = fs.readdirSync(path.join(projectRoot, 'supabase', 'tests')).filter((f) => f.endsWith('.sql'));
    const areas = new Set(map.areas.map((a) => a.name));
    const area = (f: string) => /^([a-z-]+)(\.[a-z-]+)?\.test\.sql$/.exec(f)?.[1];
    expect(names.filter((f) => !/^0\d-[a-z-]+\.sql$/.test(f) && !areas.has(area(f) ?? ''))).toEqual([]);
    for (const f of names.filter((name) => /^[a-z-]+\.[a-z-]+\.test\.sql$/.test(name))) {
      expect(map.areas.find((a) => a.name === area(f))?.tests).toContain(`supabase/tests/${f}`);
    }
    for (const area of map.areas) expect(area.tests, area.name).toContain(`supabase/tests/${area.name}.test.sql`);
  });

  it('the map names only files that exist, and each area file names its code and pgTAP files', () => {
    for (const area of map.areas) {
      for (const file of [...area.code, ...area.tests]) expect(fs.existsSync(path.join(projectRoot, file)), `${area.name}: ${file}`).toBe(true);
      expect(files.find((f) => f.area === area.name)!.text, area.name).toContain(`-- pgTAP: ${area.tests[0]}`);
    }
  });

  it("are split into statements by PostgreSQL's parser: dollar quotes, strings and comments, with the line each starts on", async () => {
    const statements = await statementsOf('x.sql', "-- a comment; not a statement\nselect 'a;b';\n\ncreate function f() returns int language sql as $$ select 1; $$;\n/* c */ select 2");
    expect(statements).toEqual([
      { file: 'x.sql', line: 2, sql: "select 'a;b'" },
      { file: 'x.sql', line: 4, sql: 'create function f() returns int language sql as $$ select 1; $$' },
      { file: 'x.sql', line: 5, sql: 'select 2' },
    ]);
    await expect(statementsOf('x.sql', 'select 1;\nselec 2;')).rejects.toThrow(/^x\.sql:2: syntax error at or near "selec"/);
  });
});

describe('on the test server (embedded Postgres 18, or PostgreSQL 15 in CI)', () => {
  it('the area files build into an empty database, and pg-delta finds nothing that differs from the migrated one', { timeout: 120_000 }, async () => {
    const name = `areas_${crypto.randomBytes(4).toString('hex')}`;
    const server = Object.assign(new URL(databaseUrl), { pathname: '/postgres' }).toString();
    const url = Object.assign(new URL(databaseUrl), { pathname: `/${name}` }).toString();
    await ensureDatabase(server, name);
    try {
      await buildFromAreas(url, log, files);
      const { statements } = await planMigration(databaseUrl, url, 'postgres');
      expect(statements).toBeNull();
    } finally {
      await run(server, `drop database if exists ${name} with (force)`);
    }
  });
});

describe.skipIf(!pg15)('on a throwaway PostgreSQL 15 cluster, as CI checks', () => {
  let cluster: ThrowawayCluster;
  let migrated: string;
  let built: string;
  beforeAll(async () => {
    cluster = await startThrowawayPg15();
    migrated = await migratedDatabase(cluster, 'migrated', log);
    built = await builtDatabase(cluster, 'built', log, files);
  }, 180_000);
  afterAll(() => cluster?.stop());

  it('the database the area files make and the migrated one do not differ (their schema dumps are the same)', () => {
    expect(schemaDiff(migrated, built)).toBe('');
  });

  it('an area file edited without its migration fails the check: a body, a policy, a grant, a comment and a column show in the diff', { timeout: 120_000 }, async () => {
    const changed = edited('tasks', (text) => {
      let t = replaceOnce(text, 'from private.task_link(', 'from private.task_link(  ');
      t = replaceOnce(t, TASK_POLICY, TASK_POLICY.replace('USING ((', 'USING (true or ('));
      t = replaceOnce(t, TASK_GRANT, 'GRANT SELECT ON TABLE app.tasks TO authenticated;');
      t = replaceOnce(t, TASK_COMMENT, "COMMENT ON TABLE app.tasks IS 'Tasks.");
      return replaceOnce(t, '    next_action text,\n', '    next_action text,\n    archived_at timestamp with time zone,\n');
    });
    const diff = schemaDiff(migrated, await builtDatabase(cluster, 'edited', log, changed));
    expect(diff).toMatch(/^--- the migrations \(sql\/migrations: committed and current\/\)\n\+\+\+ the area files \(sql\/areas\)/);
    expect(diff).toContain('+      from private.task_link(  task_link.task_id');
    expect(diff).toContain('+CREATE POLICY "Users can read their own tasks" ON app.tasks FOR SELECT TO authenticated USING ((true OR');
    expect(diff).toContain('-GRANT SELECT,DELETE ON TABLE app.tasks TO authenticated;');
    expect(diff).toContain("+COMMENT ON TABLE app.tasks IS 'Tasks.");
    expect(diff).toContain('+    archived_at timestamp with time zone,');
  });

  it('a migration without its area-file edit fails the check', async () => {
    const copy = await copyOf(cluster, 'migrated');
    await run(copy, `create function api.task_archive(task_id uuid) returns void language sql as $$ select $$;
      grant select on app.tasks to anon;
      create index tasks_meta_idx on app.tasks using gin (meta);`);
    const diff = schemaDiff(copy, built);
    expect(diff).toContain('-CREATE FUNCTION api.task_archive(task_id uuid) RETURNS void');
    expect(diff).toContain('-GRANT SELECT ON TABLE app.tasks TO anon;');
    expect(diff).toContain('-CREATE INDEX tasks_meta_idx ON app.tasks USING gin (meta);');
  });

  it('a statement that does not apply, or a body that does not compile, is named with its file and line', { timeout: 120_000 }, async () => {
    const broken = edited('jobs', (text) => `${text}\ncreate policy "x" on app.tasks using (no_such_column);\n`);
    const line = broken.find((f) => f.area === 'jobs')!.text.split('\n').length - 1;
    await expect(builtDatabase(cluster, 'broken', log, broken)).rejects.toThrow(`sql/areas/jobs.sql:${line}: column "no_such_column" does not exist`);
    const invalid = edited('tasks', (text) => text.replace(/(CREATE FUNCTION private\.task_exists\(task_id uuid\)[^$]*\$\$)/, '$1 select no_such_column from app.tasks; '));
    await expect(builtDatabase(cluster, 'invalid', log, invalid)).rejects.toThrow('function private.task_exists(uuid): its body is invalid: column "no_such_column" does not exist');
  });

  it('--diff: pg-delta plans the migration, and it is proved: applied to the migrated database it makes what the area files state, rows kept', { timeout: 180_000 }, async () => {
    const changed = edited('tasks', (text) => {
      let t = replaceOnce(text, 'from private.task_link(', 'from private.task_link(  ');
      t = replaceOnce(t, TASK_POLICY, TASK_POLICY.replace('USING ((', "USING ((meta ? 'status') and ("));
      // pg-delta takes the table privilege back whole, which takes the column grants too; areas.ts grants them again.
      t = replaceOnce(t, TASK_GRANT, 'GRANT SELECT ON TABLE app.tasks TO authenticated;');
      t = replaceOnce(t, TASK_COMMENT, "COMMENT ON TABLE app.tasks IS 'Tasks.");
      t = replaceOnce(t, '    deal_value numeric,', '    deal_value numeric(14,2),');
      // A renamed column: pg-delta renames it only when told (else it drops it and adds the new one).
      return t.replace(/\bnext_action\b/g, 'next_step');
    });
    const { migration, residue, notes } = await diffAreas(cluster, log, changed, ['--accept-rename', 'column:app.deals.next_action=column:app.deals.next_step']);
    expect(residue).toBe('');
    expect(notes).toContain('Rename candidates');
    expect(migration).toMatch(/^-- Made by `npm run db -- areas --diff`/);
    for (const statement of [
      'ALTER TABLE "app"."deals" RENAME COLUMN "next_action" TO "next_step";',
      'ALTER TABLE "app"."deals" ALTER COLUMN "deal_value" TYPE numeric(14,2) USING "deal_value"::numeric(14,2);',
      'DROP POLICY "Users can read their own tasks" ON "app"."tasks";',
      `COMMENT ON TABLE "app"."tasks" IS 'Tasks.`,
      'REVOKE ALL ON TABLE "app"."tasks" FROM "authenticated";',
      'GRANT INSERT (created_by), INSERT (meta), UPDATE (meta) ON TABLE app.tasks TO authenticated;',
    ]) {
      expect(migration).toContain(statement);
    }
    expect(migration).not.toMatch(/OWNER TO|TO "postgres"|FROM "postgres"/);

    // A deal made before the migration keeps its next step and value (on a copy of the database --diff planned from).
    const copy = await copyOf(cluster, 'areas_source');
    await run(copy, `
      select admin.create_user('ada@example.com', 'correct horse battery', 'Ada');
      insert into app.tasks (created_by, meta) select id, '{"title":"call","status":"pending","deal_context":{"company":"Acme"}}' from identity.users;
      update app.deals set next_action = 'send the offer', deal_value = 1234.567;`);
    await run(copy, `begin;\n${migration}\ncommit;`);
    const sql = postgres(copy, { max: 1, onnotice: () => {} });
    try {
      expect(await sql`select next_step, deal_value::text from app.deals`).toEqual([{ next_step: 'send the offer', deal_value: '1234.57' }]);
    } finally {
      await sql.end({ timeout: 5 });
    }
  });

  it('npm run db -- areas --check, as CI runs it, passes on the committed files', { timeout: 180_000 }, () => {
    const result = spawnSync(process.execPath, ['--import', 'tsx', 'gateway/tooling/db-cli.ts', 'areas', '--check'], {
      cwd: projectRoot,
      encoding: 'utf8',
      env: { ...process.env, LOG_LEVEL: 'warn' },
    });
    expect(result.stderr).toBe('');
    expect(result.stdout).toContain(`the area files make exactly the schema the migrations make (${map.areas.length} areas)`);
    expect(result.status).toBe(0);
  });
});

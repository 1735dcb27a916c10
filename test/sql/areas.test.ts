// The rules by area (sql/areas/*.sql, `npm run db -- areas`): the area files
// state exactly what the migrations make, on a freshly migrated database of
// the test server (the embedded Postgres 18, or PostgreSQL 15 in CI); an area
// file edited without its migration fails the check, and so does a migration
// without its area-file edit; every object is placed in exactly one area, in
// the file the map says; `--diff` makes the migration that makes an edited
// area file true, and `--write` renders files the check accepts.
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import postgres from 'postgres';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createLogger } from '../../gateway/core/log.ts';
import { readCatalog } from '../../gateway/tooling/areas-catalog.ts';
import { migrationStatements, renderMigration } from '../../gateway/tooling/areas.ts';
import {
  compareAreas,
  createMigratedDatabase,
  describe as describeDifference,
  type Comparison,
  type MigratedDatabase,
} from '../../gateway/tooling/areas-check.ts';
import { AREAS_DIR, loadAreaMap, readAreaFiles, type AreaFile, type AreaMap } from '../../gateway/tooling/areas-map.ts';
import { writeAreas } from '../../gateway/tooling/areas-render.ts';
import { databaseUrl } from '../helpers.ts';
import { projectRoot } from '../support/processes.ts';

const log = createLogger('silent');
const map = loadAreaMap();
const files = readAreaFiles();

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

const keys = (c: Comparison) => c.differences.map((d) => d.key);

/** A statement of an area file: from its first line to the line that ends it. */
function statementOf(area: string, first: string, last: string): string {
  const text = files.find((f) => f.area === area)!.text;
  const start = text.indexOf(first);
  expect(start, first).toBeGreaterThanOrEqual(0);
  return text.slice(start, text.indexOf(last, start) + last.length);
}

const TASK_LINK = statementOf('tasks', 'CREATE OR REPLACE FUNCTION api.task_link(', '$function$;');
const READ_TASKS_POLICY = statementOf('tasks', 'create policy "Users can read their own tasks" on app.tasks', ';');

let fresh: MigratedDatabase;
beforeAll(async () => {
  fresh = await createMigratedDatabase(databaseUrl, log);
});
afterAll(async () => {
  await fresh?.drop();
});

async function run(url: string, statements: string): Promise<void> {
  const sql = postgres(url, { max: 1, onnotice: () => {} });
  try {
    await sql.unsafe(statements);
  } finally {
    await sql.end({ timeout: 5 });
  }
}

describe('the area files and the migrations', () => {
  it('state the same: applying every area file to a freshly migrated database changes no definition, and leaves none unstated', async () => {
    const comparison = await compareAreas(fresh.url, map, files);
    expect([...comparison.problems, ...comparison.differences.map(describeDifference)]).toEqual([]);
    expect(files.map((f) => f.area).sort()).toEqual(map.areas.map((a) => a.name).sort());
    // What they state: every function, policy and trigger of the database.
    const kinds = new Set(comparison.migrated.map((o) => o.kind));
    for (const kind of ['function', 'policy', 'trigger', 'rls', 'grants', 'comment']) expect(kinds).toContain(kind);
  });

  it('a newcomer finds the current body of api.task_link and the policy that guards a task in sql/areas/tasks.sql', () => {
    const tasks = fs.readFileSync(path.join(AREAS_DIR, 'tasks.sql'), 'utf8');
    expect(tasks).toContain('CREATE OR REPLACE FUNCTION api.task_link(task_id uuid, destination_task_id uuid');
    expect(tasks).toContain('create policy "Users can read their own tasks" on app.tasks');
    expect(tasks).toMatch(/^-- Its tables \(created and altered by the migrations[^\n]*\n(--[^\n]*\n)*--   app\.tasks, app\.task_transitions, app\.deals$/m);
  });

  it('each pgTAP file is named after its area, alone or with a topic (or checks every area: 00-, 01-, 05-)', () => {
    const names = fs.readdirSync(path.join(projectRoot, 'supabase', 'tests')).filter((f) => f.endsWith('.sql'));
    const areas = new Set(map.areas.map((a) => a.name));
    const area = (f: string) => /^([a-z-]+)(\.[a-z-]+)?\.test\.sql$/.exec(f)?.[1];
    expect(names.filter((f) => !/^0\d-[a-z-]+\.sql$/.test(f) && !areas.has(area(f) ?? ''))).toEqual([]);
    // A topic file is listed with its area's tests.
    for (const f of names.filter((name) => /^[a-z-]+\.[a-z-]+\.test\.sql$/.test(name))) {
      expect(map.areas.find((a) => a.name === area(f))?.tests).toContain(`supabase/tests/${f}`);
    }
    for (const area of map.areas) expect(area.tests, area.name).toContain(`supabase/tests/${area.name}.test.sql`);
  });

  it('the map names only files that exist, and each area file names its code and pgTAP files', () => {
    for (const area of map.areas) {
      for (const file of [...area.code, ...area.tests]) expect(fs.existsSync(path.join(projectRoot, file)), `${area.name}: ${file}`).toBe(true);
      const text = fs.readFileSync(path.join(AREAS_DIR, `${area.name}.sql`), 'utf8');
      expect(text, area.name).toContain(`-- pgTAP: ${area.tests[0]}`);
    }
  });
});

describe('an area file edited without its migration fails the check', () => {
  it('a changed function body, policy, grant and comment are each named, with their area file', async () => {
    const changed = edited('tasks', (text) => {
      let t = replaceOnce(text, TASK_LINK, TASK_LINK.replace('from private.task_link(', 'from private.task_link(  '));
      t = replaceOnce(t, READ_TASKS_POLICY, READ_TASKS_POLICY.replace('using (', 'using (true or '));
      t = replaceOnce(t, 'grant select, delete, insert (created_by, meta), update (meta) on table app.tasks to authenticated;', 'grant select, insert (created_by, meta), update (meta) on table app.tasks to authenticated;');
      return replaceOnce(t, "comment on table app.tasks is 'CRM tasks.", "comment on table app.tasks is 'Tasks.");
    });
    const comparison = await compareAreas(fresh.url, map, changed);
    expect(comparison.problems).toEqual([]);
    expect(keys(comparison)).toEqual([
      'comment on table app.tasks',
      'function api.task_link(uuid,uuid,jsonb)',
      'grants on table app.tasks',
      'policy "Users can read their own tasks" on app.tasks',
    ]);
    const described = comparison.differences.map(describeDifference).join('\n');
    expect(described).toContain('sql/areas/tasks.sql: function api.task_link(uuid,uuid,jsonb) differs from what the migrations made');
    expect(described).toContain('-authenticated delete');
    expect(described).toContain('+  using ((true OR (created_by = ( SELECT auth.uid() AS uid))));');
  });

  it('a statement removed from the file is missing; one added is extra', async () => {
    const changed = edited('tasks', (text) =>
      replaceOnce(text, TASK_LINK, `${TASK_LINK.replaceAll('api.task_link', 'api.task_link_again')}`).replace(
        `drop policy if exists "Users can read their own tasks" on app.tasks;\n${READ_TASKS_POLICY}\n`,
        '',
      ),
    );
    const comparison = await compareAreas(fresh.url, map, changed);
    const byKey = new Map(comparison.differences.map((d) => [d.key, d]));
    expect([...byKey.keys()].sort()).toEqual([
      'function api.task_link(uuid,uuid,jsonb)',
      'function api.task_link_again(uuid,uuid,jsonb)',
      'policy "Users can read their own tasks" on app.tasks',
    ]);
    expect(byKey.get('function api.task_link(uuid,uuid,jsonb)')).toMatchObject({ stated: null, area: 'tasks' });
    expect(byKey.get('function api.task_link_again(uuid,uuid,jsonb)')).toMatchObject({ migrated: null, area: 'tasks' });
    expect(byKey.get('policy "Users can read their own tasks" on app.tasks')).toMatchObject({ stated: null });
    expect(describeDifference(byKey.get('policy "Users can read their own tasks" on app.tasks')!)).toContain(
      'made by the migrations, stated by no area file (it belongs in sql/areas/tasks.sql)',
    );
  });

  it('an invalid body, a statement in the wrong file and a table change are refused', async () => {
    let changed = edited('tasks', (text) => replaceOnce(text, TASK_LINK, TASK_LINK.replace('l.created_by', 'l.no_such_column')));
    changed = changed.map((f) => (f.area === 'communities' ? { ...f, text: `${f.text}\ncomment on function api.task_get(uuid) is 'here';\nalter table app.tasks add column x int;\n` } : f));
    const comparison = await compareAreas(fresh.url, map, changed);
    expect(comparison.problems.join('\n')).toContain('function api.task_link(uuid,uuid,jsonb): its body is invalid: column l.no_such_column does not exist');
    expect(comparison.problems.join('\n')).toContain('sql/areas/communities.sql: comment api.task_get(pg_catalog.uuid): the map places api.task_get in area tasks');
    expect(comparison.problems.join('\n')).toContain('table app.tasks: the area files change its columns, constraints or indexes');
  });

  it('a file that does not apply says why; a file of no area, and an area without its file, are named', async () => {
    const broken = edited('jobs', (text) => `${text}\ncreate policy "x" on app.no_such_table using (true);\n`);
    const comparison = await compareAreas(fresh.url, map, [...broken.filter((f) => f.area !== 'admin'), { area: 'stray', file: 'sql/areas/stray.sql', text: '' }]);
    expect(comparison.problems).toEqual(
      expect.arrayContaining([
        expect.stringMatching(/^sql\/areas\/jobs\.sql does not apply: relation "app\.no_such_table" does not exist/),
        'sql/areas/stray.sql: no area "stray" in sql/areas/areas.json',
        'area admin: sql/areas/admin.sql is missing (npm run db -- areas --write)',
      ]),
    );
  });
});

describe('a migration without its area-file edit fails the check', () => {
  let migrated: MigratedDatabase;
  beforeAll(async () => {
    migrated = await createMigratedDatabase(databaseUrl, log);
    await run(
      migrated.url,
      `${TASK_LINK.replace('select l.id,', 'select l.id /* changed */,')}
       create function api.task_archive(task_id uuid) returns void language sql as $$ select $$;
       comment on function api.task_archive(uuid) is 'POST /api/mobile/tasks/{id}/archive';
       grant execute on function api.task_archive(uuid) to authenticated;
       grant select on app.tasks to anon;
       drop policy "Users can delete their own tasks" on app.tasks;
       comment on column app.tasks.meta is 'title, description, status, deal_context';
       create trigger _900_archive after delete on app.tasks for each row execute function private.tg__set_updated_at();`,
    );
  });
  afterAll(async () => {
    await migrated?.drop();
  });

  it('names every definition the migration changed, added or removed', async () => {
    const comparison = await compareAreas(migrated.url, map, files);
    expect(comparison.problems).toEqual([]);
    expect(keys(comparison)).toEqual([
      'comment on column app.tasks.meta',
      'comment on function api.task_archive(uuid)',
      'function api.task_archive(uuid)',
      'function api.task_link(uuid,uuid,jsonb)',
      'grants on function api.task_archive(uuid)',
      'grants on table app.tasks',
      'policy "Users can delete their own tasks" on app.tasks',
      'trigger _900_archive on app.tasks',
    ]);
    expect(comparison.differences.every((d) => d.area === 'tasks')).toBe(true);
  });

  it('a new object that the map places nowhere fails until the map places it', async () => {
    await run(migrated.url, 'create function private.unplaced_rule() returns int language sql as $$ select 1 $$;');
    try {
      const comparison = await compareAreas(migrated.url, map, files);
      expect(comparison.problems).toContain('private.unplaced_rule is in no area: add it to an area of sql/areas/areas.json');
      const placed: AreaMap = { ...map, areas: map.areas.map((a) => (a.name === 'common' ? { ...a, objects: [...a.objects, 'private.unplaced_rule'] } : a)) };
      const twice: AreaMap = { ...placed, areas: placed.areas.map((a) => (a.name === 'jobs' ? { ...a, objects: [...a.objects, 'private.unplaced_rule'] } : a)) };
      expect((await compareAreas(migrated.url, placed, files)).problems).toEqual([]);
      expect((await compareAreas(migrated.url, twice, files)).problems).toContain('private.unplaced_rule is listed by several areas: common, jobs');
    } finally {
      await run(migrated.url, 'drop function private.unplaced_rule();');
    }
  });
});

describe('npm run db -- areas --diff and --write', () => {
  it('--diff: the statements it writes make the migrated database what the edited area file states', async () => {
    const changed = edited('tasks', (text) => {
      let t = replaceOnce(text, TASK_LINK, TASK_LINK.replace('select l.id,', 'select l.id /* edited */,'));
      t = replaceOnce(t, `drop policy if exists "Users can read their own tasks" on app.tasks;\n${READ_TASKS_POLICY}\n`, '');
      return replaceOnce(t, 'grant select, delete, insert (created_by, meta), update (meta) on table app.tasks to authenticated;', 'grant select, insert (created_by, meta), update (meta) on table app.tasks to authenticated;');
    });
    const before = await compareAreas(fresh.url, map, changed);
    const migration = renderMigration('tasks', migrationStatements(before.differences));
    expect(migration).toMatch(/^-- Made by `npm run db -- areas --diff` from sql\/areas\/tasks\.sql/);
    expect(migration).toContain('drop policy if exists "Users can read their own tasks" on app.tasks;');
    expect(migration).toContain('revoke delete on table app.tasks from authenticated;');

    const target = await createMigratedDatabase(databaseUrl, log);
    try {
      await run(target.url, `begin;\n${migration}\ncommit;`);
      const after = await compareAreas(target.url, map, changed);
      expect([...after.problems, ...after.differences.map(describeDifference)]).toEqual([]);
      // ...and the files as they were no longer match it.
      expect(keys(await compareAreas(target.url, map, files))).toHaveLength(3);
    } finally {
      await target.drop();
    }
  });

  it('--diff: a function whose arguments change is a new function; the old one is dropped with its grant and comment', async () => {
    const changed = edited('tasks', (text) =>
      replaceOnce(text, 'CREATE OR REPLACE FUNCTION api.task_next(task_id uuid)', 'CREATE OR REPLACE FUNCTION api.task_next(task_id uuid, skip integer DEFAULT 0)').replaceAll(
        'api.task_next(uuid)',
        'api.task_next(uuid,integer)',
      ),
    );
    const migration = renderMigration('tasks', migrationStatements((await compareAreas(fresh.url, map, changed)).differences));
    expect(migration).toContain('drop function if exists api.task_next(uuid);');
    expect(migration).not.toContain('on function api.task_next(uuid) ');
    const target = await createMigratedDatabase(databaseUrl, log);
    try {
      await run(target.url, `begin;\n${migration}\ncommit;`);
      const after = await compareAreas(target.url, map, changed);
      expect([...after.problems, ...after.differences.map(describeDifference)]).toEqual([]);
    } finally {
      await target.drop();
    }
  });

  it('--write renders area files that the check accepts, keeping the prose at the top of each', async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'areas-write-'));
    try {
      fs.writeFileSync(path.join(dir, 'tasks.sql'), files.find((f) => f.area === 'tasks')!.text);
      const sql = postgres(fresh.url, { max: 1, onnotice: () => {} });
      const catalog = await sql.begin((tx) => readCatalog(tx)).finally(() => sql.end({ timeout: 5 }));
      expect(writeAreas(map, catalog, dir).problems).toEqual([]);
      const written = readAreaFiles(dir);
      expect(written.map((f) => f.area).sort()).toEqual(map.areas.map((a) => a.name).sort());
      expect(written.find((f) => f.area === 'tasks')!.text.split('-- Code:')[0]).toBe(files.find((f) => f.area === 'tasks')!.text.split('-- Code:')[0]);
      expect(written.find((f) => f.area === 'jobs')!.text).toContain('-- (What this area is, in a few lines');
      const comparison = await compareAreas(fresh.url, map, written);
      expect([...comparison.problems, ...comparison.differences.map(describeDifference)]).toEqual([]);
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });

  it('npm run db -- areas --check, as CI runs it, passes on the committed files', () => {
    const result = spawnSync(process.execPath, ['--import', 'tsx', 'gateway/tooling/db-cli.ts', 'areas', '--check'], {
      cwd: projectRoot,
      encoding: 'utf8',
      env: { ...process.env, DATABASE_URL: databaseUrl, LOG_LEVEL: 'warn' },
    });
    expect(result.stderr).toBe('');
    expect(result.stdout).toContain(`the area files state exactly what the migrations make (${map.areas.length} areas)`);
    expect(result.status).toBe(0);
  });
});

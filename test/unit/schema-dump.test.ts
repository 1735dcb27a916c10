// Schema dumps (gateway/tooling/schema-dump.ts): what varies from run to run
// is dropped and each object's grants are sorted, so two databases with the
// same schema dump the same; `npm run db -- dump` writes sql/schema.sql, build
// output that git ignores. The dump itself needs PostgreSQL 15 binaries.
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { pg15Program } from '../../gateway/tooling/pg15.ts';
import { normalizeDump, unifiedDiff } from '../../gateway/tooling/schema-dump.ts';
import { projectRoot } from '../support/processes.ts';
import { testDir } from '../support/test-dir.ts';

const available = pg15Program('pg_dump') !== null && pg15Program('initdb') !== null;
if (!available) console.warn('[schema-dump] skipped: no PostgreSQL 15 binaries (apt-get install postgresql-15)');

describe('normalizeDump', () => {
  it('drops version lines, the \\restrict guard, SET lines and owners, and sorts the grants of each object', () => {
    const raw = [
      '--', '-- PostgreSQL database dump', '--', '',
      '\\restrict AbC123', '-- Dumped from database version 15.14', '-- Dumped by pg_dump version 15.14', '',
      'SET statement_timeout = 0;', "SELECT pg_catalog.set_config('search_path', '', false);", '', '',
      '--', '-- Name: api; Type: SCHEMA; Schema: -; Owner: -', '--', '', 'CREATE SCHEMA api;', '', '',
      '--', '-- Name: SCHEMA api; Type: ACL; Schema: -; Owner: -', '--', '',
      'GRANT USAGE ON SCHEMA api TO service_role;', 'GRANT USAGE ON SCHEMA api TO anon;', '',
      '\\unrestrict AbC123', '',
    ].join('\n');
    const out = normalizeDump(raw);
    expect(out).toContain('-- Name: api; Type: SCHEMA; Schema: -\n--\n\nCREATE SCHEMA api;\n');
    expect(out).toContain('-- Name: SCHEMA api; Type: ACL; Schema: -\n--\n\nGRANT USAGE ON SCHEMA api TO anon;\nGRANT USAGE ON SCHEMA api TO service_role;\n');
    expect(out).not.toMatch(/restrict|Dumped|SET statement_timeout|set_config|Owner/);
    expect(out.endsWith(';\n')).toBe(true);
  });

  it('unifiedDiff shows what differs, labelled, and nothing when the texts are the same', () => {
    expect(unifiedDiff('a\nb\n', 'a\nb\n', 'x', 'y')).toBe('');
    expect(unifiedDiff('a\nb\n', 'a\nc\n', 'x', 'y')).toBe('--- x\n+++ y\n@@ -1,2 +1,2 @@\n a\n-b\n+c\n');
  });
});

describe.skipIf(!available)('npm run db -- dump', () => {
  it('writes the whole schema the migrations make to a file (sql/schema.sql by default, which git ignores)', { timeout: 180_000 }, () => {
    const file = path.join(testDir, 'schema.sql');
    const result = spawnSync(process.execPath, ['--import', 'tsx', 'gateway/tooling/db-cli.ts', 'dump', file], { cwd: projectRoot, encoding: 'utf8' });
    expect(result.status, result.stderr).toBe(0);
    const dump = fs.readFileSync(file, 'utf8');
    expect(dump).toMatch(/^-- The database schema the migrations produce/);
    expect(dump).toContain('CREATE TABLE app.tasks (');
    expect(dump).toContain('CREATE FUNCTION api.task_link(task_id uuid, destination_task_id uuid');
    const ignored = spawnSync('git', ['check-ignore', 'sql/schema.sql'], { cwd: projectRoot, encoding: 'utf8' });
    expect(ignored.stdout.trim()).toBe('sql/schema.sql');
  });
});

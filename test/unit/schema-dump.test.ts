// sql/schema.sql: what `npm run db -- dump` writes (the committed migrations
// dumped on a throwaway PostgreSQL 15) must match the committed file, and a
// difference must show as a readable diff. Skipped without PG15 binaries.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { createLogger } from '../../gateway/core/process/log.ts';
import { pg15Program } from '../../gateway/tooling/pg15.ts';
import { diffDump, dumpSchema, normalizeDump, SCHEMA_FILE } from '../../gateway/tooling/schema-dump.ts';

const available = pg15Program('pg_dump') !== null && pg15Program('initdb') !== null;
if (!available) console.warn('[schema-dump] skipped: no PostgreSQL 15 binaries (apt-get install postgresql-15)');

describe('normalizeDump', () => {
  it('drops version lines, the \\restrict guard, SET lines and owners', () => {
    const raw = [
      '--', '-- PostgreSQL database dump', '--', '',
      '\\restrict AbC123', '-- Dumped from database version 15.14', '-- Dumped by pg_dump version 15.14', '',
      'SET statement_timeout = 0;', "SELECT pg_catalog.set_config('search_path', '', false);", '', '',
      '--', '-- Name: api; Type: SCHEMA; Schema: -; Owner: -', '--', '', 'CREATE SCHEMA api;', '',
      '\\unrestrict AbC123', '',
    ].join('\n');
    const out = normalizeDump(raw);
    expect(out).toContain('-- Name: api; Type: SCHEMA; Schema: -\n--\n\nCREATE SCHEMA api;\n');
    expect(out).not.toMatch(/restrict|Dumped|SET statement_timeout|set_config|Owner/);
    expect(out.endsWith(';\n')).toBe(true);
  });
});

describe.skipIf(!available)('npm run db -- dump', () => {
  it('sql/schema.sql matches the committed migrations; a stale copy gives a diff', { timeout: 180_000 }, async () => {
    const dump = await dumpSchema(createLogger('warn', 'schema-dump-test'));
    expect(diffDump(SCHEMA_FILE, dump)).toBe('');

    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'schema-test-'));
    const stale = path.join(dir, 'schema.sql');
    const current = fs.readFileSync(SCHEMA_FILE, 'utf8');
    fs.writeFileSync(stale, current.replace('CREATE SCHEMA api;', 'CREATE SCHEMA api_old;'));
    try {
      const diff = diffDump(stale, dump);
      expect(diff).toContain('-CREATE SCHEMA api_old;');
      expect(diff).toContain('+CREATE SCHEMA api;');
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });
});

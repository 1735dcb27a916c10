// The migration lint (squawk, configured in .squawk.toml): the migrations it
// checks pass, and it does catch a statement that would lock a large table.
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { projectRoot } from '../../gateway/core/process/config.ts';

const root = projectRoot();
const squawk = (...args: string[]) =>
  spawnSync(path.join(root, 'node_modules', '.bin', 'squawk'), ['--reporter', 'gcc', ...args], { cwd: root, encoding: 'utf8' });

describe('squawk', () => {
  it('passes the committed migrations after the baseline and sql/migrations/current', () => {
    const result = squawk('--no-error-on-unmatched-pattern', 'sql/migrations/committed/*.sql', 'sql/migrations/current/*.sql');
    expect(result.stdout + result.stderr).not.toMatch(/warning|error/);
    expect(result.status).toBe(0);
  });

  it('flags an index built without CONCURRENTLY and a rewriting column type change', () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'squawk-'));
    const file = path.join(dir, '600-example.sql');
    fs.writeFileSync(file, 'create index events_title_idx on app.events (title);\nalter table app.events alter column title type varchar(200);\n');
    try {
      const result = squawk(file);
      expect(result.status).toBe(1);
      expect(result.stdout).toContain('require-concurrent-index-creation');
      expect(result.stdout).toContain('changing-column-type');
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });
});

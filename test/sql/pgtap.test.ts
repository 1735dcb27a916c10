// The pgTAP tests of supabase/tests/*.sql (`npm run test:sql`, part of
// `npm test`; PGTAP_FILES=tasks runs one area's): each file runs as pg_prove
// would run it, and each TAP assertion is reported as a test here, with
// pgTAP's diagnostics when it fails. An
// assertion marked with pgTAP's todo() (a known defect) passes while it fails,
// and fails once it passes, so that its todo() is removed with the fix.
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { databaseUrl } from '../helpers.ts';
import { ensurePgTap, runTapFile, testFiles, type TapFileResult } from '../support/pgtap.ts';

const pgtap = await ensurePgTap(databaseUrl);
if ('missing' in pgtap) console.warn(`[pgtap] skipped: ${pgtap.missing}`);

// Files run one after another, helpers (00-*) first, before the tests are
// collected, so that each assertion becomes a test of its own.
const results: TapFileResult[] = [];
if ('schema' in pgtap) {
  for (const file of testFiles()) results.push(await runTapFile(databaseUrl, file, pgtap.schema));
}

describe.skipIf('missing' in pgtap)('pgTAP: supabase/tests', () => {
  it('has test files', () => {
    expect(testFiles().map((f) => path.basename(f))).toContain('00-helpers.sql');
  });
  for (const result of results) {
    describe(result.file, () => {
      it('runs to the end, as planned', () => {
        expect(result.error).toBeNull();
      });
      for (const a of result.assertions) {
        if (a.todo === null) {
          it(`${a.number} - ${a.description}`, () => {
            expect(a.ok, a.diagnostics.join('\n')).toBe(true);
          });
        } else {
          // pgTAP's todo(): a known defect, expected to fail until it is
          // fixed; once it passes, the todo() must go so the test guards the fix.
          it(`${a.number} - ${a.description} (todo: ${a.todo})`, () => {
            expect(a.ok, 'this todo assertion passes now: remove its todo() from the test file').toBe(false);
          });
        }
      }
    });
  }
});

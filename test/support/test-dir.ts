// A scratch folder for this test file, inside the run's temporary folder
// (test/global-setup.ts removes it, and everything in it, after the run).
// Readable by all: a server the test starts as the `postgres` OS user keeps
// its data in it.
import fs from 'node:fs';
import path from 'node:path';
import { inject } from 'vitest';

export const testDir = fs.mkdtempSync(path.join(inject('testRoot'), 'file-'));
fs.chmodSync(testDir, 0o755);

// A scratch folder for this test file, inside the run's temporary folder
// (test/global-setup.ts removes it, and everything in it, after the run).
import fs from 'node:fs';
import path from 'node:path';
import { inject } from 'vitest';

export const testDir = fs.mkdtempSync(path.join(inject('testRoot'), 'file-'));

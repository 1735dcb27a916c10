// The end of CI's log (.ci/run): for each run of a tier, its tests passed,
// failed and skipped and its wall time; then the ten slowest test files over
// all runs, so a file that grows slow is seen before CI's time runs out.
// Reads vitest's JSON reports (`<dir>/<run>.json`) and the run's seconds
// (`<dir>/<run>.seconds`, written by .ci/run).
import fs from 'node:fs';
import path from 'node:path';

interface Report {
  numPassedTests: number;
  numFailedTests: number;
  numPendingTests: number;
  testResults: { name: string; startTime: number; endTime: number; status: string }[];
}

const [dir, ...runs] = process.argv.slice(2);
if (!dir || runs.length === 0) {
  console.error('usage: ci-summary <dir> <run>...');
  process.exit(2);
}
const root = process.cwd();
const files: { run: string; file: string; seconds: number }[] = [];
let passed = 0;
let failed = 0;
for (const run of runs) {
  const reportFile = path.join(dir, `${run}.json`);
  if (!fs.existsSync(reportFile)) {
    console.log(`${run}: not run`);
    continue;
  }
  const report = JSON.parse(fs.readFileSync(reportFile, 'utf8')) as Report;
  const seconds = Number(fs.readFileSync(path.join(dir, `${run}.seconds`), 'utf8'));
  passed += report.numPassedTests;
  failed += report.numFailedTests;
  console.log(
    `${run}: ${report.numPassedTests} passed, ${report.numFailedTests} failed, ${report.numPendingTests} skipped, ` +
      `${report.testResults.length} files in ${Math.floor(seconds / 60)} min ${seconds % 60} s`,
  );
  for (const result of report.testResults) {
    files.push({ run, file: path.relative(root, result.name), seconds: (result.endTime - result.startTime) / 1000 });
  }
}
console.log(`${passed} passed, ${failed} failed`);
console.log('the ten slowest files:');
for (const { run, file, seconds } of files.sort((a, b) => b.seconds - a.seconds).slice(0, 10)) {
  console.log(`  ${seconds.toFixed(1).padStart(6)} s  ${file} (${run})`);
}

// `npm run lint:openapi`: lints the OpenAPI document exactly as
// GET /api/docs/openapi.json serves it (routes/docs.ts openApiDocument, built
// from the route table of gateway/app.ts) with two linters nobody here wrote:
//   - Redocly CLI, its `recommended` ruleset (openapi-lint/redocly.yaml);
//   - Spectral, its `spectral:oas` ruleset (openapi-lint/spectral.yaml).
// Any rule turned off is turned off in those files, with the reason. The
// document goes to a temporary file; nothing is started. Exit 1 on any error
// or warning of either linter.
//   npm run lint:openapi              lint, print each problem and the counts
//   npm run lint:openapi -- --json    print the counts as JSON only
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { routes } from '../app.ts';
import { projectRoot } from '../core/process/config.ts';
import { openApiDocument } from '../routes/docs.ts';

const root = projectRoot();
const CONFIG_DIR = path.join(root, 'gateway', 'tooling', 'openapi-lint');
const bin = (name: string) => path.join(root, 'node_modules', '.bin', name);

export interface LintResult {
  errors: number;
  warnings: number;
  /** One line per problem: rule, where, message. */
  problems: string[];
}

function run(command: string, args: string[]): string {
  const result = spawnSync(command, args, {
    cwd: root,
    encoding: 'utf8',
    maxBuffer: 64 * 1024 * 1024,
    env: { ...process.env, REDOCLY_TELEMETRY: 'off', REDOCLY_SUPPRESS_UPDATE_NOTICE: 'true', NO_COLOR: '1' },
  });
  if (result.error) throw result.error;
  if (!result.stdout.trim()) throw new Error(`${path.basename(command)} printed nothing (exit ${result.status}):\n${result.stderr}`);
  return result.stdout;
}

/** Redocly CLI, recommended ruleset. */
export function redocly(file: string): LintResult {
  const out = run(bin('redocly'), ['lint', file, '--config', path.join(CONFIG_DIR, 'redocly.yaml'), '--format', 'json', '--max-problems', '100000']);
  const report = JSON.parse(out.slice(out.indexOf('{'))) as {
    totals: { errors: number; warnings: number };
    problems: { ruleId: string; severity: string; message: string; location: { pointer: string }[] }[];
  };
  return {
    errors: report.totals.errors,
    warnings: report.totals.warnings,
    problems: report.problems.map((p) => `${p.severity} ${p.ruleId} ${p.location[0]?.pointer ?? ''}: ${p.message}`),
  };
}

/** Spectral, spectral:oas ruleset. */
export function spectral(file: string): LintResult {
  const out = run(bin('spectral'), ['lint', file, '--ruleset', path.join(CONFIG_DIR, 'spectral.yaml'), '--format', 'json', '--quiet', '--fail-severity', 'error']);
  const problems = JSON.parse(out.slice(out.indexOf('['))) as { code: string; severity: number; message: string; path: string[] }[];
  const severity = ['error', 'warning', 'info', 'hint'];
  return {
    errors: problems.filter((p) => p.severity === 0).length,
    warnings: problems.filter((p) => p.severity === 1).length,
    problems: problems.map((p) => `${severity[p.severity]} ${p.code} #/${p.path.join('/')}: ${p.message}`),
  };
}

/** Writes the served document to a temporary file and lints it with both. */
export function lintServedDocument(): { redocly: LintResult; spectral: LintResult } {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'openapi-lint-'));
  try {
    const file = path.join(dir, 'openapi.json');
    fs.writeFileSync(file, openApiDocument(routes).json);
    return { redocly: redocly(file), spectral: spectral(file) };
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

if (process.argv[1] === import.meta.filename) {
  const results = lintServedDocument();
  if (process.argv.includes('--json')) {
    const counts = Object.fromEntries(Object.entries(results).map(([name, r]) => [name, { errors: r.errors, warnings: r.warnings }]));
    console.log(JSON.stringify(counts));
  } else {
    for (const [name, result] of Object.entries(results)) {
      for (const problem of result.problems) console.log(`${name}: ${problem}`);
      console.log(`${name}: ${result.errors} errors, ${result.warnings} warnings`);
    }
  }
  const clean = Object.values(results).every((r) => r.errors === 0 && r.warnings === 0);
  process.exit(clean ? 0 : 1);
}

// `npm run bench -- --against <commit> [name ...]`: the chosen benches run on
// this tree and on <commit>, alternated in the same session (round 1: the
// commit first, round 2: this tree first, ...), each side in a process of its
// own with its own throwaway environment; then every figure of both sides'
// JSON summaries side by side (the median over the rounds) with their ratio.
// Benches that measure CPU per request (Postgres's and the gateway's) report
// it on each side like any other figure.
//
// The commit is checked out once into a detached git worktree in the OS's
// temporary folder (community-backend-bench-<sha>), kept between runs, with
// node_modules a symlink to this tree's (BENCH_AGAINST_INSTALL=1: `npm ci` in
// it instead, once). BENCH_ROUNDS (default 2) sets the rounds.
import { execFileSync, spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

const ROOT = path.resolve(import.meta.dirname, '../..');

/** The worktree of `commit` (made once), ready to run. */
export function checkoutOf(commit: string): { dir: string; sha: string } {
  const git = (...args: string[]) => execFileSync('git', args, { cwd: ROOT, encoding: 'utf8' }).trim();
  const sha = git('rev-parse', '--verify', `${commit}^{commit}`);
  const dir = path.join(os.tmpdir(), `community-backend-bench-${sha.slice(0, 12)}`);
  if (!fs.existsSync(path.join(dir, 'package.json'))) {
    git('worktree', 'prune');
    git('worktree', 'add', '--detach', dir, sha);
  }
  const modules = path.join(dir, 'node_modules');
  if (!fs.existsSync(modules)) {
    if (process.env.BENCH_AGAINST_INSTALL === '1') {
      execFileSync('npm', ['ci', '--no-audit', '--no-fund'], { cwd: dir, stdio: 'inherit' });
    } else {
      fs.symlinkSync(fs.realpathSync(path.join(ROOT, 'node_modules')), modules);
      const lock = (file: string) => fs.readFileSync(file, 'utf8');
      if (lock(path.join(dir, 'package-lock.json')) !== lock(path.join(ROOT, 'package-lock.json'))) {
        console.log(`  note: ${sha.slice(0, 7)}'s package-lock.json differs from this tree's; it runs with this tree's node_modules (BENCH_AGAINST_INSTALL=1 installs its own)`);
      }
    }
  }
  return { dir, sha };
}

/** Runs run.ts for `names` in `dir`; resolves with its JSON summary. */
function runSide(dir: string, names: string[], title: string): Promise<Record<string, unknown>> {
  const out = path.join(os.tmpdir(), `bench-against-${process.pid}-${Date.now()}.json`);
  console.log(`\n######## ${title}`);
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ['--import', 'tsx', 'test/bench/run.ts', ...names], {
      cwd: dir,
      env: { ...process.env, BENCH_JSON: out },
      stdio: 'inherit',
    });
    child.on('error', reject);
    child.on('exit', (code) => {
      if (code !== 0) return reject(new Error(`${title}: exited with ${code}`));
      try {
        resolve(JSON.parse(fs.readFileSync(out, 'utf8')));
      } catch (err) {
        reject(err);
      } finally {
        fs.rmSync(out, { force: true });
      }
    });
  });
}

/** Every number of a summary by its path; the rows of a table are named by their label. */
export function flatten(value: unknown, prefix = '', out = new Map<string, number>()): Map<string, number> {
  if (typeof value === 'number') {
    if (Number.isFinite(value)) out.set(prefix, value);
  } else if (Array.isArray(value)) {
    value.forEach((item, i) => {
      const label = item && typeof item === 'object' && 'label' in item ? String((item as { label: unknown }).label) : String(i);
      flatten(item, `${prefix} › ${label}`, out);
    });
  } else if (value && typeof value === 'object') {
    for (const [key, item] of Object.entries(value)) flatten(item, prefix ? `${prefix}.${key}` : key, out);
  }
  return out;
}

const median = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length === 0 ? NaN : s.length % 2 ? s[(s.length - 1) / 2]! : (s[s.length / 2 - 1]! + s[s.length / 2]!) / 2;
};

const fmt = (n: number | undefined) =>
  n === undefined || !Number.isFinite(n) ? '-' : Math.abs(n) >= 100 ? n.toFixed(0) : Math.abs(n) >= 1 ? n.toFixed(2) : n.toPrecision(3);

export async function runAgainst(commit: string, names: string[]): Promise<Record<string, unknown>> {
  const rounds = Math.max(1, Number(process.env.BENCH_ROUNDS ?? 2));
  const base = checkoutOf(commit);
  const head = execFileSync('git', ['rev-parse', '--short', 'HEAD'], { cwd: ROOT, encoding: 'utf8' }).trim();
  const baseName = base.sha.slice(0, 7);
  const headName = `this tree (${head}${execFileSync('git', ['status', '--porcelain'], { cwd: ROOT, encoding: 'utf8' }).trim() ? '+changes' : ''})`;
  const sides = { base: [] as Map<string, number>[], head: [] as Map<string, number>[] };
  for (let round = 0; round < rounds; round++) {
    const order: ('base' | 'head')[] = round % 2 === 0 ? ['base', 'head'] : ['head', 'base'];
    for (const side of order) {
      const title = `round ${round + 1}/${rounds}: ${side === 'base' ? baseName : headName}`;
      const summary = await runSide(side === 'base' ? base.dir : ROOT, names, title);
      sides[side].push(flatten(summary));
    }
  }
  const keys = [...new Set([...sides.head.flatMap((m) => [...m.keys()]), ...sides.base.flatMap((m) => [...m.keys()])])];
  const rows = keys.map((key) => {
    const of = (maps: Map<string, number>[]) => {
      const values = maps.map((m) => m.get(key)).filter((v): v is number => v !== undefined);
      return values.length ? median(values) : undefined;
    };
    const a = of(sides.base);
    const b = of(sides.head);
    return { figure: key, [baseName]: a, head: b, ratio: a !== undefined && b !== undefined && a !== 0 ? b / a : undefined };
  });
  const header = ['figure', baseName, headName, `÷ ${baseName}`];
  const cells = rows.map((r) => [r.figure, fmt(r[baseName] as number | undefined), fmt(r.head), r.ratio === undefined ? '-' : r.ratio.toFixed(2)]);
  const widths = header.map((h, i) => Math.max(h.length, ...cells.map((c) => c[i]!.length)));
  const line = (c: string[]) => c.map((x, i) => (i === 0 ? x.padEnd(widths[i]!) : x.padStart(widths[i]!))).join('  ');
  console.log(`\n== against ${baseName}: the median of ${rounds} round(s) per side, alternated; the ratio is this tree ÷ ${baseName}`);
  console.log([line(header), line(widths.map((w) => '-'.repeat(w))), ...cells.map(line)].join('\n'));
  return { against: base.sha, head, rounds, rows };
}

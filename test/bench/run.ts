// `npm run bench [-- name ...]`: runs the benchmarks in test/bench/*.bench.ts
// (all, or those named), each in its own throwaway environment, and prints a
// table per bench plus a JSON summary line (BENCH_JSON=path writes it to a file).
// `--against <commit>`: the same benches on this tree and on that commit,
// alternated, and both sides with their ratio (against.ts).
import fs from 'node:fs';
import path from 'node:path';
import { startTestEnvironment } from '../support/environment.ts';
import { runAgainst } from './against.ts';
import { formatTable, makeContext, measureBaseline, type Bench, type Stats } from './harness.ts';

const args = process.argv.slice(2);
const againstAt = args.indexOf('--against');
if (againstAt >= 0) {
  const commit = args[againstAt + 1];
  if (!commit) throw new Error('--against needs a commit');
  const compared = await runAgainst(commit, args.filter((_, i) => i !== againstAt && i !== againstAt + 1));
  if (process.env.BENCH_JSON) fs.writeFileSync(process.env.BENCH_JSON, JSON.stringify(compared));
  process.exit(0);
}
const wanted = args;
const files = fs
  .readdirSync(import.meta.dirname)
  .filter((f) => f.endsWith('.bench.ts'))
  .sort();
const results: Record<string, Stats[] | Record<string, unknown>> = {};

for (const file of files) {
  const bench = (await import(path.join(import.meta.dirname, file))).default as Bench;
  if (wanted.length > 0 && !wanted.includes(bench.name)) continue;
  console.log(`\n== ${bench.name}: ${bench.description}`);
  if (bench.standalone) {
    results[bench.name] = await bench.standalone();
    continue;
  }
  const env = await startTestEnvironment({ serverUrl: process.env.BENCH_DATABASE_URL, settings: { shared_buffers: '256MB' } });
  const ctx = makeContext(env);
  try {
    if (bench.throughput) {
      results[bench.name] = await bench.throughput(ctx);
      continue;
    }
    const baseline = await measureBaseline(ctx);
    baseline.ratio = 1;
    const rows = await bench.run!(ctx);
    for (const row of rows) row.ratio = row.medianMs / baseline.medianMs;
    results[bench.name] = [baseline, ...rows];
    console.log(formatTable([baseline, ...rows]));
  } finally {
    await ctx.close();
    await env.stop();
  }
}

const json = JSON.stringify(results);
if (process.env.BENCH_JSON) fs.writeFileSync(process.env.BENCH_JSON, json);
console.log(`\nsummary: ${json}`);

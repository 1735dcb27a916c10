// `npm run bench -- faults`: database faults under load (test/support/outage.ts),
// on Debian's PostgreSQL 15 when it is installed (else the embedded Postgres
// 18; BENCH_FAULTS_SERVER=embedded|pg15 chooses). 10 clients alternate reading
// their profile and creating a task. Two set-ups, each taking its faults in turn:
//   direct       one gateway process: Postgres stopped 3 s and 30 s (fast
//                shutdown), then frozen 20 s (SIGSTOP of every process)
//   PgBouncer    two gateway processes (WEB_CONCURRENCY=2) behind PgBouncer in
//                transaction mode: stopped 10 s with a gateway process killed
//                meanwhile, `-m immediate` (a crash), stopped 30 s, PgBouncer
//                restarted, frozen 20 s
// Reported per fault: requests and answers by status, requests without an
// answer, writes answered as failed that were saved all the same, writes
// answered 504 outcome_unknown (saved or not), the longest answer, requests
// slower than 2 s while the database was down, and how long after its return
// /health was 200, requests were served and the realtime LISTEN delivered
// again. Goal: nothing unanswered, no saved write answered as failed, every
// answer within the statement timeout (5 s here) + 2 s, back within 2 s.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { pg15Program } from '../../gateway/tooling/pg15.ts';
import { reportCounts, runOutage, statusesOf, type FaultReport, type OutageOptions } from '../support/outage.ts';
import { PGBOUNCER_BINARY } from '../support/pgbouncer.ts';
import type { Bench } from './harness.ts';

const SETUPS: { name: string; options: Omit<OutageOptions, 'dir' | 'server'> }[] = [
  {
    name: 'direct',
    options: {
      clients: 10,
      writes: true,
      faults: [
        { kind: 'stop', seconds: 3 },
        { kind: 'stop', seconds: 30 },
        { kind: 'freeze', seconds: 20 },
      ],
    },
  },
  {
    name: 'pgbouncer',
    options: {
      clients: 10,
      writes: true,
      pgbouncer: true,
      processes: 2,
      faults: [
        { kind: 'stop', seconds: 10, killWorker: true },
        { kind: 'immediate', seconds: 0 },
        { kind: 'stop', seconds: 30 },
        { kind: 'pgbouncer-restart', seconds: 0 },
        { kind: 'freeze', seconds: 20 },
      ],
    },
  },
];

const bench: Bench = {
  name: 'faults',
  description: 'database faults (stops, a crash, a freeze; direct and behind PgBouncer) under 10 clients: every request answered, no saved write answered as failed, and how soon the gateway is back',
  async standalone() {
    const server = (process.env.BENCH_FAULTS_SERVER as 'embedded' | 'pg15' | undefined) ?? (pg15Program('pg_ctl') ? 'pg15' : 'embedded');
    const reports: FaultReport[] = [];
    for (const setup of SETUPS) {
      if (setup.options.pgbouncer && !fs.existsSync(PGBOUNCER_BINARY)) {
        console.log(`(no ${PGBOUNCER_BINARY}: the PgBouncer rows are skipped)`);
        continue;
      }
      const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'bench-faults-'));
      fs.chmodSync(dir, 0o755);
      const run = await runOutage({ dir, server, ...setup.options });
      for (const report of run.reports) console.log(report.summary);
      if (run.errorLines.length) console.log(`${run.errorLines.length} error lines logged:\n${run.errorLines.slice(0, 5).join('\n')}`);
      reports.push(...run.reports);
    }
    const seconds = (ms: number) => (ms / 1000).toFixed(2);
    console.log(`\n${reports[0]?.server ?? ''}, 10 clients (reads and task writes), statement timeout 5 s`);
    console.log(
      '\n| fault | requests | answers by status | unanswered | saved, answered as failed | outcome_unknown saved / not | longest answer | 503 while down p50 / p95 | > 2 s while down | /health back | served back | LISTEN back |',
    );
    console.log('|---|---|---|---|---|---|---|---|---|---|---|---|');
    for (const r of reports) {
      console.log(
        `| ${r.fault} | ${r.requests} | ${statusesOf(r)} | ${r.unanswered.length} | ${r.savedButFailed.length} | ${r.unknownSaved} / ${r.unknownLost} | ` +
          `${seconds(r.longestMs)} s | ${r.refusedP50Ms} / ${r.refusedP95Ms} ms | ${r.slowWhileDown.length} | ${seconds(r.healthBackMs)} s | ${seconds(r.servedBackMs)} s | ${seconds(r.listenBackMs)} s |`,
      );
    }
    return Object.fromEntries(reports.map((r) => [r.fault, reportCounts(r)]));
  },
};

export default bench;

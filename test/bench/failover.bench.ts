// `npm run bench -- failover`: pg_auto_failover failing over by itself, and
// its planned switchover, under load (docs/operations.md#failover). A monitor
// and two PostgreSQL 15 nodes on this machine (test/support/pg-auto-failover.ts:
// the monitor's failure detection lowered to about a second), the database
// migrated, a real gateway process on the formation's URL (`pg_autoctl show
// uri --formation default`: multi-host, target_session_attrs=read-write), 10
// clients alternating profile reads and task writes, an SSE stream open, 20
// jobs queued before each fault (test/support/outage.ts). In turn:
//   failover    the primary's machine dies (SIGKILL of its keeper and its
//               Postgres together) and the monitor promotes the other node;
//               the dead node is then started again and rejoins as a standby
//   switchover  `pg_autoctl perform switchover` (it stops the primary at
//               once: a write whose COMMIT was in flight is 504 outcome_unknown)
//   switchover, drained first: the primary made read-only and its
//               transactions drained, then `pg_autoctl perform switchover`
//               (docs/operations.md#planned-switchover): only 2xx and 503
// Reported per fault: answers by status, requests unanswered (goal 0),
// acknowledged writes missing (goal 0), the seconds from the kill (or the
// start of the switchover) to the standby's promotion and to its taking
// writes, from then to the gateway's first write served (goal <= 2 s), the
// stream's missed and repeated changes, the jobs not run. Needs Debian's
// postgresql-15-auto-failover (/usr/bin/pg_autoctl).
import crypto from 'node:crypto';
import os from 'node:os';
import path from 'node:path';
import { reportCounts, runOutage, statusesOf, type FaultReport } from '../support/outage.ts';
import { pgAutoctlInstalled } from '../support/pg-auto-failover.ts';
import type { Bench } from './harness.ts';

const bench: Bench = {
  name: 'failover',
  description: 'pg_auto_failover (a monitor and two PostgreSQL 15 nodes) failing over by itself when the primary machine dies, then a planned switchover, under 10 clients',
  async standalone() {
    if (!pgAutoctlInstalled) {
      console.log('skipped: pg_auto_failover is not installed (apt-get install postgresql-15-auto-failover)');
      return { skipped: true };
    }
    const started = Date.now();
    const run = await runOutage({
      dir: path.join(os.tmpdir(), `bench-failover-${crypto.randomBytes(3).toString('hex')}`),
      server: 'pg-auto-failover',
      clients: 10,
      writes: true,
      jobs: 20,
      faults: [
        { kind: 'failover', seconds: 0 },
        { kind: 'switchover', seconds: 0 },
        { kind: 'switchover', seconds: 0, drained: true },
      ],
    });
    const reports: FaultReport[] = run.reports;
    for (const report of reports) console.log(report.summary);
    if (run.errorLines.length) console.log(`${run.errorLines.length} error lines logged:\n${run.errorLines.slice(0, 5).join('\n')}`);
    const seconds = (ms: number | undefined) => (ms === undefined || ms < 0 ? '—' : (ms / 1000).toFixed(2));
    /** From the start of the fault (the kill, or the switchover's start) to a step. */
    const step = (r: FaultReport, name: string) => r.steps?.[name];
    console.log(`\n${reports[0]?.server ?? ''}, 10 clients (reads and task writes), statement timeout 5 s, the whole run ${seconds(Date.now() - started)} s`);
    console.log(
      '\n| fault | requests | answers | unanswered | acknowledged writes missing | 504 `outcome_unknown`: saved / not | longest answer | promoted | takes writes | first write served after that | stream missed / repeated | jobs queued before, not run after |',
    );
    console.log('|---|---|---|---|---|---|---|---|---|---|---|---|');
    for (const r of reports) {
      const from = step(r, 'killed') ?? step(r, 'started') ?? 0;
      console.log(
        `| ${r.fault} | ${r.requests} | ${statusesOf(r)} | ${r.unanswered.length} | ${r.ackedButMissing.length} | ${r.unknownSaved} / ${r.unknownLost} | ${seconds(r.longestMs)} s | ` +
          `${seconds((step(r, 'promoted') ?? NaN) - from)} s | ${seconds((step(r, 'writable') ?? NaN) - from)} s | ${seconds(r.writesBackMs)} s | ` +
          `${r.streamGaps.length} / ${r.streamDuplicates.length} | ${r.jobsAdded}, ${r.jobsNotRun.length} |`,
      );
    }
    return {
      seconds: (Date.now() - started) / 1000,
      errorLines: run.errorLines.length,
      ...Object.fromEntries(reports.map((r) => [r.fault, reportCounts(r)])),
    };
  },
};

export default bench;

// `npm run bench -- failover`: pg_auto_failover failing over by itself, and
// its planned switchover, under load (docs/operations/failover.md#failover). A monitor
// and two PostgreSQL 15 nodes on this machine (test/support/pg-auto-failover.ts:
// the monitor's failure detection as BENCH_FAILOVER_SETTINGS says), the database
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
//               (docs/operations/failover.md#planned-switchover): only 2xx and 503
//   calm        (BENCH_FAILOVER_CALM=seconds, first) nothing injected: every
//               failover the monitor begins is a false one (goal 0)
//   stall       (BENCH_FAILOVER_STALL=seconds, default 3) the primary's machine
//               stopped that long (SIGSTOP of its keeper and Postgres), then
//               going on: a failover begun for it is a false one (goal 0)
// BENCH_FAILOVER_SETTINGS picks the monitor's failure detection: safe (the
// default: what docs/operations/failover.md recommends), fast (the settings the docs
// once listed), default (pg_auto_failover's own); BENCH_FAILOVER_LOAD=N runs
// N processes that keep a core busy each for the whole run (a loaded host);
// BENCH_FAILOVER_FAULTS=calm,stall,failover,switchover,drained picks the phases.
// Reported per fault: answers by status, requests unanswered (goal 0),
// acknowledged writes missing (goal 0), the seconds from the kill (or the
// start of the switchover) to the standby's promotion and to its taking
// writes, from then to the gateway's first write served (goal <= 2 s), the
// stream's missed and repeated changes, the jobs not run. Needs Debian's
// postgresql-15-auto-failover (/usr/bin/pg_autoctl).
import { spawn, type ChildProcess } from 'node:child_process';
import crypto from 'node:crypto';
import os from 'node:os';
import path from 'node:path';
import { reportCounts, runOutage, statusesOf, type Fault, type FaultReport } from '../support/outage.ts';
import { MONITOR_PROFILES, pgAutoctlInstalled, type FailoverProfileName } from '../support/pg-auto-failover.ts';
import type { Bench } from './harness.ts';

const bench: Bench = {
  name: 'failover',
  description: 'pg_auto_failover (a monitor and two PostgreSQL 15 nodes) failing over by itself when the primary machine dies, then a planned switchover, under 10 clients',
  async standalone() {
    if (!pgAutoctlInstalled) {
      console.log('skipped: pg_auto_failover is not installed (apt-get install postgresql-15-auto-failover)');
      return { skipped: true };
    }
    const profile = (process.env.BENCH_FAILOVER_SETTINGS ?? 'safe') as FailoverProfileName;
    if (!(profile in MONITOR_PROFILES)) throw new Error(`BENCH_FAILOVER_SETTINGS: one of ${Object.keys(MONITOR_PROFILES).join(', ')}`);
    const calm = Number(process.env.BENCH_FAILOVER_CALM ?? 0);
    const stall = Number(process.env.BENCH_FAILOVER_STALL ?? 3);
    const phases = (process.env.BENCH_FAILOVER_FAULTS ?? `${calm > 0 ? 'calm,' : ''}failover,switchover,drained`).split(',').map((p) => p.trim());
    const faults: Fault[] = phases.map((phase) => {
      if (phase === 'calm') return { kind: 'calm', seconds: calm || 60 };
      if (phase === 'stall') return { kind: 'stall', seconds: stall };
      if (phase === 'failover') return { kind: 'failover', seconds: 0 };
      if (phase === 'switchover') return { kind: 'switchover', seconds: 0 };
      if (phase === 'drained') return { kind: 'switchover', seconds: 0, drained: true };
      throw new Error(`BENCH_FAILOVER_FAULTS: calm, stall, failover, switchover or drained (not ${phase})`);
    });
    // A loaded host: N processes each keeping a core busy, for the whole run.
    const hogs: ChildProcess[] = Array.from({ length: Number(process.env.BENCH_FAILOVER_LOAD ?? 0) }, () =>
      spawn(process.execPath, ['-e', 'for (;;) {}'], { stdio: 'ignore' }),
    );
    const load: number[] = [];
    const sampler = setInterval(() => load.push(os.loadavg()[0]!), 5_000);
    const started = Date.now();
    let run: Awaited<ReturnType<typeof runOutage>>;
    try {
      run = await runOutage({
        dir: path.join(os.tmpdir(), `bench-failover-${crypto.randomBytes(3).toString('hex')}`),
        server: 'pg-auto-failover',
        failoverProfile: profile,
        clients: 10,
        writes: true,
        jobs: 20,
        faults,
      });
    } finally {
      clearInterval(sampler);
      for (const hog of hogs) hog.kill('SIGKILL');
    }
    const reports: FaultReport[] = run.reports;
    for (const report of reports) console.log(`${report.summary}\n  the monitor's events:\n    ${report.events.join('\n    ')}`);
    if (run.errorLines.length) console.log(`${run.errorLines.length} error lines logged:\n${run.errorLines.slice(0, 5).join('\n')}`);
    const seconds = (ms: number | undefined) => (ms === undefined || Number.isNaN(ms) || ms < 0 ? '—' : (ms / 1000).toFixed(2));
    /** From the start of the fault (the kill, or the switchover's start) to a step. */
    const step = (r: FaultReport, name: string) => r.steps?.[name];
    const meanLoad = load.length ? load.reduce((a, b) => a + b, 0) / load.length : os.loadavg()[0]!;
    console.log(
      `\n${reports[0]?.server ?? ''}, settings ${profile}, ${hogs.length} busy processes added, load average ${meanLoad.toFixed(1)} on ${os.availableParallelism()} cores (mean of the run), ` +
        `10 clients (reads and task writes), the whole run ${seconds(Date.now() - started)} s`,
    );
    console.log(
      '\n| fault | requests | answers | unanswered | acknowledged writes missing | 504 `outcome_unknown`: saved / not | longest answer | failovers begun | promoted | takes writes | first write served after that | stream missed / repeated | jobs queued before, not run after |',
    );
    console.log('|---|---|---|---|---|---|---|---|---|---|---|---|---|');
    for (const r of reports) {
      const from = step(r, 'killed') ?? step(r, 'started') ?? step(r, 'stopped') ?? 0;
      console.log(
        `| ${r.fault} | ${r.requests} | ${statusesOf(r)} | ${r.unanswered.length} | ${r.ackedButMissing.length} | ${r.unknownSaved} / ${r.unknownLost} | ${seconds(r.longestMs)} s | ${r.failovers ?? '—'} | ` +
          `${seconds((step(r, 'promoted') ?? NaN) - from)} s | ${seconds((step(r, 'writable') ?? NaN) - from)} s | ${seconds(r.writesBackMs)} s | ` +
          `${r.streamGaps.length} / ${r.streamDuplicates.length} | ${r.jobsAdded}, ${r.jobsNotRun.length} |`,
      );
    }
    return {
      settings: profile,
      busyProcesses: hogs.length,
      loadAverage: Number(meanLoad.toFixed(1)),
      seconds: (Date.now() - started) / 1000,
      errorLines: run.errorLines.length,
      ...Object.fromEntries(reports.map((r) => [r.fault, reportCounts(r)])),
    };
  },
};

export default bench;

// `npm run bench -- faults`: a database outage under load (test/support/outage.ts),
// a short one (3 s) and a long one (30 s), on Debian's PostgreSQL 15 when it
// is installed (else the embedded Postgres 18; BENCH_FAULTS_SERVER=embedded|pg15
// chooses). 10 clients read their profile in a loop; Postgres is stopped with
// a fast shutdown and started again. Reported per outage: requests answered
// (200 / 503), requests without an answer, the longest answer, and how long
// after the database's return /health was 200, requests were served and the
// realtime LISTEN delivered again. Goal: no request unanswered, every answer
// within the statement timeout (5 s here) + 2 s, all three back within 2 s.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { pg15Program } from '../../gateway/tooling/pg15.ts';
import { runOutage, type OutageReport } from '../support/outage.ts';
import type { Bench } from './harness.ts';

const bench: Bench = {
  name: 'faults',
  description: 'a database outage (3 s, then 30 s) under 10 clients: every request answered, and how soon the gateway is back',
  async standalone() {
    const server = (process.env.BENCH_FAULTS_SERVER as 'embedded' | 'pg15' | undefined) ?? (pg15Program('pg_ctl') ? 'pg15' : 'embedded');
    const reports: OutageReport[] = [];
    for (const downSeconds of [3, 30]) {
      const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'bench-faults-'));
      fs.chmodSync(dir, 0o755);
      const report = await runOutage({ dir, downSeconds, clients: 10, server });
      console.log(report.summary);
      reports.push(report);
    }
    const seconds = (ms: number) => (ms / 1000).toFixed(2);
    console.log('\n| outage | requests | 200 | 503 | unanswered | longest answer | /health back | served back | LISTEN back |');
    console.log('|---|---|---|---|---|---|---|---|---|');
    reports.forEach((r, i) =>
      console.log(
        `| ${[3, 30][i]} s (${r.server}) | ${r.requests} | ${r.ok} | ${r.refused} | ${r.unanswered.length} | ${seconds(r.longestMs)} s | ` +
          `${seconds(r.healthBackMs)} s | ${seconds(r.servedBackMs)} s | ${seconds(r.listenBackMs)} s |`,
      ),
    );
    return Object.fromEntries(
      reports.map((r, i) => [
        `down_${[3, 30][i]}s`,
        { server: r.server, requests: r.requests, ok: r.ok, refused: r.refused, unanswered: r.unanswered.length, unexpected: r.unexpected.length, longestMs: r.longestMs, healthBackMs: r.healthBackMs, servedBackMs: r.servedBackMs, listenBackMs: r.listenBackMs },
      ]),
    );
  },
};

export default bench;

// Database faults while requests are in flight (test/support/outage.ts does
// the load, the faults and the measures, shared with `npm run bench --
// faults`). For every fault: every request gets an answer (success, 503 with
// Retry-After, or for a write 504 outcome_unknown) within the statement
// timeout plus 2 s; no write answered as failed was saved; /health 200,
// requests served and the realtime LISTEN back within 2 s of the database's
// return; no gateway process lost.
//   - Postgres stopped for seconds (fast shutdown: backends terminated mid-request).
//   - Behind PgBouncer in transaction mode with two gateway processes: a stop
//     during which one gateway process is killed (its replacement starts while
//     the database is down and waits for it), a crash restart (`-m
//     immediate`), and PgBouncer itself restarting.
//   - Postgres frozen (SIGSTOP of every process: nothing answers, connections
//     stay open) under writes: requests not already running fail fast, and a
//     write whose outcome cannot be known says so (504 outcome_unknown).
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { FAIL_FAST_MS, runOutage, OUTAGE_STATEMENT_TIMEOUT_MS, type FaultReport, type OutageOptions } from '../support/outage.ts';
import { PGBOUNCER_BINARY } from '../support/pgbouncer.ts';
import { testDir } from '../support/test-dir.ts';

// On the PostgreSQL 15 pass of CI (TEST_DATABASE_URL set) the faults are of a PostgreSQL 15 server.
const server = process.env.TEST_DATABASE_URL ? 'pg15' : 'embedded';

async function run(name: string, options: Omit<OutageOptions, 'dir' | 'server'>) {
  const dir = path.join(testDir, `${name}-${crypto.randomBytes(3).toString('hex')}`);
  const result = await runOutage({ dir, server, ...options });
  for (const report of result.reports) console.log(report.summary);
  // (A gateway process killed on purpose is logged as an error by the primary.)
  expect(result.errorLines.filter((line) => !/gateway worker died/.test(line)), 'error lines the gateway logged').toEqual([]);
  return result;
}

function expectSurvived(report: FaultReport, processes = 1): void {
  expect(report.processes, `${report.fault}: gateway processes serving at the end`).toBe(processes);
  expect(report.unanswered, `${report.fault}: requests that got no answer`).toEqual([]);
  expect(report.unexpected, `${report.fault}: answers other than success, 503 with Retry-After or 504 outcome_unknown`).toEqual([]);
  expect(report.savedButFailed, `${report.fault}: writes answered as failed that were saved`).toEqual([]);
  expect(report.longestMs).toBeLessThan(OUTAGE_STATEMENT_TIMEOUT_MS + 2_000);
  expect(report.healthBackMs, `${report.fault}: /health 200 after the return`).toBeLessThan(2_000);
  expect(report.servedBackMs, `${report.fault}: served after the return`).toBeLessThan(2_000);
  expect(report.listenBackMs, `${report.fault}: LISTEN back after the return`).toBeLessThan(2_000);
  expect(report.okAfter, `${report.fault}: requests served after the return`).toBeGreaterThan(50);
  expect(report.refusedAfter, `${report.fault}: requests refused once the gateway served again (lost pool connections)`).toBe(0);
  expect(report.streamGaps, `${report.fault}: events missing from the stream`).toEqual([]);
  expect(report.streamDuplicates, `${report.fault}: events the stream delivered twice`).toEqual([]);
  expect(report.streamInOrder).toBe(true);
  expect(report.gatewayAlive, `${report.fault}: the gateway is still running`).toBe(true);
}

describe('database faults while 10 clients are in flight', () => {
  it('Postgres stopped for seconds: every request answered in bounded time, served again within 2 s', { timeout: 120_000 }, async () => {
    const {
      reports: [report],
      output,
    } = await run('outage', { clients: 10, writes: true, faults: [{ kind: 'stop', seconds: 3 }] });
    expectSurvived(report!);
    expect(report!.failedWhileDown, 'requests refused while the database was down').toBeGreaterThan(0);
    // The log: one line when it went, one when it came back (core/database/unavailable-log.ts).
    expect(output.match(/database unavailable: requests answered 503/g)).toHaveLength(1);
    expect(output).toMatch(/database available again: requests work again after \d+\.\d s/);
  });

  it.skipIf(!fs.existsSync(PGBOUNCER_BINARY))(
    'behind PgBouncer with two gateway processes: a stop (a process killed meanwhile), a crash restart, PgBouncer restarting',
    { timeout: 180_000 },
    async () => {
      const { reports, output } = await run('outage-pgbouncer', {
        clients: 10,
        writes: true,
        pgbouncer: true,
        processes: 2,
        faults: [
          { kind: 'stop', seconds: 8, killWorker: true },
          { kind: 'immediate', seconds: 0 },
          { kind: 'pgbouncer-restart', seconds: 0 },
        ],
      });
      for (const report of reports) expectSurvived(report, 2);
      expect(reports[0]!.failedWhileDown, 'requests refused while the database was down').toBeGreaterThan(0);
      // The process started in place of the killed one waited for the database, then served.
      expect(output).toMatch(/database not answering: waiting for it before starting/);
      expect(output).toMatch(/database answering: starting/);
      expect(output.match(/gateway listening on/g)).toHaveLength(3);
      // Realtime maintenance (every 5 s) failed during the 8 s stop: one line per process, no stack trace.
      expect(output).not.toMatch(/"msg":"realtime: maintenance failed"/);
      expect(output).toMatch(/database unavailable: realtime maintenance failed/);
      expect(output).toMatch(/database available again: realtime maintenance work again/);
    },
  );

  it('Postgres frozen: requests not already running fail fast, no write answered 503 was saved, a write cut off says outcome_unknown', { timeout: 120_000 }, async () => {
    const {
      reports: [report],
    } = await run('outage-freeze', { clients: 10, writes: true, faults: [{ kind: 'freeze', seconds: 8, cutOffWrites: 3 }] });
    expectSurvived(report!);
    expect(report!.slowWhileDown, `requests sent ${FAIL_FAST_MS} ms into the freeze answered later than ${FAIL_FAST_MS} ms`).toEqual([]);
    // The writes sent as it froze (and any other in flight then) committed when it thawed: their answers said they might have.
    // Not every one of the 3 need be cut off: one that found no connection ready is refused before it is sent (503,
    // not saved), and one whose backend ran before the stop reached it is answered 201. Either way no answer was wrong
    // (expectSurvived: none saved though answered as failed); at least one was cut off and said so.
    expect(report!.unknownSaved, 'writes answered outcome_unknown that were saved').toBeGreaterThanOrEqual(1);
  });
});

// A database outage while requests are in flight (issue 21): Postgres is
// stopped (fast shutdown: every backend terminated mid-request) under a load
// of 10 parallel clients, kept down for a few seconds, and started again.
// Every request must get an answer (200, or 503 with Retry-After) within the
// statement timeout plus 2 s; /health must be 200, requests served and the
// realtime LISTEN back within 2 s of the database's return. The load and
// the measures are test/support/outage.ts, shared with `npm run bench -- faults`.
import crypto from 'node:crypto';
import path from 'node:path';
import { describe, expect, inject, it } from 'vitest';
import { runOutage, OUTAGE_STATEMENT_TIMEOUT_MS } from '../support/outage.ts';

describe('Postgres stopped for seconds while 10 clients are in flight', () => {
  it('answers every request in bounded time and serves again within 2 s of the database', { timeout: 180_000 }, async () => {
    const dir = path.join(inject('testDir'), `outage-${crypto.randomBytes(3).toString('hex')}`);
    // On the PostgreSQL 15 pass of CI (TEST_DATABASE_URL set) the outage is of a PostgreSQL 15 server.
    const server = process.env.TEST_DATABASE_URL ? 'pg15' : 'embedded';
    const report = await runOutage({ dir, downSeconds: 3, clients: 10, server });
    console.log(report.summary);
    expect(report.unanswered, 'requests that got no answer').toEqual([]);
    expect(report.unexpected, 'answers other than 200 or 503 with Retry-After').toEqual([]);
    expect(report.longestMs).toBeLessThan(OUTAGE_STATEMENT_TIMEOUT_MS + 2_000);
    expect(report.failedWhileDown, 'requests refused while the database was down').toBeGreaterThan(0);
    expect(report.healthBackMs).toBeLessThan(2_000);
    expect(report.servedBackMs).toBeLessThan(2_000);
    expect(report.listenBackMs).toBeLessThan(2_000);
    expect(report.okAfter, 'requests served after the return').toBeGreaterThan(100);
    expect(report.streamGaps, 'events missing from the stream').toEqual([]);
    expect(report.streamDuplicates, 'events the stream delivered twice').toEqual([]);
    expect(report.streamInOrder).toBe(true);
    expect(report.refusedAfter, 'requests refused once the gateway served again (lost pool connections)').toBe(0);
  });
});

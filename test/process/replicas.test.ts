// Read replicas with read-your-writes (DATABASE_REPLICA_URLS,
// core/database/replicas.ts): a PostgreSQL 15 primary and an asynchronous
// streaming standby that applies WAL half a second late
// (recovery_min_apply_delay = 500ms, test/support/replication.ts), the
// gateway process on the primary with the standby as its replica.
//   - A write answers a consistency token; a read sending it back sees the
//     write at once, every time, from another session (the header, what
//     works across gateway processes) and from the writer's own session
//     without the header (kept in the process).
//   - Reads without a token go to the replica: right after a write they do
//     not see it yet (only the replica can be that late), and the replica's
//     pg_stat_database counts their transactions.
//   - A token that is not one is no error: the primary serves the read.
//   - The replica frozen (SIGSTOP: no answer, nothing closed): every read
//     answers 200, those caught on it run again on the primary.
//   - The replica stopped (pg_ctl stop -m immediate): reads keep answering
//     200, from the primary; started again: reads return to it.
//   - A session ended by logout is refused at once (401), though the replica
//     still has it open.
// Skipped without Debian's PostgreSQL 15 (.ci/run installs it).
import crypto from 'node:crypto';
import path from 'node:path';
import postgres from 'postgres';
import { describe, expect, it } from 'vitest';
import { createLogger } from '../../gateway/core/process/log.ts';
import { runMigrations } from '../../gateway/core/database/migrate.ts';
import { freePort, startGatewayProcess, stopProcess, waitUntil } from '../support/processes.ts';
import { pg15Installed, startReplicatedPair } from '../support/replication.ts';
import { testDir } from '../support/test-dir.ts';

const dirFor = (name: string) => path.join(testDir, `${name}-${crypto.randomBytes(3).toString('hex')}`);
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe.skipIf(!pg15Installed)('read replicas (PostgreSQL 15 primary + a standby applying WAL 500 ms late)', () => {
  it('sends reads to the replica, reads the writes of a client that sends its token back, and skips the replica while it is down', async () => {
    const pair = await startReplicatedPair(dirFor('replicas'), { synchronous: false, applyDelayMs: 500 });
    const primary = postgres(pair.primary.url, { max: 1, onnotice: () => {} });
    let standby = postgres(pair.standby.url, { max: 1, onnotice: () => {} });
    let gateway: Awaited<ReturnType<typeof startGatewayProcess>> | undefined;
    try {
      await runMigrations(pair.primary.url, createLogger('silent'), { includeCurrent: true });
      gateway = await startGatewayProcess({
        DATABASE_URL: pair.primary.url,
        DATABASE_REPLICA_URLS: pair.standby.url,
        REPLICA_MAX_LAG_MS: '3000',
        PORT: String(freePort()),
        DATA_DIR: dirFor('replicas-gw'),
        REALTIME_POLL_SECONDS: '600',
      });
      const base = gateway.url;
      await waitUntil(() => /read replica in use/.test(gateway!.output()), 10_000, 'the replica in use');

      const json = { 'content-type': 'application/json' };
      const email = `rr-${crypto.randomBytes(5).toString('hex')}@example.com`;
      const registered = await fetch(`${base}/api/auth/register`, { method: 'POST', headers: json, body: JSON.stringify({ email, password: 'password123' }) });
      expect(registered.status).toBe(201);
      expect(registered.headers.get('x-consistency-token')).toMatch(/^[0-9A-F]{1,8}\/[0-9A-F]{1,8}$/);
      const refreshTokens = new Map<string, string>();
      const login = async () => {
        const res = await fetch(`${base}/api/auth/login`, { method: 'POST', headers: json, body: JSON.stringify({ email, password: 'password123' }) });
        expect(res.status).toBe(200);
        const session = (await res.json()) as { access_token: string; refresh_token: string };
        refreshTokens.set(session.access_token, session.refresh_token);
        return { authorization: `Bearer ${session.access_token}` };
      };
      // Two sessions of the same user: the writer, and a reader that only has what the writer tells it (the token).
      const writer = await login();
      const reader = await login();
      // A new access token reads what was committed before it was issued: on the primary until the replica has that second.
      expect((await fetch(`${base}/api/mobile/tasks`, { headers: reader })).status).toBe(200);
      await sleep(2_500);

      let stale = 0;
      for (let i = 0; i < 20; i++) {
        const created = await fetch(`${base}/api/mobile/tasks`, { method: 'POST', headers: { ...writer, ...json }, body: JSON.stringify({ title: `rr ${i}` }) });
        expect(created.status).toBe(201);
        const token = created.headers.get('x-consistency-token');
        expect(token).toMatch(/^[0-9A-F]{1,8}\/[0-9A-F]{1,8}$/);
        const { id } = ((await created.json()) as { task: { id: string } }).task;
        // Another session sending the token back: sees the write.
        const withToken = await fetch(`${base}/api/mobile/tasks/${id}`, { headers: { ...reader, 'x-consistency-token': token! } });
        expect(withToken.status, `read ${i} with the token`).toBe(200);
        // The writer's own session, without the header: sees it too (its newest token is kept in the process).
        expect((await fetch(`${base}/api/mobile/tasks/${id}`, { headers: writer })).status, `read ${i} by the writer's session`).toBe(200);
        // Without a token: the replica, 500 ms behind, does not have it yet.
        const without = await fetch(`${base}/api/mobile/tasks/${id}`, { headers: reader });
        expect([200, 404]).toContain(without.status);
        if (without.status === 404) stale++;
      }
      // Only the replica can answer that late: reads without a token went to it.
      expect(stale, 'reads without a token that did not see the write yet (served by the replica)').toBeGreaterThanOrEqual(15);

      // The replica's own statistics count the reads: 300 more transactions than
      // the monitor's probes (at most one per 250 ms) can account for. (A
      // backend reports its counts when idle, at most once a second and at the
      // latest 10 s later: hence the wait.)
      const commits = async () => Number((await standby`select xact_commit from pg_stat_database where datname = 'app'`)[0]!.xact_commit);
      const before = await commits();
      const since = Date.now();
      for (let i = 0; i < 300; i++) expect((await fetch(`${base}/api/mobile/tasks`, { headers: reader })).status).toBe(200);
      await waitUntil(async () => (await commits()) - before - Math.ceil((Date.now() - since) / 250 + 1) >= 300, 15_000, 'the replica counting the reads');

      // A token that is not one (or too long): answered as usual, by the primary.
      for (const bad of ['garbage', '1/2/3', 'FFFFFFFFF/0', 'x'.repeat(5000)]) {
        expect((await fetch(`${base}/api/mobile/tasks`, { headers: { ...reader, 'x-consistency-token': bad } })).status, bad.slice(0, 20)).toBe(200);
      }

      /** Reads from 4 clients while `fault` runs: their statuses and the slowest. */
      const readWhile = async (fault: () => Promise<void>) => {
        const statuses: number[] = [];
        let longest = 0;
        let reading = true;
        const readers = Array.from({ length: 4 }, async () => {
          while (reading) {
            const started = Date.now();
            const res = await fetch(`${base}/api/mobile/tasks`, { headers: reader });
            await res.arrayBuffer();
            statuses.push(res.status);
            longest = Math.max(longest, Date.now() - started);
          }
        });
        await sleep(300);
        await fault();
        reading = false;
        await Promise.all(readers);
        return { failed: statuses.filter((s) => s !== 200), count: statuses.length, longest };
      };

      // The replica frozen (it stops answering, nothing is closed): the reads
      // already sent to it are cut when its pool's watch sees no answer and run
      // again on the primary; within PROBE_TIMEOUT_MS the monitor stops using it.
      const frozen = await readWhile(async () => {
        pair.freezeStandby(true);
        await sleep(2_500);
      });
      pair.freezeStandby(false);
      expect(frozen.failed, 'reads not answered 200 while the replica was frozen').toEqual([]);
      expect(frozen.count).toBeGreaterThan(20);
      expect(frozen.longest, 'slowest read while the replica was frozen (ms)').toBeLessThan(3_000);
      await waitUntil(() => /read replica in use again/.test(gateway!.output()), 10_000, 'the replica in use again after the freeze');

      // The replica stopped under reads: every read answered 200, from the primary, at once.
      const output = gateway.output().length;
      const stopped = await readWhile(async () => {
        await standby.end();
        pair.stopStandby();
        await sleep(1_500);
      });
      expect(stopped.failed, 'reads not answered 200 while the replica stopped').toEqual([]);
      expect(stopped.count).toBeGreaterThan(20);
      expect(stopped.longest, 'slowest read while the replica stopped (ms)').toBeLessThan(1_000);
      expect(gateway.output().slice(output)).toMatch(/read replica not used: (it does not answer|a read failed on it)/);

      // Started again: noticed, and reads without a token go back to it (they miss a write made just before).
      pair.startStandby();
      standby = postgres(pair.standby.url, { max: 1, onnotice: () => {} });
      await waitUntil(() => (gateway!.output().slice(output).match(/read replica in use again/g) ?? []).length > 0, 15_000, 'the replica in use again');
      await waitUntil(
        async () => {
          const created = await fetch(`${base}/api/mobile/tasks`, { method: 'POST', headers: { ...writer, ...json }, body: JSON.stringify({ title: 'rr back' }) });
          const { id } = ((await created.json()) as { task: { id: string } }).task;
          return (await fetch(`${base}/api/mobile/tasks/${id}`, { headers: reader })).status === 404;
        },
        10_000,
        'reads served by the replica again',
      );

      // A session ended by logout (an anonymous request with its refresh token) is refused at once,
      // although the replica, 500 ms late, still has it open: its reads go to the primary.
      const refreshToken = refreshTokens.get(reader.authorization.slice('Bearer '.length))!;
      const loggedOut = await fetch(`${base}/api/auth/logout`, { method: 'POST', headers: json, body: JSON.stringify({ refresh_token: refreshToken }) });
      expect(loggedOut.status).toBeLessThan(300);
      const afterLogout = await fetch(`${base}/api/mobile/tasks`, { headers: reader });
      expect(afterLogout.status, 'a read with the ended session').toBe(401);
    } finally {
      if (gateway) {
        await stopProcess(gateway.child, 20_000);
      }
      await primary.end();
      await standby.end({ timeout: 0 }).catch(() => {});
      await pair.dispose();
    }
  }, 90_000);
});

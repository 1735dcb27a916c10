// What a read replica takes off the primary (docs/operations/scaling.md#read-replicas):
// a PostgreSQL 15 primary and an asynchronous standby (test/support/replication.ts),
// a user who manages 60 communities, and the gateway process started twice on
// them in turn: without DATABASE_REPLICA_URLS (the baseline), then with the
// standby as its replica. For GET /api/mobile/profile and GET
// /api/mobile/communities (page of 50), READS requests from 4 clients at once:
// the CPU of each Postgres server (all its processes, from /proc) per request,
// and the share of the primary's CPU per read that the replica took. (The
// monitor's probes, 4 a second on each server, are counted where they run.)
// Needs Debian's PostgreSQL 15 (.ci/run installs it).
import crypto from 'node:crypto';
import os from 'node:os';
import path from 'node:path';
import postgres from 'postgres';
import { createLogger } from '../../gateway/core/process/log.ts';
import { runMigrations } from '../../gateway/core/database/migrate.ts';
import { exited, freePort, startGatewayProcess, waitUntil } from '../support/processes.ts';
import { pg15Installed, startReplicatedPair } from '../support/replication.ts';
import { postgresCpu } from './postgres-cpu.ts';
import type { Bench } from './harness.ts';

const READS = Number(process.env.BENCH_REPLICA_READS ?? 2000);
const CLIENTS = 4;

const bench: Bench = {
  name: 'replicas',
  description: `the primary's CPU per read without and with one read replica (${READS} reads of each kind, ${CLIENTS} clients)`,
  async standalone() {
    if (!pg15Installed) {
      console.log('skipped: PostgreSQL 15 is not installed');
      return { skipped: true };
    }
    const pair = await startReplicatedPair(path.join(os.tmpdir(), `bench-replicas-${crypto.randomBytes(3).toString('hex')}`), { synchronous: false });
    const primary = postgres(pair.primary.url, { max: 1, onnotice: () => {} });
    const standby = postgres(pair.standby.url, { max: 1, onnotice: () => {} });
    try {
      await runMigrations(pair.primary.url, createLogger('silent'), { includeCurrent: true });
      const [primaryCpu, standbyCpu] = [await postgresCpu(primary), await postgresCpu(standby)];
      if (!primaryCpu || !standbyCpu) throw new Error('the Postgres servers are not readable in /proc');
      const email = `bench-${crypto.randomBytes(4).toString('hex')}@example.com`;
      const results: Record<string, unknown> = {};
      const rows: string[] = [];
      let userMade = false;
      for (const withReplica of [false, true]) {
        const gateway = await startGatewayProcess({
          DATABASE_URL: pair.primary.url,
          ...(withReplica ? { DATABASE_REPLICA_URLS: pair.standby.url } : {}),
          PORT: String(freePort()),
          DATA_DIR: path.join(os.tmpdir(), `bench-replicas-gw-${crypto.randomBytes(3).toString('hex')}`),
          LOG_LEVEL: 'info',
          WORKER: 'off',
          LOGIN_MAX_FAILURES_PER_IP: '1000000',
          PASSWORD_SET_MAX_PER_IP: '1000000',
        });
        try {
          const base = gateway.url;
          const json = { 'content-type': 'application/json' };
          if (!userMade) {
            const res = await fetch(`${base}/api/auth/register`, { method: 'POST', headers: json, body: JSON.stringify({ email, password: 'password123' }) });
            if (res.status !== 201) throw new Error(`register: ${res.status}`);
            await primary`select admin.create_community('Bench ' || i, null, '{}', ${email}) from generate_series(1, 60) i`;
            userMade = true;
          }
          const login = await fetch(`${base}/api/auth/login`, { method: 'POST', headers: json, body: JSON.stringify({ email, password: 'password123' }) });
          const headers = { authorization: `Bearer ${((await login.json()) as { access_token: string }).access_token}` };
          if (withReplica) await waitUntil(() => /read replica in use/.test(gateway.output()), 10_000, 'the replica in use');
          // Past the access token's first second (its reads go to the primary until the replica has it).
          await new Promise((r) => setTimeout(r, 2_000));
          for (const [label, url] of [
            ['GET /api/mobile/profile', '/api/mobile/profile'],
            ['GET /api/mobile/communities', '/api/mobile/communities'],
          ] as const) {
            for (let i = 0; i < 50; i++) await (await fetch(`${base}${url}`, { headers })).arrayBuffer();
            const [p0, s0, t0] = [primaryCpu.cpuUs(), standbyCpu.cpuUs(), performance.now()];
            let next = 0;
            let failed = 0;
            await Promise.all(
              Array.from({ length: CLIENTS }, async () => {
                while (next < READS) {
                  next++;
                  const res = await fetch(`${base}${url}`, { headers });
                  await res.arrayBuffer();
                  if (res.status !== 200) failed++;
                }
              }),
            );
            const seconds = (performance.now() - t0) / 1000;
            const primaryUs = (primaryCpu.cpuUs() - p0) / READS;
            const replicaUs = (standbyCpu.cpuUs() - s0) / READS;
            const key = `${label}${withReplica ? ' (replica)' : ''}`;
            results[key] = { primaryUsPerRead: Math.round(primaryUs), replicaUsPerRead: Math.round(replicaUs), readsPerSecond: Math.round(READS / seconds), failed };
            rows.push(`| ${label} | ${withReplica ? 'one replica' : 'none'} | ${primaryUs.toFixed(0)} | ${replicaUs.toFixed(0)} | ${Math.round(READS / seconds)} | ${failed} |`);
          }
        } finally {
          gateway.child.kill('SIGTERM');
          await exited(gateway.child);
        }
      }
      for (const label of ['GET /api/mobile/profile', 'GET /api/mobile/communities']) {
        const before = (results[label] as { primaryUsPerRead: number }).primaryUsPerRead;
        const after = (results[`${label} (replica)`] as { primaryUsPerRead: number }).primaryUsPerRead;
        results[`${label}: share of the primary's CPU moved off`] = Number((1 - after / before).toFixed(3));
      }
      console.log('| reads | replicas | primary CPU µs/read | replica CPU µs/read | reads/s | not 200 |');
      console.log('|---|---|---|---|---|---|');
      for (const row of rows) console.log(row);
      return results;
    } finally {
      await primary.end();
      await standby.end();
      await pair.dispose();
    }
  },
};

export default bench;

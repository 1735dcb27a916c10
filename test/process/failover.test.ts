// Past one database machine: a PostgreSQL 15 primary and its synchronous
// streaming standby (test/support/replication.ts), the gateway on a
// multi-host DATABASE_URL with target_session_attrs=read-write.
//   - It starts whatever the hosts' order (a closed port and the standby
//     first): migrations, the pools, LISTEN, the MCP process and the job
//     worker (graphile-worker, whose pg takes one host) all on the primary.
//   - Under reads and writes from 10 clients, the primary's postmaster is
//     killed (SIGKILL) and the standby promoted a second later: every request
//     answered (success, 503 with Retry-After, or 504 outcome_unknown for a
//     write), writes served again within 2 s of the promotion, no
//     acknowledged write missing (by the titles answered 201), the realtime
//     stream resumed from the change log with no change missed or duplicated,
//     and jobs run on the new primary.
//   - A planned switchover under the same load (the primary made read-only,
//     drained, stopped, the standby promoted, the old primary its standby
//     again: ReplicatedPair.switchover): only successes and 503 with
//     Retry-After (a write refused by the read-only primary, SQLSTATE 25006,
//     is one; never a 500, never a 504 outcome_unknown), nothing
//     acknowledged lost, writes served again within 2 s of the promotion.
//   - A primary made read-only and left running: writes are 503 with
//     Retry-After (25006, was a 500), and the pool's connections leave it
//     (each is dropped at its first refused write; a new one passes over a
//     read-only host), so that they would find the new primary; writable
//     again, it is used again.
// Skipped without Debian's PostgreSQL 15 (.ci/run installs it).
import crypto from 'node:crypto';
import path from 'node:path';
import postgres from 'postgres';
import { describe, expect, it } from 'vitest';
import { createLogger } from '../../gateway/core/process/log.ts';
import { runMigrations } from '../../gateway/core/database/migrate.ts';
import { runOutage, OUTAGE_STATEMENT_TIMEOUT_MS } from '../support/outage.ts';
import { freePort, startGatewayProcess, stopProcess, waitUntil } from '../support/processes.ts';
import { drainWrites, pg15Installed, startReplicatedPair } from '../support/replication.ts';
import { testDir } from '../support/test-dir.ts';

const dirFor = (name: string) => path.join(testDir, `${name}-${crypto.randomBytes(3).toString('hex')}`);

/** Waits until a job added now is run (and so gone from graphile-worker's queue). */
async function expectJobRun(sql: postgres.Sql): Promise<void> {
  const key = `failover-${crypto.randomBytes(4).toString('hex')}`;
  await sql`select graphile_worker.add_job('prune_auth_failures', '{}'::json, job_key => ${key})`;
  await waitUntil(async () => (await sql`select count(*)::int as n from graphile_worker.jobs where key = ${key}`)[0]!.n === 0, 15_000, `job ${key} run`);
}

describe.skipIf(!pg15Installed)('a multi-host DATABASE_URL (PostgreSQL 15 primary + synchronous standby)', () => {
  it('starts the gateway, the MCP process, LISTEN and the job worker on the primary, whatever the hosts order', async () => {
    const pair = await startReplicatedPair(dirFor('multihost'));
    const closed = { port: freePort(), data: '', url: '' };
    const url = pair.multiHostUrl([closed, pair.standby, pair.primary]);
    const primary = postgres(pair.primary.url, { max: 2, onnotice: () => {} });
    let gateway: Awaited<ReturnType<typeof startGatewayProcess>> | undefined;
    try {
      // Migrations (graphile-migrate's pg) find the primary behind the multi-host URL.
      await runMigrations(url, createLogger('silent'), { includeCurrent: true });
      const port = freePort();
      gateway = await startGatewayProcess({ DATABASE_URL: url, PORT: String(port), DATA_DIR: dirFor('multihost-gw'), REALTIME_POLL_SECONDS: '600' });
      const base = gateway.url;
      const email = `mh-${crypto.randomBytes(5).toString('hex')}@example.com`;
      expect((await fetch(`${base}/api/auth/register`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ email, password: 'password123' }) })).status).toBe(201);
      const login = await fetch(`${base}/api/auth/login`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ email, password: 'password123' }) });
      const token = ((await login.json()) as { access_token: string }).access_token;
      const task = await fetch(`${base}/api/mobile/tasks`, { method: 'POST', headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' }, body: JSON.stringify({ title: 'multi-host' }) });
      expect(task.status).toBe(201);
      // The write is on the primary, and replicated (synchronously) to the standby.
      expect((await primary`select count(*)::int as n from app.tasks where meta->>'title' = 'multi-host'`)[0]!.n).toBe(1);
      // The MCP process (its own pool, on a port of its own) writes too: an OAuth client registration.
      await waitUntil(() => /MCP server listening/.test(gateway!.output()), 20_000, 'the MCP process');
      const mcpPort = /MCP server listening on [^\s]*:(\d+) /.exec(gateway.output())![1];
      const registered = await fetch(`http://127.0.0.1:${mcpPort}/register`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ client_name: 'multi-host', redirect_uris: ['http://localhost:9/callback'] }),
      });
      expect(registered.status, await registered.clone().text()).toBe(201);
      // Every database user of the service is connected to the primary: the pool, LISTEN, the MCP process, the job worker's liveness connection.
      await waitUntil(
        async () => {
          const names = (await primary<{ name: string }[]>`select distinct application_name as name from pg_stat_activity where datname = 'app'`).map((r) => r.name);
          return names.includes('mcp-server') && names.some((n) => n.startsWith('job-worker '));
        },
        20_000,
        'the MCP process and the job worker connected to the primary',
      );
      const onStandby = postgres(pair.standby.url, { max: 1, onnotice: () => {} });
      expect((await onStandby`select count(*)::int as n from pg_stat_activity where datname = 'app' and backend_type = 'client backend' and pid <> pg_backend_pid()`)[0]!.n).toBe(0);
      await onStandby.end();
      // graphile-worker (pg, one host) runs jobs on the primary.
      await expectJobRun(primary);
    } finally {
      if (gateway) {
        await stopProcess(gateway.child, 20_000);
      }
      await primary.end();
      await pair.dispose();
    }
  }, 120_000);

  it('answers writes 503 with Retry-After when the primary turns read-only, and its pool leaves that host', async () => {
    const pair = await startReplicatedPair(dirFor('read-only'));
    const url = pair.multiHostUrl();
    const superuser = `postgres://postgres@127.0.0.1:${pair.primary.port}/postgres`;
    const primary = postgres(pair.primary.url, { max: 1, onnotice: () => {} });
    let gateway: Awaited<ReturnType<typeof startGatewayProcess>> | undefined;
    try {
      await runMigrations(url, createLogger('silent'), { includeCurrent: true });
      gateway = await startGatewayProcess({ DATABASE_URL: url, PORT: String(freePort()), DATA_DIR: dirFor('read-only-gw'), REALTIME_POLL_SECONDS: '600', FAIR_SHARE_PER_CLIENT: '10' });
      const base = gateway.url;
      const json = { 'content-type': 'application/json' };
      const email = `ro-${crypto.randomBytes(5).toString('hex')}@example.com`;
      expect((await fetch(`${base}/api/auth/register`, { method: 'POST', headers: json, body: JSON.stringify({ email, password: 'password123' }) })).status).toBe(201);
      const login = await fetch(`${base}/api/auth/login`, { method: 'POST', headers: json, body: JSON.stringify({ email, password: 'password123' }) });
      const token = ((await login.json()) as { access_token: string }).access_token;
      const write = async (title: string) => {
        const res = await fetch(`${base}/api/mobile/tasks`, { method: 'POST', headers: { ...json, authorization: `Bearer ${token}` }, body: JSON.stringify({ title }) });
        const body = (await res.json()) as { error?: string };
        return { status: res.status, error: body.error ?? null, retryAfter: res.headers.get('retry-after') };
      };
      /**
       * The gateway pool's connections on the primary that were there before `since` (not its
       * LISTEN connection). A connection made later is the driver's own look at the host:
       * target_session_attrs=read-write reads the host's default_transaction_read_only as the
       * connection starts and moves on to the next host, so it is there for an instant only.
       */
      const poolConnections = async (since: Date) =>
        (await primary<{ n: number }[]>`
          select count(*)::int as n from pg_stat_activity
           where application_name like 'gateway iss:%' and query not ilike 'listen%' and backend_start < ${since}`)[0]!.n;
      // Every connection of the pool (10) opened, on the primary.
      const before = await Promise.all(Array.from({ length: 20 }, (_, i) => write(`before ${i}`)));
      expect(before.map((r) => r.status)).toEqual(Array(20).fill(201));
      const [{ now: readOnlyAt }] = (await primary<{ now: Date }[]>`select clock_timestamp() as now`) as unknown as [{ now: Date }];
      expect(await poolConnections(readOnlyAt)).toBeGreaterThan(5);

      await drainWrites(superuser);
      // Every connection that answers a transaction there leaves the host (the
      // settings statement reads default_transaction_read_only): refused
      // writes, 10 at a time, until none of the pool's is left. An idle one
      // stays until it is used, so the rounds are bounded, not one.
      const refused: Awaited<ReturnType<typeof write>>[] = [];
      for (let round = 0; round < 20 && (await poolConnections(readOnlyAt)) > 0; round++) {
        refused.push(...(await Promise.all(Array.from({ length: 10 }, (_, i) => write(`during ${round}-${i}`)))));
      }
      expect(refused.length).toBeGreaterThan(0);
      expect(refused.filter((r) => !(r.status === 503 && r.error === 'service_unavailable' && r.retryAfter !== null)), 'writes answered other than 503 with Retry-After').toEqual([]);
      expect(await poolConnections(readOnlyAt), 'pool connections left on the read-only host').toBe(0);
      expect((await primary`select count(*)::int as n from app.tasks where meta->>'title' like 'during %'`)[0]!.n).toBe(0);

      // Writable again: the pool connects to it again.
      await primary.unsafe('alter system reset default_transaction_read_only');
      await primary`select pg_reload_conf()`;
      await waitUntil(async () => (await write('after')).status === 201, 10_000, 'a write served again');
    } finally {
      if (gateway) await stopProcess(gateway.child, 20_000);
      await primary.end();
      await pair.dispose();
    }
  }, 120_000);

  it('follows the primary when it is killed and the standby promoted, under writes from 10 clients', async () => {
    const { reports, errorLines } = await runOutage({
      dir: dirFor('failover'),
      server: 'pg15-standby',
      clients: 10,
      writes: true,
      jobs: 20,
      faults: [{ kind: 'failover', seconds: 1 }],
    });
    const [report] = reports;
    console.log(report!.summary);
    expect(errorLines, 'error lines the gateway logged').toEqual([]);
    expect(report!.unanswered, 'requests that got no answer').toEqual([]);
    expect(report!.unexpected, 'answers other than success, 503 with Retry-After or 504 outcome_unknown').toEqual([]);
    expect(report!.longestMs).toBeLessThan(OUTAGE_STATEMENT_TIMEOUT_MS + 2_000);
    expect(report!.ackedButMissing, 'writes answered 201 that are not in the database').toEqual([]);
    expect(report!.savedButFailed, 'writes answered as failed that were saved').toEqual([]);
    expect(report!.servedBackMs, 'served again after the promotion').toBeLessThan(2_000);
    expect(report!.okAfter).toBeGreaterThan(50);
    expect(report!.refusedAfter, 'requests refused once served again').toBe(0);
    expect(report!.listenBackMs, 'LISTEN back after the promotion').toBeLessThan(2_000);
    expect(report!.streamGaps, 'changes missing from the stream').toEqual([]);
    expect(report!.streamDuplicates, 'changes the stream delivered twice').toEqual([]);
    expect(report!.streamInOrder).toBe(true);
    expect(report!.jobsAdded).toBe(20);
    expect(report!.jobsNotRun, 'jobs added before the failover and not run after it').toEqual([]);
    expect(report!.gatewayAlive).toBe(true);
  }, 180_000);

  it('answers only 2xx or 503 with Retry-After during a planned switchover, under writes from 10 clients', async () => {
    const { reports, errorLines } = await runOutage({
      dir: dirFor('switchover'),
      server: 'pg15-standby',
      clients: 10,
      writes: true,
      jobs: 20,
      faults: [{ kind: 'switchover', seconds: 0 }],
    });
    const [report] = reports;
    console.log(report!.summary);
    expect(errorLines, 'error lines the gateway logged').toEqual([]);
    expect(report!.unanswered, 'requests that got no answer').toEqual([]);
    const statuses = Object.keys(report!.byStatus);
    expect(statuses.filter((s) => !/^(200|201|503 service_unavailable)$/.test(s)), 'answers other than success and 503').toEqual([]);
    expect(report!.unexpected, 'a 503 without Retry-After').toEqual([]);
    expect(report!.byStatus['503 service_unavailable'] ?? 0, 'writes refused while the primary was read-only').toBeGreaterThan(0);
    expect(report!.ackedButMissing, 'writes answered 201 that are not in the database').toEqual([]);
    expect(report!.savedButFailed, 'writes answered as failed that were saved').toEqual([]);
    expect(report!.writesBackMs, 'a write served after the promotion').toBeGreaterThanOrEqual(0);
    expect(report!.writesBackMs, 'writes served again after the promotion').toBeLessThan(2_000);
    expect(report!.refusedAfter, 'requests refused once served again').toBe(0);
    expect(report!.streamGaps, 'changes missing from the stream').toEqual([]);
    expect(report!.streamDuplicates, 'changes the stream delivered twice').toEqual([]);
    expect(report!.jobsNotRun, 'jobs added before the switchover and not run after it').toEqual([]);
    expect(report!.gatewayAlive).toBe(true);
  }, 180_000);
});

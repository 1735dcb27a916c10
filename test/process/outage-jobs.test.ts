// Jobs that end while the database is away: a gateway process (running its
// job worker in-process, as by default) and an `npm run worker` process on a
// Postgres of their own, webhook deliveries failing (the receiver answers 500
// after a pause, so some are always in flight) and jobs completing, when the
// database stops. graphile-worker records a job's result once it has ended;
// with the database gone that write fails at once (its withRetries retries
// only serialization failures and deadlocks, 50 ms to 5 s apart, and 57P03
// "starting up", EHOSTUNREACH and ETIMEDOUT, 3 s to 120 s apart, up to 100
// times; a refused connection, 57P01 or "Connection terminated" is not
// retried, so a stop of a few seconds is longer than its retries), and the
// worker must
// neither die of it (an unhandled rejection ends a Node process) nor lose the
// job: it runs again once the database is back (at least once, as documented
// for webhooks). The receiver turns healthy while the database is down;
// every delivery queued before the stop must reach it afterwards, and the
// processes must carry on (a delivery queued after the return too).
import crypto from 'node:crypto';
import path from 'node:path';
import postgres from 'postgres';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createLogger } from '../../gateway/core/process/log.ts';
import { runMigrations } from '../../gateway/core/database/migrate.ts';
import { stoppableServer, type Server } from '../support/outage.ts';
import { freePort, startGatewayProcess, startWorkerProcess, stopProcess, waitUntil, type GatewayProcess } from '../support/processes.ts';
import { WebhookReceiver } from '../support/webhook-receiver.ts';
import { testDir } from '../support/test-dir.ts';

// On the PostgreSQL 15 pass of CI (TEST_DATABASE_URL set) the database is a PostgreSQL 15 server.
const kind = process.env.TEST_DATABASE_URL ? 'pg15' : 'embedded';
const HOOKS = 6;
const DOWN_SECONDS = 4;

let server: Server;
let gateway: GatewayProcess;
let worker: GatewayProcess;
let workerEnv: Record<string, string>;
const receiver = new WebhookReceiver();

beforeAll(async () => {
  await receiver.start();
  server = await stoppableServer(path.join(testDir, `outage-jobs-${crypto.randomBytes(3).toString('hex')}`), kind);
  // With DATABASE_URL the processes apply committed migrations only: current/ too, first.
  await runMigrations(server.url, createLogger('silent'), { includeCurrent: true });
  workerEnv = {
    DATABASE_URL: server.url,
    WEBHOOK_ALLOW_PRIVATE_TARGETS: '1',
    // Many quick retries: a delivery is never given up during the test.
    WEBHOOK_RETRY_SCHEDULE: Array(40).fill('0.2').join(','),
    // graphile-worker's info lines (a result recorded after retries) are logged at debug.
    LOG_LEVEL: 'debug',
    WORKER_CONCURRENCY: '4',
    // Every endpoint of the community at once (the default share is smaller): more deliveries in flight.
    WEBHOOK_COMMUNITY_CONCURRENCY: '8',
  };
  gateway = await startGatewayProcess({ ...workerEnv, PORT: String(freePort()) });
  worker = await startWorkerProcess(workerEnv);
}, 120_000);

afterAll(async () => {
  if (gateway) await stopProcess(gateway.child, 5_000);
  if (worker) await stopProcess(worker.child, 5_000);
  await server?.dispose();
  await receiver.stop();
}, 60_000);

async function call(method: string, urlPath: string, token?: string, body?: unknown) {
  const res = await fetch(gateway.url + urlPath, {
    method,
    headers: { ...(token ? { authorization: `Bearer ${token}` } : {}), ...(body ? { 'content-type': 'application/json' } : {}) },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await res.text();
  return { status: res.status, body: text ? JSON.parse(text) : undefined };
}

/** Requests to the receiver still waiting for their (0.8 s late) answer. */
const inFlight = () => receiver.received.filter((r) => r.at > Date.now() - 600).length;
const alive = (p: GatewayProcess) => p.child.exitCode === null && p.child.signalCode === null;
const tail = (output: string) => output.split('\n').slice(-15).join('\n');

/** A community with HOOKS endpoints at `prefix`-0…, failing slowly (500 after 0.8 s: deliveries are in flight at any moment). */
async function failingHooks(admin: postgres.Sql, prefix: string) {
  const email = `outage-jobs-${crypto.randomBytes(4).toString('hex')}@example.com`;
  expect((await call('POST', '/api/auth/register', undefined, { email, password: 'password123' })).status).toBe(201);
  const login = await call('POST', '/api/auth/login', undefined, { email, password: 'password123' });
  const [community] = await admin<{ id: string }[]>`select admin.create_community(${`Outage jobs ${prefix}`}, null, '{}', ${email}) as id`;
  const paths = Array.from({ length: HOOKS }, (_, i) => `${prefix}-${i}`);
  for (const p of paths) {
    receiver.answer(p, [], { status: 500, delayMs: 800 });
    const res = await call('POST', '/api/v1/platform/webhooks', login.body.access_token, { community_id: community!.id, url: receiver.url(p), events: ['event.created'] });
    expect(res.status).toBe(201);
  }
  return { communityId: community!.id, paths };
}

function expectNoUnhandled(name: string, output: string): void {
  expect(output, `${name}: an unhandled rejection`).not.toMatch(/unhandled|UnhandledPromiseRejection/i);
  // No stack spam: graphile-worker's console.trace / multi-line stacks.
  expect(output, `${name}: a stack trace`).not.toMatch(/^\s+at .+:\d+:\d+\)?$/m);
}

describe('the database stops while jobs end', () => {
  it('the gateway and `npm run worker` survive, and every webhook delivery queued before the stop is delivered after it', { timeout: 90_000 }, async () => {
    let admin = postgres(server.url, { max: 2, onnotice: () => {} });
    const { communityId, paths } = await failingHooks(admin, '/failing');
    const community = { id: communityId };
    const before = Array.from({ length: 5 }, (_, i) => `Before ${i}`);
    for (const title of before) await admin`select admin.create_event(${community!.id}, ${title}, now() + interval '1 day')`;
    // Failing deliveries on every endpoint, retried again and again; jobs completing (the periodic ones, and these).
    for (const p of paths) await receiver.waitFor(p, (rs) => rs.length >= 3, { timeoutMs: 20_000 });
    await admin`select graphile_worker.add_job('prune_auth_failures', '{}'::json) from generate_series(1, 10)`;
    await admin.end({ timeout: 1 });

    // Stopped while deliveries are in flight (asked for within the last 0.6 s; answered after 0.8 s).
    await waitUntil(() => inFlight() >= 2, 10_000, 'deliveries in flight');
    await server.stop('fast');
    // The endpoints recover while the database is away.
    for (const p of paths) receiver.answer(p, [], { status: 200 });
    await new Promise((r) => setTimeout(r, DOWN_SECONDS * 1000));
    await server.start();
    const upAt = Date.now();

    admin = postgres(server.url, { max: 2, onnotice: () => {} });
    try {
      // Both processes alive, the gateway answering.
      await waitUntil(
        async () => {
          for (const p of [gateway, worker]) expect(alive(p), `a process exited:\n${tail(p.output())}`).toBe(true);
          return (await fetch(`${gateway.url}/health`).catch(() => null))?.status === 200;
        },
        10_000,
        '/health 200',
      );
      // Every delivery queued before the stop delivered (none lost), and one queued after the return.
      await admin`select admin.create_event(${community!.id}, 'After', now() + interval '1 day')`;
      const titles = [...before, 'After'];
      for (const p of paths) {
        await receiver.waitFor(p, (rs) => titles.every((t) => rs.some((r) => r.at >= upAt && r.payload.data.title === t)), {
          timeoutMs: 30_000,
          what: `every event delivered to ${p} after the return`,
        });
      }
      await waitUntil(
        async () => (await admin`select count(*)::int as n from app.webhook_deliveries where status <> 'succeeded'`)[0]!.n === 0,
        15_000,
        'every delivery recorded as succeeded',
      );
      const [succeeded] = await admin<{ n: number }[]>`select count(*)::int as n from app.webhook_deliveries where status = 'succeeded'`;
      expect(succeeded!.n).toBe(HOOKS * titles.length);
      // The jobs added before the stop ran, each recorded as done.
      await waitUntil(
        async () => (await admin`select count(*)::int as n from graphile_worker.jobs where task_identifier = 'prune_auth_failures'`)[0]!.n === 0,
        15_000,
        'the jobs added before the stop done',
      ).catch(async (err: Error) => {
        const left = await admin`select id, locked_by, locked_at, attempts, max_attempts, last_error, run_at from graphile_worker.jobs where task_identifier = 'prune_auth_failures'`;
        throw new Error(`${err.message}: ${JSON.stringify(left)}\n${tail(gateway.output())}\n${tail(worker.output())}`);
      });
    } finally {
      await admin.end({ timeout: 1 });
    }
    expect(alive(gateway), `the gateway exited:\n${gateway.output()}`).toBe(true);
    expect(alive(worker), `the worker exited:\n${worker.output()}`).toBe(true);
    // Results that could not be written while the database was away were written once it was back.
    expect(`${gateway.output()}${worker.output()}`).toMatch(/Recording the (failure|completion) of job \d+ succeeded after \d+ attempts/);
    expectNoUnhandled('gateway', gateway.output());
    expectNoUnhandled('worker', worker.output());
  });

  it('`npm run worker` stopped (SIGTERM) while the database is away exits cleanly; the jobs whose results it could not write run again', { timeout: 90_000 }, async () => {
    let admin = postgres(server.url, { max: 2, onnotice: () => {} });
    const { communityId, paths } = await failingHooks(admin, '/stopped');
    await admin`select admin.create_event(${communityId}, 'Stopped', now() + interval '1 day')`;
    for (const p of paths) await receiver.waitFor(p, (rs) => rs.length >= 2, { timeoutMs: 20_000 });
    await admin.end({ timeout: 1 });

    await waitUntil(() => inFlight() >= 2, 10_000, 'deliveries in flight');
    await server.stop('fast');
    for (const p of paths) receiver.answer(p, [], { status: 200 });
    await new Promise((r) => setTimeout(r, 1_000));
    // Stopped before the database returns: its jobs' results cannot be written; it gives them up and exits.
    const stopped = worker;
    const started = Date.now();
    await stopProcess(stopped.child, 20_000);
    expect(stopped.child.exitCode, `the worker's exit:\n${tail(stopped.output())}`).toBe(0);
    expect(Date.now() - started).toBeLessThan(15_000);
    expectNoUnhandled('worker', stopped.output());
    await server.start();
    const upAt = Date.now();

    // A worker that starts frees the jobs of workers that are gone (private.jobs_recover): the deliveries are sent.
    worker = await startWorkerProcess({ ...workerEnv });
    admin = postgres(server.url, { max: 2, onnotice: () => {} });
    try {
      for (const p of paths) {
        await receiver.waitFor(p, (rs) => rs.some((r) => r.at >= upAt && r.payload.data.title === 'Stopped'), {
          timeoutMs: 30_000,
          what: `the delivery to ${p} after the return`,
        });
      }
      await waitUntil(
        async () =>
          (await admin`select count(*)::int as n from app.webhook_deliveries d join app.webhook_endpoints e on e.id = d.endpoint_id where e.community_id = ${communityId} and d.status <> 'succeeded'`)[0]!.n === 0,
        15_000,
        'every delivery recorded as succeeded',
      );
    } finally {
      await admin.end({ timeout: 1 });
    }
    expect(alive(gateway), `the gateway exited:\n${gateway.output()}`).toBe(true);
    expectNoUnhandled('gateway', gateway.output());
  });
});

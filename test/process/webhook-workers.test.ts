// Webhook delivery by real `npm run worker` processes, on a database of its
// own (a gateway with WORKER=off serves the REST calls, so that the workers
// started here are the only ones): the address rule without
// WEBHOOK_ALLOW_PRIVATE_TARGETS (at registration, and at send time after DNS
// resolution), a worker killed with SIGKILL in the middle of a delivery (the
// delivery is not lost: the next worker sends it again, same webhook-id), and
// two workers at once (every delivery exactly once, each endpoint in order).
import { spawn, type ChildProcess } from 'node:child_process';
import crypto from 'node:crypto';
import postgres from 'postgres';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startJobWorker } from '../../gateway/jobs/worker.ts';
import { createLogger } from '../../gateway/core/process/log.ts';
import { startGateway, type RunningGateway } from '../../gateway/server.ts';
import { databaseServer, databaseUrl } from '../helpers.ts';
import { startTestEnvironment, type TestEnvironment } from '../support/environment.ts';
import { exited, projectRoot } from '../support/processes.ts';
import { verifyWebhook, WebhookReceiver } from '../support/webhook-receiver.ts';
import { PUBLIC_ADDRESSES, REFUSED_ADDRESSES, urlHost } from '../support/special-addresses.ts';
import { NO_ANSWER } from '../../gateway/jobs/webhooks.ts';
import { eventually } from '../support/wait.ts';

let env: TestEnvironment;
let strict: RunningGateway;
let sql: postgres.Sql;
const receiver = new WebhookReceiver();
const children: ChildProcess[] = [];

beforeAll(async () => {
  await receiver.start();
  // A database of its own on the test server; its gateway runs no worker (and allows private targets).
  env = await startTestEnvironment({ ...databaseServer, env: { WORKER: 'off' } });
  // A second gateway on it WITHOUT the allow flag, for the registration rule.
  strict = await startGateway(
    { ...env.config, port: 0, webhooks: { ...env.config.webhooks, allowPrivateTargets: false } },
    env.databaseUrl,
    createLogger('silent'),
    { includeCurrentMigration: true },
  );
  sql = postgres(env.databaseUrl, { max: 4, onnotice: () => {} });
  await setUpManager();
}, 180_000);

afterAll(async () => {
  for (const child of children) if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
  await sql?.end({ timeout: 5 });
  await strict?.close();
  await env?.stop();
  await receiver.stop();
}, 60_000);

interface Worker {
  child: ChildProcess;
  output: () => string;
}

/** `npm run worker` (its entry point, so that SIGKILL reaches node itself) on this file's database. */
function startWorker(extra: Record<string, string> = {}): Promise<Worker> {
  const childEnv: Record<string, string | undefined> = {
    ...process.env,
    DATABASE_URL: env.databaseUrl,
    LOG_LEVEL: 'info',
    WEBHOOK_RETRY_SCHEDULE: '1,1',
    WORKER_CONCURRENCY: '4',
    ...extra,
  };
  if (!('WEBHOOK_ALLOW_PRIVATE_TARGETS' in extra)) delete childEnv.WEBHOOK_ALLOW_PRIVATE_TARGETS;
  const child = spawn(process.execPath, ['--import', 'tsx', 'gateway/worker-main.ts'], {
    cwd: projectRoot,
    env: childEnv,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  children.push(child);
  let output = '';
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`worker did not start:\n${output}`)), 60_000);
    const onData = (chunk: Buffer) => {
      output += chunk.toString();
      if (output.includes('"msg":"job worker running"')) {
        clearTimeout(timer);
        resolve({ child, output: () => output });
      }
    };
    child.stdout!.on('data', onData);
    child.stderr!.on('data', onData);
    child.on('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`worker exited with ${code}:\n${output}`));
    });
  });
}

async function stopWorker(worker: Worker): Promise<void> {
  worker.child.kill('SIGTERM');
  expect(await exited(worker.child)).toBe(0);
}

async function call(base: string, method: string, path: string, token?: string, body?: unknown) {
  const res = await fetch(base + path, {
    method,
    headers: { ...(token ? { authorization: `Bearer ${token}` } : {}), ...(body ? { 'content-type': 'application/json' } : {}) },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await res.text();
  return { status: res.status, body: text ? JSON.parse(text) : undefined, text };
}

let manager: { token: string; communityId: string };

async function setUpManager(): Promise<void> {
  const email = `hooks-${crypto.randomBytes(5).toString('hex')}@example.com`;
  const password = 'correct horse battery';
  expect((await call(env.baseUrl, 'POST', '/api/auth/register', undefined, { email, password })).status).toBe(201);
  const login = await call(env.baseUrl, 'POST', '/api/auth/login', undefined, { email, password });
  const [row] = await sql<{ id: string }[]>`select admin.create_community('Worker club', null, '{}', ${email}) as id`;
  manager = { token: login.body.access_token, communityId: row!.id };
}

async function register(base: string, url: string, events = ['event.created']) {
  return call(base, 'POST', '/api/v1/platform/webhooks', manager.token, { community_id: manager.communityId, url, events });
}

async function deliveriesOf(hookId: string) {
  const res = await call(env.baseUrl, 'GET', `/api/v1/platform/webhooks/${hookId}/deliveries?limit=100`, manager.token);
  expect(res.status).toBe(200);
  return res.body.data as any[];
}

describe('no server-side request forgery (no WEBHOOK_ALLOW_PRIVATE_TARGETS)', () => {
  it('refuses http, user info and literal loopback, private, link-local, multicast and metadata addresses at registration', async () => {
    for (const url of [
      'http://example.com/hook',
      'https://127.0.0.1/hook',
      'https://127.1/hook',
      'https://2130706433/hook',
      'https://[::1]/hook',
      'https://[::ffff:127.0.0.1]/hook',
      'https://0.0.0.0/hook',
      'https://10.1.2.3/hook',
      'https://172.16.0.1/hook',
      'https://192.168.1.1/hook',
      'https://169.254.169.254/latest/meta-data/',
      'https://[fe80::1]/hook',
      'https://[fd00:ec2::254]/hook',
      'https://100.100.100.200/hook',
      'https://224.0.0.1/hook',
      'https://user:secret@example.com/hook',
    ]) {
      const res = await register(strict.url, url);
      expect(res.status, url).toBe(422);
      expect(res.body.error, url).toBe('invalid_url');
    }
    // Names are judged when they are resolved, at every send.
    for (const url of ['https://example.com/hook', `https://localhost:8443/hook`, 'https://93.184.215.14/hook']) {
      const res = await register(strict.url, url);
      expect(res.status, url).toBe(201);
      await call(strict.url, 'DELETE', `/api/v1/platform/webhooks/${res.body.data.id}`, manager.token);
    }
  });

  it('refuses every special range, IPv4-compatible [::127.0.0.1] included, and accepts public addresses (the table)', async () => {
    const answers = [];
    for (const [address] of REFUSED_ADDRESSES) {
      const res = await register(strict.url, `https://${urlHost(address)}/hook`);
      answers.push({ address, status: res.status, error: res.body.error, message: res.body.message });
    }
    // Every one refused alike (nothing about the address beyond what the caller sent).
    expect(answers.filter((a) => a.status !== 422)).toEqual([]);
    expect(answers).toEqual(
      REFUSED_ADDRESSES.map(([address]) => ({
        address,
        status: 422,
        error: 'invalid_url',
        message: 'url must not name a private, loopback, link-local or special-purpose address',
      })),
    );
    for (const address of PUBLIC_ADDRESSES) {
      const res = await register(strict.url, `https://${urlHost(address)}/hook`);
      expect(res.status, address).toBe(201);
      await call(strict.url, 'DELETE', `/api/v1/platform/webhooks/${res.body.data.id}`, manager.token);
    }
    // The change of a URL goes through the same rule.
    const created = await register(strict.url, 'https://hooks.example.com/hook');
    const patched = await call(strict.url, 'PATCH', `/api/v1/platform/webhooks/${created.body.data.id}`, manager.token, {
      url: 'https://[::127.0.0.1]/hook',
    });
    expect(patched.status).toBe(422);
    await call(strict.url, 'DELETE', `/api/v1/platform/webhooks/${created.body.data.id}`, manager.token);
  });

  it('allows only the usual HTTPS ports (443, 8443), or the list WEBHOOK_ALLOWED_PORTS gives', async () => {
    for (const [url, status] of [
      ['https://1.1.1.1:6379/', 422],
      ['https://hooks.example.com:22/', 422],
      ['https://hooks.example.com:80/', 422],
      ['https://hooks.example.com:9443/', 422],
      ['https://hooks.example.com/', 201],
      ['https://hooks.example.com:443/', 201],
      ['https://hooks.example.com:8443/', 201],
    ] as const) {
      const res = await register(strict.url, url);
      expect(res.status, url).toBe(status);
      if (status === 422) expect(res.body.message, url).toBe('url must use the port 443 or 8443');
      else await call(strict.url, 'DELETE', `/api/v1/platform/webhooks/${res.body.data.id}`, manager.token);
    }
    const custom = await startGateway(
      { ...env.config, port: 0, webhooks: { ...env.config.webhooks, allowPrivateTargets: false, allowedPorts: [9443] } },
      env.databaseUrl,
      createLogger('silent'),
      { includeCurrentMigration: true },
    );
    try {
      expect((await register(custom.url, 'https://hooks.example.com/')).status).toBe(422);
      const ok = await register(custom.url, 'https://hooks.example.com:9443/');
      expect(ok.status).toBe(201);
      await call(custom.url, 'DELETE', `/api/v1/platform/webhooks/${ok.body.data.id}`, manager.token);
    } finally {
      await custom.close();
    }
  });

  it('refuses at send time a name that resolves to loopback, and a literal loopback address registered with the flag on', async () => {
    const worker = await startWorker({ WEBHOOK_RETRY_SCHEDULE: '0.2' });
    try {
      // `localhost` passes registration (a name), then resolves to 127.0.0.1 or ::1.
      const byName = await register(strict.url, `https://localhost:8443/ssrf-name`);
      expect(byName.status).toBe(201);
      // Registered where the flag was on; this worker has it off.
      const literal = await register(env.baseUrl, `https://127.0.0.1:${receiver.listeningPort}/ssrf-literal`);
      expect(literal.status).toBe(201);
      for (const hook of [byName.body.data, literal.body.data]) {
        expect((await call(env.baseUrl, 'POST', `/api/v1/platform/webhooks/${hook.id}/ping`, manager.token)).status).toBe(202);
      }
      const [nameFailed] = await eventually('the name refused', async () => {
        const ds = await deliveriesOf(byName.body.data.id);
        return ds[0]?.status === 'failed' && ds;
      });
      // One generic record: no resolved address in it.
      expect(nameFailed).toMatchObject({ attempts: 2, last_status_code: null, last_error: NO_ANSWER });
      const [literalFailed] = await eventually('the literal refused', async () => {
        const ds = await deliveriesOf(literal.body.data.id);
        return ds[0]?.status === 'failed' && ds;
      });
      expect(literalFailed.last_error).toBe(NO_ANSWER);
      // The operator's log has the reasons.
      expect(worker.output()).toMatch(/"reason":"refused: localhost resolves to (127\.0\.0\.1|::1), which is loopback"/);
      expect(worker.output()).toContain('"reason":"refused: port');
      // Nothing reached the receiver.
      expect(receiver.at('/ssrf-name')).toHaveLength(0);
      expect(receiver.at('/ssrf-literal')).toHaveLength(0);
      for (const hook of [byName.body.data, literal.body.data]) {
        await call(env.baseUrl, 'DELETE', `/api/v1/platform/webhooks/${hook.id}`, manager.token);
      }
    } finally {
      await stopWorker(worker);
    }
  });
});

describe('worker processes (WEBHOOK_ALLOW_PRIVATE_TARGETS=1)', () => {
  it('a worker killed in the middle of a delivery loses nothing: the next worker sends it again, same webhook-id', async () => {
    const path = '/killed';
    receiver.answer(path, [{ hang: true }]);
    const hook = (await register(env.baseUrl, receiver.url(path))).body.data;
    const first = await startWorker({ WEBHOOK_ALLOW_PRIVATE_TARGETS: '1' });
    await call(env.baseUrl, 'POST', `/api/v1/platform/webhooks/${hook.id}/ping`, manager.token);
    const [request] = await receiver.waitFor(path, (rs) => rs.length >= 1);
    first.child.kill('SIGKILL');
    await exited(first.child);
    const [during] = await deliveriesOf(hook.id);
    expect(during).toMatchObject({ status: 'pending', attempts: 1, last_status_code: null });

    // The job is still locked by the dead worker; the next worker frees it at its start.
    const second = await startWorker({ WEBHOOK_ALLOW_PRIVATE_TARGETS: '1' });
    try {
      expect(second.output()).toMatch(/freed the jobs of workers that are gone/);
      const [, again] = await receiver.waitFor(path, (rs) => rs.length >= 2);
      expect(again!.headers['webhook-id']).toBe(request!.headers['webhook-id']);
      expect(again!.body).toBe(request!.body);
      expect(verifyWebhook(hook.secret, again!)).toEqual(request!.payload);
      const done = await eventually('the delivery succeeded', async () => {
        const [d] = await deliveriesOf(hook.id);
        return d?.status === 'succeeded' && d;
      });
      expect(done.attempts).toBe(2);
      // Two workers at once: every delivery exactly once, each endpoint in the order of its changes.
      const third = await startWorker({ WEBHOOK_ALLOW_PRIVATE_TARGETS: '1' });
      try {
        const hooks = [];
        for (let i = 0; i < 4; i++) hooks.push({ path: `/race-${i}`, ...(await register(env.baseUrl, receiver.url(`/race-${i}`))).body.data });
        const titles = Array.from({ length: 10 }, (_, i) => `Race ${i}`);
        for (const title of titles) await sql`select admin.create_event(${manager.communityId}, ${title}, now() + interval '1 day')`;
        for (const h of hooks) {
          const got = await receiver.waitFor(h.path, (rs) => rs.length >= titles.length, { timeoutMs: 30_000 });
          expect(got.map((r) => r.payload.data.title)).toEqual(titles);
          for (const r of got) expect(verifyWebhook(h.secret, r)).toEqual(r.payload);
        }
        // No second copy arrives later.
        await new Promise((resolve) => setTimeout(resolve, 1500));
        const ids = hooks.flatMap((h) => receiver.at(h.path).map((r) => r.headers['webhook-id']));
        expect(ids).toHaveLength(hooks.length * titles.length);
        expect(new Set(ids).size).toBe(ids.length);
      } finally {
        await stopWorker(third);
      }
    } finally {
      await stopWorker(second);
    }
  });

  it('a worker killed with SIGKILL in a stream of deliveries: the next worker resumes within seconds, and no job is left failed without a reason', { timeout: 120_000 }, async () => {
    // Deliveries committed while a job sends to the endpoint each schedule
    // the endpoint's job: graphile-worker, meeting that job locked, takes its
    // last attempt (attempts = max_attempts) and adds a new one, which finds
    // the endpoint's lock taken and ends at once (the sender looks again when
    // it lets go). Killed, the sender let go of nothing: its job was left
    // failed with no error, and the endpoint to the minute sweep.
    const path = '/killed-stream';
    receiver.answer(path, [], { delayMs: 100 });
    const hook = (await register(env.baseUrl, receiver.url(path))).body.data;
    const first = await startWorker({ WEBHOOK_ALLOW_PRIVATE_TARGETS: '1' });
    const titles = Array.from({ length: 30 }, (_, i) => `Stream ${i}`);
    for (const title of titles) {
      await sql`select admin.create_event(${manager.communityId}, ${title}, now() + interval '1 day')`;
      await new Promise((r) => setTimeout(r, 30));
    }
    // Half way through the sending, which the jobs added meanwhile left to the first job.
    await receiver.waitFor(path, (rs) => rs.length >= 15, { timeoutMs: 30_000 });
    first.child.kill('SIGKILL');
    await exited(first.child);
    await new Promise((r) => setTimeout(r, 1_000));
    const before = receiver.at(path).length;
    const restarted = Date.now();
    const second = await startWorker({ WEBHOOK_ALLOW_PRIVATE_TARGETS: '1' });
    try {
      await receiver.waitFor(path, (rs) => rs.length > before, { timeoutMs: 90_000 });
      const resumedMs = Date.now() - restarted;
      const got = await receiver.waitFor(path, (rs) => titles.every((t) => rs.some((r) => r.payload.data.title === t)), { timeoutMs: 90_000 });
      console.log(`deliveries resumed ${resumedMs} ms after the restart; ${got.length} requests for ${titles.length} deliveries`);
      expect(resumedMs, 'ms from the restart to the next delivery').toBeLessThan(10_000);
      // In order, each at least once (the one cut off by the kill again).
      const firstSeen = [...new Set(got.map((r) => r.payload.data.title as string))];
      expect(firstSeen).toEqual(titles);
      const failed = await sql`
        select id, task_identifier, attempts, max_attempts, last_error from graphile_worker.jobs
         where attempts >= max_attempts and last_error is null`;
      expect(failed, 'jobs failed without a recorded reason').toEqual([]);
    } finally {
      await stopWorker(second);
      await call(env.baseUrl, 'DELETE', `/api/v1/platform/webhooks/${hook.id}`, manager.token);
    }
  });

  it('hands an endpoint from job to job without losing a delivery (one job sends a share, then a new job goes on)', async () => {
    // In this process, with a share of 2 deliveries a job and 8 jobs at once:
    // each hand-over races the new job against the old one letting go of the
    // endpoint's lock. (A job that added its successor while still holding
    // the lock lost deliveries here: the successor found the lock taken.)
    const worker = await startJobWorker({
      connectionString: env.databaseUrl,
      concurrency: 8,
      webhooks: { allowPrivateTargets: true, retrySchedule: [1] },
      changeLogRetentionSeconds: 86_400,
      webhookBatchSize: 2,
      log: createLogger('silent'),
    });
    try {
      const path = '/hand-over';
      const hook = (await register(env.baseUrl, receiver.url(path))).body.data;
      const n = 200;
      await sql`select admin.create_event(${manager.communityId}, 'Hand-over ' || i, now() + interval '1 day') from generate_series(1, ${n}) i`;
      const got = await receiver.waitFor(path, (rs) => rs.length >= n, { timeoutMs: 30_000 });
      expect(got.map((r) => r.payload.data.title)).toEqual(Array.from({ length: n }, (_, i) => `Hand-over ${i + 1}`));
      for (const r of got.slice(0, 3)) expect(verifyWebhook(hook.secret, r)).toEqual(r.payload);
    } finally {
      await worker.stop();
    }
  });

  it('runs the periodic prunes: its crontab knows each, and a prune job does its work', async () => {
    const worker = await startWorker();
    try {
      const known = await sql<{ identifier: string }[]>`select identifier from graphile_worker._private_known_crontabs order by 1`;
      expect(known.map((k) => k.identifier)).toEqual(
        expect.arrayContaining([
          'prune_change_log',
          'prune_sessions',
          'prune_auth_failures',
          'prune_mcp',
          'prune_stored_records',
          'prune_webhook_deliveries',
          'webhook_sweep',
          'recover_jobs',
        ]),
      );
      await sql`insert into private.auth_failures (scope, key, failed_at) values ('ip', 'cron-test', now() - interval '2 days')`;
      // The tick of */10 * * * *, now.
      await sql`select graphile_worker.add_job('prune_auth_failures', job_key => 'cron_prune_auth_failures')`;
      await eventually('the prune job', async () => (await sql`select 1 from private.auth_failures where key = 'cron-test'`).length === 0);
    } finally {
      await stopWorker(worker);
    }
  });

  it('npm run admin -- jobs and webhooks show the queue and the failures', async () => {
    const run = (...args: string[]) =>
      new Promise<{ code: number | null; stdout: string }>((resolve) => {
        const child = spawn(process.execPath, ['--import', 'tsx', 'gateway/tooling/admin.ts', ...args], {
          cwd: projectRoot,
          env: { ...process.env, DATABASE_URL: env.databaseUrl, LOG_LEVEL: 'warn' },
          stdio: ['ignore', 'pipe', 'inherit'],
        });
        let stdout = '';
        child.stdout!.on('data', (c: Buffer) => (stdout += c.toString()));
        child.on('exit', (code) => resolve({ code, stdout }));
      });
    const path = '/admin-failing';
    receiver.answer(path, [], { status: 503 });
    const hook = (await register(env.baseUrl, receiver.url(path))).body.data;
    const worker = await startWorker({ WEBHOOK_ALLOW_PRIVATE_TARGETS: '1', WEBHOOK_RETRY_SCHEDULE: '600' });
    try {
      await call(env.baseUrl, 'POST', `/api/v1/platform/webhooks/${hook.id}/ping`, manager.token);
      await eventually('the first failure', async () => (await deliveriesOf(hook.id))[0]?.status === 'retrying');
      const jobs = await run('jobs');
      expect(jobs.code).toBe(0);
      expect(jobs.stdout).toMatch(/"state":"scheduled","task":"webhook_deliver"/);
      // One worker process: its two runners (deliveries; mail and upkeep).
      expect(jobs.stdout).toMatch(/# workers \(2\)/);
      // It says how to read itself.
      expect(jobs.stdout).toMatch(/^# states: running = /m);
      expect(jobs.stdout).toMatch(/orphaned = locked by a worker that is gone/);
      const webhooks = await run('webhooks');
      expect(webhooks.code).toBe(0);
      expect(webhooks.stdout).toContain(receiver.url(path));
      expect(webhooks.stdout).toMatch(/"status":"retrying".*"last_error":"HTTP 503"/);
    } finally {
      await stopWorker(worker);
    }
  });
});

// The admin server (ADMIN_PORT) of a real gateway process on a Postgres of
// its own: /live and /ready through a database outage (the readiness checks
// as readiness_check_ok, the 503s counted under cause="database"), /ready's
// realtime check while the LISTEN connection alone is cut, /metrics parsed after
// known traffic (route templates, never ids; a thousand distinct ids leave
// the series unchanged), a real Prometheus scraping it, the request id and
// trace id on the log lines and the trace id in pg_stat_activity during a
// slow call; then the same service with WEB_CONCURRENCY=2, whose one scrape
// aggregates both gateway processes and the MCP process.
import { spawn, type ChildProcess } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import postgres from 'postgres';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ensureDatabase, startEmbeddedPostgres, type RunningPostgres } from '../../gateway/core/process/embedded-postgres.ts';
import { createLogger } from '../../gateway/core/process/log.ts';
import { runMigrations } from '../../gateway/core/database/migrate.ts';
import { exited, freePort, startGatewayProcess, waitUntil, type GatewayProcess } from '../support/processes.ts';
import { testDir } from '../support/test-dir.ts';
import { startTcpProxy, type TcpProxy } from '../support/tcp-proxy.ts';

const quiet = createLogger('silent');
const dir = path.join(testDir, `admin-${crypto.randomBytes(3).toString('hex')}`);
const pgPort = freePort();
let pg: RunningPostgres;
let databaseUrl: string;

const startPostgres = () => startEmbeddedPostgres({ dir: path.join(dir, 'postgres'), port: pgPort, persistent: true, log: quiet });

beforeAll(async () => {
  pg = await startPostgres();
  await ensureDatabase(pg.urlFor('postgres'), 'app');
  databaseUrl = pg.urlFor('app');
  // With DATABASE_URL the gateway applies committed migrations only: current/ too, first.
  await runMigrations(databaseUrl, quiet, { includeCurrent: true });
});

afterAll(async () => {
  await pg?.stop();
});

interface Service {
  gateway: GatewayProcess;
  admin: string;
}

async function startService(env: Record<string, string>): Promise<Service> {
  const adminPort = freePort();
  const gateway = await startGatewayProcess({ DATABASE_URL: databaseUrl, PORT: String(freePort()), ADMIN_PORT: String(adminPort), DATA_DIR: dir, ...env });
  const admin = `http://127.0.0.1:${adminPort}`;
  // The MCP process starts beside the gateway: ready once it answers too.
  await waitUntil(async () => (await fetch(`${admin}/ready`).catch(() => null))?.status === 200, 60_000, '/ready 200');
  return { gateway, admin };
}

async function stopService(service: Service | undefined): Promise<void> {
  if (!service) return;
  service.gateway.child.kill('SIGTERM');
  await exited(service.gateway.child);
}

async function scrape(admin: string): Promise<string> {
  const res = await fetch(`${admin}/metrics`);
  expect(res.status).toBe(200);
  expect(res.headers.get('content-type')).toMatch(/^text\/plain/);
  return res.text();
}

/** The series (name and labels) of `name` in a Prometheus text exposition, with their values. */
function series(text: string, name: string): Map<string, number> {
  const found = new Map<string, number>();
  for (const line of text.split('\n')) {
    if (line.startsWith('#') || !line.startsWith(name)) continue;
    const at = line.lastIndexOf(' ');
    found.set(line.slice(0, at), Number(line.slice(at + 1)));
  }
  return found;
}

/** The value of the one series of `name` whose labels include all of `labels`. */
function valueOf(text: string, name: string, labels: Record<string, string>): number {
  const matching = [...series(text, name)].filter(([key]) => key.startsWith(`${name}{`) && Object.entries(labels).every(([k, v]) => key.includes(`${k}="${v}"`)));
  return matching.reduce((sum, [, value]) => sum + value, 0);
}

/** The body of /ready once it answers 503 (within 15 s). */
async function notReady(admin: string): Promise<{ status: string; checks: Record<string, string> }> {
  let body: { status: string; checks: Record<string, string> } | undefined;
  await waitUntil(
    async () => {
      const res = await fetch(`${admin}/ready`);
      body = (await res.json()) as typeof body;
      return res.status === 503;
    },
    15_000,
    '/ready 503',
  );
  return body!;
}

/** A request on a fresh connection (so that a cluster's workers share them). */
function request(url: string, headers: Record<string, string> = {}): Promise<{ status: number; headers: http.IncomingHttpHeaders; body: string }> {
  return new Promise((resolve, reject) => {
    const req = http.get(url, { agent: false, headers }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => (body += chunk));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body }));
    });
    req.on('error', reject);
  });
}

async function inBatches(count: number, concurrency: number, fn: (i: number) => Promise<unknown>): Promise<void> {
  let next = 0;
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (next < count) await fn(next++);
    }),
  );
}

const ROUTE = '/api/community/{community_id}';
const DURATION = 'http_server_request_duration_seconds';
const SQL = 'db_client_operation_duration_seconds';

describe('the admin server of one gateway process', () => {
  let service: Service;
  beforeAll(async () => {
    service = await startService({ LOG_LEVEL: 'info' });
  }, 120_000);
  afterAll(() => stopService(service));

  it('is off the public port, on loopback; /live and /ready say what they check', async () => {
    expect(new URL(service.admin).hostname).toBe('127.0.0.1');
    expect((await fetch(`${service.gateway.url}/metrics`)).status).toBe(404);
    const live = await fetch(`${service.admin}/live`);
    expect(live.status).toBe(200);
    const ready = await fetch(`${service.admin}/ready`);
    expect(ready.status).toBe(200);
    expect(await ready.json()).toEqual({ status: 'ready', checks: { database: 'ok', realtime: 'ok', jobs: 'ok', mcp: 'ok' } });
    expect((await fetch(`${service.admin}/nothing`)).status).toBe(404);
  });

  it('labels requests by route template: a thousand distinct ids (and unknown paths) leave the series unchanged', { timeout: 120_000 }, async () => {
    const ids = Array.from({ length: 1000 }, () => crypto.randomUUID());
    const first = await request(`${service.gateway.url}/api/community/${crypto.randomUUID()}`);
    expect(first.status).toBe(404);
    expect((await request(`${service.gateway.url}/no/such/${crypto.randomUUID()}`)).status).toBe(404);
    const before = await scrape(service.admin);
    expect(valueOf(before, `${DURATION}_count`, { http_route: ROUTE, http_response_status_code: '404' })).toBe(1);
    const unmatchedBefore = valueOf(before, `${DURATION}_count`, { http_route: 'unmatched', http_response_status_code: '404' });

    await inBatches(ids.length, 20, async (i) => {
      const res = await request(`${service.gateway.url}/api/community/${ids[i]}`);
      expect(res.status).toBe(404);
      if (i % 10 === 0) expect((await request(`${service.gateway.url}/no/such/${ids[i]}`)).status).toBe(404);
    });

    const after = await scrape(service.admin);
    for (const name of [DURATION, SQL, 'http_server_', 'db_client_']) expect([...series(after, name).keys()].sort()).toEqual([...series(before, name).keys()].sort());
    expect(valueOf(after, `${DURATION}_count`, { http_route: ROUTE, http_request_method: 'GET', http_response_status_code: '404', service: 'gateway' })).toBe(1001);
    expect(valueOf(after, `${DURATION}_count`, { http_route: 'unmatched', http_response_status_code: '404' })).toBe(unmatchedBefore + 100);
    // The SQL call, by api function (PT404: the error type is the SQLSTATE).
    expect(valueOf(after, `${SQL}_count`, { db_system_name: 'postgresql', db_operation_name: 'api.community_public', error_type: 'PT404' })).toBe(1001);
    // No id, anywhere.
    for (const id of ids) expect(after.includes(id)).toBe(false);
    // The pool and the process are there too.
    expect(valueOf(after, 'db_client_connection_max', { service: 'gateway' })).toBe(10);
    expect(valueOf(after, 'db_client_connection_wait_time_seconds_count', { service: 'gateway' })).toBeGreaterThanOrEqual(1001);
    expect(after).toMatch(/^process_cpu_seconds_total\{service="gateway"\} /m);
    expect(after).toMatch(/^nodejs_eventloop_lag_p99_seconds\{service="gateway"\} /m);
    expect(after).toMatch(/^realtime_open_connections\{kind="sse",service="gateway"\} 0$/m);
    // The MCP process's metrics, gathered over its IPC channel.
    expect(after).toMatch(/^process_cpu_seconds_total\{service="mcp"\} /m);
  });

  it('names the transaction of a request with an Idempotency-Key after the route\'s api function, not `other`', { timeout: 60_000 }, async () => {
    const email = `keyed-${crypto.randomBytes(5).toString('hex')}@example.com`;
    const password = 'correct horse battery';
    const json = { 'content-type': 'application/json' };
    expect((await fetch(`${service.gateway.url}/api/auth/register`, { method: 'POST', headers: json, body: JSON.stringify({ email, password }) })).status).toBe(201);
    const login = await fetch(`${service.gateway.url}/api/auth/login`, { method: 'POST', headers: json, body: JSON.stringify({ email, password }) });
    const { access_token: token } = (await login.json()) as { access_token: string };
    const before = await scrape(service.admin);
    const create = () =>
      fetch(`${service.gateway.url}/api/docs/tokens`, {
        method: 'POST',
        headers: { ...json, authorization: `Bearer ${token}`, 'idempotency-key': `key-${email}` },
        body: JSON.stringify({ name: 'keyed', permissions: ['*'] }),
      });
    expect((await create()).status).toBe(201);
    expect((await create()).status).toBe(201); // the replay
    const after = await scrape(service.admin);
    // (The replay's transaction is rolled back: it counts with an error type; the series is the route's all the same.)
    const count = (text: string, operation: string) => valueOf(text, `${SQL}_count`, { db_operation_name: operation });
    expect(count(after, 'api.api_token_create') - count(before, 'api.api_token_create')).toBe(2);
    expect(count(after, 'other') - count(before, 'other')).toBe(0);
  });

  it('keeps a well-formed X-Request-Id, replaces another, and writes request id and trace id on the log lines', async () => {
    const traceId = crypto.randomBytes(16).toString('hex');
    const kept = await request(`${service.gateway.url}/api/community/${crypto.randomUUID()}`, {
      'x-request-id': 'req-admin-1',
      traceparent: `00-${traceId}-${crypto.randomBytes(8).toString('hex')}-01`,
    });
    expect(kept.headers['x-request-id']).toBe('req-admin-1');
    const replaced = await request(`${service.gateway.url}/api/community/${crypto.randomUUID()}`, { 'x-request-id': 'not valid!' });
    expect(replaced.headers['x-request-id']).toMatch(/^[0-9a-f-]{36}$/);

    const lineOf = (reqId: string) =>
      service.gateway
        .output()
        .split('\n')
        .filter((l) => l.startsWith('{'))
        .map((l) => JSON.parse(l) as Record<string, unknown>)
        .find((l) => l.reqId === reqId && l.msg === 'request');
    await waitUntil(() => lineOf('req-admin-1') !== undefined && lineOf(replaced.headers['x-request-id'] as string) !== undefined, 5_000, 'the request log lines');
    expect(lineOf('req-admin-1')).toMatchObject({ traceId, status: 404, path: expect.stringMatching(/^\/api\/community\//) });
    // Without a traceparent: a trace id all the same.
    expect(lineOf(replaced.headers['x-request-id'] as string)?.traceId).toMatch(/^[0-9a-f]{32}$/);
  });

  it("shows a request's trace id in pg_stat_activity while its SQL call runs", async () => {
    const traceId = crypto.randomBytes(16).toString('hex');
    const superuser = postgres(databaseUrl, { max: 2, onnotice: () => {} });
    try {
      // A slow call: the table the function reads is locked until we let go.
      let letGo: () => void = () => {};
      const held = new Promise<void>((resolve) => (letGo = resolve));
      const locked = new Promise<void>((resolve) => {
        void superuser.begin(async (tx) => {
          await tx`lock table app.communities in access exclusive mode`;
          resolve();
          await held;
        });
      });
      await locked;
      const answer = request(`${service.gateway.url}/api/community/${crypto.randomUUID()}`, { traceparent: `00-${traceId}-${crypto.randomBytes(8).toString('hex')}-01` });
      let seen: { application_name: string; query: string }[] = [];
      await waitUntil(
        async () => {
          seen = await superuser`select application_name, query from pg_stat_activity where application_name like ${'%trace:' + traceId}`;
          return seen.length > 0;
        },
        10_000,
        'the trace id in pg_stat_activity',
      );
      expect(seen[0]!.application_name).toMatch(new RegExp(`^gateway iss:[0-9a-f]{12} trace:${traceId}$`));
      expect(seen[0]!.query).toContain('api.community_public');
      letGo();
      expect((await answer).status).toBe(404);
      // Transaction-local: the connection is back to its own name.
      await waitUntil(async () => (await superuser`select 1 from pg_stat_activity where application_name like ${'%' + traceId}`).length === 0, 5_000, 'the name restored');
    } finally {
      await superuser.end();
    }
  });

  it('is scraped by a real Prometheus, which finds the request histogram', { timeout: 90_000 }, async () => {
    const promDir = path.join(dir, `prometheus-${crypto.randomBytes(3).toString('hex')}`);
    fs.mkdirSync(promDir, { recursive: true });
    const promPort = freePort();
    fs.writeFileSync(
      path.join(promDir, 'prometheus.yml'),
      [
        'global:',
        '  scrape_interval: 1s',
        'scrape_configs:',
        '  - job_name: community-backend',
        '    static_configs:',
        `      - targets: ['${new URL(service.admin).host}']`,
        '',
      ].join('\n'),
    );
    const prometheus: ChildProcess = spawn(
      '/usr/bin/prometheus',
      [`--config.file=${path.join(promDir, 'prometheus.yml')}`, `--storage.tsdb.path=${path.join(promDir, 'data')}`, `--web.listen-address=127.0.0.1:${promPort}`],
      { stdio: 'ignore' },
    );
    try {
      const query = encodeURIComponent(`sum(${DURATION}_count{http_route="${ROUTE}"})`);
      let value = 0;
      await waitUntil(
        async () => {
          const res = await fetch(`http://127.0.0.1:${promPort}/api/v1/query?query=${query}`).catch(() => null);
          if (res?.status !== 200) return false;
          const body = (await res.json()) as { data: { result: { value: [number, string] }[] } };
          value = Number(body.data.result[0]?.value[1] ?? 0);
          return value > 0;
        },
        60_000,
        'Prometheus to scrape the histogram',
      );
      expect(value).toBeGreaterThanOrEqual(1001);
      const targets = (await (await fetch(`http://127.0.0.1:${promPort}/api/v1/targets`)).json()) as { data: { activeTargets: { health: string }[] } };
      expect(targets.data.activeTargets[0]?.health).toBe('up');
    } finally {
      prometheus.kill('SIGTERM');
      await exited(prometheus);
    }
  });

  it('with the database stopped: /ready 503 naming the database, /live 200; back to 200 once it is up again', { timeout: 120_000 }, async () => {
    await pg.stop();
    try {
      const body = await notReady(service.admin);
      expect(body.status).toBe('not_ready');
      expect(body.checks.database).not.toBe('ok');
      // The realtime check is real: its notification cannot make the round trip.
      expect(body.checks.realtime).not.toBe('ok');
      expect(body.checks.mcp).toBe('ok');
      // A load balancer's /health during the outage: 503s counted under the cause the alert rules match.
      const before = valueOf(await scrape(service.admin), 'http_server_unavailable_responses_total', { cause: 'database' });
      for (let i = 0; i < 3; i++) expect((await fetch(`${service.gateway.url}/health`)).status).toBe(503);
      const during = await scrape(service.admin);
      expect(valueOf(during, 'http_server_unavailable_responses_total', { cause: 'database' }) - before).toBe(3);
      expect(valueOf(during, 'http_server_unavailable_responses_total', { cause: 'other' })).toBe(0);
      expect(valueOf(during, 'readiness_check_ok', { check: 'database', service: 'gateway' })).toBe(0);
      expect(valueOf(during, 'readiness_check_ok', { check: 'mcp' })).toBe(1);
      for (let i = 0; i < 5; i++) {
        const live = await fetch(`${service.admin}/live`);
        expect(live.status).toBe(200);
        await new Promise((r) => setTimeout(r, 200));
      }
      // The metrics are still served (the queue depth read fails and is left out).
      expect((await fetch(`${service.admin}/metrics`)).status).toBe(200);
    } finally {
      pg = await startPostgres();
    }
    await waitUntil(async () => (await fetch(`${service.admin}/ready`)).status === 200, 60_000, '/ready 200 again');
    const after = await scrape(service.admin);
    for (const check of ['database', 'realtime', 'jobs', 'mcp']) expect(valueOf(after, 'readiness_check_ok', { check }), check).toBe(1);
  });
});

describe("/ready's realtime check while the LISTEN connection alone is cut", () => {
  let service: Service;
  let proxy: TcpProxy;
  beforeAll(async () => {
    // LISTEN (and migrations) through DATABASE_DIRECT_URL, here a forwarder the test can cut; the pool is direct.
    const url = new URL(databaseUrl);
    proxy = await startTcpProxy({ host: url.hostname, port: Number(url.port) });
    service = await startService({ DATABASE_DIRECT_URL: proxy.via(databaseUrl), WORKER: 'off' });
  }, 120_000);
  afterAll(async () => {
    await stopService(service);
    await proxy?.close();
  });

  it('fails (503, readiness_check_ok 0) while the database answers the pool, and passes again once LISTEN is back', { timeout: 120_000 }, async () => {
    expect((await fetch(`${service.admin}/ready`)).status).toBe(200);
    await proxy.down();
    try {
      const body = await notReady(service.admin);
      expect(body.checks.database).toBe('ok');
      expect(body.checks.realtime).toMatch(/LISTEN/);
      expect(valueOf(await scrape(service.admin), 'readiness_check_ok', { check: 'realtime' })).toBe(0);
      // Requests are served all the same: only realtime is not ready.
      expect((await fetch(`${service.gateway.url}/health`)).status).toBe(200);
    } finally {
      await proxy.up();
    }
    await waitUntil(async () => (await fetch(`${service.admin}/ready`)).status === 200, 60_000, '/ready 200 again');
    expect(valueOf(await scrape(service.admin), 'readiness_check_ok', { check: 'realtime' })).toBe(1);
  });
});

describe('the admin server with WEB_CONCURRENCY=2', () => {
  let service: Service;
  beforeAll(async () => {
    // No job worker: the first gateway's serves this database.
    service = await startService({ WEB_CONCURRENCY: '2', WORKER: 'off', LOG_LEVEL: 'info' });
  }, 120_000);
  afterAll(() => stopService(service));

  it("adds the primary's own process metrics to its workers'", async () => {
    // process_max_fds is summed over the processes, each with the primary's limit: three of them (the primary and two workers).
    const limits = fs.readFileSync(`/proc/${service.gateway.child.pid}/limits`, 'utf8');
    const maxFds = Number(/^Max open files\s+(\d+)/m.exec(limits)![1]);
    expect(valueOf(await scrape(service.admin), 'process_max_fds', { service: 'gateway' })).toBe(3 * maxFds);
  });

  it("one scrape gives every gateway process's requests, and /ready asks each process", { timeout: 60_000 }, async () => {
    const ready = (await (await fetch(`${service.admin}/ready`)).json()) as { checks: Record<string, string> };
    expect(Object.keys(ready.checks).sort()).toEqual(['database', 'gateway 1', 'gateway 2', 'mcp']);
    await inBatches(60, 6, async () => {
      const res = await request(`${service.gateway.url}/api/community/${crypto.randomUUID()}`);
      expect(res.status).toBe(404);
    });
    const text = await scrape(service.admin);
    // Requests spread over both processes (round robin), counted once each.
    expect(valueOf(text, `${DURATION}_count`, { http_route: ROUTE, service: 'gateway' })).toBe(60);
    expect(valueOf(text, `${SQL}_count`, { db_operation_name: 'api.community_public' })).toBe(60);
    // Both processes' pools: DB_POOL_MAX each.
    expect(valueOf(text, 'db_client_connection_max', { service: 'gateway' })).toBe(20);
    expect(text).toMatch(/^process_cpu_seconds_total\{service="mcp"\} /m);
  });
});

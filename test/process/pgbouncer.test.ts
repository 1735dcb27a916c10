// The gateway behind PgBouncer in transaction mode (issue 11): a second
// gateway on the test database, started with DATABASE_POOL_MODE=transaction
// (no prepared statements) and DATABASE_DIRECT_URL (LISTEN and migrations
// direct), its pool going through Debian's pgbouncer. Representative requests
// (reads, writes, errors that must roll back, parallel requests sharing the
// pooler's few server connections) behave exactly as without a pooler.
// TEST_PGBOUNCER=1 runs the whole suite this way.
import crypto from 'node:crypto';
import fs from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../gateway/core/process/config.ts';
import { createLogger } from '../../gateway/core/process/log.ts';
import { startGateway, type RunningGateway } from '../../gateway/server.ts';
import { databaseUrl, db } from '../helpers.ts';
import { PGBOUNCER_BINARY, startPgBouncer, type RunningPgBouncer } from '../support/pgbouncer.ts';

let pooler: RunningPgBouncer;
let gateway: RunningGateway;

async function call(method: string, path: string, options: { token?: string; body?: unknown } = {}) {
  const headers: Record<string, string> = {};
  if (options.token) headers.authorization = `Bearer ${options.token}`;
  if (options.body !== undefined) headers['content-type'] = 'application/json';
  const res = await fetch(gateway.url + path, {
    method,
    headers,
    body: options.body === undefined ? undefined : JSON.stringify(options.body),
  });
  const text = await res.text();
  return { status: res.status, body: text ? JSON.parse(text) : undefined };
}

async function user() {
  const email = `pooled-${crypto.randomBytes(6).toString('hex')}@example.com`;
  const password = 'pooled-password';
  const reg = await call('POST', '/api/auth/register', { body: { email, password } });
  expect(reg.status).toBe(201);
  const login = await call('POST', '/api/auth/login', { body: { email, password } });
  expect(login.status).toBe(200);
  return { token: login.body.access_token as string, userId: reg.body.user_id as string };
}

describe.skipIf(!fs.existsSync(PGBOUNCER_BINARY))('the gateway behind PgBouncer in transaction mode', () => {
  beforeAll(async () => {
    // A small server pool, so requests really share server connections.
    pooler = await startPgBouncer(databaseUrl, { poolSize: 3 });
    const config = loadConfig({
      PORT: '0',
      HOST: '127.0.0.1',
      JWT_SECRET: crypto.randomBytes(32).toString('base64url'),
      DATA_DIR: fs.mkdtempSync('/tmp/pooled-gateway-'),
      DB_POOL_MAX: '10',
      DATABASE_POOL_MODE: 'transaction',
      DATABASE_DIRECT_URL: databaseUrl,
      // Registrations are counted per address in Postgres, and every test client is 127.0.0.1.
      PASSWORD_SET_MAX_PER_IP: '1000000',
    });
    expect(config.databasePoolMode).toBe('transaction');
    gateway = await startGateway(config, pooler.url, createLogger('silent'), { includeCurrentMigration: true });
  }, 120_000);

  afterAll(async () => {
    await gateway?.close();
    await pooler?.stop();
  });

  it('serves reads and writes: profile, hats, communities, events, tasks', async () => {
    const me = await user();
    expect((await call('GET', '/api/mobile/profile', { token: me.token })).body.data.id).toBe(me.userId);
    const hat = await call('POST', '/api/mobile/hats', { token: me.token, body: { hat: { name: 'Pooled', hat_type: 'social' } } });
    expect(hat.status).toBe(201);
    expect((await call('GET', '/api/mobile/hats', { token: me.token })).body.data).toHaveLength(1);
    const communities = await call('GET', '/api/mobile/communities', { token: me.token });
    expect(communities.body).toMatchObject({ success: true, data: [], pagination: { total_count: 0 } });
    expect((await call('GET', '/api/mobile/events/upcoming', { token: me.token })).body).toEqual([]);
    const task = await call('POST', '/api/mobile/tasks', { token: me.token, body: { title: 'through the pooler' } });
    expect(task.status).toBe(201);
    const list = await call('GET', '/api/mobile/tasks', { token: me.token });
    expect(list.body.tasks.map((t: { id: string }) => t.id)).toEqual([task.body.task.id]);
  });

  it('a request that fails rolls back, and its claims never reach the next request on the same server connection', async () => {
    const me = await user();
    const other = await user();
    // The fourth hat of a basic user is refused by SQL after the insert is attempted.
    for (let i = 0; i < 3; i++) {
      expect((await call('POST', '/api/mobile/hats', { token: me.token, body: { hat: { name: `h${i}`, hat_type: 'social' } } })).status).toBe(201);
    }
    const refused = await call('POST', '/api/mobile/hats', { token: me.token, body: { hat: { name: 'h4', hat_type: 'social' } } });
    expect(refused.status).toBe(422);
    const [{ n }] = (await db()`select count(*)::int as n from app.hats where user_id = ${me.userId}`) as unknown as [{ n: number }];
    expect(n).toBe(3);
    // Interleaved requests of two users over 3 server connections: each sees only their own.
    const results = await Promise.all(
      Array.from({ length: 30 }, (_, i) => call('GET', '/api/mobile/profile', { token: i % 2 ? me.token : other.token })),
    );
    results.forEach((r, i) => expect(r.body.data.id).toBe(i % 2 ? me.userId : other.userId));
    // Nothing of a request's settings survives on the server connections.
    const pooled = (await import('postgres')).default(pooler.url, { prepare: false, max: 1, onnotice: () => {} });
    try {
      const [row] = await pooled`select current_user as role, coalesce(current_setting('request.jwt.claims', true), '') as claims`;
      expect(row).toMatchObject({ role: new URL(databaseUrl).username || 'postgres', claims: '' });
    } finally {
      await pooled.end();
    }
  });

  it('parallel writes through the pooler all land', async () => {
    const me = await user();
    const created = await Promise.all(
      Array.from({ length: 20 }, (_, i) => call('POST', '/api/mobile/tasks', { token: me.token, body: { title: `parallel ${i}` } })),
    );
    expect(created.every((r) => r.status === 201)).toBe(true);
    const [{ n }] = (await db()`select count(*)::int as n from app.tasks where created_by = ${me.userId}`) as unknown as [{ n: number }];
    expect(n).toBe(20);
  });
});

// Login throttling (DESIGN.md): failed logins per e-mail and per client IP,
// and failed refresh/verify attempts per client IP, counted in Postgres; past
// a limit, 429 with Retry-After, the same whether or not the e-mail exists.
// A dedicated gateway on the test database with low limits and TRUST_PROXY=1,
// so each test is its own client IP (X-Forwarded-For) and nothing here
// touches the shared gateway's counts.
import crypto from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../gateway/lib/config.ts';
import { createLogger } from '../../gateway/lib/log.ts';
import { startGateway, type RunningGateway } from '../../gateway/server.ts';
import { databaseUrl, db, jwtSecret, registerUser, uniqueEmail } from '../helpers.ts';

let gateway: RunningGateway;
beforeAll(async () => {
  const config = loadConfig({
    PORT: '0',
    HOST: '127.0.0.1',
    JWT_SECRET: jwtSecret,
    DB_POOL_MAX: '4',
    LOGIN_MAX_FAILURES_PER_EMAIL: '3',
    LOGIN_MAX_FAILURES_PER_IP: '5',
    LOGIN_FAILURE_WINDOW_SECONDS: '4',
    TRUST_PROXY: '1',
  });
  gateway = await startGateway(config, databaseUrl, createLogger('silent'), { includeCurrentMigration: true });
});
afterAll(async () => {
  await gateway?.close();
});

const randomIp = () => `10.${crypto.randomInt(256)}.${crypto.randomInt(256)}.${crypto.randomInt(1, 255)}`;

async function post(path: string, body: unknown, ip: string) {
  const res = await fetch(gateway.url + path, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-forwarded-for': ip },
    body: JSON.stringify(body),
  });
  return { status: res.status, retryAfter: res.headers.get('retry-after'), body: (await res.json()) as Record<string, unknown> };
}

describe('failed logins are throttled', () => {
  it('per e-mail: after the limit, 429 with Retry-After, even with the right password, the same for an unknown e-mail', async () => {
    const user = await registerUser('throttle');
    const unknown = uniqueEmail('nobody');
    for (const email of [user.email, unknown]) {
      for (let i = 0; i < 3; i++) {
        const r = await post('/api/auth/login', { email, password: 'wrong-password' }, randomIp());
        expect(r.status).toBe(401);
      }
      const blocked = await post('/api/auth/login', { email, password: 'wrong-password' }, randomIp());
      expect(blocked.status).toBe(429);
      expect(Number(blocked.retryAfter)).toBeGreaterThanOrEqual(1);
      expect(Number(blocked.retryAfter)).toBeLessThanOrEqual(4);
      expect(blocked.body.error).toBe('rate_limited');
    }
    // The right password does not get through while throttled (it is not even checked).
    expect((await post('/api/auth/login', { email: user.email, password: user.password }, randomIp())).status).toBe(429);
    // Counted in Postgres: the rows are there for every replica to see.
    const [row] = await db()`select count(*)::int as n from private.auth_failures where scope = 'email' and key = ${user.email}`;
    expect(row!.n).toBe(3);

    // After the window, the user logs in again, and success clears the e-mail's count.
    await new Promise((r) => setTimeout(r, 4200));
    expect((await post('/api/auth/login', { email: user.email, password: user.password }, randomIp())).status).toBe(200);
    const [after] = await db()`select count(*)::int as n from private.auth_failures where scope = 'email' and key = ${user.email}`;
    expect(after!.n).toBe(0);
  });

  it('per client IP: many e-mails from one address', async () => {
    const ip = randomIp();
    for (let i = 0; i < 5; i++) {
      expect((await post('/api/auth/login', { email: uniqueEmail('spray'), password: 'wrong-password' }, ip)).status).toBe(401);
    }
    const blocked = await post('/api/auth/login', { email: uniqueEmail('spray'), password: 'wrong-password' }, ip);
    expect(blocked.status).toBe(429);
    expect(blocked.retryAfter).toMatch(/^\d+$/);
    // Another client is not affected.
    expect((await post('/api/auth/login', { email: uniqueEmail('other'), password: 'wrong-password' }, randomIp())).status).toBe(401);
  });

  it('a burst of parallel failures for one e-mail cannot slip past the count', async () => {
    const email = uniqueEmail('burst');
    const results = await Promise.all(
      Array.from({ length: 12 }, () => post('/api/auth/login', { email, password: 'wrong-password' }, randomIp())),
    );
    expect(results.filter((r) => r.status === 401)).toHaveLength(3);
    expect(results.filter((r) => r.status === 429)).toHaveLength(9);
  });

  it('refresh and verify abuse per client IP', async () => {
    const ip = randomIp();
    for (let i = 0; i < 5; i++) {
      expect((await post('/api/auth/refresh', { refresh_token: `bogus-${i}` }, ip)).status).toBe(401);
    }
    const refresh = await post('/api/auth/refresh', { refresh_token: 'bogus' }, ip);
    expect(refresh.status).toBe(429);
    expect(refresh.retryAfter).toMatch(/^\d+$/);

    const ip2 = randomIp();
    for (let i = 0; i < 5; i++) {
      expect((await post('/api/auth/verify', { token: `not.a.jwt${i}` }, ip2)).status).toBe(401);
    }
    const verify = await post('/api/auth/verify', { token: 'not.a.jwt' }, ip2);
    expect(verify.status).toBe(429);
    expect(verify.retryAfter).toMatch(/^\d+$/);
  });

  it('X-Forwarded-For counts only with TRUST_PROXY: the shared gateway (no TRUST_PROXY) uses the socket address', async () => {
    const { clientIp } = await import('../../gateway/lib/client-ip.ts');
    expect(clientIp('::ffff:127.0.0.1', '1.2.3.4', undefined)).toBe('127.0.0.1');
    expect(clientIp('127.0.0.1', 'spoofed, 1.2.3.4', 1)).toBe('1.2.3.4');
    expect(clientIp('127.0.0.1', '9.9.9.9, 1.2.3.4, 10.0.0.1', 2)).toBe('1.2.3.4');
    expect(clientIp('127.0.0.1', '9.9.9.9, 1.2.3.4', 'all')).toBe('9.9.9.9');
    expect(clientIp('127.0.0.1', 'garbage', 1)).toBe('127.0.0.1');
  });
});

// Login throttling (docs/api/accounts.md#failed-sign-ins): failed sign-ins counted in Postgres per
// e-mail and client address, per e-mail across all clients and per client IP,
// and failed refresh/verify attempts per client IP; past a limit, 429 with
// Retry-After, the same whether or not the e-mail exists. A stranger who
// knows an e-mail address cannot lock its owner out (issue 27, finding 8):
// the owner's client, which has not failed, still signs in.
// A dedicated gateway on the test database with low limits and TRUST_PROXY=1,
// so each test is its own client IP (X-Forwarded-For) and nothing here
// touches the shared gateway's counts.
import crypto from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../gateway/core/process/config.ts';
import { createLogger } from '../../gateway/core/process/log.ts';
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
    LOGIN_MAX_FAILURES_PER_EMAIL_ALL_CLIENTS: '6',
    LOGIN_MAX_FAILURES_PER_IP: '5',
    LOGIN_FAILURE_WINDOW_SECONDS: '12',
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

const failuresOf = async (scope: string, key: string) => {
  const [row] = await db()`select count(*)::int as n from private.auth_failures where scope = ${scope} and key = ${key}`;
  return row!.n as number;
};

describe('failed logins are throttled', () => {
  it('per e-mail and client: after the limit, 429 with Retry-After, even with the right password, the same for an unknown e-mail', async () => {
    const user = await registerUser('throttle');
    const unknown = uniqueEmail('nobody');
    const ip = randomIp();
    for (const [email, from] of [[user.email, ip], [unknown, randomIp()]] as const) {
      for (let i = 0; i < 3; i++) {
        const r = await post('/api/auth/login', { email, password: 'wrong-password' }, from);
        expect(r.status).toBe(401);
      }
      const blocked = await post('/api/auth/login', { email, password: 'wrong-password' }, from);
      expect(blocked.status).toBe(429);
      expect(Number(blocked.retryAfter)).toBeGreaterThanOrEqual(1);
      expect(Number(blocked.retryAfter)).toBeLessThanOrEqual(12);
      expect(blocked.body.error).toBe('rate_limited');
    }
    // The right password does not get through from that client (it is not even checked).
    expect((await post('/api/auth/login', { email: user.email, password: user.password }, ip)).status).toBe(429);
    // Counted in Postgres: the rows are there for every replica to see.
    expect(await failuresOf('email_client', `${user.email} ${ip}`)).toBe(3);
    expect(await failuresOf('email', user.email)).toBe(3);

    // After the window, the user logs in again, and success clears that client's count (not the all-clients one).
    await new Promise((r) => setTimeout(r, 12_200));
    expect((await post('/api/auth/login', { email: user.email, password: user.password }, ip)).status).toBe(200);
    expect(await failuresOf('email_client', `${user.email} ${ip}`)).toBe(0);
    expect(await failuresOf('email', user.email)).toBe(3);
  });

  it('a stranger who knows the e-mail cannot lock the owner out: another client still signs in with the right password', async () => {
    const owner = await registerUser('victim');
    const attacker = randomIp();
    for (let i = 0; i < 3; i++) {
      expect((await post('/api/auth/login', { email: owner.email, password: `guess-${i}` }, attacker)).status).toBe(401);
    }
    expect((await post('/api/auth/login', { email: owner.email, password: 'guess-x' }, attacker)).status).toBe(429);
    // The owner, from their own address: signed in.
    const own = await post('/api/auth/login', { email: owner.email, password: owner.password }, randomIp());
    expect(own.status).toBe(200);
    expect(own.body.access_token).toEqual(expect.any(String));
    // The attacker is still held (the owner's success clears only the owner's client).
    expect((await post('/api/auth/login', { email: owner.email, password: owner.password }, attacker)).status).toBe(429);
  });

  it('per e-mail across all clients: guessing spread over many addresses stops at the higher ceiling, for everyone', async () => {
    const user = await registerUser('spread');
    for (let i = 0; i < 6; i++) {
      expect((await post('/api/auth/login', { email: user.email, password: `guess-${i}` }, randomIp())).status).toBe(401);
    }
    // A fresh address with the right password: the ceiling is spent (the
    // trade-off docs/api/accounts.md#failed-sign-ins states).
    const blocked = await post('/api/auth/login', { email: user.email, password: user.password }, randomIp());
    expect(blocked.status).toBe(429);
    expect(Number(blocked.retryAfter)).toBeGreaterThanOrEqual(1);
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
    const ip = randomIp();
    const results = await Promise.all(
      Array.from({ length: 12 }, () => post('/api/auth/login', { email, password: 'wrong-password' }, ip)),
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
    const { clientIp } = await import('../../gateway/core/web/client-ip.ts');
    expect(clientIp('::ffff:127.0.0.1', '1.2.3.4', undefined)).toBe('127.0.0.1');
    expect(clientIp('127.0.0.1', 'spoofed, 1.2.3.4', 1)).toBe('1.2.3.4');
    expect(clientIp('127.0.0.1', '9.9.9.9, 1.2.3.4, 10.0.0.1', 2)).toBe('1.2.3.4');
    expect(clientIp('127.0.0.1', '9.9.9.9, 1.2.3.4', 'all')).toBe('9.9.9.9');
    expect(clientIp('127.0.0.1', 'garbage', 1)).toBe('127.0.0.1');
  });
});

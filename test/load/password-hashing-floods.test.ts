// Password hashing is bounded per process (issue 25), and one client cannot
// fill the hashing queue (the fourth security review), each on a gateway
// process of its own with a small queue and a high cost, flooded on purpose:
//   * a login flood past the queue is 503 with Retry-After, and the same
//     process keeps answering other routes;
//   * register, signup and set-password check what they can before hashing
//     and are throttled per client address, and every client address takes
//     its turn in the queue, so another client's login is served before a
//     flood's queue drains, never with a 503.
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { api, databaseUrl, jwtSecret, publicUrl, registerUser, uniqueEmail } from '../helpers.ts';
import { freePort, startGatewayProcess } from '../support/processes.ts';
import { eventually } from '../support/wait.ts';

/** The flood: CLIENTS loops posting logins until stdin ends; prints the statuses, the Retry-After values and a few 503 bodies. */
const FLOOD = `
const statuses = {}, retryAfter = new Set(), bodies = [];
let on = true;
process.stdin.resume();
process.stdin.on('end', () => (on = false));
Promise.all(Array.from({ length: Number(process.env.CLIENTS) }, async (_, c) => {
  while (on) {
    const res = await fetch(process.env.URL, { method: 'POST', headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ email: process.env.EMAIL, password: c % 2 ? process.env.PASSWORD : 'wrong-' + Math.random() }) });
    const body = await res.json();
    statuses[res.status] = (statuses[res.status] || 0) + 1;
    if (res.status === 503) { retryAfter.add(res.headers.get('retry-after')); if (bodies.length < 5) bodies.push(body); }
  }
})).then(() => process.stdout.write(JSON.stringify({ statuses, retryAfter: [...retryAfter], bodies })));
`;

describe('bounded hashing per process', () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'hash-flood-'));
  afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));

  it('a login flood past the queue is 503 with Retry-After, while the same process keeps answering profile reads', async () => {
    // A gateway process of its own on the test database: one hash at a time,
    // two waiting, cost 11 (about 2× a cost-10 hash).
    const gw = await startGatewayProcess({
      DATABASE_URL: databaseUrl,
      PORT: String(freePort()),
      DATA_DIR: dir,
      JWT_SECRET: jwtSecret,
      BCRYPT_COST: '11',
      PASSWORD_HASH_CONCURRENCY: '1',
      PASSWORD_HASH_MAX_QUEUED: '2',
      LOGIN_MAX_FAILURES_PER_IP: '1000000',
      LOGIN_MAX_FAILURES_PER_EMAIL: '1000000',
      LOGIN_MAX_FAILURES_PER_EMAIL_ALL_CLIENTS: '1000000',
      // The tokens of the shared gateway are valid here: the same issuer.
      PUBLIC_URL: publicUrl,
    });
    try {
      const reader = await registerUser('reader');
      const flooder = await registerUser('flooder');
      /** Sequential profile reads for `ms`: how many, and their latencies. */
      const readProfiles = async (ms: number) => {
        const times: number[] = [];
        const until = Date.now() + ms;
        while (Date.now() < until) {
          const t0 = performance.now();
          const res = await fetch(`${gw.url}/api/mobile/profile`, { headers: { authorization: `Bearer ${reader.accessToken}` } });
          await res.text();
          expect(res.status).toBe(200);
          times.push(performance.now() - t0);
        }
        return times.sort((a, b) => a - b);
      };
      await readProfiles(500);
      const idle = await readProfiles(2000);

      // 20 clients logging in as fast as they can (alternating right and wrong
      // passwords), from a process of their own (this one only reads profiles).
      const flood = spawn(process.execPath, ['-e', FLOOD], {
        env: { ...process.env, URL: `${gw.url}/api/auth/login`, EMAIL: flooder.email, PASSWORD: flooder.password, CLIENTS: '20' },
        stdio: ['pipe', 'pipe', 'inherit'],
      });
      let report = '';
      flood.stdout!.on('data', (chunk) => (report += chunk));
      const floodDone = new Promise((resolve) => flood.once('exit', resolve));
      await new Promise((r) => setTimeout(r, 1000));
      const during = await readProfiles(3000);
      flood.stdin!.end(); // stop
      await floodDone;
      const { statuses, retryAfter, bodies } = JSON.parse(report) as { statuses: Record<string, number>; retryAfter: string[]; bodies: unknown[] };
      for (const body of bodies) expect(body).toMatchObject({ error: 'service_unavailable', details: { retry_after: 1 } });

      const p50 = (xs: number[]) => xs[Math.floor(xs.length / 2)]!;
      console.log(
        `login flood: ${JSON.stringify(statuses)}; profile reads: idle ${idle.length} in 2 s (p50 ${p50(idle).toFixed(1)} ms), ` +
          `during the flood ${during.length} in 3 s (p50 ${p50(during).toFixed(1)} ms, max ${during.at(-1)!.toFixed(1)} ms)`,
      );
      expect(statuses['503'] ?? 0).toBeGreaterThan(0);
      expect(statuses['200'] ?? 0).toBeGreaterThan(0);
      expect(statuses['401'] ?? 0).toBeGreaterThan(0);
      expect(Object.keys(statuses).every((s) => ['200', '401', '503'].includes(s))).toBe(true);
      expect(retryAfter).toEqual(['1']);
      // The other route kept answering, promptly: the hashing never held the
      // event loop (hashing on it, every login holds every other request for
      // a hash's time, about 100 ms at cost 11). The rate falls for the
      // refused flood's share of this 2-core machine.
      expect(during.length / 3).toBeGreaterThan((idle.length / 2) * 0.1);
      expect(p50(during)).toBeLessThan(50);
    } finally {
      gw.child.kill('SIGTERM');
    }
  });
});

describe('one client cannot fill the hashing queue', () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'hash-fair-'));
  afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));

  /**
   * A gateway process of its own on the test database, as the review's
   * instance with a small queue: one hash at a time at cost 12 (about four
   * times a cost-10 hash), 24 waiting at most; each request's client address
   * is its X-Forwarded-For (TRUST_PROXY=1).
   */
  const gatewayWith = (extra: Record<string, string> = {}) =>
    startGatewayProcess({
      DATABASE_URL: databaseUrl,
      PORT: String(freePort()),
      DATA_DIR: dir,
      JWT_SECRET: jwtSecret,
      PUBLIC_URL: publicUrl,
      BCRYPT_COST: '12',
      PASSWORD_HASH_CONCURRENCY: '1',
      PASSWORD_HASH_MAX_QUEUED: '24',
      TRUST_PROXY: '1',
      WORKER: 'off',
      ...extra,
    });

  const post = async (base: string, p: string, body: unknown, ip: string) => {
    const res = await fetch(base + p, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-forwarded-for': ip },
      body: JSON.stringify(body),
    });
    return { status: res.status, retryAfter: res.headers.get('retry-after'), body: (await res.json()) as Record<string, any> };
  };

  /** `total` requests, `parallel` at a time; each answer's status and error code, in the order they came. */
  const flood = async (total: number, parallel: number, send: (i: number) => Promise<{ status: number; body: Record<string, any> }>) => {
    const answers: string[] = [];
    let next = 0;
    await Promise.all(
      Array.from({ length: parallel }, async () => {
        while (next < total) {
          const res = await send(next++);
          answers.push(`${res.status} ${res.body.error ?? ''}`.trim());
        }
      }),
    );
    return answers;
  };
  const counts = (answers: string[]) => answers.reduce<Record<string, number>>((c, a) => ((c[a] = (c[a] ?? 0) + 1), c), {});

  it('600 registrations of a taken address and 100 set-password requests with a used link, 50 at once from one address: none is hashed; the other address signs in, never 503', async () => {
    const gw = await gatewayWith({ PASSWORD_SET_MAX_PER_IP: '100' });
    try {
      const taken = await registerUser('taken');
      const other = await registerUser('other');
      const attacker = '203.0.113.66';
      // Another person signs in six times in a row from another address, while the floods go on.
      const logins: number[] = [];
      let flooding = true;
      const signingIn = (async () => {
        while (flooding || logins.length < 6) {
          const res = await post(gw.url, '/api/auth/login', { email: other.email, password: other.password }, '198.51.100.20');
          logins.push(res.status);
        }
      })();
      const registrations = await flood(600, 50, () => post(gw.url, '/api/auth/register', { email: taken.email, password: 'another password' }, attacker));
      const links = await flood(100, 50, () =>
        post(gw.url, '/api/auth/set-password', { token: 'Zq3m9VbX2kLp7RtY8wNc4HdF6sJg1AeU', password: 'another password' }, '203.0.113.67'),
      );
      flooding = false;
      await signingIn;
      console.log(`register flood: ${JSON.stringify(counts(registrations))}; set-password flood: ${JSON.stringify(counts(links))}; logins meanwhile: ${logins.length}`);
      // Refused before any hashing: the e-mail is taken, then the address is throttled (no 503: the queue never filled).
      expect(counts(registrations)).toEqual({ '400 email_taken': 100, '429 rate_limited': 500 });
      expect(counts(links)).toEqual({ '400 invalid_link': 100 });
      expect(logins.every((status) => status === 200)).toBe(true);
      const throttled = await post(gw.url, '/api/auth/signup', { email: uniqueEmail('late'), password: 'correct horse' }, attacker);
      expect(throttled).toMatchObject({ status: 429, body: { error: 'rate_limited' } });
      expect(Number(throttled.retryAfter)).toBeGreaterThan(0);
      // Another address is not throttled.
      expect((await post(gw.url, '/api/auth/signup', { email: uniqueEmail('fresh'), password: 'correct horse' }, '198.51.100.21')).status).toBe(201);
    } finally {
      gw.child.kill('SIGTERM');
    }
  });

  it('a flood of 50 logins from one address fills the queue; another address\'s login takes its turn before the flood drains, not a 503', async () => {
    const gw = await gatewayWith({
      LOGIN_MAX_FAILURES_PER_IP: '1000000',
      LOGIN_MAX_FAILURES_PER_EMAIL: '1000000',
      LOGIN_MAX_FAILURES_PER_EMAIL_ALL_CLIENTS: '1000000',
    });
    try {
      const victim = await registerUser('victim');
      const other = await registerUser('turn');
      const order: string[] = [];
      // 50 wrong-password logins at once (each a bcrypt comparison): 1 runs, 24 wait, the rest are refused.
      const floodDone = Promise.all(
        Array.from({ length: 50 }, async () => {
          const res = await post(gw.url, '/api/auth/login', { email: victim.email, password: 'wrong password' }, '203.0.113.70');
          order.push(`flood ${res.status}`);
        }),
      );
      // The queue is full once the first refusals are back.
      await eventually('the flood refused past the queue', async () => order.some((o) => o === 'flood 503'));
      const mine = await post(gw.url, '/api/auth/login', { email: other.email, password: other.password }, '198.51.100.30');
      order.push(`other ${mine.status}`);
      await floodDone;
      console.log(`login flood and another address: ${JSON.stringify(counts(order))}`);
      expect(mine.status).toBe(200);
      // Served before the flood's queue drained: most of its waiting logins were answered after it.
      const after = order.slice(order.indexOf('other 200') + 1).filter((o) => o === 'flood 401');
      expect(after.length).toBeGreaterThanOrEqual(15);
      // The flood got its own refusals only: one of its waiting places went to the other login.
      expect(order.filter((o) => o.startsWith('flood')).every((o) => o === 'flood 401' || o === 'flood 503')).toBe(true);
    } finally {
      gw.child.kill('SIGTERM');
    }
  });
});

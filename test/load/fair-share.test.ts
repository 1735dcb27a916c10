// A fair share of the pool (issue 14), flooded on purpose: one user
// hammering chain walks and one client address hammering logins (a bcrypt
// hash each) do not push another user's latency past a bound.
import crypto from 'node:crypto';
import http from 'node:http';
import { describe, expect, it } from 'vitest';
import { api, baseUrl, registerUser, type TestUser } from '../helpers.ts';
import { ladder } from '../support/sql-fixtures.ts';

const LADDER = 3000;

/** POST JSON from another loopback address (another client IP for the gateway); resolves to the status. */
function postFrom(localAddress: string, agent: http.Agent, path: string, body: unknown): Promise<number> {
  const url = new URL(path, baseUrl);
  const payload = JSON.stringify(body);
  return new Promise((resolve, reject) => {
    const req = http.request(
      { host: '127.0.0.1', port: url.port, path: url.pathname, method: 'POST', localAddress, agent,
        headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(payload) } },
      (res) => {
        res.resume();
        res.on('end', () => resolve(res.statusCode ?? 0));
      },
    );
    req.on('error', reject);
    req.end(payload);
  });
}

/** Latencies (ms) of `n` sequential trivial requests of `user`. */
async function probe(user: TestUser, n: number): Promise<number[]> {
  const out: number[] = [];
  for (let i = 0; i < n; i++) {
    const started = performance.now();
    const res = await api('GET', '/api/mobile/profile', { token: user.accessToken });
    expect(res.status).toBe(200);
    out.push(performance.now() - started);
  }
  return out;
}

const percentile = (xs: number[], p: number) => [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor(xs.length * p))]!;

describe('fair share of the pool', () => {
  it('a user flooding chain walks and a client address flooding logins leave another user under 3 s (p95; 15 s before the limits)', async () => {
    const attacker = await registerUser('flood');
    const victimUser = await registerUser('calm');
    const ids = await ladder(attacker.userId, LADDER);
    const baseline = await probe(victimUser, 10);

    // Logins for unknown e-mails (bcrypt each) from another client address.
    const otherAddress = new http.Agent({ keepAlive: true, maxSockets: 64 });
    let stop = false;
    const statuses: number[] = [];
    const walker = async () => {
      while (!stop) {
        const res = await api('GET', `/api/mobile/tasks/${ids[0]}/chain?depth=1000`, { token: attacker.accessToken });
        statuses.push(res.status);
      }
    };
    const loginFlood = async () => {
      while (!stop) {
        const email = `nobody-${crypto.randomBytes(4).toString('hex')}@example.com`;
        statuses.push(await postFrom('127.0.0.2', otherAddress, '/api/auth/login', { email, password: 'password123' }));
      }
    };
    const flood = [...Array.from({ length: 20 }, walker), ...Array.from({ length: 40 }, loginFlood)];
    await new Promise((r) => setTimeout(r, 1000));
    const during = await probe(victimUser, 30);
    stop = true;
    await Promise.all(flood);
    otherAddress.destroy();

    console.log(
      `fair share: victim p50/p95/max baseline ${percentile(baseline, 0.5).toFixed(0)}/${percentile(baseline, 0.95).toFixed(0)} ms; ` +
        `under flood ${percentile(during, 0.5).toFixed(0)}/${percentile(during, 0.95).toFixed(0)}/${Math.max(...during).toFixed(0)} ms; ` +
        `${statuses.length} flood requests (${statuses.filter((s) => s === 429).length} refused 429)`,
    );
    // Generous for a loaded, shared CI machine: unloaded it is a few hundred ms; before the limits it was 15 s.
    expect(percentile(during, 0.95)).toBeLessThan(3000);
    // The flood gets its normal answers or refusals (429; 503 when the
    // database gives up on one of its transactions under this load); never a
    // 500 or a 4xx that is not its own. The victim above got 200 every time.
    expect(statuses.filter((s) => ![200, 401, 429, 503].includes(s))).toEqual([]);
  });
});

// Bounded work per request and a fair share of the pool (issue 14):
//   * GET /tasks/{id}/chain: depth at most 1000 (422 above); the walk visits
//     each task once, so a ladder of thousands of links (i -> i+1, i -> i+2;
//     2^n paths) answers quickly;
//   * free-form JSON is bounded (transition_meta);
//   * one user's burst of parallel requests all complete normally, and one
//     user (or one client address) hammering expensive requests (chain
//     walks, logins) does not push another user's latency past a bound;
//   * HTML error pages carry the security headers.
import crypto from 'node:crypto';
import http from 'node:http';
import { describe, expect, it } from 'vitest';
import { api, baseUrl, db, registerUser, type TestUser } from '../helpers.ts';
import { ladder } from '../support/sql-fixtures.ts';

const LADDER = 3000;

describe('chain walk', () => {
  it(`a ladder of ${LADDER} tasks (${2 * LADDER - 3} links) is walked once per task, nearest first, quickly`, async () => {
    const user = await registerUser('ladder');
    const ids = await ladder(user.userId, LADDER);
    const started = Date.now();
    const res = await api('GET', `/api/mobile/tasks/${ids[0]}/chain?depth=1000`, { token: user.accessToken });
    const ms = Date.now() - started;
    expect(res.status).toBe(200);
    // Task i is ceil(i/2) links away: depth 1000 reaches tasks 0..2000, each once.
    const titles = res.body.chain.map((t: { meta: { title: string } }) => t.meta.title);
    expect(titles).toHaveLength(2001);
    expect(new Set(titles).size).toBe(2001);
    expect(titles.slice(0, 5)).toEqual(['t0', 't1', 't2', 't3', 't4']);
    console.log(`chain walk of a ${LADDER}-task ladder at depth 1000: ${ms} ms`);
    expect(ms).toBeLessThan(5000);

    const back = await api('GET', `/api/mobile/tasks/${ids[LADDER - 1]}/chain?direction=backward&depth=1000`, { token: user.accessToken });
    expect(back.status).toBe(200);
    expect(back.body.chain).toHaveLength(2001);
    const short = await api('GET', `/api/mobile/tasks/${ids[10]}/chain?depth=3`, { token: user.accessToken });
    expect(short.body.chain.map((t: { meta: { title: string } }) => t.meta.title)).toEqual(['t10', 't11', 't12', 't13', 't14', 't15', 't16']);
  });

  it('depth above 1000 is 422 (and SQL refuses it too)', async () => {
    const user = await registerUser('depth');
    const task = await api('POST', '/api/mobile/tasks', { token: user.accessToken, body: { title: 'x' } });
    for (const depth of ['1001', '2147483647', '99999999999']) {
      const res = await api('GET', `/api/mobile/tasks/${task.body.task.id}/chain?depth=${depth}`, { token: user.accessToken });
      expect(res.status, depth).toBe(422);
    }
    expect((await api('GET', `/api/mobile/tasks/${task.body.task.id}/chain?depth=1000`, { token: user.accessToken })).status).toBe(200);
    const tx = db();
    await expect(
      tx.begin(async (t) => {
        await t`select set_config('role', 'authenticated', true), set_config('request.jwt.claims', ${JSON.stringify({ sub: user.userId, role: 'authenticated' })}, true)`;
        return t`select * from api.task_chain(${task.body.task.id}, 'forward', 1001)`;
      }),
    ).rejects.toMatchObject({ code: 'PT422' });
  });
});

describe('free-form JSON is bounded', () => {
  it('transition_meta over 16 KB is 422 at the edge; the table refuses oversized meta itself', async () => {
    const user = await registerUser('meta');
    const a = await api('POST', '/api/mobile/tasks', { token: user.accessToken, body: { title: 'a' } });
    const b = await api('POST', '/api/mobile/tasks', { token: user.accessToken, body: { title: 'b' } });
    const big = { blob: 'x'.repeat(20_000) };
    const res = await api('POST', `/api/mobile/tasks/${a.body.task.id}/link`, {
      token: user.accessToken,
      body: { destination_task_id: b.body.task.id, transition_meta: big },
    });
    expect(res.status).toBe(422);
    const ok = await api('POST', `/api/mobile/tasks/${a.body.task.id}/link`, {
      token: user.accessToken,
      body: { destination_task_id: b.body.task.id, transition_meta: { note: 'fine' } },
    });
    expect(ok.status).toBeLessThan(300);
    await expect(
      db()`insert into app.task_transitions (created_by, origin_id, destination_id, meta)
           values (${user.userId}, ${b.body.task.id}, ${a.body.task.id}, jsonb_build_object('blob', repeat('x', 40000)))`,
    ).rejects.toMatchObject({ code: '23514' });
    await expect(
      db()`update app.tasks set meta = meta || jsonb_build_object('blob', repeat('x', 200000)) where id = ${a.body.task.id}`,
    ).rejects.toMatchObject({ code: '23514' });
  });
});

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
  it('50 parallel requests of one user all complete with their normal answers', async () => {
    const user = await registerUser('burst');
    const results = await Promise.all(
      Array.from({ length: 50 }, (_, i) =>
        i % 2 === 0
          ? api('POST', '/api/mobile/tasks', { token: user.accessToken, body: { title: `burst ${i}` } })
          : api('GET', '/api/mobile/profile', { token: user.accessToken }),
      ),
    );
    expect(results.map((r) => r.status)).toEqual(Array.from({ length: 50 }, (_, i) => (i % 2 === 0 ? 201 : 200)));
  });

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

describe('security headers on HTML errors', () => {
  it('an HTML error page carries CSP, nosniff, frame-ancestors/X-Frame-Options and Referrer-Policy', async () => {
    for (const path of [
      '/e/AAAAAAAA',
      '/e/bad',
      `/checkin/event/${crypto.randomUUID()}`,
      '/l/checkin/event/not-a-uuid',
      '/auth/set-password?token=short',
      `/auth/set-password?token=${'A'.repeat(43)}`,
    ]) {
      const res = await api('GET', path);
      expect(res.status, path).toBeGreaterThanOrEqual(400);
      expect(res.headers.get('content-type'), path).toContain('text/html');
      expect(res.headers.get('content-security-policy'), path).toContain("frame-ancestors 'none'");
      expect(res.headers.get('content-security-policy'), path).toContain("default-src 'none'");
      expect(res.headers.get('x-content-type-options'), path).toBe('nosniff');
      expect(res.headers.get('x-frame-options'), path).toBe('DENY');
      expect(res.headers.get('referrer-policy'), path).toBe('no-referrer');
      // The page's style runs under the CSP's nonce.
      const nonce = /'nonce-([^']+)'/.exec(res.headers.get('content-security-policy') ?? '')?.[1];
      expect(res.text, path).toContain(`<style nonce="${nonce}">`);
    }
  });
});

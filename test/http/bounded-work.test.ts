// Bounded work per request and a fair share of the pool (issue 14):
//   * GET /tasks/{id}/chain: depth at most 1000 (422 above); the walk visits
//     each task once, so a ladder of thousands of links (i -> i+1, i -> i+2;
//     2^n paths) answers quickly;
//   * free-form JSON is bounded (transition_meta);
//   * one user's burst of parallel requests all complete normally (the
//     floods, one user or address hammering expensive requests while another
//     user's latency stays bounded: test/load/fair-share.test.ts);
//   * HTML error pages carry the security headers.
import crypto from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { api, db, registerUser } from '../helpers.ts';
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

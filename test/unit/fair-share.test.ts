// The per-client limiter of the pool (gateway/http/fair-share.ts): perKey
// transactions of one client at once (more while the rest of the pool is
// idle, keeping perKey connections free), the rest wait in FIFO order, other
// clients are not held up, and past the queue's bound (length or wait) the
// answer is 429 with a retry hint.
import { describe, expect, it } from 'vitest';
import { HttpError } from '../../gateway/core/web/errors.ts';
import { FairShare, fairShareKey } from '../../gateway/http/fair-share.ts';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe('FairShare', () => {
  it('runs at most perKey at once per client; the excess waits its turn and completes, in order', async () => {
    const share = new FairShare({ perKey: 2, maxQueued: 100, maxWaitMs: 5000 });
    let running = 0;
    let peak = 0;
    const order: number[] = [];
    const results = await Promise.all(
      Array.from({ length: 50 }, (_, i) =>
        share.run('user:a', async () => {
          running++;
          peak = Math.max(peak, running);
          await sleep(2);
          order.push(i);
          running--;
          return i * 2;
        }),
      ),
    );
    expect(results).toEqual(Array.from({ length: 50 }, (_, i) => i * 2));
    expect(peak).toBe(2);
    expect(order.slice(2)).toEqual([...order.slice(2)].sort((x, y) => x - y));
    expect(share.activeKeys).toBe(0);
  });

  it('another client is not held up by a busy one', async () => {
    const share = new FairShare({ perKey: 1, maxQueued: 100, maxWaitMs: 5000 });
    let busyDone = 0;
    const busy = Array.from({ length: 20 }, () => share.run('user:a', () => sleep(50).then(() => busyDone++)));
    await share.run('user:b', async () => {});
    // Ran at once: none of the busy client's queue (20 × 50 ms) had finished.
    expect(busyDone).toBe(0);
    await Promise.all(busy);
    expect(busyDone).toBe(20);
  });

  it('429 with a retry hint past the queue length or the longest wait; a failing task frees its slot', async () => {
    const share = new FairShare({ perKey: 1, maxQueued: 2, maxWaitMs: 200 });
    const hold = share.run('ip:1', () => sleep(500));
    const waiting = [share.run('ip:1', async () => 'a'), share.run('ip:1', async () => 'b')];
    const third = share.run('ip:1', async () => 'c');
    await expect(third).rejects.toMatchObject({ status: 429, code: 'rate_limited', details: { retry_after: 1 } });
    const settled = await Promise.allSettled(waiting);
    for (const s of settled) {
      expect(s.status).toBe('rejected');
      expect((s as PromiseRejectedResult).reason).toBeInstanceOf(HttpError);
    }
    await hold;
    await expect(share.run('ip:1', async () => { throw new Error('boom'); })).rejects.toThrow('boom');
    await expect(share.run('ip:1', async () => 'ok')).resolves.toBe('ok');
    expect(share.activeKeys).toBe(0);
  });

  it('alone on the pool, a client uses what others leave idle, all but one share of it', async () => {
    const share = new FairShare({ perKey: 2, capacity: 10, maxQueued: 100, maxWaitMs: 5000 });
    let running = 0;
    let peak = 0;
    const results = await Promise.all(
      Array.from({ length: 40 }, (_, i) =>
        share.run('user:a', async () => {
          running++;
          peak = Math.max(peak, running);
          await sleep(2);
          running--;
          return i;
        }),
      ),
    );
    expect(results).toEqual(Array.from({ length: 40 }, (_, i) => i));
    expect(peak).toBe(8);
    expect(share.activeKeys).toBe(0);
  });

  it('a client arriving while another uses the pool gets its share at once; the first is then held to its share', async () => {
    const share = new FairShare({ perKey: 2, capacity: 10, maxQueued: 100, maxWaitMs: 5000 });
    const running = new Map<string, number>();
    let total = 0;
    let peakTotal = 0;
    let peakA = 0;
    let bArrived = false;
    // a's running transactions, each time one of a's starts while b has some running
    const aWhileB: number[] = [];
    const task = (key: string, ms: number) => async () => {
      running.set(key, (running.get(key) ?? 0) + 1);
      total++;
      peakTotal = Math.max(peakTotal, total);
      if (key === 'user:a') peakA = Math.max(peakA, running.get(key)!);
      if (key === 'user:a' && bArrived && (running.get('user:b') ?? 0) > 0) aWhileB.push(running.get(key)!);
      await sleep(ms);
      running.set(key, running.get(key)! - 1);
      total--;
    };
    const busy = Array.from({ length: 30 }, () => share.run('user:a', task('user:a', 100)));
    await sleep(10);
    expect(running.get('user:a')).toBe(8);
    // b's share starts at once, on the two connections a may not take (a's take 100 ms)
    const started = Date.now();
    bArrived = true;
    const waits = await Promise.all([
      share.run('user:b', async () => Date.now() - started),
      share.run('user:b', async () => Date.now() - started),
    ]);
    for (const wait of waits) expect(wait).toBeLessThan(50);
    const newcomer = Array.from({ length: 10 }, () => share.run('user:b', task('user:b', 60)));
    await Promise.all([...busy, ...newcomer]);
    expect(peakTotal).toBeLessThanOrEqual(10);
    expect(peakA).toBe(8);
    // while b is running, a's next ones start only within its share
    expect(aWhileB.length).toBeGreaterThan(0);
    expect(Math.max(...aWhileB)).toBeLessThanOrEqual(2);
    expect(share.activeKeys).toBe(0);
  });

  it('keys: the user when signed in, else the client address', () => {
    expect(fairShareKey('u1', '10.0.0.1')).toBe('user:u1');
    expect(fairShareKey(undefined, '10.0.0.1')).toBe('ip:10.0.0.1');
  });
});


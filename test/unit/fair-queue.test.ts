// The hashing queue (gateway/core/fair-queue.ts): `concurrency` items run at
// once; the rest wait in one queue per client, and a free slot goes to the
// clients in turn; when the queue is full a newcomer takes the place of the
// newest item of the client with the longest queue, and only a client whose
// own items fill it is refused (503 with a retry hint).
import { describe, expect, it } from 'vitest';
import { HttpError } from '../../gateway/core/errors.ts';
import { FairQueue } from '../../gateway/core/fair-queue.ts';

/** Lets every pending promise settle. */
const tick = () => new Promise((resolve) => setImmediate(resolve));

/** Work that ends when told to: `done()` finishes the oldest running item. */
function gate() {
  const running: (() => void)[] = [];
  return {
    work: () => new Promise<void>((resolve) => running.push(resolve)),
    done: async () => {
      running.shift()!();
      // Let the queue hand the slot on.
      await tick();
    },
    get running() {
      return running.length;
    },
  };
}

describe('FairQueue', () => {
  it('runs at most `concurrency` items; the waiting clients take turns, one item each, not first come first served', async () => {
    const queue = new FairQueue({ concurrency: 1, maxQueued: 100, what: 'sign-ins' });
    const g = gate();
    const order: string[] = [];
    const submit = (client: string, label: string) => queue.run(client, async () => (order.push(label), g.work()));
    const all = [...Array.from({ length: 5 }, (_, i) => submit('flood', `flood ${i}`)), submit('other', 'other'), submit('third', 'third')];
    await tick();
    expect(queue.load).toEqual({ running: 1, queued: 6, clients: 3 });
    while (g.running > 0 || queue.load.queued > 0) await g.done();
    await Promise.all(all);
    // The flood's first item was running; then each client in turn.
    expect(order).toEqual(['flood 0', 'flood 1', 'other', 'third', 'flood 2', 'flood 3', 'flood 4']);
    expect(queue.load).toEqual({ running: 0, queued: 0, clients: 0 });
  });

  it('a full queue: a newcomer takes the newest place of the longest queue; a client that fills it alone is refused with 503', async () => {
    const queue = new FairQueue({ concurrency: 1, maxQueued: 4, what: 'sign-ins' });
    const g = gate();
    const outcomes: string[] = [];
    const submit = (client: string, label: string) =>
      queue.run(client, g.work).then(
        () => outcomes.push(`${label} done`),
        (err: HttpError) => outcomes.push(`${label} ${err.status} ${err.code} ${JSON.stringify(err.details)}`),
      );
    const flood = Array.from({ length: 7 }, (_, i) => submit('flood', `flood ${i}`));
    await tick();
    // One runs, four wait, two are refused at once (nobody else waits).
    expect(outcomes).toEqual(['flood 5 503 service_unavailable {"retry_after":1}', 'flood 6 503 service_unavailable {"retry_after":1}']);
    const other = submit('other', 'other');
    await tick();
    expect(outcomes.at(-1)).toBe('flood 4 503 service_unavailable {"retry_after":1}');
    expect(queue.load).toEqual({ running: 1, queued: 4, clients: 2 });
    while (g.running > 0 || queue.load.queued > 0) await g.done();
    await Promise.all([...flood, other]);
    expect(outcomes.slice(3)).toEqual(['flood 0 done', 'flood 1 done', 'other done', 'flood 2 done', 'flood 3 done']);
  });

  it('leave() before the turn gives the place back; a turn refused while the request did its other steps rejects its `turn`', async () => {
    const queue = new FairQueue({ concurrency: 1, maxQueued: 2, what: 'sign-ins' });
    const running = queue.enter('a');
    const waiting = queue.enter('b');
    waiting.leave();
    waiting.leave(); // idempotent
    expect(queue.load).toEqual({ running: 1, queued: 0, clients: 0 });
    const first = queue.enter('flood');
    const second = queue.enter('flood');
    const newcomer = queue.enter('c');
    await expect(second.turn).rejects.toMatchObject({ status: 503 });
    second.leave(); // after a refusal: nothing to give back
    expect(queue.load).toEqual({ running: 1, queued: 2, clients: 2 });
    running.leave();
    await first.turn;
    first.leave();
    await newcomer.turn;
    newcomer.leave();
    expect(queue.load).toEqual({ running: 0, queued: 0, clients: 0 });
  });

  it('with no room to wait (maxQueued 0), what cannot run at once is refused', () => {
    const queue = new FairQueue({ concurrency: 1, maxQueued: 0, what: 'sign-ins' });
    queue.enter('a');
    expect(() => queue.enter('b')).toThrow(HttpError);
  });
});

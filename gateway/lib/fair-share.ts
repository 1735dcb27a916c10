// Fair share of the database pool: no single client (a signed-in user, or an
// unauthenticated client IP) holds more than `perKey` of the pool's
// connections at once. A client's excess requests wait their turn in a
// bounded FIFO queue (so a burst of 50 parallel requests all complete with
// their normal answers); past the queue's bound (`maxQueued` waiting, or a
// wait longer than `maxWaitMs`) the request is refused with 429 and a
// Retry-After. Expensive unauthenticated work (bcrypt at register, signup and
// login) counts against the client IP's share like everything else.
//
// Per process: with several replicas each has its own limiter, which still
// bounds every client's share of each replica's pool.
import { HttpError } from './errors.ts';

export interface FairShareOptions {
  /** Transactions one client may run at once. */
  perKey: number;
  /** Requests one client may have waiting; more are refused with 429. */
  maxQueued: number;
  /** A request that waited this long is refused with 429. */
  maxWaitMs: number;
}

interface Waiter {
  start: () => void;
  refuse: (err: HttpError) => void;
  /** When it was queued (performance.now()). */
  since: number;
}

interface KeyState {
  running: number;
  queue: Waiter[];
}

export class FairShare {
  private readonly keys = new Map<string, KeyState>();
  /** Clients with a queue; one timer refuses their waiters that waited too long (none per request). */
  private readonly queued = new Set<KeyState>();
  private sweeper: NodeJS.Timeout | undefined;

  constructor(readonly options: FairShareOptions) {}

  /** Runs `fn` once `key` has a free slot; 429 when its queue is full or the wait too long. */
  run<T>(key: string, fn: () => Promise<T>): Promise<T> {
    let state = this.keys.get(key);
    if (!state) {
      state = { running: 0, queue: [] };
      this.keys.set(key, state);
    }
    // A free slot: no promise, no timer (the common case).
    if (state.running < this.options.perKey) {
      state.running++;
      return this.runHolding(key, fn);
    }
    return this.wait(state).then(() => this.runHolding(key, fn));
  }

  /** Clients with requests running or waiting (for tests and diagnostics). */
  get activeKeys(): number {
    return this.keys.size;
  }

  private runHolding<T>(key: string, fn: () => Promise<T>): Promise<T> {
    let result: Promise<T>;
    try {
      result = fn();
    } catch (err) {
      result = Promise.reject(err);
    }
    return result.finally(() => this.release(key));
  }

  private wait(state: KeyState): Promise<void> {
    if (state.queue.length >= this.options.maxQueued) {
      return Promise.reject(this.tooMany('too many requests of this client are waiting'));
    }
    return new Promise<void>((resolve, reject) => {
      state.queue.push({ start: resolve, refuse: reject, since: performance.now() });
      this.queued.add(state);
      if (!this.sweeper) {
        this.sweeper = setInterval(() => this.refuseOverdue(), Math.max(10, Math.min(100, this.options.maxWaitMs / 4)));
        this.sweeper.unref();
      }
    });
  }

  /** Refuses every waiter queued longer than maxWaitMs (oldest first in each queue). */
  private refuseOverdue(): void {
    const deadline = performance.now() - this.options.maxWaitMs;
    for (const state of this.queued) {
      while (state.queue.length > 0 && state.queue[0]!.since <= deadline) {
        state.queue.shift()!.refuse(this.tooMany("this client's requests waited too long for the database"));
      }
      if (state.queue.length === 0) this.queued.delete(state);
    }
    if (this.queued.size === 0) {
      clearInterval(this.sweeper);
      this.sweeper = undefined;
    }
  }

  private release(key: string): void {
    const state = this.keys.get(key);
    if (!state) return;
    const next = state.queue.shift();
    // The slot passes straight to the next waiter (running stays the same).
    if (next) return next.start();
    state.running--;
    if (state.running === 0) this.keys.delete(key);
  }

  private tooMany(message: string): HttpError {
    const retryAfter = Math.max(1, Math.ceil(this.options.maxWaitMs / 1000 / 4));
    return new HttpError(429, 'rate_limited', message, { retry_after: retryAfter });
  }
}

/** The limiter key of a request: the user, or the client IP when signed out. */
export function fairShareKey(userId: string | undefined, clientIp: string | undefined): string {
  return userId ? `user:${userId}` : `ip:${clientIp ?? 'unknown'}`;
}

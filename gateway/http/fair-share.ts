// Fair share of the database pool: every client (a signed-in user, or an
// unauthenticated client IP) may run `perKey` transactions at once, whatever
// the others do. A client that has had the pool to itself for the last
// second (no other client's transaction running or started) may run more,
// but never on the last `perKey` connections of the pool (`capacity`): those
// stay free, so a client that arrives gets its share at once, and from then
// on the first client is held to its share again. A client's excess requests
// wait their turn in a bounded FIFO queue (so a burst of 50 parallel requests
// all complete with their normal answers); past the queue's bound
// (`maxQueued` waiting, or a wait longer than `maxWaitMs`) the request is
// refused with 429 and a Retry-After. Unauthenticated work (register,
// signup, login) counts against the client IP's share like everything else;
// its bcrypt work has its own fair queue (core/fair-queue.ts).
//
// Per process: with several replicas each has its own limiter, which still
// bounds every client's share of each replica's pool.
//
// Why the last perKey connections stay free, measured: docs/decisions.md#the-fair-share-of-the-pool.
import { HttpError } from '../core/errors.ts';
import type { FairShareOptions } from '../core/config.ts';

export type { FairShareOptions };

/** How long a client must have had the pool to itself to go past its share. */
const ALONE_MS = 1000;


interface Waiter {
  start: () => void;
  refuse: (err: HttpError) => void;
  /** When it was queued (performance.now()). */
  since: number;
}

interface KeyState {
  key: string;
  running: number;
  queue: Waiter[];
}

export class FairShare {
  private readonly keys = new Map<string, KeyState>();
  /** Clients with a queue; one timer refuses their waiters that waited too long (none per request). */
  private readonly queued = new Set<KeyState>();
  private sweeper: NodeJS.Timeout | undefined;
  /** Transactions running, of all clients. */
  private running = 0;
  /** The client that started a transaction last, and when (performance.now()). */
  private lastKey = '';
  private lastAt = -Infinity;
  /** When a client other than lastKey last started one. */
  private otherAt = -Infinity;

  constructor(readonly options: FairShareOptions) {}

  /** Runs `fn` once `key` has a free slot; 429 when its queue is full or the wait too long. */
  run<T>(key: string, fn: () => Promise<T>): Promise<T> {
    let state = this.keys.get(key);
    if (!state) {
      state = { key, running: 0, queue: [] };
      this.keys.set(key, state);
    }
    // A free slot: no promise, no timer (the common case). Requests already
    // waiting go first.
    if (state.queue.length === 0 && this.mayStart(state)) {
      this.started(state);
      return this.runHolding(state, fn);
    }
    return this.wait(state).then(() => this.runHolding(state, fn));
  }

  /**
   * Within its share; or past it when the client has had the pool to itself
   * for ALONE_MS, and perKey connections of the pool stay free.
   */
  private mayStart(state: KeyState): boolean {
    const { perKey, capacity } = this.options;
    if (state.running < perKey) return true;
    if (capacity === undefined || this.running + 1 + perKey > capacity || this.running > state.running) return false;
    const othersLastStarted = this.lastKey === state.key ? this.otherAt : this.lastAt;
    return performance.now() - othersLastStarted >= ALONE_MS;
  }

  private started(state: KeyState): void {
    state.running++;
    this.running++;
    if (this.lastKey !== state.key) {
      this.otherAt = this.lastAt;
      this.lastKey = state.key;
    }
    this.lastAt = performance.now();
  }

  /** Clients with requests running or waiting (for tests and diagnostics). */
  get activeKeys(): number {
    return this.keys.size;
  }

  private runHolding<T>(state: KeyState, fn: () => Promise<T>): Promise<T> {
    let result: Promise<T>;
    try {
      result = fn();
    } catch (err) {
      result = Promise.reject(err);
    }
    return result.finally(() => this.release(state));
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

  private release(state: KeyState): void {
    state.running--;
    this.running--;
    // Waiters that may start now: this client's next one, then other
    // clients' (those running the fewest first).
    if (state.queue.length > 0) this.admit(state);
    if (this.queued.size > 0) {
      for (const other of [...this.queued].sort((a, b) => a.running - b.running)) this.admit(other);
    }
    if (state.running === 0 && state.queue.length === 0) this.keys.delete(state.key);
  }

  private admit(state: KeyState): void {
    while (state.queue.length > 0 && this.mayStart(state)) {
      this.started(state);
      state.queue.shift()!.start();
    }
    if (state.queue.length === 0) this.queued.delete(state);
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

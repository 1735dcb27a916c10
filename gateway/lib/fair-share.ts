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
  timer: NodeJS.Timeout;
}

interface KeyState {
  running: number;
  queue: Waiter[];
}

export class FairShare {
  private readonly keys = new Map<string, KeyState>();

  constructor(readonly options: FairShareOptions) {}

  /** Runs `fn` once `key` has a free slot; 429 when its queue is full or the wait too long. */
  async run<T>(key: string, fn: () => Promise<T>): Promise<T> {
    await this.acquire(key);
    try {
      return await fn();
    } finally {
      this.release(key);
    }
  }

  /** Clients with requests running or waiting (for tests and diagnostics). */
  get activeKeys(): number {
    return this.keys.size;
  }

  private acquire(key: string): Promise<void> {
    let state = this.keys.get(key);
    if (!state) {
      state = { running: 0, queue: [] };
      this.keys.set(key, state);
    }
    if (state.running < this.options.perKey) {
      state.running++;
      return Promise.resolve();
    }
    if (state.queue.length >= this.options.maxQueued) {
      return Promise.reject(this.tooMany('too many requests of this client are waiting'));
    }
    const queued = state;
    return new Promise<void>((resolve, reject) => {
      const waiter: Waiter = {
        start: () => {
          clearTimeout(waiter.timer);
          resolve();
        },
        timer: setTimeout(() => {
          const at = queued.queue.indexOf(waiter);
          if (at >= 0) queued.queue.splice(at, 1);
          reject(this.tooMany('this client\'s requests waited too long for the database'));
        }, this.options.maxWaitMs),
      };
      queued.queue.push(waiter);
    });
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

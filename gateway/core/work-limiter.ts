// A bound on one kind of expensive work per process (password hashing): at
// most `concurrency` run at once, at most `maxQueued` wait their turn in
// order, and past that the request is refused at once with 503 and a
// Retry-After, before any of its work starts. The work itself must not block
// the event loop (bcrypt runs on libuv's thread pool), so a flood of it
// leaves the process answering everything else.
//
// A place is taken with enter() (a running slot, or a place in the queue)
// before the work's other steps, so a request refused here has done nothing
// yet; `turn` resolves when it may run; leave() gives the place back (in the
// queue or running) and must always be called. run() does all three.
import { HttpError } from './errors.ts';

export interface WorkLimiterOptions {
  /** Work items running at once. */
  concurrency: number;
  /** Work items waiting at most; more are refused (503). */
  maxQueued: number;
  /** What the 503 says is busy. */
  what: string;
}

export interface Place {
  /** Resolves when the work may run. */
  readonly turn: Promise<void>;
  /** Gives the place back (idempotent). */
  leave(): void;
}

const RETRY_AFTER_SECONDS = 1;

export class WorkLimiter {
  private running = 0;
  private readonly queue: (() => void)[] = [];

  constructor(readonly options: WorkLimiterOptions) {}

  /** Work running and waiting now (for tests and diagnostics). */
  get load(): { running: number; queued: number } {
    return { running: this.running, queued: this.queue.length };
  }

  /** Takes a place; throws 503 (Retry-After) when the queue is full. */
  enter(): Place {
    if (this.running < this.options.concurrency) {
      this.running++;
      return this.place(Promise.resolve(), () => this.release());
    }
    if (this.queue.length >= this.options.maxQueued) {
      throw new HttpError(503, 'service_unavailable', `too many ${this.options.what} at once, try again`, {
        retry_after: RETRY_AFTER_SECONDS,
      });
    }
    let started = false;
    let start!: () => void;
    const turn = new Promise<void>((resolve) => {
      start = () => {
        started = true;
        resolve();
      };
    });
    this.queue.push(start);
    return this.place(turn, () => {
      if (started) this.release();
      else this.queue.splice(this.queue.indexOf(start), 1);
    });
  }

  /** Runs `fn` in its turn (503 when the queue is full). */
  async run<T>(fn: () => Promise<T>): Promise<T> {
    const place = this.enter();
    try {
      await place.turn;
      return await fn();
    } finally {
      place.leave();
    }
  }

  private place(turn: Promise<void>, leave: () => void): Place {
    let left = false;
    return {
      turn,
      leave: () => {
        if (left) return;
        left = true;
        leave();
      },
    };
  }

  /** A running item is done: the next waiting one starts in its slot. */
  private release(): void {
    const next = this.queue.shift();
    if (next) next();
    else this.running--;
  }
}

// A bound on one kind of expensive work per process (password hashing), fair
// between clients: at most `concurrency` items run at once; the rest wait in
// one queue per client (a client address), and a free slot goes to the
// clients in turn, one item each (round robin), not to whoever queued first.
// So one client's flood of 50 waits behind the others: a client that sends
// one request waits for at most one item of each other client, however many
// they queued. At most `maxQueued` items wait in all; when the queue is full,
// a newcomer takes the place of the newest item of the client with the
// longest queue (that item is refused), unless it is that client itself: a
// flood can fill the queue only while nobody else is waiting. A refusal is
// 503 with a Retry-After, before the refused request's work starts.
//
// A place is taken with enter() (a running slot, or a place in its client's
// queue) before the work's other steps; `turn` resolves when it may run (or
// rejects with the 503 when the place was given to another client's
// request); leave() gives the place back (in the queue or running) and must
// always be called. run() does all three.
import { HttpError } from '../web/errors.ts';

export interface FairQueueOptions {
  /** Work items running at once. */
  concurrency: number;
  /** Work items waiting at most, all clients together; more are refused (503). */
  maxQueued: number;
  /** What the 503 says is busy. */
  what: string;
}

export interface Place {
  /** Resolves when the work may run; rejects (503) when the place went to another client. */
  readonly turn: Promise<void>;
  /** Gives the place back (idempotent). */
  leave(): void;
}

interface Waiter {
  start: () => void;
  refuse: (err: HttpError) => void;
}

const RETRY_AFTER_SECONDS = 1;

export class FairQueue {
  private running = 0;
  private queued = 0;
  /** Clients with waiting items, in turn order: the first is served next, then goes to the back. */
  private readonly turns = new Map<string, Waiter[]>();

  constructor(readonly options: FairQueueOptions) {}

  /** Items waiting and running now (the metrics). */
  get depth(): { waiting: number; running: number } {
    return { waiting: this.queued, running: this.running };
  }

  /** Work running and waiting now, and the clients waiting (for tests and diagnostics). */
  get load(): { running: number; queued: number; clients: number } {
    return { running: this.running, queued: this.queued, clients: this.turns.size };
  }

  /** Takes a place for `client`; throws 503 (Retry-After) when the queue is full of this client's own items. */
  enter(client: string): Place {
    if (this.running < this.options.concurrency && this.queued === 0) {
      this.running++;
      return place(Promise.resolve(), () => this.release());
    }
    const mine = this.turns.get(client);
    if (this.queued >= this.options.maxQueued && !this.evictFor(mine?.length ?? 0)) throw this.busy();
    let started = false;
    let waiter!: Waiter;
    const turn = new Promise<void>((resolve, reject) => {
      waiter = {
        start: () => {
          started = true;
          resolve();
        },
        refuse: reject,
      };
    });
    // A refusal nobody awaits yet (the caller is in its other steps) is not an unhandled rejection.
    turn.catch(() => {});
    if (mine) mine.push(waiter);
    else this.turns.set(client, [waiter]);
    this.queued++;
    return place(turn, () => {
      if (started) return this.release();
      const queue = this.turns.get(client);
      const at = queue?.indexOf(waiter) ?? -1;
      if (at < 0) return; // refused already
      queue!.splice(at, 1);
      this.queued--;
      if (queue!.length === 0) this.turns.delete(client);
    });
  }

  /** Runs `fn` in `client`'s turn (503 when refused). */
  async run<T>(client: string, fn: () => Promise<T>): Promise<T> {
    const held = this.enter(client);
    try {
      await held.turn;
      return await fn();
    } finally {
      held.leave();
    }
  }

  /**
   * The queue is full: refuse the newest item of the client with the longest
   * queue if it is longer than the newcomer's client's (`own` items) plus
   * one, so that the newcomer can wait instead. Whether it did.
   */
  private evictFor(own: number): boolean {
    let longest: [string, Waiter[]] | undefined;
    for (const entry of this.turns) if (!longest || entry[1].length > longest[1].length) longest = entry;
    if (!longest || longest[1].length <= own + 1) return false;
    const [client, queue] = longest;
    queue.pop()!.refuse(this.busy());
    this.queued--;
    if (queue.length === 0) this.turns.delete(client);
    return true;
  }

  /** A running item is done: the next client in turn starts one item in its slot. */
  private release(): void {
    const next = this.turns.entries().next();
    if (next.done) {
      this.running--;
      return;
    }
    const [client, queue] = next.value;
    const waiter = queue.shift()!;
    this.queued--;
    // To the back of the turn order (or gone when it has nothing left waiting).
    this.turns.delete(client);
    if (queue.length > 0) this.turns.set(client, queue);
    waiter.start();
  }

  private busy(): HttpError {
    return new HttpError(503, 'service_unavailable', `too many ${this.options.what} at once, try again`, {
      retry_after: RETRY_AFTER_SECONDS,
    });
  }
}

function place(turn: Promise<void>, leave: () => void): Place {
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

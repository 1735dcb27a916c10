// bcrypt (@node-rs/bcrypt) on a few threads of their own, at the lowest CPU
// priority (nice 19 on Linux), never on the event loop: a piscina pool
// (maxThreads = PASSWORD_HASH_CONCURRENCY, niceIncrement 19) running
// bcrypt-worker.cjs. What waits, and whose turn it is, is fair-queue.ts (in
// passwords.ts): it hands the pool at most one job per thread, so the pool's
// own queue stays empty. Why niced threads of their own, and why piscina
// (measured against the hand-written pool it replaced): docs/decisions.md#password-hashing-threads.
import path from 'node:path';
import { Piscina } from 'piscina';

/** The nice value of the hashing threads (Linux: per thread; elsewhere they run at the process's priority). */
export const HASH_THREAD_NICE = 19;

type Job = { op: 'verify'; password: string; hash: string } | { op: 'hash'; password: string; cost: number };

export class HashThreads {
  private readonly pool: Piscina<Job, boolean | string>;

  constructor(size: number) {
    this.pool = new Piscina<Job, boolean | string>({
      filename: path.join(import.meta.dirname, 'bcrypt-worker.cjs'),
      minThreads: 0,
      maxThreads: size,
      // The fair queue in front never gives it more than a job per thread.
      maxQueue: size,
      niceIncrement: process.platform === 'linux' ? HASH_THREAD_NICE : 0,
      // Idle threads end after a minute; they never keep the process alive.
      idleTimeout: 60_000,
    });
  }

  verify(password: string, hash: string): Promise<boolean> {
    return this.pool.run({ op: 'verify', password, hash }) as Promise<boolean>;
  }

  hash(password: string, cost: number): Promise<string> {
    return this.pool.run({ op: 'hash', password, cost }) as Promise<string>;
  }

  /** Ends the threads (a job still running fails). */
  close(): Promise<void> {
    return this.pool.destroy();
  }
}

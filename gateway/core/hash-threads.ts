// bcrypt (@node-rs/bcrypt) on a few threads of their own, at a low CPU
// priority (nice 19 on Linux, the lowest), never on the event loop.
//
// Why not @node-rs/bcrypt's async functions on libuv's thread pool: those
// threads run at the process's priority, so a login flood's hashes compete
// for the CPU as equals with the event loop of this process and with
// Postgres on the same machine (measured: other users' profile reads fell to
// a fraction of their rate). Niced, the hashes take what the rest leaves:
// other requests keep their pace, and logins use every idle cycle.
//
// Measured (npm run bench -- peak, PostgreSQL 15 on the same 2-core machine,
// 20 clients logging in): other users' profile reads kept 52% of their idle
// rate with nice 10, 61% with nice 19; a hashing process of its own, in its
// own scheduling group at nice 19, 57-66%; the threads in SCHED_IDLE
// (chrt -i, tried later) 65% on average of 7 runs against 62% of 8 at nice 19,
// with 9% fewer logins, within the runs' spread (51-73%): not adopted.
// Hashing at ~15 logins/s needs ~0.8 of a core however low its priority, so
// the rest is what two cores leave; on a machine where the database runs
// elsewhere it is not shared.
//
// No queue policy here: WorkLimiter (passwords.ts) admits at most one job
// per thread; a job beyond that waits for a free thread.
import { createRequire } from 'node:module';
import { Worker } from 'node:worker_threads';

/** The nice value of the hashing threads (Linux: per thread; elsewhere they run at the process's priority). */
export const HASH_THREAD_NICE = 19;

const WORKER_SOURCE = `
const { parentPort, workerData } = require('node:worker_threads');
if (workerData.nice) require('node:os').setPriority(0, workerData.nice); // Linux: this thread only
const bcrypt = require(workerData.bcrypt);
parentPort.on('message', (job) => {
  let reply;
  try {
    reply = { value: job.op === 'verify' ? bcrypt.verifySync(job.password, job.hash) : bcrypt.hashSync(job.password, job.cost).replace(/^\\$2[by]\\$/, '$2a$') };
  } catch (err) {
    reply = { error: String((err && err.message) || err) };
  }
  parentPort.postMessage(reply);
});`;

const bcryptPath = createRequire(import.meta.url).resolve('@node-rs/bcrypt');

type Job = { op: 'verify'; password: string; hash: string } | { op: 'hash'; password: string; cost: number };

interface Waiting {
  job: Job;
  resolve: (value: unknown) => void;
  reject: (err: Error) => void;
}

export class HashThreads {
  private readonly idle: Worker[] = [];
  private readonly busy = new Map<Worker, Waiting>();
  private readonly waiting: Waiting[] = [];
  private started = 0;

  constructor(private readonly size: number) {}

  verify(password: string, hash: string): Promise<boolean> {
    return this.run({ op: 'verify', password, hash }) as Promise<boolean>;
  }

  hash(password: string, cost: number): Promise<string> {
    return this.run({ op: 'hash', password, cost }) as Promise<string>;
  }

  /** Ends the threads (a job still running fails). */
  async close(): Promise<void> {
    const workers = [...this.idle, ...this.busy.keys()];
    this.idle.length = 0;
    this.started = Infinity; // no new threads
    await Promise.all(workers.map((w) => w.terminate()));
  }

  private run(job: Job): Promise<unknown> {
    return new Promise((resolve, reject) => {
      this.waiting.push({ job, resolve, reject });
      this.next();
    });
  }

  private next(): void {
    while (this.waiting.length > 0) {
      const worker = this.idle.pop() ?? (this.started < this.size ? this.spawn() : undefined);
      if (!worker) return;
      const item = this.waiting.shift()!;
      this.busy.set(worker, item);
      worker.postMessage(item.job);
    }
  }

  private spawn(): Worker {
    this.started++;
    const worker = new Worker(WORKER_SOURCE, {
      eval: true,
      workerData: { bcrypt: bcryptPath, nice: process.platform === 'linux' ? HASH_THREAD_NICE : 0 },
    });
    worker.unref(); // idle hashing threads never keep the process alive
    worker.on('message', (reply: { value?: unknown; error?: string }) => {
      const item = this.busy.get(worker);
      this.busy.delete(worker);
      this.idle.push(worker);
      if (reply.error !== undefined) item?.reject(new Error(reply.error));
      else item?.resolve(reply.value);
      this.next();
    });
    const lost = (err: Error) => {
      // A thread that died: its job fails, a new thread takes its place.
      this.busy.get(worker)?.reject(err);
      this.busy.delete(worker);
      const at = this.idle.indexOf(worker);
      if (at >= 0) this.idle.splice(at, 1);
      this.started--;
      this.next();
    };
    worker.on('error', lost);
    worker.on('exit', (code) => {
      if (this.busy.has(worker) || this.idle.includes(worker)) lost(new Error(`hashing thread exited with ${code}`));
    });
    return worker;
  }
}

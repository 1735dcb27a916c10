// Whether the database answers at all, for the pools of pool.ts.
//
// A stopped database refuses connections and requests fail at once. A frozen
// one (a hung disk, a network partition, a SIGSTOPped Postgres) fails
// nothing: connections stay open and nothing answers, so every request would
// wait for its whole deadline, and a request that has not been sent yet would
// be sent into the silence (and run when the database resumes, long after its
// client was told it failed).
//
// So when an operation has waited PROBE_AFTER_MS (for a connection or for an
// answer) and nothing at all has answered meanwhile, the watch asks the
// database on a connection of its own (`select 1` within PROBE_TIMEOUT_MS).
// No answer: the database is unresponsive. Operations still waiting for a
// connection are cut at once, and no new one is sent (core/database/transaction.ts answers 503:
// nothing of them reached the database), until a probe (every
// REPROBE_MS while it lasts) is answered again. Statements already sent keep
// their deadline. A database that is merely busy answers the probe, and
// nothing changes.
import postgres from 'postgres';
import type { Logger } from '../process/log.ts';

/** An operation that has waited this long, with no answer from the database meanwhile, has the database probed. */
export const PROBE_AFTER_MS = 500;
/** A probe not answered within this says the database is not answering. */
export const PROBE_TIMEOUT_MS = 1_000;
/** While it does not answer, it is probed again this often. */
const REPROBE_MS = 250;

export interface WatchOptions {
  /** Behind a transaction-mode pooler: no prepared statements. */
  transactionPooler: boolean;
  log?: Logger;
}

/** One operation on the pool, from its wait for a connection to its outcome. */
export interface WatchedOperation {
  /** Its statements are on their way: the watch no longer cuts its wait. */
  sent(): void;
  /** It is over; `answered`: the database answered it (a result or an error of its own). */
  done(answered: boolean): void;
}

interface Waiting {
  since: number;
  /** Cuts the wait (before anything was sent); undefined once sent. */
  cut?: () => void;
}

export class DatabaseWatch {
  private unresponsiveSince: number | null = null;
  private readonly waiting = new Set<Waiting>();
  private lastAnswerAt = Date.now();
  private probing = false;
  private ticker: NodeJS.Timeout | undefined;

  constructor(
    private readonly url: string,
    private readonly options: WatchOptions,
  ) {}

  /** False from a probe left unanswered until a probe is answered again. */
  get responsive(): boolean {
    return this.unresponsiveSince === null;
  }

  /** Watches an operation; `cut` ends its wait for a connection when the database stops answering. */
  enter(cut: () => void): WatchedOperation {
    const entry: Waiting = { since: Date.now(), cut };
    this.waiting.add(entry);
    this.tick();
    return {
      sent: () => {
        entry.cut = undefined;
      },
      done: (answered) => {
        this.waiting.delete(entry);
        if (answered) this.lastAnswerAt = Date.now();
        this.tick();
      },
    };
  }

  /** Starts or stops the timer that looks for silence: it runs only while something waits or the database does not answer. */
  private tick(): void {
    const needed = this.waiting.size > 0 || !this.responsive;
    if (needed && !this.ticker) {
      this.ticker = setInterval(() => this.check(), REPROBE_MS);
      this.ticker.unref();
    } else if (!needed && this.ticker) {
      clearInterval(this.ticker);
      this.ticker = undefined;
    }
  }

  private check(): void {
    if (this.probing) return;
    if (this.responsive) {
      const now = Date.now();
      if (now - this.lastAnswerAt < PROBE_AFTER_MS) return;
      let oldest = now;
      for (const w of this.waiting) oldest = Math.min(oldest, w.since);
      if (now - oldest < PROBE_AFTER_MS) return;
    }
    void this.probe();
  }

  private async probe(): Promise<void> {
    this.probing = true;
    const client = postgres(this.url, {
      max: 1,
      connect_timeout: (PROBE_TIMEOUT_MS * 2) / 1000,
      fetch_types: false,
      prepare: !this.options.transactionPooler,
      idle_timeout: 1,
      onnotice: () => {},
      connection: { application_name: 'db-probe' },
    });
    let timer: NodeJS.Timeout | undefined;
    try {
      await Promise.race([
        client`select 1`,
        new Promise((_, reject) => (timer = setTimeout(() => reject(new Error('no answer')), PROBE_TIMEOUT_MS))),
      ]);
      this.answered();
    } catch {
      this.silent();
    } finally {
      clearTimeout(timer);
      this.probing = false;
      void client.end({ timeout: 0 }).catch(() => {});
      this.tick();
    }
  }

  private answered(): void {
    this.lastAnswerAt = Date.now();
    if (this.unresponsiveSince === null) return;
    const seconds = (Date.now() - this.unresponsiveSince) / 1000;
    this.unresponsiveSince = null;
    this.options.log?.info({ seconds }, `database: answering again after ${seconds.toFixed(1)} s without an answer`);
  }

  private silent(): void {
    if (this.unresponsiveSince === null) {
      this.unresponsiveSince = Date.now();
      this.options.log?.warn(
        `database: no answer within ${PROBE_TIMEOUT_MS} ms (frozen or unreachable): requests not yet sent are answered 503 at once until it answers`,
      );
    }
    for (const w of this.waiting) {
      const cut = w.cut;
      w.cut = undefined;
      cut?.();
    }
  }
}

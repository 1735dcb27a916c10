// While the database is unreachable every request is answered 503 at once,
// and the background work (realtime maintenance and reads) fails on every
// tick; logging each with its stack trace buried the log. Instead, per kind
// of work (an OutageLog): the first failure is one warning line with its
// cause (no stack), then one line every 10 s with how many more failed while
// it lasts, and one line when it works again, saying for how long it did not
// (each request still has its own line in the request log, with its status).
import { toHttpError } from '../web/errors.ts';
import type { Logger } from '../process/log.ts';

const SUMMARY_EVERY_MS = 10_000;

/** Whether an error is the database being unreachable or not answering (503, or a write's outcome unknown), not a fault of the work. */
export function isDatabaseUnavailable(err: unknown): boolean {
  const { status, code } = toHttpError(err);
  return status === 503 || code === 'outcome_unknown';
}

export class OutageLog {
  private since: number | null = null;
  private failures = 0;
  private counted = 0;
  private summary: NodeJS.Timeout | undefined;

  /** `what` names the work in each line ("requests", "realtime maintenance"); `failed` says what a failure means. */
  constructor(
    private readonly log: Logger,
    private readonly what: string,
    private readonly failed = 'failed',
  ) {}

  /** A failure because the database is not available. */
  failure(err: unknown): void {
    this.failures++;
    this.counted++;
    if (this.since !== null) return;
    this.since = Date.now();
    this.counted = 0;
    const e = err as { code?: unknown; message?: unknown } | null;
    this.log.warn({ cause: { code: e?.code, message: e?.message } }, `database unavailable: ${this.what} ${this.failed}`);
    this.summary = setTimeout(() => this.report(), SUMMARY_EVERY_MS).unref();
  }

  /** The work succeeded: if it was failing, one line says it is back. */
  success(): void {
    if (this.since === null) return;
    const seconds = (Date.now() - this.since) / 1000;
    clearTimeout(this.summary);
    this.log.info(
      { seconds, failures: this.failures },
      `database available again: ${this.what} work again after ${seconds.toFixed(1)} s (${this.failures} ${this.failed} meanwhile)`,
    );
    this.since = null;
    this.failures = 0;
    this.counted = 0;
  }

  private report(): void {
    if (this.since === null) return;
    if (this.counted > 0) this.log.warn({ count: this.counted }, `database unavailable: ${this.counted} more ${this.what} ${this.failed} in the last ${SUMMARY_EVERY_MS / 1000} s`);
    this.counted = 0;
    this.summary = setTimeout(() => this.report(), SUMMARY_EVERY_MS).unref();
  }
}

let requests: OutageLog | undefined;

/** Notes a request answered 503 (or 504 outcome_unknown) because of the database (http/route.ts). */
export function noteUnavailable(log: Logger, err: unknown): void {
  requests ??= new OutageLog(log, 'requests', 'answered 503 with Retry-After');
  requests.failure(err);
}

/** Notes a request the database served (after an outage, the line that says it is over). */
export function noteServed(): void {
  requests?.success();
}

// While the database is unreachable every request is answered 503 at once;
// logging each with its stack trace buried the log (one trace per request).
// Instead: the first refusal is one warning line with its cause, then one
// line every 10 s with how many more were refused while it lasts (each
// request still has its own line in the request log, with its status).
import type { Logger } from './log.ts';

const SUMMARY_EVERY_MS = 10_000;

let refused = 0;
let summary: NodeJS.Timeout | undefined;

/** Notes a request answered 503 because of the database (core/errors.ts unavailable). */
export function noteUnavailable(log: Logger, err: unknown): void {
  refused++;
  if (summary) return;
  const e = err as { code?: unknown; message?: unknown } | null;
  log.warn({ cause: { code: e?.code, message: e?.message } }, 'database unavailable: answering 503 with Retry-After');
  refused = 0;
  summary = setTimeout(function report() {
    if (refused === 0) {
      summary = undefined;
      return;
    }
    log.warn({ refused }, `database unavailable: ${refused} more requests answered 503 in the last ${SUMMARY_EVERY_MS / 1000} s`);
    refused = 0;
    summary = setTimeout(report, SUMMARY_EVERY_MS).unref();
  }, SUMMARY_EVERY_MS).unref();
}

// Structured logs (pino). Authorization headers, cookies, passwords and tokens
// are redacted wherever they appear in a logged object.
import { destination as pinoDestination, pino, symbols, type DestinationStream, type Logger } from 'pino';

export type { Logger };

export function createLogger(level: string, name = 'gateway', destination?: DestinationStream): Logger {
  const options = {
    name,
    level,
    redact: {
      paths: [
        'req.headers.authorization',
        'req.headers.cookie',
        '*.password',
        '*.token',
        '*.access_token',
        '*.refresh_token',
        'password',
        'token',
      ],
      censor: '[redacted]',
    },
  };
  return pino(options, destination ?? bufferedStdout());
}

/**
 * stdout, written in blocks of 4 KB or every 250 ms, whichever comes first:
 * a write per log line (one per request) was a measurable part of a
 * request's cost. pino flushes what is left when the process exits.
 */
function bufferedStdout(): DestinationStream {
  const stream = pinoDestination({ dest: 1, sync: false, minLength: 4096 });
  setInterval(() => {
    try {
      stream.flush();
    } catch {
      // not ready, or already closed: the next tick (or exit) writes it
    }
  }, 250).unref();
  return stream;
}

/**
 * A logger for request log lines: the same destination, level and bindings
 * as `log`, without redaction (the line's fields are fixed and hold no
 * secret; redaction walks every logged object, a measurable part of a
 * request). One per logger.
 */
const accessLogs = new WeakMap<Logger, Logger>();
export function accessLogOf(log: Logger): Logger {
  let access = accessLogs.get(log);
  if (access === undefined) {
    const stream = (log as unknown as Record<symbol, DestinationStream>)[symbols.streamSym];
    access = pino({ level: log.level }, stream).child(log.bindings());
    accessLogs.set(log, access);
  }
  return access;
}

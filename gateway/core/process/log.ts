// Structured logs (pino). Authorization headers, cookies, passwords and tokens
// are redacted wherever they appear in a logged object.
import fs from 'node:fs';
import { pino, symbols, type DestinationStream, type Logger } from 'pino';

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
        '*.password_hash',
        '*.token',
        '*.access_token',
        '*.refresh_token',
        'password',
        'password_hash',
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
 * request's cost. What is left is written when the process exits.
 */
function bufferedStdout(): DestinationStream {
  return new BufferedFdStream(1);
}

/**
 * A log destination on a file descriptor, written in blocks (the 250 ms
 * timer does not keep the process alive), with what is left written
 * synchronously at exit.
 *
 * Not pino.destination (sonic-boom): at exit it retries a failed write
 * forever, so a process whose stdout had no reader any more (EPIPE: the
 * pipe's other end gone, e.g. the process that started it) never exited.
 * Found as MCP processes left running after the test suite. Here a write
 * that fails for any reason but a full pipe (EAGAIN) ends the logging, and
 * a full pipe at exit is waited on for at most a second.
 */
export class BufferedFdStream implements DestinationStream {
  private pending = '';
  /** A block is being written (on libuv's threads: it finishes even at exit). */
  private writing = false;
  private broken = false;

  constructor(
    private readonly fd: number,
    private readonly minLength = 4096,
    intervalMs = 250,
  ) {
    setInterval(() => this.flush(), intervalMs).unref();
    process.on('exit', () => this.flushSync());
  }

  write(line: string): boolean {
    if (this.broken) return true;
    this.pending += line;
    if (this.pending.length >= this.minLength) this.flush();
    return true;
  }

  /** Starts writing what is buffered (unless a block is being written: it follows that one). */
  flush(): void {
    if (this.broken || this.writing || this.pending === '') return;
    const block = Buffer.from(this.pending);
    this.pending = '';
    this.send(block);
  }

  private send(block: Buffer): void {
    this.writing = true;
    fs.write(this.fd, block, 0, block.length, null, (err, written) => {
      if (err) {
        if (err.code === 'EAGAIN') setTimeout(() => this.send(block), 10).unref();
        else this.stop();
        return;
      }
      if (written < block.length) return this.send(block.subarray(written));
      this.writing = false;
      if (this.pending.length >= this.minLength) this.flush();
    });
  }

  /** Everything buffered, now (at exit). */
  flushSync(): void {
    if (this.broken) return;
    const data = Buffer.from(this.pending);
    this.pending = '';
    const pause = new Int32Array(new SharedArrayBuffer(4));
    for (let offset = 0, waits = 0; offset < data.length; ) {
      try {
        offset += fs.writeSync(this.fd, data, offset);
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code !== 'EAGAIN' || ++waits > 100) return this.stop();
        Atomics.wait(pause, 0, 0, 10);
      }
    }
  }

  /** Nothing can be written any more (the reader is gone): drop what comes. */
  private stop(): void {
    this.broken = true;
    this.pending = '';
  }
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

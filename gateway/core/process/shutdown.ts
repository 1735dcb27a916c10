// The orderly exit every process shares (`npm start`, `npm run mcp`,
// `npm run worker`): on SIGINT and SIGTERM, or when the caller asks (its
// parent went away), stop once, log what went wrong, exit 0 (or the code the
// caller gives: a part that could not start); with a limit, exit 1 when
// stopping has not finished in time.
import type { Logger } from './log.ts';

export interface Shutdown {
  /** Stops the process (once; later calls do nothing), then exits with `exitCode` (default 0). */
  (reason: string, exitCode?: number): Promise<void>;
  /** Whether stopping has begun (a start still under way must not go on). */
  readonly stopping: boolean;
}

export function onShutdown(log: Logger, stop: () => Promise<void>, options: { limitMs?: number } = {}): Shutdown {
  let stopping = false;
  const shutdown = async (reason: string, exitCode = 0) => {
    if (stopping) return;
    stopping = true;
    log.info({ reason }, 'shutting down');
    if (options.limitMs !== undefined) {
      const seconds = options.limitMs / 1000;
      // Whatever stopping waits for, the process ends.
      setTimeout(() => {
        log.error(`shutdown did not finish within ${seconds} s; exiting`);
        process.exit(1);
      }, options.limitMs);
    }
    try {
      await stop();
    } catch (err) {
      log.error({ err }, 'error while shutting down');
    }
    process.exit(exitCode);
  };
  process.on('SIGINT', () => void shutdown('SIGINT'));
  process.on('SIGTERM', () => void shutdown('SIGTERM'));
  return Object.defineProperty(shutdown, 'stopping', { get: () => stopping }) as Shutdown;
}

// Polling for something a test cannot await directly (a frame on a socket).

/** The first value `fn` gives other than undefined, polled every 20 ms; throws after `timeoutMs`. */
export async function waitFor<T>(fn: () => T | undefined, what: string, timeoutMs = 5000): Promise<T> {
  const started = Date.now();
  for (;;) {
    const value = fn();
    if (value !== undefined) return value;
    if (Date.now() - started > timeoutMs) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

// Polling for something a test cannot await directly (a frame on a socket,
// a row a background job writes, a delivery a receiver gets).

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

/** Polls `probe` every 50 ms until it returns something truthy (an async probe: a query, a request); throws after `timeoutMs`. */
export async function eventually<T>(what: string, probe: () => Promise<T | undefined | null | false>, timeoutMs = 15_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (value) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

// Ends the long-lived connections (SSE streams, websocket channels) of a
// credential as soon as it ends: a session, by logout, refresh-token reuse or
// a password reset; an API token (watched under its id), by deactivation,
// deletion or a password reset (its expiry ends the stream by a timer).
// Postgres notifies channel `session_ended` with the session's or the
// token's id (triggers on identity.refresh_tokens and app.api_tokens); every
// gateway process LISTENs and calls the callbacks registered for that id.
// After the LISTEN connection is (re)established, the watched ids are
// re-checked in one query (private.sessions_ended), so a notification missed
// during a reconnect still ends them. (REST requests need none of this:
// withClaims checks the session, and an API token is authenticated, in the
// request's own statements; with read replicas, `onEnded` hears every ended
// session so that its reads go to the primary until every usable replica has
// the end: core/database/replicas.ts.)
import type { Sql } from '../core/database/pool.ts';
import type { Logger } from '../core/process/log.ts';

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

export class SessionWatch {
  private readonly watchers = new Map<string, Set<() => void>>();
  private listener: { unlisten(): Promise<void> } | null = null;

  constructor(
    private readonly sql: Sql,
    private readonly log: Logger,
    /** Told of every session (or API token) that ends, watched here or not. */
    private readonly onEnded?: (id: string) => void,
  ) {}

  async start(): Promise<void> {
    this.listener = await this.sql.listen(
      'session_ended',
      (sessionId) => this.ended(sessionId),
      () => void this.recheck().catch((err: unknown) => this.log.warn({ err }, 'session watch: re-checking sessions failed')),
    );
  }

  async close(): Promise<void> {
    this.watchers.clear();
    const listener = this.listener;
    this.listener = null;
    await listener?.unlisten().catch((err: unknown) => this.log.warn({ err }, 'session watch: unlisten failed'));
  }

  /** Calls onEnd (once) when the session (or API token, by its id) ends; returns the function that stops watching. */
  watch(sessionId: unknown, onEnd: () => void): () => void {
    if (typeof sessionId !== 'string' || !UUID.test(sessionId)) return () => {};
    const key = sessionId.toLowerCase();
    let set = this.watchers.get(key);
    if (!set) {
      set = new Set();
      this.watchers.set(key, set);
    }
    set.add(onEnd);
    return () => {
      const current = this.watchers.get(key);
      if (!current) return;
      current.delete(onEnd);
      if (current.size === 0) this.watchers.delete(key);
    };
  }

  /** Open streams and channels of this many sessions are watched. */
  get size(): number {
    return this.watchers.size;
  }

  private ended(sessionId: string): void {
    const key = sessionId.toLowerCase();
    this.onEnded?.(key);
    const set = this.watchers.get(key);
    if (!set) return;
    this.watchers.delete(key);
    for (const onEnd of set) {
      try {
        onEnd();
      } catch (err) {
        this.log.warn({ err }, 'session watch: closing a connection failed');
      }
    }
  }

  private async recheck(): Promise<void> {
    const ids = [...this.watchers.keys()];
    if (ids.length === 0) return;
    const rows = await this.sql<{ id: string }[]>`select id from private.sessions_ended(${ids}::uuid[]) as id`;
    for (const row of rows) this.ended(row.id);
  }
}

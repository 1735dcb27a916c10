// The realtime hub: one per gateway process, shared by the SSE stream
// (sse.ts) and the supabase-js compatible websocket (websocket.ts).
//
//   * ONE dedicated LISTEN connection (postgres.js `sql.listen`) on channel
//     `event_changes`. A notification carries ids only; it just tells the hub
//     how far the change log has grown (`head`). Ids are assigned in commit
//     order, so every id up to a notified one is committed and readable.
//   * Each subscriber (an SSE stream, a websocket channel) has a cursor: the
//     last change id it has been given. Whenever a subscriber is behind the
//     head, the hub reads the log range (cursor, head] AS THAT USER (role
//     authenticated and the user's request.jwt.claims, set exactly as
//     withClaims sets them for a request), through the SQL function of its kind:
//     api.event_stream_changes (SSE) or api.realtime_event_changes
//     (websocket). Subscribers of the same kind, user and cursor share one
//     query, so a change costs one query per user with a stream, not one per
//     stream or per event. For SSE ranges the hub first asks SQL once who
//     may get anything from the range (private.event_stream_audience: the
//     members of the communities the changes touch) and moves everyone
//     else's cursor past it without a query. Nothing is filtered here: the
//     SQL functions decide what each user sees.
//   * Reading ranges rather than trusting notifications means a lost or
//     coalesced NOTIFY loses nothing: the next notification, the re-LISTEN
//     after a reconnect, or the safety poll moves the head and the range
//     covers everything in between. Every gateway process has its own LISTEN
//     connection and its own subscribers, so several replicas each deliver
//     every change to their own clients.
//   * Subscribers pull: a congested one (its socket is not draining) is
//     skipped until it drains, so the hub keeps no per-subscriber queue;
//     memory per connection is bounded by what it has been written (see
//     sse.ts and websocket.ts for the bounds and when a client is dropped).
//   * Maintenance, from every replica (each statement is safe to repeat):
//     expiries of ended events (private.log_event_expiries), pruning of the
//     log by age (admin.prune_change_log), and the heartbeat of this
//     process's stream registrations (the per-user cap counts them in
//     Postgres).
import crypto from 'node:crypto';
import postgres from 'postgres';
import type { RealtimeConfig } from '../lib/config.ts';
import type { RequestClaims, Sql } from '../lib/db.ts';
import type { Logger } from '../lib/log.ts';

export type SubscriberKind = 'sse' | 'websocket';

/** A message of the SSE stream, as api.event_stream_changes returns it. */
export interface StreamRow {
  change_id: string;
  operation: 'insert' | 'update' | 'delete';
  event: Record<string, unknown>;
}

/** A row change for postgres_changes, as api.realtime_event_changes returns it. */
export interface RealtimeRow {
  change_id: string;
  type: 'INSERT' | 'UPDATE' | 'DELETE';
  commit_timestamp: string;
  record: Record<string, unknown> | null;
  old_record: Record<string, unknown> | null;
}

interface SubscriberBase {
  readonly userId: string;
  /** The claims its queries run with (role authenticated, sub = userId). */
  readonly claims: RequestClaims;
  /** The last change id it has been given, or judged not to concern it. */
  cursor: number;
  /** False while it cannot take more (its connection is not draining). */
  canReceive(): boolean;
  /** Its resume point is no longer in the log, or the hub is closing: end it. */
  close(reason: 'pruned' | 'shutdown'): void;
}

export interface SseSubscriber extends SubscriberBase {
  readonly kind: 'sse';
  /** The messages of the changes (previous cursor, upto]; possibly none. */
  deliver(rows: readonly StreamRow[]): void;
  keepAlive(): void;
}

export interface WebSocketSubscriber extends SubscriberBase {
  readonly kind: 'websocket';
  deliver(rows: readonly RealtimeRow[]): void;
}

export type Subscriber = SseSubscriber | WebSocketSubscriber;

export interface HubOptions {
  publicUrl: string;
  statementTimeoutMs: number;
  /** Where LISTEN runs, when the pool goes through a transaction-mode pooler (DATABASE_DIRECT_URL). */
  listenSql?: Sql;
}

export class ChangeHub {
  /** Names this process in the stream registrations. */
  readonly gatewayId = `gateway-${crypto.randomUUID()}`;
  private head = 0;
  private readonly subscribers = new Set<Subscriber>();
  private readonly busy = new Set<Subscriber>();
  private readonly isolated = new Set<Subscriber>();
  /**
   * Audiences of SSE ranges ("from:upto" → the users who may get a message;
   * 'everyone' when it could not be narrowed), or the read in flight.
   */
  private readonly audiences = new Map<string, Set<string> | 'everyone' | Promise<void>>();
  private inFlight = 0;
  private readonly running = new Set<Promise<void>>();
  private scheduled = false;
  private backoffUntil = 0;
  private closing = false;
  private started = false;
  private readonly timers: NodeJS.Timeout[] = [];
  private listener: { unlisten(): Promise<void> } | null = null;
  /** Registrations (app.event_streams ids) this process holds. */
  private readonly registrations = new Set<string>();
  private readonly toRelease = new Set<string>();
  private releaseScheduled = false;
  /** Formatted output per query result, shared by the subscribers of one group. */
  readonly formatted = new WeakMap<object, string>();

  constructor(
    private readonly sql: Sql,
    readonly config: RealtimeConfig,
    private readonly log: Logger,
    private readonly options: HubOptions,
  ) {}

  /** Whether new streams are accepted (started and not shutting down). */
  get accepting(): boolean {
    return this.started && !this.closing;
  }

  get size(): number {
    return this.subscribers.size;
  }

  async start(): Promise<void> {
    await this.refreshHead();
    const meta = await (this.options.listenSql ?? this.sql).listen(
      'event_changes',
      (payload) => this.onNotification(payload),
      // Called on the first LISTEN and after every reconnect: notifications
      // may have been missed meanwhile, so read the head.
      () => void this.refreshHead().catch((err: unknown) => this.log.warn({ err }, 'realtime: reading the change log head failed')),
    );
    this.listener = meta;
    const every = (ms: number, fn: () => Promise<unknown>) => {
      const timer = setInterval(() => {
        if (this.closing) return;
        fn().catch((err: unknown) => this.log.warn({ err }, 'realtime: maintenance failed'));
      }, ms);
      timer.unref();
      this.timers.push(timer);
    };
    every(this.config.pollIntervalMs, () => this.refreshHead());
    every(this.config.expiryIntervalMs, () => this.sql`select private.log_event_expiries()`);
    every(this.config.pruneIntervalMs, () => this.prune());
    every(Math.max(1000, (this.config.registrationTtlSeconds * 1000) / 3), () => this.renewRegistrations());
    every(this.config.keepAliveMs, async () => {
      for (const s of this.subscribers) if (s.kind === 'sse') s.keepAlive();
    });
    this.started = true;
    this.log.debug({ gateway: this.gatewayId, head: this.head }, 'realtime hub listening');
  }

  /** Prunes the change log (also run on a timer). Returns how many entries went. */
  async prune(): Promise<number> {
    const [row] = await this.sql<{ gone: string }[]>`
      select admin.prune_change_log(make_interval(secs => ${this.config.retentionSeconds})) as gone`;
    return Number(row?.gone ?? 0);
  }

  /** Logs expiries of ended events now (also run on a timer). */
  async logExpiries(): Promise<number> {
    const [row] = await this.sql<{ n: string }[]>`select private.log_event_expiries() as n`;
    return Number(row?.n ?? 0);
  }

  /** The newest change id in the log, read now (also moves the hub's head). */
  async currentHead(): Promise<number> {
    await this.refreshHead();
    return this.head;
  }

  add(subscriber: Subscriber): void {
    if (this.closing) {
      subscriber.close('shutdown');
      return;
    }
    this.subscribers.add(subscriber);
    // Its starting point is a committed id: the head is at least there.
    this.advance(subscriber.cursor);
    this.schedule();
  }

  remove(subscriber: Subscriber): void {
    this.subscribers.delete(subscriber);
  }

  /** A subscriber can take more again (its connection drained). */
  wake(): void {
    this.schedule();
  }

  /** Records a registration (app.event_streams) held by this process. */
  holdRegistration(id: string): void {
    this.registrations.add(id);
  }

  /** Deletes a registration (batched with others released at the same time). */
  releaseRegistration(id: string): void {
    if (!this.registrations.delete(id)) return;
    this.toRelease.add(id);
    if (this.releaseScheduled) return;
    this.releaseScheduled = true;
    setImmediate(() => {
      this.releaseScheduled = false;
      void this.flushReleases();
    });
  }

  /**
   * Clean shutdown: no new streams; every stream and channel is ended, the
   * reads in flight finish, the registrations are deleted, and the LISTEN
   * connection is closed, all before the pool ends (server.ts).
   */
  async close(): Promise<void> {
    if (this.closing) return;
    this.closing = true;
    for (const timer of this.timers) clearInterval(timer);
    for (const s of [...this.subscribers]) s.close('shutdown');
    this.subscribers.clear();
    await Promise.allSettled([...this.running]);
    for (const id of this.registrations) this.toRelease.add(id);
    this.registrations.clear();
    await this.flushReleases();
    if (this.listener) {
      await this.listener.unlisten().catch((err: unknown) => this.log.warn({ err }, 'realtime: unlisten failed'));
      this.listener = null;
    }
  }

  private onNotification(payload: string): void {
    let id = Number.NaN;
    try {
      id = Number((JSON.parse(payload) as { id?: unknown }).id);
    } catch {
      // Not ours: read the head instead.
    }
    if (Number.isSafeInteger(id)) this.advance(id);
    else void this.refreshHead().catch((err: unknown) => this.log.warn({ err }, 'realtime: reading the change log head failed'));
  }

  private async refreshHead(): Promise<void> {
    const [row] = await this.sql<{ head: string }[]>`select head from private.change_log_position()`;
    this.advance(Number(row?.head ?? 0));
  }

  private advance(id: number): void {
    if (id > this.head) {
      this.head = id;
      this.schedule();
    }
  }

  private schedule(): void {
    if (this.scheduled || this.closing) return;
    this.scheduled = true;
    setImmediate(() => {
      this.scheduled = false;
      this.pump();
    });
  }

  /**
   * Groups the subscribers that are behind and can receive by (kind, user,
   * cursor), and reads each group's next range. Several groups share one
   * read-only transaction (its queries pipelined on one connection, the
   * claims set before each user's query), so a change seen by many users
   * costs about one round trip per transaction, not four per user.
   */
  private pump(): void {
    if (this.closing) return;
    const wait = this.backoffUntil - Date.now();
    if (wait > 0) {
      setTimeout(() => this.schedule(), wait).unref();
      return;
    }
    const byKey = new Map<string, Subscriber[]>();
    for (const s of this.subscribers) {
      if (s.cursor >= this.head || this.busy.has(s) || !s.canReceive()) continue;
      const key = `${s.kind}|${s.userId}|${s.cursor}`;
      const group = byKey.get(key);
      if (group) group.push(s);
      else byKey.set(key, [s]);
    }
    const groups: Subscriber[][] = [];
    let skipped = false;
    for (const group of byKey.values()) {
      const first = group[0]!;
      if (first.kind === 'websocket') {
        groups.push(group);
        continue;
      }
      // SSE: read only as users who may get a message from the range; move
      // the others past it (one audience query per range, not one per user).
      const from = first.cursor;
      const upto = Math.min(this.head, from + this.config.batchSize);
      const key = `${from}:${upto}`;
      const audience = this.audiences.get(key);
      if (audience === undefined) {
        this.fetchAudience(key, from, upto);
        continue;
      }
      if (audience instanceof Promise) continue;
      if (audience !== 'everyone' && !audience.has(first.userId)) {
        for (const m of group) m.cursor = upto;
        skipped = true;
        continue;
      }
      groups.push(group);
    }
    if (skipped) this.schedule();
    // After a failed shared read, its groups are read alone once (so one
    // group's error, e.g. a pruned resume point, is not everyone's).
    const alone = groups.filter((g) => g.some((s) => this.isolated.has(s)));
    const shared = groups.filter((g) => !g.some((s) => this.isolated.has(s)));
    const batches: Subscriber[][][] = alone.map((g) => [g]);
    const free = Math.max(1, this.config.queryConcurrency - this.inFlight - batches.length);
    const size = Math.max(1, Math.min(this.config.usersPerTransaction, Math.ceil(shared.length / free)));
    for (let i = 0; i < shared.length; i += size) batches.push(shared.slice(i, i + size));
    for (const batch of batches) {
      // The rest wait for a read to finish (which schedules the next pump).
      if (this.inFlight >= this.config.queryConcurrency) return;
      const run = this.pull(batch);
      this.running.add(run);
      void run.finally(() => this.running.delete(run));
    }
  }

  private fetchAudience(key: string, from: number, upto: number): void {
    const read = (async () => {
      try {
        const rows = await this.sql<{ id: string }[]>`select id from private.event_stream_audience(${from}, ${upto}) as id`;
        this.audiences.set(key, new Set(rows.map((r) => r.id)));
      } catch (err) {
        if (err instanceof postgres.PostgresError && err.code === 'PT410') {
          // Below the prune watermark: read as every user, who are told.
          this.audiences.set(key, 'everyone');
        } else {
          this.audiences.delete(key);
          if (!this.closing) {
            this.log.warn({ err, from, upto }, 'realtime: reading the audience of changes failed; retrying');
            this.backoffUntil = Date.now() + 1000;
          }
        }
      } finally {
        // Keep the recent ranges only (streams at the head share them).
        while (this.audiences.size > 256) this.audiences.delete(this.audiences.keys().next().value!);
        this.schedule();
      }
    })();
    this.audiences.set(key, read);
    this.running.add(read);
    void read.finally(() => this.running.delete(read));
  }

  private async pull(groups: Subscriber[][]): Promise<void> {
    const reads = groups.map((members) => {
      const from = members[0]!.cursor;
      return { members, from, upto: Math.min(this.head, from + this.config.batchSize) };
    });
    const everyone = groups.flat();
    for (const m of everyone) this.busy.add(m);
    this.inFlight++;
    try {
      const results = await this.sql.begin('read only', async (tx) => {
        await tx`
          select set_config('role', 'authenticated', true),
                 set_config('statement_timeout', ${String(this.options.statementTimeoutMs)}, true)`;
        const queries = reads.flatMap(({ members, from, upto }) => {
          const first = members[0]!;
          const claims = tx`select set_config('request.jwt.claims', ${JSON.stringify(first.claims)}, true)`;
          const rows =
            first.kind === 'sse'
              ? tx<StreamRow[]>`
                  select change_id, operation, event
                    from api.event_stream_changes(${from}, ${upto}, ${this.options.publicUrl})`
              : tx<RealtimeRow[]>`
                  select change_id, type, commit_timestamp, record, old_record
                    from api.realtime_event_changes(${from}, ${upto})`;
          return [claims, rows];
        });
        // Started in this order, pipelined on the transaction's connection,
        // run by Postgres in this order: each user's claims, then their query.
        for (const q of queries) q.execute();
        const done = await Promise.all(queries);
        return reads.map((_, i) => done[2 * i + 1] as unknown as readonly StreamRow[] | readonly RealtimeRow[]);
      });
      reads.forEach(({ members, from, upto }, i) => {
        const rows = results[i]!;
        for (const m of members) {
          this.isolated.delete(m);
          if (!this.subscribers.has(m) || m.cursor !== from) continue;
          m.cursor = upto;
          if (m.kind === 'sse') m.deliver(rows as readonly StreamRow[]);
          else m.deliver(rows as readonly RealtimeRow[]);
        }
      });
    } catch (err) {
      if (groups.length > 1) {
        for (const m of everyone) this.isolated.add(m);
      } else if (err instanceof postgres.PostgresError && err.code === 'PT410') {
        // Resuming from an id the log no longer holds: the client reconnects
        // with the same id and gets a fresh snapshot.
        for (const m of everyone) m.close('pruned');
      } else if (!this.closing) {
        this.log.warn({ err, from: reads[0]?.from, upto: reads[0]?.upto }, 'realtime: reading changes failed; retrying');
        this.backoffUntil = Date.now() + 1000;
      }
    } finally {
      this.inFlight--;
      for (const m of everyone) this.busy.delete(m);
      this.schedule();
    }
  }

  private async renewRegistrations(): Promise<void> {
    if (this.registrations.size === 0) return;
    await this.sql`
      select private.event_streams_touch(${[...this.registrations]}::uuid[], ${this.config.registrationTtlSeconds})`;
  }

  private async flushReleases(): Promise<void> {
    if (this.toRelease.size === 0) return;
    const ids = [...this.toRelease];
    this.toRelease.clear();
    try {
      await this.sql`select private.event_streams_close(${ids}::uuid[])`;
    } catch (err) {
      // They expire on their own (registrationTtlSeconds).
      this.log.warn({ err }, 'realtime: releasing stream registrations failed');
    }
  }
}

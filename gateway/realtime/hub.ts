// The realtime hub: one per gateway process, shared by the SSE stream
// (sse.ts) and the supabase-js compatible websocket (websocket.ts).
//
//   * ONE dedicated LISTEN connection (postgres.js `sql.listen`) on channel
//     `event_changes`. A notification carries ids only; it just tells the hub
//     how far the change log has grown (`head`). Ids are assigned in commit
//     order, so every id up to a notified one is committed and readable.
//   * SSE streams are grouped in cohorts: the streams that have been given
//     every change up to the same id (the cohort's cursor), indexed by user.
//     Normally there is one cohort, the live one, at the head. When the head
//     moves, a cohort's next range (cursor, head] is read ONCE, for every
//     user, by private.event_stream_fanout: one row per change and distinct
//     view (member, manager; the per-user exceptions such as a membership
//     change), each with the users who get it. The hub writes each row's
//     payload to the streams of those users found in the cohort (a map
//     lookup per user), so the work per change is proportional to its
//     audience, not to the number of streams; the cohort then moves to the
//     new cursor. Nothing is filtered here: the SQL function decides who
//     sees what (the same rule as api.event_stream_changes).
//   * Streams join the cohort of their starting point (the snapshot's or
//     Last-Event-ID's change id). A small cohort (a few users: streams that
//     resumed from an older id, or a congested stream catching up) is read
//     for its users only (only_users); when it reaches the cursor of another
//     cohort the two merge, so catching-up streams end up in the live one.
//   * Back-pressure: a stream whose socket stops draining leaves its cohort
//     (parked, with its cursor) and rejoins at that cursor when it drains, so
//     the hub keeps no per-stream queue and a slow client never holds up the
//     others.
//   * Websocket channels (postgres_changes rows) are read per user, grouped
//     by (user, cursor): api.realtime_event_changes as that user, with
//     row-level security applied like Supabase Realtime does.
//   * Reading ranges rather than trusting notifications means a lost or
//     coalesced NOTIFY loses nothing: the next notification, the re-LISTEN
//     after a reconnect (postgres.js reconnects and calls back; the hub then
//     reads the head), or the safety poll moves the head, and the range
//     covers everything in between. A failed read (e.g. Postgres restarting)
//     leaves the cursors where they were and is retried after a pause.
//     Every gateway process has its own LISTEN connection and its own
//     subscribers, so several replicas each deliver every change to their
//     own clients.
//   * Ended sessions (logout, refresh-token reuse) close their streams and
//     channels through realtime/session-watch.ts, not here.
//   * Maintenance, from every replica (each statement is safe to repeat):
//     expiries of ended events (private.log_event_expiries) and the heartbeat
//     of this process's stream registrations (the per-user cap counts them in
//     Postgres). Pruning the log by age (admin.prune_change_log) is a job of
//     the worker's crontab (gateway/jobs/crontab.ts).
import crypto from 'node:crypto';
import postgres from 'postgres';
import type { RealtimeConfig } from '../core/process/config.ts';
import { asCaller, type RequestClaims } from '../core/database/transaction.ts';
import { withDeadline, type Sql } from '../core/database/pool.ts';
import type { Replicas } from '../core/database/replicas.ts';
import type { Logger } from '../core/process/log.ts';
import { isDatabaseUnavailable, OutageLog } from '../core/database/unavailable-log.ts';
import { StreamOpener } from './opener.ts';
import { metricsOn, readRealtimeWith, realtimeSlowCloses } from '../core/process/metrics.ts';
import { SsePayload } from './sse-messages.ts';

export type SubscriberKind = 'sse' | 'websocket';

/** The channel of the readiness probe (notReady): a token sent through the pool, awaited on the LISTEN connection. */
const PROBE_CHANNEL = 'realtime_probe';
/** How long the probe's notification may take to come back. */
const PROBE_MS = 1_500;

/** A message of the SSE stream (api.event_stream_changes, private.event_stream_fanout). */
export interface StreamRow {
  change_id: string;
  operation: 'insert' | 'update' | 'delete';
  event: Record<string, unknown>;
}

/** A row of private.event_stream_fanout: a message and the users (comma-separated ids) who get it. */
interface FanoutRow extends StreamRow {
  users: string;
}

/** A row change for postgres_changes, as api.realtime_event_changes returns it. */
export interface RealtimeRow {
  change_id: string;
  type: 'INSERT' | 'UPDATE' | 'DELETE';
  commit_timestamp: string;
  record: Record<string, unknown> | null;
  old_record: Record<string, unknown> | null;
}

export type CloseReason = 'pruned' | 'shutdown';

interface SubscriberBase {
  readonly userId: string;
  /** The claims its queries run with (role authenticated, sub = userId). */
  readonly claims: RequestClaims;
  /**
   * The last change id it has been given, or judged not to concern it. For
   * an SSE stream: its starting point; afterwards the hub keeps it.
   */
  cursor: number;
  /** False while it cannot take more (its connection is not draining). */
  canReceive(): boolean;
  /** Its resume point is no longer in the log, or the hub is closing: end it. */
  close(reason: CloseReason): void;
}

export interface SseSubscriber extends SubscriberBase {
  readonly kind: 'sse';
  /** Writes messages (one or more changes after its cursor), formatted and encoded once for all its readers. */
  deliver(payload: SsePayload): void;
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
  /**
   * Read replicas (core/database/replicas.ts): the reads of changes run on
   * one that has caught up with the moment the hub learned of the newest
   * change it reads, else on the primary.
   */
  replicas?: Replicas;
}

/** A cohort of this many users or fewer is read for its users only. */
const SMALL_COHORT_USERS = 64;

/** SSE text of a user's messages, in change order; `id:` on the last message of each change. */
export function formatRows(rows: readonly StreamRow[]): string {
  let out = '';
  rows.forEach((row, i) => {
    const lastOfChange = rows[i + 1]?.change_id !== row.change_id;
    out += `event: ${row.operation}\n`;
    if (lastOfChange) out += `id: ${row.change_id}\n`;
    out += `data: ${JSON.stringify(row.event)}\n\n`;
  });
  return out;
}

/** SSE streams that have been given every change up to `cursor`, by user. */
class Cohort {
  readonly byUser = new Map<string, Set<SseSubscriber>>();
  size = 0;
  reading = false;
  constructor(public cursor: number) {}

  add(s: SseSubscriber): void {
    let streams = this.byUser.get(s.userId);
    if (!streams) this.byUser.set(s.userId, (streams = new Set()));
    if (!streams.has(s)) {
      streams.add(s);
      this.size++;
    }
  }

  delete(s: SseSubscriber): void {
    const streams = this.byUser.get(s.userId);
    if (!streams?.delete(s)) return;
    this.size--;
    if (streams.size === 0) this.byUser.delete(s.userId);
  }

  *streams(): Iterable<SseSubscriber> {
    for (const set of this.byUser.values()) yield* set;
  }
}

export class ChangeHub {
  /** Names this process in the stream registrations. */
  readonly gatewayId = `gateway-${crypto.randomUUID()}`;
  private head = 0;
  /** When the head was last moved (learned from a notification or read from the primary): a replica read of changes up to it needs everything committed by then. */
  private headAt = 0;
  /** Cohorts not being read, by cursor (streams starting there join them). */
  private readonly cohorts = new Map<number, Cohort>();
  /** The cohort of every SSE stream that is not parked (including cohorts being read). */
  private readonly cohortOf = new Map<SseSubscriber, Cohort>();
  /** SSE streams whose socket is not draining; they keep their cursor. */
  private readonly parked = new Set<SseSubscriber>();
  /** Every SSE stream (keep-alives, shutdown). */
  private readonly streams = new Set<SseSubscriber>();
  /** Websocket channels (read per user). */
  private readonly sockets = new Set<WebSocketSubscriber>();
  private readonly busy = new Set<WebSocketSubscriber>();
  private readonly isolated = new Set<WebSocketSubscriber>();
  private inFlight = 0;
  /** Called when the head moves (onHead). */
  private readonly headListeners = new Set<(head: number) => void>();
  private readonly running = new Set<Promise<void>>();
  private scheduled = false;
  private backoffUntil = 0;
  private closing = false;
  private started = false;
  private readonly timers: NodeJS.Timeout[] = [];
  private listener: { unlisten(): Promise<void> } | null = null;
  private probeListener: { unlisten(): Promise<void> } | null = null;
  /** LISTEN has been answered (postgres.js calls back after every reconnect). */
  private listening = false;
  /** Readiness probes waiting for their notification to come back on the LISTEN connection, by token. */
  private readonly probes = new Map<string, () => void>();
  /** Registrations (app.event_streams ids) this process holds. */
  private readonly registrations = new Set<string>();
  private readonly toRelease = new Set<string>();
  private releaseScheduled = false;
  /** The database being unavailable to the maintenance timers, and to the reads of changes: one line, then counts. */
  private readonly maintenance: OutageLog;
  private readonly reads: OutageLog;
  /** Counters for benchmarks and diagnostics. */
  readonly stats = { fanoutReads: 0, fanoutRows: 0, writes: 0, socketReads: 0, fanoutReadMs: 0, deliverMs: 0, directStreams: 0 };

  /** Registers new SSE streams in batches (opener.ts). */
  readonly opener: StreamOpener;

  constructor(
    private readonly sql: Sql,
    readonly config: RealtimeConfig,
    private readonly log: Logger,
    private readonly options: HubOptions,
  ) {
    this.maintenance = new OutageLog(log, 'realtime maintenance');
    this.reads = new OutageLog(log, 'realtime reads of changes', 'failed (retried each second)');
    this.opener = new StreamOpener(sql, {
      gatewayId: this.gatewayId,
      publicUrl: options.publicUrl,
      registrationTtlSeconds: config.registrationTtlSeconds,
      statementTimeoutMs: options.statementTimeoutMs,
    });
  }

  /** The process's logger (the shape hub of /sync/v1/shape logs with it too). */
  get logger(): Logger {
    return this.log;
  }

  /** Whether new streams are accepted (started and not shutting down). */
  get accepting(): boolean {
    return this.started && !this.closing;
  }

  get size(): number {
    return this.streams.size + this.sockets.size;
  }

  /**
   * Why the hub is not ready (the admin server's /ready), null when it is:
   * a notification sent now through the pool must come back on the LISTEN
   * connection within PROBE_MS. A LISTEN connection that is gone (and being
   * reconnected), silent (a frozen network, a DATABASE_DIRECT_URL that no
   * longer answers) or cut from the database the pool writes to fails it,
   * as does a database that does not answer at all.
   */
  async notReady(): Promise<string | null> {
    if (this.closing) return 'shutting down';
    if (!this.started || !this.listening) return 'the LISTEN connection is not up';
    const token = crypto.randomUUID();
    let timer: NodeJS.Timeout | undefined;
    const arrived = new Promise<boolean>((resolve) => {
      this.probes.set(token, () => resolve(true));
      timer = setTimeout(() => resolve(false), PROBE_MS);
    });
    try {
      await withDeadline(this.sql, PROBE_MS, () => this.sql`select pg_notify(${PROBE_CHANNEL}, ${token})`.then(() => undefined));
      return (await arrived) ? null : `a notification did not come back on the LISTEN connection within ${PROBE_MS / 1000} s`;
    } catch (err) {
      return `a notification could not be sent (${(err as Error).message})`;
    } finally {
      clearTimeout(timer);
      this.probes.delete(token);
    }
  }

  async start(): Promise<void> {
    await this.refreshHead();
    const meta = await (this.options.listenSql ?? this.sql).listen(
      'event_changes',
      (payload) => this.onNotification(payload),
      // Called on the first LISTEN and after every reconnect: notifications
      // may have been missed meanwhile, so read the head.
      () => {
        this.listening = true;
        void this.refreshHead().catch((err: unknown) => this.log.warn({ err }, 'realtime: reading the change log head failed'));
      },
    );
    this.listener = meta;
    // The readiness probe's channel, on the same LISTEN connection (postgres.js listens on it again after a reconnect too).
    this.probeListener = await (this.options.listenSql ?? this.sql).listen(PROBE_CHANNEL, (token) => this.probes.get(token)?.());
    readRealtimeWith(() => ({ streams: this.streams.size, websockets: this.sockets.size, messages: this.stats.writes }));
    const every = (ms: number, fn: () => unknown) => {
      const timer = setInterval(() => {
        if (!this.closing) fn();
      }, ms);
      timer.unref();
      this.timers.push(timer);
    };
    // While the database is unavailable: one line, then a count (core/database/unavailable-log.ts).
    const maintain = (fn: () => Promise<unknown>) => () =>
      fn().then(
        () => this.maintenance.success(),
        (err: unknown) => (isDatabaseUnavailable(err) ? this.maintenance.failure(err) : this.log.warn({ err }, 'realtime: maintenance failed')),
      );
    every(this.config.pollIntervalMs, maintain(() => this.refreshHead()));
    every(this.config.expiryIntervalMs, maintain(() => this.sql`select private.log_event_expiries()`));
    every(Math.max(1000, (this.config.registrationTtlSeconds * 1000) / 3), maintain(() => this.renewRegistrations()));
    every(this.config.keepAliveMs, () => {
      for (const s of this.streams) s.keepAlive();
    });
    this.started = true;
    this.log.debug({ gateway: this.gatewayId, head: this.head }, 'realtime hub listening');
  }

  /** Logs expiries of ended events now (also run on a timer). */
  async logExpiries(): Promise<number> {
    const [row] = await this.sql<{ n: string }[]>`select private.log_event_expiries() as n`;
    return Number(row?.n ?? 0);
  }

  /** The newest change id this process knows of, without asking the database (notifications and polls move it). */
  get knownHead(): number {
    return this.head;
  }

  /**
   * Calls `listener` each time the head moves (a notification, a poll, a
   * reconnect): the shapes of /sync/v1/shape (realtime/shapes.ts) follow
   * the same change log without a LISTEN of their own. Returns the remover.
   */
  onHead(listener: (head: number) => void): () => void {
    this.headListeners.add(listener);
    return () => this.headListeners.delete(listener);
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
    if (subscriber.kind === 'sse') {
      this.streams.add(subscriber);
      if (subscriber.canReceive()) this.join(subscriber, subscriber.cursor);
      else this.parked.add(subscriber);
    } else {
      this.sockets.add(subscriber);
    }
    // Its starting point is a committed id: the head is at least there.
    this.advance(subscriber.cursor);
    this.schedule();
  }

  remove(subscriber: Subscriber): void {
    if (subscriber.kind === 'websocket') {
      this.sockets.delete(subscriber);
      return;
    }
    this.streams.delete(subscriber);
    this.parked.delete(subscriber);
    this.leaveCohort(subscriber);
  }

  /** An SSE stream's socket stopped draining: it leaves its cohort, keeping its cursor. */
  congested(stream: SseSubscriber): void {
    const cohort = this.leaveCohort(stream);
    if (!cohort) return;
    stream.cursor = cohort.cursor;
    this.parked.add(stream);
  }

  /** A subscriber can take more again (its connection drained). */
  wake(stream?: SseSubscriber): void {
    if (stream && this.parked.delete(stream)) this.join(stream, stream.cursor);
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
    for (const s of [...this.streams, ...this.sockets]) s.close('shutdown');
    this.streams.clear();
    this.sockets.clear();
    this.cohorts.clear();
    this.cohortOf.clear();
    this.parked.clear();
    await Promise.allSettled([...this.running]);
    for (const id of this.registrations) this.toRelease.add(id);
    this.registrations.clear();
    await this.flushReleases();
    if (this.probeListener) {
      await this.probeListener.unlisten().catch(() => {});
      this.probeListener = null;
    }
    if (this.listener) {
      await this.listener.unlisten().catch((err: unknown) => this.log.warn({ err }, 'realtime: unlisten failed'));
      this.listener = null;
    }
  }

  private leaveCohort(stream: SseSubscriber): Cohort | undefined {
    const cohort = this.cohortOf.get(stream);
    if (!cohort) return undefined;
    this.cohortOf.delete(stream);
    cohort.delete(stream);
    if (cohort.size === 0 && !cohort.reading && this.cohorts.get(cohort.cursor) === cohort) this.cohorts.delete(cohort.cursor);
    return cohort;
  }

  private join(stream: SseSubscriber, cursor: number): void {
    let cohort = this.cohorts.get(cursor);
    if (!cohort) this.cohorts.set(cursor, (cohort = new Cohort(cursor)));
    cohort.add(stream);
    this.cohortOf.set(stream, cohort);
  }

  /** Puts a cohort (not being read) at its cursor, merging it with the one there (the smaller moves). */
  private place(cohort: Cohort): void {
    if (cohort.size === 0) return;
    const there = this.cohorts.get(cohort.cursor);
    if (!there || there === cohort) {
      this.cohorts.set(cohort.cursor, cohort);
      return;
    }
    const [big, small] = there.size >= cohort.size ? [there, cohort] : [cohort, there];
    for (const s of small.streams()) {
      big.add(s);
      this.cohortOf.set(s, big);
    }
    this.cohorts.set(big.cursor, big);
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
      this.headAt = Date.now();
      this.schedule();
      for (const listener of this.headListeners) listener(id);
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

  /** Starts the reads that are due: cohorts behind the head (largest first), then websocket groups. */
  private pump(): void {
    if (this.closing) return;
    const wait = this.backoffUntil - Date.now();
    if (wait > 0) {
      setTimeout(() => this.schedule(), wait).unref();
      return;
    }
    const due: Cohort[] = [];
    for (const cohort of this.cohorts.values()) if (cohort.cursor < this.head && cohort.size > 0) due.push(cohort);
    due.sort((a, b) => b.size - a.size);
    for (const cohort of due) {
      if (this.inFlight >= this.config.queryConcurrency) return;
      this.track(this.readCohort(cohort));
    }
    this.pumpSockets();
  }

  private track(run: Promise<void>): void {
    this.running.add(run);
    void run.finally(() => this.running.delete(run));
  }

  /** Reads a cohort's next range once for all its users and writes each stream its messages. */
  private async readCohort(cohort: Cohort): Promise<void> {
    const from = cohort.cursor;
    const upto = Math.min(this.head, from + this.config.batchSize);
    const only = cohort.byUser.size <= SMALL_COHORT_USERS ? [...cohort.byUser.keys()] : null;
    this.cohorts.delete(from);
    cohort.reading = true;
    this.inFlight++;
    let rows: FanoutRow[] | undefined;
    const began = performance.now();
    try {
      rows = await this.readChanges((sql) =>
        sql.begin('read only', async (tx) => {
          await tx`select set_config('statement_timeout', ${String(this.options.statementTimeoutMs)}, true),
                          set_config('request.public_url', ${this.options.publicUrl}, true)`;
          return tx<FanoutRow[]>`
            select change_id, operation, event, array_to_string(user_ids, ',') as users
              from private.event_stream_fanout(${from}, ${upto}, ${this.options.publicUrl}, ${only}::uuid[])`;
        }),
      );
    } catch (err) {
      cohort.reading = false;
      if (err instanceof postgres.PostgresError && err.code === 'PT410') {
        // Resuming from an id the log no longer holds: the clients reconnect
        // with the same id and get a fresh snapshot.
        const closing = [...cohort.streams()];
        for (const s of closing) s.close('pruned');
        if (metricsOn()) realtimeSlowCloses.inc({ kind: 'sse' }, closing.length);
      } else if (!this.closing) {
        this.readFailed(err, from, upto);
      }
      this.place(cohort);
    } finally {
      this.inFlight--;
      this.schedule();
    }
    if (rows === undefined || this.closing) return;
    this.reads.success();
    const read = performance.now();
    this.stats.fanoutReads++;
    this.stats.fanoutRows += rows.length;
    this.stats.fanoutReadMs += read - began;
    // Moved before writing: a stream that congests while being written
    // leaves with the new cursor (what it was given is in its socket).
    cohort.cursor = upto;
    cohort.reading = false;
    this.deliver(cohort, rows);
    this.stats.deliverMs += performance.now() - read;
    this.place(cohort);
  }

  /** Writes each stream of the cohort its users' messages; users sharing the same messages share one text. */
  private deliver(cohort: Cohort, rows: readonly FanoutRow[]): void {
    if (rows.length === 0) return;
    const sequences = new Map<string, number[]>();
    rows.forEach((row, i) => {
      for (const user of row.users.split(',')) {
        if (!cohort.byUser.has(user)) continue;
        const seq = sequences.get(user);
        if (seq) seq.push(i);
        else sequences.set(user, [i]);
      }
    });
    const payloads = new Map<string, SsePayload>();
    for (const [user, seq] of sequences) {
      const key = seq.join(',');
      let payload = payloads.get(key);
      if (payload === undefined) payloads.set(key, (payload = new SsePayload(formatRows(seq.map((i) => rows[i]!)))));
      const streams = cohort.byUser.get(user);
      if (!streams) continue;
      // (A stream may leave the set while written: congested or dropped.)
      for (const s of streams) {
        this.stats.writes++;
        s.deliver(payload);
      }
    }
  }

  /**
   * Websocket channels: groups those that are behind and can receive by
   * (user, cursor), and reads each group's next range as that user. Several
   * groups share one read-only transaction (pipelined, the claims set before
   * each user's query).
   */
  private pumpSockets(): void {
    const byKey = new Map<string, WebSocketSubscriber[]>();
    for (const s of this.sockets) {
      if (s.cursor >= this.head || this.busy.has(s) || !s.canReceive()) continue;
      const key = `${s.userId}|${s.cursor}`;
      const group = byKey.get(key);
      if (group) group.push(s);
      else byKey.set(key, [s]);
    }
    const groups = [...byKey.values()];
    // After a failed shared read, its groups are read alone once (so one
    // group's error, e.g. a pruned resume point, is not everyone's).
    const alone = groups.filter((g) => g.some((s) => this.isolated.has(s)));
    const shared = groups.filter((g) => !g.some((s) => this.isolated.has(s)));
    const batches: WebSocketSubscriber[][][] = alone.map((g) => [g]);
    const free = Math.max(1, this.config.queryConcurrency - this.inFlight - batches.length);
    const size = Math.max(1, Math.min(this.config.usersPerTransaction, Math.ceil(shared.length / free)));
    for (let i = 0; i < shared.length; i += size) batches.push(shared.slice(i, i + size));
    for (const batch of batches) {
      // The rest wait for a read to finish (which schedules the next pump).
      if (this.inFlight >= this.config.queryConcurrency) return;
      this.track(this.pullSockets(batch));
    }
  }

  private async pullSockets(groups: WebSocketSubscriber[][]): Promise<void> {
    const reads = groups.map((members) => {
      const from = members[0]!.cursor;
      return { members, from, upto: Math.min(this.head, from + this.config.batchSize) };
    });
    const everyone = groups.flat();
    for (const m of everyone) this.busy.add(m);
    this.inFlight++;
    try {
      const results = await this.readChanges((sql) => sql.begin('read only', async (tx) => {
        await tx`select set_config('statement_timeout', ${String(this.options.statementTimeoutMs)}, true)`;
        const queries = reads.flatMap(({ members, from, upto }) => [
          tx`select ${asCaller(tx, members[0]!.claims)}`,
          tx<RealtimeRow[]>`
            select change_id, type, commit_timestamp, record, old_record
              from api.realtime_event_changes(${from}, ${upto})`,
        ]);
        // Started in this order, pipelined on the transaction's connection,
        // run by Postgres in this order: each user's claims, then their query.
        for (const q of queries) q.execute();
        const done = await Promise.all(queries);
        return reads.map((_, i) => done[2 * i + 1] as unknown as readonly RealtimeRow[]);
      }));
      this.reads.success();
      this.stats.socketReads += reads.length;
      reads.forEach(({ members, from, upto }, i) => {
        for (const m of members) {
          this.isolated.delete(m);
          if (!this.sockets.has(m) || m.cursor !== from) continue;
          m.cursor = upto;
          m.deliver(results[i]!);
        }
      });
    } catch (err) {
      if (groups.length > 1) {
        for (const m of everyone) this.isolated.add(m);
      } else if (err instanceof postgres.PostgresError && err.code === 'PT410') {
        for (const m of everyone) m.close('pruned');
        if (metricsOn()) realtimeSlowCloses.inc({ kind: 'websocket' }, everyone.length);
      } else if (!this.closing) {
        this.readFailed(err, reads[0]?.from, reads[0]?.upto);
      }
    } finally {
      this.inFlight--;
      for (const m of everyone) this.busy.delete(m);
      this.schedule();
    }
  }

  /** A read of changes up to the head: on a replica that has it (HubOptions.replicas), else on the primary. */
  private readChanges<T>(read: (sql: Sql) => Promise<T>): Promise<T> {
    const replicas = this.options.replicas;
    return replicas ? replicas.read(this.sql, { since: this.headAt }, read) : read(this.sql);
  }

  /** A read of changes failed: tried again in a second (the cursors did not move). */
  private readFailed(err: unknown, from: number | undefined, upto: number | undefined): void {
    if (isDatabaseUnavailable(err)) this.reads.failure(err);
    else this.log.warn({ err, from, upto }, 'realtime: reading changes failed; retrying');
    this.backoffUntil = Date.now() + 1000;
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

// Read replicas (DATABASE_REPLICA_URLS): hot standbys of the primary that
// take read-only work, and the one place that decides which pool a
// read-only transaction runs on (Replicas.read). Off (no URLs), there is no
// Replicas object at all: everything runs on the primary as before.
//
// What goes to a replica: the read-only transactions of GET routes (the
// route's readOnly: the public pages and calendars included), the realtime
// hub's fan-out and websocket reads, and the MCP server's read tools.
// Everything else (writes, sign-in, idempotency, jobs, LISTEN, migrations)
// stays on the primary.
//
// Health: one monitor per process reads, every MONITOR_INTERVAL_MS, the
// primary's WAL position (pg_current_wal_lsn(), on a connection of its own)
// and each replica's pg_is_in_recovery() and pg_last_wal_replay_lsn(). A
// primary sample is stamped with the time its query was SENT: every commit
// acknowledged before then is at or below its position. A replica's lag is
// the time since the newest primary sample it has replayed past ("caught up
// at"): a replica with no WAL to apply has lag 0 however idle the primary,
// and one that applies late (recovery_min_apply_delay, a long query holding
// replay back) lags by as long as it is behind. A replica is used while its
// last probe answered within PROBE_TIMEOUT_MS, it is still a standby, and
// its lag is at most REPLICA_MAX_LAG_MS; so a replica that stops answering
// or falls behind is skipped within about PROBE_TIMEOUT_MS, and used again
// at the first probe that finds it answering and caught up.
//
// Read-your-writes: a read-write transaction's answer carries its
// consistency token, the primary's WAL position right after its COMMIT
// (core/database/transaction.ts onCommit). A read that sends a token back
// runs on a replica only if the monitor saw that replica replay at least
// that far; otherwise on the primary. The process also keeps the newest
// token of each signed-in session for SESSION_TOKEN_MS, for clients that do
// not send the header back (same process only). The realtime hub asks for
// a replica that has caught up with the moment it learned of the newest
// change (`since`), so it never reads a range the replica does not have yet.
//
// A read-only transaction that fails on a replica because the replica is
// unreachable, or whose query was cancelled by a recovery conflict, runs
// again on the primary (read-only: running it twice changes nothing), and
// the replica is marked down until its next good probe: a replica never
// makes a request fail.
import postgres from 'postgres';
import { createPool, type PoolOptions, type Sql } from './pool.ts';
import { isDatabaseUnavailable } from './unavailable-log.ts';
import type { Logger } from '../process/log.ts';
import { readReplicasWith } from '../process/metrics.ts';

/** How often the monitor reads the primary's and each replica's WAL position. */
export const MONITOR_INTERVAL_MS = 250;
/** A probe not answered within this marks the replica down. */
export const PROBE_TIMEOUT_MS = 500;
/** How long a signed-in session's newest token is kept in the process (at least; longer when REPLICA_MAX_LAG_MS is). */
export const SESSION_TOKEN_MS = 5_000;
/** A position no replica reaches: the reads that need it run on the primary. */
const ON_PRIMARY = 2n ** 64n;
/** How many sessions' tokens are kept at most (the oldest go first). */
const MAX_SESSION_TOKENS = 100_000;
/** Primary samples kept to measure lag (a few seconds' worth). */
const MAX_SAMPLES = 64;

/** The request header a client sends its token back in, and the response header it is answered in. */
export const CONSISTENCY_TOKEN_HEADER = 'x-consistency-token';

/** A WAL position as Postgres writes it (`16/B374D848`), as a number. */
export function parseLsn(text: unknown): bigint | null {
  if (typeof text !== 'string' || text.length > 17) return null;
  const match = /^([0-9A-Fa-f]{1,8})\/([0-9A-Fa-f]{1,8})$/.exec(text);
  if (!match) return null;
  return (BigInt(`0x${match[1]}`) << 32n) | BigInt(`0x${match[2]}`);
}

/**
 * Whose writes a reader must see, the key its newest write is kept under:
 * an access token's session, else its user (API and OAuth tokens, MCP agents).
 */
export function readerOf(claims: { sub?: unknown; session_id?: unknown }): string | null {
  if (typeof claims.session_id === 'string') return `session:${claims.session_id.toLowerCase()}`;
  return typeof claims.sub === 'string' && claims.sub !== '' ? `user:${claims.sub}` : null;
}

/** What a read needs of a replica. */
export interface ReadNeed {
  /** The replica must have replayed at least this far (a consistency token). */
  lsn?: bigint | null;
  /** The replica must have everything the primary had committed at this time (ms since epoch). */
  since?: number;
}

export interface ReplicaOptions {
  /** REPLICA_MAX_LAG_MS. */
  maxLagMs: number;
  /** The options of each replica's pool (smaller than the primary's: see replicaPoolMax). */
  pool: PoolOptions;
  log?: Logger;
}

interface Replica {
  name: string;
  pool: Sql;
  /** The monitor's connection to it. */
  probe: Sql;
  up: boolean;
  /** Why it is not used, as last logged ('' while used). */
  state: string;
  replayLsn: bigint | null;
  /** The send time of the newest primary sample it has replayed past; 0: none yet. */
  caughtUpAt: number;
  /** When the probe in flight was sent (null: none in flight). */
  probeSentAt: number | null;
  /** Marked down by a failed request: not used before this time's next good probe. */
  downUntilProbe: number;
  /** Cuts the reads running on it (when it stops answering: they run again on the primary). */
  running: Set<(err: Error) => void>;
}

/** The replica stopped answering while a read ran on it: the read runs again on the primary. */
class ReplicaDownError extends Error {
  readonly code = 'REPLICA_DOWN';
}

/** The size of each replica's pool: half the primary's, at least 2. */
export function replicaPoolMax(primaryMax: number): number {
  return Math.max(2, Math.ceil(primaryMax / 2));
}

export class Replicas {
  private readonly replicas: Replica[];
  private readonly primaryProbe: Sql;
  private readonly samples: { at: number; lsn: bigint }[] = [];
  private primaryProbeSentAt: number | null = null;
  private readonly sessions = new Map<string, { lsn: bigint; at: number }>();
  private ticker: NodeJS.Timeout | undefined;
  private next = 0;
  /** How long a session's newest write is kept: past any usable replica's lag. */
  private readonly keepMs: number;

  constructor(
    primaryUrl: string,
    urls: string[],
    private readonly options: ReplicaOptions,
  ) {
    this.keepMs = Math.max(SESSION_TOKEN_MS, options.maxLagMs + 1_000);
    const probeOf = (url: string, name: string) =>
      postgres(url, {
        max: 1,
        connect_timeout: PROBE_TIMEOUT_MS / 1000,
        idle_timeout: 0,
        fetch_types: false,
        prepare: options.pool.mode !== 'transaction',
        onnotice: () => {},
        connection: { application_name: name },
      });
    this.primaryProbe = probeOf(primaryUrl, 'replica-monitor');
    this.replicas = urls.map((url, i) => ({
      name: `replica ${i + 1}`,
      pool: createPool(url, { ...options.pool, applicationName: `${options.pool.applicationName} replica` }),
      probe: probeOf(url, 'replica-monitor'),
      up: false,
      state: 'not probed yet',
      replayLsn: null,
      caughtUpAt: 0,
      probeSentAt: null,
      downUntilProbe: 0,
      running: new Set(),
    }));
  }

  /** Starts the monitor (one tick at once, then every MONITOR_INTERVAL_MS); the metrics read its status (db_replica_lag_seconds, db_replica_used). */
  start(): this {
    readReplicasWith(() => this.status());
    this.tick();
    this.ticker = setInterval(() => this.tick(), MONITOR_INTERVAL_MS);
    this.ticker.unref();
    return this;
  }

  /** The replicas' pools (for closing, and for the tests). */
  get pools(): Sql[] {
    return this.replicas.map((r) => r.pool);
  }

  /**
   * The pool a read-only transaction with these needs runs on: a usable
   * replica (in turn), or null for the primary.
   */
  choose(need: ReadNeed = {}): Sql | null {
    return this.pick(need)?.pool ?? null;
  }

  private pick(need: ReadNeed): Replica | null {
    const now = Date.now();
    for (let i = 0; i < this.replicas.length; i++) {
      const replica = this.replicas[(this.next + i) % this.replicas.length]!;
      if (!this.usable(replica, now, need)) continue;
      this.next = (this.next + i + 1) % this.replicas.length;
      return replica;
    }
    return null;
  }

  /**
   * Runs read-only `work` on a usable replica, or on `primary`; again on
   * `primary` if the replica fails it for being unreachable (or a recovery
   * conflict), the replica then marked down until its next good probe.
   */
  async read<T>(primary: Sql, need: ReadNeed, work: (sql: Sql) => Promise<T>): Promise<T> {
    const replica = this.pick(need);
    if (!replica) return work(primary);
    // A replica that stops answering holds what was sent to it until the
    // statement timeout: the monitor cuts such reads when it finds the
    // replica silent (within PROBE_TIMEOUT_MS), and they run on the primary.
    let cut: (err: Error) => void = () => {};
    const down = new Promise<never>((_, reject) => (cut = reject));
    replica.running.add(cut);
    const running = work(replica.pool);
    try {
      return await Promise.race([running, down]);
    } catch (err) {
      running.catch(() => {}); // read-only: it settles in the background
      if (!replicaFault(err)) throw err;
      this.markDown(replica, err);
      return work(primary);
    } finally {
      replica.running.delete(cut);
    }
  }

  /**
   * What a request needs of a replica: the newer of the token it sent and
   * its session's newest write in this process; and everything committed
   * before its access token was issued (`issuedAt`, ms), so that the sign-in
   * or registration it follows is there.
   */
  needOf(header: unknown, session: string | null, issuedAt?: number): ReadNeed {
    let lsn: bigint | null = null;
    if (header !== undefined) {
      lsn = parseLsn(header);
      // A token that is not one: the primary serves the read (never an older view than asked for).
      if (lsn === null) return { lsn: ON_PRIMARY };
    }
    if (session !== null) {
      const kept = this.sessions.get(session);
      if (kept && Date.now() - kept.at <= this.keepMs && (lsn === null || kept.lsn > lsn)) lsn = kept.lsn;
    }
    return issuedAt === undefined ? { lsn } : { lsn, since: issuedAt };
  }

  /**
   * A reader's read-write transaction committed at `lsn` (its consistency
   * token, as Postgres writes it): kept for the reader. Returns the token to
   * answer, or null when `lsn` is not one.
   */
  noteCommit(reader: string | null, lsn: string): string | null {
    const position = parseLsn(lsn);
    if (position === null) return null;
    this.noteWrite(reader, position);
    return lsn;
  }

  /** A session's write committed at `lsn`: its reads in the next SESSION_TOKEN_MS need a replica that far. */
  noteWrite(session: string | null, lsn: bigint): void {
    if (session === null) return;
    const kept = this.sessions.get(session);
    if (kept && kept.lsn > lsn) return;
    this.sessions.delete(session);
    this.sessions.set(session, { lsn, at: Date.now() });
    if (this.sessions.size > MAX_SESSION_TOKENS) this.sessions.delete(this.sessions.keys().next().value!);
  }

  /**
   * A session ended (logout, refresh-token reuse: SessionWatch hears it
   * from the primary): its reads run on the primary, which refuses them,
   * until any usable replica has the end too.
   */
  noteSessionEnded(sessionId: string): void {
    this.noteWrite(readerOf({ session_id: sessionId }), ON_PRIMARY);
  }

  /** The monitor's view, for the logs and the tests. */
  status(): { name: string; used: boolean; state: string; lagMs: number | null; replayLsn: string | null }[] {
    const now = Date.now();
    return this.replicas.map((r) => ({
      name: r.name,
      used: this.usable(r, now, {}),
      state: r.state,
      lagMs: r.caughtUpAt ? now - r.caughtUpAt : null,
      replayLsn: r.replayLsn === null ? null : `${(r.replayLsn >> 32n).toString(16).toUpperCase()}/${(r.replayLsn & 0xffffffffn).toString(16).toUpperCase()}`,
    }));
  }

  async close(): Promise<void> {
    clearInterval(this.ticker);
    await Promise.all([this.primaryProbe, ...this.replicas.flatMap((r) => [r.probe, r.pool])].map((sql) => sql.end({ timeout: 1 }).catch(() => {})));
  }

  private usable(replica: Replica, now: number, need: ReadNeed): boolean {
    if (!replica.up || replica.downUntilProbe > 0) return false;
    if (replica.probeSentAt !== null && now - replica.probeSentAt > PROBE_TIMEOUT_MS) return false;
    if (now - replica.caughtUpAt > this.options.maxLagMs) return false;
    if (need.lsn !== undefined && need.lsn !== null && (replica.replayLsn === null || replica.replayLsn < need.lsn)) return false;
    if (need.since !== undefined && replica.caughtUpAt < need.since) return false;
    return true;
  }

  private markDown(replica: Replica, err: unknown): void {
    if (err instanceof ReplicaDownError) return;
    replica.downUntilProbe = Date.now();
    this.transition(replica, 'a read failed on it', String((err as { code?: unknown }).code ?? (err as Error).message));
  }

  private tick(): void {
    this.pruneSessions();
    if (this.primaryProbeSentAt === null) {
      const sentAt = Date.now();
      this.primaryProbeSentAt = sentAt;
      this.primaryProbe<{ lsn: string }[]>`select pg_current_wal_lsn()::text as lsn`
        .then(
          ([row]) => {
            const lsn = parseLsn(row?.lsn);
            if (lsn === null) return;
            this.samples.push({ at: sentAt, lsn });
            if (this.samples.length > MAX_SAMPLES) this.samples.shift();
          },
          () => {
            // The primary does not answer (or is a standby now): no sample; the replicas' lag grows.
          },
        )
        .finally(() => (this.primaryProbeSentAt = null));
    }
    for (const replica of this.replicas) {
      if (replica.probeSentAt !== null) {
        if (Date.now() - replica.probeSentAt > PROBE_TIMEOUT_MS) this.silent(replica, `no answer within ${PROBE_TIMEOUT_MS} ms`);
        continue;
      }
      const sentAt = Date.now();
      replica.probeSentAt = sentAt;
      replica
        .probe<{ recovery: boolean; replay: string | null }[]>`select pg_is_in_recovery() as recovery, pg_last_wal_replay_lsn()::text as replay`
        .then(
          ([row]) => this.probed(replica, sentAt, row?.recovery === true, parseLsn(row?.replay)),
          (err: unknown) => {
            replica.up = false;
            this.silent(replica, String((err as { code?: unknown }).code ?? (err as Error).message));
          },
        )
        .finally(() => (replica.probeSentAt = null));
    }
  }

  private probed(replica: Replica, sentAt: number, recovery: boolean, replay: bigint | null): void {
    if (!recovery || replay === null) {
      replica.up = false;
      this.transition(replica, 'it is not a standby (promoted?)');
      return;
    }
    replica.up = true;
    if (replica.downUntilProbe > 0 && replica.downUntilProbe < sentAt) replica.downUntilProbe = 0;
    replica.replayLsn = replay;
    for (let i = this.samples.length - 1; i >= 0; i--) {
      const sample = this.samples[i]!;
      if (sample.lsn <= replay) {
        if (sample.at > replica.caughtUpAt) replica.caughtUpAt = sample.at;
        break;
      }
    }
    const lag = Date.now() - replica.caughtUpAt;
    if (lag > this.options.maxLagMs) this.transition(replica, 'it lags behind the primary', replica.caughtUpAt ? `${lag} ms` : 'not caught up yet');
    else if (replica.downUntilProbe === 0) this.transition(replica, '');
  }

  /** The replica does not answer: not used, and the reads running on it run again on the primary. */
  private silent(replica: Replica, detail: string): void {
    this.transition(replica, 'it does not answer', detail);
    const cuts = [...replica.running];
    replica.running.clear();
    for (const cut of cuts) cut(new ReplicaDownError(`${replica.name} does not answer`));
  }

  /** Logs a replica's change of state (`kind` '': in use; `detail` is logged, not compared). */
  private transition(replica: Replica, kind: string, detail = ''): void {
    if (kind === replica.state) return;
    const was = replica.state;
    replica.state = kind;
    if (kind === '') this.options.log?.info({ replica: replica.name }, `read replica in use${was !== 'not probed yet' ? ` again (was: ${was})` : ''}`);
    else this.options.log?.warn({ replica: replica.name, detail }, `read replica not used: ${kind}`);
  }

  private pruneSessions(): void {
    const oldest = Date.now() - this.keepMs;
    for (const [session, kept] of this.sessions) {
      if (kept.at >= oldest) break;
      this.sessions.delete(session);
    }
  }
}

/** A replica's failure the primary may stand in for: unreachable, not answering, or a query cancelled by a recovery conflict. */
function replicaFault(err: unknown): boolean {
  const code = (err as { code?: unknown }).code;
  return err instanceof ReplicaDownError || isDatabaseUnavailable(err) || code === '40001' || code === '57P04' || code === '57P01';
}

// Live shapes of GET /sync/v1/shape (routes/sync.ts, docs/sync.md): the
// long-polls waiting for a change, served from the change log the realtime
// hub (hub.ts) follows.
//
//   * A waiting long-poll is a promise here and nothing else: it holds no
//     database connection. Long-polls are grouped by (shape, cursor), the
//     change id they have everything up to.
//   * When the hub's head moves past a group's cursor, the group is read
//     ONCE, in one read-only REPEATABLE READ transaction: the head, then
//     private.sync_audience (which of the group's users the range can concern
//     at all: owners of changed rows, members of changed events'
//     communities, users whose memberships changed), then api.sync_changes
//     as each of those users (row-level security, the REST functions; the
//     same answer a catch-up request gets). Users the range does not concern
//     cost nothing: their long-polls move on to the new cursor and keep
//     waiting.
//   * A long-poll with changes is answered; one that waited long enough is
//     answered with nothing new (the client asks again).
//   * An offset older than the log keeps (PT410) ends the group's long-polls
//     with 'gone' (409, must-refetch).
import postgres from 'postgres';
import type { Sql } from '../core/database/pool.ts';
import { asCaller, type RequestClaims } from '../core/database/transaction.ts';
import type { Logger } from '../core/process/log.ts';
import type { ChangeHub } from './hub.ts';

/** One row message of a shape, as api.sync_changes returns it. */
export interface ShapeChange {
  change_id: string;
  operation: 'insert' | 'update' | 'delete' | 'head';
  id: string | null;
  value: Record<string, unknown> | null;
}

/** What a long-poll is answered with: the changes (maybe none) and the change id they bring the shape to; 'gone' when its offset is no longer in the log. */
export type ShapeWait = { head: number; changes: ShapeChange[] } | 'gone';

interface Waiter {
  readonly userId: string;
  readonly claims: RequestClaims;
  group: Group | null;
  timer: NodeJS.Timeout;
  resolve(answer: ShapeWait): void;
}

class Group {
  readonly waiters = new Set<Waiter>();
  constructor(
    readonly shape: string,
    readonly cursor: number,
  ) {}
}

const key = (shape: string, cursor: number) => `${shape}|${cursor}`;

export class ShapeHub {
  /** Groups not being read, by (shape, cursor). */
  private readonly groups = new Map<string, Group>();
  private reading = 0;
  private scheduled = false;
  private backoffUntil = 0;
  /** For tests and diagnostics: group reads and per-user reads of changes. */
  readonly stats = { groupReads: 0, userReads: 0 };

  constructor(
    private readonly sql: Sql,
    private readonly hub: ChangeHub,
    private readonly options: { publicUrl: string; statementTimeoutMs: number; maxConcurrentReads: number },
    private readonly log: Logger,
  ) {
    hub.onHead(() => this.schedule());
  }

  /** How many long-polls are waiting. */
  get waiting(): number {
    let n = 0;
    for (const g of this.groups.values()) n += g.waiters.size;
    return n;
  }

  /**
   * Waits until the shape has changes for the user after `cursor`, or
   * `timeoutMs` passed (then: no changes, at the cursor reached), or `signal`
   * aborts (the client went away: the same, answered to nobody).
   */
  wait(shape: string, userId: string, claims: RequestClaims, cursor: number, timeoutMs: number, signal?: AbortSignal): Promise<ShapeWait> {
    return new Promise<ShapeWait>((resolve) => {
      const waiter: Waiter = {
        userId,
        claims,
        group: null,
        timer: setTimeout(() => {
          const at = waiter.group?.cursor ?? cursor;
          this.leave(waiter);
          resolve({ head: at, changes: [] });
        }, timeoutMs),
        resolve: (answer) => {
          clearTimeout(waiter.timer);
          resolve(answer);
        },
      };
      signal?.addEventListener('abort', () => {
        this.leave(waiter);
        clearTimeout(waiter.timer);
        resolve({ head: cursor, changes: [] });
      }, { once: true });
      this.join(waiter, shape, cursor);
      this.schedule();
    });
  }

  private join(waiter: Waiter, shape: string, cursor: number): void {
    let group = this.groups.get(key(shape, cursor));
    if (!group) this.groups.set(key(shape, cursor), (group = new Group(shape, cursor)));
    group.waiters.add(waiter);
    waiter.group = group;
  }

  private leave(waiter: Waiter): void {
    const group = waiter.group;
    if (!group) return;
    group.waiters.delete(waiter);
    waiter.group = null;
    if (group.waiters.size === 0 && this.groups.get(key(group.shape, group.cursor)) === group) {
      this.groups.delete(key(group.shape, group.cursor));
    }
  }

  private schedule(): void {
    if (this.scheduled) return;
    this.scheduled = true;
    setImmediate(() => {
      this.scheduled = false;
      this.pump();
    });
  }

  private pump(): void {
    const wait = this.backoffUntil - Date.now();
    if (wait > 0) {
      setTimeout(() => this.schedule(), wait).unref();
      return;
    }
    const head = this.hub.knownHead;
    for (const group of [...this.groups.values()]) {
      if (this.reading >= this.options.maxConcurrentReads) return;
      if (group.cursor >= head || group.waiters.size === 0) continue;
      this.groups.delete(key(group.shape, group.cursor));
      void this.read(group);
    }
  }

  /** Reads a group's range once: the head, who it concerns, and their changes as each of them. */
  private async read(group: Group): Promise<void> {
    this.reading++;
    const waiters = [...group.waiters];
    const users = new Map<string, RequestClaims>();
    for (const w of waiters) users.set(w.userId, w.claims);
    let head = group.cursor;
    let byUser = new Map<string, ShapeChange[]>();
    try {
      const result = await this.sql.begin('isolation level repeatable read read only', async (tx) => {
        await tx`select set_config('statement_timeout', ${String(this.options.statementTimeoutMs)}, true)`;
        const [pos] = await tx<{ head: string }[]>`select head::text from private.change_log_position()`;
        const upto = Number(pos?.head ?? group.cursor);
        const audience = await tx<{ id: string }[]>`
          select a::text as id from private.sync_audience(${group.shape}, ${group.cursor}, ${upto}, ${[...users.keys()]}::uuid[]) a`;
        const queries = audience.flatMap(({ id }) => [
          tx`select ${asCaller(tx, users.get(id)!)}`,
          tx<ShapeChange[]>`
            select change_id::text, operation, id::text, value
              from api.sync_changes(${group.shape}, ${group.cursor}, ${this.options.publicUrl})`,
        ]);
        for (const q of queries) q.execute();
        const done = await Promise.all(queries);
        const out = new Map<string, ShapeChange[]>();
        audience.forEach(({ id }, i) => out.set(id, (done[2 * i + 1] as unknown as ShapeChange[]).filter((c) => c.operation !== 'head')));
        return { upto, out };
      });
      head = result.upto;
      byUser = result.out;
      this.stats.groupReads++;
      this.stats.userReads += byUser.size;
    } catch (err) {
      if (err instanceof postgres.PostgresError && err.code === 'PT410') {
        for (const w of waiters) {
          w.group = null;
          w.resolve('gone');
        }
      } else {
        this.log.warn({ err, shape: group.shape, from: group.cursor }, 'sync: reading shape changes failed; retrying');
        this.backoffUntil = Date.now() + 1000;
        for (const w of waiters) if (w.group === group) this.join(w, group.shape, group.cursor);
      }
      this.reading--;
      this.schedule();
      return;
    }
    for (const w of waiters) {
      if (w.group !== group) continue; // timed out or went away meanwhile
      const changes = byUser.get(w.userId);
      if (changes && changes.length > 0) {
        w.group = null;
        w.resolve({ head, changes });
      } else {
        this.join(w, group.shape, head);
      }
    }
    // Long-polls that arrived at this cursor while it was read wait in a new group (read next).
    this.reading--;
    this.schedule();
  }
}

/** The shape hub of a realtime hub (one per process, made on first use). */
const hubs = new WeakMap<ChangeHub, ShapeHub>();
export function shapesOf(
  hub: ChangeHub,
  make: () => ShapeHub,
): ShapeHub {
  let shapes = hubs.get(hub);
  if (!shapes) hubs.set(hub, (shapes = make()));
  return shapes;
}

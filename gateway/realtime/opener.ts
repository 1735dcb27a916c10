// Opening SSE streams in batches (why, measured:
// docs/decisions.md#opening-event-streams-in-batches). The opener sends an
// open at once when the database is idle; opens that arrive while batches
// are in the database wait for the next one (group commit: no timer, no
// added delay when it is quiet). One call of private.event_streams_open
// registers the batch within the per-user cap and returns one snapshot per
// distinct view, which every stream of that view shares, encoded once.
//
// Who may see what stays in SQL: the function applies the same rules as
// api.event_stream_open (private.upcoming_events_of, the per-user cap, the
// session check), for users whose access tokens the route verified.
import type { Sql } from '../core/database/pool.ts';
import { HttpError } from '../core/web/errors.ts';
import { snapshotText, type StreamStart } from './sse-messages.ts';

export interface OpenRequest {
  userId: string;
  sessionId: string | null;
  lastEventId: string | null;
}

interface Opened {
  head: string;
  views: Record<string, unknown>[][];
  streams: (
    | { stream_id: string; mode: StreamStart['mode']; last_event_id: string; view: number | null }
    | { error: 'session_ended' | 'too_many_streams' | 'no_profile'; message: string }
  )[];
}

interface Waiting {
  request: OpenRequest;
  resolve: (start: StreamStart) => void;
  reject: (err: unknown) => void;
}

export interface OpenerOptions {
  gatewayId: string;
  publicUrl: string;
  registrationTtlSeconds: number;
  statementTimeoutMs: number;
  /** Batches in the database at once. */
  concurrency?: number;
  /** Opens in one batch at most. */
  maxBatch?: number;
}

const ERROR_STATUS = { session_ended: 401, too_many_streams: 429, no_profile: 409 } as const;

export class StreamOpener {
  private readonly queue: Waiting[] = [];
  private inFlight = 0;
  private readonly concurrency: number;
  private readonly maxBatch: number;
  /** Batches sent (benchmarks). */
  readonly stats = { batches: 0 };

  constructor(
    private readonly sql: Sql,
    private readonly options: OpenerOptions,
  ) {
    this.concurrency = options.concurrency ?? 2;
    this.maxBatch = options.maxBatch ?? 200;
  }

  /** Registers a stream for the user and returns its start (snapshot or resume point); HttpError when refused. */
  open(request: OpenRequest): Promise<StreamStart> {
    return new Promise((resolve, reject) => {
      this.queue.push({ request, resolve, reject });
      this.pump();
    });
  }

  private pump(): void {
    while (this.inFlight < this.concurrency && this.queue.length > 0) {
      const batch = this.queue.splice(0, this.maxBatch);
      this.inFlight++;
      void this.run(batch).finally(() => {
        this.inFlight--;
        this.pump();
      });
    }
  }

  private async run(batch: Waiting[]): Promise<void> {
    try {
      const opened = await this.openBatch(batch.map((w) => w.request));
      this.stats.batches++;
      const texts = opened.views.map(snapshotText);
      batch.forEach((w, i) => {
        const s = opened.streams[i]!;
        if ('error' in s) {
          w.reject(new HttpError(ERROR_STATUS[s.error], s.error === 'no_profile' ? 'conflict' : s.error, s.message));
          return;
        }
        const view = s.view === null ? undefined : s.view;
        w.resolve({
          stream_id: s.stream_id,
          mode: s.mode,
          last_event_id: String(s.last_event_id),
          events: view === undefined ? null : opened.views[view]!,
          snapshotText: view === undefined ? undefined : texts[view],
        });
      });
    } catch (err) {
      // The batch failed (or its answer was not as expected): every open of
      // it that is not settled yet fails with that error.
      for (const w of batch) w.reject(err);
    }
  }

  private async openBatch(requests: OpenRequest[]): Promise<Opened> {
    const json = this.sql.json(
      requests.map((r) => ({ user_id: r.userId, session_id: r.sessionId, last_event_id: r.lastEventId })),
    );
    const [, rows] = await this.sql.begin((tx) => [
      tx`select set_config('statement_timeout', ${String(this.options.statementTimeoutMs)}, true)`,
      tx<{ opened: Opened }[]>`
        select private.event_streams_open(${this.options.gatewayId}, ${this.options.publicUrl},
                                          ${this.options.registrationTtlSeconds}, ${json}) as opened`,
    ]);
    return rows[0]!.opened;
  }
}

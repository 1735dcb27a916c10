// One SSE stream of GET /api/mobile/events/upcoming/stream (the route is
// routes/stream.ts). What it writes:
//
//   event: reset              only when Last-Event-ID was older than the log
//   data: {"reason":"last_event_id_expired","last_event_id":N}   keeps: forget
//                             every event you hold, a snapshot follows
//
//   event: insert             the snapshot: one message per upcoming event
//   data: <Event with __sync_meta>                     (no id: lines)
//
//   event: ready              the snapshot (or resume) is complete; its id is
//   id: <change id>           the change the snapshot is consistent with (on
//   data: {"last_event_id":..,"mode":"snapshot"|"reset"|"resume","snapshot":n}
//                             resume: the id given)
//
//   event: insert|update|delete   one per change the caller sees, in change
//   id: <change id>               order; `id:` on the last message of a
//   data: <Event with __sync_meta>  change (a membership change expands to
//                                 one message per event of the community)
//
//   : keep-alive              a comment every STREAM_KEEPALIVE_SECONDS
//
// Back-pressure: the hub hands a stream a new batch only while its socket
// drains, so what a stream holds unsent is at most one batch (up to
// batchSize changes) plus keep-alives. If that backlog is still over
// maxBufferBytes when more is due, or the socket does not drain for
// drainTimeoutMs, the stream is dropped; the client reconnects with
// Last-Event-ID and loses nothing. The stream also ends when its access token
// expires (reconnect with a fresh token and Last-Event-ID).
import type { Socket } from 'node:net';
import type { ServerResponse } from 'node:http';
import type { RequestClaims } from '../core/database/transaction.ts';
import type { Logger } from '../core/process/log.ts';
import type { ChangeHub, CloseReason, SseSubscriber } from './hub.ts';
import { SsePayload, snapshotText, type StreamStart } from './sse-messages.ts';

const KEEP_ALIVE = new SsePayload(': keep-alive\n\n');

export class SseStream implements SseSubscriber {
  readonly kind = 'sse' as const;
  cursor: number;
  private ended = false;
  private congested = false;
  private drainTimer: NodeJS.Timeout | undefined;
  private expiryTimer: NodeJS.Timeout | undefined;
  /**
   * After the opening: the response's own socket, written directly (one
   * write of a shared, already framed buffer per message), or null to write
   * through the response (e.g. a socket shared with a pipelined request).
   */
  private socket: Socket | null = null;
  private chunked = false;
  private readonly onDrain = () => {
    if (!this.congested) return;
    this.congested = false;
    clearTimeout(this.drainTimer);
    this.hub.wake(this);
  };

  constructor(
    private readonly hub: ChangeHub,
    private readonly res: ServerResponse,
    readonly userId: string,
    readonly claims: RequestClaims,
    private readonly start: StreamStart,
    private readonly log: Logger,
    /** When the access token expires (ms since the epoch). */
    tokenExpiresAt: number | undefined,
  ) {
    this.cursor = Number(start.last_event_id);
    this.hub.holdRegistration(start.stream_id);
    if (tokenExpiresAt !== undefined) {
      this.expiryTimer = setTimeout(() => this.end('access token expired'), Math.max(0, tokenExpiresAt - Date.now()));
      this.expiryTimer.unref();
    }
  }

  /** Writes the headers and the opening messages, then joins the hub. */
  open(): void {
    const { res, start } = this;
    res.on('close', () => this.finish());
    res.on('drain', this.onDrain);
    if (res.destroyed) {
      this.finish();
      return;
    }
    res.setHeader('Content-Type', 'text/event-stream; charset=utf-8');
    res.setHeader('Cache-Control', 'no-cache, no-transform');
    res.setHeader('Connection', 'keep-alive');
    res.setHeader('X-Accel-Buffering', 'no');
    // No flushHeaders(): the headers go out with the opening messages, in one write.
    res.socket?.setNoDelay(true);

    let out = '';
    if (start.mode === 'reset') {
      out += `event: reset\ndata: ${JSON.stringify({ reason: 'last_event_id_expired' })}\n\n`;
    }
    const events = start.events ?? [];
    out += start.snapshotText ?? snapshotText(events);
    out += `event: ready\nid: ${start.last_event_id}\ndata: ${JSON.stringify({
      last_event_id: this.cursor,
      mode: start.mode,
      snapshot: start.mode === 'resume' ? null : events.length,
    })}\n\n`;
    // The opening is bounded by the snapshot (at most 100 events): not
    // subject to the backlog bound, or a small bound could never be met.
    this.write(new SsePayload(out), false);
    if (this.ended) return;
    const socket = res.socket;
    // res.write corks the socket until the next tick: send the opening now,
    // so that an empty socket tells the opening is out and later messages
    // can go to the socket directly (otherwise every message would go
    // through res.write: cork, chunk framing and a string copy per stream).
    socket?.uncork();
    if (socket && (socket as Socket & { _httpMessage?: unknown })._httpMessage === res && res.writableLength === 0) {
      this.socket = socket;
      this.hub.stats.directStreams++;
      this.chunked = (res as ServerResponse & { chunkedEncoding?: boolean }).chunkedEncoding === true;
      socket.on('drain', this.onDrain);
    }
    this.hub.add(this);
  }

  canReceive(): boolean {
    return !this.ended && !this.congested;
  }

  deliver(payload: SsePayload): void {
    this.write(payload);
  }

  keepAlive(): void {
    if (this.canReceive()) this.write(KEEP_ALIVE);
  }

  close(reason: CloseReason): void {
    this.end(reason === 'pruned' ? 'resume point no longer kept' : 'server shutting down');
  }

  private write(payload: SsePayload, bounded = true): void {
    if (this.ended) return;
    const socket = this.socket;
    // Still holding more than the bound from earlier writes: the client is
    // not keeping up. (The hub gives a stream nothing while its socket does
    // not drain, so this is the backlog of at most one batch plus
    // keep-alives.)
    if (bounded && (socket ?? this.res).writableLength > this.hub.config.maxBufferBytes) {
      this.drop('unsent backlog over the bound');
      return;
    }
    const ok = socket ? socket.write(this.chunked ? payload.chunked : payload.plain) : this.res.write(payload.text);
    if (!ok && !this.congested) {
      this.congested = true;
      // Out of the hub's cohorts until it drains (it then resumes from here).
      this.hub.congested(this);
      this.drainTimer = setTimeout(() => {
        if (this.congested) this.drop('client not reading');
      }, this.hub.config.drainTimeoutMs);
      this.drainTimer.unref();
    }
  }

  /** Ends the response politely (the client may reconnect). */
  private end(reason: string): void {
    if (this.ended) return;
    this.log.debug({ reason, stream: this.start.stream_id }, 'event stream ended');
    if (!this.res.destroyed && !this.congested) this.res.write(`: ${reason}\n\n`);
    this.res.end();
    this.finish();
  }

  /** Drops a client that does not keep up: its backlog is discarded with the socket. */
  private drop(reason: string): void {
    if (this.ended) return;
    this.log.info({ reason, stream: this.start.stream_id, backlog: (this.socket ?? this.res).writableLength }, 'event stream dropped');
    this.res.destroy();
    this.finish();
  }

  private finish(): void {
    if (this.ended) return;
    this.ended = true;
    clearTimeout(this.drainTimer);
    clearTimeout(this.expiryTimer);
    this.socket?.off('drain', this.onDrain);
    this.hub.remove(this);
    this.hub.releaseRegistration(this.start.stream_id);
  }
}

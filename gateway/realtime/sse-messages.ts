// The text of SSE messages, shared by the streams (sse.ts), the hub that
// fans changes out (hub.ts) and the batched opener (opener.ts): encoded once,
// written by every stream that gets it.
export interface StreamStart {
  stream_id: string;
  mode: 'snapshot' | 'reset' | 'resume';
  last_event_id: string;
  events: Record<string, unknown>[] | null;
  /** The snapshot's `insert` messages, when already formatted (shared by the streams of one view). */
  snapshotText?: string;
}

const CRLF = Buffer.from('\r\n');

/**
 * SSE text shared by every stream that gets it, encoded once in the form a
 * stream writes to its socket: one HTTP/1.1 chunk (chunked transfer
 * encoding) or plain bytes. A change seen by 10,000 streams is encoded once,
 * and each stream does one socket write.
 */
export class SsePayload {
  private chunkedBytes: Buffer | undefined;
  private plainBytes: Buffer | undefined;
  constructor(readonly text: string) {}

  get chunked(): Buffer {
    if (!this.chunkedBytes) {
      const body = this.plain;
      this.chunkedBytes = Buffer.concat([Buffer.from(`${body.length.toString(16)}\r\n`), body, CRLF]);
    }
    return this.chunkedBytes;
  }

  get plain(): Buffer {
    return (this.plainBytes ??= Buffer.from(this.text));
  }
}

/** SSE text of a snapshot: one `insert` message per event (no `id:`). */
export function snapshotText(events: readonly Record<string, unknown>[]): string {
  let out = '';
  for (const event of events) out += `event: insert\ndata: ${JSON.stringify(event)}\n\n`;
  return out;
}

// A small server-sent-events client for the tests: fetch + the body's
// ReadableStream reader, parsed as the HTML standard defines event streams
// (fields, comments, blank line dispatch). Every wait has a timeout, so a
// missing message fails the test instead of hanging it.
import { baseUrl } from '../helpers.ts';

export const STREAM_PATH = '/api/mobile/events/upcoming/stream';

export interface SseMessage {
  event: string;
  id: string | undefined;
  data: string;
  /** data parsed as JSON (undefined when it is not JSON). */
  json: any;
}

export interface OpenOptions {
  token?: string;
  lastEventId?: string;
  /** Appended to the path, e.g. '?last_event_id=5'. */
  query?: string;
  base?: string;
  headers?: Record<string, string>;
}

export interface SseStream {
  status: number;
  headers: Headers;
  /** The body of a non-200 answer, parsed as JSON. */
  body: any;
  /** Every message received so far. */
  messages: SseMessage[];
  /** Comment lines received so far (without the colon). */
  comments: string[];
  /** True once the server ended the stream (or it failed). */
  ended: boolean;
  /** The messages after the read position up to and including the first that matches; moves the position. */
  until(match: (m: SseMessage) => boolean, timeoutMs?: number): Promise<SseMessage[]>;
  /** The next n messages after the read position; moves the position. */
  take(n: number, timeoutMs?: number): Promise<SseMessage[]>;
  /** Resolves when the server ends the stream. */
  waitEnded(timeoutMs?: number): Promise<void>;
  /** Resolves when a condition on the received state holds. */
  waitFor(condition: () => boolean, timeoutMs?: number, what?: string): Promise<void>;
  close(): void;
}

export async function openStream(options: OpenOptions = {}): Promise<SseStream> {
  const headers: Record<string, string> = { accept: 'text/event-stream', ...options.headers };
  if (options.token) headers.authorization = `Bearer ${options.token}`;
  if (options.lastEventId !== undefined) headers['last-event-id'] = options.lastEventId;
  const controller = new AbortController();
  const res = await fetch(`${options.base ?? baseUrl}${STREAM_PATH}${options.query ?? ''}`, { headers, signal: controller.signal });

  const listeners = new Set<() => void>();
  const notify = () => listeners.forEach((l) => l());
  let position = 0;

  const stream: SseStream = {
    status: res.status,
    headers: res.headers,
    body: undefined,
    messages: [],
    comments: [],
    ended: false,
    async waitFor(condition, timeoutMs = 5000, what = 'condition') {
      if (condition()) return;
      await new Promise<void>((resolve, reject) => {
        const check = () => {
          if (condition()) {
            clearTimeout(timer);
            listeners.delete(check);
            resolve();
          }
        };
        const timer = setTimeout(() => {
          listeners.delete(check);
          reject(
            new Error(
              `timed out after ${timeoutMs} ms waiting for ${what}; received ${stream.messages.length} messages: ` +
                stream.messages.map((m) => `${m.event}#${m.id ?? ''}`).join(' ') + (stream.ended ? ' (ended)' : ''),
            ),
          );
        }, timeoutMs);
        listeners.add(check);
      });
    },
    async until(match, timeoutMs = 5000) {
      let found = -1;
      await stream.waitFor(
        () => {
          found = stream.messages.findIndex((m, i) => i >= position && match(m));
          return found >= 0;
        },
        timeoutMs,
        'a matching message',
      );
      const out = stream.messages.slice(position, found + 1);
      position = found + 1;
      return out;
    },
    async take(n, timeoutMs = 5000) {
      await stream.waitFor(() => stream.messages.length >= position + n, timeoutMs, `${n} messages`);
      const out = stream.messages.slice(position, position + n);
      position += n;
      return out;
    },
    async waitEnded(timeoutMs = 5000) {
      await stream.waitFor(() => stream.ended, timeoutMs, 'the end of the stream');
    },
    close() {
      controller.abort();
    },
  };

  if (res.status !== 200 || !res.body) {
    const text = await res.text();
    try {
      stream.body = JSON.parse(text);
    } catch {
      stream.body = text;
    }
    stream.ended = true;
    return stream;
  }

  const reader = res.body.getReader();
  const decoder = new TextDecoder();
  let buffer = '';
  let event = '';
  let id: string | undefined;
  let data: string[] = [];
  const line = (text: string) => {
    if (text === '') {
      if (data.length > 0) {
        const joined = data.join('\n');
        let json: unknown;
        try {
          json = JSON.parse(joined);
        } catch {
          json = undefined;
        }
        stream.messages.push({ event: event || 'message', id, data: joined, json });
      }
      event = '';
      id = undefined;
      data = [];
      return;
    }
    if (text.startsWith(':')) {
      stream.comments.push(text.slice(1).trim());
      return;
    }
    const colon = text.indexOf(':');
    const field = colon < 0 ? text : text.slice(0, colon);
    const value = colon < 0 ? '' : text.slice(colon + 1).replace(/^ /, '');
    if (field === 'event') event = value;
    else if (field === 'id') id = value;
    else if (field === 'data') data.push(value);
  };
  void (async () => {
    try {
      for (;;) {
        const { done, value } = await reader.read();
        if (done) break;
        buffer += decoder.decode(value, { stream: true });
        let newline: number;
        while ((newline = buffer.indexOf('\n')) >= 0) {
          line(buffer.slice(0, newline).replace(/\r$/, ''));
          buffer = buffer.slice(newline + 1);
        }
        notify();
      }
    } catch {
      // aborted or reset
    } finally {
      stream.ended = true;
      notify();
    }
  })();
  return stream;
}

// GET /api/mobile/events/upcoming/stream (docs/realtime.md#the-sse-stream), the
// server-sent-events feed of the caller's upcoming events. The message format
// is described in realtime/sse.ts (and docs/realtime.md); what a caller sees is
// decided in SQL (private.event_streams_open, which opens a batch of streams
// as api.event_stream_open would one; api.event_stream_changes), and the
// fan-out is the process's realtime hub (realtime/hub.ts).
import { z } from 'zod';
import { defineRoute } from '../http/route.ts';
import { DEADLINE_MARGIN_MS, withDeadline } from '../core/database/pool.ts';
import { HttpError } from '../core/web/errors.ts';
import { content, errors } from '../http/responses.ts';
import { SseStream } from '../realtime/sse.ts';
import type { ChangeHub } from '../realtime/hub.ts';
import type { SessionWatch } from '../realtime/session-watch.ts';
import { syncRoutes } from './sync.ts';

// The stream needs the process's realtime hub, and the session watch that
// ends streams of ended sessions and revoked tokens: both join the services
// every route is built with (gateway/server.ts provides them).
declare module '../http/route.ts' {
  interface Services {
    /** The realtime feed (LISTEN hub shared by the SSE stream and the websocket). */
    realtime: ChangeHub;
    /** Ends SSE streams and websockets of ended sessions and tokens (realtime/session-watch.ts). */
    sessions?: SessionWatch;
  }
}

/** A change id as sent in `id:` lines; empty means none. */
const ChangeId = z
  .string()
  .regex(/^\d{0,18}$/, { message: 'must be a change id (digits)' })
  .meta({ example: '48213' });

export const streamRoutes = [
  defineRoute({
    method: 'get',
    path: '/api/mobile/events/upcoming/stream',
    summary:
      "Server-sent events: a snapshot of the caller's upcoming events, then one message per change (insert, update, delete); resumes after Last-Event-ID.",
    description:
      "Server-sent events: first a snapshot of the caller's upcoming events, then one message per change (`insert`, `update`, `delete`; the data is the Event with `__sync_meta`), each with its change id in `id:`. After a reconnect with Last-Event-ID it sends only what changed since (410 when that is too old: start again without it). Logging out, or deactivating the API token, ends the stream.",
    limits: ['A user has a limited number of open streams (429 `too_many_streams` past it).'],
    auth: 'user',
    tokenInQuery: true,
    // Opening a stream registers it (the per-user cap is counted in Postgres).
    readWrite: true,
    query: z.object({
      last_event_id: ChangeId.optional().describe('Resume after this change id (the `id:` of the last message received), as the Last-Event-ID header does.'),
      lastEventId: ChangeId.optional().describe('The same as `last_event_id`.'),
      access_token: z
        .string()
        .optional()
        .describe('The access token, for clients that cannot set the Authorization header (a browser EventSource).')
        .meta({ example: 'eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiI1ZjBjOGE5ZS0zYjFkLTRjNjItOWE3ZS0yZDRiNmY4YTFjMDMifQ.sig' }),
    }),
    headers: z.object({
      'last-event-id': ChangeId.optional().describe('Resume after this change id: an EventSource sends it when it reconnects.'),
    }),
    responses: { 200: content('text/event-stream', 'Server-sent events: a snapshot, then `insert`/`update`/`delete` messages whose data is the Event with __sync_meta; `id:` is the change id.'), 410: errors('last_event_id_expired'), 429: errors('too_many_streams'), 503: errors('service_unavailable') },
    async handler({ query, headers, user, apiToken, services, log }) {
      const hub = services.realtime;
      if (!hub.accepting) throw new HttpError(503, 'service_unavailable', 'the stream is not available now, try again');
      const lastEventId = headers['last-event-id'] || query.last_event_id || query.lastEventId || null;
      // The credential the stream lives by: the access token's session, or
      // the API token itself (private.session_ended answers for both).
      const credential = user!.session_id ?? apiToken?.id ?? null;
      // Batched with the opens arriving at the same time (realtime/opener.ts):
      // private.event_streams_open, what api.event_stream_open does per caller.
      // Bounded like every request's transaction (503 when the database does not answer).
      const start = await withDeadline(services.sql, services.statementTimeoutMs + DEADLINE_MARGIN_MS, () =>
        hub.opener.open({ userId: user!.sub, sessionId: credential, lastEventId }),
      );
      // An access token's expiry, or an API token's expires_at.
      const expiresAt = typeof user!.exp === 'number' ? user!.exp * 1000 : undefined;
      return {
        status: 200,
        stream: (res) => {
          new SseStream(hub, res, user!.sub, user!, start, log, expiresAt).open();
          // Logout, refresh-token reuse, or the API token's deactivation ends the stream at once.
          const unwatch = services.sessions?.watch(credential, () => {
            if (!res.writableEnded) res.end(': session ended\n\n');
          });
          if (unwatch) res.on('close', unwatch);
        },
      };
    },
  }),
  // GET /sync/v1/shape: the shapes of offline clients, on the same change log (routes/sync.ts).
  ...syncRoutes,
];

// /realtime/v1/websocket: enough of the Supabase Realtime protocol for
// supabase-js `channel(...).on('postgres_changes', ...)` to work against this
// gateway as it does against a Supabase project (where app.events is in the
// supabase_realtime publication), so the same app code runs on both.
//
// Phoenix frames, vsn 2.0.0 (the default of supabase-js; arrays
// [join_ref, ref, topic, event, payload]) or 1.0.0 (objects):
//   phx_join      payload {config: {postgres_changes: [{event, schema, table,
//                 filter}]}, access_token}: the token is one of this gateway's
//                 access tokens (verified like a bearer token); the reply
//                 lists the subscriptions with their ids, then a `system`
//                 message "Subscribed to PostgreSQL". A join without a token
//                 is refused with an error reply, and the connection
//                 remembers where the change log stood for that topic: the
//                 next join of the topic with a token receives every change
//                 since then. supabase-js sends its first join before an
//                 async accessToken callback has answered, learns the token
//                 while that join is in flight (so it never sends it in an
//                 access_token message), and rejoins a second after the
//                 error reply with the token in the join: nothing of its
//                 first second is lost. (Accepting the tokenless join would
//                 leave the channel without a user for good, as on Supabase,
//                 where such a join is anon, which may not read app.events.)
//   heartbeat     on topic `phoenix`: reply ok
//   access_token  a fresh token for a joined channel (same user)
//   phx_leave     reply ok; the channel is gone
//   postgres_changes (server → client): {ids, data: {schema, table,
//                 commit_timestamp, type, columns, record, old_record,
//                 errors: null}}
//
// Subscriptions name schema `app` and table `events` (or `*`): the real
// table, so the same names work on Supabase. Events: `*`, INSERT, UPDATE,
// DELETE; filters `column=eq.value`, `column=neq.value`, `column=in.(a,b)`.
// What a user receives is decided in SQL (api.realtime_event_changes, run as
// that user by the hub): inserts and updates of rows row-level security lets
// them read, deletes with the primary key only, as Supabase does. Filters
// only narrow that down, per subscription.
//
// Not supported (answered with an error reply): broadcast, presence, private
// channels, other tables. A websocket counts against the per-user stream cap
// once it has joined a channel; it is closed when its unsent backlog exceeds
// STREAM_MAX_BUFFER_BYTES or it sends nothing for socketIdleTimeoutMs.
//
// Limits (so that no client can exhaust the process; see LIMITS): frames of
// at most 64 KB; per connection at most 20 channels and 50 subscriptions,
// filters of at most 1024 characters with at most 100 values in an `in`
// list, and 16 KB of filter text in all; at most 32 frames waiting to be
// handled, and 200 frames or 512 KB per 10 seconds. A connection that has no channel with a valid access token
// socketAuthGraceMs after it opened is closed, and with it everything it
// held (the positions of refused joins are kept only that long, and for at
// most LIMITS.channels topics). Open websockets are
// capped per process (REALTIME_MAX_CONNECTIONS) and per client IP
// (REALTIME_MAX_CONNECTIONS_PER_IP); over a cap the upgrade is refused with
// 503 or 429. When the session of a channel's access token ends (logout,
// refresh-token reuse) the channel is closed.
import type http from 'node:http';
import type { Duplex } from 'node:stream';
import { WebSocket, WebSocketServer, type RawData } from 'ws';
import { z } from 'zod';
import { clientIp } from '../core/web/client-ip.ts';
import type { TrustProxy } from '../core/process/config.ts';
import { withClaims, type RequestClaims } from '../core/database/transaction.ts';
import type { Sql } from '../core/database/pool.ts';
import type { ErrorCode } from '../core/web/error-codes.ts';
import { toHttpError } from '../core/web/errors.ts';
import { claimsOf } from '../core/auth/identity.ts';
import { InvalidTokenError, type TokenService } from '../core/auth/jwt.ts';
import type { Logger } from '../core/process/log.ts';
import type { ChangeHub, CloseReason, RealtimeRow, WebSocketSubscriber } from './hub.ts';
import type { SessionWatch } from './session-watch.ts';

export const REALTIME_PATH = '/realtime/v1/websocket';
export const REALTIME_SCHEMA = 'app';
export const REALTIME_TABLE = 'events';
/** Per-connection bounds (see the header). */
export const LIMITS = {
  frameBytes: 64 * 1024,
  channels: 20,
  subscriptions: 50,
  filterLength: 1024,
  inValues: 100,
  filterBytes: 16 * 1024,
  queuedFrames: 32,
  /** What one connection may send per 10 s window (a client sends a join or two and a heartbeat every 30 s). */
  windowFrames: 200,
  windowBytes: 512 * 1024,
} as const;

type Vsn = '1.0.0' | '2.0.0';

interface Frame {
  joinRef: string | null;
  ref: string | null;
  topic: string;
  event: string;
  payload: unknown;
}

const NullableRef = z.union([z.string(), z.number().transform(String)]).nullable();
const ArrayFrame = z.tuple([NullableRef, NullableRef, z.string(), z.string(), z.unknown()]);
const ObjectFrame = z.object({
  join_ref: NullableRef.optional(),
  ref: NullableRef.optional(),
  topic: z.string(),
  event: z.string(),
  payload: z.unknown(),
});

const PostgresChangeConfig = z.object({
  event: z.string(),
  schema: z.string(),
  table: z.string().optional(),
  filter: z.string().optional(),
});

const JoinPayload = z.object({
  config: z
    .object({
      postgres_changes: z.array(PostgresChangeConfig).max(LIMITS.subscriptions).optional(),
      presence: z.object({ enabled: z.boolean().optional() }).passthrough().optional(),
      private: z.boolean().optional(),
    })
    .passthrough()
    .optional(),
  access_token: z.string().optional(),
});

const TokenPayload = z.object({ access_token: z.string() });

function decode(vsn: Vsn, text: string): Frame | null {
  let raw: unknown;
  try {
    raw = JSON.parse(text);
  } catch {
    return null;
  }
  if (vsn === '2.0.0') {
    const parsed = ArrayFrame.safeParse(raw);
    if (!parsed.success) return null;
    const [joinRef, ref, topic, event, payload] = parsed.data;
    return { joinRef, ref, topic, event, payload };
  }
  const parsed = ObjectFrame.safeParse(raw);
  if (!parsed.success) return null;
  const { join_ref, ref, topic, event, payload } = parsed.data;
  return { joinRef: join_ref ?? null, ref: ref ?? null, topic, event, payload };
}

function encode(vsn: Vsn, frame: Frame): string {
  if (vsn === '2.0.0') return JSON.stringify([frame.joinRef, frame.ref, frame.topic, frame.event, frame.payload]);
  return JSON.stringify({ join_ref: frame.joinRef, ref: frame.ref, topic: frame.topic, event: frame.event, payload: frame.payload });
}

/** The refs and topic of a binary (vsn 2 user broadcast) frame, to answer it. */
function decodeBinaryHeader(data: Buffer): Frame | null {
  if (data.length < 7 || data[0] !== 3) return null;
  const [joinRefLen, refLen, topicLen] = [data[1]!, data[2]!, data[3]!];
  let offset = 7;
  const take = (n: number) => data.subarray(offset, (offset += n)).toString('utf8');
  const joinRef = take(joinRefLen);
  const ref = take(refLen);
  const topic = take(topicLen);
  return { joinRef: joinRef || null, ref: ref || null, topic, event: 'broadcast', payload: null };
}

interface Filter {
  column: string;
  op: 'eq' | 'neq' | 'in';
  values: string[];
}

function parseFilter(text: string): Filter | string {
  if (text.length > LIMITS.filterLength) return `filter longer than ${LIMITS.filterLength} characters`;
  const match = /^([A-Za-z_][A-Za-z0-9_]*)=(eq|neq|in)\.(.*)$/s.exec(text);
  if (!match) return `unsupported filter "${text}": use column=eq.value, column=neq.value or column=in.(a,b)`;
  const [, column, op, value] = match as unknown as [string, string, Filter['op'], string];
  if (op !== 'in') return { column, op, values: [value] };
  const list = /^\((.*)\)$/s.exec(value);
  if (!list) return `unsupported filter "${text}": in takes a list in parentheses`;
  const values = list[1]!.split(',').map((v) => v.trim().replace(/^"(.*)"$/s, '$1'));
  if (values.length > LIMITS.inValues) return `at most ${LIMITS.inValues} values in an in filter`;
  return { column, op, values };
}

function cellText(value: unknown): string | null {
  if (value === null || value === undefined) return null;
  return typeof value === 'string' ? value : JSON.stringify(value);
}

interface Subscription {
  id: number;
  /** As the client sent them (the reply must echo them for supabase-js to accept it). */
  config: z.infer<typeof PostgresChangeConfig>;
  type: '*' | 'INSERT' | 'UPDATE' | 'DELETE';
  filter: Filter | null;
}

function matches(sub: Subscription, row: RealtimeRow): boolean {
  if (sub.type !== '*' && sub.type !== row.type) return false;
  if (!sub.filter) return true;
  const record = row.type === 'DELETE' ? row.old_record : row.record;
  if (!record || !(sub.filter.column in record)) return false;
  const cell = cellText(record[sub.filter.column]);
  const hit = cell !== null && sub.filter.values.includes(cell);
  return sub.filter.op === 'neq' ? cell !== null && !hit : hit;
}

let nextSubscriptionId = 1;

export interface WebSocketDeps {
  hub: ChangeHub;
  sql: Sql;
  tokens: TokenService;
  log: Logger;
  statementTimeoutMs: number;
  isReady: () => boolean;
  /** Closes channels whose session ends (optional: without it only token expiry ends them). */
  sessions?: SessionWatch;
  /** Which proxies' X-Forwarded-For to believe for the per-IP cap (Express's compiled TRUST_PROXY). */
  trustProxy?: TrustProxy;
}

export interface RealtimeWebSocket {
  close(): Promise<void>;
}

export function attachRealtimeWebSocket(server: http.Server, deps: WebSocketDeps): RealtimeWebSocket {
  const wss = new WebSocketServer({ noServer: true, maxPayload: LIMITS.frameBytes, perMessageDeflate: false });
  const connections = new Set<Connection>();
  const perIp = new Map<string, number>();
  let closing = false;
  let accepted = 0;
  let columns: Promise<{ name: string; type: string }[]> | undefined;
  const columnsFor = (claims: RequestClaims) => {
    columns ??= withClaims(deps.sql, claims, (tx) => tx<{ name: string; type: string }[]>`select name, type from api.realtime_columns()`, {
      readOnly: true,
    }).then((rows) => rows.map((r) => ({ name: r.name, type: r.type })));
    columns.catch(() => (columns = undefined));
    return columns;
  };

  const refuse = (socket: Duplex, status: number, code: ErrorCode, message: string) => {
    const body = JSON.stringify({ error: code, message, details: null });
    // As every 429 and 503 of the gateway: when to try again.
    const retryAfter = status === 429 || status === 503 ? 'Retry-After: 1\r\n' : '';
    socket.end(
      `HTTP/1.1 ${status} ${httpStatusText(status)}\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\n${retryAfter}Connection: close\r\n\r\n${body}`,
    );
  };

  server.on('upgrade', (req: http.IncomingMessage, socket: Duplex, head: Buffer) => {
    const url = new URL(req.url ?? '/', 'http://localhost');
    if (url.pathname !== REALTIME_PATH && url.pathname !== `${REALTIME_PATH}/`) {
      refuse(socket, 404, 'not_found', `no websocket at ${url.pathname}`);
      return;
    }
    if (closing || !deps.isReady() || !deps.hub.accepting) {
      refuse(socket, 503, 'service_unavailable', 'the service is starting or stopping');
      return;
    }
    const vsn = url.searchParams.get('vsn') ?? '1.0.0';
    if (vsn !== '1.0.0' && vsn !== '2.0.0') {
      refuse(socket, 400, 'bad_request', 'vsn must be 1.0.0 or 2.0.0');
      return;
    }
    const { maxSockets, maxSocketsPerIp } = deps.hub.config;
    const ip = clientIp(req.socket.remoteAddress, req.headers['x-forwarded-for'], deps.trustProxy);
    if (accepted >= maxSockets) {
      refuse(socket, 503, 'service_unavailable', 'too many realtime connections, try again later');
      return;
    }
    if ((perIp.get(ip) ?? 0) >= maxSocketsPerIp) {
      refuse(socket, 429, 'rate_limited', 'too many realtime connections from this address');
      return;
    }
    // Counted from the upgrade on (a handshake in progress holds a place).
    accepted++;
    perIp.set(ip, (perIp.get(ip) ?? 0) + 1);
    let released = false;
    const release = () => {
      if (released) return;
      released = true;
      accepted--;
      const n = (perIp.get(ip) ?? 1) - 1;
      if (n <= 0) perIp.delete(ip);
      else perIp.set(ip, n);
    };
    socket.once('close', release);
    wss.handleUpgrade(req, socket, head, (ws) => {
      // The query string (apikey) is never logged.
      deps.log.debug({ path: url.pathname, vsn }, 'realtime websocket opened');
      const connection = new Connection(ws, vsn, deps, columnsFor);
      connections.add(connection);
      ws.on('close', () => {
        connections.delete(connection);
        release();
      });
    });
  });

  return {
    async close() {
      closing = true;
      const closed = [...connections].map(
        (c) => new Promise<void>((resolve) => {
          c.ws.once('close', () => resolve());
          c.shutdown();
          setTimeout(() => {
            c.ws.terminate();
            resolve();
          }, 2000).unref();
        }),
      );
      await Promise.all(closed);
      await new Promise<void>((resolve) => wss.close(() => resolve()));
    },
  };
}

function httpStatusText(status: number): string {
  return { 400: 'Bad Request', 404: 'Not Found', 429: 'Too Many Requests', 503: 'Service Unavailable' }[status] ?? 'Error';
}

class Channel implements WebSocketSubscriber {
  readonly kind = 'websocket' as const;
  expiryTimer: NodeJS.Timeout | undefined;
  /** Stops watching this channel's session. */
  unwatchSession: () => void = () => {};

  constructor(
    private readonly connection: Connection,
    readonly topic: string,
    readonly joinRef: string | null,
    readonly userId: string,
    public claims: RequestClaims,
    readonly subscriptions: Subscription[],
    public cursor: number,
  ) {}

  canReceive(): boolean {
    return this.connection.open;
  }

  deliver(rows: readonly RealtimeRow[]): void {
    for (const row of rows) {
      const ids = this.subscriptions.filter((s) => matches(s, row)).map((s) => s.id);
      if (ids.length === 0) continue;
      const data: Record<string, unknown> = {
        schema: REALTIME_SCHEMA,
        table: REALTIME_TABLE,
        commit_timestamp: row.commit_timestamp,
        type: row.type,
        columns: this.connection.columns,
        errors: null,
      };
      if (row.type !== 'DELETE') data.record = row.record;
      if (row.type !== 'INSERT') data.old_record = row.old_record;
      this.connection.send({ joinRef: this.joinRef, ref: null, topic: this.topic, event: 'postgres_changes', payload: { ids, data } });
    }
  }

  close(reason: CloseReason): void {
    if (reason === 'shutdown') this.connection.shutdown();
    else this.connection.closeChannel(this, 'the changes after this channel\'s position are no longer kept');
  }
}

class Connection {
  private readonly channels = new Map<string, Channel>();
  /**
   * Topics whose join came without a token, with the change id the log had
   * reached then: the topic's next join with a token starts there.
   */
  private readonly refused = new Map<string, number>();
  private registration: { id: string; userId: string } | null = null;
  private queue: Promise<void> = Promise.resolve();
  private idleTimer: NodeJS.Timeout | undefined;
  private authTimer: NodeJS.Timeout | undefined;
  private queuedFrames = 0;
  private window = { started: Date.now(), frames: 0, bytes: 0 };
  columns: { name: string; type: string }[] = [];

  constructor(
    readonly ws: WebSocket,
    private readonly vsn: Vsn,
    private readonly deps: WebSocketDeps,
    private readonly columnsFor: (claims: RequestClaims) => Promise<{ name: string; type: string }[]>,
  ) {
    ws.on('message', (data: RawData, isBinary: boolean) => {
      this.touch();
      const now = Date.now();
      if (now - this.window.started > 10_000) this.window = { started: now, frames: 0, bytes: 0 };
      this.window.frames++;
      this.window.bytes += rawLength(data);
      if (this.queuedFrames >= LIMITS.queuedFrames || this.window.frames > LIMITS.windowFrames || this.window.bytes > LIMITS.windowBytes) {
        this.ws.close(1008, 'too many frames');
        this.cleanup();
        return;
      }
      this.queuedFrames++;
      this.queue = this.queue
        .then(() => this.handle(data, isBinary))
        .catch((err: unknown) => this.deps.log.warn({ err }, 'realtime websocket: message failed'))
        .finally(() => this.queuedFrames--);
    });
    ws.on('close', () => this.cleanup());
    ws.on('error', (err) => this.deps.log.debug({ err }, 'realtime websocket error'));
    this.touch();
    // No valid access token in time: the connection and what it holds go.
    this.authTimer = setTimeout(() => {
      this.ws.close(1008, 'an access token is required');
      this.cleanup();
    }, this.deps.hub.config.socketAuthGraceMs);
    this.authTimer.unref();
  }

  get open(): boolean {
    return this.ws.readyState === WebSocket.OPEN;
  }

  send(frame: Frame): void {
    if (!this.open) return;
    this.ws.send(encode(this.vsn, frame));
    if (this.ws.bufferedAmount > this.deps.hub.config.maxBufferBytes) {
      this.deps.log.info({ backlog: this.ws.bufferedAmount }, 'realtime websocket dropped: unsent backlog over the bound');
      this.ws.terminate();
    }
  }

  /** Server shutdown: close with 1001 (going away); supabase-js reconnects. */
  shutdown(): void {
    if (this.ws.readyState === WebSocket.OPEN || this.ws.readyState === WebSocket.CONNECTING) {
      this.ws.close(1001, 'server shutting down');
    }
    this.cleanup();
  }

  closeChannel(channel: Channel, message: string): void {
    this.removeChannel(channel.topic);
    this.send({ joinRef: channel.joinRef, ref: null, topic: channel.topic, event: 'system', payload: { channel: channelName(channel.topic), extension: 'system', message, status: 'error' } });
    this.send({ joinRef: channel.joinRef, ref: channel.joinRef, topic: channel.topic, event: 'phx_close', payload: {} });
  }

  private touch(): void {
    clearTimeout(this.idleTimer);
    this.idleTimer = setTimeout(() => this.ws.terminate(), this.deps.hub.config.socketIdleTimeoutMs);
    this.idleTimer.unref();
  }

  private reply(frame: Frame, status: 'ok' | 'error', response: Record<string, unknown>): void {
    this.send({ joinRef: frame.joinRef, ref: frame.ref, topic: frame.topic, event: 'phx_reply', payload: { status, response } });
  }

  private async handle(data: RawData, isBinary: boolean): Promise<void> {
    const buffer = Array.isArray(data) ? Buffer.concat(data) : Buffer.from(data as ArrayBuffer);
    if (isBinary) {
      const frame = decodeBinaryHeader(buffer);
      if (frame) this.reply(frame, 'error', { reason: 'broadcast is not supported by this server' });
      return;
    }
    const frame = decode(this.vsn, buffer.toString('utf8'));
    if (!frame) {
      this.deps.log.debug('realtime websocket: undecodable frame ignored');
      return;
    }
    if (frame.topic === 'phoenix') {
      if (frame.event === 'heartbeat') this.reply(frame, 'ok', {});
      else this.reply(frame, 'error', { reason: `unknown event ${frame.event}` });
      return;
    }
    switch (frame.event) {
      case 'phx_join':
        return this.join(frame);
      case 'phx_leave':
        this.removeChannel(frame.topic);
        this.refused.delete(frame.topic);
        this.reply(frame, 'ok', {});
        return;
      case 'access_token':
        return this.refreshToken(frame);
      case 'broadcast':
      case 'presence':
        this.reply(frame, 'error', { reason: `${frame.event} is not supported by this server (postgres_changes only)` });
        return;
      default:
        this.reply(frame, 'error', {
          reason: this.channels.has(frame.topic) ? `unknown event ${frame.event}` : 'unmatched topic',
        });
    }
  }

  private async verify(token: string | undefined): Promise<RequestClaims | string> {
    if (!token) return 'an access token is required (access_token, from POST /api/auth/login)';
    try {
      return claimsOf({ kind: 'access_token', claims: await this.deps.tokens.verify(token) });
    } catch (err) {
      if (err instanceof InvalidTokenError) return `invalid access token: ${err.message}`;
      throw err;
    }
  }

  private async join(frame: Frame): Promise<void> {
    const parsed = JoinPayload.safeParse(frame.payload ?? {});
    if (!parsed.success) return this.reply(frame, 'error', { reason: 'invalid join payload' });
    const config = parsed.data.config ?? {};
    if (config.private) {
      return this.reply(frame, 'error', { reason: 'private channels are not supported by this server (postgres_changes only)' });
    }
    if (config.presence?.enabled) {
      return this.reply(frame, 'error', { reason: 'presence is not supported by this server (postgres_changes only)' });
    }
    const subscriptions: Subscription[] = [];
    for (const change of config.postgres_changes ?? []) {
      const type = change.event.toUpperCase();
      if (type !== '*' && type !== 'INSERT' && type !== 'UPDATE' && type !== 'DELETE') {
        return this.reply(frame, 'error', { reason: `unknown event "${change.event}": use *, INSERT, UPDATE or DELETE` });
      }
      const schemaOk = change.schema === REALTIME_SCHEMA || change.schema === '*';
      const tableOk = change.table === undefined || change.table === '*' || change.table === REALTIME_TABLE;
      if (!schemaOk || !tableOk) {
        return this.reply(frame, 'error', {
          reason: `only ${REALTIME_SCHEMA}.${REALTIME_TABLE} can be subscribed to (got ${change.schema}.${change.table ?? '*'})`,
        });
      }
      const filter = change.filter ? parseFilter(change.filter) : null;
      if (typeof filter === 'string') return this.reply(frame, 'error', { reason: filter });
      subscriptions.push({ id: nextSubscriptionId++, config: change, type, filter });
    }
    if (!this.channels.has(frame.topic) && this.channels.size >= LIMITS.channels) {
      return this.reply(frame, 'error', { reason: `at most ${LIMITS.channels} channels per connection` });
    }
    const others = [...this.channels.values()].filter((c) => c.topic !== frame.topic);
    const held = others.reduce((n, c) => n + c.subscriptions.length, 0);
    if (held + subscriptions.length > LIMITS.subscriptions) {
      return this.reply(frame, 'error', { reason: `at most ${LIMITS.subscriptions} subscriptions per connection` });
    }
    const filterBytes = (subs: Subscription[]) => subs.reduce((n, sub) => n + (sub.config.filter?.length ?? 0), 0);
    if (others.reduce((n, c) => n + filterBytes(c.subscriptions), 0) + filterBytes(subscriptions) > LIMITS.filterBytes) {
      return this.reply(frame, 'error', { reason: `at most ${LIMITS.filterBytes} bytes of filters per connection` });
    }

    if (!parsed.data.access_token) return this.refuseWithoutToken(frame);
    const claims = await this.verify(parsed.data.access_token);
    if (typeof claims === 'string') return this.reply(frame, 'error', { reason: claims });
    const authorized = await this.authorize(claims);
    if (typeof authorized === 'string') return this.reply(frame, 'error', { reason: authorized });
    if (!this.open) return;
    // After a refused join of this topic: every change since that join.
    const since = this.refused.get(frame.topic);
    this.refused.delete(frame.topic);
    const cursor = since === undefined ? authorized.head : Math.min(since, authorized.head);
    const channel = new Channel(this, frame.topic, frame.joinRef, claims.sub!, claims, subscriptions, cursor);
    this.removeChannel(frame.topic);
    this.channels.set(frame.topic, channel);
    this.reply(frame, 'ok', { postgres_changes: subscriptions.map((s) => ({ id: s.id, ...s.config })) });
    if (subscriptions.length > 0) {
      this.send({
        joinRef: frame.joinRef,
        ref: null,
        topic: frame.topic,
        event: 'system',
        payload: { channel: channelName(frame.topic), extension: 'postgres_changes', message: 'Subscribed to PostgreSQL', status: 'ok' },
      });
    }
    this.start(channel);
  }

  /**
   * A join without a token: refused, and the topic's position remembered
   * (the channel it replaces keeps its own), so that the rejoin with the
   * token misses nothing. The position is the newest change this process
   * knows of, read without a query (a refused join costs the database
   * nothing): at worst a change committed just before the join comes too.
   */
  private refuseWithoutToken(frame: Frame): void {
    const held = this.channels.get(frame.topic);
    if (!this.refused.has(frame.topic) && (held || this.refused.size < LIMITS.channels)) {
      this.refused.set(frame.topic, held ? held.cursor : this.deps.hub.knownHead);
    }
    this.removeChannel(frame.topic);
    this.reply(frame, 'error', {
      reason: 'an access token is required (access_token, from POST /api/auth/login): join again with it to receive every change since this join',
    });
  }

  /**
   * Checks that the user may hold this connection (first channel: registers
   * it under the per-user cap) and returns the change id deliveries start
   * after; or why not.
   */
  private async authorize(claims: RequestClaims): Promise<{ head: number } | string> {
    const userId = claims.sub!;
    if (this.registration && this.registration.userId !== userId) return 'this connection belongs to another user';
    try {
      if (!this.registration) {
        const [row] = await withClaims(
          this.deps.sql,
          claims,
          (tx) => tx<{ id: string }[]>`select api.realtime_connect(${this.deps.hub.gatewayId}, ${this.deps.hub.config.registrationTtlSeconds}) as id`,
          { statementTimeoutMs: this.deps.statementTimeoutMs },
        );
        this.deps.hub.holdRegistration(row!.id);
        if (!this.open) {
          this.deps.hub.releaseRegistration(row!.id);
          return 'connection closed';
        }
        this.registration = { id: row!.id, userId };
      }
      this.columns = await this.columnsFor(claims);
      return { head: await this.deps.hub.currentHead() };
    } catch (err) {
      const httpError = toHttpError(err);
      if (httpError.status >= 500) this.deps.log.error({ err }, 'realtime websocket: authorizing a channel failed');
      return httpError.message;
    }
  }

  private start(channel: Channel): void {
    clearTimeout(this.authTimer);
    this.watchSession(channel);
    this.armExpiry(channel);
    if (channel.subscriptions.length > 0) this.deps.hub.add(channel);
  }

  private async refreshToken(frame: Frame): Promise<void> {
    const channel = this.channels.get(frame.topic);
    const parsed = TokenPayload.safeParse(frame.payload);
    if (!channel || !parsed.success) return this.reply(frame, 'error', { reason: channel ? 'access_token is required' : 'unmatched topic' });
    const claims = await this.verify(parsed.data.access_token);
    if (typeof claims === 'string') return this.closeChannel(channel, claims);
    if (claims.sub !== channel.userId) return this.closeChannel(channel, 'the access token belongs to another user');
    channel.claims = claims;
    this.watchSession(channel);
    this.armExpiry(channel);
    return this.reply(frame, 'ok', {});
  }

  private watchSession(channel: Channel): void {
    channel.unwatchSession();
    channel.unwatchSession =
      this.deps.sessions?.watch(channel.claims.session_id, () => {
        if (this.channels.get(channel.topic) === channel) this.closeChannel(channel, 'the session has ended');
      }) ?? (() => {});
  }

  private armExpiry(channel: Channel): void {
    clearTimeout(channel.expiryTimer);
    const exp = channel.claims.exp;
    if (typeof exp !== 'number') return;
    channel.expiryTimer = setTimeout(() => {
      if (this.channels.get(channel.topic) === channel) this.closeChannel(channel, 'access token expired');
    }, Math.max(0, exp * 1000 - Date.now()));
    channel.expiryTimer.unref();
  }

  private removeChannel(topic: string): void {
    const channel = this.channels.get(topic);
    if (!channel) return;
    clearTimeout(channel.expiryTimer);
    channel.unwatchSession();
    this.channels.delete(topic);
    this.deps.hub.remove(channel);
  }

  private cleanup(): void {
    clearTimeout(this.idleTimer);
    clearTimeout(this.authTimer);
    this.refused.clear();
    for (const topic of [...this.channels.keys()]) this.removeChannel(topic);
    if (this.registration) {
      this.deps.hub.releaseRegistration(this.registration.id);
      this.registration = null;
    }
  }
}

function rawLength(data: RawData): number {
  if (Array.isArray(data)) return data.reduce((n, b) => n + b.length, 0);
  return data instanceof ArrayBuffer ? data.byteLength : data.length;
}

function channelName(topic: string): string {
  return topic.replace(/^realtime:/, '');
}

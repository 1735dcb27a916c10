// GET /sync/v1/shape (docs/sync.md): the caller's data as shapes in
// ElectricSQL's HTTP shape protocol, so that the unmodified
// @electric-sql/client ShapeStream and PGlite's syncShapeToTable keep a local
// copy. What a shape holds and how a change reads for the caller is SQL
// (sql/areas/sync.sql: api.sync_snapshot, api.sync_changes); live long-polls
// wait in the process's shape hub (realtime/shapes.ts) without a database
// connection, and are read once per range for everyone waiting at it.
//
// The protocol, as the client speaks it (its source is the contract):
//   offset=-1            the snapshot: every row as an insert, then up-to-date
//   offset=now           nothing, up-to-date at the log's head
//   offset=<id>_0        what changed after that change id (with handle)
//   live=true            the same, but held until something changes (or a
//                        while passes: then just up-to-date)
//   409 + must-refetch   the handle is not this caller's shape, or the offset
//                        is older than the change log keeps: start again
// Row values are sent as text with the electric-schema header (as Electric
// does), which the client parses back into the REST answer's JSON values.
import crypto from 'node:crypto';
import type { ServerResponse } from 'node:http';
import postgres from 'postgres';
import { z } from 'zod';
import { defineRoute } from '../http/route.ts';
import { HttpError } from '../core/web/errors.ts';
import { content, errors } from '../http/responses.ts';
import { Event } from '../core/web/shapes.ts';
import { ShapeHub, shapesOf, type ShapeChange } from '../realtime/shapes.ts';
import { MyCommunityListItem } from './communities.ts';
import { Connection } from './connections.ts';
import { Hat, UserProfile } from './profile.ts';
import { DealOut, TaskOut } from './tasks.ts';

/** The shapes, by their `table` name, and the REST object each row is. */
const SHAPE_OBJECTS = {
  profile: UserProfile,
  hats: Hat,
  communities: MyCommunityListItem,
  events: Event,
  tasks: TaskOut,
  deals: DealOut,
  connections: Connection,
} as const;
export type ShapeName = keyof typeof SHAPE_OBJECTS;
const SHAPE_NAMES = Object.keys(SHAPE_OBJECTS) as [ShapeName, ...ShapeName[]];

/** How long a live request waits for a change before it is answered with nothing new (Electric's is 20 s). */
export const LIVE_WAIT_MS = 20_000;
/** Electric's cursor interval: live answers carry the current interval's number (electric-cursor). */
const CURSOR_INTERVAL_S = 20;

const ELECTRIC_HEADERS = ['electric-handle', 'electric-offset', 'electric-schema', 'electric-up-to-date', 'electric-cursor'];

type ColumnType = 'text' | 'bool' | 'float8' | 'jsonb';
type JsonSchema = { type?: string | string[]; anyOf?: JsonSchema[]; oneOf?: JsonSchema[]; $ref?: string; $defs?: Record<string, JsonSchema>; properties?: Record<string, JsonSchema> };

/** The column types of a shape, from the REST object's JSON schema: what the client parses each text value back into. */
function columnTypes(schema: z.ZodType): Record<string, ColumnType> {
  const json = z.toJSONSchema(schema, { io: 'output', unrepresentable: 'any' }) as JsonSchema;
  // Named components are $refs into $defs.
  const resolve = (s: JsonSchema): JsonSchema => (s.$ref ? resolve(json.$defs?.[s.$ref.split('/').pop()!] ?? {}) : s);
  const typeOf = (s: JsonSchema): ColumnType => {
    const types = [resolve(s), ...[...(s.anyOf ?? []), ...(s.oneOf ?? [])].map(resolve)].flatMap((a) => a.type ?? []).filter((t) => t !== 'null');
    if (types.includes('object') || types.includes('array')) return 'jsonb';
    if (types.includes('boolean')) return 'bool';
    if (types.includes('number') || types.includes('integer')) return 'float8';
    return 'text';
  };
  return Object.fromEntries(Object.entries(resolve(json).properties ?? {}).map(([k, s]) => [k, typeOf(s)]));
}
const COLUMNS = Object.fromEntries(SHAPE_NAMES.map((n) => [n, columnTypes(SHAPE_OBJECTS[n])])) as Record<ShapeName, Record<string, ColumnType>>;
const SCHEMA_HEADER = Object.fromEntries(
  SHAPE_NAMES.map((n) => [n, JSON.stringify(Object.fromEntries(Object.entries(COLUMNS[n]).map(([k, type]) => [k, k === 'id' ? { type, pk_index: 0 } : { type }])))]),
) as Record<ShapeName, string>;

/** A row's values as Electric sends them: text, parsed back by the client with the schema. */
function encodeRow(shape: ShapeName, value: Record<string, unknown>): Record<string, string | null> {
  const out: Record<string, string | null> = {};
  for (const [k, v] of Object.entries(value)) {
    if (v === null || v === undefined) out[k] = null;
    else if (COLUMNS[shape][k] === 'jsonb' || typeof v === 'object') out[k] = JSON.stringify(v);
    else out[k] = String(v);
  }
  return out;
}

/** The shape's handle: names the caller's shape of this table, and the change id it was started at. */
function handleOf(userId: string, shape: ShapeName, epoch: number): string {
  return `${shapeKey(userId, shape)}-${epoch}`;
}
function shapeKey(userId: string, shape: ShapeName): string {
  return `${shape}-${crypto.createHash('sha256').update(`${userId}|${shape}`).digest('hex').slice(0, 16)}`;
}

/** Electric's cursor: the number of the current interval, never the one the client sent (so a cache never answers a live request twice). */
function nextCursor(sent: string | undefined): string {
  const now = Math.floor(Date.now() / 1000 / CURSOR_INTERVAL_S);
  const prev = Number(sent);
  return String(Number.isFinite(prev) && prev >= now ? prev + 1 : now);
}

type Message =
  | { key: string; value: Record<string, string | null>; headers: Record<string, unknown> }
  | { headers: { control: string; global_last_seen_lsn?: string } };

function rowMessages(shape: ShapeName, changes: readonly ShapeChange[]): Message[] {
  return changes.map((c, i) => {
    const headers: Record<string, unknown> = { operation: c.operation, relation: ['sync', shape] };
    if (c.change_id !== null && c.change_id !== undefined) {
      headers.lsn = c.change_id;
      headers.op_position = i;
      if (changes[i + 1]?.change_id !== c.change_id) headers.last = true;
    }
    return { key: `"sync"."${shape}"/"${c.id}"`, value: encodeRow(shape, c.value ?? { id: c.id }), headers };
  });
}

const upToDate = (head: number): Message => ({ headers: { control: 'up-to-date', global_last_seen_lsn: String(head) } });

/** Sends a shape answer: the messages as a JSON array, the electric headers, CORS exposing them. */
function send(res: ServerResponse, status: number, headers: Record<string, string>, messages: readonly Message[]): void {
  if (res.writableEnded || res.destroyed) return;
  const exposed = res.getHeader('Access-Control-Expose-Headers');
  if (typeof exposed === 'string') res.setHeader('Access-Control-Expose-Headers', `${exposed}, ${ELECTRIC_HEADERS.join(', ')}`);
  res.statusCode = status;
  res.setHeader('Content-Type', 'application/json; charset=utf-8');
  res.setHeader('Cache-Control', 'private, no-store');
  for (const [k, v] of Object.entries(headers)) res.setHeader(k, v);
  res.end(JSON.stringify(messages));
}

const Offset = z
  .string()
  .regex(/^(-1|now|\d{1,18}_\d{1,9})$/, { message: 'must be -1, now, or an offset the server sent (electric-offset)' })
  .meta({ example: '48213_0' });

const Refused = z.string().optional().describe('Not supported: a request with it is refused (400). A shape is always the whole table of the caller\'s rows with every field.');

const Messages = z
  .array(
    z.object({
      key: z.string().optional().describe('The row\'s key: `"sync"."<table>"/"<id>"`.'),
      value: z.record(z.string(), z.string().nullable()).optional().describe('The row\'s fields as text, parsed by the client with the electric-schema header into the REST object.'),
      headers: z
        .object({
          operation: z.enum(['insert', 'update', 'delete']).optional().describe('On a row message: what happened to the row (the SSE feed\'s `__sync_meta.operation` for the same change).'),
          control: z.enum(['up-to-date', 'must-refetch']).optional().describe('On a control message: `up-to-date` (the shape is current) or `must-refetch` (start again from offset -1).'),
          lsn: z.string().optional().describe('The change id of the change that made this message.'),
          op_position: z.number().int().optional().describe('The position of this message within its change.'),
          last: z.boolean().optional().describe('True on the last message of a change.'),
          relation: z.array(z.string()).optional().describe('The schema and table of the row: `["sync", "<table>"]`.'),
          global_last_seen_lsn: z.string().optional().describe('On up-to-date: the change id the shape is now current with.'),
        })
        .describe('An operation (a row message) or a control message.'),
    }),
  )
  .describe('Shape log messages: row messages (insert, update, delete) then an `up-to-date` control message; or `must-refetch` alone (409).');

export const syncRoutes = [
  defineRoute({
    method: 'get',
    path: '/sync/v1/shape',
    summary: "A shape of the caller's data (profile, hats, communities, events, checkins, tasks, deals, connections) in ElectricSQL's HTTP shape protocol.",
    description:
      "ElectricSQL's HTTP shape protocol (docs/sync.md), as `@electric-sql/client` and PGlite's `syncShapeToTable` speak it. `offset=-1` answers the snapshot (every row as an insert), `offset=now` nothing at the head, an offset with its `handle` what changed since, and `live=true` holds the request until something changes. Each row is the object REST answers for it, its key `id`. Response headers: `electric-handle`, `electric-offset`, `electric-schema`, `electric-up-to-date`, `electric-cursor` (live). A handle that is not the caller's shape, or an offset older than the change log keeps, is 409 with `must-refetch` and a new handle: start again from `offset=-1`.",
    limits: [`A live request is answered within ${LIVE_WAIT_MS / 1000} s, with nothing new if nothing changed.`, '`where`, `columns`, `params` and subset snapshots are not supported (400).'],
    auth: 'user',
    query: z.object({
      table: z.enum(SHAPE_NAMES).describe('The shape: one table of the caller\'s data.'),
      offset: Offset.describe('-1 (the snapshot), now (nothing, at the head), or the electric-offset of the last answer.'),
      handle: z.string().max(100).optional().describe('The electric-handle of the shape (required with an offset other than -1 and now).').meta({ example: 'tasks-4f9a0c2b7d1e8a63-48213' }),
      live: z.enum(['true', 'false']).optional().describe('true: wait for a change (long-poll).'),
      cursor: z.string().max(40).optional().describe('The electric-cursor of the last live answer.'),
      log: z.enum(['full', 'changes_only']).optional().describe('changes_only: no snapshot; offset -1 answers like now.'),
      replica: z.enum(['default', 'full']).optional().describe('Accepted; every message carries the whole row either way.'),
      expired_handle: z.string().max(100).optional().describe('Sent by the client after a 409; ignored.'),
      'cache-buster': z.string().max(100).optional().describe('Sent by the client to bypass caches; ignored.'),
      where: Refused,
      columns: Refused,
      live_sse: Refused,
      experimental_live_sse: Refused,
      subset__where: Refused,
      subset__limit: Refused,
      subset__offset: Refused,
      subset__order_by: Refused,
    }),
    responses: {
      200: content('application/json', 'Shape log messages, with the electric-* headers.', Messages),
      400: errors('bad_request'),
      409: content('application/json', '`[{"headers":{"control":"must-refetch"}}]` with a new electric-handle: start again from offset -1.', Messages),
      503: errors('service_unavailable'),
    },
    async handler({ query, user, db, services }) {
      const refused = (['where', 'columns', 'live_sse', 'experimental_live_sse', 'subset__where', 'subset__limit', 'subset__offset', 'subset__order_by'] as const).filter(
        (p) => query[p] !== undefined,
      );
      if (refused.length > 0) {
        throw new HttpError(400, 'bad_request', `${refused.join(', ')}: not supported; a shape is the whole table of your rows with every field (docs/sync.md)`);
      }
      const shape = query.table;
      const me = user!.sub;
      const publicUrl = services.publicUrl;
      const hub = services.realtime;
      const schema = SCHEMA_HEADER[shape];
      const gone = (head: number) => {
        const handle = handleOf(me, shape, head);
        return {
          status: 409,
          stream: (res: ServerResponse) =>
            send(res, 409, { 'electric-handle': handle, 'electric-offset': '-1', 'electric-schema': schema }, [{ headers: { control: 'must-refetch' } }]),
        };
      };

      // The snapshot (or, with log=changes_only, nothing) and offset=now.
      if (query.offset === '-1' || query.offset === 'now') {
        const rows = await db((tx) =>
          query.offset === '-1' && query.log !== 'changes_only'
            ? tx<{ head: string; id: string | null; value: Record<string, unknown> | null }[]>`
                select head::text, id::text, value from api.sync_snapshot(${shape}, ${publicUrl})`
            : tx<{ head: string; id: null; value: null }[]>`select head::text, null as id, null as value from private.change_log_position()`,
        );
        const head = Number(rows[0]?.head ?? 0);
        const changes: ShapeChange[] = rows.filter((r) => r.id !== null).map((r) => ({ change_id: null as unknown as string, operation: 'insert', id: r.id, value: r.value }));
        const headers = {
          'electric-handle': handleOf(me, shape, head),
          'electric-offset': `${head}_0`,
          'electric-schema': schema,
          'electric-up-to-date': '',
        };
        return { status: 200, stream: (res) => send(res, 200, headers, [...rowMessages(shape, changes), upToDate(head)]) };
      }

      // After an offset: the handle must be this caller's shape of this table.
      const after = Number(query.offset.split('_')[0]);
      if (!query.handle) throw new HttpError(400, 'bad_request', 'handle: required with an offset other than -1 and now');
      if (!query.handle.startsWith(`${shapeKey(me, shape)}-`)) return gone(hub.knownHead);
      const handle = query.handle;
      const answer = (head: number, changes: readonly ShapeChange[], live: boolean) => {
        const headers: Record<string, string> = {
          'electric-handle': handle,
          'electric-offset': `${head}_0`,
          'electric-schema': schema,
          'electric-up-to-date': '',
        };
        if (live) headers['electric-cursor'] = nextCursor(query.cursor);
        return (res: ServerResponse) => send(res, 200, headers, [...rowMessages(shape, changes), upToDate(head)]);
      };

      if (query.live !== 'true') {
        // Catching up: one read as the caller.
        let rows: ShapeChange[];
        try {
          rows = await db((tx) => tx<ShapeChange[]>`select change_id::text, operation, id::text, value from api.sync_changes(${shape}, ${after}, ${publicUrl})`);
        } catch (err) {
          const pruned = (err instanceof postgres.PostgresError && err.code === 'PT410') || (err instanceof HttpError && err.status === 410);
          if (pruned) return gone(hub.knownHead);
          throw err;
        }
        const head = Number(rows.find((r) => r.operation === 'head')?.change_id ?? after);
        return { status: 200, stream: answer(head, rows.filter((r) => r.operation !== 'head'), false) };
      }

      // Live: wait in the shape hub (no database connection while waiting).
      if (!hub.accepting) throw new HttpError(503, 'service_unavailable', 'live shapes are not available now, try again');
      const shapes = shapesOf(hub, () => new ShapeHub(services.sql, hub, { publicUrl, statementTimeoutMs: services.statementTimeoutMs, maxConcurrentReads: hub.config.queryConcurrency }, hub.logger));
      return {
        status: 200,
        stream: (res) => {
          const gone409 = gone(hub.knownHead);
          const aborter = new AbortController();
          res.on('close', () => aborter.abort());
          void shapes.wait(shape, me, user!, after, LIVE_WAIT_MS, aborter.signal).then((result) => {
            if (result === 'gone') gone409.stream(res);
            else answer(result.head, result.changes, true)(res);
          });
        },
      };
    },
  }),
];

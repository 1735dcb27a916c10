// Connections (docs/api.md#connections): the stored record, as listed there.
// Row-level security makes another user's connection invisible (404); the
// hat, event and target-node rules are SQL (api.connection_*).
import { z } from 'zod';
import { LIMITS } from '../core/limits.ts';
import { defineRoute } from '../http/route.ts';
import { Id as IdOut } from '../http/responses.ts';
import { DateTime, errors, succeeded } from '../http/responses.ts';

const Id = z.guid({ message: 'must be a uuid' });
const Strength = z.enum(['weak', 'medium', 'strong']);
const Tags = z.array(z.string().trim().min(1, { message: 'must not be empty' }).max(50)).max(LIMITS.connectionTagsMaxCount);
const Notes = z.string().max(LIMITS.connectionNotesMaxLength);

/** The fields may also come wrapped as {connection: {...}}. */
const unwrap = (value: unknown): unknown => {
  if (value && typeof value === 'object' && !Array.isArray(value)) {
    const inner = (value as { connection?: unknown }).connection;
    if (inner && typeof inner === 'object' && !Array.isArray(inner)) return inner;
  }
  return value;
};

const CreateBody = z.preprocess(
  unwrap,
  z.object({
    target_node_id: Id,
    connection_type: z.enum(['in_event', 'post_event', 'async']).nullish(),
    event_id: Id.nullish(),
    my_hat_id: Id.nullish(),
    their_hat_id: Id.nullish(),
    notes: Notes.nullish(),
    strength: Strength.nullish(),
    tags: Tags.nullish(),
  }),
);

/** Only the keys present change; null clears notes and strength, and empties tags. */
const UpdateBody = z.preprocess(
  (value) => unwrap(value ?? {}),
  z.object({
    notes: Notes.nullable().optional(),
    strength: Strength.nullable().optional(),
    tags: Tags.nullable().optional(),
  }),
);

const IdParam = z.object({ id: Id });

/** The stored connection record (docs/api.md#connections). */
export const Connection = z
  .object({
    id: IdOut,
    owner_node_id: IdOut,
    target_node_id: IdOut,
    connection_type: z.enum(['in_event', 'post_event', 'async']).nullable(),
    event_id: IdOut.nullable(),
    my_hat_id: IdOut.nullable(),
    their_hat_id: IdOut.nullable(),
    notes: z.string().nullable(),
    strength: Strength.nullable(),
    tags: z.array(z.string()).nullable(),
    created_at: DateTime,
    updated_at: DateTime,
  })
  .meta({ id: 'Connection' });

const ConnectionList = succeeded({ connections: z.array(Connection) });
const ConnectionReply = succeeded({ connection: Connection });

export const connectionRoutes = [
  defineRoute({
    method: 'get',
    path: '/api/mobile/connections',
    summary: "The caller's connections, newest first.",
    auth: 'user',
    responses: { 200: ConnectionList },
    async handler({ db }) {
      const connections = await db((tx) => tx`select * from api.connections_list()`);
      return { status: 200, body: { success: true, connections } };
    },
  }),

  defineRoute({
    method: 'get',
    path: '/api/mobile/connections/recent',
    summary: "The caller's 20 most recently created connections, newest first.",
    auth: 'user',
    responses: { 200: ConnectionList },
    async handler({ db }) {
      const connections = await db((tx) => tx`select * from api.connections_recent()`);
      return { status: 200, body: { success: true, connections } };
    },
  }),

  defineRoute({
    method: 'post',
    path: '/api/mobile/connections',
    summary: 'Record a connection with another node, optionally at an event and wearing hats.',
    auth: 'user',
    body: CreateBody,
    invalidStatus: 422,
    responses: { 201: ConnectionReply, 422: errors('invalid_hat', 'invalid_their_hat', 'user_node_not_found', 'target_node_not_found', 'event_not_found') },
    async handler({ body, db }) {
      const [connection] = await db(
        (tx) => tx`
          select * from api.connection_create(
            ${body.target_node_id}, ${body.connection_type ?? null}, ${body.event_id ?? null},
            ${body.my_hat_id ?? null}, ${body.their_hat_id ?? null}, ${body.notes ?? null},
            ${body.strength ?? null}, ${body.tags ?? null}::text[])`,
      );
      return { status: 201, body: { success: true, connection } };
    },
  }),

  defineRoute({
    method: 'get',
    path: '/api/mobile/connections/:id',
    summary: 'One of the caller\'s connections.',
    auth: 'user',
    params: IdParam,
    invalidParamsStatus: 404,
    responses: { 200: ConnectionReply, 404: errors('connection_not_found') },
    async handler({ params, db }) {
      const [connection] = await db((tx) => tx`select * from api.connection_get(${params.id})`);
      return { status: 200, body: { success: true, connection } };
    },
  }),

  defineRoute({
    method: 'patch',
    path: '/api/mobile/connections/:id',
    summary: 'Change notes, strength and tags of one of the caller\'s connections.',
    auth: 'user',
    params: IdParam,
    body: UpdateBody,
    invalidStatus: 422,
    invalidParamsStatus: 404,
    responses: { 200: ConnectionReply, 404: errors('connection_not_found') },
    async handler({ params, body, db }) {
      const [connection] = await db(
        (tx) => tx`select * from api.connection_update(${params.id}, ${tx.json(body)})`,
      );
      return { status: 200, body: { success: true, connection } };
    },
  }),
];

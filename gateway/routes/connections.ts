// Connections (docs/api/mobile.md#connections): the stored record, as listed there.
// Row-level security makes another user's connection invisible (404); the
// hat, event and target-node rules are SQL (api.connection_*).
import { z } from 'zod';
import { LIMITS } from '../core/web/limits.ts';
import { defineRoute } from '../http/route.ts';
import { Id as IdOut } from '../http/responses.ts';
import { DateTime, errors, succeeded } from '../http/responses.ts';
import { IfMatchHeaders, ifMatchTags, versioned, type Versioned } from '../http/versions.ts';

const Id = z.guid({ message: 'must be a uuid' });
const Strength = z.enum(['weak', 'medium', 'strong']);
const ConnectionType = z.enum(['in_event', 'post_event', 'async']);
const Tags = z
  .array(z.string().trim().min(1, { message: 'must not be empty' }).max(50))
  .max(LIMITS.connectionTagsMaxCount)
  .describe(`Words to find the connection by (at most ${LIMITS.connectionTagsMaxCount}, each at most 50 characters).`)
  .meta({ example: ['design', 'climbing'] });
const Notes = z
  .string()
  .max(LIMITS.connectionNotesMaxLength)
  .describe('Private notes about the person.')
  .meta({ example: 'Met at the bouldering night; works on accessible maps. Send her the talk recording.' });

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
  z
    .object({
      target_node_id: Id.describe("The other person's node id (their profile's node_id, or a member id of a community)."),
      connection_type: ConnectionType.nullish().describe('How you met: at an event, after one, or otherwise (default: `in_event` with an event, else `async`).'),
      event_id: Id.nullish().describe('The event where you met.'),
      my_hat_id: Id.nullish().describe('The hat you wore (one of yours).'),
      their_hat_id: Id.nullish().describe('The hat they wore (one of theirs).'),
      notes: Notes.nullish(),
      strength: Strength.nullish().describe('How strong the connection is.'),
      tags: Tags.nullish(),
    })
    .describe('The connection; it may also come wrapped as `{"connection": {...}}`.'),
);

/** Only the keys present change; null clears notes and strength, and empties tags. */
const UpdateBody = z.preprocess(
  (value) => unwrap(value ?? {}),
  z
    .object({
      notes: Notes.nullable().optional().describe('The new notes; null clears them.'),
      strength: Strength.nullable().optional().describe('The new strength; null clears it.'),
      tags: Tags.nullable().optional().describe('The new tags; null empties them.'),
    })
    .describe('Only the fields given change; the body may also come wrapped as `{"connection": {...}}`.')
    .meta({ example: { strength: 'strong', tags: ['design', 'mentor'] } }),
);

const IdParam = z.object({ id: Id.describe("The connection's id.") });

/** The stored connection record (docs/api/mobile.md#connections). */
export const Connection = z
  .object({
    id: IdOut.describe("The connection's id."),
    owner_node_id: IdOut.describe("The caller's node."),
    target_node_id: IdOut.describe("The other person's node."),
    connection_type: ConnectionType.nullable().describe('How they met, or null.'),
    event_id: IdOut.nullable().describe('The event where they met, or null.'),
    my_hat_id: IdOut.nullable().describe("The caller's hat, or null."),
    their_hat_id: IdOut.nullable().describe("The other person's hat, or null."),
    notes: z.string().nullable().describe('Private notes, or null.').meta({ example: 'Works on accessible maps.' }),
    strength: Strength.nullable().describe('How strong the connection is, or null.'),
    tags: z.array(z.string()).nullable().describe('Its tags, or null.').meta({ example: ['design'] }),
    created_at: DateTime.describe('When it was recorded.'),
    updated_at: DateTime.describe('When it last changed.'),
  })
  .meta({ id: 'Connection', description: 'A connection the caller recorded with another member.' });

const ConnectionList = succeeded({ connections: z.array(Connection).describe('The connections, newest first.') });
const ConnectionReply = succeeded({ connection: Connection });

export const connectionRoutes = [
  defineRoute({
    method: 'get',
    path: '/api/mobile/connections',
    summary: "The caller's connections, newest first.",
    description:
      'The connections the caller recorded, newest first.',
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
    description:
      "The caller's 20 most recently recorded connections, newest first.",
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
    description:
      "Records a connection with another member's node, optionally at an event and with the hats both wore. `connection_type` defaults to `in_event` with an event, else `async`. An unknown node or event, a `my_hat_id` that is not the caller's or a `their_hat_id` that is not the other person's is 422.",
    limits: [`\`notes\` at most ${LIMITS.connectionNotesMaxLength} characters; at most ${LIMITS.connectionTagsMaxCount} tags.`],
    auth: 'user',
    body: CreateBody,
    invalidStatus: 422,
    responses: { 201: ConnectionReply, 422: errors('invalid_hat', 'invalid_their_hat', 'user_node_not_found', 'target_node_not_found', 'event_not_found') },
    etag: true,
    async handler({ body, db }) {
      const [row] = await db(
        (tx) => tx<Versioned[]>`
          select c.*, api.etag(c.updated_at) as etag
            from api.connection_create(
              ${body.target_node_id}, ${body.connection_type ?? null}, ${body.event_id ?? null},
              ${body.my_hat_id ?? null}, ${body.their_hat_id ?? null}, ${body.notes ?? null},
              ${body.strength ?? null}, ${body.tags ?? null}::text[]) c`,
      );
      const { object: connection, headers } = versioned(row!);
      return { status: 201, body: { success: true, connection }, headers };
    },
  }),

  defineRoute({
    method: 'get',
    path: '/api/mobile/connections/:id',
    summary: 'One of the caller\'s connections.',
    description:
      "One of the caller's connections; another user's is 404.",
    auth: 'user',
    params: IdParam,
    invalidParamsStatus: 404,
    responses: { 200: ConnectionReply, 404: errors('connection_not_found') },
    etag: true,
    async handler({ params, db }) {
      const [row] = await db((tx) => tx<Versioned[]>`select c.*, api.etag(c.updated_at) as etag from api.connection_get(${params.id}) c`);
      const { object: connection, headers } = versioned(row!);
      return { status: 200, body: { success: true, connection }, headers };
    },
  }),

  defineRoute({
    method: 'patch',
    path: '/api/mobile/connections/:id',
    summary: 'Change notes, strength and tags of one of the caller\'s connections.',
    description:
      "Changes the notes, strength and tags of one of the caller's connections: only the fields given; null clears one.",
    auth: 'user',
    params: IdParam,
    body: UpdateBody,
    headers: IfMatchHeaders,
    invalidStatus: 422,
    invalidParamsStatus: 404,
    responses: { 200: ConnectionReply, 404: errors('connection_not_found'), 412: errors('precondition_failed') },
    etag: true,
    async handler({ params, body, headers: { 'if-match': ifMatch }, db }) {
      const [row] = await db(
        (tx) => tx<Versioned[]>`
          select c.*, api.etag(c.updated_at) as etag
            from api.connection_update(${params.id}, ${tx.json(body)}, ${ifMatchTags(ifMatch)}::text[]) c`,
      );
      const { object: connection, headers } = versioned(row!);
      return { status: 200, body: { success: true, connection }, headers };
    },
  }),
];

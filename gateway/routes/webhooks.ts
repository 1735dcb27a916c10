// Outbound webhooks: a community's endpoints, managed with the platform
// endpoints' credentials (a manager's access token or personal API token, or
// a community-scoped API token of that community: private.platform_authorize).
// Who may, what an endpoint may hold, the deliveries and their replays are
// SQL (api.webhook_*); the address rule (https, allowed ports, public
// addresses only) is gateway/jobs/webhook-targets.ts, the same the worker
// applies at each send.
// Deliveries are sent by the job worker (gateway/jobs/webhooks.ts).
import type postgres from 'postgres';
import { z } from 'zod';
import { defineRoute, type Services } from '../http/route.ts';
import { HttpError } from '../core/web/errors.ts';
import { jsonObjectWith } from '../core/web/json.ts';
import { DateTime, errors, Id, noContent, Pagination, succeeded } from '../http/responses.ts';
import { QueryInteger, Uuid } from '../core/web/schemas.ts';
import { LIMITS } from '../core/web/limits.ts';
import { DEFAULT_WEBHOOK_PORTS } from '../core/process/config.ts';
import { webhookUrlProblem } from '../jobs/webhook-targets.ts';

export const WEBHOOK_EVENT_TYPES = [
  'event.created',
  'event.updated',
  'event.deleted',
  'attendee.registered',
  'checkin.created',
  'member.joined',
  'member.left',
  'member.deleted',
] as const;

/** What a delivery's type may be besides the subscribable ones: webhook.ping, sent on request only. */
const DELIVERY_EVENT_TYPES = [...WEBHOOK_EVENT_TYPES, 'webhook.ping'] as const;
export const DELIVERY_STATUSES = ['pending', 'succeeded', 'retrying', 'failed'] as const;

const EventType = z
  .enum(WEBHOOK_EVENT_TYPES, { message: `must be one of ${WEBHOOK_EVENT_TYPES.join(', ')}` })
  .describe(
    'An event type: `event.created`, `event.updated` (only when the Event object changed), `event.deleted`, ' +
      '`attendee.registered`, `checkin.created` (event check-ins), `member.joined`, `member.left`, `member.deleted` (a member deleted their ' +
      'account: ids only).',
  );
const Events = z.array(EventType).min(1, { message: 'must name at least one event type' }).max(20);
const WebhookUrl = z.string().trim().min(1).max(2000);
const Description = z.string().trim().max(500);

// Examples: one endpoint, its secret, and a delivery to it (a coherent set).
const EXAMPLE_WEBHOOK_ID = '07207504-b13c-48d0-8de8-3cad6141f360';
const EXAMPLE_COMMUNITY_ID = '5f0c8a9e-3b1d-4c62-9a7e-2d4b6f8a1c03';
const EXAMPLE_URL = 'https://hooks.example.com/community';
const EXAMPLE_SECRET = 'whsec_q9qyaTAmmG28oOE8/XP3ihwjrUIp5E7II6q2iKOEtKc=';
const EXAMPLE_EVENTS = ['event.created', 'event.updated', 'member.joined'];
const EXAMPLE_DESCRIPTION = 'Sync events and members to our CRM';

const UrlField = WebhookUrl.describe(
  'Where deliveries are POSTed: an https URL without user info, on port 443 or 8443 (the service may allow others), whose host is ' +
    'public (a literal private, loopback, link-local or special-purpose address, or another port, is 422 `invalid_url`; a name is ' +
    'resolved and checked again at every send). At most 2,000 characters.',
).meta({ example: EXAMPLE_URL });
const EventsField = Events.describe('The event types to deliver (at least one; kept sorted, without duplicates).').meta({ example: EXAMPLE_EVENTS });
const DescriptionField = Description.describe('A note for the managers: what the endpoint is for (at most 500 characters).').meta({
  example: EXAMPLE_DESCRIPTION,
});

const CreateBody = z
  .object({
    community_id: Uuid.describe('The community whose changes are delivered (the caller manages it, or the token is scoped to it).'),
    url: UrlField,
    events: EventsField,
    description: DescriptionField.nullish(),
  })
  .meta({ example: { community_id: EXAMPLE_COMMUNITY_ID, url: EXAMPLE_URL, events: EXAMPLE_EVENTS, description: EXAMPLE_DESCRIPTION } });
const UpdateBody = z
  .object({
    url: UrlField.optional().describe('A new URL (the same rule as on registration).'),
    events: EventsField.optional().describe('The event types to deliver from now on (replaces the list).'),
    active: z
      .boolean()
      .optional()
      .describe('false pauses the endpoint (nothing is sent; its pending deliveries fail); true turns it on again, also after the service turned it off.'),
    description: DescriptionField.nullable().optional().describe('A new note; null or an empty string removes it.'),
  })
  .meta({ example: { events: ['event.created', 'event.updated', 'event.deleted'], active: true } });
const ListQuery = z.object({ community_id: Uuid.describe('The community whose endpoints to list.') });
const WebhookPath = z.object({ id: Uuid.describe("The webhook endpoint's id.") });
const DeliveryPath = WebhookPath.extend({ delivery_id: Uuid.describe("The delivery's id (`id` of a delivery).") });

const QueryTime = z.iso.datetime({ offset: true, message: 'must be an ISO 8601 date-time with a time zone' });
const DeliveryPage = z.object({
  limit: QueryInteger(1, LIMITS.pageLimitMax).default(20).describe('How many deliveries a page holds.').meta({ example: 20 }),
  offset: QueryInteger(0, 1_000_000_000).default(0).describe('How many deliveries to skip (0 for the newest).').meta({ example: 0 }),
  status: z.enum(DELIVERY_STATUSES).optional().describe('Only the deliveries of this status.').meta({ example: 'failed' }),
  since: QueryTime.optional().describe('Only the deliveries queued at or after this time (ISO 8601).').meta({ example: '2026-05-14T00:00:00Z' }),
  until: QueryTime.optional().describe('Only the deliveries queued before this time (ISO 8601).').meta({ example: '2026-05-15T00:00:00Z' }),
});
const RecoverBody = z
  .object({
    since: DateTime.describe('Send again every failed delivery queued at or after this time (ISO 8601).').meta({ example: '2026-05-14T00:00:00Z' }),
    until: DateTime.optional().describe('... and before this time; absent: up to now.').meta({ example: '2026-05-15T00:00:00Z' }),
  })
  .meta({ example: { since: '2026-05-14T00:00:00Z' } });
const Recovered = z
  .object({
    recovered: z.number().int().describe('How many failed deliveries were queued again (at most 10,000 an hour per endpoint).').meta({ example: 42 }),
    remaining: z
      .number()
      .int()
      .describe('How many failed deliveries of the range are left (past the 10,000): call again while it is above 0.')
      .meta({ example: 0 }),
  })
  .describe('What was queued again.');

const WebhookFields = z.object({
  id: Id.describe("The endpoint's id.").meta({ example: EXAMPLE_WEBHOOK_ID }),
  community_id: Id.describe('The community whose changes it receives.'),
  url: z.string().describe('Where deliveries are POSTed.').meta({ example: EXAMPLE_URL }),
  events: z.array(EventType).describe('The event types it receives, sorted.').meta({ example: EXAMPLE_EVENTS }),
  active: z
    .boolean()
    .describe('Whether deliveries are sent: false when a manager paused it, or when its last 20 deliveries all failed (the managers are e-mailed).'),
  description: z.string().nullable().describe("The managers' note, or null.").meta({ example: EXAMPLE_DESCRIPTION }),
  backoff_until: DateTime.nullable().describe(
    'While the endpoint keeps failing (from its third failed attempt in a row): nothing is sent to it before this time; the pause ' +
      'doubles with each further failure, up to an hour. A success, a ping or a replay ends it. Null when it is not backing off.',
  ),
  created_at: DateTime.describe('When it was registered.'),
});
export const Webhook = WebhookFields.meta({ id: 'Webhook', description: "A community's webhook endpoint (without its secret)." });
const WebhookWithSecret = WebhookFields.extend({
  secret: z
    .string()
    .describe(
      'The Standard Webhooks signing secret: whsec_ and the base64 of 32 random bytes. Deliveries carry `webhook-signature: v1,<base64 HMAC-SHA256>` ' +
        'keyed by the decoded bytes; verify with any Standard Webhooks library. Shown only on registration and rotation: keep it.',
    )
    .meta({ example: EXAMPLE_SECRET }),
}).meta({ id: 'WebhookWithSecret', description: 'A webhook endpoint with its signing secret (answered only on registration and rotation).' });

/** An example delivery: a member.joined, delivered at the first attempt. */
const EXAMPLE_DELIVERY = {
  id: 'e7e700f6-244c-4e2c-862b-9af716453bbf',
  message_id: 'msg_e7e700f6244c4e2c862b9af716453bbf',
  webhook_id: 'msg_e7e700f6244c4e2c862b9af716453bbf',
  sequence: 1842,
  event_type: 'member.joined',
  status: 'succeeded',
  attempts: 1,
  last_status_code: 200,
  last_error: null,
  last_response_body: '{"received":true}',
  next_attempt_at: null,
  created_at: '2026-05-14T18:30:00.000Z',
  delivered_at: '2026-05-14T18:30:00.412Z',
  payload: {
    type: 'member.joined',
    timestamp: '2026-05-14T18:30:00.000Z',
    sequence: 1842,
    data: {
      community_id: EXAMPLE_COMMUNITY_ID,
      member: { id: 'cc857732-834a-4dbf-a579-6e25bafc61ad', role: 'member', joined_at: '2026-05-14T18:30:00.000Z', name: 'Grace Hopper' },
    },
  },
};

/** A ping just queued (POST .../ping answers it). */
const EXAMPLE_PING = {
  id: '69beb977-086b-4221-b8f3-f519cf4438d2',
  message_id: 'msg_69beb977086b4221b8f3f519cf4438d2',
  webhook_id: 'msg_69beb977086b4221b8f3f519cf4438d2',
  sequence: 1843,
  event_type: 'webhook.ping',
  status: 'pending',
  attempts: 0,
  last_status_code: null,
  last_error: null,
  last_response_body: null,
  next_attempt_at: '2026-05-14T18:31:00.000Z',
  created_at: '2026-05-14T18:31:00.000Z',
  delivered_at: null,
  payload: {
    type: 'webhook.ping',
    timestamp: '2026-05-14T18:31:00.000Z',
    sequence: 1843,
    data: { endpoint_id: EXAMPLE_WEBHOOK_ID, community_id: EXAMPLE_COMMUNITY_ID },
  },
};

const DeliveryEventType = z
  .enum(DELIVERY_EVENT_TYPES)
  .describe('The event type delivered: one the endpoint subscribes to, or `webhook.ping` (sent on request only).');

const Delivery = z
  .object({
    id: Id.describe("The delivery's id (replay takes it)."),
    message_id: z
      .string()
      .describe('The message id, sent as the `webhook-id` header: `msg_` and the id without dashes, the same on every attempt and replay (deduplicate on it).')
      .meta({ example: 'msg_e7e700f6244c4e2c862b9af716453bbf' }),
    webhook_id: z
      .string()
      .describe('Deprecated: the same as `message_id` (the name read like the endpoint\'s id). It will be removed; read `message_id`.')
      .meta({ example: 'msg_e7e700f6244c4e2c862b9af716453bbf', deprecated: true }),
    sequence: z
      .number()
      .int()
      .nullable()
      .describe(
        'The delivery\'s number, also sent as `sequence` in the body: it grows in the order deliveries are queued, so of two deliveries about the same object (an event, a membership) the higher is the later change. Not consecutive. Null for deliveries queued before numbers were given.',
      )
      .meta({ example: 1842 }),
    event_type: DeliveryEventType,
    status: z
      .enum(DELIVERY_STATUSES)
      .describe(
        '`pending`: not tried yet (or replayed); `succeeded`: a 2xx answer; `retrying`: an attempt failed and another is due at next_attempt_at; ' +
          '`failed`: every attempt failed (replay sends it again).',
      ),
    attempts: z.number().int().min(0).describe('How many attempts were made (replays included).').meta({ example: 1 }),
    last_status_code: z.number().int().nullable().describe("The HTTP status of the last attempt's answer; null before any, or with no answer.").meta({ example: 200 }),
    last_error: z
      .string()
      .nullable()
      .describe(
        'Why the last attempt failed: `HTTP <status>` when the receiver answered otherwise than 2xx, else `no answer from the endpoint` ' +
          '(whatever the reason: no connection within 3 s, a connection or TLS error, no answer within 10 s, or a target the address ' +
          'and port rules refuse); `endpoint inactive` when it was off. Null when it succeeded or before any.',
      )
      .meta({ example: 'HTTP 503' }),
    last_response_body: z
      .string()
      .nullable()
      .describe("The receiver's answer to the last attempt, its first 1 KB; null before any, or with no answer.")
      .meta({ example: '{"received":true}' }),
    next_attempt_at: DateTime.nullable().describe('When the next attempt is due; null once it succeeded or failed.'),
    created_at: DateTime.describe('When the change happened (the delivery was queued).'),
    delivered_at: DateTime.nullable().describe('When a receiver accepted it (2xx); null until then.'),
    payload: z
      .object({
        type: DeliveryEventType.describe('The event type (the same as event_type).'),
        timestamp: DateTime.describe('When the change happened.'),
        sequence: z
          .number()
          .int()
          .optional()
          .describe('The delivery\'s number (`sequence` of the delivery): deliveries may arrive out of order under retries; of two about the same object, the higher number is the later change.')
          .meta({ example: 1842 }),
        data: z
          .record(z.string(), z.unknown())
          .describe(
            'What changed. `event.*`: the Event object as the community\'s managers see it; `member.*`: {community_id, member: {id, role, joined_at, name}} ' +
              '(+ left_at); `attendee.registered`: {event_id, event_node_id, email, external_platform, registered_at}; `checkin.created`: ' +
              '{id, type, event_id, event_node_id, visibility, checked_in_at, member} (member only for a public check-in); `webhook.ping`: {endpoint_id, community_id}.',
          ),
      })
      .describe('The JSON body sent, exactly: {type, timestamp, sequence, data}.'),
  })
  .meta({
    id: 'WebhookDelivery',
    description: 'One message to one endpoint, with the outcome of its last attempt.',
    example: EXAMPLE_DELIVERY,
  });

const FORBIDDEN = errors('community_scope_violation', 'not_community_manager');
const NOT_FOUND = errors('webhook_not_found');
const INVALID = errors('validation_error', 'invalid_url', 'unknown_event_type');

/** 422 invalid_url unless the address rule allows the URL (the same rule as at every send). */
function checkUrl(url: string | undefined, services: Services): void {
  if (url === undefined) return;
  const problem = webhookUrlProblem(url, {
    allowPrivate: services.webhooks?.allowPrivateTargets ?? false,
    allowedPorts: services.webhooks?.allowedPorts ?? DEFAULT_WEBHOOK_PORTS,
  });
  if (problem) throw new HttpError(422, 'invalid_url', problem);
}

interface Row {
  data: unknown;
}

export const webhookRoutes = [
  defineRoute({
    method: 'post',
    path: '/api/v1/platform/webhooks',
    summary:
      "Register a webhook endpoint of a community (at most 20): the events given are POSTed to the URL, signed per Standard Webhooks with the returned secret (shown only here).",
    description:
      "Registers a webhook endpoint of a community: every change of the event types given is POSTed to the URL as {type, timestamp, data}, " +
      'signed per Standard Webhooks (`webhook-id`, `webhook-timestamp`, `webhook-signature` headers) with the secret answered here, and only here: keep it. ' +
      'A 2xx answer is success; anything else is retried 7 times over about 28 hours, then the delivery has failed. Called by a manager of the community, or with an API token scoped to it.',
    limits: ['At most 20 webhook endpoints a community (422 `too_many_webhooks`).'],
    auth: 'user',
    body: CreateBody,
    invalidStatus: 422,
    responses: {
      201: succeeded({ data: WebhookWithSecret }),
      403: FORBIDDEN,
      422: errors('validation_error', 'invalid_url', 'unknown_event_type', 'too_many_webhooks'),
    },
    async handler({ body, db, services }) {
      checkUrl(body.url, services);
      const [row] = await db(
        (tx) => tx<Row[]>`
          select api.webhook_create(${body.community_id}, ${body.url}, ${body.events}::text[], ${body.description ?? null}) as data`,
      );
      return { status: 201, body: { success: true, data: row!.data } };
    },
  }),

  defineRoute({
    method: 'get',
    path: '/api/v1/platform/webhooks',
    summary: "A community's webhook endpoints (without secrets).",
    description: "Lists a community's webhook endpoints, oldest first, without their secrets. Called by a manager of the community, or with an API token scoped to it.",
    auth: 'user',
    query: ListQuery,
    invalidStatus: 422,
    responses: { 200: succeeded({ data: z.array(Webhook).describe('The endpoints, oldest first.') }), 403: FORBIDDEN, 422: errors('validation_error') },
    async handler({ query, db }) {
      const [row] = await db((tx) => tx<Row[]>`select api.webhooks_list(${query.community_id}) as data`);
      return { status: 200, body: { success: true, data: row!.data } };
    },
  }),

  defineRoute({
    method: 'patch',
    path: '/api/v1/platform/webhooks/:id',
    summary: 'Change a webhook endpoint: url, events, active (false pauses it; true turns it on again) and description (the keys given).',
    description:
      'Changes the keys given of a webhook endpoint: url, events, active and description. `active: false` pauses it; `active: true` turns it on again, ' +
      'also after the service turned it off (its last 20 deliveries all failed); replay what it missed afterwards.',
    auth: 'user',
    params: WebhookPath,
    body: UpdateBody,
    invalidStatus: 422,
    invalidParamsStatus: 404,
    responses: { 200: succeeded({ data: Webhook }), 403: FORBIDDEN, 404: NOT_FOUND, 422: INVALID },
    async handler({ params, body, db, services }) {
      checkUrl(body.url, services);
      const [row] = await db((tx) => tx<Row[]>`select api.webhook_update(${params.id}, ${tx.json(body as postgres.JSONValue)}::jsonb) as data`);
      return { status: 200, body: { success: true, data: row!.data } };
    },
  }),

  defineRoute({
    method: 'delete',
    path: '/api/v1/platform/webhooks/:id',
    summary: 'Delete a webhook endpoint and its deliveries.',
    description: 'Deletes a webhook endpoint with its deliveries: nothing more is sent to it, queued deliveries included.',
    auth: 'user',
    params: WebhookPath,
    invalidParamsStatus: 404,
    responses: { 204: noContent('Deleted.'), 403: FORBIDDEN, 404: NOT_FOUND },
    async handler({ params, db }) {
      await db((tx) => tx`select api.webhook_delete(${params.id})`);
      return { status: 204 };
    },
  }),

  defineRoute({
    method: 'post',
    path: '/api/v1/platform/webhooks/:id/rotate_secret',
    summary: 'A new signing secret (returned); the previous one keeps signing too, as a second signature, for 24 hours.',
    description:
      'Makes a new signing secret and answers it (only here). For 24 hours every delivery carries two signatures, one per secret, ' +
      'so the receiver can switch to the new secret without missing a delivery.',
    auth: 'user',
    params: WebhookPath,
    invalidParamsStatus: 404,
    responses: { 200: succeeded({ data: WebhookWithSecret }), 403: FORBIDDEN, 404: NOT_FOUND },
    async handler({ params, db }) {
      const [row] = await db((tx) => tx<Row[]>`select api.webhook_rotate_secret(${params.id}) as data`);
      return { status: 200, body: { success: true, data: row!.data } };
    },
  }),

  defineRoute({
    method: 'post',
    path: '/api/v1/platform/webhooks/:id/ping',
    summary: 'Send a webhook.ping event to the endpoint (202: queued; see its deliveries).',
    description:
      'Queues a `webhook.ping` delivery to the endpoint, {endpoint_id, community_id} as its data, to check that the receiver answers and verifies signatures. ' +
      '202 with the delivery; its outcome shows in the deliveries. 409 `webhook_inactive` when the endpoint is off.',
    auth: 'user',
    params: WebhookPath,
    invalidParamsStatus: 404,
    responses: {
      202: succeeded({ data: Delivery }).meta({ example: { success: true, data: EXAMPLE_PING } }),
      403: FORBIDDEN,
      404: NOT_FOUND,
      409: errors('webhook_inactive'),
    },
    async handler({ params, db }) {
      const [row] = await db((tx) => tx<Row[]>`select api.webhook_ping(${params.id}) as data`);
      return { status: 202, body: { success: true, data: row!.data } };
    },
  }),

  defineRoute({
    method: 'get',
    path: '/api/v1/platform/webhooks/:id/deliveries',
    summary: "The endpoint's deliveries, newest first (filtered by status and time when asked): status (pending, succeeded, retrying, failed), attempts, last answer, payload.",
    description:
      "The endpoint's deliveries, newest first, a page at a time: each with its status, attempts, the last answer (status, error, the first 1 KB of the body), " +
      'when the next attempt is due and the payload sent. `status`, `since` and `until` keep only the deliveries of that status, queued in that time range (e.g. `?status=failed&since=...`). ' +
      'Finished deliveries (succeeded, failed) are pruned 30 days after they were queued.',
    auth: 'user',
    params: WebhookPath,
    query: DeliveryPage,
    invalidStatus: 422,
    invalidParamsStatus: 404,
    responses: {
      200: succeeded({ data: z.array(Delivery).describe('The deliveries, newest first.'), pagination: Pagination }),
      400: errors('invalid_limit', 'invalid_offset'),
      403: FORBIDDEN,
      404: NOT_FOUND,
      422: errors('validation_error'),
    },
    async handler({ params, query, db }) {
      const [row] = await db(
        (tx) => tx<{ page: string }[]>`
          select api.webhook_deliveries(${params.id}, ${query.limit}, ${query.offset}, ${query.status ?? null},
                                        ${query.since ?? null}, ${query.until ?? null})::text as page`,
      );
      return { status: 200, json: jsonObjectWith({ success: true }, row!.page) };
    },
  }),

  defineRoute({
    method: 'post',
    path: '/api/v1/platform/webhooks/:id/deliveries/:delivery_id/replay',
    summary: 'Send a delivery again now, as a new attempt with the same webhook-id and body (202: queued).',
    description:
      'Sends a delivery again now, with the same `webhook-id` and body and a fresh round of retries: e.g. what an endpoint missed while it was off. ' +
      '202 with the delivery, `pending` again. 409 `webhook_inactive` when the endpoint is off (turn it on first); 409 `webhook_url_changed` for a delivery ' +
      'queued before the endpoint\'s URL changed (it goes to the URL it was queued for, or nowhere).',
    auth: 'user',
    params: DeliveryPath,
    invalidParamsStatus: 404,
    responses: {
      202: succeeded({ data: Delivery }),
      403: FORBIDDEN,
      404: errors('webhook_not_found', 'delivery_not_found'),
      409: errors('webhook_inactive', 'webhook_url_changed'),
    },
    async handler({ params, db }) {
      const [row] = await db((tx) => tx<Row[]>`select api.webhook_delivery_replay(${params.id}, ${params.delivery_id}) as data`);
      return { status: 202, body: { success: true, data: row!.data } };
    },
  }),

  defineRoute({
    method: 'post',
    path: '/api/v1/platform/webhooks/:id/recover',
    summary: 'Send again every failed delivery queued since a time (202: queued, oldest first), e.g. after the endpoint was turned off.',
    description:
      'Queues again, now, every `failed` delivery of the endpoint queued at or after `since` (and before `until`) for the URL it has now, with the same `webhook-id` and body and a fresh round of retries, ' +
      'oldest first: what an endpoint missed while it was down or turned off, in one call instead of one replay each. It ends a back-off. ' +
      'Deliveries queued before the endpoint\'s URL changed are not sent to the new URL. ' +
      'At most 10,000 a call: `remaining` says how many are left; call again while it is above 0. 409 `webhook_inactive` when the endpoint is off (turn it on first).',
    limits: ['At most 10,000 deliveries an hour per endpoint (`remaining` counts the rest): past it, 429 `rate_limited` with Retry-After.'],
    auth: 'user',
    params: WebhookPath,
    body: RecoverBody,
    invalidStatus: 422,
    invalidParamsStatus: 404,
    responses: {
      202: succeeded({ data: Recovered }),
      403: FORBIDDEN,
      404: NOT_FOUND,
      409: errors('webhook_inactive'),
      422: errors('validation_error'),
      429: errors('rate_limited'),
    },
    async handler({ params, body, db }) {
      const [row] = await db((tx) => tx<Row[]>`select api.webhook_recover(${params.id}, ${body.since}, ${body.until ?? null}) as data`);
      return { status: 202, body: { success: true, data: row!.data } };
    },
  }),
];

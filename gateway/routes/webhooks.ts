// Outbound webhooks: a community's endpoints, managed with the platform
// endpoints' credentials (a manager's access token or personal API token, or
// a community-scoped API token of that community: private.platform_authorize).
// Who may, what an endpoint may hold, the deliveries and their replays are
// SQL (api.webhook_*); the address rule (https, public addresses only) is
// gateway/jobs/webhook-targets.ts, the same the worker applies at each send.
// Deliveries are sent by the job worker (gateway/jobs/webhooks.ts).
import type postgres from 'postgres';
import { z } from 'zod';
import { defineRoute, type Services } from '../http/route.ts';
import { HttpError } from '../core/errors.ts';
import { jsonObjectWith } from '../core/json.ts';
import { DateTime, errors, Id, noContent, Pagination, succeeded } from '../http/responses.ts';
import { Uuid } from '../core/schemas.ts';
import { webhookUrlProblem } from '../jobs/webhook-targets.ts';

export const WEBHOOK_EVENT_TYPES = [
  'event.created',
  'event.updated',
  'event.deleted',
  'attendee.registered',
  'checkin.created',
  'member.joined',
  'member.left',
] as const;

const EventType = z.enum(WEBHOOK_EVENT_TYPES, { message: `must be one of ${WEBHOOK_EVENT_TYPES.join(', ')}` });
const Events = z.array(EventType).min(1, { message: 'must name at least one event type' }).max(20);
const WebhookUrl = z.string().trim().min(1).max(2000);
const Description = z.string().trim().max(500);

const CreateBody = z.object({
  community_id: Uuid,
  url: WebhookUrl.meta({ description: 'https URL of a public address (http and private addresses only with WEBHOOK_ALLOW_PRIVATE_TARGETS=1).' }),
  events: Events,
  description: Description.nullish(),
});
const UpdateBody = z.object({
  url: WebhookUrl.optional(),
  events: Events.optional(),
  active: z.boolean().optional(),
  description: Description.nullable().optional(),
});
const ListQuery = z.object({ community_id: Uuid });
const WebhookPath = z.object({ id: Uuid });
const DeliveryPath = z.object({ id: Uuid, delivery_id: Uuid });

/** A query-string integer: digits only, with a default and bounds. */
const queryInt = (fallback: number, min: number, max: number) =>
  z
    .string()
    .regex(/^\d+$/, { message: 'must be a whole number' })
    .optional()
    .transform((v) => (v === undefined ? fallback : Number(v)))
    .pipe(z.number().int().min(min).max(max));
const DeliveryPage = z.object({ limit: queryInt(20, 1, 100), offset: queryInt(0, 0, 1_000_000_000) });

const Webhook = z
  .object({
    id: Id,
    community_id: Id,
    url: z.string(),
    events: z.array(EventType),
    active: z.boolean(),
    description: z.string().nullable(),
    created_at: DateTime,
  })
  .meta({ id: 'Webhook' });
const WebhookWithSecret = Webhook.extend({
  secret: z.string().meta({ description: 'whsec_ + base64 of 32 random bytes: the Standard Webhooks signing secret. Shown only here.' }),
}).meta({ id: 'WebhookWithSecret' });

const Delivery = z
  .object({
    id: Id,
    webhook_id: z.string().meta({ description: 'The webhook-id header: the same on every attempt and replay.' }),
    event_type: z.string(),
    status: z.enum(['pending', 'succeeded', 'retrying', 'failed']),
    attempts: z.number().int(),
    last_status_code: z.number().int().nullable(),
    last_error: z.string().nullable(),
    last_response_body: z.string().nullable().meta({ description: "The receiver's answer to the last attempt, its first 1 KB." }),
    next_attempt_at: DateTime.nullable(),
    created_at: DateTime,
    delivered_at: DateTime.nullable(),
    payload: z
      .object({ type: z.string(), timestamp: DateTime, data: z.record(z.string(), z.unknown()) })
      .meta({ description: 'The body sent: {type, timestamp, data}.' }),
  })
  .meta({ id: 'WebhookDelivery' });

const FORBIDDEN = errors('forbidden', 'not_community_manager');
const NOT_FOUND = errors('webhook_not_found');
const INVALID = errors('validation_error', 'invalid_url', 'unknown_event_type');

/** 422 invalid_url unless the address rule allows the URL (the same rule as at every send). */
function checkUrl(url: string | undefined, services: Services): void {
  if (url === undefined) return;
  const problem = webhookUrlProblem(url, services.webhooks?.allowPrivateTargets ?? false);
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
    auth: 'user',
    body: CreateBody,
    invalidStatus: 422,
    responses: { 201: succeeded({ data: WebhookWithSecret }), 403: FORBIDDEN, 422: errors('validation_error', 'invalid_url', 'unknown_event_type', 'too_many_webhooks') },
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
    auth: 'user',
    query: ListQuery,
    invalidStatus: 422,
    responses: { 200: succeeded({ data: z.array(Webhook) }), 403: FORBIDDEN, 422: errors('validation_error') },
    async handler({ query, db }) {
      const [row] = await db((tx) => tx<Row[]>`select api.webhooks_list(${query.community_id}) as data`);
      return { status: 200, body: { success: true, data: row!.data } };
    },
  }),

  defineRoute({
    method: 'patch',
    path: '/api/v1/platform/webhooks/:id',
    summary: 'Change a webhook endpoint: url, events, active (false pauses it; true turns it on again) and description (the keys given).',
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
    auth: 'user',
    params: WebhookPath,
    invalidParamsStatus: 404,
    responses: { 202: succeeded({ data: Delivery }), 403: FORBIDDEN, 404: NOT_FOUND, 409: errors('webhook_inactive') },
    async handler({ params, db }) {
      const [row] = await db((tx) => tx<Row[]>`select api.webhook_ping(${params.id}) as data`);
      return { status: 202, body: { success: true, data: row!.data } };
    },
  }),

  defineRoute({
    method: 'get',
    path: '/api/v1/platform/webhooks/:id/deliveries',
    summary: "The endpoint's deliveries, newest first: status (pending, succeeded, retrying, failed), attempts, last answer, payload.",
    auth: 'user',
    params: WebhookPath,
    query: DeliveryPage,
    invalidStatus: 422,
    invalidParamsStatus: 404,
    responses: {
      200: succeeded({ data: z.array(Delivery), pagination: Pagination }),
      400: errors('invalid_limit', 'invalid_offset'),
      403: FORBIDDEN,
      404: NOT_FOUND,
      422: errors('validation_error'),
    },
    async handler({ params, query, db }) {
      const [row] = await db(
        (tx) => tx<{ page: string }[]>`select api.webhook_deliveries(${params.id}, ${query.limit}, ${query.offset})::text as page`,
      );
      return { status: 200, json: jsonObjectWith({ success: true }, row!.page) };
    },
  }),

  defineRoute({
    method: 'post',
    path: '/api/v1/platform/webhooks/:id/deliveries/:delivery_id/replay',
    summary: 'Send a delivery again now, as a new attempt with the same webhook-id and body (202: queued).',
    auth: 'user',
    params: DeliveryPath,
    invalidParamsStatus: 404,
    responses: { 202: succeeded({ data: Delivery }), 403: FORBIDDEN, 404: errors('webhook_not_found', 'delivery_not_found'), 409: errors('webhook_inactive') },
    async handler({ params, db }) {
      const [row] = await db((tx) => tx<Row[]>`select api.webhook_delivery_replay(${params.id}, ${params.delivery_id}) as data`);
      return { status: 202, body: { success: true, data: row!.data } };
    },
  }),
];

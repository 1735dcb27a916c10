// Platform integration (docs/api.md#platform-integration), and POST /api/v1/forms.
//
// Who may call the platform endpoints (a manager of the community, with an
// access token or a personal API token, or a community-scoped API token of
// that community), idempotency, venue reuse, attendee creation and check-ins
// are SQL (api.platform_*); 403, 404 and 422 use the Error body. A platform
// reaches only what it is given: an existing account is registered for the
// event only (not joined, not named), and only attendees and members are
// checked in (anyone else is answered as an unknown e-mail). The forms
// endpoint needs no credential; its size limit and shape rule are SQL
// (api.form_submit).
import { z } from 'zod';
import { defineRoute } from '../http/route.ts';
import { errors, Id, succeeded } from '../http/responses.ts';
import { LIMITS } from '../core/limits.ts';
import { Email, Text, Uuid } from '../core/schemas.ts';

export const EXTERNAL_PLATFORMS = ['platform_a', 'platform_b', 'platform_c', 'platform_d'] as const;

const DateTime = z.iso.datetime({ offset: true, message: 'must be an ISO 8601 date-time with a time zone' });
const WebUrl = z.url({ protocol: /^https?$/, message: 'must be an http(s) URL' }).max(2000);

export const PlatformVenue = z.object({
  name: Text(LIMITS.venueNameMaxLength),
  address: z.string().trim().max(500).nullish(),
  latitude: z.number().min(-90).max(90).nullish(),
  longitude: z.number().min(-180).max(180).nullish(),
});

export const PlatformEventBody = z.object({
  community_id: Uuid,
  external_platform: z.enum(EXTERNAL_PLATFORMS),
  external_id: z.string().min(1).max(LIMITS.externalIdMaxLength),
  title: Text(LIMITS.eventTitleMaxLength),
  description: z.string().max(50_000),
  date: DateTime,
  end_time: DateTime.nullish(),
  external_url: WebUrl.nullish(),
  image_url: WebUrl.nullish(),
  venue: PlatformVenue.nullish(),
});

export const PlatformAttendeeBody = z.object({
  email: Email,
  /** Defaults to the part of the e-mail before the @. */
  name: z.string().trim().max(200).nullish(),
});

export const PlatformCheckinBody = z.object({ email: Email });

/** Any JSON object; what is stored and its size limit (64 KB) are SQL's. */
export const FormBody = z.record(z.string(), z.unknown());

const EventNodeParam = z.object({ event_node_id: Uuid });

const PlatformEventData = z.object({
  created: z.boolean(),
  event_id: Id,
  event_node_id: Id,
  title: z.string(),
  venue: z.object({ location_id: z.number().int(), name: z.string(), venue_node_id: Id }).nullable(),
});
const PlatformEventReply = succeeded({ data: PlatformEventData });
const AttendeeReply = succeeded({
  data: z.object({
    user_id: Id.nullable().meta({ description: 'The account this registration created; null for an account that already existed.' }),
    email: z.string(),
    user_created: z.boolean(),
    community_joined: z.boolean().meta({ description: "True when the account made here joined the event's community; an existing account is never joined." }),
  }),
});
const PlatformCheckinReply = succeeded({
  data: z.object({ checkin_id: Id, checked_in_at: DateTime, already_checked_in: z.boolean() }),
});
const PLATFORM_403 = errors('forbidden', 'not_community_manager');

interface Outcome {
  created: boolean;
  data: Record<string, unknown>;
}

export const platformRoutes = [
  defineRoute({
    method: 'post',
    path: '/api/v1/platform/events',
    summary:
      'Create an event pushed by an external platform (201), or return the one with the same external_platform and external_id (200). A venue is reused or created.',
    auth: 'user',
    body: PlatformEventBody,
    invalidStatus: 422,
    responses: { 200: PlatformEventReply, 201: PlatformEventReply, 403: PLATFORM_403, 422: errors('validation_error', 'external_event_in_other_community') },
    async handler({ body, db }) {
      const venue = body.venue ?? null;
      const [row] = await db(
        (tx) => tx<{ data: { created: boolean } & Record<string, unknown> }[]>`
          select api.platform_event_create(
                   ${body.community_id}, ${body.external_platform}, ${body.external_id}, ${body.title}, ${body.description},
                   ${body.date}, ${body.end_time ?? null}, ${body.external_url ?? null}, ${body.image_url ?? null},
                   ${venue?.name ?? null}, ${venue?.address ?? null}, ${venue?.latitude ?? null}, ${venue?.longitude ?? null}
                 ) as data`,
      );
      const data = row!.data;
      return { status: data.created ? 201 : 200, body: { success: true, data } };
    },
  }),

  defineRoute({
    method: 'post',
    path: '/api/v1/platform/events/:event_node_id/attendees',
    summary:
      "Register an attendee for the event: an unknown e-mail gets an account (no password; they set one later), joined to the event's community and named by user_id; an existing account is registered for the event only (user_id null). 201, or 200 when already registered.",
    auth: 'user',
    params: EventNodeParam,
    body: PlatformAttendeeBody,
    invalidStatus: 422,
    invalidParamsStatus: 404,
    responses: { 200: AttendeeReply, 201: AttendeeReply, 403: PLATFORM_403, 404: errors('event_not_found'), 422: errors('validation_error', 'invalid_email', 'user_has_no_node') },
    async handler({ params, body, db }) {
      const [row] = await db(
        (tx) => tx<{ outcome: Outcome }[]>`
          select api.platform_attendee_register(${params.event_node_id}, ${body.email}, ${body.name ?? null}) as outcome`,
      );
      const { created, data } = row!.outcome;
      return { status: created ? 201 : 200, body: { success: true, data } };
    },
  }),

  defineRoute({
    method: 'post',
    path: '/api/v1/platform/events/:event_node_id/checkins',
    summary:
      "Check in a user registered for the event or a member of its community: 201, or 200 with already_checked_in when they are checked in. Anyone else is 404 user_not_found, as an unknown e-mail.",
    auth: 'user',
    params: EventNodeParam,
    body: PlatformCheckinBody,
    invalidStatus: 422,
    invalidParamsStatus: 404,
    responses: { 200: PlatformCheckinReply, 201: PlatformCheckinReply, 403: PLATFORM_403, 404: errors('event_not_found', 'user_not_found'), 422: errors('validation_error') },
    async handler({ params, body, db }) {
      const [row] = await db(
        (tx) => tx<{ outcome: Outcome }[]>`select api.platform_checkin(${params.event_node_id}, ${body.email}) as outcome`,
      );
      const { created, data } = row!.outcome;
      return { status: created ? 201 : 200, body: { success: true, data } };
    },
  }),

  defineRoute({
    method: 'post',
    path: '/api/v1/forms',
    summary: 'Submit a form: any JSON object of at most 64 KB, stored for operators (no credential).',
    auth: 'public',
    body: FormBody,
    invalidStatus: 400,
    responses: { 200: succeeded({ message: z.string() }), 413: errors('payload_too_large') },
    async handler({ body, db }) {
      await db((tx) => tx`select api.form_submit(${JSON.stringify(body)})`);
      return { status: 200, body: { success: true, message: 'form received' } };
    },
  }),
];

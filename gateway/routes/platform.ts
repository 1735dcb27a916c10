// Platform integration (docs/api/integration.md#platform-integration), and POST /api/v1/forms.
//
// Events: created (idempotent on external_platform + external_id: a repeat
// changes nothing and says which given values it did not apply), changed
// (PATCH) and cancelled (DELETE) by event id or by the platform's id; the
// triggers of app.events carry a change to the feed, the calendars, the
// webhooks and the page.
// Who may call the platform endpoints (a manager of the community, with an
// access token or a personal API token, or a community-scoped API token of
// that community), idempotency, venue reuse, attendee creation and check-ins
// are SQL (api.platform_*); 403, 404 and 422 use the Error body. A platform
// reaches only what it is given: an existing account is registered for the
// event only (not joined, not named), and only attendees and members are
// checked in (anyone else is answered as an unknown e-mail). The forms
// endpoint needs no credential; its size limit and shape rule are SQL
// (api.form_submit).
import type postgres from 'postgres';
import { z } from 'zod';
import type { Tx } from '../core/database/transaction.ts';
import { defineRoute } from '../http/route.ts';
import { errors, Id, noContent, succeeded } from '../http/responses.ts';
import { LIMITS } from '../core/web/limits.ts';
import { Email, Text, Uuid } from '../core/web/schemas.ts';

export const EXTERNAL_PLATFORMS = ['platform_a', 'platform_b', 'platform_c', 'platform_d'] as const;

const DateTime = z.iso.datetime({ offset: true, message: 'must be an ISO 8601 date-time with a time zone' });
const WebUrl = z.url({ protocol: /^https?$/, message: 'must be an http(s) URL' }).max(2000);
/** An IANA time zone name; SQL checks it against pg_timezone_names (422 invalid_timezone). */
export const TimeZone = z
  .string()
  .trim()
  .min(1)
  .max(64)
  .regex(/^[A-Za-z0-9_+\-/]+$/, { message: 'must be an IANA time zone name, such as Europe/Paris' })
  .meta({ example: 'Europe/Berlin' });
const ExternalId = z
  .string()
  .min(1)
  .max(LIMITS.externalIdMaxLength);

export const PlatformVenue = z
  .object({
    name: Text(LIMITS.venueNameMaxLength).describe("The venue's name.").meta({ example: 'Boulderhalle Nord' }),
    address: z.string().trim().max(500).nullish().describe('Its address.').meta({ example: 'Nordstraße 12, 13347 Berlin' }),
    latitude: z.number().min(-90).max(90).nullish().describe('Latitude, in degrees.').meta({ example: 52.5451 }),
    longitude: z.number().min(-180).max(180).nullish().describe('Longitude, in degrees.').meta({ example: 13.3592 }),
  })
  .describe('Where the event takes place: the oldest venue with the same name and address (case-insensitive) is reused, else one at the same coordinates, else one is created.');

export const PlatformEventBody = z
  .object({
    community_id: Uuid.describe('The community the event belongs to (the caller manages it, or the token is scoped to it).'),
    external_platform: z.enum(EXTERNAL_PLATFORMS).describe('The platform pushing the event.'),
    external_id: ExternalId.describe(
      "The event's id on that platform: pushing the same platform and id again answers the same event (200) and changes nothing (PATCH changes it).",
    ).meta({ example: 'evt-4711' }),
    title: Text(LIMITS.eventTitleMaxLength).describe("The event's title.").meta({ example: 'Bouldering night' }),
    description: z
      .string()
      .max(50_000)
      .nullish()
      .describe('What it is; absent, null or empty: nothing said.')
      .meta({ example: 'Open session for all levels; shoes can be rented.' }),
    date: DateTime.describe('When it starts (ISO 8601 with a time zone).').meta({ example: '2026-06-05T18:00:00+02:00' }),
    end_time: DateTime.nullish().describe('When it ends; absent: 2 hours after the start.').meta({ example: '2026-06-05T22:00:00+02:00' }),
    external_url: WebUrl.nullish().describe("The event's page on the platform.").meta({ example: 'https://platform-a.example.com/events/evt-4711' }),
    image_url: WebUrl.nullish().describe('An image of the event.').meta({ example: 'https://images.example.com/bouldering-night.jpg' }),
    venue: PlatformVenue.nullish(),
    timezone: TimeZone.nullish().describe(
      "The event's IANA time zone, in which its page, previews and calendar entries show it; absent: the venue's zone, else the community's, else the service default (DEFAULT_TIMEZONE). Instants (date, end_time) stay as given.",
    ),
  })
  .meta({
    example: {
      community_id: '5f0c8a9e-3b1d-4c62-9a7e-2d4b6f8a1c03',
      external_platform: 'platform_a',
      external_id: 'evt-4711',
      title: 'Bouldering night',
      description: 'Open session for all levels; shoes can be rented.',
      date: '2026-06-05T18:00:00+02:00',
      end_time: '2026-06-05T22:00:00+02:00',
      external_url: 'https://platform-a.example.com/events/evt-4711',
      venue: { name: 'Boulderhalle Nord', address: 'Nordstraße 12, 13347 Berlin', latitude: 52.5451, longitude: 13.3592 },
      timezone: 'Europe/Berlin',
    },
  });

/** PATCH: the keys given change; null clears a nullable one. */
export const PlatformEventPatch = z
  .strictObject({
    title: Text(LIMITS.eventTitleMaxLength).optional().describe('A new title.').meta({ example: 'Bouldering night (moved)' }),
    description: z.string().max(50_000).nullable().optional().describe('A new description; null removes it.'),
    date: DateTime.optional().describe('A new start (ISO 8601 with a time zone).').meta({ example: '2026-06-12T18:30:00+02:00' }),
    end_time: DateTime.nullable().optional().describe('A new end; null: 2 hours after the start.').meta({ example: '2026-06-12T22:00:00+02:00' }),
    timezone: TimeZone.nullable()
      .optional()
      .describe("A new IANA time zone; null: the venue's zone again, else the community's, else the service default."),
    external_url: WebUrl.nullable().optional().describe("The event's page on the platform; null removes it.").meta({ example: 'https://platform-a.example.com/events/evt-4711' }),
    image_url: WebUrl.nullable().optional().describe('An image of the event; null removes it.').meta({ example: 'https://images.example.com/bouldering-night.jpg' }),
    venue: PlatformVenue.nullable().optional().describe('Another venue (reused or created as on creation); null: none.'),
  })
  .describe('The fields to change (at least none: an empty object changes nothing); unknown fields are 422.')
  .meta({ example: { title: 'Bouldering night (moved)', date: '2026-06-12T18:30:00+02:00', end_time: '2026-06-12T22:00:00+02:00' } });

export const PlatformAttendeeBody = z.object({
  email: Email.describe("The attendee's e-mail address."),
  /** Defaults to the part of the e-mail before the @. */
  name: z
    .string()
    .trim()
    .max(200)
    .nullish()
    .describe('The name for a new account; absent: the part of the e-mail address before the @.')
    .meta({ example: 'Ada Lovelace' }),
});

export const PlatformCheckinBody = z.object({ email: Email.describe('The e-mail address of the person to check in.') });

/** Any JSON object; what is stored and its size limit (64 KB) are SQL's. */
export const FormBody = z
  .record(z.string(), z.unknown())
  .describe('Any JSON object of at most 64 KB.')
  .meta({ example: { form: 'contact', name: 'Ada Lovelace', email: 'ada@example.com', message: 'Do you run beginner courses?' } });

const EventNodeParam = z.object({ event_node_id: Uuid.describe("The event's node id (`event_node_id` of the event's answer).") });
const EventParam = z.object({ event_id: Uuid.describe("The event's id or its node id (`event_id` or `event_node_id` of the event's answer).") });
const ExternalParams = z.object({
  external_platform: z.enum(EXTERNAL_PLATFORMS).describe('The platform that pushed the event.'),
  external_id: ExternalId.describe("The event's id on that platform (percent-encoded in the path).").meta({ example: 'evt-4711' }),
});

const PlatformEventFields = z
  .object({
    created: z.boolean().describe('True when this request created the event (201); false when it existed (200), and on PATCH.'),
    event_id: Id.describe("The event's id."),
    event_node_id: Id.describe("The event's node id: the attendee and check-in paths take it."),
    title: z.string().describe("The event's title, as stored.").meta({ example: 'Bouldering night' }),
    date: z.string().describe('When it starts, as stored (UTC).').meta({ example: '2026-06-05T16:00:00.000Z' }),
    end_time: z.string().nullable().describe('When it ends, as stored (UTC), or null (2 hours after the start).').meta({ example: '2026-06-05T20:00:00.000Z' }),
    timezone: z.string().describe("The event's IANA time zone: given, else its venue's, else its community's, else the service default.").meta({ example: 'Europe/Berlin' }),
    sequence: z
      .number()
      .int()
      .describe('Its iCalendar SEQUENCE: 0 when created, one more with every change (calendars replace the older entry).')
      .meta({ example: 0 }),
    venue: z
      .object({
        location_id: z.number().int().describe("The venue's location number.").meta({ example: 17 }),
        name: z.string().describe("The venue's name.").meta({ example: 'Boulderhalle Nord' }),
        venue_node_id: Id.describe("The venue's node id (venue check-ins take it)."),
      })
      .nullable()
      .describe('The venue, or null when none was given.'),
  })
  .describe('The event.');
const PlatformEventData = PlatformEventFields.extend({
  not_applied: z
    .array(z.enum(['title', 'description', 'date', 'end_time', 'timezone', 'external_url', 'image_url', 'venue']))
    .describe(
      'On a repeat (200): the fields given that differ from the stored event and were NOT applied, since a repeated create never changes the event; send them with PATCH /api/v1/platform/events/{event_id}. Empty when created, or when the repeat matches.',
    )
    .meta({ example: [] }),
}).describe('The event, and what a repeat did not apply.');
const PlatformEventReply = succeeded({ data: PlatformEventData });
const PlatformEventUpdateReply = succeeded({ data: PlatformEventFields });
const PLATFORM_EVENT_404 = errors('event_not_found');
const PLATFORM_EVENT_422 = errors('validation_error', 'invalid_timezone');

/** The SQL call of a PATCH (by event id, or by external_platform and external_id). */
function updateEvent(eventId: string | null, external: { external_platform: string; external_id: string } | null, patch: z.infer<typeof PlatformEventPatch>) {
  return (tx: Tx) => tx<{ data: Record<string, unknown> }[]>`
    select api.platform_event_update(${eventId}, ${external?.external_platform ?? null}, ${external?.external_id ?? null},
                                     ${tx.json(patch as postgres.JSONValue)}::jsonb) as data`;
}

/** The SQL call of a DELETE. */
function deleteEvent(eventId: string | null, external: { external_platform: string; external_id: string } | null) {
  return (tx: Tx) => tx`select api.platform_event_delete(${eventId}, ${external?.external_platform ?? null}, ${external?.external_id ?? null})`;
}

const UPDATE_DESCRIPTION =
  'Changes the fields given of an event (a manager of its community, or an API token scoped to it): title, description, date, end_time, timezone, external_url, image_url, venue; null clears a nullable one. ' +
  'The change reaches everything that shows the event: the realtime feed (an update), the calendars (SEQUENCE one higher, so calendar apps replace their entry), the `event.updated` webhook and the public page. ' +
  'A PATCH that changes nothing changes nothing (no new SEQUENCE, no webhook).';
const DELETE_DESCRIPTION =
  'Cancels an event: it is deleted, the realtime feed sends a delete, the calendars list it as STATUS:CANCELLED (SEQUENCE one higher) and its public page shows it cancelled (schema.org EventCancelled) ' +
  'until its end is 30 days past, and the `event.deleted` webhook goes out. Its check-ins and registrations go with it. A second DELETE is 404.';
const AttendeeReply = succeeded({
  data: z
    .object({
      user_id: Id.nullable().describe('The account, when a registration of this community made it (this one, or the first of a repeat, or one for another event); null for an account made otherwise.'),
      email: z.string().describe('The e-mail address, normalised (trimmed, lower case).').meta({ example: 'ada@example.com' }),
      user_created: z.boolean().describe('Whether this registration (for a repeat: the first) created the account (it has no password; its owner sets one from an e-mailed link).'),
      community_joined: z.boolean().describe("Whether this registration (for a repeat: the first) joined the account it made to the event's community; an existing account is never joined."),
    })
    .describe('The registration.'),
});
const PlatformCheckinReply = succeeded({
  data: z
    .object({
      checkin_id: Id.describe("The check-in's id."),
      checked_in_at: DateTime.describe('When they were checked in.').meta({ example: '2026-06-05T18:42:10.000Z' }),
      already_checked_in: z.boolean().describe('True when they were checked in already (200).').meta({ example: false }),
    })
    .describe('The check-in.'),
});
const PLATFORM_403 = errors('community_scope_violation', 'not_community_manager');

interface Outcome {
  created: boolean;
  data: Record<string, unknown>;
}

export const platformRoutes = [
  defineRoute({
    method: 'post',
    path: '/api/v1/platform/events',
    summary:
      'Create an event pushed by an external platform (201), or return the one with the same external_platform and external_id (200, unchanged: PATCH changes it). A venue is reused or created.',
    description:
      'Creates an event pushed by an external platform (201), or answers the one already pushed with the same external_platform and external_id (200), so a platform can push again safely. ' +
      'A repeat never changes the stored event: `not_applied` lists the fields given that differ from it; send those with PATCH /api/v1/platform/events/{event_id}. ' +
      'A venue is reused (same name and address, else same coordinates) or created. Called by a manager of the community, or with an API token scoped to it.',
    auth: 'user',
    body: PlatformEventBody,
    invalidStatus: 422,
    responses: {
      200: PlatformEventReply,
      201: PlatformEventReply,
      403: PLATFORM_403,
      422: errors('validation_error', 'external_event_in_other_community', 'invalid_timezone'),
    },
    async handler({ body, db }) {
      const venue = body.venue ?? null;
      const [row] = await db(
        (tx) => tx<{ data: { created: boolean } & Record<string, unknown> }[]>`
          select api.platform_event_create(
                   ${body.community_id}, ${body.external_platform}, ${body.external_id}, ${body.title}, ${body.description ?? null},
                   ${body.date}, ${body.end_time ?? null}, ${body.external_url ?? null}, ${body.image_url ?? null},
                   ${venue?.name ?? null}, ${venue?.address ?? null}, ${venue?.latitude ?? null}, ${venue?.longitude ?? null},
                   ${body.timezone ?? null}
                 ) as data`,
      );
      const data = row!.data;
      return { status: data.created ? 201 : 200, body: { success: true, data } };
    },
  }),

  defineRoute({
    method: 'patch',
    path: '/api/v1/platform/events/:event_id',
    summary: 'Change an event (the fields given): the feed, the calendars (SEQUENCE), the event.updated webhook and the page follow.',
    description: UPDATE_DESCRIPTION,
    auth: 'user',
    params: EventParam,
    body: PlatformEventPatch,
    invalidStatus: 422,
    invalidParamsStatus: 404,
    responses: { 200: PlatformEventUpdateReply, 403: PLATFORM_403, 404: PLATFORM_EVENT_404, 422: PLATFORM_EVENT_422 },
    async handler({ params, body, db }) {
      const [row] = await db(updateEvent(params.event_id, null, body));
      return { status: 200, body: { success: true, data: row!.data } };
    },
  }),

  defineRoute({
    method: 'patch',
    path: '/api/v1/platform/events/external/:external_platform/:external_id',
    summary: 'Change an event named by its platform and its id there: as PATCH /api/v1/platform/events/{event_id}.',
    description: `${UPDATE_DESCRIPTION} The event is named by the platform that pushed it and its id there.`,
    auth: 'user',
    params: ExternalParams,
    body: PlatformEventPatch,
    invalidStatus: 422,
    invalidParamsStatus: 404,
    responses: { 200: PlatformEventUpdateReply, 403: PLATFORM_403, 404: PLATFORM_EVENT_404, 422: PLATFORM_EVENT_422 },
    async handler({ params, body, db }) {
      const [row] = await db(updateEvent(null, params, body));
      return { status: 200, body: { success: true, data: row!.data } };
    },
  }),

  defineRoute({
    method: 'delete',
    path: '/api/v1/platform/events/:event_id',
    summary: 'Cancel (delete) an event: STATUS:CANCELLED in the calendars, EventCancelled on its page, the event.deleted webhook, a delete in the feed.',
    description: DELETE_DESCRIPTION,
    auth: 'user',
    params: EventParam,
    invalidParamsStatus: 404,
    responses: { 204: noContent('Deleted (cancelled).'), 403: PLATFORM_403, 404: PLATFORM_EVENT_404 },
    async handler({ params, db }) {
      await db(deleteEvent(params.event_id, null));
      return { status: 204 };
    },
  }),

  defineRoute({
    method: 'delete',
    path: '/api/v1/platform/events/external/:external_platform/:external_id',
    summary: 'Cancel (delete) an event named by its platform and its id there: as DELETE /api/v1/platform/events/{event_id}.',
    description: `${DELETE_DESCRIPTION} The event is named by the platform that pushed it and its id there.`,
    auth: 'user',
    params: ExternalParams,
    invalidParamsStatus: 404,
    responses: { 204: noContent('Deleted (cancelled).'), 403: PLATFORM_403, 404: PLATFORM_EVENT_404 },
    async handler({ params, db }) {
      await db(deleteEvent(null, params));
      return { status: 204 };
    },
  }),

  defineRoute({
    method: 'post',
    path: '/api/v1/platform/events/:event_node_id/attendees',
    summary:
      "Register an attendee for the event: an unknown e-mail gets an account (no password; they set one later), joined to the event's community and named by user_id; an existing account is registered for the event only (user_id null). 201, or 200 when already registered.",
    description:
      "Registers an attendee for the event. An unknown e-mail gets an account (without a password: its owner sets one from an e-mailed link), joined to the event's community and named by user_id; an existing account is registered for the event only (user_id null, not joined, not renamed). 201, or 200 when registered already.",
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
    description:
      'Checks in someone registered for the event or a member of its community: 201, or 200 with already_checked_in when they are checked in. Anyone else is 404 `user_not_found`, like an unknown e-mail.',
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
    description:
      'Stores a form submission (any JSON object) for the operators. No credential.',
    limits: ['A form is at most 64 KB as JSON (413 past it).'],
    auth: 'public',
    body: FormBody,
    invalidStatus: 400,
    responses: { 200: succeeded({ message: z.string().describe('`form received`.').meta({ example: 'form received' }) }), 413: errors('payload_too_large') },
    async handler({ body, db }) {
      await db((tx) => tx`select api.form_submit(${JSON.stringify(body)})`);
      return { status: 200, body: { success: true, message: 'form received' } };
    },
  }),
];

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
import { LIMITS } from '../core/web/limits.ts';
import { Email, Text, Uuid } from '../core/web/schemas.ts';

export const EXTERNAL_PLATFORMS = ['platform_a', 'platform_b', 'platform_c', 'platform_d'] as const;

const DateTime = z.iso.datetime({ offset: true, message: 'must be an ISO 8601 date-time with a time zone' });
const WebUrl = z.url({ protocol: /^https?$/, message: 'must be an http(s) URL' }).max(2000);

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
    external_id: z
      .string()
      .min(1)
      .max(LIMITS.externalIdMaxLength)
      .describe("The event's id on that platform: pushing the same platform and id again answers the same event (200).")
      .meta({ example: 'evt-4711' }),
    title: Text(LIMITS.eventTitleMaxLength).describe("The event's title.").meta({ example: 'Bouldering night' }),
    description: z.string().max(50_000).describe('What it is (may be empty).').meta({ example: 'Open session for all levels; shoes can be rented.' }),
    date: DateTime.describe('When it starts (ISO 8601 with a time zone).').meta({ example: '2026-06-05T18:00:00+02:00' }),
    end_time: DateTime.nullish().describe('When it ends; absent: 2 hours after the start.').meta({ example: '2026-06-05T22:00:00+02:00' }),
    external_url: WebUrl.nullish().describe("The event's page on the platform.").meta({ example: 'https://platform-a.example.com/events/evt-4711' }),
    image_url: WebUrl.nullish().describe('An image of the event.').meta({ example: 'https://images.example.com/bouldering-night.jpg' }),
    venue: PlatformVenue.nullish(),
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
    },
  });

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

const PlatformEventData = z
  .object({
    created: z.boolean().describe('True when this request created the event (201); false when it existed (200).'),
    event_id: Id.describe("The event's id."),
    event_node_id: Id.describe("The event's node id: the attendee and check-in paths take it."),
    title: z.string().describe("The event's title.").meta({ example: 'Bouldering night' }),
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
const PlatformEventReply = succeeded({ data: PlatformEventData });
const AttendeeReply = succeeded({
  data: z
    .object({
      user_id: Id.nullable().describe('The account this registration created; null for an account that already existed.'),
      email: z.string().describe('The e-mail address, normalised (trimmed, lower case).').meta({ example: 'ada@example.com' }),
      user_created: z.boolean().describe('Whether an account was created (it has no password; its owner sets one from an e-mailed link).'),
      community_joined: z.boolean().describe("True when the account made here joined the event's community; an existing account is never joined."),
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
      'Create an event pushed by an external platform (201), or return the one with the same external_platform and external_id (200). A venue is reused or created.',
    description:
      'Creates an event pushed by an external platform (201), or answers the one already pushed with the same external_platform and external_id (200), so a platform can push again safely. A venue is reused (same name and address, else same coordinates) or created. Called by a manager of the community, or with an API token scoped to it.',
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

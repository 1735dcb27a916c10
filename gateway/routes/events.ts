// Events and check-ins (docs/api/mobile.md#events-and-check-ins). The Event object, event
// status, the venue concurrency window and the one-current-check-in rule are
// SQL (api.event_*, api.venue_checkin, api.checkins_current). Paths that say
// event_id take the event's id or its node id; an id that is not a uuid names
// nothing and answers 404.
import { z } from 'zod';
import { defineRoute } from '../http/route.ts';
import { Event, EventStatus } from '../core/web/shapes.ts';
import { Id as IdOut } from '../http/responses.ts';
import { DateTime, errors, succeeded } from '../http/responses.ts';
import { Connection } from './connections.ts';
import { etagHeader, IfMatchHeaders, ifMatchTags } from '../http/versions.ts';

const Visibility = z.enum(['anonymous', 'public']);
const Id = z.guid({ message: 'must be a uuid' });

const EventParam = z.object({ event_id: Id.describe("The event's id or its node id.") });
const VenueParam = z.object({ venue_id: Id.describe("The venue's node id.") });

/** Body optional (absent or {}). */
const EventCheckinBody = z
  .object({
    hat_id: Id.nullish().describe('The hat the caller wears there (one of theirs); absent: none.'),
    location_id: Id.nullish().describe('Where in the event, if it has several places.'),
    visibility: Visibility.nullish().describe('Whether other attendees see who checked in (`public`) or not (`anonymous`, the default).'),
    checked_in_at: z.iso
      .datetime({ offset: true })
      .nullish()
      .describe(
        "An offline check-in: when the phone checked in (its clock), kept as `device_checked_in_at` beside the server's time. " +
          "At most 24 hours old, at most 5 minutes ahead of the server, and inside the event's check-in window " +
          '(2 hours before its start to 2 hours after its end); otherwise 422 (docs/offline-writes.md#offline-check-in).',
      )
      .meta({ example: '2026-06-05T16:10:02.000Z' }),
  })
  .meta({ example: { hat_id: '5f0c8a9e-3b1d-4c62-9a7e-2d4b6f8a1c03', visibility: 'public' } })
  .optional();

const VenueCheckinBody = z.object({
  hat_id: Id.describe('The hat the caller wears there (one of theirs).'),
  visibility: Visibility.nullish().describe('Whether others see who checked in (`public`) or not (`anonymous`, the default).'),
});

/** A check-in as the check-in endpoints answer it. */
const Checkin = z
  .object({
    id: IdOut.describe("The check-in's id."),
    type: z.enum(['event', 'venue']).describe('At an event, or at a venue.'),
    event_id: IdOut.nullable().describe('The event (for an event check-in), else null.'),
    venue_id: IdOut.nullable().describe("The venue's node id (for a venue check-in), else null."),
    hat_id: IdOut.nullable().describe('The hat worn, or null.'),
    location_id: IdOut.nullable().describe('Where in the event, or null.'),
    visibility: Visibility.describe('Whether others see who checked in.'),
    checked_in_at: DateTime.describe('When the caller checked in.'),
    checked_out_at: DateTime.nullable().describe('When they checked out; null while checked in.'),
    device_checked_in_at: DateTime.nullable().describe("An offline check-in: when the phone says it checked in (`checked_in_at` is when the server received it); else null."),
  })
  .meta({
    id: 'Checkin',
    description: 'A check-in at an event or a venue.',
    example: {
      id: '7a8b9c0d-1e2f-4a3b-8c4d-5e6f7a8b9c0d',
      type: 'event',
      event_id: '0b7e5d1c-8f2a-4c3e-9d6b-1a2f3e4d5c6b',
      venue_id: null,
      hat_id: '5f0c8a9e-3b1d-4c62-9a7e-2d4b6f8a1c03',
      location_id: null,
      visibility: 'public',
      checked_in_at: '2026-06-05T16:12:40.000Z',
      checked_out_at: null,
      device_checked_in_at: null,
    },
  });

const CheckinReply = succeeded({ checkin: Checkin });
const VenueCheckinReply = succeeded({ type: z.enum(['venue', 'event']).describe('What the caller is checked in to: the venue, or the one event taking place there.'), checkin: Checkin });
const EventChoice = z
  .object({
    id: IdOut.describe("The event's id."),
    node_id: IdOut.describe("The event's node id: check in with POST /api/mobile/events/{node_id}/checkin."),
    title: z.string().describe('Its title.').meta({ example: 'Bouldering night' }),
    description: z.string().nullable().describe('What it is, or null.').meta({ example: 'Open session for all levels.' }),
    date: DateTime.describe('When it starts.'),
    end_time: DateTime.nullable().describe('When it ends, or null.').meta({ example: '2026-06-05T20:00:00.000Z' }),
    image_path: z.string().nullable().describe('Its image, or null: a path in the `event-images` bucket, or an external URL.').meta({ example: 'https://images.example.com/bouldering-night.jpg' }),
    image_url: z.string().nullable().describe('Its image as a URL, or null.').meta({ example: 'https://images.example.com/bouldering-night.jpg' }),
  })
  .describe('An event concurrent at the venue now.');
const EventSelection = succeeded({
  type: z.literal('event_selection').describe('Several events are concurrent at the venue: choose one.'),
  message: z.string().describe('Says so, for a person.').meta({ example: '2 events are taking place at this venue; choose one to check in to' }),
  event_count: z.number().int().describe('How many.').meta({ example: 2 }),
  events: z.array(EventChoice).describe('The events concurrent at the venue now.'),
});

const Status = EventStatus;
const EventCheckinItem = z
  .object({
    type: z.literal('event').describe('An event check-in.'),
    event_id: IdOut.describe('The event.'),
    event_title: z.string().describe("The event's title.").meta({ example: 'Bouldering night' }),
    event_status: Status.describe('Whether the event is ongoing, past or upcoming now.'),
    checked_in_at: DateTime.describe('When the caller checked in.'),
    event_date: DateTime.describe('When the event starts.'),
    event_end_time: DateTime.nullable().describe('When it ends, or null.').meta({ example: '2026-06-05T20:00:00.000Z' }),
    hat_id: IdOut.nullable().describe('The hat worn, or null.'),
    visibility: Visibility.describe('Whether others see who checked in.'),
  })
  .describe('A current event check-in.');
const VenueCheckinItem = z
  .object({
    type: z.literal('venue').describe('A venue check-in.'),
    venue_id: IdOut.describe("The venue's node id."),
    venue_name: z.string().describe("The venue's name.").meta({ example: 'Boulderhalle Nord' }),
    checked_in_at: DateTime.describe('When the caller checked in.'),
    hat_id: IdOut.nullable().describe('The hat worn, or null.'),
    visibility: Visibility.describe('Whether others see who checked in.'),
  })
  .describe('A current venue check-in.');
const CurrentCheckins = succeeded({
  checkins: z.array(z.union([EventCheckinItem, VenueCheckinItem])).describe("The caller's current check-ins (not checked out), newest first."),
  current_ongoing_checkin: z
    .object({
      type: z.literal('event').describe('An event check-in.'),
      event_id: IdOut.describe('The event.'),
      event_title: z.string().describe("The event's title.").meta({ example: 'Bouldering night' }),
      event_status: z.literal('ongoing').describe('Always `ongoing`.'),
    })
    .nullable()
    .describe('The most recent check-in at an event taking place now, or null.'),
});

const Message = succeeded({ message: z.string().describe('`checked out`.').meta({ example: 'checked out' }) });

interface CheckinOutcome {
  created: boolean;
  checkin: Record<string, unknown>;
}

interface VenueOutcome extends CheckinOutcome {
  type: 'venue' | 'event' | 'event_selection';
  events: unknown[] | null;
}

export const eventRoutes = [
  defineRoute({
    method: 'get',
    path: '/api/mobile/events/upcoming',
    summary: "Events of the caller's communities that have not ended, soonest first, at most 100.",
    description:
      "The events of the caller's communities that have not ended (an event without end_time ends 2 hours after its date), soonest first. GET /api/mobile/events/upcoming/stream sends the same list, then every change.",
    limits: ['At most 100 events.'],
    auth: 'user',
    responses: { 200: z.array(Event).describe('The events, soonest first.') },
    async handler({ db, services }) {
      // The array as Postgres writes it, passed through as text.
      const [row] = await db(
        (tx) => tx<{ events: string }[]>`select api.events_upcoming_page(${services.publicUrl})::text as events`,
      );
      return { status: 200, json: row!.events };
    },
  }),

  defineRoute({
    method: 'get',
    path: '/api/mobile/events/:id',
    summary: 'One event (by id or node id).',
    description:
      "One event of the caller's communities, by its id or its node id.",
    auth: 'user',
    params: z.object({ id: Id.describe("The event's id or its node id.") }),
    invalidParamsStatus: 404,
    responses: { 200: Event, 404: errors('event_not_found') },
    etag: true,
    async handler({ params, db, services }) {
      const [row] = await db(
        (tx) => tx<{ event: unknown; etag: string }[]>`
          select api.event_get(${params.id}, ${services.publicUrl}) as event, api.event_etag(${params.id}) as etag`,
      );
      return { status: 200, body: row!.event, headers: etagHeader(row!.etag) };
    },
  }),

  defineRoute({
    method: 'patch',
    path: '/api/mobile/events/:id',
    summary: "A manager of the event's community sets its image.",
    description:
      "A manager of the event's community sets its image: `image_path` is the path of an image uploaded to the event's folder of the `event-images` bucket (`{event id}/poster.jpg`, docs/storage.md), or null to remove it (an external image a platform gave stays). The public event page's og:image is then a 1200×630 transformation of it.",
    auth: 'user',
    params: z.object({ id: Id.describe("The event's id or its node id.") }),
    invalidParamsStatus: 404,
    body: z.object({
      image_path: z
        .string()
        .min(1)
        .max(1024)
        .nullable()
        .describe("The path of an object in the event's folder of `event-images`, or null to remove the image.")
        .meta({ example: '9a3e7c2b-1f4d-4e8a-b6c5-2d7f0e1a3b49/poster.jpg' }),
    }),
    headers: IfMatchHeaders,
    invalidStatus: 422,
    responses: {
      200: Event,
      403: errors('not_community_manager'),
      404: errors('event_not_found'),
      412: errors('precondition_failed'),
      422: errors('validation_error', 'invalid_image_path'),
    },
    etag: true,
    async handler({ params, body, headers: { 'if-match': ifMatch }, db, services }) {
      // The event's new version is read after the write, in the same transaction (the Event object has no updated_at).
      const { event, etag } = await db(async (tx) => {
        const [row] = await tx<{ event: unknown }[]>`
          select api.event_update(${params.id}, ${tx.json(body)}, ${services.publicUrl}, ${ifMatchTags(ifMatch)}::text[]) as event`;
        const [version] = await tx<{ etag: string }[]>`select api.event_etag(${params.id}) as etag`;
        return { event: row!.event, etag: version!.etag };
      });
      return { status: 200, body: event, headers: etagHeader(etag) };
    },
  }),

  defineRoute({
    method: 'post',
    path: '/api/mobile/events/:event_id/checkin',
    summary: 'Check in to an event: 201 the first time, 200 with the current check-in when already checked in.',
    description:
      'Checks the caller in to an event, optionally wearing one of their hats: 201 the first time; 200 with the current check-in when they are checked in already. The body may be absent. ' +
      "A check-in made offline sends the phone's time as `checked_in_at`: it is kept as `device_checked_in_at` beside the server's `checked_in_at` when it is at most 24 hours old, at most 5 minutes ahead of the server and inside the event's check-in window (2 hours before its start to 2 hours after its end); otherwise nothing is recorded and the answer is 422.",
    auth: 'user',
    params: EventParam,
    body: EventCheckinBody,
    invalidStatus: 422,
    invalidParamsStatus: 404,
    responses: {
      200: CheckinReply,
      201: CheckinReply,
      404: errors('event_not_found'),
      422: errors('invalid_hat', 'checkin_time_in_future', 'checkin_time_too_old', 'checkin_time_outside_event'),
    },
    async handler({ params, body, db }) {
      const [outcome] = await db(
        (tx) => tx<CheckinOutcome[]>`
          select * from api.event_checkin(${params.event_id}, ${body?.hat_id ?? null}, ${body?.location_id ?? null},
                                          ${body?.visibility ?? null}, ${body?.checked_in_at ?? null}::timestamptz)`,
      );
      return { status: outcome!.created ? 201 : 200, body: { success: true, checkin: outcome!.checkin } };
    },
  }),

  defineRoute({
    method: 'delete',
    path: '/api/mobile/events/:event_id/checkin',
    summary: 'Check out of an event (the check-in is kept, with checked_out_at).',
    description:
      'Checks the caller out of an event. The check-in is kept, with its checked_out_at.',
    auth: 'user',
    params: EventParam,
    invalidParamsStatus: 404,
    responses: { 200: Message, 404: errors('event_not_found', 'not_checked_in') },
    async handler({ params, db }) {
      await db((tx) => tx`select api.event_checkout(${params.event_id})`);
      return { status: 200, body: { success: true, message: 'checked out' } };
    },
  }),

  defineRoute({
    method: 'post',
    path: '/api/mobile/venues/:venue_id/checkin',
    summary: 'Check in at a venue: no concurrent event: venue check-in; one: that event; several: a list to choose from.',
    description:
      'Checks the caller in at a venue. An event is concurrent from 2 hours before its start to 2 hours after its end. With no concurrent event, a venue check-in (201, `type: venue`); with one, a check-in to that event (201, `type: event`); with several, the list to choose from (200, `event_selection`) and no check-in. Checked in already: 200 with the current check-in.',
    auth: 'user',
    params: VenueParam,
    body: VenueCheckinBody,
    invalidStatus: 422,
    invalidParamsStatus: 404,
    responses: { 200: z.union([EventSelection, VenueCheckinReply]), 201: VenueCheckinReply, 404: errors('venue_not_found'), 422: errors('invalid_hat') },
    async handler({ params, body, db }) {
      const [outcome] = await db(
        (tx) => tx<VenueOutcome[]>`select * from api.venue_checkin(${params.venue_id}, ${body.hat_id}, ${body.visibility ?? null})`,
      );
      const { type, created, checkin, events } = outcome!;
      if (type === 'event_selection') {
        const count = events?.length ?? 0;
        return {
          status: 200,
          body: {
            success: true,
            type,
            message: `${count} events are taking place at this venue; choose one to check in to`,
            event_count: count,
            events,
          },
        };
      }
      return { status: created ? 201 : 200, body: { success: true, type, checkin } };
    },
  }),

  defineRoute({
    method: 'delete',
    path: '/api/mobile/venues/:venue_id/checkin',
    summary: 'End a venue check-in (the check-in is kept, with checked_out_at).',
    description:
      "Ends the caller's check-in at a venue. The check-in is kept, with its checked_out_at.",
    auth: 'user',
    params: VenueParam,
    invalidParamsStatus: 404,
    responses: { 200: Message, 404: errors('venue_not_found', 'not_checked_in') },
    async handler({ params, db }) {
      await db((tx) => tx`select api.venue_checkout(${params.venue_id})`);
      return { status: 200, body: { success: true, message: 'checked out' } };
    },
  }),

  defineRoute({
    method: 'get',
    path: '/api/mobile/checkins',
    summary: "The caller's current check-ins (events and venues) and the most recent ongoing event check-in.",
    description:
      "The caller's current check-ins at events and venues (not checked out), newest first, and the most recent one at an event taking place now.",
    auth: 'user',
    errorShapes: { 422: 'simple' },
    responses: { 200: CurrentCheckins, 422: errors('user_node_not_found') },
    async handler({ db }) {
      const [list] = await db(
        (tx) => tx<{ checkins: unknown[]; current_ongoing_checkin: unknown }[]>`select * from api.checkins_current()`,
      );
      return {
        status: 200,
        body: { success: true, checkins: list!.checkins, current_ongoing_checkin: list!.current_ongoing_checkin },
      };
    },
  }),

  defineRoute({
    method: 'get',
    path: '/api/mobile/events/:event_id/connections',
    summary: "The caller's connections made at the event, newest first.",
    description:
      "The caller's connections made at the event, newest first.",
    auth: 'user',
    params: EventParam,
    invalidParamsStatus: 404,
    responses: { 200: succeeded({ connections: z.array(Connection).describe('The connections, newest first.') }), 404: errors('event_not_found') },
    async handler({ params, db }) {
      const connections = await db((tx) => tx`select * from api.event_connections(${params.event_id})`);
      return { status: 200, body: { success: true, connections } };
    },
  }),
];

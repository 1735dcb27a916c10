// Events and check-ins (docs/api.md#events-and-check-ins). The Event object, event
// status, the venue concurrency window and the one-current-check-in rule are
// SQL (api.event_*, api.venue_checkin, api.checkins_current). Paths that say
// event_id take the event's id or its node id; an id that is not a uuid names
// nothing and answers 404.
import { z } from 'zod';
import { defineRoute } from '../http/route.ts';
import { Id as IdOut } from '../http/responses.ts';
import { DateTime, errors, succeeded } from '../http/responses.ts';
import { Connection } from './connections.ts';

const Visibility = z.enum(['anonymous', 'public']);
const Id = z.guid({ message: 'must be a uuid' });

const EventParam = z.object({ event_id: Id });
const VenueParam = z.object({ venue_id: Id });

/** Body optional (absent or {}). */
const EventCheckinBody = z
  .object({
    hat_id: Id.nullish(),
    location_id: Id.nullish(),
    visibility: Visibility.nullish(),
  })
  .optional();

const VenueCheckinBody = z.object({
  hat_id: Id,
  visibility: Visibility.nullish(),
});

/** Event; can_sync and external_platforms for managers only. */
export const Event = z
  .object({
    id: IdOut,
    title: z.string(),
    date: DateTime,
    community_node_id: IdOut,
    shortlink: z.string().length(8),
    deeplink_path: z.string(),
    deeplink_url: z.url(),
    public_url: z.string(),
    public_full_url: z.url(),
    description: z.string().nullable().optional(),
    end_time: DateTime.nullable().optional(),
    event_url: z.string().nullable().optional(),
    image_path: z.string().nullable().optional(),
    location: z.string().nullable().optional(),
    node_id: IdOut.nullable().optional(),
    platform_a_url: z.string().nullable().optional(),
    platform_b_url: z.string().nullable().optional(),
    platform_c_url: z.string().nullable().optional(),
    can_sync: z.boolean().nullable().optional(),
    external_platforms: z.array(z.string()).nullable().optional(),
  })
  .meta({ id: 'Event' });

/** A check-in as the check-in endpoints answer it. */
const Checkin = z
  .object({
    id: IdOut,
    type: z.enum(['event', 'venue']),
    event_id: IdOut.nullable(),
    venue_id: IdOut.nullable(),
    hat_id: IdOut.nullable(),
    location_id: IdOut.nullable(),
    visibility: Visibility,
    checked_in_at: DateTime,
    checked_out_at: DateTime.nullable(),
  })
  .meta({ id: 'Checkin' });

const CheckinReply = succeeded({ checkin: Checkin });
const VenueCheckinReply = succeeded({ type: z.enum(['venue', 'event']), checkin: Checkin });
const EventChoice = z.object({
  id: IdOut,
  node_id: IdOut,
  title: z.string(),
  description: z.string().nullable(),
  date: DateTime,
  end_time: DateTime.nullable(),
  image_path: z.string().nullable(),
});
const EventSelection = succeeded({
  type: z.literal('event_selection'),
  message: z.string(),
  event_count: z.number().int(),
  events: z.array(EventChoice),
});

const Status = z.enum(['ongoing', 'past', 'upcoming']);
const EventCheckinItem = z.object({
  type: z.literal('event'),
  event_id: IdOut,
  event_title: z.string(),
  event_status: Status,
  checked_in_at: DateTime,
  event_date: DateTime.optional(),
  event_end_time: DateTime.nullable().optional(),
  hat_id: IdOut.nullable().optional(),
  visibility: Visibility.optional(),
});
const VenueCheckinItem = z.object({
  type: z.literal('venue'),
  venue_id: IdOut,
  venue_name: z.string(),
  checked_in_at: DateTime,
  hat_id: IdOut.nullable().optional(),
  visibility: Visibility.optional(),
});
const CurrentCheckins = succeeded({
  checkins: z.array(z.union([EventCheckinItem, VenueCheckinItem])),
  current_ongoing_checkin: z
    .object({ type: z.literal('event'), event_id: IdOut, event_title: z.string(), event_status: z.literal('ongoing') })
    .nullable(),
});

const Message = succeeded({ message: z.string() });

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
    auth: 'user',
    responses: { 200: z.array(Event) },
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
    auth: 'user',
    params: z.object({ id: Id }),
    invalidParamsStatus: 404,
    responses: { 200: Event, 404: errors('event_not_found') },
    async handler({ params, db, services }) {
      const [row] = await db((tx) => tx<{ event: unknown }[]>`select api.event_get(${params.id}, ${services.publicUrl}) as event`);
      return { status: 200, body: row!.event };
    },
  }),

  defineRoute({
    method: 'post',
    path: '/api/mobile/events/:event_id/checkin',
    summary: 'Check in to an event: 201 the first time, 200 with the current check-in when already checked in.',
    auth: 'user',
    params: EventParam,
    body: EventCheckinBody,
    invalidStatus: 422,
    invalidParamsStatus: 404,
    responses: { 200: CheckinReply, 201: CheckinReply, 404: errors('event_not_found'), 422: errors('invalid_hat') },
    async handler({ params, body, db }) {
      const [outcome] = await db(
        (tx) => tx<CheckinOutcome[]>`
          select * from api.event_checkin(${params.event_id}, ${body?.hat_id ?? null}, ${body?.location_id ?? null},
                                          ${body?.visibility ?? null})`,
      );
      return { status: outcome!.created ? 201 : 200, body: { success: true, checkin: outcome!.checkin } };
    },
  }),

  defineRoute({
    method: 'delete',
    path: '/api/mobile/events/:event_id/checkin',
    summary: 'Check out of an event (the check-in is kept, with checked_out_at).',
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
    auth: 'user',
    params: EventParam,
    invalidParamsStatus: 404,
    responses: { 200: succeeded({ connections: z.array(Connection) }), 404: errors('event_not_found') },
    async handler({ params, db }) {
      const connections = await db((tx) => tx`select * from api.event_connections(${params.event_id})`);
      return { status: 200, body: { success: true, connections } };
    },
  }),
];

// Spec section 4, "Events and check-ins (mobile)". The Event object, event
// status, the venue concurrency window and the one-current-check-in rule are
// SQL (api.event_*, api.venue_checkin, api.checkins_current). Paths that say
// event_id take the event's id or its node id; an id that is not a uuid names
// nothing and answers 404.
import { z } from 'zod';
import { defineRoute } from '../http/route.ts';

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
    async handler({ params, db }) {
      const connections = await db((tx) => tx`select * from api.event_connections(${params.event_id})`);
      return { status: 200, body: { success: true, connections } };
    },
  }),
];

// Calendars (iCalendar files):
//
//   GET /e/{shortlink}.ics             one event (public, like /e/{shortlink})
//   GET /c/{community_id}/calendar.ics  a community's events from 30 days ago on (public; draft communities 404)
//   POST /api/mobile/calendar/feed      a secret personal feed URL (a new one each time; the old one stops working)
//   DELETE /api/mobile/calendar/feed    the personal feed URL stops working
//   GET /cal/{token}.ics                the personal feed: the upcoming events of all the owner's communities
//
// Every calendar, its validators (ETag, Last-Modified) and the 304 decision
// come from one SQL call (api.calendar_*); http/calendar.ts renders it.
import { z } from 'zod';
import { calendarReply, CALENDAR_FORMAT, conditions, type CalendarAnswer } from '../http/calendar.ts';
import { defineRoute } from '../http/route.ts';
import { content, errors, noContent, succeeded } from '../http/responses.ts';
import { Uuid } from '../core/web/schemas.ts';

const Conditional = z.object({
  'if-none-match': z.string().max(4096).optional().meta({ description: 'ETags of a calendar held; 304 when it is still current.' }),
  'if-modified-since': z.string().max(100).optional().meta({ description: 'An HTTP date; without If-None-Match, 304 when nothing changed since.' }),
  'accept-encoding': z
    .string()
    .max(1000)
    .optional()
    .meta({ description: 'br or gzip: the file is answered compressed (Content-Encoding), its ETag naming the coding (`"…-gzip"`; If-None-Match takes either spelling).' }),
});

const CALENDAR = content('text/calendar', 'An iCalendar (RFC 5545) file, with `ETag` and `Last-Modified`.');
const NOT_MODIFIED = noContent('Not modified: the calendar held (If-None-Match / If-Modified-Since) is current.');

/** The answer of an api.calendar_* call, as one row. */
type Row = CalendarAnswer;

/** How often a subscribed calendar should be refreshed (REFRESH-INTERVAL / X-PUBLISHED-TTL). */
const FEED_TTL_SECONDS = 3600;

const FeedUrls = z
  .object({
    url: z.string().meta({
      description: 'The feed, https: subscribe to it in a calendar app. A secret: whoever has it reads the feed.',
      example: 'https://community.example.com/cal/vCxgwdPNn5H09dCcMjuHuxeJGI-GEEjaKZHBvQO1PXE.ics',
    }),
    webcal_url: z.string().meta({
      description: 'The same URL with the webcal: scheme, which opens the calendar app.',
      example: 'webcal://community.example.com/cal/vCxgwdPNn5H09dCcMjuHuxeJGI-GEEjaKZHBvQO1PXE.ics',
    }),
  })
  .describe("The caller's personal feed URL, in two spellings.");

const ShortlinkParams = z.object({
  shortlink: z.string().regex(/^[A-Za-z0-9]{8}$/).describe("The event's short code (8 letters and digits), as in /e/{shortlink}.").meta({ example: 'k3Xb9QzA' }),
});
const CommunityParams = z.object({ community_id: Uuid.describe("The community's id.") });
const TokenParams = z.object({
  token: z
    .string()
    .regex(/^[A-Za-z0-9_-]{43}$/)
    .describe('The secret of a personal feed (43 characters of base64url), from the `url` of POST /api/mobile/calendar/feed.')
    .meta({ example: 'vCxgwdPNn5H09dCcMjuHuxeJGI-GEEjaKZHBvQO1PXE' }),
});

export const calendarRoutes = [
  defineRoute({
    method: 'get',
    path: '/e/:shortlink.ics',
    summary: "An event as an iCalendar file (no credential); a deleted event's file says STATUS:CANCELLED while it is kept.",
    description:
      "The event as an iCalendar (RFC 5545) file with one VEVENT, for \"Add to calendar\": no credential, like the event's public page /e/{shortlink} (an event of a draft community is 404, as there). " +
      'A deleted event answers STATUS:CANCELLED while it is kept, so a calendar that imported it removes it. ' +
      'Send the `ETag` back as If-None-Match (or `Last-Modified` as If-Modified-Since) for a 304 while it is unchanged.',
    auth: 'public',
    params: ShortlinkParams,
    invalidParamsStatus: 404,
    headers: Conditional,
    responses: { 200: CALENDAR, 304: NOT_MODIFIED, 404: errors('event_not_found') },
    async handler({ params, headers, db, services }) {
      const [inm, ims] = conditions(headers);
      const [row] = await db(
        (tx) => tx<Row[]>`
          select * from api.calendar_event(${params.shortlink}, ${services.publicUrl}, ${CALENDAR_FORMAT}, ${inm}, ${ims})`,
      );
      return calendarReply(row!, { cacheControl: 'no-cache', filename: `${params.shortlink}.ics`, acceptEncoding: headers['accept-encoding'] });
    },
  }),

  defineRoute({
    method: 'get',
    path: '/c/:community_id/calendar.ics',
    summary: "A community's events as a subscribable iCalendar feed (no credential): events whose end is at most 30 days past, deleted ones as STATUS:CANCELLED. Draft communities are 404.",
    description:
      "The community's events as an iCalendar (RFC 5545) feed to subscribe to in a calendar app (no credential): every event whose end is at most 30 days past, soonest first (at most 5,000), " +
      'deleted ones as STATUS:CANCELLED while they are kept. It asks calendar apps to refresh hourly (REFRESH-INTERVAL, X-PUBLISHED-TTL). ' +
      'A draft or unknown community, or an id that is not a uuid, is 404. If-None-Match / If-Modified-Since give 304 while it is unchanged.',
    auth: 'public',
    params: CommunityParams,
    invalidParamsStatus: 404,
    headers: Conditional,
    responses: { 200: CALENDAR, 304: NOT_MODIFIED, 404: errors('community_not_found') },
    async handler({ params, headers, db, services }) {
      const [inm, ims] = conditions(headers);
      const [row] = await db(
        (tx) => tx<Row[]>`
          select * from api.calendar_community(${params.community_id}, ${services.publicUrl}, ${CALENDAR_FORMAT}, ${inm}, ${ims})`,
      );
      return calendarReply(row!, { cacheControl: 'no-cache', filename: 'calendar.ics', ttlSeconds: FEED_TTL_SECONDS, acceptEncoding: headers['accept-encoding'] });
    },
  }),

  defineRoute({
    method: 'post',
    path: '/api/mobile/calendar/feed',
    summary: "A secret URL of the caller's personal calendar feed (the upcoming events of all their communities). Each call makes a new URL; the previous one stops working (404).",
    description:
      "Makes a secret URL of the caller's personal calendar feed (GET /cal/{token}.ics): the upcoming events of all their communities, for a calendar app to subscribe to. " +
      'Each call makes a new URL and the previous one stops working (404), so calling it again is how a leaked URL is replaced. ' +
      'A password change (set through a set-password link) ends it too, a re-hash of the same password at sign-in does not. Treat the URL as a credential: anyone who has it reads the feed.',
    auth: 'user',
    responses: { 201: succeeded({ data: FeedUrls }) },
    async handler({ db, services }) {
      const [row] = await db((tx) => tx<{ data: z.infer<typeof FeedUrls> }[]>`select api.calendar_feed_create(${services.publicUrl}) as data`);
      return { status: 201, body: { success: true, data: row!.data } };
    },
  }),

  defineRoute({
    method: 'delete',
    path: '/api/mobile/calendar/feed',
    summary: "The caller's personal calendar feed URL stops working (204, also when there is none).",
    description: "Ends the caller's personal calendar feed: its URL answers 404 from now on. 204 also when there is none.",
    auth: 'user',
    responses: { 204: noContent('Revoked.') },
    async handler({ db }) {
      await db((tx) => tx`select api.calendar_feed_revoke()`);
      return { status: 204 };
    },
  }),

  defineRoute({
    method: 'get',
    path: '/cal/:token.ics',
    summary: "A personal calendar feed (the token in the URL is the credential): the upcoming events of all the owner's communities, deleted ones as STATUS:CANCELLED.",
    description:
      "A personal calendar feed, as the URL from POST /api/mobile/calendar/feed: the secret token in the path is the credential (no Authorization header). " +
      "It holds the upcoming events (end not past) of all the owner's communities, deleted ones as STATUS:CANCELLED while they are kept, and asks calendar apps to refresh hourly. " +
      'A revoked or replaced token is 404. If-None-Match / If-Modified-Since give 304 while it is unchanged.',
    auth: 'public',
    params: TokenParams,
    invalidParamsStatus: 404,
    secretPath: true,
    headers: Conditional,
    responses: { 200: CALENDAR, 304: NOT_MODIFIED, 404: errors('calendar_not_found') },
    async handler({ params, headers, db, services }) {
      const [inm, ims] = conditions(headers);
      const [row] = await db(
        (tx) => tx<Row[]>`
          select * from api.calendar_personal(${params.token}, ${services.publicUrl}, ${CALENDAR_FORMAT}, ${inm}, ${ims})`,
      );
      return calendarReply(row!, { cacheControl: 'private, no-cache', filename: 'calendar.ics', ttlSeconds: FEED_TTL_SECONDS, acceptEncoding: headers['accept-encoding'] });
    },
  }),
];

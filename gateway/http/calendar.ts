// iCalendar (RFC 5545) answers: the calendar SQL built (api.calendar_*),
// rendered with ical-generator (CRLF, lines folded at 75 octets, TEXT
// escaped), and the conditional-GET headers (ETag, Last-Modified, 304).
// Which events a calendar lists, their UID, end, SEQUENCE, status and the
// validators are SQL's; this module only writes them down.
import ical, { escape, ICalEventStatus } from 'ical-generator';
import type { Reply } from './route.ts';

/**
 * The renderer's output format, part of every ETag (SQL hashes it in): change
 * it when the rendering changes, so that clients holding an older file get
 * the new one instead of a 304.
 */
export const CALENDAR_FORMAT = 'ics-1';

/** One entry as private.calendar_entry builds it. */
export interface CalendarEntry {
  uid: string;
  sequence: number;
  start: string;
  end: string;
  stamp: string;
  created: string;
  summary: string;
  description: string | null;
  location: string | null;
  url: string;
  status: 'CONFIRMED' | 'CANCELLED';
}

export interface CalendarDocument {
  name: string;
  description?: string | null;
  events: CalendarEntry[];
}

/** What api.calendar_* return: the validators, and the calendar unless the request's validators matched. */
export interface CalendarAnswer {
  etag: string;
  last_modified: Date;
  calendar: CalendarDocument | null;
}

// Only TEXT values (and the URL) carry data here. ical-generator 10 (11 drops
// Node 20) escapes TEXT, but writes property parameter values (ORGANIZER's
// CN, X-APPLE-STRUCTURED-LOCATION, ATTACH's FMTTYPE) without RFC 6868
// encoding: a value given to one of those must be encoded first (`"` as ^',
// `^` as ^^, a line break as ^n), or it can end the parameter.
//
// RFC 5545 3.3.11: TEXT holds no control character but HTAB (line breaks are
// escaped by the library). What the database may hold (e.g. U+0007) is dropped.
const CONTROL = /[\u0000-\u0008\u000b\u000c\u000e-\u001f\u007f]/g;
const text = (value: string): string => value.replace(CONTROL, '');

/** The calendar as iCalendar text. `ttlSeconds`: how often subscribers should refresh (REFRESH-INTERVAL, X-PUBLISHED-TTL). */
export function renderCalendar(document: CalendarDocument, ttlSeconds?: number): string {
  const calendar = ical({
    prodId: { company: 'Community backend', product: 'Calendar', language: 'EN' },
    // ical-generator writes the calendar's name and description unescaped: escape them here.
    name: escape(text(document.name), false),
    description: document.description ? escape(text(document.description), false) : null,
    ttl: ttlSeconds ?? null,
  });
  for (const entry of document.events) {
    calendar.createEvent({
      id: entry.uid,
      sequence: entry.sequence,
      start: new Date(entry.start),
      end: new Date(entry.end),
      stamp: new Date(entry.stamp),
      created: new Date(entry.created),
      lastModified: new Date(entry.stamp),
      summary: text(entry.summary),
      description: entry.description ? text(entry.description) : null,
      location: entry.location ? text(entry.location) : null,
      url: entry.url,
      status: entry.status === 'CANCELLED' ? ICalEventStatus.CANCELLED : ICalEventStatus.CONFIRMED,
    });
  }
  return calendar.toString();
}

/**
 * The entity tags of If-None-Match (`W/` dropped: a GET compares weakly;
 * `*` kept), or null when the header is absent.
 */
export function entityTags(header: string | undefined): string[] | null {
  if (header === undefined) return null;
  const tags: string[] = [];
  for (const match of header.matchAll(/\s*(\*|(?:W\/)?"[^"]*")\s*(?:,|$)/g)) {
    const tag = match[1]!;
    tags.push(tag.startsWith('W/') ? tag.slice(2) : tag);
    if (tags.length >= 50) break;
  }
  return tags;
}

/** An HTTP date (If-Modified-Since), or null when absent or not a date. */
export function httpDate(header: string | undefined): Date | null {
  if (header === undefined) return null;
  const date = new Date(header);
  return Number.isNaN(date.getTime()) ? null : date;
}

/** The conditional-GET inputs of a request, as the SQL functions take them. */
export function conditions(headers: { 'if-none-match'?: string; 'if-modified-since'?: string }): [string[] | null, Date | null] {
  const tags = entityTags(headers['if-none-match']);
  // If-None-Match, when sent, decides alone (RFC 9110 13.1.3).
  return [tags, tags === null ? httpDate(headers['if-modified-since']) : null];
}

/**
 * 200 with the calendar, or 304 with the validators only. `cacheControl`:
 * `no-cache` (store, but ask again: the 304 is cheap), `private, no-cache`
 * for a personal feed.
 */
export function calendarReply(answer: CalendarAnswer, options: { cacheControl: string; filename: string; ttlSeconds?: number }): Reply {
  const headers: Record<string, string> = {
    ETag: answer.etag,
    'Last-Modified': answer.last_modified.toUTCString(),
    'Cache-Control': options.cacheControl,
  };
  if (!answer.calendar) return { status: 304, headers };
  return {
    status: 200,
    contentType: 'text/calendar; charset=utf-8',
    text: renderCalendar(answer.calendar, options.ttlSeconds),
    headers: {
      ...headers,
      'Content-Disposition': `inline; filename="${options.filename}"`,
      'X-Content-Type-Options': 'nosniff',
    },
  };
}

// iCalendar (RFC 5545) answers: the calendar SQL built (api.calendar_*),
// rendered with ical-generator (CRLF, lines folded at 75 octets, TEXT
// escaped, the file ending with CRLF), and the conditional-GET headers (ETag,
// Last-Modified, 304; the request's are read by conditional.ts), compressed
// (br, gzip) when the client accepts it.
// Which events a calendar lists, their UID, end, SEQUENCE, status, time zone
// and the validators are SQL's; this module only writes them down.
//
// Time zones: an entry's DTSTART and DTEND are local times with TZID=<its
// IANA zone>, and the calendar carries a VTIMEZONE for every zone it names
// (from timezones-ical-library, the current rules of the tz database), as
// RFC 5545 requires and as Outlook needs (Google Calendar reads IANA TZIDs
// alone; Apple Calendar and Outlook read the VTIMEZONE). UTC (and a zone the
// library does not know) is written as UTC (…Z). X-WR-TIMEZONE names the
// calendar's zone (the community's, or the event's) for the apps that take a
// subscribed calendar's zone from it.
import { promisify } from 'node:util';
import zlib from 'node:zlib';
import { TZDate } from '@date-fns/tz';
import ical, { escape, ICalEventStatus } from 'ical-generator';
import Negotiator from 'negotiator';
import { tzlib_get_ical_block, tzlib_get_timezones } from 'timezones-ical-library';
import { usableZone } from '../core/web/time-zones.ts';
import type { Reply } from './route.ts';
import { entityTags, httpDate } from './conditional.ts';

/**
 * The renderer's output format, part of every ETag (SQL hashes it in): change
 * it when the rendering changes, so that clients holding an older file get
 * the new one instead of a 304.
 */
export const CALENDAR_FORMAT = 'ics-2';

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
  /** The event's IANA time zone. */
  timezone: string;
}

export interface CalendarDocument {
  name: string;
  description?: string | null;
  /** The calendar's own zone (X-WR-TIMEZONE): the community's, or the one event's. */
  timezone?: string | null;
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

/** The zones timezones-ical-library has a VTIMEZONE for. */
const ICAL_ZONES = new Set(tzlib_get_timezones());
/** Zones that are UTC under another name: written as UTC times. */
const UTC_ZONES = /^(Etc\/)?(UTC|UCT|GMT|GMT[+-]?0|Greenwich|Universal|Zulu)$/;
const vtimezones = new Map<string, { tzid: string; block: string } | null>();

/**
 * The TZID and VTIMEZONE to write an event's local times with, or null to
 * write them in UTC: for UTC itself, and for a zone that the library or
 * Node's Intl does not know (another name of it, as Intl spells it, is tried).
 */
export function icalZone(zone: string | null | undefined): { tzid: string; block: string } | null {
  if (!zone || UTC_ZONES.test(zone)) return null;
  let found = vtimezones.get(zone);
  if (found !== undefined) return found;
  found = null;
  const candidates = [zone];
  try {
    candidates.push(new Intl.DateTimeFormat('en', { timeZone: zone }).resolvedOptions().timeZone);
  } catch {
    // Intl does not know it: neither can TZDate place a local time in it.
  }
  const name = candidates.find((z) => ICAL_ZONES.has(z));
  if (name) {
    const [block, parameter] = tzlib_get_ical_block(name);
    const tzid = String(parameter ?? '').replace(/^TZID=/, '');
    if (block && tzid && !UTC_ZONES.test(tzid) && usableZone(tzid) === tzid) found = { tzid, block };
  }
  if (vtimezones.size > 2000) vtimezones.clear();
  vtimezones.set(zone, found);
  return found;
}

/** The calendar as iCalendar text, ending with CRLF. `ttlSeconds`: how often subscribers should refresh (REFRESH-INTERVAL, X-PUBLISHED-TTL). */
export function renderCalendar(document: CalendarDocument, ttlSeconds?: number): string {
  const calendar = ical({
    prodId: { company: 'Community backend', product: 'Calendar', language: 'EN' },
    // ical-generator writes the calendar's name and description unescaped: escape them here.
    name: escape(text(document.name), false),
    description: document.description ? escape(text(document.description), false) : null,
    ttl: ttlSeconds ?? null,
  });
  // A VTIMEZONE for every TZID the events name (ical-generator asks for each once).
  calendar.timezone({ name: null, generator: (tzid: string) => icalZone(tzid)?.block ?? null });
  if (document.timezone) calendar.x('X-WR-TIMEZONE', icalZone(document.timezone)?.tzid ?? 'UTC');
  for (const entry of document.events) {
    const zone = icalZone(entry.timezone);
    // Local times in the zone (TZDate: ical-generator writes its wall-clock fields), or UTC.
    const at = (iso: string) => (zone ? new TZDate(new Date(iso).getTime(), zone.tzid) : new Date(iso));
    calendar.createEvent({
      id: entry.uid,
      sequence: entry.sequence,
      start: at(entry.start),
      end: at(entry.end),
      timezone: zone?.tzid ?? null,
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
  // RFC 5545 3.1: every content line ends with CRLF, the last one too.
  return `${calendar.toString()}\r\n`;
}

/** The conditional-GET inputs of a request, as the SQL functions take them (a compressed answer's tag, `"…-br"`, names the same calendar). */
export function conditions(headers: { 'if-none-match'?: string; 'if-modified-since'?: string }): [string[] | null, Date | null] {
  const tags = entityTags(headers['if-none-match'])?.map((tag) => tag.replace(/-(br|gzip)"$/, '"')) ?? null;
  // If-None-Match, when sent, decides alone (RFC 9110 13.1.3).
  return [tags, tags === null ? httpDate(headers['if-modified-since']) : null];
}

const gzip = promisify(zlib.gzip);
const brotli = promisify(zlib.brotliCompress);

/** The content coding to answer with, from Accept-Encoding (q-values honoured): br, else gzip, else none. */
export function contentCoding(acceptEncoding: string | undefined): 'br' | 'gzip' | null {
  if (!acceptEncoding) return null;
  const negotiator = new Negotiator({ headers: { 'accept-encoding': acceptEncoding } });
  // negotiator 1.x takes the server's preference among equal q-values (its @types describe 0.6, without it).
  const encoding = negotiator.encoding.bind(negotiator) as (available: string[], options: { preferred: string[] }) => string | undefined;
  const coding = encoding(['br', 'gzip'], { preferred: ['br', 'gzip'] });
  return coding === 'br' || coding === 'gzip' ? coding : null;
}

/**
 * 200 with the calendar, or 304 with the validators only. `cacheControl`:
 * `no-cache` (store, but ask again: the 304 is cheap), `private, no-cache`
 * for a personal feed. The file is compressed when the client accepts br or
 * gzip (off the event loop, on libuv's threads; a 1,000-event feed shrinks
 * about tenfold); its ETag then names the coding (`"…-br"`), as a compressed
 * file is another representation (RFC 9110 8.8.3), on the 304 too, and
 * If-None-Match takes either spelling. (Every file, small ones too: a 304
 * cannot know the size of the file it stands for, and must carry its ETag.)
 */
export async function calendarReply(
  answer: CalendarAnswer,
  options: { cacheControl: string; filename: string; ttlSeconds?: number; acceptEncoding?: string },
): Promise<Reply> {
  const coding = contentCoding(options.acceptEncoding);
  const headers: Record<string, string> = {
    ETag: answer.etag,
    'Last-Modified': answer.last_modified.toUTCString(),
    'Cache-Control': options.cacheControl,
    Vary: 'Accept-Encoding',
  };
  const taggedFor = (c: string) => `${answer.etag.slice(0, -1)}-${c}"`;
  if (!answer.calendar) return { status: 304, headers: coding ? { ...headers, ETag: taggedFor(coding) } : headers };
  const text = renderCalendar(answer.calendar, options.ttlSeconds);
  const fileHeaders = { ...headers, 'Content-Disposition': `inline; filename="${options.filename}"`, 'X-Content-Type-Options': 'nosniff' };
  const contentType = 'text/calendar; charset=utf-8';
  if (!coding) return { status: 200, contentType, text, headers: fileHeaders };
  const bytes =
    coding === 'br'
      ? await brotli(text, {
          params: {
            [zlib.constants.BROTLI_PARAM_MODE]: zlib.constants.BROTLI_MODE_TEXT,
            [zlib.constants.BROTLI_PARAM_QUALITY]: 5,
            [zlib.constants.BROTLI_PARAM_SIZE_HINT]: Buffer.byteLength(text),
          },
        })
      : await gzip(text, { level: 6 });
  return { status: 200, contentType, text: bytes, headers: { ...fileHeaders, ETag: taggedFor(coding), 'Content-Encoding': coding } };
}

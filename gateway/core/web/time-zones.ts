// Local times of events, for people and for the formats that carry a zone
// (pages, previews, schema.org, iCalendar). Which zone an event has is SQL's
// (its `timezone`: given, else its venue's, else its community's, else
// DEFAULT_TIMEZONE); this module only writes an instant down in that zone,
// with Intl (Node's ICU time zone data).

/** Intl's formatters, one per zone and purpose (building one costs ~50 µs). */
const formatters = new Map<string, Intl.DateTimeFormat>();

function formatter(key: string, make: () => Intl.DateTimeFormat): Intl.DateTimeFormat {
  let f = formatters.get(key);
  if (!f) {
    f = make();
    if (formatters.size > 2000) formatters.clear();
    formatters.set(key, f);
  }
  return f;
}

/**
 * The zone as Intl takes it: the name itself when Intl knows it, else UTC
 * (PostgreSQL and ICU each ship their own time zone data; a name only the
 * database knows is shown in UTC rather than failing the page).
 */
export function usableZone(zone: string | null | undefined): string {
  if (!zone) return 'UTC';
  try {
    formatter(`probe:${zone}`, () => new Intl.DateTimeFormat('en', { timeZone: zone }));
    return zone;
  } catch {
    return 'UTC';
  }
}

/** The zone's offset from UTC at an instant, in minutes (+120 for Paris in summer). */
export function offsetMinutes(instant: Date, zone: string): number {
  const name = formatter(`offset:${zone}`, () => new Intl.DateTimeFormat('en', { timeZone: zone, timeZoneName: 'longOffset' }))
    .formatToParts(instant)
    .find((p) => p.type === 'timeZoneName')?.value;
  const match = /^GMT(?:([+-])(\d{2}):?(\d{2})?)?$/.exec(name ?? '');
  if (!match || !match[1]) return 0;
  const minutes = Number(match[2]) * 60 + Number(match[3] ?? 0);
  return match[1] === '-' ? -minutes : minutes;
}

/** ISO 8601 in the zone, with its offset: `2026-06-05T18:30:00+02:00` (schema.org's startDate, <time datetime>). */
export function localIso(iso: string, zone: string | null | undefined): string {
  const instant = new Date(iso);
  if (Number.isNaN(instant.getTime())) return iso;
  const tz = usableZone(zone);
  const offset = offsetMinutes(instant, tz);
  const local = new Date(instant.getTime() + offset * 60_000).toISOString().slice(0, 19);
  if (offset === 0) return `${local}Z`;
  const sign = offset < 0 ? '-' : '+';
  const abs = Math.abs(offset);
  return `${local}${sign}${String(Math.floor(abs / 60)).padStart(2, '0')}:${String(abs % 60).padStart(2, '0')}`;
}

/**
 * The zone's abbreviation at an instant, as people read it: CEST, EDT, BST,
 * else GMT+9 where the zone has no letters in English (ICU's short names are
 * locale-bound: British English names European zones, American English the
 * American ones; the first with letters is taken).
 */
export function zoneAbbreviation(instant: Date, zone: string): string {
  let fallback = '';
  for (const locale of ['en-GB', 'en-US']) {
    const name = formatter(`abbr:${locale}:${zone}`, () => new Intl.DateTimeFormat(locale, { timeZone: zone, timeZoneName: 'short' }))
      .formatToParts(instant)
      .find((p) => p.type === 'timeZoneName')?.value;
    if (!name) continue;
    if (!/^(GMT|UTC)[+-]/.test(name)) return name;
    fallback ||= name;
  }
  return fallback || 'UTC';
}

/**
 * "Saturday 21 November 2026 at 18:30 CET" in the event's zone; with an end,
 * a range that names the day once when both fall on it. UTC instants in, the
 * local time out, with the zone's abbreviation (at the start).
 */
export function formatLocalTime(startIso: string, endIso: string | null | undefined, zone: string | null | undefined): string {
  const start = new Date(startIso);
  if (Number.isNaN(start.getTime())) return startIso;
  const tz = usableZone(zone);
  const f = formatter(`text:${tz}`, () => new Intl.DateTimeFormat('en-GB', { dateStyle: 'full', timeStyle: 'short', timeZone: tz }));
  const end = endIso ? new Date(endIso) : null;
  const text = !end || Number.isNaN(end.getTime()) ? f.format(start) : f.formatRange(start, end);
  return `${text} ${zoneAbbreviation(start, tz)}`;
}

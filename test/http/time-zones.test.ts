// Time zones, as integrators and readers meet them: an event pushed as
// 18:30+02:00 in Europe/Paris keeps its instant in every REST answer (UTC)
// and names its zone; its page and previews tell 18:30 CEST; its calendar
// entries carry DTSTART;TZID=Europe/Paris with a VTIMEZONE, which ical.js and
// node-ical turn back into the same instant (summer and winter, two zones in
// one feed). Where a zone comes from when none is given: the venue's, else
// the community's (the service default: supabase/tests/events.test.sql).
import crypto from 'node:crypto';
import ICAL from 'ical.js';
import nodeIcal from 'node-ical';
import { beforeAll, describe, expect, it } from 'vitest';
import { api, db, registerUser, type TestUser } from '../helpers.ts';

const tag = () => crypto.randomBytes(5).toString('hex');
const YEAR = new Date().getUTCFullYear() + 1;

let manager: TestUser;
let community: string;

beforeAll(async () => {
  manager = await registerUser('tz-mgr');
  const [c] = await db()<{ id: string }[]>`select admin.create_community(${`Zones ${tag()}`}, null, '{}', ${manager.email}) as id`;
  community = c!.id;
});

async function push(extra: Record<string, unknown>, communityId = community) {
  const res = await api('POST', '/api/v1/platform/events', {
    token: manager.accessToken,
    body: { community_id: communityId, external_platform: 'platform_d', external_id: `tz-${tag()}`, title: `Zoned ${tag()}`, ...extra },
  });
  expect(res.status, res.text).toBe(201);
  const [row] = await db()<{ shortlink: string }[]>`select shortlink from app.events where id = ${res.body.data.event_id}`;
  return { ...(res.body.data as { event_id: string; timezone: string; date: string }), shortlink: row!.shortlink };
}

/** The calendar parsed by ical.js, its VTIMEZONEs registered (as a calendar app resolves TZIDs). */
function icalEvents(text: string) {
  const calendar = new ICAL.Component(ICAL.parse(text));
  for (const vtimezone of calendar.getAllSubcomponents('vtimezone')) ICAL.TimezoneService.register(new ICAL.Timezone(vtimezone));
  return {
    calendar,
    zones: calendar.getAllSubcomponents('vtimezone').map((z) => String(z.getFirstPropertyValue('tzid'))),
    events: calendar.getAllSubcomponents('vevent').map((v) => new ICAL.Event(v)),
  };
}

function jsonLd(html: string): any {
  const match = /<script type="application\/ld\+json">([\s\S]*?)<\/script>/.exec(html);
  expect(match).not.toBeNull();
  return JSON.parse(match![1]!);
}

const meta = (html: string, property: string) =>
  new RegExp(`<meta (?:property|name)="${property}" content="([^"]*)">`).exec(html)?.[1]?.replace(/&#39;/g, "'").replace(/&amp;/g, '&');

describe('an event pushed as 18:30+02:00 in Europe/Paris', () => {
  it('REST keeps the instant (UTC) and adds the zone', async () => {
    const event = await push({ date: `${YEAR}-06-05T18:30:00+02:00`, end_time: `${YEAR}-06-05T21:00:00+02:00`, timezone: 'Europe/Paris' });
    expect(event).toMatchObject({ date: `${YEAR}-06-05T16:30:00.000Z`, timezone: 'Europe/Paris' });
    const read = await api('GET', `/api/mobile/events/${event.event_id}`, { token: manager.accessToken });
    expect(read.body).toMatchObject({ date: `${YEAR}-06-05T16:30:00.000Z`, end_time: `${YEAR}-06-05T19:00:00.000Z`, timezone: 'Europe/Paris' });
    const upcoming = await api('GET', '/api/mobile/events/upcoming', { token: manager.accessToken });
    expect(upcoming.body.find((e: any) => e.id === event.event_id)?.timezone).toBe('Europe/Paris');
  });

  it('the page and its previews tell 18:30–21:00 CEST, and schema.org gets the local time with its offset', async () => {
    const event = await push({ date: `${YEAR}-06-05T18:30:00+02:00`, end_time: `${YEAR}-06-05T21:00:00+02:00`, timezone: 'Europe/Paris' });
    const page = await api('GET', `/e/${event.shortlink}`);
    expect(page.status).toBe(200);
    expect(page.text).toMatch(/18:30\s*[–-]\s*21:00 CEST/);
    expect(page.text).not.toContain('16:30');
    expect(page.text).toContain(`<time datetime="${YEAR}-06-05T18:30:00+02:00">`);
    for (const name of ['og:description', 'twitter:description', 'description']) {
      expect(meta(page.text, name), name).toMatch(/18:30\s*[–-]\s*21:00 CEST/);
    }
    const ld = jsonLd(page.text);
    expect(ld.startDate).toBe(`${YEAR}-06-05T18:30:00+02:00`);
    expect(ld.endDate).toBe(`${YEAR}-06-05T21:00:00+02:00`);
    expect(new Date(ld.startDate).toISOString()).toBe(`${YEAR}-06-05T16:30:00.000Z`);
  });

  it('its .ics says DTSTART;TZID=Europe/Paris with a VTIMEZONE; ical.js and node-ical read back the same instant', async () => {
    const event = await push({ date: `${YEAR}-06-05T18:30:00+02:00`, timezone: 'Europe/Paris' });
    const res = await api('GET', `/e/${event.shortlink}.ics`);
    expect(res.text).toContain(`DTSTART;TZID=Europe/Paris:${YEAR}0605T183000\r\n`);
    expect(res.text).toContain(`DTEND;TZID=Europe/Paris:${YEAR}0605T203000\r\n`);
    expect(res.text).toContain('X-WR-TIMEZONE:Europe/Paris\r\n');
    const { zones, events } = icalEvents(res.text);
    expect(zones).toEqual(['Europe/Paris']);
    const [entry] = events;
    expect(entry!.startDate.zone?.tzid).toBe('Europe/Paris');
    expect([entry!.startDate.hour, entry!.startDate.minute]).toEqual([18, 30]);
    expect(entry!.startDate.toJSDate().toISOString()).toBe(`${YEAR}-06-05T16:30:00.000Z`);
    expect(entry!.endDate.toJSDate().toISOString()).toBe(`${YEAR}-06-05T18:30:00.000Z`);

    const parsed = Object.values(nodeIcal.sync.parseICS(res.text)).find((c) => c?.type === 'VEVENT') as nodeIcal.VEvent;
    expect(parsed.start.toISOString()).toBe(`${YEAR}-06-05T16:30:00.000Z`);
    expect((parsed.start as Date & { tz?: string }).tz).toBe('Europe/Paris');
  });
});

describe('a feed of events in several zones', () => {
  it('one VTIMEZONE per zone named; winter and summer times convert by its rules; UTC events stay UTC', async () => {
    const [c] = await db()<{ id: string }[]>`select admin.create_community(${`Mixed ${tag()}`}, null, '{}', ${manager.email}) as id`;
    const winter = await push({ date: `${YEAR}-01-15T19:00:00+01:00`, timezone: 'Europe/Paris' }, c!.id);
    const summer = await push({ date: `${YEAR}-07-15T19:00:00+02:00`, timezone: 'Europe/Paris' }, c!.id);
    const ny = await push({ date: `${YEAR}-03-20T19:00:00-04:00`, timezone: 'America/New_York' }, c!.id);
    const utc = await push({ date: `${YEAR}-04-01T12:00:00Z`, timezone: 'UTC' }, c!.id);

    const res = await api('GET', `/c/${c!.id}/calendar.ics`);
    expect(res.status).toBe(200);
    const { zones, events } = icalEvents(res.text);
    expect(zones.sort()).toEqual(['America/New_York', 'Europe/Paris']);
    const byUid = new Map(events.map((e) => [e.uid.split('@')[0], e]));
    const expectations: [{ event_id: string }, string, number, string][] = [
      [winter, 'Europe/Paris', 19, `${YEAR}-01-15T18:00:00.000Z`],
      [summer, 'Europe/Paris', 19, `${YEAR}-07-15T17:00:00.000Z`],
      [ny, 'America/New_York', 19, `${YEAR}-03-20T23:00:00.000Z`],
      [utc, 'UTC', 12, `${YEAR}-04-01T12:00:00.000Z`],
    ];
    for (const [event, zone, hour, instant] of expectations) {
      const entry = byUid.get(event.event_id)!;
      expect(entry.startDate.zone?.tzid, zone).toBe(zone);
      expect(entry.startDate.hour).toBe(hour);
      expect(entry.startDate.toJSDate().toISOString()).toBe(instant);
    }
    expect(res.text).toMatch(new RegExp(`DTSTART:${YEAR}0401T120000Z\r\n`));
    // node-ical agrees on every instant.
    const parsed = Object.values(nodeIcal.sync.parseICS(res.text)).filter((x) => x?.type === 'VEVENT') as nodeIcal.VEvent[];
    expect(parsed.map((p) => p.start.toISOString()).sort()).toEqual(expectations.map(([, , , i]) => i).sort());
  });
});

describe('where an event\'s zone comes from', () => {
  it('given (any case: spelled as the tz database does), else the venue\'s, else the community\'s; an unknown name is 422 invalid_timezone', async () => {
    const lower = await push({ date: `${YEAR}-05-01T18:00:00Z`, timezone: 'asia/tokyo' });
    expect(lower.timezone).toBe('Asia/Tokyo');

    const unknown = await api('POST', '/api/v1/platform/events', {
      token: manager.accessToken,
      body: { community_id: community, external_platform: 'platform_d', external_id: `tz-${tag()}`, title: 'Nowhere', date: `${YEAR}-05-01T18:00:00Z`, timezone: 'Mars/Olympus_Mons' },
    });
    expect(unknown.status).toBe(422);
    expect(unknown.body.error).toBe('invalid_timezone');

    // A venue learns its zone from the first event there that names one; later events there take it.
    const venue = { name: `Salle ${tag()}`, address: '5 rue de la Paix, Paris' };
    await push({ date: `${YEAR}-05-02T18:00:00Z`, timezone: 'Europe/Paris', venue });
    const atVenue = await push({ date: `${YEAR}-05-03T18:00:00Z`, venue });
    expect(atVenue.timezone).toBe('Europe/Paris');

    // The community's, set by an operator.
    const [c] = await db()<{ id: string }[]>`select admin.create_community(${`Lisbon ${tag()}`}, null, '{}', ${manager.email}) as id`;
    const [set] = await db()`select admin.set_community_timezone(${c!.id}, 'europe/lisbon') as zone`;
    expect(set!.zone).toBe('Europe/Lisbon');
    const inCommunity = await push({ date: `${YEAR}-05-04T18:00:00Z` }, c!.id);
    expect(inCommunity.timezone).toBe('Europe/Lisbon');
    // ... but a venue's zone wins over it.
    const venueZone = await push({ date: `${YEAR}-05-05T18:00:00Z`, venue }, c!.id);
    expect(venueZone.timezone).toBe('Europe/Paris');
    // The community calendar names the community's zone for the apps that read X-WR-TIMEZONE.
    expect((await api('GET', `/c/${c!.id}/calendar.ics`)).text).toContain('X-WR-TIMEZONE:Europe/Lisbon\r\n');
  });

  it('PATCH changes the zone (a new SEQUENCE: the local time told changes); null takes the venue\'s or community\'s again; a move to a venue with a zone takes it', async () => {
    const event = await push({ date: `${YEAR}-09-10T17:00:00Z`, timezone: 'Europe/Berlin' });
    const moved = await api('PATCH', `/api/v1/platform/events/${event.event_id}`, { token: manager.accessToken, body: { timezone: 'America/Los_Angeles' } });
    expect(moved.status, moved.text).toBe(200);
    expect(moved.body.data).toMatchObject({ timezone: 'America/Los_Angeles', sequence: 1, date: `${YEAR}-09-10T17:00:00.000Z` });
    const ics = await api('GET', `/e/${event.shortlink}.ics`);
    expect(ics.text).toContain(`DTSTART;TZID=America/Los_Angeles:${YEAR}0910T100000\r\n`);
    expect((await api('GET', `/e/${event.shortlink}`)).text).toMatch(/10:00\s*[–-]\s*12:00 PDT/);

    const [c] = await db()<{ id: string }[]>`select admin.create_community(${`Oslo ${tag()}`}, null, '{}', ${manager.email}) as id`;
    await db()`select admin.set_community_timezone(${c!.id}, 'Europe/Oslo')`;
    const other = await push({ date: `${YEAR}-09-11T17:00:00Z`, timezone: 'Asia/Tokyo' }, c!.id);
    const cleared = await api('PATCH', `/api/v1/platform/events/${other.event_id}`, { token: manager.accessToken, body: { timezone: null } });
    expect(cleared.body.data.timezone).toBe('Europe/Oslo');

    const [v] = await db()<{ id: string }[]>`select admin.create_venue(${`Tokyo Hall ${tag()}`}, '1 Ginza') as id`;
    const [venue] = await db()<{ name: string }[]>`select name from app.venues where node_id = ${v!.id}`;
    await db()`select admin.set_venue_timezone(${v!.id}, 'Asia/Tokyo')`;
    const relocated = await api('PATCH', `/api/v1/platform/events/${event.event_id}`, {
      token: manager.accessToken,
      body: { venue: { name: venue!.name, address: '1 Ginza' } },
    });
    expect(relocated.body.data.timezone).toBe('Asia/Tokyo');
  });
});

// Share previews as a search engine reads them: the schema.org Event of
// /e/{shortlink} checked against the fields Google's Event rich result
// requires (name, startDate, location with an address) and recommends
// (description, endDate, eventAttendanceMode, eventStatus, image, offers,
// organizer with a url, performer, previousStartDate), for an event at a
// venue, one with only a location text and one with neither; the organizer's
// page and the default image they name; a cancelled event's page while its
// tombstone is kept, then 404. And the calendar files: CRLF after
// END:VCALENDAR, compressed (br, gzip) when asked, with ETags per coding.
import crypto from 'node:crypto';
import http from 'node:http';
import zlib from 'node:zlib';
import { beforeAll, describe, expect, it } from 'vitest';
import { api, baseUrl, db, publicUrl, registerUser, type TestUser } from '../helpers.ts';
import { createCommunity, createEvent, createVenue } from '../support/event-fixtures.ts';

const tag = () => crypto.randomBytes(5).toString('hex');

/** Google's Event rich result (Search Central, "Event structured data"): what it requires and recommends. */
const REQUIRED = ['name', 'startDate', 'location'] as const;
const RECOMMENDED = ['description', 'endDate', 'eventAttendanceMode', 'eventStatus', 'image', 'offers', 'organizer', 'performer', 'previousStartDate'] as const;
/** What this service's data has no source for (no prices, performers or reschedule history): left out, not invented. */
const NOT_IN_THE_DATA = ['offers', 'performer', 'previousStartDate'];

function jsonLd(html: string): any {
  const blocks = [...html.matchAll(/<script type="application\/ld\+json">([\s\S]*?)<\/script>/g)];
  expect(blocks).toHaveLength(1);
  return JSON.parse(blocks[0]![1]!);
}

/** The rich result's rules, as its test tool applies them; returns the problems found. */
function richResultProblems(data: any): string[] {
  const problems: string[] = [];
  if (data['@context'] !== 'https://schema.org' || data['@type'] !== 'Event') problems.push('not a schema.org Event');
  for (const field of REQUIRED) if (data[field] === undefined || data[field] === '') problems.push(`missing required ${field}`);
  if (Number.isNaN(Date.parse(data.startDate)) || !/([+-]\d{2}:\d{2}|Z)$/.test(data.startDate)) problems.push('startDate without a time zone');
  const location = data.location;
  if (location?.['@type'] === 'Place') {
    if (!location.name) problems.push('location.name');
    if (!location.address) problems.push('missing required location.address');
    else if (typeof location.address === 'object' && location.address['@type'] !== 'PostalAddress') problems.push('location.address not a PostalAddress');
  } else if (location?.['@type'] === 'VirtualLocation') {
    if (!location.url) problems.push('VirtualLocation without url');
  } else problems.push('location neither Place nor VirtualLocation');
  const status = ['EventScheduled', 'EventCancelled', 'EventMovedOnline', 'EventPostponed', 'EventRescheduled'].map((s) => `https://schema.org/${s}`);
  if (data.eventStatus && !status.includes(data.eventStatus)) problems.push('eventStatus');
  const modes = ['Offline', 'Online', 'Mixed'].map((m) => `https://schema.org/${m}EventAttendanceMode`);
  if (data.eventAttendanceMode && !modes.includes(data.eventAttendanceMode)) problems.push('eventAttendanceMode');
  if (data.organizer && (!data.organizer.name || !data.organizer.url)) problems.push('organizer without name and url');
  if (data.image && (!Array.isArray(data.image) || data.image.some((u: string) => !/^https?:\/\//.test(u)))) problems.push('image not absolute URLs');
  if (data.endDate && Date.parse(data.endDate) < Date.parse(data.startDate)) problems.push('endDate before startDate');
  for (const field of RECOMMENDED) if (data[field] === undefined && !NOT_IN_THE_DATA.includes(field)) problems.push(`missing recommended ${field}`);
  return problems;
}

let manager: TestUser;
beforeAll(async () => {
  manager = await registerUser('preview-mgr');
});

describe("the schema.org Event against Google's Event rich result", () => {
  it('an event at a venue with coordinates: every required field and every recommended one the data has', async () => {
    const community = await createCommunity();
    const venue = await createVenue(`Hall ${tag()}`);
    await db()`update app.venues set address = 'Nordstraße 12, 13347 Berlin', latitude = 52.5451, longitude = 13.3592 where node_id = ${venue}`;
    const event = await createEvent({ communityId: community.id, title: 'Bouldering night', starts: '3 days', venueNodeId: venue, description: 'All levels' });
    const page = await api('GET', `/e/${event.shortlink}`);
    expect(page.status).toBe(200);
    const data = jsonLd(page.text);
    expect(richResultProblems(data)).toEqual([]);
    expect(data.location).toMatchObject({
      '@type': 'Place',
      address: { '@type': 'PostalAddress', streetAddress: 'Nordstraße 12, 13347 Berlin' },
      geo: { '@type': 'GeoCoordinates', latitude: 52.5451, longitude: 13.3592 },
    });
    expect(data.eventStatus).toBe('https://schema.org/EventScheduled');
  });

  it('an event with only a location text, and one with neither: the Place still has an address', async () => {
    const community = await createCommunity();
    const texted = await createEvent({ communityId: community.id, title: 'In the park', starts: '2 days' });
    await db()`update app.events set location = 'Tiergarten, by the fountain' where id = ${texted.id}`;
    const bare = await createEvent({ communityId: community.id, title: 'Somewhere', starts: '2 days' });
    for (const event of [texted, bare]) {
      const data = jsonLd((await api('GET', `/e/${event.shortlink}`)).text);
      expect(richResultProblems(data), event.title).toEqual([]);
      expect(data.location.address['@type']).toBe('PostalAddress');
    }
    expect(jsonLd((await api('GET', `/e/${texted.shortlink}`)).text).location.address.streetAddress).toBe('Tiergarten, by the fountain');
  });

  it('before this change the previews failed the rich result (no address without a venue, the address a plain string, no image, no organizer url)', () => {
    // The JSON-LD this service wrote until then, for an event without a venue, as the browser test read it.
    const before = {
      '@context': 'https://schema.org',
      '@type': 'Event',
      name: 'Somewhere',
      startDate: '2026-06-05T16:00:00.000Z',
      endDate: '2026-06-05T18:00:00.000Z',
      eventStatus: 'https://schema.org/EventScheduled',
      eventAttendanceMode: 'https://schema.org/OfflineEventAttendanceMode',
      location: { '@type': 'Place', name: 'Run Club' },
      url: 'https://community.example.com/e/k3Xb9QzA',
      organizer: { '@type': 'Organization', name: 'Run Club' },
    };
    expect(richResultProblems(before)).toEqual([
      'missing required location.address',
      'organizer without name and url',
      'missing recommended description',
      'missing recommended image',
    ]);
  });

  it('the organizer is the community, whose public page lists the event; the image, when the event has none, is a 1200×630 PNG', async () => {
    const [c] = await db()<{ id: string }[]>`select admin.create_community(${`Organizers ${tag()}`}, 'We climb.', '{}', ${manager.email}) as id`;
    const event = await createEvent({ communityId: c!.id, title: `Listed ${tag()}`, starts: '4 days' });
    const data = jsonLd((await api('GET', `/e/${event.shortlink}`)).text);
    expect(data.organizer.url).toBe(`${publicUrl}/c/${c!.id}`);
    const organizer = await api('GET', new URL(data.organizer.url).pathname);
    expect(organizer.status).toBe(200);
    expect(organizer.headers.get('content-type')).toBe('text/html; charset=utf-8');
    expect(organizer.text).toContain(`href="/e/${event.shortlink}"`);
    expect(organizer.text).toContain('We climb.');
    expect(organizer.text).toContain(`href="/c/${c!.id}/calendar.ics"`);
    // A draft community has no public page.
    await db()`select admin.set_community_flags(${c!.id}, null, true)`;
    expect((await api('GET', `/c/${c!.id}`)).status).toBe(404);

    expect(data.image).toEqual([`${publicUrl}/assets/event.png`]);
    const res = await fetch(`${baseUrl}/assets/event.png`);
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toBe('image/png');
    const png = Buffer.from(await res.arrayBuffer());
    expect(png.subarray(0, 8)).toEqual(Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]));
    expect(png.subarray(12, 16).toString('ascii')).toBe('IHDR');
    expect([png.readUInt32BE(16), png.readUInt32BE(20)]).toEqual([1200, 630]);
    // The pixels inflate to exactly 630 rows of 1200 RGB pixels and a filter byte each.
    const idat = png.indexOf('IDAT');
    const raw = zlib.inflateSync(png.subarray(idat + 4, idat + 4 + png.readUInt32BE(idat - 4)));
    expect(raw.length).toBe(630 * (1200 * 3 + 1));
  });
});

describe('a cancelled event', () => {
  it('its page stays, says so and is EventCancelled (200) while its tombstone is kept; then it is 404', async () => {
    const community = await createCommunity();
    const event = await createEvent({ communityId: community.id, title: 'Called off', starts: '5 days', description: 'It was to be fun' });
    await db()`delete from app.events where id = ${event.id}`;
    const page = await api('GET', `/e/${event.shortlink}`);
    expect(page.status).toBe(200);
    expect(page.text).toContain('This event has been cancelled.');
    expect(page.text).toContain('<title>Cancelled: Called off');
    const data = jsonLd(page.text);
    expect(data.eventStatus).toBe('https://schema.org/EventCancelled');
    expect(richResultProblems(data)).toEqual([]);
    expect(data.name).toBe('Called off');
    expect(page.text).toMatch(/<meta property="og:title" content="Cancelled: Called off">/);
    expect(page.text).not.toContain('>Check in<');

    // The tombstone goes once the event's end is 30 days past (the calendars stop listing it then too).
    await db()`update app.event_tombstones set starts_at = now() - interval '40 days', ends_at = null where event_id = ${event.id}`;
    await db()`select private.event_tombstones_prune()`;
    expect((await api('GET', `/e/${event.shortlink}`)).status).toBe(404);
  });
});

/** A GET with Accept-Encoding, the body as sent (fetch would decode it). */
function rawGet(path: string, headers: Record<string, string>): Promise<{ status: number; headers: http.IncomingHttpHeaders; body: Buffer }> {
  return new Promise((resolve, reject) => {
    const req = http.get(`${baseUrl}${path}`, { headers }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => resolve({ status: res.statusCode!, headers: res.headers, body: Buffer.concat(chunks) }));
    });
    req.on('error', reject);
  });
}

describe('calendar files', () => {
  it('end with CRLF after END:VCALENDAR (RFC 5545 3.1)', async () => {
    const community = await createCommunity();
    const event = await createEvent({ communityId: community.id, title: 'Framed', starts: '2 days' });
    for (const path of [`/e/${event.shortlink}.ics`, `/c/${community.id}/calendar.ics`]) {
      const res = await rawGet(path, {});
      expect(res.body.toString('utf8').endsWith('END:VCALENDAR\r\n'), path).toBe(true);
    }
  });

  it('a large feed is compressed when asked (br preferred, else gzip), decoding to the same file; its ETag names the coding and gives 304', async () => {
    const community = await createCommunity();
    for (let i = 0; i < 300; i += 50) {
      await Promise.all(Array.from({ length: 50 }, (_, j) => createEvent({ communityId: community.id, title: `Weekly run ${i + j}`, starts: `${i + j + 1} days`, description: 'Meet at the gate. '.repeat(5) })));
    }
    const path = `/c/${community.id}/calendar.ics`;
    const plain = await rawGet(path, {});
    expect(plain.status).toBe(200);
    expect(plain.headers['content-encoding']).toBeUndefined();
    expect(plain.headers.vary).toBe('Accept-Encoding');
    const text = plain.body.toString('utf8');
    expect(plain.body.length).toBeGreaterThan(100_000);

    const cases: [string, string, (b: Buffer) => Buffer][] = [
      ['gzip, deflate, br', 'br', zlib.brotliDecompressSync],
      ['br;q=0, gzip', 'gzip', zlib.gunzipSync],
      ['gzip;q=0.8, br;q=0.9', 'br', zlib.brotliDecompressSync],
      ['x-gzip, gzip', 'gzip', zlib.gunzipSync],
    ];
    for (const [accept, coding, decode] of cases) {
      const res = await rawGet(path, { 'accept-encoding': accept });
      expect(res.status, accept).toBe(200);
      expect(res.headers['content-encoding'], accept).toBe(coding);
      expect(res.headers.etag).toBe(`${plain.headers.etag!.slice(0, -1)}-${coding}"`);
      expect(Number(res.headers['content-length'])).toBe(res.body.length);
      expect(res.body.length, `${coding}: ${res.body.length} of ${plain.body.length}`).toBeLessThan(plain.body.length / 5);
      expect(decode(res.body).toString('utf8')).toBe(text);
      // Either spelling of the tag is the same calendar: 304, with the tag of the coding asked for.
      for (const held of [res.headers.etag!, plain.headers.etag!]) {
        const again = await rawGet(path, { 'accept-encoding': accept, 'if-none-match': held });
        expect(again.status, `${accept} / ${held}`).toBe(304);
        expect(again.body.length).toBe(0);
        expect(again.headers.etag).toBe(res.headers.etag);
      }
    }
    // identity only, or nothing acceptable: uncompressed.
    for (const accept of ['identity', 'deflate', 'br;q=0, gzip;q=0']) {
      const res = await rawGet(path, { 'accept-encoding': accept });
      expect(res.headers['content-encoding'], accept).toBeUndefined();
      expect(res.body.toString('utf8')).toBe(text);
    }
  });
});

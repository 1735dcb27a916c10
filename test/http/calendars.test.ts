// Calendars: every .ics is parsed with ical.js (a real iCalendar parser) and
// checked line by line against RFC 5545's framing (CRLF, lines folded at 75
// octets). One event; a community feed across an update and a delete
// (SEQUENCE grows, STATUS:CANCELLED); the personal feed before and after
// rotation and revocation; hostile text (commas, semicolons, newlines, emoji,
// 200-character lines, control characters, a community name that tries to
// inject properties); conditional GETs (If-None-Match, If-Modified-Since);
// the personal feed across a re-hash at sign-in (kept) and a password change
// (ended).
import crypto from 'node:crypto';
import fs from 'node:fs';
import ICAL from 'ical.js';
import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../gateway/core/process/config.ts';
import { createLogger } from '../../gateway/core/process/log.ts';
import { startGateway } from '../../gateway/server.ts';
import { api, baseUrl, databaseUrl, db, jwtSecret, logFile, publicUrl, registerUser } from '../helpers.ts';
import { createCommunity, createEvent, createVenue } from '../support/event-fixtures.ts';
import { UUID } from '../support/formats.ts';
import { addMember } from '../support/sql-fixtures.ts';
import { emailLinkRun } from '../support/email-links.ts';

const HOST = new URL(publicUrl).hostname;

interface Entry {
  uid: string;
  summary: string;
  description: string | null;
  location: string | null;
  url: string | null;
  status: string | null;
  sequence: number;
  start: Date;
  end: Date;
  stamp: Date;
  startIsUtc: boolean;
  endIsUtc: boolean;
}

interface Parsed {
  name: string | null;
  entries: Entry[];
}

/** RFC 5545 3.1: CRLF line breaks, content lines of at most 75 octets. */
function expectFraming(text: string): void {
  expect(text.endsWith('END:VCALENDAR\r\n'), 'RFC 5545 3.1: the last line ends with CRLF too').toBe(true);
  expect(text.replace(/\r\n/g, '')).not.toMatch(/[\r\n]/);
  for (const line of text.split('\r\n')) expect(Buffer.byteLength(line), line).toBeLessThanOrEqual(75);
  expect(text.startsWith('BEGIN:VCALENDAR\r\nVERSION:2.0\r\n')).toBe(true);
}

function parse(text: string): Parsed {
  expectFraming(text);
  const calendar = new ICAL.Component(ICAL.parse(text));
  expect(calendar.name).toBe('vcalendar');
  const entries = calendar.getAllSubcomponents('vevent').map((vevent): Entry => {
    const event = new ICAL.Event(vevent);
    const value = (name: string) => {
      const v = vevent.getFirstPropertyValue(name);
      return v === null || v === undefined ? null : String(v);
    };
    return {
      uid: event.uid,
      summary: event.summary,
      description: event.description ?? null,
      location: event.location ?? null,
      url: value('url'),
      status: value('status'),
      sequence: event.sequence,
      start: event.startDate.toJSDate(),
      end: event.endDate.toJSDate(),
      stamp: (vevent.getFirstPropertyValue('dtstamp') as ICAL.Time).toJSDate(),
      startIsUtc: event.startDate.zone === ICAL.Timezone.utcTimezone,
      endIsUtc: event.endDate.zone === ICAL.Timezone.utcTimezone,
    };
  });
  // ical.js leaves X- properties as written: unescape the TEXT (RFC 5545 3.3.11) here.
  const name = calendar.getFirstPropertyValue('x-wr-calname');
  const unescaped = name === null ? null : String(name).replace(/\\([\\;,nN])/g, (_, c: string) => (c === 'n' || c === 'N' ? '\n' : c));
  return { name: unescaped, entries };
}

async function ics(path: string, headers: Record<string, string> = {}) {
  const res = await api('GET', path, { headers });
  return { status: res.status, text: res.text, headers: res.headers, body: res.body };
}

async function eventRow(id: string) {
  const [row] = await db()`select id, shortlink, starts_at, ends_at, sequence from app.events where id = ${id}`;
  return row!;
}

describe('GET /e/{shortlink}.ics', () => {
  it('one event: UID <id>@<PUBLIC_URL host>, UTC times with the effective end, every field', async () => {
    const community = await createCommunity();
    const venue = await createVenue('The Hall');
    const event = await createEvent({ communityId: community.id, title: 'Open evening', starts: '3 days', venueNodeId: venue, description: 'Bring a friend' });
    const row = await eventRow(event.id);

    const res = await ics(`/e/${event.shortlink}.ics`);
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toBe('text/calendar; charset=utf-8');
    expect(res.headers.get('etag')).toMatch(/^"[0-9a-f]{32}(-gzip|-br)?"$/);
    expect(new Date(res.headers.get('last-modified')!).getTime()).not.toBeNaN();
    const { entries } = parse(res.text);
    expect(entries).toHaveLength(1);
    const [entry] = entries;
    expect(entry).toMatchObject({
      uid: `${event.id}@${HOST}`,
      summary: 'Open evening',
      description: 'Bring a friend',
      location: 'The Hall, 1 Main St',
      url: `${publicUrl}/e/${event.shortlink}`,
      status: 'CONFIRMED',
      sequence: 0,
      startIsUtc: true,
      endIsUtc: true,
    });
    expect(entry!.start.getTime()).toBe(Math.floor(row.starts_at.getTime() / 1000) * 1000);
    // No end_time: the effective end, 2 hours after the date.
    expect(entry!.end.getTime() - entry!.start.getTime()).toBe(2 * 3600 * 1000);
    expect(res.text).toMatch(/\r\nDTSTART:\d{8}T\d{6}Z\r\n/);
    expect(res.text).toMatch(/\r\nDTEND:\d{8}T\d{6}Z\r\n/);
    expect(res.text).toMatch(/\r\nDTSTAMP:\d{8}T\d{6}Z\r\n/);
  });

  it('an end_time is the end; HEAD answers the headers only', async () => {
    const community = await createCommunity();
    const event = await createEvent({ communityId: community.id, starts: '1 day', ends: '1 day 5 hours' });
    const { entries } = parse((await ics(`/e/${event.shortlink}.ics`)).text);
    expect(entries[0]!.end.getTime() - entries[0]!.start.getTime()).toBe(5 * 3600 * 1000);
    const head = await fetch(`${baseUrl}/e/${event.shortlink}.ics`, { method: 'HEAD' });
    expect(head.status).toBe(200);
    expect(head.headers.get('etag')).toMatch(/^"/);
    expect(await head.text()).toBe('');
  });

  it('unknown or malformed shortlinks are a JSON 404', async () => {
    for (const shortlink of ['ZZZZZZZZ', 'short', '%00%00%00%00', 'ABCDEFGH.ics']) {
      const res = await ics(`/e/${shortlink}.ics`);
      expect(res.status, shortlink).toBe(404);
      expect(res.body.error).toBe(shortlink === 'ZZZZZZZZ' ? 'event_not_found' : 'not_found');
    }
    // The page is still the page.
    const community = await createCommunity();
    const event = await createEvent({ communityId: community.id, starts: '1 day' });
    expect((await api('GET', `/e/${event.shortlink}`)).headers.get('content-type')).toMatch(/^text\/html/);
  });

  it('a deleted event: STATUS:CANCELLED with a higher SEQUENCE; its page says cancelled (its preview: share-previews.test.ts)', async () => {
    const community = await createCommunity();
    const event = await createEvent({ communityId: community.id, title: 'Going away', starts: '2 days' });
    await db()`update app.events set title = 'Going away soon' where id = ${event.id}`;
    await db()`delete from app.events where id = ${event.id}`;
    const res = await ics(`/e/${event.shortlink}.ics`);
    expect(res.status).toBe(200);
    const [entry] = parse(res.text).entries;
    expect(entry).toMatchObject({ uid: `${event.id}@${HOST}`, summary: 'Going away soon', status: 'CANCELLED', sequence: 2 });
    const page = await api('GET', `/e/${event.shortlink}`);
    expect(page.status).toBe(200);
    expect(page.text).toContain('This event has been cancelled.');
  });
});

describe('GET /c/{community_id}/calendar.ics', () => {
  it('lists events from 30 days ago on; an update raises SEQUENCE; a delete is CANCELLED; the ETag follows', async () => {
    const community = await createCommunity();
    const old = await createEvent({ communityId: community.id, title: 'Long ago', starts: '-40 days' });
    const recent = await createEvent({ communityId: community.id, title: 'Last week', starts: '-7 days' });
    const updated = await createEvent({ communityId: community.id, title: 'Before', starts: '5 days' });
    const deleted = await createEvent({ communityId: community.id, title: 'To be cancelled', starts: '6 days' });
    const other = await createEvent({ communityId: (await createCommunity()).id, title: 'Elsewhere', starts: '5 days' });

    const first = await ics(`/c/${community.id}/calendar.ics`);
    expect(first.status).toBe(200);
    expect(first.headers.get('content-type')).toBe('text/calendar; charset=utf-8');
    const before = parse(first.text);
    expect(before.name).toBe((await db()`select name from app.communities where id = ${community.id}`)[0]!.name);
    const uids = before.entries.map((e) => e.uid);
    expect(uids).toEqual([recent, updated, deleted].map((e) => `${e.id}@${HOST}`));
    expect(uids).not.toContain(`${old.id}@${HOST}`);
    expect(uids).not.toContain(`${other.id}@${HOST}`);
    expect(before.entries.every((e) => e.status === 'CONFIRMED' && e.sequence === 0)).toBe(true);
    expect(first.text).toContain('REFRESH-INTERVAL;VALUE=DURATION:PT1H');

    await db()`update app.events set title = 'After', ends_at = starts_at + interval '3 hours' where id = ${updated.id}`;
    await db()`delete from app.events where id = ${deleted.id}`;

    // The old ETag no longer matches: the new calendar comes back.
    const second = await ics(`/c/${community.id}/calendar.ics`, { 'if-none-match': first.headers.get('etag')! });
    expect(second.status).toBe(200);
    expect(second.headers.get('etag')).not.toBe(first.headers.get('etag'));
    const after = parse(second.text);
    const byUid = new Map(after.entries.map((e) => [e.uid, e]));
    expect(after.entries).toHaveLength(3);
    expect(byUid.get(`${updated.id}@${HOST}`)).toMatchObject({ summary: 'After', sequence: 1, status: 'CONFIRMED' });
    const changed = byUid.get(`${updated.id}@${HOST}`)!;
    expect(changed.end.getTime() - changed.start.getTime()).toBe(3 * 3600 * 1000);
    expect(byUid.get(`${deleted.id}@${HOST}`)).toMatchObject({ summary: 'To be cancelled', sequence: 1, status: 'CANCELLED' });
    expect(byUid.get(`${recent.id}@${HOST}`)).toMatchObject({ sequence: 0, status: 'CONFIRMED' });

    // A change that is no change leaves SEQUENCE alone.
    await db()`update app.events set title = title where id = ${recent.id}`;
    expect((await eventRow(recent.id)).sequence).toBe(0);
  });

  it('a venue change reaches LOCATION and the ETag', async () => {
    const community = await createCommunity();
    const venue = await createVenue(`Venue ${crypto.randomBytes(3).toString('hex')}`);
    await createEvent({ communityId: community.id, starts: '2 days', venueNodeId: venue });
    const first = await ics(`/c/${community.id}/calendar.ics`);
    await db()`update app.venues set address = '2 Side St' where node_id = ${venue}`;
    const second = await ics(`/c/${community.id}/calendar.ics`, { 'if-none-match': first.headers.get('etag')! });
    expect(second.status).toBe(200);
    expect(parse(second.text).entries[0]!.location).toMatch(/, 2 Side St$/);
  });

  it('draft, unknown and malformed communities are 404', async () => {
    const draft = await createCommunity();
    await db()`select admin.set_community_flags(${draft.id}, false, true)`;
    await createEvent({ communityId: draft.id, starts: '1 day' });
    const res = await ics(`/c/${draft.id}/calendar.ics`);
    expect(res.status).toBe(404);
    expect(res.body.error).toBe('community_not_found');
    expect((await ics(`/c/${crypto.randomUUID()}/calendar.ics`)).body.error).toBe('community_not_found');
    expect((await ics('/c/not-a-uuid/calendar.ics')).status).toBe(404);
  });

  it('an empty community is a valid calendar without events', async () => {
    const community = await createCommunity();
    const res = await ics(`/c/${community.id}/calendar.ics`);
    expect(res.status).toBe(200);
    expect(parse(res.text).entries).toEqual([]);
  });
});

describe('conditional GET', () => {
  it('If-None-Match with the ETag (strong, weak, in a list, or *) is 304 with no body; another ETag is 200', async () => {
    const community = await createCommunity();
    await createEvent({ communityId: community.id, starts: '1 day' });
    const path = `/c/${community.id}/calendar.ics`;
    const first = await ics(path);
    const etag = first.headers.get('etag')!;
    for (const header of [etag, `W/${etag}`, `"nope", ${etag}`, '*']) {
      const res = await ics(path, { 'if-none-match': header });
      expect(res.status, header).toBe(304);
      expect(res.text).toBe('');
      expect(res.headers.get('etag')).toBe(etag);
      expect(res.headers.get('last-modified')).toBe(first.headers.get('last-modified'));
      expect(res.headers.get('content-type')).toBeNull();
    }
    expect((await ics(path, { 'if-none-match': '"something else"' })).status).toBe(200);
    expect((await ics(path, { 'if-none-match': 'garbage' })).status).toBe(200);
  });

  it('If-Modified-Since at or after Last-Modified is 304 (without If-None-Match); an earlier date is 200', async () => {
    const community = await createCommunity();
    const event = await createEvent({ communityId: community.id, starts: '1 day' });
    const first = await ics(`/e/${event.shortlink}.ics`);
    const lastModified = first.headers.get('last-modified')!;
    expect((await ics(`/e/${event.shortlink}.ics`, { 'if-modified-since': lastModified })).status).toBe(304);
    const earlier = new Date(new Date(lastModified).getTime() - 60_000).toUTCString();
    expect((await ics(`/e/${event.shortlink}.ics`, { 'if-modified-since': earlier })).status).toBe(200);
    expect((await ics(`/e/${event.shortlink}.ics`, { 'if-modified-since': 'not a date' })).status).toBe(200);
    // If-None-Match decides alone when both are sent.
    expect((await ics(`/e/${event.shortlink}.ics`, { 'if-modified-since': lastModified, 'if-none-match': '"other"' })).status).toBe(200);
  });
});

describe('personal feed: POST/DELETE /api/mobile/calendar/feed, GET /cal/{token}.ics', () => {
  it("lists the upcoming events of all the user's communities; rotating makes the old URL 404; DELETE revokes", async () => {
    const user = await registerUser('calendar');
    const one = await createCommunity();
    const two = await createCommunity();
    const notMine = await createCommunity();
    await addMember(one.id, user.userId);
    await addMember(two.id, user.userId, 'manager');
    const a = await createEvent({ communityId: one.id, title: 'A', starts: '1 day' });
    const b = await createEvent({ communityId: two.id, title: 'B', starts: '2 days' });
    const ongoing = await createEvent({ communityId: two.id, title: 'Ongoing', starts: '-1 hour', ends: '1 hour' });
    const past = await createEvent({ communityId: one.id, title: 'Past', starts: '-3 days' });
    const elsewhere = await createEvent({ communityId: notMine.id, title: 'Not mine', starts: '1 day' });

    const created = await api('POST', '/api/mobile/calendar/feed', { token: user.accessToken });
    expect(created.status).toBe(201);
    expect(created.body).toEqual({ success: true, data: { url: expect.any(String), webcal_url: expect.any(String) } });
    const url = new URL(created.body.data.url);
    expect(`${url.origin}`).toBe(new URL(publicUrl).origin);
    expect(url.pathname).toMatch(/^\/cal\/[A-Za-z0-9_-]{43}\.ics$/);
    expect(created.body.data.webcal_url).toBe(created.body.data.url.replace(/^https?:/, 'webcal:'));

    const feed = await ics(url.pathname);
    expect(feed.status).toBe(200);
    expect(feed.headers.get('cache-control')).toBe('private, no-cache');
    const uids = parse(feed.text).entries.map((e) => e.uid);
    expect(uids).toEqual([ongoing, a, b].map((e) => `${e.id}@${HOST}`));
    expect(uids).not.toContain(`${past.id}@${HOST}`);
    expect(uids).not.toContain(`${elsewhere.id}@${HOST}`);

    // Only the token's SHA-256 is stored.
    const token = url.pathname.slice('/cal/'.length, -'.ics'.length);
    const [stored] = await db()`select encode(token_hash, 'hex') as hash from app.calendar_feeds where user_id = ${user.userId}`;
    expect(stored!.hash).toBe(crypto.createHash('sha256').update(token).digest('hex'));

    // A deleted event of the feed is listed as cancelled.
    await db()`delete from app.events where id = ${a.id}`;
    const afterDelete = parse((await ics(url.pathname, { 'if-none-match': feed.headers.get('etag')! })).text);
    expect(afterDelete.entries.find((e) => e.uid === `${a.id}@${HOST}`)).toMatchObject({ status: 'CANCELLED' });

    // Rotation: a new URL; the old one is 404.
    const rotated = await api('POST', '/api/mobile/calendar/feed', { token: user.accessToken });
    expect(rotated.status).toBe(201);
    expect(rotated.body.data.url).not.toBe(created.body.data.url);
    const old = await ics(url.pathname);
    expect(old.status).toBe(404);
    expect(old.body.error).toBe('calendar_not_found');
    const newPath = new URL(rotated.body.data.url).pathname;
    expect(parse((await ics(newPath)).text).entries.map((e) => e.uid)).toContain(`${b.id}@${HOST}`);

    // Revocation.
    const revoked = await api('DELETE', '/api/mobile/calendar/feed', { token: user.accessToken });
    expect(revoked.status).toBe(204);
    expect(revoked.text).toBe('');
    expect((await ics(newPath)).status).toBe(404);
    expect((await api('DELETE', '/api/mobile/calendar/feed', { token: user.accessToken })).status).toBe(204);
  });

  it('needs a credential; malformed tokens are 404; the token never reaches the log', async () => {
    expect((await api('POST', '/api/mobile/calendar/feed')).status).toBe(401);
    expect((await api('DELETE', '/api/mobile/calendar/feed')).status).toBe(401);
    for (const token of ['short', 'A'.repeat(44), `${'A'.repeat(42)}%00`]) expect((await ics(`/cal/${token}.ics`)).status).toBe(404);
    expect((await ics(`/cal/${'A'.repeat(43)}.ics`)).body.error).toBe('calendar_not_found');

    const user = await registerUser('calendar-log');
    const created = await api('POST', '/api/mobile/calendar/feed', { token: user.accessToken });
    const path = new URL(created.body.data.url).pathname;
    expect((await ics(path)).status).toBe(200);
    const token = path.slice('/cal/'.length, -'.ics'.length);
    await new Promise((resolve) => setTimeout(resolve, 300)); // the log line is written when the response finishes
    const log = fs.readFileSync(logFile, 'utf8');
    expect(log).toContain('/cal/:token.ics');
    expect(log).not.toContain(token);
  });
});

describe('the personal feed and passwords (security review round 4)', () => {
  it('a sign-in after BCRYPT_COST was raised re-hashes the password and the feed keeps working; a password change ends it', async () => {
    const user = await registerUser('calendar-rehash');
    const community = await createCommunity();
    await addMember(community.id, user.userId);
    const event = await createEvent({ communityId: community.id, title: 'Still subscribed', starts: '1 day' });
    const created = await api('POST', '/api/mobile/calendar/feed', { token: user.accessToken });
    expect(created.status).toBe(201);
    const feedPath = new URL(created.body.data.url).pathname;
    const hash = async () => (await db()`select password_hash from identity.users where id = ${user.userId}`)[0]!.password_hash as string;
    expect(await hash()).toMatch(/^\$2[aby]\$10\$/);

    // The operator raises BCRYPT_COST: a gateway with cost 11 on the same database.
    const config = loadConfig({ PORT: '0', HOST: '127.0.0.1', JWT_SECRET: jwtSecret, PUBLIC_URL: publicUrl, DB_POOL_MAX: '4', BCRYPT_COST: '11' });
    const raised = await startGateway(config, databaseUrl, createLogger('silent'), { includeCurrentMigration: false });
    try {
      const login = await fetch(`${raised.url}/api/auth/login`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ email: user.email, password: user.password }),
      });
      expect(login.status).toBe(200);
    } finally {
      await raised.close();
    }
    expect(await hash()).toMatch(/^\$2[aby]\$11\$/); // re-hashed at the new cost
    const after = await ics(feedPath);
    expect(after.status).toBe(200);
    expect(parse(after.text).entries.map((e) => e.uid)).toContain(`${event.id}@${HOST}`);

    // A real password change (through a set-password link) ends the feed URL.
    await api('POST', '/api/auth/recover', { body: { email: user.email } });
    await emailLinkRun('recover', user.email);
    const [mail] = await db()`
      select link from app.email_outbox where to_email = ${user.email} and purpose = 'recover' order by created_at desc limit 1`;
    const token = new URL(mail!.link as string).searchParams.get('token')!;
    expect((await api('POST', '/api/auth/set-password', { body: { token, password: 'a-brand-new-password' } })).status).toBe(200);
    const ended = await ics(feedPath);
    expect(ended.status).toBe(404);
    expect(ended.body.error).toBe('calendar_not_found');
  });
});

describe('hostile text', () => {
  const long = `${'Lorem ipsum, dolor; sit amet '.repeat(7)}`.slice(0, 200);
  const cases: [string, string][] = [
    ['commas and semicolons', 'Drinks, snacks; music \\ more'],
    ['newlines', 'line one\nline two\r\nline three'],
    ['emoji', '🎉 Party 🥳 with 👩‍👩‍👧‍👦 family'],
    ['200 characters on one line', long],
    ['200 characters of emoji', '😀'.repeat(200)],
    ['markup and quotes', '</script><script>alert(1)</script> "quoted" \'single\''],
  ];

  it.each(cases)('%s: parsed back exactly, lines folded', async (_name, text) => {
    const community = await createCommunity();
    const event = await createEvent({ communityId: community.id, title: text, starts: '1 day', description: `${text}\n${long}` });
    await db()`update app.events set location = ${text} where id = ${event.id}`;
    const res = await ics(`/e/${event.shortlink}.ics`);
    const [entry] = parse(res.text).entries;
    const normalised = (s: string) => s.replace(/\r\n?/g, '\n');
    // Titles are stored trimmed of spaces (admin.create_event).
    expect(entry!.summary).toBe(normalised(text.replace(/^ +| +$/g, '')));
    expect(entry!.description).toBe(normalised(`${text}\n${long}`));
    expect(entry!.location).toBe(normalised(text));
  });

  it('control characters are dropped (RFC 5545 TEXT allows none but tab)', async () => {
    const community = await createCommunity();
    const event = await createEvent({ communityId: community.id, title: 'bell\u0007 escape\u001b tab\tok', starts: '1 day' });
    const [entry] = parse((await ics(`/e/${event.shortlink}.ics`)).text).entries;
    expect(entry!.summary).toBe('bell escape tab\tok');
  });

  it('a community name cannot add properties or components (the name is escaped too)', async () => {
    const community = await createCommunity();
    const evil = 'Club\r\nBEGIN:VEVENT\r\nUID:evil\r\nSUMMARY:injected\r\nEND:VEVENT\r\nX-EVIL:1; a, b';
    await db()`update app.communities set name = ${evil}, description = ${evil} where id = ${community.id}`;
    await createEvent({ communityId: community.id, title: 'Real', starts: '1 day' });
    const res = await ics(`/c/${community.id}/calendar.ics`);
    const parsed = parse(res.text);
    expect(parsed.entries.map((e) => e.summary)).toEqual(['Real']);
    expect(parsed.name).toBe(evil.replace(/\r\n/g, '\n'));
    expect(res.text).not.toMatch(/\r\nX-EVIL/);
  });

  it('UIDs are the event ids at the PUBLIC_URL host', async () => {
    const community = await createCommunity();
    const events = await Promise.all([1, 2, 3].map((n) => createEvent({ communityId: community.id, starts: `${n} days` })));
    const { entries } = parse((await ics(`/c/${community.id}/calendar.ics`)).text);
    for (const entry of entries) expect(entry.uid).toMatch(new RegExp(`^${UUID.source.slice(1, -1)}@${HOST.replace(/\./g, '\\.')}$`));
    expect(new Set(entries.map((e) => e.uid)).size).toBe(events.length);
  });
});

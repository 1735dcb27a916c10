// A platform updating and cancelling its events, watched as integrators
// watch them: the realtime stream (SSE), the calendars (ical.js and
// node-ical), a webhook receiver verifying signatures with
// `standardwebhooks`, and the public page. Also: who may (every credential
// case over HTTP), a repeated create that says what it did not apply, the
// optional description, hostile bodies, and races (parallel PATCHes; PATCH
// against DELETE).
import crypto from 'node:crypto';
import ICAL from 'ical.js';
import nodeIcal from 'node-ical';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { api, db, expectErrorShape, publicUrl, registerUser, type TestUser } from '../helpers.ts';
import { createToken, joinCommunity } from '../support/api-tokens.ts';
import { openStream } from '../support/sse.ts';
import { verifyWebhook, WebhookReceiver, type ReceivedWebhook } from '../support/webhook-receiver.ts';

const HOST = new URL(publicUrl).hostname;
const tag = () => crypto.randomBytes(5).toString('hex');
const inDays = (days: number, hour = 18) => {
  const d = new Date(Date.now() + days * 86_400_000);
  d.setUTCHours(hour, 0, 0, 0);
  return d.toISOString();
};

const receiver = new WebhookReceiver();
let manager: TestUser;
let member: TestUser;
let stranger: TestUser;
let otherManager: TestUser;
let community: string;
let otherCommunity: string;
let hook: { id: string; secret: string; path: string };

beforeAll(async () => {
  await receiver.start();
  [manager, member, stranger, otherManager] = await Promise.all([
    registerUser('pe-mgr'),
    registerUser('pe-member'),
    registerUser('pe-stranger'),
    registerUser('pe-other'),
  ]);
  const [c] = await db()<{ id: string }[]>`select admin.create_community(${`Platform ${tag()}`}, null, '{}', ${manager.email}) as id`;
  const [o] = await db()<{ id: string }[]>`select admin.create_community(${`Other ${tag()}`}, null, '{}', ${otherManager.email}) as id`;
  community = c!.id;
  otherCommunity = o!.id;
  await joinCommunity(member, community);
  const path = `/pe-${tag()}`;
  const res = await api('POST', '/api/v1/platform/webhooks', {
    token: manager.accessToken,
    body: { community_id: community, url: receiver.url(path), events: ['event.created', 'event.updated', 'event.deleted'] },
  });
  expect(res.status, res.text).toBe(201);
  hook = { id: res.body.data.id, secret: res.body.data.secret, path };
});
afterAll(async () => {
  await receiver.stop();
});

const post = (body: Record<string, unknown>, token = manager.accessToken) => api('POST', '/api/v1/platform/events', { token, body });
/** `token` null: no credential. */
const patch = (ref: string, body: unknown, token: string | null = manager.accessToken) =>
  api('PATCH', `/api/v1/platform/events/${ref}`, { token: token ?? undefined, body });
const remove = (ref: string, token: string | null = manager.accessToken) => api('DELETE', `/api/v1/platform/events/${ref}`, { token: token ?? undefined });
const external = (platform: string, id: string) => `external/${platform}/${encodeURIComponent(id)}`;

async function pushEvent(extra: Record<string, unknown> = {}) {
  const externalId = `evt-${tag()}`;
  const res = await post({
    community_id: community,
    external_platform: 'platform_a',
    external_id: externalId,
    title: `Meetup ${tag()}`,
    date: inDays(3),
    ...extra,
  });
  expect(res.status, res.text).toBe(201);
  return { ...(res.body.data as { event_id: string; event_node_id: string; title: string; sequence: number }), externalId };
}

async function shortlinkOf(eventId: string): Promise<string> {
  const [row] = await db()<{ shortlink: string }[]>`select shortlink from app.events where id = ${eventId}`;
  return row!.shortlink;
}

/** The one VEVENT of /e/{shortlink}.ics, read by ical.js. */
async function calendarEntry(shortlink: string) {
  const res = await api('GET', `/e/${shortlink}.ics`);
  expect(res.status).toBe(200);
  const vevent = new ICAL.Component(ICAL.parse(res.text)).getFirstSubcomponent('vevent')!;
  const event = new ICAL.Event(vevent);
  return { text: res.text, uid: event.uid, summary: event.summary, sequence: event.sequence, status: String(vevent.getFirstPropertyValue('status')), start: event.startDate.toJSDate() };
}

/** The webhooks of `type` about an event received so far, each verified with the endpoint's secret. */
function webhooksAbout(type: string, eventId: string): ReceivedWebhook[] {
  const got = receiver.received.filter((r) => r.path === hook.path && r.payload.type === type && r.payload.data.id === eventId);
  for (const r of got) expect(verifyWebhook(hook.secret, r)).toEqual(r.payload);
  return got;
}

async function waitForWebhooks(type: string, eventId: string, count: number): Promise<ReceivedWebhook[]> {
  await receiver.waitFor(hook.path, () => webhooksAbout(type, eventId).length >= count, { what: `${count} ${type} of ${eventId}` });
  return webhooksAbout(type, eventId);
}

describe('PATCH /api/v1/platform/events/{event_id}', () => {
  it('changes the fields given, and the feed, the calendars, the webhook and the page follow', async () => {
    const stream = await openStream({ token: member.accessToken });
    await stream.until((m) => m.event === 'ready');
    const event = await pushEvent({ title: 'Original title', description: 'First words' });
    const shortlink = await shortlinkOf(event.event_id);
    const before = await calendarEntry(shortlink);
    expect(before).toMatchObject({ uid: `${event.event_id}@${HOST}`, summary: 'Original title', sequence: 0, status: 'CONFIRMED' });

    const newDate = inDays(5, 17);
    const res = await patch(event.event_id, { title: 'New title', date: newDate, description: null });
    expect(res.status, res.text).toBe(200);
    expect(res.body.data).toMatchObject({
      created: false,
      event_id: event.event_id,
      event_node_id: event.event_node_id,
      title: 'New title',
      date: newDate,
      sequence: 1,
    });

    // The mobile API.
    const read = await api('GET', `/api/mobile/events/${event.event_id}`, { token: member.accessToken });
    expect(read.body).toMatchObject({ title: 'New title', date: newDate, description: null });
    // The realtime feed: the insert, then one update with the new values.
    const [update] = (await stream.until((m) => m.event === 'update' && m.json?.id === event.event_id)).slice(-1);
    expect(update!.json).toMatchObject({ title: 'New title', date: newDate, description: null });
    stream.close();
    // The calendars: SEQUENCE one higher, so a calendar app replaces its entry (ical.js and node-ical).
    const after = await calendarEntry(shortlink);
    expect(after).toMatchObject({ uid: before.uid, summary: 'New title', sequence: 1, status: 'CONFIRMED' });
    expect(after.start.toISOString()).toBe(newDate);
    const parsed = Object.values(nodeIcal.sync.parseICS(after.text)).find((c) => c?.type === 'VEVENT') as nodeIcal.VEvent;
    expect(parsed.summary).toBe('New title');
    expect(Number(parsed.sequence)).toBe(1);
    const community = await api('GET', `/c/${(await db()`select community_id from app.events where id = ${event.event_id}`)[0]!.community_id}/calendar.ics`);
    expect(community.text).toContain('SUMMARY:New title');
    // The webhook: one event.updated, signed, with the Event as it is now.
    const [updated] = await waitForWebhooks('event.updated', event.event_id, 1);
    expect(updated!.payload.data).toMatchObject({ id: event.event_id, title: 'New title', date: newDate, description: null });
    // The public page.
    const page = await api('GET', `/e/${shortlink}`);
    expect(page.status).toBe(200);
    expect(page.text).toContain('<h1>New title</h1>');
    expect(page.text).not.toContain('Original title');
  });

  it('names the event by its platform and its id there too (an id with a slash, percent-encoded)', async () => {
    const externalId = `group/evt ${tag()}`;
    const created = await post({ community_id: community, external_platform: 'platform_b', external_id: externalId, title: 'By external id', date: inDays(4) });
    expect(created.status).toBe(201);
    const res = await patch(external('platform_b', externalId), { end_time: inDays(4, 21), external_url: 'https://platform-b.example.com/e/1' });
    expect(res.status, res.text).toBe(200);
    expect(res.body.data).toMatchObject({ event_id: created.body.data.event_id, end_time: inDays(4, 21), sequence: 1 });
    const [row] = await db()`select event_url, platform_b_url, platform_a_url from app.events where id = ${created.body.data.event_id}`;
    expect(row).toEqual({ event_url: 'https://platform-b.example.com/e/1', platform_b_url: 'https://platform-b.example.com/e/1', platform_a_url: null });
    // Another platform's id is another event: 404.
    expect((await patch(external('platform_a', externalId), { title: 'x' })).status).toBe(404);
  });

  it('moves the event to another venue (reused or made), or to none', async () => {
    const event = await pushEvent({ venue: { name: `Hall ${tag()}`, address: '1 Main St' } });
    const venueName = `Cellar ${tag()}`;
    const moved = await patch(event.event_id, { venue: { name: venueName, address: '2 Side St', latitude: -60 + Math.random() * 120, longitude: -170 + Math.random() * 340 } });
    expect(moved.status, moved.text).toBe(200);
    expect(moved.body.data.venue).toMatchObject({ name: venueName });
    const read = await api('GET', `/api/mobile/events/${event.event_id}`, { token: member.accessToken });
    expect(read.body.location).toBe(venueName);
    const none = await patch(event.event_id, { venue: null });
    expect(none.body.data.venue).toBeNull();
    expect((await api('GET', `/api/mobile/events/${event.event_id}`, { token: member.accessToken })).body.location).toBeNull();
  });

  it('a PATCH that changes nothing changes nothing: no new SEQUENCE, no webhook', async () => {
    const event = await pushEvent({ title: 'Steady' });
    await waitForWebhooks('event.created', event.event_id, 1);
    const same = await patch(event.event_id, { title: 'Steady' });
    expect(same.status).toBe(200);
    expect(same.body.data.sequence).toBe(0);
    const empty = await patch(event.event_id, {});
    expect(empty.body.data.sequence).toBe(0);
    // A later change's webhook arrives; none came for the two above.
    await patch(event.event_id, { title: 'Moved on' });
    const updates = await waitForWebhooks('event.updated', event.event_id, 1);
    await new Promise((r) => setTimeout(r, 300));
    expect(webhooksAbout('event.updated', event.event_id)).toHaveLength(1);
    expect(updates[0]!.payload.data.title).toBe('Moved on');
  });

  it('refuses bodies an event cannot have with 422, never 500', async () => {
    const event = await pushEvent();
    const cases: [unknown, string][] = [
      [{ end_time: new Date(Date.now() - 86_400_000).toISOString() }, 'validation_error'],
      [{ title: '' }, 'validation_error'],
      [{ title: null }, 'validation_error'],
      [{ date: null }, 'validation_error'],
      [{ date: '2026-06-05 18:00' }, 'validation_error'],
      [{ timezone: 'Mars/Olympus_Mons' }, 'invalid_timezone'],
      [{ timezone: 'Europe/Paris; drop table app.events' }, 'validation_error'],
      [{ titel: 'typo' }, 'validation_error'],
      [{ venue: { address: 'no name' } }, 'validation_error'],
      [{ venue: { name: 'x', latitude: 95, longitude: 0 } }, 'validation_error'],
      [{ image_url: 'javascript:alert(1)' }, 'validation_error'],
      [[], 'validation_error'],
    ];
    for (const [body, code] of cases) {
      const res = await patch(event.event_id, body);
      expect(res.status, `${JSON.stringify(body)}: ${res.text}`).toBe(422);
      expectErrorShape(res.body);
      expect(res.body.error, JSON.stringify(body)).toBe(code);
    }
    const [row] = await db()`select sequence from app.events where id = ${event.event_id}`;
    expect(row!.sequence).toBe(0);
  });
});

describe('DELETE /api/v1/platform/events/{event_id}', () => {
  it('cancels: STATUS:CANCELLED with a higher SEQUENCE, a delete in the feed, event.deleted, the page says cancelled; a second DELETE is 404', async () => {
    const stream = await openStream({ token: member.accessToken });
    await stream.until((m) => m.event === 'ready');
    const event = await pushEvent({ title: 'Doomed' });
    const shortlink = await shortlinkOf(event.event_id);
    await patch(event.event_id, { title: 'Doomed (moved)' });

    const res = await remove(event.event_id);
    expect(res.status, res.text).toBe(204);
    expect(res.text).toBe('');

    const [gone] = (await stream.until((m) => m.event === 'delete' && m.json?.id === event.event_id)).slice(-1);
    expect(gone!.json.title).toBe('Doomed (moved)');
    stream.close();
    const entry = await calendarEntry(shortlink);
    expect(entry).toMatchObject({ uid: `${event.event_id}@${HOST}`, status: 'CANCELLED', sequence: 2, summary: 'Doomed (moved)' });
    const [deleted] = await waitForWebhooks('event.deleted', event.event_id, 1);
    expect(deleted!.payload.data).toMatchObject({ id: event.event_id, title: 'Doomed (moved)' });
    const page = await api('GET', `/e/${shortlink}`);
    expect(page.status).toBe(200);
    expect(page.text).toContain('This event has been cancelled.');
    expect(page.text).toContain('https://schema.org/EventCancelled');
    expect(page.text).not.toContain('Check in</a>');
    // The mobile API no longer has it.
    expect((await api('GET', `/api/mobile/events/${event.event_id}`, { token: member.accessToken })).status).toBe(404);

    const again = await remove(event.event_id);
    expect(again.status).toBe(404);
    expect(again.body.error).toBe('event_not_found');
    expect((await patch(event.event_id, { title: 'Back?' })).status).toBe(404);
  });

  it('names the event by its platform and its id there too, and the id may be pushed again as a new event', async () => {
    const event = await pushEvent();
    const res = await remove(external('platform_a', event.externalId));
    expect(res.status, res.text).toBe(204);
    expect((await remove(external('platform_a', event.externalId))).status).toBe(404);
    const again = await post({ community_id: community, external_platform: 'platform_a', external_id: event.externalId, title: 'Reborn', date: inDays(6) });
    expect(again.status).toBe(201);
    expect(again.body.data.event_id).not.toBe(event.event_id);
  });
});

describe('who may change or cancel an event', () => {
  it('a manager (access token or personal API token) or a token scoped to the community; nobody else; unknown events 404', async () => {
    const event = await pushEvent();
    const scoped = await createToken(manager, { community_id: community, permissions: ['/api/v1/platform/*'] });
    const personal = await createToken(manager, { permissions: ['/api/v1/platform/*'] });
    const otherScoped = await createToken(otherManager, { community_id: otherCommunity, permissions: ['/api/v1/platform/*'] });
    const narrow = await createToken(manager, { permissions: ['/api/mobile/*'] });

    expect((await patch(event.event_id, { title: 'by scoped token' }, scoped.secret)).status).toBe(200);
    expect((await patch(event.event_id, { title: 'by personal token' }, personal.secret)).status).toBe(200);
    expect((await patch(event.event_node_id, { title: 'by node id' })).status).toBe(200);

    const refusals: [string | null, number, string][] = [
      [null, 401, 'unauthorized'],
      ['not-a-token', 401, 'unauthorized'],
      [member.accessToken, 403, 'not_community_manager'],
      [stranger.accessToken, 403, 'not_community_manager'],
      [otherManager.accessToken, 403, 'not_community_manager'],
      [otherScoped.secret, 403, 'community_scope_violation'],
      [narrow.secret, 403, 'forbidden'],
    ];
    for (const [token, status, code] of refusals) {
      const p = await patch(event.event_id, { title: 'hijacked' }, token);
      expect(p.status, `${code}: ${p.text}`).toBe(status);
      expect(p.body.error).toBe(code);
      const d = await remove(event.event_id, token);
      expect(d.status, `${code}: ${d.text}`).toBe(status);
      expect(d.body.error).toBe(code);
    }
    const [row] = await db()`select title from app.events where id = ${event.event_id}`;
    expect(row!.title).toBe('by node id');

    // Unknown or malformed ids: 404 (before any authorization).
    for (const ref of [crypto.randomUUID(), 'not-a-uuid', external('platform_a', `nothing-${tag()}`), external('platform_z', 'x')]) {
      const p = await patch(ref, { title: 'x' }, stranger.accessToken);
      expect(p.status, ref).toBe(404);
      expect((await remove(ref, stranger.accessToken)).status, ref).toBe(404);
    }
  });
});

describe('POST /api/v1/platform/events (create) with the new rules', () => {
  it('a repeat never changes the event and says which given values it did not apply; PATCH applies them', async () => {
    const event = await pushEvent({ title: 'Original title', date: inDays(7) });
    const repeat = await post({
      community_id: community,
      external_platform: 'platform_a',
      external_id: event.externalId,
      title: 'New title',
      date: inDays(8),
      timezone: 'Europe/Paris',
    });
    expect(repeat.status).toBe(200);
    expect(repeat.body.data).toMatchObject({ created: false, event_id: event.event_id, title: 'Original title', date: inDays(7) });
    expect(repeat.body.data.not_applied).toEqual(['title', 'date', 'timezone']);
    const identical = await post({ community_id: community, external_platform: 'platform_a', external_id: event.externalId, title: 'Original title', date: inDays(7) });
    expect(identical.body.data.not_applied).toEqual([]);
    const applied = await patch(event.event_id, { title: 'New title', date: inDays(8) });
    expect(applied.body.data).toMatchObject({ title: 'New title', date: inDays(8), sequence: 1 });
  });

  it('description is optional (absent, null or empty)', async () => {
    for (const description of [undefined, null, '']) {
      const res = await post({ community_id: community, external_platform: 'platform_c', external_id: `d-${tag()}`, title: 'No words', date: inDays(2), description });
      expect(res.status, res.text).toBe(201);
      const read = await api('GET', `/api/mobile/events/${res.body.data.event_id}`, { token: member.accessToken });
      expect(read.body.description).toBe(description === '' ? '' : null);
    }
  });
});

describe('races', () => {
  it('20 parallel PATCHes of one event: every one answered, SEQUENCE exactly 20 higher, 20 webhooks numbered in the order of the changes', async () => {
    const event = await pushEvent({ title: 'Race 0' });
    const answers = await Promise.all(Array.from({ length: 20 }, (_, i) => patch(event.event_id, { title: `Race ${i + 1}` })));
    expect(answers.map((a) => a.status)).toEqual(Array(20).fill(200));
    // Each answer has its own SEQUENCE: the changes were serialised, none lost.
    expect(answers.map((a) => a.body.data.sequence).sort((a, b) => a - b)).toEqual(Array.from({ length: 20 }, (_, i) => i + 1));
    const [row] = await db()`select sequence, title from app.events where id = ${event.event_id}`;
    expect(row!.sequence).toBe(20);
    const bySequence = new Map(answers.map((a) => [a.body.data.sequence, a.body.data.title]));
    expect(row!.title).toBe(bySequence.get(20));
    // The webhooks: the later change has the higher `sequence`, whatever order they arrive in.
    const updates = await waitForWebhooks('event.updated', event.event_id, 20);
    const ordered = [...updates].sort((a, b) => (a.payload as any).sequence - (b.payload as any).sequence);
    expect(ordered.map((u) => u.payload.data.title)).toEqual(Array.from({ length: 20 }, (_, i) => bySequence.get(i + 1)));
  });

  it('PATCHes racing a DELETE: every request answered (200, 204 or 404), never a 5xx; the event ends cancelled', async () => {
    const event = await pushEvent();
    const shortlink = await shortlinkOf(event.event_id);
    const requests = [
      ...Array.from({ length: 8 }, (_, i) => patch(event.event_id, { title: `Before the end ${i}` })),
      remove(event.event_id),
      ...Array.from({ length: 8 }, (_, i) => patch(event.event_id, { title: `After the end ${i}` })),
      remove(event.event_id),
    ];
    const answers = await Promise.all(requests);
    for (const a of answers) expect([200, 204, 404], a.text).toContain(a.status);
    expect(answers.filter((a) => a.status === 204)).toHaveLength(1);
    const entry = await calendarEntry(shortlink);
    expect(entry.status).toBe('CANCELLED');
    const applied = answers.filter((a) => a.status === 200).length;
    expect(entry.sequence).toBe(applied + 1);
  });
});

// Platform integration over HTTP: who may call (every credential case),
// idempotent event creation (also under 20 racing requests), venue reuse,
// attendee registration (one user and one membership under 30 racing
// requests), platform check-ins (one row under races), events reaching the
// mobile API and the change log, 404s, 422s, and the public forms endpoint
// with its operator command.
import crypto from 'node:crypto';
import { spawnSync } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { beforeAll, describe, expect, it } from 'vitest';
import { api, databaseUrl, db, expectErrorShape, registerUser, uniqueEmail, type TestUser } from '../helpers.ts';
import { createToken, joinCommunity } from '../support/api-tokens.ts';
import { UUID } from '../support/formats.ts';
import { newCommunity } from '../support/sql-fixtures.ts';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');

const externalId = () => `ext-${crypto.randomBytes(6).toString('hex')}`;
const soon = (hours: number) => new Date(Date.now() + hours * 3_600_000).toISOString();

const eventBody = (communityId: string, extra: Record<string, unknown> = {}) => ({
  community_id: communityId,
  external_platform: 'platform_a',
  external_id: externalId(),
  title: 'Pushed meetup',
  description: 'From the platform',
  date: soon(24),
  ...extra,
});

const postEvent = (token: string | undefined, body: unknown) => api('POST', '/api/v1/platform/events', { token, body });
const postAttendee = (token: string | undefined, eventNodeId: string, body: unknown) =>
  api('POST', `/api/v1/platform/events/${eventNodeId}/attendees`, { token, body });
const postCheckin = (token: string | undefined, eventNodeId: string, body: unknown) =>
  api('POST', `/api/v1/platform/events/${eventNodeId}/checkins`, { token, body });

let manager: TestUser;
let member: TestUser;
let stranger: TestUser;
let otherManager: TestUser;
let community: string;
let otherCommunity: string;
let eventNodeId: string;

beforeAll(async () => {
  [manager, member, stranger, otherManager] = await Promise.all([
    registerUser('pmgr'),
    registerUser('pmember'),
    registerUser('pstranger'),
    registerUser('pother'),
  ]);
  community = await newCommunity({ manager: manager });
  otherCommunity = await newCommunity({ manager: otherManager });
  await joinCommunity(member, community);
  const res = await postEvent(manager.accessToken, eventBody(community));
  expect(res.status, res.text).toBe(201);
  eventNodeId = res.body.data.event_node_id;
});

describe('credentials', () => {
  it('no credential is 401 on every platform endpoint', async () => {
    for (const res of [
      await postEvent(undefined, eventBody(community)),
      await postAttendee(undefined, eventNodeId, { email: uniqueEmail() }),
      await postCheckin(undefined, eventNodeId, { email: manager.email }),
    ]) {
      expect(res.status).toBe(401);
      expectErrorShape(res.body);
    }
  });

  it('a non-manager (member or stranger) is 403 with the Error body, on every endpoint', async () => {
    for (const user of [member, stranger, otherManager]) {
      for (const res of [
        await postEvent(user.accessToken, eventBody(community)),
        await postAttendee(user.accessToken, eventNodeId, { email: uniqueEmail() }),
        await postCheckin(user.accessToken, eventNodeId, { email: manager.email }),
      ]) {
        expect(res.status, res.text).toBe(403);
        expectErrorShape(res.body);
        expect(res.body.error).toBe('not_community_manager');
      }
    }
    // Nothing was created by the refused requests.
    const [row] = await db()`select count(*)::int as n from app.events where community_id = ${community}`;
    expect(row!.n).toBe(1);
  });

  it('an unknown community is 403 (nobody manages it)', async () => {
    const res = await postEvent(manager.accessToken, eventBody(crypto.randomUUID()));
    expect(res.status).toBe(403);
    expectErrorShape(res.body);
  });

  it("a manager's personal API token acts as the manager", async () => {
    const { secret } = await createToken(manager, { permissions: ['/api/v1/platform/*'] });
    const res = await postEvent(secret, eventBody(community));
    expect(res.status).toBe(201);
    const attendee = await postAttendee(secret, eventNodeId, { email: uniqueEmail('viatoken') });
    expect(attendee.status).toBe(201);
    const checkin = await postCheckin(secret, eventNodeId, { email: member.email });
    expect([200, 201]).toContain(checkin.status);
  });

  it("a personal API token of a non-manager is 403; a token without the path's permission is 403", async () => {
    const strangerToken = await createToken(stranger, { permissions: ['/api/v1/*'] });
    expect((await postEvent(strangerToken.secret, eventBody(community))).status).toBe(403);
    const narrow = await createToken(manager, { permissions: ['/api/mobile/*'] });
    const res = await postEvent(narrow.secret, eventBody(community));
    expect(res.status).toBe(403);
    expect(res.body.error).toBe('forbidden');
  });

  it('a community-scoped token works for its community only', async () => {
    // The manager manages both communities; the token is scoped to one.
    const both = await registerUser('pboth');
    const first = await newCommunity({ manager: both });
    const second = await newCommunity({ manager: both });
    const scoped = await createToken(both, { community_id: first, permissions: ['/api/v1/platform/*'] });

    const ok = await postEvent(scoped.secret, eventBody(first));
    expect(ok.status).toBe(201);
    const wrong = await postEvent(scoped.secret, eventBody(second));
    expect(wrong.status).toBe(403);
    expectErrorShape(wrong.body);
    const secondEvent = await postEvent(both.accessToken, eventBody(second));
    expect(secondEvent.status).toBe(201);
    const wrongAttendee = await postAttendee(scoped.secret, secondEvent.body.data.event_node_id, { email: uniqueEmail() });
    expect(wrongAttendee.status).toBe(403);
    const rightAttendee = await postAttendee(scoped.secret, ok.body.data.event_node_id, { email: uniqueEmail() });
    expect(rightAttendee.status).toBe(201);

    // Another manager's community token on this community: 403.
    const foreign = await createToken(otherManager, { community_id: otherCommunity });
    expect((await postEvent(foreign.secret, eventBody(community))).status).toBe(403);
    expect((await postAttendee(foreign.secret, eventNodeId, { email: uniqueEmail() })).status).toBe(403);
    expect((await postCheckin(foreign.secret, eventNodeId, { email: manager.email })).status).toBe(403);
  });

  it('a community-scoped token stops working for the community when its owner no longer manages it', async () => {
    const owner = await registerUser('pdemoted');
    const successor = await registerUser('psuccessor');
    const scopedCommunity = await newCommunity({ manager: owner });
    await db()`select admin.add_manager(${scopedCommunity}, ${successor.email})`;
    const scoped = await createToken(owner, { community_id: scopedCommunity });
    expect((await postEvent(scoped.secret, eventBody(scopedCommunity))).status).toBe(201);
    await db()`update app.community_members m set role = 'member'
                 from app.profiles p where p.node_id = m.member_node_id and p.id = ${owner.userId}
                  and m.community_id = ${scopedCommunity}`;
    expect((await postEvent(scoped.secret, eventBody(scopedCommunity))).status).toBe(403);
  });
});

describe('POST /api/v1/platform/events', () => {
  it('takes an event without a description (absent, null or empty)', async () => {
    for (const description of [undefined, null, '']) {
      const res = await postEvent(manager.accessToken, eventBody(community, { description }));
      expect(res.status).toBe(201);
      const event = await api('GET', `/api/mobile/events/${res.body.data.event_id}`, { token: manager.accessToken });
      expect(event.body.description ?? '').toBe('');
    }
  });

  it('creates once (201, created true) and then answers the same ids (200, created false)', async () => {
    const body = eventBody(community, {
      external_platform: 'platform_b',
      external_url: 'https://platform-b.example/e/1',
      image_url: 'https://cdn.example/i.png',
      end_time: soon(26),
    });
    const first = await postEvent(manager.accessToken, body);
    expect(first.status).toBe(201);
    expect(first.body).toEqual({
      success: true,
      data: {
        created: true,
        event_id: expect.stringMatching(UUID),
        event_node_id: expect.stringMatching(UUID),
        title: 'Pushed meetup',
        venue: null,
        date: new Date(body.date).toISOString(),
        end_time: expect.any(String),
        timezone: 'UTC',
        sequence: 0,
        not_applied: [],
      },
    });
    const again = await postEvent(manager.accessToken, { ...body, title: 'Changed title' });
    expect(again.status).toBe(200);
    // A repeat changes nothing, and says which of the fields it gave were not applied.
    expect(again.body.data).toEqual({ ...first.body.data, created: false, not_applied: ['title'] });

    const event = await api('GET', `/api/mobile/events/${first.body.data.event_id}`, { token: manager.accessToken });
    expect(event.status).toBe(200);
    expect(event.body).toMatchObject({
      id: first.body.data.event_id,
      node_id: first.body.data.event_node_id,
      title: 'Pushed meetup',
      description: 'From the platform',
      event_url: 'https://platform-b.example/e/1',
      image_path: 'https://cdn.example/i.png',
      platform_a_url: null,
      platform_b_url: 'https://platform-b.example/e/1',
      platform_c_url: null,
      external_platforms: ['platform_b'],
    });
  });

  it('the same external_id on another platform is another event; platform_d sets no platform url', async () => {
    const id = externalId();
    const a = await postEvent(manager.accessToken, eventBody(community, { external_id: id, external_url: 'https://a.example/x' }));
    const d = await postEvent(manager.accessToken, eventBody(community, { external_id: id, external_platform: 'platform_d', external_url: 'https://d.example/x' }));
    expect(a.status).toBe(201);
    expect(d.status).toBe(201);
    expect(d.body.data.event_id).not.toBe(a.body.data.event_id);
    const [row] = await db()`select platform_a_url, platform_b_url, platform_c_url, event_url from app.events where id = ${d.body.data.event_id}`;
    expect(row).toEqual({ platform_a_url: null, platform_b_url: null, platform_c_url: null, event_url: 'https://d.example/x' });
  });

  it('20 identical requests racing create exactly one event: one 201, the rest 200 with the same ids', async () => {
    const venueName = `Race hall ${externalId()}`;
    const body = eventBody(community, { venue: { name: venueName, address: '1 Race Rd' } });
    const results = await Promise.all(Array.from({ length: 20 }, () => postEvent(manager.accessToken, body)));
    expect(results.map((r) => r.status).sort((a, b) => a - b)).toEqual([...Array(19).fill(200), 201]);
    expect(new Set(results.map((r) => r.body.data.event_id)).size).toBe(1);
    expect(new Set(results.map((r) => r.body.data.venue.venue_node_id)).size).toBe(1);
    const [row] = await db()`select count(*)::int as n from app.events where external_platform = 'platform_a' and external_id = ${body.external_id}`;
    expect(row!.n).toBe(1);
    const [venues] = await db()`select count(*)::int as n from app.venues where name = ${venueName}`;
    expect(venues!.n).toBe(1);
  });

  it('an external event of another community is 422', async () => {
    const body = eventBody(otherCommunity);
    expect((await postEvent(otherManager.accessToken, body)).status).toBe(201);
    const res = await postEvent(manager.accessToken, { ...body, community_id: community });
    expect(res.status).toBe(422);
    expectErrorShape(res.body);
  });

  it('reuses a venue with the same name and address (case-insensitive), else the same coordinates, else creates one', async () => {
    const tag = externalId();
    const first = await postEvent(manager.accessToken, eventBody(community, {
      venue: { name: `The Hall ${tag}`, address: '1 Main St', latitude: 52.52, longitude: 13.405 },
    }));
    expect(first.status).toBe(201);
    const venue = first.body.data.venue;
    expect(venue).toEqual({ location_id: expect.any(Number), name: `The Hall ${tag}`, venue_node_id: expect.stringMatching(UUID) });
    expect(Number.isInteger(venue.location_id)).toBe(true);

    const sameName = await postEvent(manager.accessToken, eventBody(community, {
      venue: { name: `  the hall ${tag.toUpperCase()} `, address: '1 MAIN ST' },
    }));
    expect(sameName.body.data.venue).toEqual(venue);

    const sameSpot = await postEvent(manager.accessToken, eventBody(community, {
      venue: { name: `Renamed ${tag}`, address: 'Elsewhere 2', latitude: 52.52, longitude: 13.405 },
    }));
    expect(sameSpot.body.data.venue).toEqual(venue);

    const other = await postEvent(manager.accessToken, eventBody(community, {
      venue: { name: `The Hall ${tag}`, address: '2 Main St', latitude: 48.85, longitude: 2.35 },
    }));
    expect(other.status).toBe(201);
    expect(other.body.data.venue.venue_node_id).not.toBe(venue.venue_node_id);
    expect(other.body.data.venue.location_id).not.toBe(venue.location_id);

    const [row] = await db()`select venue_node_id, location from app.events where id = ${sameSpot.body.data.event_id}`;
    expect(row).toEqual({ venue_node_id: venue.venue_node_id, location: `The Hall ${tag}` });
  });

  it('different events racing for one new venue create one venue', async () => {
    const name = `Shared ${externalId()}`;
    const results = await Promise.all(
      Array.from({ length: 10 }, () => postEvent(manager.accessToken, eventBody(community, { venue: { name, address: 'Same 1' } }))),
    );
    expect(results.map((r) => r.status)).toEqual(Array(10).fill(201));
    expect(new Set(results.map((r) => r.body.data.venue.venue_node_id)).size).toBe(1);
  });

  it('created events appear in the mobile upcoming list and the realtime change log like any other', async () => {
    const res = await postEvent(manager.accessToken, eventBody(community, { title: 'Visible soon', date: soon(2) }));
    expect(res.status).toBe(201);
    for (const user of [manager, member]) {
      const upcoming = await api('GET', '/api/mobile/events/upcoming', { token: user.accessToken });
      expect(upcoming.status).toBe(200);
      expect(upcoming.body.map((e: { id: string }) => e.id)).toContain(res.body.data.event_id);
    }
    const strangers = await api('GET', '/api/mobile/events/upcoming', { token: stranger.accessToken });
    expect(strangers.body.map((e: { id: string }) => e.id)).not.toContain(res.body.data.event_id);
    const log = await db()`select operation from app.change_log where table_name = 'events' and record_id = ${res.body.data.event_id}`;
    expect(log.map((r) => r.operation)).toEqual(['insert']);
  });

  it.each([
    ['no body', undefined],
    ['empty object', [{}]],
    ['unknown platform', { external_platform: 'platform_z' }],
    ['external_id empty', { external_id: '' }],
    ['external_id not a string', { external_id: 42 }],
    ['title empty', { title: ' ' }],
    ['date missing', { date: undefined }],
    ['date not a date', { date: 'next friday' }],
    ['end_time before date', { date: '2031-01-01T10:00:00Z', end_time: '2031-01-01T09:00:00Z' }],
    ['external_url not a URL', { external_url: 'not a url' }],
    ['external_url javascript:', { external_url: 'javascript:alert(1)' }],
    ['image_url not a URL', { image_url: 42 }],
    ['venue without a name', { venue: { address: '1 Main St' } }],
    ['venue latitude out of range', { venue: { name: 'x', latitude: 91, longitude: 0 } }],
    ['venue latitude without longitude', { venue: { name: 'x', latitude: 10 } }],
    ['community_id not a uuid', { community_id: 'abc' }],
    ['array body', [[1]]],
  ])('answers 422 with the Error body for %s', async (_name, extra) => {
    // An array holds a raw body; an object is merged into a valid one.
    const body = extra === undefined ? undefined : Array.isArray(extra) ? extra[0] : eventBody(community, extra);
    const res = await postEvent(manager.accessToken, body);
    expect(res.status, res.text).toBe(422);
    expectErrorShape(res.body);
  });

  it('answers 400 for malformed JSON', async () => {
    const res = await api('POST', '/api/v1/platform/events', { token: manager.accessToken, rawBody: '{"community_id":' });
    expect(res.status).toBe(400);
    expectErrorShape(res.body);
  });
});

describe('POST /api/v1/platform/events/{event_node_id}/attendees', () => {
  it('creates a user without a password (201), joins them to the community, then answers 200', async () => {
    const email = uniqueEmail('Attendee').toUpperCase();
    const first = await postAttendee(manager.accessToken, eventNodeId, { email });
    expect(first.status).toBe(201);
    expect(first.body).toEqual({
      success: true,
      data: { user_id: expect.stringMatching(UUID), email: email.toLowerCase(), user_created: true, community_joined: true },
    });
    const [user] = await db()`
      select u.password_hash, p.name from identity.users u join app.profiles p on p.id = u.id where u.id = ${first.body.data.user_id}`;
    expect(user!.password_hash).toBeNull();
    expect(user!.name).toBe(email.toLowerCase().split('@')[0]);
    // Nobody can sign in to it until a password is set.
    const login = await api('POST', '/api/auth/login', { body: { email, password: 'anything-at-all' } });
    expect(login.status).toBe(401);

    // Again (a retry, say): the first answer, the account this registration made named.
    const again = await postAttendee(manager.accessToken, eventNodeId, { email, name: 'Ignored' });
    expect(again.status).toBe(200);
    expect(again.body.data).toEqual(first.body.data);
    // The same account registered for another event of the community: named (a registration here made it), nothing made now.
    const other = await api('POST', '/api/v1/platform/events', {
      token: manager.accessToken,
      body: eventBody(community),
    });
    const elsewhere = await postAttendee(manager.accessToken, other.body.data.event_node_id, { email });
    expect(elsewhere.status).toBe(201);
    expect(elsewhere.body.data).toEqual({ user_id: first.body.data.user_id, email: email.toLowerCase(), user_created: false, community_joined: false });
  });

  it('registers an existing account for the event only: not joined to the community, its user_id not returned (issue 27, finding 6)', async () => {
    const existing = await registerUser('pexisting');
    const res = await postAttendee(manager.accessToken, eventNodeId, { email: existing.email });
    expect(res.status).toBe(201);
    expect(res.body.data).toEqual({ user_id: null, email: existing.email, user_created: false, community_joined: false });
    expect(res.text).not.toContain(existing.userId);
    // Again: still not named (no registration made it).
    const again = await postAttendee(manager.accessToken, eventNodeId, { email: existing.email });
    expect(again.status).toBe(200);
    expect(again.body.data).toEqual({ user_id: null, email: existing.email, user_created: false, community_joined: false });
    const [state] = await db()`
      select (select count(*)::int from app.community_members m join app.profiles p on p.node_id = m.member_node_id
               where p.id = ${existing.userId}) as memberships,
             (select count(*)::int from app.event_attendees a join app.events e on e.id = a.event_id
               where a.user_id = ${existing.userId} and e.node_id = ${eventNodeId}) as registrations`;
    expect(state).toEqual({ memberships: 0, registrations: 1 });
    // Their own communities list is unchanged.
    const mine = await api('GET', '/api/mobile/communities', { token: existing.accessToken });
    expect(mine.body.data).toEqual([]);

    // A member already in the community: registered for the event, not joined again.
    const res2 = await postAttendee(manager.accessToken, eventNodeId, { email: member.email });
    expect(res2.status).toBe(201);
    expect(res2.body.data.community_joined).toBe(false);

    const named = await postAttendee(manager.accessToken, eventNodeId, { email: uniqueEmail('named'), name: 'Ada Lovelace' });
    const [profile] = await db()`select name from app.profiles where id = ${named.body.data.user_id}`;
    expect(profile!.name).toBe('Ada Lovelace');
  });

  it('30 racing registrations of one new attendee make one user, one membership and one registration', async () => {
    const email = uniqueEmail('prace');
    const results = await Promise.all(
      Array.from({ length: 30 }, () => postAttendee(manager.accessToken, eventNodeId, { email })),
    );
    expect(results.map((r) => r.status).sort((a, b) => a - b)).toEqual([...Array(29).fill(200), 201]);
    // One registration made the account; the 29 repeats answer as it did (the same account named).
    const made = results.find((r) => r.status === 201)!.body.data;
    expect(made).toMatchObject({ user_id: expect.stringMatching(UUID), user_created: true, community_joined: true });
    expect(results.every((r) => JSON.stringify(r.body.data) === JSON.stringify(made))).toBe(true);
    const [counts] = await db()`
      select (select count(*)::int from identity.users where email = ${email}) as users,
             (select count(*)::int from app.community_members m join app.profiles p on p.node_id = m.member_node_id
                join identity.users u on u.id = p.id where u.email = ${email}) as memberships,
             (select count(*)::int from app.event_attendees a join identity.users u on u.id = a.user_id where u.email = ${email}) as registrations`;
    expect(counts).toEqual({ users: 1, memberships: 1, registrations: 1 });
  });

  it('an unknown event is 404 (also for a non-manager, and for an id that is not a uuid)', async () => {
    for (const [token, ref] of [
      [manager.accessToken, crypto.randomUUID()],
      [stranger.accessToken, crypto.randomUUID()],
      [manager.accessToken, 'not-a-uuid'],
    ] as const) {
      const res = await postAttendee(token, ref, { email: uniqueEmail() });
      expect(res.status).toBe(404);
      expectErrorShape(res.body);
    }
  });

  it.each([
    ['no body', undefined],
    ['missing email', { name: 'x' }],
    ['invalid email', { email: 'not-an-email' }],
    ['email not a string', { email: 42 }],
    ['name too long', { email: 'a@example.com', name: 'x'.repeat(201) }],
  ])('answers 422 with the Error body for %s', async (_name, body) => {
    const res = await postAttendee(manager.accessToken, eventNodeId, body);
    expect(res.status).toBe(422);
    expectErrorShape(res.body);
  });
});

describe('POST /api/v1/platform/events/{event_node_id}/checkins', () => {
  it('checks a registered attendee in (201), then answers 200 already_checked_in with the same check-in', async () => {
    const attendee = await registerUser('pcheck');
    expect((await postAttendee(manager.accessToken, eventNodeId, { email: attendee.email })).status).toBe(201);
    const first = await postCheckin(manager.accessToken, eventNodeId, { email: attendee.email.toUpperCase() });
    expect(first.status).toBe(201);
    expect(first.body).toEqual({
      success: true,
      data: { checkin_id: expect.stringMatching(UUID), checked_in_at: expect.any(String), already_checked_in: false },
    });
    const again = await postCheckin(manager.accessToken, eventNodeId, { email: attendee.email });
    expect(again.status).toBe(200);
    expect(again.body.data).toEqual({ ...first.body.data, already_checked_in: true });

    // The user sees the check-in in the mobile API.
    const mine = await api('GET', '/api/mobile/checkins', { token: attendee.accessToken });
    expect(mine.body.checkins.map((c: { event_id?: string }) => c.event_id)).toContain(
      (await db()`select id from app.events where node_id = ${eventNodeId}`)[0]!.id,
    );
  });

  it('checks a member of the community in (not registered for the event)', async () => {
    const res = await postCheckin(manager.accessToken, eventNodeId, { email: member.email });
    expect([200, 201]).toContain(res.status);
    expect(res.body.data.checkin_id).toMatch(UUID);
  });

  it('a user who is neither registered nor a member is answered exactly as an unknown e-mail (issue 27, finding 6)', async () => {
    const outsider = await registerUser('poutsider');
    const unknown = await postCheckin(manager.accessToken, eventNodeId, { email: uniqueEmail('nobody') });
    const refused = await postCheckin(manager.accessToken, eventNodeId, { email: outsider.email });
    expect(refused.status).toBe(404);
    expect(refused.status).toBe(unknown.status);
    expect(refused.body).toEqual(unknown.body);
    const [row] = await db()`select count(*)::int as n from app.checkins where user_id = ${outsider.userId}`;
    expect(row!.n).toBe(0);
  });

  it('racing check-ins of one user make one row', async () => {
    const attendee = await registerUser('pcheckrace');
    expect((await postAttendee(manager.accessToken, eventNodeId, { email: attendee.email })).status).toBe(201);
    const results = await Promise.all(
      Array.from({ length: 20 }, () => postCheckin(manager.accessToken, eventNodeId, { email: attendee.email })),
    );
    expect(results.map((r) => r.status).sort((a, b) => a - b)).toEqual([...Array(19).fill(200), 201]);
    const [row] = await db()`select count(*)::int as n from app.checkins where user_id = ${attendee.userId}`;
    expect(row!.n).toBe(1);
  });

  it('an unknown user or event is 404; bad input is 422', async () => {
    const noUser = await postCheckin(manager.accessToken, eventNodeId, { email: uniqueEmail('nobody') });
    expect(noUser.status).toBe(404);
    expectErrorShape(noUser.body);
    expect(noUser.body.error).toBe('user_not_found');
    const noEvent = await postCheckin(manager.accessToken, crypto.randomUUID(), { email: manager.email });
    expect(noEvent.status).toBe(404);
    expect(noEvent.body.error).toBe('event_not_found');
    for (const body of [undefined, {}, { email: 'nope' }, [manager.email]]) {
      const res = await postCheckin(manager.accessToken, eventNodeId, body);
      expect(res.status).toBe(422);
      expectErrorShape(res.body);
    }
  });
});

describe('POST /api/v1/forms', () => {
  const admin = (...args: string[]) =>
    spawnSync(process.execPath, ['--import', 'tsx', 'gateway/tooling/admin.ts', ...args], {
      cwd: root,
      env: { ...process.env, DATABASE_URL: databaseUrl },
      encoding: 'utf8',
    });

  it('stores any JSON object without a credential (200) for operators to read', async () => {
    const marker = crypto.randomUUID();
    const form = { marker, nested: { list: [1, 'two', null], flag: true }, 'odd key': 'ü' };
    const res = await api('POST', '/api/v1/forms', { body: form });
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ success: true, message: expect.any(String) });
    const rows = await db()`select payload, size_bytes, received_at from admin.forms_list(1000, null) where payload ->> 'marker' = ${marker}`;
    expect(rows).toHaveLength(1);
    expect(rows[0]!.payload).toEqual(form);
    expect(rows[0]!.received_at).toBeInstanceOf(Date);

    const help = admin('forms-list', '--help');
    expect(help.status).toBe(0);
    expect(help.stdout).toContain('--limit');
    const listed = admin('forms-list', '--limit', '1000');
    expect(listed.status, listed.stderr).toBe(0);
    const lines = listed.stdout.trim().split('\n').map((line) => JSON.parse(line));
    expect(lines.find((l) => l.payload.marker === marker)).toMatchObject({ payload: form });
  });

  it('is limited to 64 KB (413) and answers 400 for anything but an object', async () => {
    const atLimit = JSON.stringify({ v: 'x'.repeat(65_536 - 8) });
    expect(Buffer.byteLength(atLimit)).toBe(65_536);
    expect((await api('POST', '/api/v1/forms', { rawBody: atLimit })).status).toBe(200);
    const over = await api('POST', '/api/v1/forms', { rawBody: JSON.stringify({ v: 'x'.repeat(65_536) }) });
    expect(over.status).toBe(413);
    expectErrorShape(over.body);
    const huge = await api('POST', '/api/v1/forms', { rawBody: JSON.stringify({ v: 'x'.repeat(1_100_000) }) });
    expect(huge.status).toBe(413);

    for (const rawBody of ['[1,2]', '"text"', '42', 'null', '{"a":']) {
      const res = await api('POST', '/api/v1/forms', { rawBody });
      expect(res.status, rawBody).toBe(400);
      expectErrorShape(res.body);
    }
    expect((await api('POST', '/api/v1/forms')).status).toBe(400); // no body at all
    const noType = await api('POST', '/api/v1/forms', { rawBody: 'a=1', headers: { 'content-type': 'application/x-www-form-urlencoded' } });
    expect(noType.status).toBe(400);
  });
});

// Events over HTTP: the Event object (every field, links
// built from PUBLIC_URL, manager-only fields absent for others), the upcoming
// list (caller's communities, effective end, order, 100 at most) and reading
// one event (404 for unknown and malformed ids).
import { describe, expect, it } from 'vitest';
import { api, db, expectErrorShape, publicUrl, registerUser } from '../helpers.ts';
import { createCommunity, createEvent, createVenue, unknownId } from '../support/event-fixtures.ts';
import { ISO, UUID } from '../support/formats.ts';
import { addMember } from '../support/sql-fixtures.ts';

const BASE_FIELDS = [
  'id', 'title', 'date', 'community_node_id', 'shortlink', 'deeplink_path', 'deeplink_url', 'public_url',
  'public_full_url', 'description', 'end_time', 'event_url', 'image_path', 'image_url', 'location', 'node_id',
  'platform_a_url', 'platform_b_url', 'platform_c_url', 'timezone',
];

describe('the Event object', () => {
  it('has every field of the Event object, with links built from PUBLIC_URL', async () => {
    const user = await registerUser('ev-shape');
    const community = await createCommunity();
    await addMember(community.id, user.userId);
    const venue = await createVenue('Town Hall');
    const event = await createEvent({
      communityId: community.id, title: 'Shape check', starts: '1 day', ends: '1 day 3 hours',
      venueNodeId: venue, description: 'All the fields',
    });
    await db()`update app.events set event_url = 'https://example.com/e/1', image_path = 'https://img.example.com/1.png' where id = ${event.id}`;

    const res = await api('GET', `/api/mobile/events/${event.id}`, { token: user.accessToken });
    expect(res.status).toBe(200);
    expect(Object.keys(res.body).sort()).toEqual([...BASE_FIELDS].sort());
    expect(res.body).toEqual({
      id: event.id,
      title: 'Shape check',
      date: expect.stringMatching(ISO),
      community_node_id: community.nodeId,
      shortlink: event.shortlink,
      deeplink_path: `/l/event/${event.shortlink}`,
      deeplink_url: `${publicUrl}/l/event/${event.shortlink}`,
      public_url: `/e/${event.shortlink}`,
      public_full_url: `${publicUrl}/e/${event.shortlink}`,
      description: 'All the fields',
      end_time: expect.stringMatching(ISO),
      event_url: 'https://example.com/e/1',
      image_path: 'https://img.example.com/1.png',
      image_url: 'https://img.example.com/1.png',
      location: 'Town Hall',
      node_id: event.nodeId,
      platform_a_url: null,
      platform_b_url: null,
      platform_c_url: null,
      timezone: 'UTC',
    });
    expect(event.shortlink).toMatch(/^[A-Za-z0-9]{8}$/);
    expect(Date.parse(res.body.end_time) - Date.parse(res.body.date)).toBe(3 * 3600 * 1000);
  });

  it('managers of the hosting community also get can_sync and external_platforms; members do not', async () => {
    const manager = await registerUser('ev-manager');
    const member = await registerUser('ev-member');
    const community = await createCommunity(manager.email);
    await addMember(community.id, member.userId);
    const event = await createEvent({ communityId: community.id, starts: '2 days' });

    const asManager = await api('GET', `/api/mobile/events/${event.id}`, { token: manager.accessToken });
    expect(asManager.body).toMatchObject({ can_sync: true, external_platforms: [] });
    expect(Object.keys(asManager.body).sort()).toEqual([...BASE_FIELDS, 'can_sync', 'external_platforms'].sort());

    const asMember = await api('GET', `/api/mobile/events/${event.id}`, { token: member.accessToken });
    expect(asMember.body).not.toHaveProperty('can_sync');
    expect(asMember.body).not.toHaveProperty('external_platforms');

    // A manager of another community is not a manager of this one.
    const other = await registerUser('ev-other-manager');
    await createCommunity(other.email);
    const asOther = await api('GET', `/api/mobile/events/${event.id}`, { token: other.accessToken });
    expect(asOther.body).not.toHaveProperty('can_sync');

    // Synced platforms show up in the URLs and in external_platforms.
    await db()`update app.events set platform_a_url = 'https://a.example/1', platform_c_url = 'https://c.example/1' where id = ${event.id}`;
    const synced = await api('GET', `/api/mobile/events/${event.id}`, { token: manager.accessToken });
    expect(synced.body).toMatchObject({
      platform_a_url: 'https://a.example/1',
      platform_b_url: null,
      platform_c_url: 'https://c.example/1',
      external_platforms: ['platform_a', 'platform_c'],
    });
    const upcoming = await api('GET', '/api/mobile/events/upcoming', { token: manager.accessToken });
    expect(upcoming.body.find((e: { id: string }) => e.id === event.id)).toMatchObject({ can_sync: true });
  });
});

describe('GET /api/mobile/events/{id}', () => {
  it('any signed-in user may read an event, also by its node id', async () => {
    const stranger = await registerUser('ev-stranger');
    const event = await createEvent({ communityId: (await createCommunity()).id, starts: '-10 days' });
    const byId = await api('GET', `/api/mobile/events/${event.id}`, { token: stranger.accessToken });
    expect(byId.status).toBe(200);
    const byNode = await api('GET', `/api/mobile/events/${event.nodeId}`, { token: stranger.accessToken });
    expect(byNode.status).toBe(200);
    expect(byNode.body).toEqual(byId.body);
  });

  it.each([
    ['an unknown id', unknownId()],
    ['a non-RFC uuid', '11111111-1111-1111-1111-111111111111'],
    ['a malformed id', 'not-a-uuid'],
    ['a number', '42'],
  ])('answers 404 with the Error body for %s', async (_name, id) => {
    const user = await registerUser('ev-404');
    const res = await api('GET', `/api/mobile/events/${id}`, { token: user.accessToken });
    expect(res.status).toBe(404);
    expectErrorShape(res.body);
    expect(res.body.error).toMatch(/^(event_)?not_found$/);
  });

  it('answers 401 without a token', async () => {
    const res = await api('GET', `/api/mobile/events/${unknownId()}`);
    expect(res.status).toBe(401);
    expectErrorShape(res.body);
  });
});

describe('GET /api/mobile/events/upcoming', () => {
  it("lists the caller's communities' events that have not ended, soonest first", async () => {
    const user = await registerUser('ev-upcoming');
    const mine = await createCommunity();
    const alsoMine = await createCommunity();
    const notMine = await createCommunity();
    await addMember(mine.id, user.userId);
    await addMember(alsoMine.id, user.userId, 'manager');

    const later = await createEvent({ communityId: mine.id, title: 'later', starts: '3 days' });
    const soon = await createEvent({ communityId: alsoMine.id, title: 'soon', starts: '1 hour' });
    const ongoing = await createEvent({ communityId: mine.id, title: 'ongoing', starts: '-1 hour', ends: '1 hour' });
    // No end_time: ends 2 hours after its date, so this one is still on.
    const noEndOngoing = await createEvent({ communityId: mine.id, title: 'no end, on', starts: '-119 minutes' });
    await createEvent({ communityId: mine.id, title: 'no end, over', starts: '-121 minutes' });
    await createEvent({ communityId: mine.id, title: 'ended', starts: '-3 hours', ends: '-1 minute' });
    await createEvent({ communityId: notMine.id, title: 'not mine', starts: '1 day' });

    const res = await api('GET', '/api/mobile/events/upcoming', { token: user.accessToken });
    expect(res.status).toBe(200);
    expect(Array.isArray(res.body)).toBe(true);
    expect(res.body.map((e: { title: string }) => e.title)).toEqual(['no end, on', 'ongoing', 'soon', 'later']);
    expect(res.body.map((e: { id: string }) => e.id)).toEqual([noEndOngoing.id, ongoing.id, soon.id, later.id]);
    for (const e of res.body) expect(e.id).toMatch(UUID);
  });

  it('is empty for a user in no community, and at most 100 long', async () => {
    const loner = await registerUser('ev-loner');
    const empty = await api('GET', '/api/mobile/events/upcoming', { token: loner.accessToken });
    expect(empty.status).toBe(200);
    expect(empty.body).toEqual([]);

    const busy = await registerUser('ev-busy');
    const community = await createCommunity();
    await addMember(community.id, busy.userId);
    await db()`
      with nodes as (insert into app.nodes (kind) select 'event' from generate_series(1, 120) returning id)
      insert into app.events (node_id, community_id, title, starts_at)
      select n.id, ${community.id}, 'bulk ' || row_number() over (), now() + (row_number() over ()) * interval '1 hour' from nodes n`;
    const res = await api('GET', '/api/mobile/events/upcoming', { token: busy.accessToken });
    expect(res.status).toBe(200);
    expect(res.body).toHaveLength(100);
    const dates = res.body.map((e: { date: string }) => Date.parse(e.date));
    expect([...dates].sort((a, b) => a - b)).toEqual(dates);
  });

  it('answers 401 without a valid token', async () => {
    const res = await api('GET', '/api/mobile/events/upcoming', { token: 'nope' });
    expect(res.status).toBe(401);
    expectErrorShape(res.body);
  });
});

// Check-ins over HTTP: every case of docs/api/mobile.md#events-and-check-ins,
// the venue concurrency window around its edges, idempotent repeats (also
// under parallel requests: one row), check-out, the current check-in list
// and the error statuses and bodies (docs/api/conventions.md#errors).
import { describe, expect, it } from 'vitest';
import { api, db, expectErrorShape, registerUser, type TestUser } from '../helpers.ts';
import { createCommunity, createEvent, createHat, createVenue, unknownId } from '../support/event-fixtures.ts';
import { ISO, UUID } from '../support/formats.ts';

const checkin = (user: TestUser, eventId: string, body?: unknown) =>
  api('POST', `/api/mobile/events/${eventId}/checkin`, { token: user.accessToken, body });
const checkout = (user: TestUser, eventId: string) =>
  api('DELETE', `/api/mobile/events/${eventId}/checkin`, { token: user.accessToken });
const venueCheckin = (user: TestUser, venueId: string, body?: unknown) =>
  api('POST', `/api/mobile/venues/${venueId}/checkin`, { token: user.accessToken, body });
const currentCheckins = (user: TestUser) => api('GET', '/api/mobile/checkins', { token: user.accessToken });

async function anEvent(starts = '-30 minutes', ends: string | null = '90 minutes') {
  const community = await createCommunity();
  return createEvent({ communityId: community.id, starts, ends });
}

const rowsFor = async (userId: string) =>
  db()`select event_id, venue_node_id, checked_out_at from app.checkins where user_id = ${userId} order by checked_in_at`;

describe('POST /api/mobile/events/{event_id}/checkin', () => {
  it('checks in: 201 with the check-in; the body may be absent', async () => {
    const user = await registerUser('ci-first');
    const event = await anEvent();
    const res = await checkin(user, event.id);
    expect(res.status).toBe(201);
    expect(res.body).toEqual({
      success: true,
      checkin: {
        id: expect.stringMatching(UUID),
        type: 'event',
        event_id: event.id,
        venue_id: null,
        hat_id: null,
        location_id: null,
        visibility: 'anonymous',
        checked_in_at: expect.stringMatching(ISO),
        checked_out_at: null,
        device_checked_in_at: null,
      },
    });
  });

  it('accepts {} and the optional fields; the event may be named by its node id', async () => {
    const user = await registerUser('ci-fields');
    const hat = await createHat(user);
    const location = unknownId();
    const empty = await checkin(user, (await anEvent()).id, {});
    expect(empty.status).toBe(201);
    const event = await anEvent();
    const full = await checkin(user, event.nodeId, { hat_id: hat, location_id: location, visibility: 'public' });
    expect(full.status).toBe(201);
    expect(full.body.checkin).toMatchObject({ event_id: event.id, hat_id: hat, location_id: location, visibility: 'public' });
  });

  it('a repeat while checked in answers 200 with the same check-in', async () => {
    const user = await registerUser('ci-repeat');
    const event = await anEvent();
    const first = await checkin(user, event.id);
    const again = await checkin(user, event.id, { visibility: 'public' });
    expect(first.status).toBe(201);
    expect(again.status).toBe(200);
    expect(again.body).toEqual(first.body);
    expect(await rowsFor(user.userId)).toHaveLength(1);
  });

  it('10 parallel check-ins of one user to one event: one row, one 201, nine 200 with that row', async () => {
    const user = await registerUser('ci-race');
    const event = await anEvent();
    const results = await Promise.all(Array.from({ length: 10 }, () => checkin(user, event.id)));
    const statuses = results.map((r) => r.status).sort();
    expect(statuses).toEqual([200, 200, 200, 200, 200, 200, 200, 200, 200, 201]);
    expect(new Set(results.map((r) => r.body.checkin.id)).size).toBe(1);
    expect(await rowsFor(user.userId)).toHaveLength(1);
  });

  it.each([
    ['visibility not in the enum', { visibility: 'secret' }],
    ['hat_id not a uuid', { hat_id: 'hat' }],
    ['location_id not a uuid', { location_id: 7 }],
    ['a body that is not an object', [1, 2]],
  ])('422 with the Error body for %s', async (_name, body) => {
    const user = await registerUser('ci-422');
    const res = await checkin(user, (await anEvent()).id, body);
    expect(res.status).toBe(422);
    expectErrorShape(res.body);
  });

  it("422 when hat_id is not the caller's own hat (someone else's, or unknown)", async () => {
    const user = await registerUser('ci-hat');
    const other = await registerUser('ci-hat-other');
    const othersHat = await createHat(other);
    const event = await anEvent();
    for (const hat_id of [othersHat, unknownId()]) {
      const res = await checkin(user, event.id, { hat_id });
      expect(res.status).toBe(422);
      expectErrorShape(res.body);
      expect(res.body.error).toBe('invalid_hat');
    }
    expect(await rowsFor(user.userId)).toHaveLength(0);
  });

  it('404 for an unknown or malformed event id; 401 without a token', async () => {
    const user = await registerUser('ci-404');
    for (const id of [unknownId(), 'nope']) {
      const res = await checkin(user, id);
      expect(res.status).toBe(404);
      expectErrorShape(res.body);
    }
    const anonymous = await api('POST', `/api/mobile/events/${unknownId()}/checkin`);
    expect(anonymous.status).toBe(401);
    expectErrorShape(anonymous.body);
  });

  it('malformed JSON is 400', async () => {
    const user = await registerUser('ci-json');
    const res = await api('POST', `/api/mobile/events/${(await anEvent()).id}/checkin`, { token: user.accessToken, rawBody: '{' });
    expect(res.status).toBe(400);
    expectErrorShape(res.body);
  });
});

describe('DELETE /api/mobile/events/{event_id}/checkin', () => {
  it('checks out: 200 with a message; the row stays with checked_out_at; then 404; a new check-in is 201', async () => {
    const user = await registerUser('ci-out');
    const event = await anEvent();
    const first = await checkin(user, event.id);
    const out = await checkout(user, event.id);
    expect(out.status).toBe(200);
    expect(out.body).toEqual({ success: true, message: expect.any(String) });
    const [row] = await db()`select checked_out_at from app.checkins where id = ${first.body.checkin.id}`;
    expect(row!.checked_out_at).toBeInstanceOf(Date);

    const twice = await checkout(user, event.id);
    expect(twice.status).toBe(404);
    expectErrorShape(twice.body);
    expect(twice.body.error).toBe('not_checked_in');

    const again = await checkin(user, event.id);
    expect(again.status).toBe(201);
    expect(again.body.checkin.id).not.toBe(first.body.checkin.id);
    expect(await rowsFor(user.userId)).toHaveLength(2);
  });

  it('404 when never checked in, for an unknown event, and for a malformed id', async () => {
    const user = await registerUser('ci-out-404');
    const event = await anEvent();
    for (const id of [event.id, unknownId(), 'x']) {
      const res = await checkout(user, id);
      expect(res.status).toBe(404);
      expectErrorShape(res.body);
    }
  });

  it("one user's check-out leaves another's check-in alone", async () => {
    const alice = await registerUser('ci-alice');
    const bob = await registerUser('ci-bob');
    const event = await anEvent();
    await checkin(alice, event.id);
    expect((await checkout(bob, event.id)).status).toBe(404);
    expect((await rowsFor(alice.userId))[0]!.checked_out_at).toBeNull();
  });
});

describe('POST /api/mobile/venues/{venue_id}/checkin', () => {
  async function venueWith(...events: Array<{ starts: string; ends?: string | null }>) {
    const community = await createCommunity();
    const venue = await createVenue(`Venue ${Math.random().toString(36).slice(2, 7)}`);
    const made = [];
    for (const e of events) made.push(await createEvent({ communityId: community.id, venueNodeId: venue, ...e }));
    return { venue, events: made };
  }

  it('zero concurrent events: 201, type venue, checked in to the venue', async () => {
    const user = await registerUser('vc-zero');
    const hat = await createHat(user);
    const { venue } = await venueWith({ starts: '1 day' }, { starts: '-2 days', ends: '-47 hours' });
    const res = await venueCheckin(user, venue, { hat_id: hat });
    expect(res.status).toBe(201);
    expect(res.body).toEqual({
      success: true,
      type: 'venue',
      checkin: {
        id: expect.stringMatching(UUID),
        type: 'venue',
        event_id: null,
        venue_id: venue,
        hat_id: hat,
        location_id: null,
        visibility: 'anonymous',
        checked_in_at: expect.stringMatching(ISO),
        checked_out_at: null,
        device_checked_in_at: null,
      },
    });
    const again = await venueCheckin(user, venue, { hat_id: hat });
    expect(again.status).toBe(200);
    expect(again.body.checkin.id).toBe(res.body.checkin.id);
  });

  it('exactly one concurrent event: 201, type event, checked in to that event', async () => {
    const user = await registerUser('vc-one');
    const hat = await createHat(user);
    const { venue, events } = await venueWith({ starts: '-1 hour', ends: '1 hour' }, { starts: '1 day' });
    const res = await venueCheckin(user, venue, { hat_id: hat, visibility: 'public' });
    expect(res.status).toBe(201);
    expect(res.body).toMatchObject({ success: true, type: 'event', checkin: { type: 'event', event_id: events[0]!.id, venue_id: null, visibility: 'public', hat_id: hat } });
    const rows = await rowsFor(user.userId);
    expect(rows).toEqual([{ event_id: events[0]!.id, venue_node_id: null, checked_out_at: null }]);
  });

  it('two or more concurrent events: 200 event_selection, nobody checked in', async () => {
    const user = await registerUser('vc-many');
    const hat = await createHat(user);
    const { venue, events } = await venueWith(
      { starts: '-1 hour', ends: '1 hour' },
      { starts: '90 minutes', ends: '3 hours' },
      { starts: '-3 hours', ends: '-1 hour' },
      { starts: '5 hours' },
    );
    const res = await venueCheckin(user, venue, { hat_id: hat });
    expect(res.status).toBe(200);
    expect(res.body).toEqual({
      success: true,
      type: 'event_selection',
      message: expect.any(String),
      event_count: 3,
      events: expect.any(Array),
    });
    // Soonest first; exactly the listed fields.
    expect(res.body.events.map((e: { id: string }) => e.id)).toEqual([events[2]!.id, events[0]!.id, events[1]!.id]);
    expect(res.body.events[0]).toEqual({
      id: events[2]!.id,
      node_id: events[2]!.nodeId,
      title: events[2]!.title,
      description: null,
      date: expect.stringMatching(ISO),
      end_time: expect.stringMatching(ISO),
      image_path: null,
      image_url: null,
    });
    expect(await rowsFor(user.userId)).toHaveLength(0);
  });

  it.each([
    ['ended 1h59m ago (no end: started 3h59m ago)', { starts: '-239 minutes' }, 'event'],
    ['ended 1h59m ago', { starts: '-5 hours', ends: '-119 minutes' }, 'event'],
    ['ended 2h01m ago', { starts: '-5 hours', ends: '-121 minutes' }, 'venue'],
    ['ended 2h01m ago (no end: started 4h01m ago)', { starts: '-241 minutes' }, 'venue'],
    ['starts in 1h59m', { starts: '119 minutes', ends: '5 hours' }, 'event'],
    ['starts in 2h01m', { starts: '121 minutes', ends: '5 hours' }, 'venue'],
  ])('the 2-hour window: an event that %s gives type %s', async (_name, timing, expected) => {
    const user = await registerUser('vc-window');
    const hat = await createHat(user);
    const { venue } = await venueWith(timing);
    const res = await venueCheckin(user, venue, { hat_id: hat });
    expect(res.status).toBe(201);
    expect(res.body.type).toBe(expected);
  });

  it('422 when hat_id is missing, malformed or not the caller\'s; 422 for a bad visibility', async () => {
    const user = await registerUser('vc-422');
    const other = await registerUser('vc-422-other');
    const { venue } = await venueWith({ starts: '-1 hour' });
    const othersHat = await createHat(other);
    const ownHat = await createHat(user);
    for (const body of [undefined, {}, { hat_id: null }, { hat_id: 'x' }, { hat_id: othersHat }, { hat_id: unknownId() }, { hat_id: ownHat, visibility: 'loud' }]) {
      const res = await venueCheckin(user, venue, body);
      expect(res.status, JSON.stringify(body)).toBe(422);
      expectErrorShape(res.body);
    }
    expect(await rowsFor(user.userId)).toHaveLength(0);
  });

  it('404 for an unknown venue, a malformed id, or a node that is not a venue', async () => {
    const user = await registerUser('vc-404');
    const hat = await createHat(user);
    const event = await anEvent();
    for (const id of [unknownId(), 'venue-1', event.nodeId]) {
      const res = await venueCheckin(user, id, { hat_id: hat });
      expect(res.status).toBe(404);
      expectErrorShape(res.body);
    }
  });

  it('parallel venue check-ins of one user: one row', async () => {
    const user = await registerUser('vc-race');
    const hat = await createHat(user);
    const { venue } = await venueWith({ starts: '-1 hour' });
    const results = await Promise.all(Array.from({ length: 8 }, () => venueCheckin(user, venue, { hat_id: hat })));
    expect(results.map((r) => r.status).sort()).toEqual([200, 200, 200, 200, 200, 200, 200, 201]);
    expect(await rowsFor(user.userId)).toHaveLength(1);
  });

  it('DELETE ends a venue check-in (404 when not checked in)', async () => {
    const user = await registerUser('vc-out');
    const hat = await createHat(user);
    const { venue } = await venueWith();
    await venueCheckin(user, venue, { hat_id: hat });
    const out = await api('DELETE', `/api/mobile/venues/${venue}/checkin`, { token: user.accessToken });
    expect(out.status).toBe(200);
    expect(out.body).toEqual({ success: true, message: expect.any(String) });
    const again = await api('DELETE', `/api/mobile/venues/${venue}/checkin`, { token: user.accessToken });
    expect(again.status).toBe(404);
    expectErrorShape(again.body);
  });
});

describe('GET /api/mobile/checkins', () => {
  it('lists current event and venue check-ins with their fields, newest first', async () => {
    const user = await registerUser('list');
    const hat = await createHat(user);
    const community = await createCommunity();
    const venue = await createVenue('Corner Café');
    const upcoming = await createEvent({ communityId: community.id, title: 'Later today', starts: '5 hours' });
    const past = await createEvent({ communityId: community.id, title: 'Yesterday', starts: '-1 day', ends: '-23 hours' });
    const left = await createEvent({ communityId: community.id, title: 'Left early', starts: '-1 hour' });

    await checkin(user, past.id, { hat_id: hat, visibility: 'public' });
    await checkin(user, left.id);
    await checkout(user, left.id);
    await venueCheckin(user, venue, { hat_id: hat });
    await checkin(user, upcoming.id);

    const res = await currentCheckins(user);
    expect(res.status).toBe(200);
    expect(res.body).toEqual({
      success: true,
      checkins: [
        {
          type: 'event', event_id: upcoming.id, event_title: 'Later today', event_status: 'upcoming',
          checked_in_at: expect.stringMatching(ISO), event_date: expect.stringMatching(ISO), event_end_time: null,
          hat_id: null, visibility: 'anonymous',
        },
        {
          type: 'venue', venue_id: venue, venue_name: 'Corner Café', checked_in_at: expect.stringMatching(ISO),
          hat_id: hat, visibility: 'anonymous',
        },
        {
          type: 'event', event_id: past.id, event_title: 'Yesterday', event_status: 'past',
          checked_in_at: expect.stringMatching(ISO), event_date: expect.stringMatching(ISO),
          event_end_time: expect.stringMatching(ISO), hat_id: hat, visibility: 'public',
        },
      ],
      current_ongoing_checkin: null,
    });
  });

  it('current_ongoing_checkin is the most recent ongoing event check-in, never a venue', async () => {
    const user = await registerUser('ongoing');
    const hat = await createHat(user);
    const community = await createCommunity();
    const first = await createEvent({ communityId: community.id, title: 'First', starts: '-1 hour', ends: '2 hours' });
    const second = await createEvent({ communityId: community.id, title: 'Second', starts: '-10 minutes' });
    const upcoming = await createEvent({ communityId: community.id, title: 'Upcoming', starts: '1 hour' });
    const venue = await createVenue('Quiet venue');

    await checkin(user, first.id);
    await checkin(user, second.id);
    await checkin(user, upcoming.id);
    await venueCheckin(user, venue, { hat_id: hat });

    const res = await currentCheckins(user);
    expect(res.body.current_ongoing_checkin).toEqual({
      type: 'event', event_id: second.id, event_title: 'Second', event_status: 'ongoing',
    });
    expect(res.body.checkins.map((c: { type: string }) => c.type)).toEqual(['venue', 'event', 'event', 'event']);

    await checkout(user, second.id);
    const after = await currentCheckins(user);
    expect(after.body.current_ongoing_checkin).toMatchObject({ event_id: first.id, event_status: 'ongoing' });
  });

  it('is empty for a new user', async () => {
    const user = await registerUser('list-empty');
    const res = await currentCheckins(user);
    expect(res.body).toEqual({ success: true, checkins: [], current_ongoing_checkin: null });
  });

  it('shows only the caller\'s own check-ins', async () => {
    const alice = await registerUser('list-alice');
    const bob = await registerUser('list-bob');
    const event = await anEvent();
    await checkin(alice, event.id);
    expect((await currentCheckins(bob)).body.checkins).toEqual([]);
    expect((await currentCheckins(alice)).body.checkins).toHaveLength(1);
  });

  it('422 with the Simple body {error} when the user has no node; 401 without a token', async () => {
    const user = await registerUser('list-nonode');
    await db()`update app.profiles set node_id = null where id = ${user.userId}`;
    const res = await currentCheckins(user);
    expect(res.status).toBe(422);
    expect(res.body).toEqual({ error: expect.any(String) });

    const anonymous = await api('GET', '/api/mobile/checkins');
    expect(anonymous.status).toBe(401);
    expectErrorShape(anonymous.body);
  });
});

describe('offline check-in: checked_in_at (docs/offline-writes.md#offline-check-in)', () => {
  const ago = async (interval: string) => {
    const [row] = await db()`select app.iso(now() - ${interval}::interval) as at`;
    return row!.at as string;
  };

  it("inside the window and the day: 201, the phone's time kept beside the server's", async () => {
    const user = await registerUser('ci-offline');
    const event = await anEvent('-3 hours', '1 hour');
    const at = await ago('2 hours');
    const res = await checkin(user, event.id, { checked_in_at: at });
    expect(res.status).toBe(201);
    expect(res.body.checkin.device_checked_in_at).toBe(at);
    expect(Date.parse(res.body.checkin.checked_in_at)).toBeGreaterThan(Date.parse(at));
    const [row] = await db()`select device_checked_in_at from app.checkins where id = ${res.body.checkin.id}`;
    expect((row!.device_checked_in_at as Date).toISOString()).toBe(at);
  });

  it('a few minutes ahead of the server (clock skew) is accepted', async () => {
    const user = await registerUser('ci-offline-skew');
    const event = await anEvent();
    const res = await checkin(user, event.id, { checked_in_at: await ago('-4 minutes') });
    expect(res.status).toBe(201);
  });

  it.each([
    ['more than 5 minutes ahead', '-10 minutes', ['-30 minutes', '90 minutes'], 'checkin_time_in_future'],
    ['more than 24 hours old', '25 hours', ['-26 hours', '2 hours'], 'checkin_time_too_old'],
    ['before the window (backdated)', '3 hours', ['-30 minutes', '90 minutes'], 'checkin_time_outside_event'],
    ['after the window', '1 hour', ['-6 hours', '-4 hours'], 'checkin_time_outside_event'],
    ['for an event that has not begun', '1 minute', ['5 hours', '7 hours'], 'checkin_time_outside_event'],
  ] as const)('%s: 422 and nothing recorded', async (_, before, [starts, ends], code) => {
    const user = await registerUser('ci-offline-refused');
    const event = await anEvent(starts, ends);
    const res = await checkin(user, event.id, { checked_in_at: await ago(before) });
    expect(res.status).toBe(422);
    expect(res.body.error).toBe(code);
    expect(await rowsFor(user.userId)).toEqual([]);
  });

  it('a time that is not an ISO 8601 instant is 422 validation_error', async () => {
    const user = await registerUser('ci-offline-bad');
    const event = await anEvent();
    for (const value of ['yesterday', '2026-13-01T00:00:00Z', 12345]) {
      const res = await checkin(user, event.id, { checked_in_at: value });
      expect(res.status).toBe(422);
      expect(res.body.error).toBe('validation_error');
    }
    expect(await rowsFor(user.userId)).toEqual([]);
  });

  it('the database refuses a device time out of bounds whoever inserts it', async () => {
    const user = await registerUser('ci-offline-db');
    const event = await anEvent();
    await expect(
      db()`insert into app.checkins (user_id, event_id, device_checked_in_at) values (${user.userId}, ${event.id}, now() - interval '2 days')`,
    ).rejects.toThrow(/checkins_device_time_bounded/);
  });
});

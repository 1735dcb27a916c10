// Connections over HTTP: the record of docs/api/mobile.md#connections,
// create/get/patch/list/recent and the event's connections, the 422 and 404
// cases, and isolation between users (row-level security: someone else's is a 404).
import { describe, expect, it } from 'vitest';
import { api, db, expectErrorShape, registerUser, type TestUser } from '../helpers.ts';
import { createCommunity, createEvent, createHat, unknownId } from '../support/event-fixtures.ts';
import { ISO, UUID } from '../support/formats.ts';
import { nodeOf } from '../support/sql-fixtures.ts';

const FIELDS = [
  'id', 'owner_node_id', 'target_node_id', 'connection_type', 'event_id', 'my_hat_id', 'their_hat_id',
  'notes', 'strength', 'tags', 'created_at', 'updated_at',
];

const create = (user: TestUser, body: unknown) => api('POST', '/api/mobile/connections', { token: user.accessToken, body });

async function pair(prefix: string) {
  const me = await registerUser(`${prefix}-me`);
  const them = await registerUser(`${prefix}-them`);
  return { me, them, meNode: await nodeOf(me.userId), themNode: await nodeOf(them.userId) };
}

describe('POST /api/mobile/connections', () => {
  it('creates a connection: 201 with the whole record', async () => {
    const { me, them, meNode, themNode } = await pair('conn-create');
    const myHat = await createHat(me, 'Founder me');
    const theirHat = await createHat(them, 'Investor them');
    const event = await createEvent({ communityId: (await createCommunity()).id, starts: '-1 hour' });
    const res = await create(me, {
      target_node_id: themNode, connection_type: 'post_event', event_id: event.id, my_hat_id: myHat,
      their_hat_id: theirHat, notes: 'Met at the bar', strength: 'strong', tags: ['investor', 'climate'],
    });
    expect(res.status).toBe(201);
    expect(res.body.success).toBe(true);
    expect(Object.keys(res.body.connection).sort()).toEqual([...FIELDS].sort());
    expect(res.body.connection).toEqual({
      id: expect.stringMatching(UUID),
      owner_node_id: meNode,
      target_node_id: themNode,
      connection_type: 'post_event',
      event_id: event.id,
      my_hat_id: myHat,
      their_hat_id: theirHat,
      notes: 'Met at the bar',
      strength: 'strong',
      tags: ['investor', 'climate'],
      created_at: expect.stringMatching(ISO),
      updated_at: expect.stringMatching(ISO),
    });
  });

  it('only target_node_id is required; connection_type defaults to in_event with an event, else async', async () => {
    const { me, themNode } = await pair('conn-min');
    const bare = await create(me, { target_node_id: themNode });
    expect(bare.status).toBe(201);
    expect(bare.body.connection).toMatchObject({
      connection_type: 'async', event_id: null, my_hat_id: null, their_hat_id: null, notes: null, strength: null, tags: [],
    });
    const event = await createEvent({ communityId: (await createCommunity()).id, starts: '-1 hour' });
    const atEvent = await create(me, { target_node_id: themNode, event_id: event.nodeId });
    expect(atEvent.status).toBe(201);
    expect(atEvent.body.connection).toMatchObject({ connection_type: 'in_event', event_id: event.id });
  });

  it('accepts the fields wrapped as {connection: {...}} too', async () => {
    const { me, themNode } = await pair('conn-wrap');
    const res = await create(me, { connection: { target_node_id: themNode, strength: 'weak' } });
    expect(res.status).toBe(201);
    expect(res.body.connection).toMatchObject({ target_node_id: themNode, strength: 'weak' });
  });

  it('422 with the Error body for bad input', async () => {
    const { me, them, themNode } = await pair('conn-422');
    const othersHat = await createHat(them);
    const strangersHat = await createHat(await registerUser('conn-stranger'));
    const myHat = await createHat(me);
    const cases: Array<[string, unknown, string?]> = [
      ['no body', undefined],
      ['missing target_node_id', { notes: 'x' }],
      ['malformed target_node_id', { target_node_id: 'someone' }],
      ['unknown target node', { target_node_id: unknownId() }, 'target_node_not_found'],
      ['bad connection_type', { target_node_id: themNode, connection_type: 'telepathy' }],
      ['bad strength', { target_node_id: themNode, strength: 'unbreakable' }],
      ['tags not an array', { target_node_id: themNode, tags: 'a,b' }],
      ['tags with a non-string', { target_node_id: themNode, tags: [1] }],
      ['unknown event', { target_node_id: themNode, event_id: unknownId() }, 'event_not_found'],
      ['my_hat_id is their hat', { target_node_id: themNode, my_hat_id: othersHat }, 'invalid_hat'],
      ['my_hat_id unknown', { target_node_id: themNode, my_hat_id: unknownId() }, 'invalid_hat'],
      ['their_hat_id not the target\'s', { target_node_id: themNode, their_hat_id: strangersHat }, 'invalid_their_hat'],
      ['their_hat_id is mine', { target_node_id: themNode, my_hat_id: myHat, their_hat_id: myHat }, 'invalid_their_hat'],
    ];
    for (const [name, body, code] of cases) {
      const res = await create(me, body);
      expect(res.status, name).toBe(422);
      expectErrorShape(res.body);
      if (code) expect(res.body.error, name).toBe(code);
    }
    const [row] = await db()`select count(*)::int as n from app.connections where owner_node_id = ${await nodeOf(me.userId)}`;
    expect(row!.n).toBe(0);
  });

  it('422 when the caller has no node; 401 without a token', async () => {
    const { me, themNode } = await pair('conn-nonode');
    await db()`update app.profiles set node_id = null where id = ${me.userId}`;
    const res = await create(me, { target_node_id: themNode });
    expect(res.status).toBe(422);
    expectErrorShape(res.body);
    const anonymous = await api('POST', '/api/mobile/connections', { body: { target_node_id: themNode } });
    expect(anonymous.status).toBe(401);
  });
});

describe('GET and PATCH /api/mobile/connections/{id}', () => {
  it('reads one connection; patches notes, strength and tags, leaving the rest', async () => {
    const { me, themNode } = await pair('conn-patch');
    const made = (await create(me, { target_node_id: themNode, notes: 'first', strength: 'weak', tags: ['a'] })).body.connection;
    const got = await api('GET', `/api/mobile/connections/${made.id}`, { token: me.accessToken });
    expect(got.status).toBe(200);
    expect(got.body).toEqual({ success: true, connection: made });

    const notesOnly = await api('PATCH', `/api/mobile/connections/${made.id}`, { token: me.accessToken, body: { notes: 'second' } });
    expect(notesOnly.status).toBe(200);
    expect(notesOnly.body.connection).toMatchObject({ notes: 'second', strength: 'weak', tags: ['a'] });
    expect(Date.parse(notesOnly.body.connection.updated_at)).toBeGreaterThanOrEqual(Date.parse(made.updated_at));

    const all = await api('PATCH', `/api/mobile/connections/${made.id}`, {
      token: me.accessToken, body: { strength: 'strong', tags: ['b', 'c'], notes: null },
    });
    expect(all.body).toEqual({
      success: true,
      connection: { ...made, notes: null, strength: 'strong', tags: ['b', 'c'], updated_at: expect.stringMatching(ISO) },
    });

    const nothing = await api('PATCH', `/api/mobile/connections/${made.id}`, { token: me.accessToken, body: {} });
    expect(nothing.status).toBe(200);
    expect(nothing.body.connection).toMatchObject({ notes: null, strength: 'strong', tags: ['b', 'c'] });
  });

  it('PATCH answers 422 for bad values', async () => {
    const { me, themNode } = await pair('conn-patch-422');
    const made = (await create(me, { target_node_id: themNode })).body.connection;
    for (const body of [{ strength: 'huge' }, { tags: 'x' }, { notes: 5 }, { tags: [''] }]) {
      const res = await api('PATCH', `/api/mobile/connections/${made.id}`, { token: me.accessToken, body });
      expect(res.status, JSON.stringify(body)).toBe(422);
      expectErrorShape(res.body);
    }
  });

  it("someone else's connection is 404 to read and to patch, and stays unchanged", async () => {
    const { me, themNode } = await pair('conn-iso');
    const intruder = await registerUser('conn-intruder');
    const made = (await create(me, { target_node_id: themNode, notes: 'private' })).body.connection;
    const read = await api('GET', `/api/mobile/connections/${made.id}`, { token: intruder.accessToken });
    expect(read.status).toBe(404);
    expectErrorShape(read.body);
    const patch = await api('PATCH', `/api/mobile/connections/${made.id}`, { token: intruder.accessToken, body: { notes: 'hacked' } });
    expect(patch.status).toBe(404);
    expectErrorShape(patch.body);
    const [row] = await db()`select notes from app.connections where id = ${made.id}`;
    expect(row!.notes).toBe('private');
  });

  it('404 for unknown and malformed ids', async () => {
    const user = await registerUser('conn-404');
    for (const id of [unknownId(), 'abc']) {
      expect((await api('GET', `/api/mobile/connections/${id}`, { token: user.accessToken })).status).toBe(404);
      const patch = await api('PATCH', `/api/mobile/connections/${id}`, { token: user.accessToken, body: { notes: 'x' } });
      expect(patch.status).toBe(404);
      expectErrorShape(patch.body);
    }
  });
});

describe('connection lists', () => {
  it('list and recent: only the caller\'s, newest first; recent holds the 20 newest', async () => {
    const { me, themNode } = await pair('conn-list');
    const other = await registerUser('conn-list-other');
    await create(other, { target_node_id: themNode, notes: 'not yours' });
    const meNode = await nodeOf(me.userId);
    // 25 connections with distinct creation times, oldest first.
    await db()`
      insert into app.connections (owner_node_id, target_node_id, notes, created_at)
      select ${meNode}, ${themNode}, 'n' || g, now() - (30 - g) * interval '1 minute' from generate_series(1, 25) g`;

    const list = await api('GET', '/api/mobile/connections', { token: me.accessToken });
    expect(list.status).toBe(200);
    expect(list.body.success).toBe(true);
    expect(list.body.connections).toHaveLength(25);
    expect(list.body.connections[0].notes).toBe('n25');
    expect(list.body.connections.every((c: { owner_node_id: string }) => c.owner_node_id === meNode)).toBe(true);

    const recent = await api('GET', '/api/mobile/connections/recent', { token: me.accessToken });
    expect(recent.status).toBe(200);
    expect(recent.body.connections.map((c: { notes: string }) => c.notes)).toEqual(
      Array.from({ length: 20 }, (_, i) => `n${25 - i}`),
    );
    for (const c of recent.body.connections) expect(Object.keys(c).sort()).toEqual([...FIELDS].sort());
  });

  it('GET /api/mobile/events/{event_id}/connections: the caller\'s connections made at that event', async () => {
    const { me, themNode } = await pair('conn-event');
    const other = await registerUser('conn-event-other');
    const community = await createCommunity();
    const event = await createEvent({ communityId: community.id, starts: '-1 hour' });
    const elsewhere = await createEvent({ communityId: community.id, starts: '-1 day' });
    const here = (await create(me, { target_node_id: themNode, event_id: event.id })).body.connection;
    await create(me, { target_node_id: themNode, event_id: elsewhere.id });
    await create(me, { target_node_id: themNode });
    await create(other, { target_node_id: themNode, event_id: event.id });

    const res = await api('GET', `/api/mobile/events/${event.id}/connections`, { token: me.accessToken });
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ success: true, connections: [here] });
    const byNode = await api('GET', `/api/mobile/events/${event.nodeId}/connections`, { token: me.accessToken });
    expect(byNode.body.connections).toEqual([here]);

    const none = await api('GET', `/api/mobile/events/${event.id}/connections`, { token: (await registerUser('conn-none')).accessToken });
    expect(none.body).toEqual({ success: true, connections: [] });

    for (const id of [unknownId(), 'nope']) {
      const missing = await api('GET', `/api/mobile/events/${id}/connections`, { token: me.accessToken });
      expect(missing.status).toBe(404);
      expectErrorShape(missing.body);
    }
  });

  it('401 without a token', async () => {
    for (const path of ['/api/mobile/connections', '/api/mobile/connections/recent', `/api/mobile/connections/${unknownId()}`]) {
      const res = await api('GET', path);
      expect(res.status).toBe(401);
      expectErrorShape(res.body);
    }
  });
});

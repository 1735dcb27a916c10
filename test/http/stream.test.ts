// GET /api/mobile/events/upcoming/stream through the real server: snapshot,
// live changes in order, events leaving the feed as deletes, resume with
// Last-Event-ID (header and query), reset, keep-alives, the per-user cap,
// back-pressure, a second gateway process on the same database, shutdown.
import fs from 'node:fs';
import http from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { inject } from 'vitest';
import { loadConfig, type Config } from '../../gateway/core/process/config.ts';
import { createLogger } from '../../gateway/core/process/log.ts';
import { startGateway, type RunningGateway } from '../../gateway/server.ts';
import { databaseUrl, db, expectErrorShape, forgeToken, jwtSecret, logFile, publicUrl, registerUser, type TestUser } from '../helpers.ts';
import { createCommunity, createEvent, type Community } from '../support/event-fixtures.ts';
import { ISO } from '../support/formats.ts';
import { addMember } from '../support/sql-fixtures.ts';
import { openStream, STREAM_PATH, type SseMessage, type SseStream } from '../support/sse.ts';

const open: SseStream[] = [];
async function stream(...args: Parameters<typeof openStream>): Promise<SseStream> {
  const s = await openStream(...args);
  open.push(s);
  return s;
}
afterAll(() => open.forEach((s) => s.close()));

async function member(community?: Community): Promise<{ user: TestUser; community: Community }> {
  const c = community ?? (await createCommunity());
  const user = await registerUser('stream');
  await addMember(c.id, user.userId);
  return { user, community: c };
}

/** The change-log ids of an event's changes, in order. */
async function changeIds(eventId: string): Promise<string[]> {
  const rows = await db()`select id from app.change_log where record_id = ${eventId} order by id`;
  return rows.map((r) => String(r.id));
}

const ids = (messages: SseMessage[]) => messages.map((m) => m.id);
const kinds = (messages: SseMessage[]) => messages.map((m) => m.event);

/** A gateway of its own on the test database (another process, as far as the database can tell). */
async function secondGateway(tweak: (config: Config) => void = () => {}): Promise<RunningGateway> {
  const config = loadConfig({ PORT: '0', HOST: '127.0.0.1', JWT_SECRET: jwtSecret, PUBLIC_URL: publicUrl, DB_POOL_MAX: '6' });
  tweak(config);
  return startGateway(config, databaseUrl, createLogger('silent'), { includeCurrentMigration: false });
}

describe('upcoming stream: access', () => {
  it('401 with the Error body without a token, with a bad token, and with a bad ?access_token', async () => {
    for (const s of [await stream(), await stream({ token: 'not-a-jwt' }), await stream({ query: '?access_token=nope' })]) {
      expect(s.status).toBe(401);
      expectErrorShape(s.body);
      expect(s.body.error).toBe('unauthorized');
    }
  });

  it('400 for a Last-Event-ID that is not a change id', async () => {
    const { user } = await member();
    const s = await stream({ token: user.accessToken, lastEventId: 'abc' });
    expect(s.status).toBe(400);
    expectErrorShape(s.body);
    const q = await stream({ token: user.accessToken, query: '?last_event_id=-1' });
    expect(q.status).toBe(400);
  });

  it('accepts ?access_token= for clients that cannot set headers, and never logs it', async () => {
    const { user } = await member();
    const s = await stream({ query: `?access_token=${user.accessToken}` });
    expect(s.status).toBe(200);
    await s.until((m) => m.event === 'ready');
    s.close();
    await new Promise((r) => setTimeout(r, 200));
    const log = fs.readFileSync(logFile, 'utf8');
    expect(log).toContain(STREAM_PATH);
    expect(log).not.toContain(user.accessToken);
  });
});

describe('upcoming stream: snapshot and live changes', () => {
  it('starts with a snapshot of the caller\'s upcoming events (inserts without ids), then ready with the change id', async () => {
    const { user, community } = await member();
    const later = await createEvent({ communityId: community.id, title: 'Later', starts: '3 days' });
    const sooner = await createEvent({ communityId: community.id, title: 'Sooner', starts: '1 day' });
    await createEvent({ communityId: community.id, title: 'Past', starts: '-3 days' });
    await createEvent({ communityId: (await createCommunity()).id, title: 'Elsewhere', starts: '1 day' });

    const s = await stream({ token: user.accessToken });
    expect(s.status).toBe(200);
    expect(s.headers.get('content-type')).toMatch(/^text\/event-stream/);
    expect(s.headers.get('cache-control')).toContain('no-cache');
    const opening = await s.until((m) => m.event === 'ready');
    expect(kinds(opening)).toEqual(['insert', 'insert', 'ready']);
    expect(opening.slice(0, 2).map((m) => m.json.id)).toEqual([sooner.id, later.id]);
    expect(opening.slice(0, 2).every((m) => m.id === undefined)).toBe(true);
    const first = opening[0]!.json;
    expect(first).toMatchObject({ id: sooner.id, title: 'Sooner', shortlink: sooner.shortlink, community_node_id: community.nodeId });
    expect(first.date).toMatch(ISO);
    expect(first.__sync_meta).toEqual({ operation: 'insert', table: 'events', timestamp: expect.stringMatching(ISO) });
    const ready = opening[2]!;
    const [head] = await db()`select max(id)::text as id from app.change_log`;
    expect(Number(ready.id)).toBeGreaterThanOrEqual(Number((await changeIds(sooner.id)).at(-1)));
    expect(Number(ready.id)).toBeLessThanOrEqual(Number(head!.id));
    expect(ready.json).toEqual({ last_event_id: Number(ready.id), mode: 'snapshot', snapshot: 2 });
  });

  it('delivers insert, update and delete in change order, with the change id and the Event JSON with __sync_meta', async () => {
    const { user, community } = await member();
    const other = await createCommunity();
    const s = await stream({ token: user.accessToken });
    await s.until((m) => m.event === 'ready');

    const event = await createEvent({ communityId: community.id, title: 'Meetup', starts: '2 days', description: 'first' });
    await createEvent({ communityId: other.id, title: 'Not mine', starts: '2 days' });
    await db()`update app.events set title = 'Meetup v2', description = null where id = ${event.id}`;
    await db()`update app.events set location = 'The Hall' where id = ${event.id}`;
    await db()`delete from app.events where id = ${event.id}`;

    const got = await s.take(4);
    expect(kinds(got)).toEqual(['insert', 'update', 'update', 'delete']);
    expect(ids(got)).toEqual(await changeIds(event.id));
    expect(got.map((m) => m.json.id)).toEqual([event.id, event.id, event.id, event.id]);
    expect(got.map((m) => m.json.title)).toEqual(['Meetup', 'Meetup v2', 'Meetup v2', 'Meetup v2']);
    expect(got[0]!.json.description).toBe('first');
    expect(got[2]!.json.location).toBe('The Hall');
    got.forEach((m) => {
      expect(m.json.__sync_meta).toEqual({ operation: m.event, table: 'events', timestamp: expect.stringMatching(ISO) });
      expect(m.json).toHaveProperty('deeplink_url');
      expect(m.json).toHaveProperty('public_full_url');
    });
    // Nothing from the other community arrived in between or after.
    await new Promise((r) => setTimeout(r, 200));
    expect(s.messages.filter((m) => m.json?.title === 'Not mine')).toEqual([]);
  });

  it('an event that stops being upcoming or visible arrives as a delete, and one that becomes so as an insert', async () => {
    const { user, community } = await member();
    const other = await createCommunity();
    const event = await createEvent({ communityId: community.id, title: 'Moving', starts: '1 day' });
    const s = await stream({ token: user.accessToken });
    await s.until((m) => m.event === 'ready');

    await db()`update app.events set community_id = ${other.id} where id = ${event.id}`; // leaves the caller's communities
    await db()`update app.events set title = 'Moving (elsewhere)' where id = ${event.id}`; // not the caller's: nothing
    await db()`update app.events set community_id = ${community.id} where id = ${event.id}`; // back
    await db()`update app.events set starts_at = now() - interval '5 hours', ends_at = now() - interval '4 hours' where id = ${event.id}`; // ended
    await db()`update app.events set starts_at = now() + interval '1 day', ends_at = null where id = ${event.id}`; // upcoming again

    const got = await s.take(4);
    expect(kinds(got)).toEqual(['delete', 'insert', 'delete', 'insert']);
    const all = await changeIds(event.id);
    expect(ids(got)).toEqual([all[1], all[3], all[4], all[5]]);
  });

  it('an event whose end passes arrives as a delete (expiry entry in the log)', async () => {
    const { user, community } = await member();
    const event = await createEvent({ communityId: community.id, title: 'Short', starts: '-30 minutes', ends: '1 second' });
    const s = await stream({ token: user.accessToken });
    const opening = await s.until((m) => m.event === 'ready');
    expect(opening.map((m) => m.json.id)).toContain(event.id);
    await new Promise((r) => setTimeout(r, 1200));
    await db()`select private.log_event_expiries()`;
    const [got] = await s.until((m) => m.event === 'delete' && m.json.id === event.id);
    const [entry] = await db()`select id::text from app.change_log where record_id = ${event.id} and operation = 'expire'`;
    expect(got!.id).toBe(entry!.id);
  });

  it('joining a community brings its upcoming events as inserts; leaving takes them away as deletes', async () => {
    const { user } = await member();
    const club = await createCommunity();
    const a = await createEvent({ communityId: club.id, title: 'A', starts: '1 day' });
    const b = await createEvent({ communityId: club.id, title: 'B', starts: '2 days' });
    await createEvent({ communityId: club.id, title: 'Old', starts: '-2 days' });
    const s = await stream({ token: user.accessToken });
    await s.until((m) => m.event === 'ready');

    await addMember(club.id, user.userId);
    const joined = await s.take(2);
    expect(kinds(joined)).toEqual(['insert', 'insert']);
    expect(joined.map((m) => m.json.id)).toEqual([a.id, b.id]);
    const [membership] = await db()`select max(id)::text as id from app.change_log where table_name = 'community_members' and record_id = ${club.id}`;
    // One change, two messages: the id is on the last one only.
    expect(ids(joined)).toEqual([undefined, membership!.id]);

    await db()`delete from app.community_members where community_id = ${club.id} and member_node_id = (select node_id from app.profiles where id = ${user.userId})`;
    const left = await s.take(2);
    expect(kinds(left)).toEqual(['delete', 'delete']);
    expect(left.map((m) => m.json.id)).toEqual([a.id, b.id]);
  });

  it('loses nothing while events are written as the stream opens: snapshot + changes = every event', async () => {
    const { user, community } = await member();
    const made: string[] = [];
    const writer = (async () => {
      for (let i = 0; i < 30; i++) made.push((await createEvent({ communityId: community.id, title: `Burst ${i}`, starts: `${i + 1} hours` })).id);
    })();
    await new Promise((r) => setTimeout(r, 30));
    const s = await stream({ token: user.accessToken });
    await writer;
    const seen = new Set<string>();
    await s.waitFor(
      () => {
        for (const m of s.messages) if (m.event === 'insert') seen.add(m.json.id);
        return made.every((id) => seen.has(id));
      },
      10_000,
      'every event',
    );
    // And none twice: snapshot inserts plus live inserts are disjoint.
    const inserts = s.messages.filter((m) => m.event === 'insert').map((m) => m.json.id);
    expect(inserts.length).toBe(new Set(inserts).size);
  });
});

describe('upcoming stream: resume', () => {
  it('Last-Event-ID resumes after a dropped connection: nothing lost, nothing repeated', async () => {
    const { user, community } = await member();
    const event = await createEvent({ communityId: community.id, title: 'v1', starts: '1 day' });
    const s = await stream({ token: user.accessToken });
    await s.until((m) => m.event === 'ready');
    await db()`update app.events set title = 'v2' where id = ${event.id}`;
    const [seen] = await s.take(1);
    expect(seen!.json.title).toBe('v2');
    s.close();

    // While disconnected.
    await db()`update app.events set title = 'v3' where id = ${event.id}`;
    await createEvent({ communityId: (await createCommunity()).id, title: 'Not mine', starts: '1 day' });
    const added = await createEvent({ communityId: community.id, title: 'Added', starts: '2 days' });
    await db()`update app.events set title = 'v4' where id = ${event.id}`;
    await db()`delete from app.events where id = ${added.id}`;

    const resumed = await stream({ token: user.accessToken, lastEventId: seen!.id });
    const opening = await resumed.until((m) => m.event === 'ready');
    expect(opening).toHaveLength(1);
    expect(opening[0]!.json).toMatchObject({ mode: 'resume', last_event_id: Number(seen!.id), snapshot: null });
    const got = await resumed.take(4);
    expect(got.map((m) => `${m.event}:${m.json.title}`)).toEqual(['update:v3', 'insert:Added', 'update:v4', 'delete:Added']);
    const expected = [...(await changeIds(event.id)), ...(await changeIds(added.id))]
      .map(Number)
      .filter((id) => id > Number(seen!.id))
      .sort((a, b) => a - b)
      .map(String);
    expect(ids(got)).toEqual(expected);
    await new Promise((r) => setTimeout(r, 200));
    expect(resumed.messages).toHaveLength(5); // ready + 4: nothing repeated
  });

  it('accepts the resume point as ?last_event_id= and ?lastEventId=', async () => {
    const { user, community } = await member();
    const s = await stream({ token: user.accessToken });
    const [ready] = (await s.until((m) => m.event === 'ready')).slice(-1);
    s.close();
    const event = await createEvent({ communityId: community.id, title: 'While away', starts: '1 day' });
    for (const query of [`?last_event_id=${ready!.id}`, `?lastEventId=${ready!.id}`]) {
      const r = await stream({ token: user.accessToken, query });
      const got = await r.until((m) => m.event === 'insert');
      expect(got.map((m) => m.event)).toEqual(['ready', 'insert']);
      expect(got[1]!.json.id).toBe(event.id);
      r.close();
    }
  });

  it('an id the log does not hold is answered with reset and a fresh snapshot', async () => {
    const { user, community } = await member();
    const event = await createEvent({ communityId: community.id, title: 'Kept', starts: '1 day' });
    const s = await stream({ token: user.accessToken, lastEventId: '999999999999' });
    const opening = await s.until((m) => m.event === 'ready');
    expect(kinds(opening)).toEqual(['reset', 'insert', 'ready']);
    expect(opening[0]!.json).toEqual({ reason: 'last_event_id_expired' });
    expect(opening[1]!.json.id).toBe(event.id);
    expect(opening[2]!.json.mode).toBe('reset');
  });
});

describe('upcoming stream: limits', () => {
  it('caps open streams per user at 5 (429 with the Error body); a closed stream frees its place', async () => {
    const { user } = await member();
    const five = await Promise.all(Array.from({ length: 5 }, () => stream({ token: user.accessToken })));
    expect(five.map((s) => s.status)).toEqual([200, 200, 200, 200, 200]);
    const sixth = await stream({ token: user.accessToken });
    expect(sixth.status).toBe(429);
    expectErrorShape(sixth.body);
    expect(sixth.body.error).toBe('too_many_streams');
    five[0]!.close();
    let again: SseStream | undefined;
    for (let i = 0; i < 50 && again?.status !== 200; i++) {
      await new Promise((r) => setTimeout(r, 50));
      again = await stream({ token: user.accessToken });
    }
    expect(again!.status).toBe(200);
  });

  it('the cap holds for parallel opens: 8 at once, exactly 5 succeed', async () => {
    const { user } = await member();
    const all = await Promise.all(Array.from({ length: 8 }, () => stream({ token: user.accessToken })));
    const statuses = all.map((s) => s.status).sort();
    expect(statuses).toEqual([200, 200, 200, 200, 200, 429, 429, 429]);
  });

  it('ends the stream when the access token expires', async () => {
    const { user } = await member();
    const token = await forgeToken({ sub: user.userId }, { expiresIn: '2s' });
    const s = await stream({ token });
    expect(s.status).toBe(200);
    await s.until((m) => m.event === 'ready');
    await s.waitEnded(5000);
  });
});

describe('upcoming stream: a second gateway process on the same database', () => {
  let second: RunningGateway;
  beforeAll(async () => {
    second = await secondGateway((c) => {
      c.realtime.keepAliveMs = 200;
    });
  });
  afterAll(() => second?.close());

  it('both gateways deliver every change to their own clients', async () => {
    const { user: alice, community } = await member();
    const { user: bob } = await member(community);
    const a = await stream({ token: alice.accessToken });
    const b = await stream({ token: bob.accessToken, base: second.url });
    await a.until((m) => m.event === 'ready');
    await b.until((m) => m.event === 'ready');
    const event = await createEvent({ communityId: community.id, title: 'Both', starts: '1 day' });
    await db()`update app.events set title = 'Both v2' where id = ${event.id}`;
    const [fromA, fromB] = await Promise.all([a.take(2), b.take(2)]);
    expect(ids(fromA)).toEqual(await changeIds(event.id));
    expect(ids(fromB)).toEqual(ids(fromA));
    expect(fromB.map((m) => m.json.title)).toEqual(['Both', 'Both v2']);
  });

  it('the per-user cap counts streams on every gateway', async () => {
    const { user } = await member();
    const here = await Promise.all([1, 2, 3].map(() => stream({ token: user.accessToken })));
    const there = await Promise.all([1, 2].map(() => stream({ token: user.accessToken, base: second.url })));
    expect([...here, ...there].map((s) => s.status)).toEqual([200, 200, 200, 200, 200]);
    expect((await stream({ token: user.accessToken })).status).toBe(429);
    expect((await stream({ token: user.accessToken, base: second.url })).status).toBe(429);
  });

  it('sends keep-alive comments at the configured interval', async () => {
    const { user } = await member();
    const s = await stream({ token: user.accessToken, base: second.url });
    await s.until((m) => m.event === 'ready');
    await s.waitFor(() => s.comments.filter((c) => c === 'keep-alive').length >= 2, 3000, 'two keep-alives');
  });
});

describe('upcoming stream: writing', () => {
  it('once the opening is out, writes messages to the socket directly (one shared, framed buffer per change)', async () => {
    const gateway = await secondGateway();
    try {
      const { user, community } = await member();
      const event = await createEvent({ communityId: community.id, title: 'Direct', starts: '1 day' });
      const s = await stream({ token: user.accessToken, base: gateway.url });
      await s.until((m) => m.event === 'ready');
      expect(gateway.realtime.stats.directStreams).toBe(1);
      await db()`update app.events set title = 'Direct 2' where id = ${event.id}`;
      const messages = await s.until((m) => m.event === 'update');
      expect(messages.at(-1)!.json.title).toBe('Direct 2');
    } finally {
      await gateway.close();
    }
  });
});

describe('upcoming stream: back-pressure and shutdown', () => {
  it('drops a client that stops reading, without holding up the others', async () => {
    const gateway = await secondGateway((c) => {
      c.realtime.maxBufferBytes = 256 * 1024;
      c.realtime.drainTimeoutMs = 1000;
    });
    try {
      const { user, community } = await member();
      const event = await createEvent({ communityId: community.id, title: 'Big', starts: '1 day' });
      const reader = await stream({ token: user.accessToken, base: gateway.url });
      await reader.until((m) => m.event === 'ready');

      // A client that reads the headers and then nothing more.
      const stalled = await new Promise<http.IncomingMessage>((resolve, reject) => {
        const req = http.get(`${gateway.url}${STREAM_PATH}`, { headers: { authorization: `Bearer ${user.accessToken}` } }, resolve);
        req.on('error', reject);
      });
      expect(stalled.statusCode).toBe(200);
      stalled.pause();
      await new Promise((r) => setTimeout(r, 100));
      expect(gateway.realtime.size).toBe(2);

      // 200 KB per message, until the stalled stream has been dropped (the
      // kernel's socket buffers take several MB first), then a few more.
      const big = 'x'.repeat(200_000);
      let n = 0;
      for (; n < 500 && gateway.realtime.size === 2; n++) {
        await db()`update app.events set description = ${`${n} ${big}`} where id = ${event.id}`;
      }
      expect(gateway.realtime.size).toBe(1);
      for (const end = n + 5; n < end; n++) await db()`update app.events set description = ${`${n} ${big}`} where id = ${event.id}`;

      await reader.waitFor(() => reader.messages.filter((m) => m.event === 'update').length === n, 30_000, `${n} updates`);
      const updates = reader.messages.filter((m) => m.event === 'update');
      expect(updates.map((m) => Number(m.json.description.split(' ')[0]))).toEqual(Array.from({ length: n }, (_, i) => i));
      // Its registration is gone too (the reader's remains).
      const [registrations] = await db()`select count(*)::int as n from app.event_streams where user_id = ${user.userId}`;
      expect(registrations!.n).toBe(1);
      expect(reader.ended).toBe(false);
      stalled.destroy();
    } finally {
      await gateway.close();
    }
  });

  it('shutdown ends open streams and deletes their registrations before the pool closes', async () => {
    const gateway = await secondGateway();
    const { user } = await member();
    const s = await stream({ token: user.accessToken, base: gateway.url });
    await s.until((m) => m.event === 'ready');
    const [before] = await db()`select count(*)::int as n from app.event_streams where user_id = ${user.userId}`;
    expect(before!.n).toBe(1);
    await gateway.close();
    await s.waitEnded(5000);
    const [after] = await db()`select count(*)::int as n from app.event_streams where user_id = ${user.userId}`;
    expect(after!.n).toBe(0);
  });
});

// The realtime feed's rules that need time to pass between transactions or
// several connections at once (the rest are pgTAP:
// supabase/tests/realtime.test.sql): an event's end logged as an expiry, the
// fan-out across expiries, two gateways logging expiries at once, and the
// per-user stream cap under parallel opens and racing batches.
import postgres from 'postgres';
import { afterAll, describe, expect, it } from 'vitest';
import { asUser, databaseUrl, db } from '../helpers.ts';
import { createEvent } from '../support/event-fixtures.ts';
import { PUBLIC, head } from '../support/feed-sql.ts';
import { addMember, newCommunity, newUser, type SqlUser as User } from '../support/sql-fixtures.ts';

interface Message {
  change_id: string;
  operation: string;
  event: Record<string, any>;
}

function changesFor(userId: string, after: number, upto = 9e15): Promise<Message[]> {
  return asUser(userId, (tx) => tx<Message[]>`select * from api.event_stream_changes(${after}, ${upto}, ${PUBLIC})`);
}

const summary = (messages: Message[]) => messages.map((m) => `${m.operation}:${m.event.title}`);

interface Delivery {
  change_id: string;
  operation: string;
  event: Record<string, any>;
  user_ids: string[];
}

function fanout(after: number, upto: number, only: string[] | null = null): Promise<Delivery[]> {
  return db()<Delivery[]>`select * from private.event_stream_fanout(${after}, ${upto}, ${PUBLIC}, ${only}::uuid[])`;
}

/** What one user gets from the fan-out, in order, comparable with api.event_stream_changes. */
function forUser(rows: Delivery[], userId: string) {
  return rows.filter((r) => r.user_ids.includes(userId)).map(({ change_id, operation, event }) => ({ change_id, operation, event }));
}

function perUser(userId: string, after: number, upto: number) {
  return asUser(userId, (tx) => tx`select change_id, operation, event from api.event_stream_changes(${after}, ${upto}, ${PUBLIC})`);
}

const GATEWAY = 'sql-batch-test';

async function openBatch(requests: { user_id: string }[]): Promise<{ streams: ({ stream_id: string } | { error: string })[] }> {
  const [row] = await db()`select private.event_streams_open(${GATEWAY}, ${PUBLIC}, 60, ${db().json(requests as never)}) as opened`;
  return row!.opened;
}

afterAll(async () => {
  await db()`delete from app.event_streams where gateway in ('sql-test', ${GATEWAY})`;
});

describe('expiries: an event that ends', () => {
  it('an ongoing event is still in the feed; an expiry entry is a delete', async () => {
    const user = await newUser();
    const community = await newCommunity();
    await addMember(community, user.id);
    const start = await head();
    const event = (await createEvent({ communityId: community, starts: '-1 hour', ends: '1 second', title: 'Ongoing' })).id;
    await new Promise((r) => setTimeout(r, 1100));
    await db()`select private.log_event_expiries()`;
    const messages = await changesFor(user.id, start);
    expect(summary(messages)).toEqual(['insert:Ongoing', 'delete:Ongoing']);
    const [entry] = await db()`select operation from app.change_log where id = ${messages[1]!.change_id}`;
    expect(entry!.operation).toBe('expire');
    expect(messages[1]!.event.id).toBe(event);
  });

  it('two gateways logging expiries at once log each ended event once', async () => {
    const community = await newCommunity();
    const events = await Promise.all([1, 2, 3].map(async () => (await createEvent({ communityId: community, starts: '-1 hour', ends: '500 milliseconds', title: 'Event' })).id));
    await new Promise((r) => setTimeout(r, 700));
    const a = postgres(databaseUrl, { max: 1, onnotice: () => {} });
    const b = postgres(databaseUrl, { max: 1, onnotice: () => {} });
    try {
      await Promise.all([a`select private.log_event_expiries()`, b`select private.log_event_expiries()`, a`select private.log_event_expiries()`]);
    } finally {
      await a.end();
      await b.end();
    }
    const rows = await db()`select record_id from app.change_log where operation = 'expire' and record_id = any(${events}::uuid[])`;
    expect(rows.map((r) => r.record_id).sort()).toEqual([...events].sort());
  });
});

describe('private.event_stream_fanout across expiries', () => {
  it('every user gets exactly what the per-user path gives them, across inserts, updates, moves, deletes, expiries and memberships', async () => {
    const [a, b, quiet] = [await newCommunity(), await newCommunity(), await newCommunity()];
    const users = await Promise.all(Array.from({ length: 7 }, () => newUser()));
    const [memberA, managerA, memberB, both, joiner, leaver, outsider] = users as [User, User, User, User, User, User, User];
    await addMember(a, memberA.id);
    await addMember(a, managerA.id, 'manager');
    await addMember(b, memberB.id);
    await addMember(a, both.id);
    await addMember(b, both.id, 'manager');
    await addMember(a, leaver.id);
    await addMember(quiet, outsider.id);
    const staying = (await createEvent({ communityId: a, starts: '2 days', title: 'Staying' })).id;
    await createEvent({ communityId: a, starts: '-1 hour', ends: '1 second', title: 'Ending' });
    const start = await head();

    const moved = (await createEvent({ communityId: a, starts: '1 day', title: 'Moved' })).id;
    await db()`update app.events set title = 'Staying 2' where id = ${staying}`;
    await db()`update app.events set community_id = ${b} where id = ${moved}`;
    await addMember(a, joiner.id);
    await db()`delete from app.community_members where community_id = ${a} and member_node_id = ${leaver.nodeId}`;
    await db()`update app.events set starts_at = now() - interval '3 hours' where id = ${staying}`; // ended: a delete
    await new Promise((r) => setTimeout(r, 1100));
    await db()`select private.log_event_expiries()`;
    await db()`delete from app.events where id = ${moved}`;
    const end = await head();

    const rows = await fanout(start, end);
    for (const user of users) {
      expect(forUser(rows, user.id), `user ${user.id}`).toEqual(await perUser(user.id, start, end));
    }
    expect(forUser(rows, outsider.id)).toEqual([]);
    expect(forUser(rows, joiner.id).length).toBeGreaterThan(0);
    expect(forUser(rows, memberA.id).map((m) => `${m.operation}:${m.event.title}`)).toEqual([
      'insert:Moved', 'update:Staying 2', 'delete:Moved', 'delete:Staying 2', 'delete:Ending',
    ]);
  });
});

describe('the per-user stream cap under concurrency', () => {
  it('five at once per user (PT429 too_many_streams), expired ones do not count, each user sees only their own', async () => {
    const user = await newUser();
    const other = await newUser();
    const register = (id: string) => asUser(id, (tx) => tx`select private.event_stream_register('sql-test', 'sse', 60) as id`);
    const made = await Promise.all(Array.from({ length: 7 }, () => register(user.id).then(() => 'ok', (err) => err.code)));
    expect(made.sort()).toEqual(['PT429', 'PT429', 'ok', 'ok', 'ok', 'ok', 'ok']);
    await expect(register(user.id)).rejects.toMatchObject({ code: 'PT429', hint: 'too_many_streams' });
    await db()`update app.event_streams set expires_at = now() - interval '1 second' where user_id = ${user.id} and id = (select id from app.event_streams where user_id = ${user.id} limit 1)`;
    const [again] = await register(user.id);
    expect(again!.id).toBeTruthy();
    const theirs = await asUser(other.id, (tx) => tx`select * from app.event_streams`);
    expect(theirs).toEqual([]);
    await expect(asUser(other.id, (tx) => tx`delete from app.event_streams where user_id = ${user.id}`)).rejects.toMatchObject({ code: '42501' });
    const ids = (await db()`select id from app.event_streams where user_id = ${user.id}`).map((r) => r.id);
    const [closed] = await db()`select private.event_streams_close(${ids}::uuid[]) as n`;
    expect(closed!.n).toBe(ids.length);
  });

  it('the cap holds when batches race: 6 batches of 3 for one user register exactly 5', async () => {
    const user = await newUser();
    const results = await Promise.all(Array.from({ length: 6 }, () => openBatch(Array.from({ length: 3 }, () => ({ user_id: user.id })))));
    const ok = results.flatMap((r) => r.streams).filter((s) => 'stream_id' in s);
    expect(ok).toHaveLength(5);
    const [count] = await db()`select count(*)::int as n from app.event_streams where user_id = ${user.id}`;
    expect(count!.n).toBe(5);
  });
});

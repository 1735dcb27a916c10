// The realtime feed's rules in SQL, as a DBA would check them with psql: how
// each change of the log reads for one user (api.event_stream_changes), the
// snapshot / resume / reset answer of api.event_stream_open, expiries logged
// exactly once, pruning by prefix with its watermark, the per-user stream cap,
// the raw rows for postgres_changes, and the supabase_realtime publication.
import postgres from 'postgres';
import { afterAll, describe, expect, it } from 'vitest';
import type { Tx } from '../../gateway/core/db.ts';
import { asUser, databaseUrl, db } from '../helpers.ts';
import { createEvent } from '../support/event-fixtures.ts';
import { PUBLIC, head } from '../support/feed-sql.ts';
import { addMember, newCommunity, newUser } from '../support/sql-fixtures.ts';

interface Message {
  change_id: string;
  operation: string;
  event: Record<string, any>;
}

function changesFor(userId: string, after: number, upto = 9e15): Promise<Message[]> {
  return asUser(userId, (tx) => tx<Message[]>`select * from api.event_stream_changes(${after}, ${upto}, ${PUBLIC})`);
}

const summary = (messages: Message[]) => messages.map((m) => `${m.operation}:${m.event.title}`);

/** Runs fn in a transaction that is rolled back; `as` switches it to a user. */
async function rolledBack(fn: (tx: Tx, as: (userId: string) => Promise<void>) => Promise<void>): Promise<void> {
  const rollback = new Error('rollback');
  await expect(
    db().begin(async (tx) => {
      const as = async (userId: string) => {
        await tx`select set_config('role', 'authenticated', true),
                        set_config('request.jwt.claims', ${JSON.stringify({ role: 'authenticated', sub: userId })}, true)`;
      };
      await fn(tx, as);
      throw rollback;
    }),
  ).rejects.toBe(rollback);
}

describe('api.event_stream_changes: a change as one user sees it', () => {
  it('insert, update and delete of an event in the caller\'s community; nothing from other communities', async () => {
    const user = await newUser();
    const community = await newCommunity();
    const other = await newCommunity();
    await addMember(community, user.id);
    const start = await head();
    const event = (await createEvent({ communityId: community, starts: '1 day', title: 'A' })).id;
    await createEvent({ communityId: other, starts: '1 day', title: 'Not mine' });
    await db()`update app.events set title = 'A2' where id = ${event}`;
    await db()`delete from app.events where id = ${event}`;
    const messages = await changesFor(user.id, start);
    expect(summary(messages)).toEqual(['insert:A', 'update:A2', 'delete:A2']);
    const ids = messages.map((m) => Number(m.change_id));
    expect([...ids].sort((a, b) => a - b)).toEqual(ids);
    expect(messages[0]!.event.__sync_meta).toEqual({ operation: 'insert', table: 'events', timestamp: expect.any(String) });
    expect(messages[0]!.event.deeplink_url).toMatch(/^https:\/\/app\.example\.com\/l\/event\//);
  });

  it('an event moved out of the caller\'s communities or into the past is a delete; back again, an insert', async () => {
    const user = await newUser();
    const community = await newCommunity();
    const other = await newCommunity();
    await addMember(community, user.id);
    const event = (await createEvent({ communityId: community, starts: '1 day', title: 'M' })).id;
    const start = await head();
    await db()`update app.events set community_id = ${other} where id = ${event}`;
    await db()`update app.events set title = 'M elsewhere' where id = ${event}`;
    await db()`update app.events set community_id = ${community}, title = 'M' where id = ${event}`;
    await db()`update app.events set starts_at = now() - interval '3 hours' where id = ${event}`; // ended (2 h default length)
    await db()`update app.events set title = 'M past' where id = ${event}`;
    await db()`update app.events set starts_at = now() + interval '1 hour' where id = ${event}`;
    expect(summary(await changesFor(user.id, start))).toEqual(['delete:M', 'insert:M', 'delete:M', 'insert:M past']);
  });

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

  it('joining expands to inserts of the community\'s upcoming events (soonest first), leaving to deletes; others\' memberships are nothing', async () => {
    const user = await newUser();
    const stranger = await newUser();
    const community = await newCommunity();
    await createEvent({ communityId: community, starts: '2 days', title: 'Second' });
    await createEvent({ communityId: community, starts: '1 day', title: 'First' });
    await createEvent({ communityId: community, starts: '-1 day', title: 'Past' });
    const start = await head();
    await addMember(community, stranger.id);
    await addMember(community, user.id);
    await db()`update app.community_members set role = 'manager' where community_id = ${community} and member_node_id = ${user.nodeId}`;
    let messages = await changesFor(user.id, start);
    expect(summary(messages)).toEqual(['insert:First', 'insert:Second', 'update:First', 'update:Second']);
    expect(messages[2]!.event.can_sync).toBe(true); // managers see the sync fields
    expect(new Set(messages.slice(0, 2).map((m) => m.change_id)).size).toBe(1);

    // (The last manager may not leave: make the stranger one first.)
    await db()`update app.community_members set role = 'manager' where community_id = ${community} and member_node_id = ${stranger.nodeId}`;
    const before = await head();
    await db()`delete from app.community_members where community_id = ${community} and member_node_id = ${user.nodeId}`;
    messages = await changesFor(user.id, before);
    expect(summary(messages)).toEqual(['delete:First', 'delete:Second']);
    expect(await changesFor(stranger.id, before)).toEqual([]);
  });

  it('a membership update that changes nothing is not logged', async () => {
    const user = await newUser();
    const community = await newCommunity();
    await addMember(community, user.id);
    const before = await head();
    await db()`update app.community_members set role = role where community_id = ${community}`;
    expect(await head()).toBe(before);
  });
});

describe('private.event_stream_audience: who is read for a range', () => {
  it('the members of every community an event change touches, and users whose membership changed; no one else', async () => {
    const [a, b, c] = [await newCommunity(), await newCommunity(), await newCommunity()];
    const [inA, inB, inC, joiner] = [await newUser(), await newUser(), await newUser(), await newUser()];
    await addMember(a, inA.id);
    await addMember(b, inB.id);
    await addMember(c, inC.id);
    const event = (await createEvent({ communityId: a, starts: '1 day', title: 'Event' })).id;
    const start = await head();
    await db()`update app.events set community_id = ${b} where id = ${event}`;
    await addMember(c, joiner.id);
    const rows = await db()`select id from private.event_stream_audience(${start}, ${await head()}) as id`;
    const audience = rows.map((r) => r.id);
    expect(audience).toEqual(expect.arrayContaining([inA.id, inB.id, joiner.id]));
    expect(audience).not.toContain(inC.id);
    // Everyone who gets a message is in it.
    for (const user of [inA, inB, inC, joiner]) {
      const messages = await changesFor(user.id, start);
      if (messages.length > 0) expect(audience).toContain(user.id);
    }
  });
});

describe('api.event_stream_open: snapshot, resume, reset', () => {
  it('a snapshot is GET /upcoming with __sync_meta, and the change id it is consistent with', async () => {
    const user = await newUser();
    const community = await newCommunity();
    await addMember(community, user.id);
    await createEvent({ communityId: community, starts: '1 day', title: 'Snap' });
    const [open] = await asUser(user.id, (tx) => tx`select * from api.event_stream_open('test', null, ${PUBLIC}, 60)`);
    expect(open!.mode).toBe('snapshot');
    expect(Number(open!.last_event_id)).toBeGreaterThanOrEqual(await head() - 1000);
    const upcoming = await asUser(user.id, (tx) => tx`select e from api.events_upcoming(${PUBLIC}) as e`);
    expect(open!.events.map((e: any) => { const { __sync_meta, ...rest } = e; return rest; })).toEqual(upcoming.map((r) => r.e));
    expect(open!.events[0].__sync_meta).toMatchObject({ operation: 'insert', table: 'events' });
    await db()`delete from app.event_streams where id = ${open!.stream_id}`;
  });

  it('resumes from an id the log holds; an unknown id or one below the prune watermark resets', async () => {
    const user = await newUser();
    const now = await head();
    await rolledBack(async (tx, as) => {
      await as(user.id);
      const [resume] = await tx`select mode, last_event_id, events from api.event_stream_open('test', ${now}, ${PUBLIC}, 60)`;
      expect(resume).toEqual({ mode: 'resume', last_event_id: String(now), events: null });
      const [future] = await tx`select mode from api.event_stream_open('test', ${now + 1_000_000}, ${PUBLIC}, 60)`;
      expect(future!.mode).toBe('reset');
    });
    await rolledBack(async (tx, as) => {
      await createEvent({ communityId: await newCommunity(), starts: '1 day', title: 'Event' });
      const [mine] = await tx`select max(id) as id from app.change_log`;
      // Make the newest entry old, and prune: everything up to it goes, and
      // the watermark says so.
      await tx`update app.change_log set changed_at = now() - interval '3 days' where id = ${mine!.id}`;
      await tx`select admin.prune_change_log('1 day')`;
      const [position] = await tx`select head, pruned_through from private.change_log_position()`;
      expect(position!.pruned_through).toBe(mine!.id);
      const [left] = await tx`select count(*)::int as n from app.change_log where id <= ${mine!.id}`;
      expect(left!.n).toBe(0);
      // Pruning again (as another replica would) changes nothing.
      const [again] = await tx`select admin.prune_change_log('1 day') as gone`;
      expect(Number(again!.gone)).toBe(0);
      const [still] = await tx`select pruned_through from private.change_log_position()`;
      expect(still!.pruned_through).toBe(mine!.id);
      await as(user.id);
      const [old] = await tx`select mode from api.event_stream_open('test', ${Number(mine!.id) - 1}, ${PUBLIC}, 60)`;
      expect(old!.mode).toBe('reset');
      const [edge] = await tx`select mode from api.event_stream_open('test', ${mine!.id}, ${PUBLIC}, 60)`;
      expect(edge!.mode).toBe('resume');
      await expect(tx`select * from api.event_stream_changes(${Number(mine!.id) - 1}, ${mine!.id}, ${PUBLIC})`).rejects.toMatchObject({
        code: 'PT410',
        hint: 'last_event_id_expired',
      });
    });
  });
});

describe('expiries and pruning across replicas', () => {
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

describe('stream registrations and the per-user cap', () => {
  afterAll(async () => {
    await db()`delete from app.event_streams where gateway = 'sql-test'`;
  });

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
});

describe('postgres_changes rows and the supabase_realtime publication', () => {
  it('api.realtime_event_changes: raw rows; a delete carries only the primary key', async () => {
    const user = await newUser();
    const community = await newCommunity();
    const start = await head();
    const event = (await createEvent({ communityId: community, starts: '1 day', title: 'Raw' })).id;
    await db()`update app.events set title = 'Raw 2' where id = ${event}`;
    await db()`delete from app.events where id = ${event}`;
    const rows = await asUser(user.id, (tx) => tx`select * from api.realtime_event_changes(${start}, ${9e15})`);
    const mine = rows.filter((r) => (r.record?.id ?? r.old_record?.id) === event);
    expect(mine.map((r) => r.type)).toEqual(['INSERT', 'UPDATE', 'DELETE']);
    expect(mine[0]).toMatchObject({ record: { id: event, title: 'Raw', community_id: community }, old_record: null });
    expect(mine[1]).toMatchObject({ record: { title: 'Raw 2' }, old_record: { id: event } });
    expect(mine[2]).toMatchObject({ record: null, old_record: { id: event } });
    expect(mine[0]!.commit_timestamp).toMatch(/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{6}Z$/);
  });

  it('adds app.events to supabase_realtime where the publication exists, and does nothing elsewhere', async () => {
    const [absent] = await db()`select admin.publish_events_to_supabase_realtime() as done`;
    expect(absent!.done).toBe(false);
    await rolledBack(async (tx) => {
      await tx`create publication supabase_realtime`;
      const [first] = await tx`select admin.publish_events_to_supabase_realtime() as done`;
      const [second] = await tx`select admin.publish_events_to_supabase_realtime() as done`;
      expect([first!.done, second!.done]).toEqual([true, true]);
      const tables = await tx`select schemaname, tablename from pg_publication_tables where pubname = 'supabase_realtime'`;
      expect(tables).toEqual([{ schemaname: 'app', tablename: 'events' }]);
    });
  });
});

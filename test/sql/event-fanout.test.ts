// private.event_stream_fanout: the upcoming stream's messages for everyone at
// once (one row per change and view, with its users), as the realtime hub
// reads them. The rule is api.event_stream_changes' (the per-user path):
// every user must get from the fan-out exactly what that path gives them.
import { describe, expect, it } from 'vitest';
import { asUser, db } from '../helpers.ts';
import { createEvent } from '../support/event-fixtures.ts';
import { PUBLIC, head } from '../support/feed-sql.ts';
import { addMember, newCommunity, newUser, type SqlUser as User } from '../support/sql-fixtures.ts';

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

describe('private.event_stream_fanout: one read for everyone', () => {
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

  it('one row per distinct view: members and managers of the community get one payload each', async () => {
    const community = await newCommunity();
    const members = await Promise.all(Array.from({ length: 4 }, () => newUser()));
    const manager = await newUser();
    for (const m of members) await addMember(community, m.id);
    await addMember(community, manager.id, 'manager');
    const event = (await createEvent({ communityId: community, starts: '1 day', title: 'Viewed' })).id;
    const start = await head();
    await db()`update app.events set title = 'Viewed 2', platform_a_url = 'https://a.example.com/e' where id = ${event}`;
    const rows = await fanout(start, await head());
    expect(rows).toHaveLength(2);
    const managed = rows.find((r) => r.user_ids.includes(manager.id))!;
    const plain = rows.find((r) => !r.user_ids.includes(manager.id))!;
    expect(managed.user_ids).toEqual([manager.id]);
    expect([...plain.user_ids].sort()).toEqual(members.map((m) => m.id).sort());
    expect(managed.event).toMatchObject({ title: 'Viewed 2', can_sync: true, external_platforms: ['platform_a'] });
    expect(plain.event).not.toHaveProperty('can_sync');
    expect(plain.event.__sync_meta).toMatchObject({ operation: 'update', table: 'events' });
  });

  it('only_users restricts the answer; the caller\'s claims are left as they were', async () => {
    const community = await newCommunity();
    const [one, two] = [await newUser(), await newUser()];
    await addMember(community, one.id);
    await addMember(community, two.id);
    const start = await head();
    await createEvent({ communityId: community, starts: '1 day', title: 'Only' });
    const rows = await fanout(start, await head(), [two.id]);
    expect(rows.map((r) => r.user_ids)).toEqual([[two.id]]);
    const [claims] = await db().begin(async (tx) => {
      await tx`select set_config('request.jwt.claims', '{"role":"service_role"}', true)`;
      await tx`select count(*) from private.event_stream_fanout(${start}, ${await head()}, ${PUBLIC})`;
      return tx`select current_setting('request.jwt.claims', true) as c`;
    });
    expect(claims!.c).toBe('{"role":"service_role"}');
  });

  it('PT410 when the range starts below the prune watermark; not callable by request roles', async () => {
    const [state] = await db()`select pruned_through from app.change_log_state`;
    if (Number(state!.pruned_through) > 0) {
      await expect(fanout(Number(state!.pruned_through) - 1, await head())).rejects.toMatchObject({ code: 'PT410' });
    }
    const user = await newUser();
    await expect(
      asUser(user.id, (tx) => tx`select * from private.event_stream_fanout(0, 1, ${PUBLIC})`),
    ).rejects.toMatchObject({ code: '42501' });
  });

  it('opening a stream is planned without JIT (estimates, and jit off for the snapshot)', async () => {
    const rows = await db()`
      select p.oid::regprocedure::text as fn, p.prorows, p.proconfig
        from pg_proc p
       where p.oid in ('private.change_log_position()'::regprocedure,
                       'api.event_stream_open(text, bigint, text, integer)'::regprocedure)`;
    const byName = Object.fromEntries(rows.map((r) => [r.fn, r]));
    expect(Number(byName['private.change_log_position()']!.prorows)).toBe(1);
    expect(byName['api.event_stream_open(text,bigint,text,integer)']!.proconfig).toContain('jit=off');
  });
});

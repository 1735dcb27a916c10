// private.event_streams_open, the batched opening of upcoming-event streams
// (the gateway's realtime/opener.ts calls it): each stream of a batch gets
// what api.event_stream_open gives its user alone; users whose memberships
// are the same share one snapshot; the per-user cap counts earlier elements
// of the same batch and holds under concurrent batches; an ended session and
// a missing profile are refused per element, not for the whole batch.
import crypto from 'node:crypto';
import { afterAll, describe, expect, it } from 'vitest';
import { asUser, db } from '../helpers.ts';
import { createEvent } from '../support/event-fixtures.ts';
import { PUBLIC, head } from '../support/feed-sql.ts';
import { addMember, newCommunity, newUser } from '../support/sql-fixtures.ts';

const GATEWAY = 'sql-batch-test';

interface Opened {
  head: number;
  views: Record<string, any>[][];
  streams: ({ stream_id: string; mode: string; last_event_id: number; view: number | null } | { error: string; message: string })[];
}

interface Request {
  user_id: string;
  session_id?: string | null;
  last_event_id?: number | null;
}

async function openBatch(requests: Request[]): Promise<Opened> {
  const [row] = await db()`select private.event_streams_open(${GATEWAY}, ${PUBLIC}, 60, ${db().json(requests as never)}) as opened`;
  return row!.opened as Opened;
}

/** What the snapshot holds without the per-open timestamp. */
const withoutMeta = (events: Record<string, any>[]) => events.map(({ __sync_meta, ...rest }) => ({ ...rest, meta: { ...__sync_meta, timestamp: 'x' } }));

afterAll(async () => {
  await db()`delete from app.event_streams where gateway in (${GATEWAY}, 'sql-single')`;
});

describe('private.event_streams_open', () => {
  it('gives each user the snapshot api.event_stream_open gives them, one per distinct view, manager fields to managers', async () => {
    const community = await newCommunity();
    const other = await newCommunity();
    await createEvent({ communityId: community, starts: '1 day', title: 'Shared' });
    await createEvent({ communityId: community, starts: '2 days', ends: '2 days 3 hours', title: 'Later' });
    await createEvent({ communityId: other, starts: '1 day', title: 'Elsewhere' });
    const [a, b, manager, outsider] = await Promise.all([newUser(), newUser(), newUser(), newUser()]);
    await addMember(community, a.id);
    await addMember(community, b.id);
    await addMember(community, manager.id, 'manager');

    const opened = await openBatch([a, b, manager, outsider].map((u) => ({ user_id: u.id })));
    expect(opened.streams).toHaveLength(4);
    const views = opened.streams.map((s) => ('view' in s ? s.view : null));
    expect(views[0]).toBe(views[1]); // same memberships: one snapshot
    expect(new Set(views).size).toBe(3); // member, manager, nobody
    expect(opened.views).toHaveLength(3);

    for (const [i, user] of [a, b, manager, outsider].entries()) {
      const s = opened.streams[i]!;
      expect(s).toMatchObject({ mode: 'snapshot', last_event_id: opened.head });
      const [alone] = await asUser(user.id, (tx) => tx`select events from api.event_stream_open('sql-single', null, ${PUBLIC}, 60)`);
      expect(withoutMeta(opened.views[(s as { view: number }).view]!)).toEqual(withoutMeta(alone!.events));
    }
    const managerView = opened.views[(opened.streams[2] as { view: number }).view]!;
    expect(managerView.map((e) => e.title)).toEqual(['Shared', 'Later']);
    expect(managerView[0]!.can_sync).toBe(true);
    expect(opened.views[(opened.streams[0] as { view: number }).view]![0]!.can_sync).toBeUndefined();
    expect(opened.views[(opened.streams[3] as { view: number }).view]).toEqual([]);

    const registered = await db()`select user_id from app.event_streams where id = any(${opened.streams.map((s) => ('stream_id' in s ? s.stream_id : null))}::uuid[])`;
    expect(registered.map((r) => r.user_id).sort()).toEqual([a.id, b.id, manager.id, outsider.id].sort());
  });

  it('resumes a Last-Event-ID the log holds, resets one it does not, with head for the others', async () => {
    const user = await newUser();
    const now = await head();
    const opened = await openBatch([
      { user_id: user.id, last_event_id: now },
      { user_id: user.id, last_event_id: now + 1_000_000 },
      { user_id: user.id },
    ]);
    expect(opened.streams[0]).toEqual({ stream_id: expect.any(String), mode: 'resume', last_event_id: now, view: null });
    expect(opened.streams[1]).toMatchObject({ mode: 'reset', last_event_id: opened.head });
    expect(opened.streams[2]).toMatchObject({ mode: 'snapshot', last_event_id: opened.head });
  });

  it('counts earlier elements of the batch and live streams against the cap of 5; refuses the rest alone', async () => {
    const user = await newUser();
    const other = await newUser();
    await asUser(user.id, (tx) => tx`select private.event_stream_register(${GATEWAY}, 'sse', 60)`);
    const opened = await openBatch([
      ...Array.from({ length: 3 }, () => ({ user_id: user.id })),
      { user_id: other.id },
      ...Array.from({ length: 3 }, () => ({ user_id: user.id })),
    ]);
    const outcome = opened.streams.map((s) => ('error' in s ? s.error : 'ok'));
    expect(outcome).toEqual(['ok', 'ok', 'ok', 'ok', 'ok', 'too_many_streams', 'too_many_streams']);
    expect(opened.streams[5]).toMatchObject({ message: 'too many open streams: at most 5 per user' });
    const [count] = await db()`select count(*)::int as n from app.event_streams where user_id = ${user.id}`;
    expect(count!.n).toBe(5);
    const ids = opened.streams.flatMap((s) => ('stream_id' in s ? [s.stream_id] : []));
    expect(new Set(ids).size).toBe(ids.length);
  });

  it('the cap holds when batches race: 6 batches of 3 for one user register exactly 5', async () => {
    const user = await newUser();
    const results = await Promise.all(Array.from({ length: 6 }, () => openBatch(Array.from({ length: 3 }, () => ({ user_id: user.id })))));
    const ok = results.flatMap((r) => r.streams).filter((s) => 'stream_id' in s);
    expect(ok).toHaveLength(5);
    const [count] = await db()`select count(*)::int as n from app.event_streams where user_id = ${user.id}`;
    expect(count!.n).toBe(5);
  });

  it('refuses an ended session and a user without a profile, and opens the others of the batch', async () => {
    const user = await newUser();
    const ended = await newUser();
    const session = crypto.randomUUID();
    await db()`
      insert into identity.refresh_tokens (user_id, session_id, token_hash, expires_at, revoked_at, revoked_reason)
      values (${ended.id}, ${session}, ${crypto.randomBytes(16)}, now() + interval '1 day', now(), 'logout')`;
    const opened = await openBatch([
      { user_id: ended.id, session_id: session },
      { user_id: crypto.randomUUID() },
      { user_id: user.id, session_id: crypto.randomUUID() },
    ]);
    expect(opened.streams[0]).toEqual({ error: 'session_ended', message: 'the session of this access token has ended' });
    expect(opened.streams[1]).toMatchObject({ error: 'no_profile' });
    expect(opened.streams[2]).toMatchObject({ mode: 'snapshot' });
    const [count] = await db()`select count(*)::int as n from app.event_streams where user_id = ${ended.id}`;
    expect(count!.n).toBe(0);
  });

  it('private.event_streams_register answers one element per request: null for a null element, in order', async () => {
    const user = await newUser();
    const rows = await db()`
      select n, stream_id from private.event_streams_register(${GATEWAY}, 'sse', 60, array[${user.id}, null, ${user.id}]::uuid[])`;
    expect(rows.map((r) => [r.n, r.stream_id === null])).toEqual([
      [1, false],
      [2, true],
      [3, false],
    ]);
  });

  it('is not callable by signed-in users', async () => {
    const user = await newUser();
    await expect(
      asUser(user.id, (tx) => tx`select private.event_streams_open('x', ${PUBLIC}, 60, ${JSON.stringify([{ user_id: user.id }])}::jsonb)`),
    ).rejects.toMatchObject({ code: '42501' });
  });
});

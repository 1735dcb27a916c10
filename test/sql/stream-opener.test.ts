// The gateway's stream opener (gateway/realtime/opener.ts) against the real
// database: opens that arrive together share batches, each gets its own
// answer, and a batch the database cannot run fails every open of it.
import crypto from 'node:crypto';
import postgres from 'postgres';
import { afterAll, describe, expect, it } from 'vitest';
import { StreamOpener } from '../../gateway/realtime/opener.ts';
import { HttpError } from '../../gateway/core/web/errors.ts';
import { db } from '../helpers.ts';
import { createEvent } from '../support/event-fixtures.ts';
import { PUBLIC } from '../support/feed-sql.ts';
import { addMember, newCommunity, newUser } from '../support/sql-fixtures.ts';

const GATEWAY = `opener-test-${crypto.randomUUID()}`;
const options = { gatewayId: GATEWAY, publicUrl: PUBLIC, registrationTtlSeconds: 60, statementTimeoutMs: 5000 };

afterAll(async () => {
  await db()`delete from app.event_streams where gateway = ${GATEWAY}`;
});

describe('StreamOpener', () => {
  it('opens 30 streams arriving at once in a few batches, each with its own answer', async () => {
    const community = await newCommunity();
    await createEvent({ communityId: community, starts: '1 day', title: 'Batched' });
    const users = await Promise.all(Array.from({ length: 29 }, () => newUser()));
    for (const u of users) await addMember(community, u.id);
    const opener = new StreamOpener(db(), options);
    const outcomes = await Promise.allSettled([
      ...users.map((u) => opener.open({ userId: u.id, sessionId: null, lastEventId: null })),
      opener.open({ userId: crypto.randomUUID(), sessionId: null, lastEventId: null }), // no such user
    ]);
    expect(opener.stats.batches).toBeLessThanOrEqual(4);
    const opened = outcomes.slice(0, 29).map((o) => (o.status === 'fulfilled' ? o.value : null));
    expect(opened.every((s) => s?.mode === 'snapshot' && s.events?.[0]?.title === 'Batched')).toBe(true);
    expect(new Set(opened.map((s) => s!.stream_id)).size).toBe(29);
    // One view for all of them: one formatted snapshot per batch, shared.
    expect(new Set(opened.map((s) => s!.snapshotText)).size).toBeLessThanOrEqual(opener.stats.batches);
    expect(opener.stats.batches).toBeLessThan(29);
    const last = outcomes[29]!;
    expect(last.status).toBe('rejected');
    expect((last as PromiseRejectedResult).reason).toMatchObject({ status: 409 });
    expect((last as PromiseRejectedResult).reason).toBeInstanceOf(HttpError);
  });

  it('fails every open of a batch the database cannot run, and keeps serving', async () => {
    const unreachable = postgres('postgres://nobody@127.0.0.1:1/none', { max: 1, connect_timeout: 2, onnotice: () => {} });
    try {
      const opener = new StreamOpener(unreachable, options);
      const outcomes = await Promise.allSettled(
        Array.from({ length: 5 }, () => opener.open({ userId: crypto.randomUUID(), sessionId: null, lastEventId: null })),
      );
      expect(outcomes.map((o) => o.status)).toEqual(Array(5).fill('rejected'));
      const again = await opener.open({ userId: crypto.randomUUID(), sessionId: null, lastEventId: null }).catch((err: unknown) => err);
      expect(again).toMatchObject({ code: expect.stringMatching(/ECONNREFUSED|CONNECT/) });
    } finally {
      await unreachable.end({ timeout: 1 });
    }
  });
});

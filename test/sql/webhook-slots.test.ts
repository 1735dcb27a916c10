// A community's share of the webhook senders, between sessions as between
// workers (private.webhook_send_begin / _end hold session-level advisory
// locks, so each sender here is a connection of its own): at most
// `community_slots` senders of a community at once, another community
// unaffected, an endpoint already being sent to is busy, and an endpoint that
// found no slot waits (a job 30 s later) until a sender lets go and wakes it.
import postgres from 'postgres';
import { describe, expect, it } from 'vitest';
import { databaseUrl, db } from '../helpers.ts';
import { newCommunity, ownSession } from '../support/sql-fixtures.ts';
import { eventually } from '../support/wait.ts';

/** A connection of its own (a worker's session). */
const session = ownSession;

async function endpoint(communityId: string): Promise<string> {
  const [row] = await db()<{ id: string }[]>`
    insert into app.webhook_endpoints (community_id, url, events, secret)
    values (${communityId}, 'https://hooks.example.test/slots', '{event.created}', private.webhook_new_secret()) returning id`;
  return row!.id;
}

interface Begun {
  status: string;
  slot: number | null;
  community_id: string | null;
}
const begin = async (sql: postgres.Sql, endpointId: string, slots = 2) =>
  (await sql<Begun[]>`select * from private.webhook_send_begin(${endpointId}, ${slots})`)[0]!;
const end = async (sql: postgres.Sql, endpointId: string, begun: Begun) =>
  (await sql<{ woken: string | null }[]>`select private.webhook_send_end(${endpointId}, ${begun.community_id}, ${begun.slot}) as woken`)[0]!.woken;
const jobRunAt = async (endpointId: string) =>
  (await db()<{ run_at: Date }[]>`select run_at from graphile_worker.jobs where key = ${`webhook:${endpointId}`}`)[0]?.run_at;

describe('private.webhook_send_begin / _end', () => {
  it('lets a community send on at most its slots at once; another community and the woken endpoint go on', async () => {
    const community = await newCommunity();
    const [a, b, c] = [await endpoint(community), await endpoint(community), await endpoint(community)];
    const elsewhere = await endpoint(await newCommunity());
    const [s1, s2, s3, s4, s5] = [session(), session(), session(), session(), session()];

    const first = await begin(s1, a);
    const second = await begin(s2, b);
    expect([first.status, second.status]).toEqual(['sending', 'sending']);
    expect(new Set([first.slot, second.slot])).toEqual(new Set([1, 2]));
    // The endpoint a sender holds is busy for another.
    expect((await begin(s3, a)).status).toBe('busy');
    // Both slots in use: the third endpoint waits, its job moved about 30 s on.
    expect(await begin(s3, c)).toMatchObject({ status: 'waiting', slot: null });
    const [waiting] = await db()`select waiting_since from app.webhook_endpoints where id = ${c}`;
    expect(waiting!.waiting_since).not.toBeNull();
    expect((await jobRunAt(c))!.getTime()).toBeGreaterThan(Date.now() + 20_000);
    // Another community has slots of its own.
    expect((await begin(s4, elsewhere)).status).toBe('sending');

    // A sender lets go: the waiting endpoint is woken (its job now: the test
    // gateway's worker may even have run it already) and then takes the slot.
    expect(await end(s1, a, first)).toBe(c);
    const woken = await jobRunAt(c);
    expect(woken === undefined || woken.getTime() < Date.now() + 5_000).toBe(true);
    const third = await eventually('the woken endpoint sending', async () => {
      const r = await begin(s5, c);
      return r.status === 'sending' && r;
    });
    expect(third.slot).toBe(first.slot);
    const [taken] = await db()`select waiting_since from app.webhook_endpoints where id = ${c}`;
    expect(taken!.waiting_since).toBeNull();
    // The endpoint let go of is free again for any sender.
    expect((await begin(s3, a, 3)).status).toBe('sending');
  });

  it('a sender whose session ends (a worker that died) lets go of its slot with it', async () => {
    const community = await newCommunity();
    const [a, b] = [await endpoint(community), await endpoint(community)];
    const dying = postgres(databaseUrl, { max: 1, onnotice: () => {} });
    expect((await begin(dying, a, 1)).status).toBe('sending');
    const other = session();
    expect((await begin(other, b, 1)).status).toBe('waiting');
    await dying.end({ timeout: 5 });
    expect((await begin(other, b, 1)).status).toBe('sending');
  });
});

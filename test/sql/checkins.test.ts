// SQL-level tests of the event and check-in rules: event status and the venue
// concurrency window exactly at their edges (the functions take the moment
// as a parameter), the index that serves the window, the one-current-check-in
// indexes, the hat triggers, row-level security on check-ins and
// connections, and the change log with its NOTIFY (in commit order).
// Moments go to SQL as text: postgres.js would round a timestamptz parameter
// to milliseconds, and the edges are tested to the microsecond.
import postgres from 'postgres';
import { afterAll, describe, expect, it } from 'vitest';
import { asUser, databaseUrl, db } from '../helpers.ts';
import { newCommunity, newUser } from '../support/sql-fixtures.ts';

const newVenue = async () => {
  const [row] = await db()`select admin.create_venue('Edge Hall') as id`;
  return row!.id as string;
};

const newEvent = async (community: string, startsAt: string, endsAt: string | null = null, venue: string | null = null) => {
  const [row] = await db()`select admin.create_event(${community}, 'edge', ${startsAt}::timestamptz, ${endsAt}::timestamptz, ${venue}) as id`;
  return row!.id as string;
};

const status = async (startsAt: string, endsAt: string | null, asOf: string) => {
  const [row] = await db()`select private.event_status(${startsAt}::text::timestamptz, ${endsAt}::text::timestamptz, ${asOf}::text::timestamptz) as s`;
  return row!.s as string;
};

describe('event status', () => {
  const start = '2030-01-01T18:00:00Z';
  const end = '2030-01-01T20:30:00Z';

  it('upcoming before the date, ongoing from the date to the end (inclusive), past after', async () => {
    expect(await status(start, end, '2030-01-01T17:59:59.999999Z')).toBe('upcoming');
    expect(await status(start, end, start)).toBe('ongoing');
    expect(await status(start, end, '2030-01-01T19:00:00Z')).toBe('ongoing');
    expect(await status(start, end, end)).toBe('ongoing');
    expect(await status(start, end, '2030-01-01T20:30:00.000001Z')).toBe('past');
  });

  it('without end_time an event ends 2 hours after its date', async () => {
    expect(await status(start, null, '2030-01-01T20:00:00Z')).toBe('ongoing');
    expect(await status(start, null, '2030-01-01T20:00:00.000001Z')).toBe('past');
    const [row] = await db()`select private.event_effective_end(${start}::timestamptz, null) as e`;
    expect((row!.e as Date).toISOString()).toBe('2030-01-01T20:00:00.000Z');
  });

  it('does not depend on the session time zone', async () => {
    const rows = await db().begin(async (tx) => {
      await tx`set local timezone = 'America/New_York'`;
      return tx`select private.event_effective_end('2030-03-10T01:30:00Z'::timestamptz, null) as e`;
    });
    // 2 hours later in absolute time, across the New York DST change.
    expect((rows[0]!.e as Date).toISOString()).toBe('2030-03-10T03:30:00.000Z');
  });
});

describe('venue concurrency window: date - 2h <= now <= effective end + 2h', () => {
  const concurrentAt = async (venue: string, asOf: string) => {
    const rows = await db()`select id from private.venue_concurrent_events(${venue}, ${asOf}::text::timestamptz)`;
    return rows.map((r) => r.id as string);
  };

  it('holds exactly at both edges', async () => {
    const venue = await newVenue();
    const event = await newEvent(await newCommunity(), '2030-02-01T18:00:00Z', '2030-02-01T20:00:00Z', venue);
    expect(await concurrentAt(venue, '2030-02-01T15:59:59.999999Z')).toEqual([]);
    expect(await concurrentAt(venue, '2030-02-01T16:00:00Z')).toEqual([event]); // start - 2h exactly
    expect(await concurrentAt(venue, '2030-02-01T19:00:00Z')).toEqual([event]);
    expect(await concurrentAt(venue, '2030-02-01T21:59:00Z')).toEqual([event]); // ended 1h59m ago
    expect(await concurrentAt(venue, '2030-02-01T22:00:00Z')).toEqual([event]); // end + 2h exactly
    expect(await concurrentAt(venue, '2030-02-01T22:00:00.000001Z')).toEqual([]);
    expect(await concurrentAt(venue, '2030-02-01T22:01:00Z')).toEqual([]); // ended 2h01m ago
  });

  it('an event without end_time is concurrent until 4 hours after its date', async () => {
    const venue = await newVenue();
    const event = await newEvent(await newCommunity(), '2030-02-02T18:00:00Z', null, venue);
    expect(await concurrentAt(venue, '2030-02-02T21:59:00Z')).toEqual([event]);
    expect(await concurrentAt(venue, '2030-02-02T22:00:00Z')).toEqual([event]);
    expect(await concurrentAt(venue, '2030-02-02T22:01:00Z')).toEqual([]);
  });

  it('counts only events at that venue, soonest first', async () => {
    const venue = await newVenue();
    const other = await newVenue();
    const community = await newCommunity();
    const later = await newEvent(community, '2030-02-03T19:00:00Z', null, venue);
    const sooner = await newEvent(community, '2030-02-03T18:00:00Z', null, venue);
    await newEvent(community, '2030-02-03T18:00:00Z', null, other);
    await newEvent(community, '2030-02-03T18:00:00Z', null, null);
    expect(await concurrentAt(venue, '2030-02-03T18:30:00Z')).toEqual([sooner, later]);
  });

  it('is served by the (venue_node_id, effective end) index', async () => {
    const notices: string[] = [];
    const sql = postgres(databaseUrl, { max: 1, onnotice: (n) => notices.push(n.message ?? '') });
    try {
      const rollback = new Error('rollback');
      await expect(
        sql.begin(async (tx) => {
          const community = await newCommunity();
          // 200 venues with 100 events each, over ten years.
          await tx`
            with v as (insert into app.nodes (kind) select 'venue' from generate_series(1, 200) returning id)
            insert into app.venues (node_id, name) select id, 'bulk' from v`;
          await tx`
            with picked as (
              select v.node_id as venue, g
                from (select node_id from app.venues where name = 'bulk') v, generate_series(1, 100) g
            ), n as (
              insert into app.nodes (kind) select 'event' from picked returning id
            )
            insert into app.events (node_id, community_id, title, starts_at, venue_node_id)
            select n.id, ${community}, 'bulk', now() - interval '10 years' + p.g * interval '36 days', p.venue
              from (select id, row_number() over () as r from n) n
              join (select *, row_number() over () as r from picked) p using (r)`;
          await tx`analyze app.events`;
          await tx`load 'auto_explain'`;
          await tx`set local auto_explain.log_min_duration = 0`;
          await tx`set local auto_explain.log_nested_statements = on`;
          await tx`set local auto_explain.log_level = notice`;
          const [venue] = await tx`select node_id from app.venues where name = 'bulk' limit 1`;
          await tx`select * from private.venue_concurrent_events(${venue!.node_id})`;
          throw rollback;
        }),
      ).rejects.toBe(rollback);
    } finally {
      await sql.end();
    }
    const plan = notices.find((n) => n.includes('venue_node_id')) ?? notices.join('\n');
    expect(plan).toMatch(/Index (Only )?Scan using events_venue_(end_)?idx|Bitmap Index Scan on events_venue_(end_)?idx/);
    expect(plan).not.toMatch(/Seq Scan on events/);
  });
});

describe('check-in rows', () => {
  it('at most one current check-in per user and event, and per user and venue', async () => {
    const user = await newUser({ prefix: 'cisql' });
    const event = await newEvent(await newCommunity(), '2030-03-01T18:00:00Z');
    const venue = await newVenue();
    await db()`insert into app.checkins (user_id, event_id) values (${user.id}, ${event})`;
    await expect(db()`insert into app.checkins (user_id, event_id) values (${user.id}, ${event})`).rejects.toMatchObject({ code: '23505' });
    await db()`insert into app.checkins (user_id, venue_node_id) values (${user.id}, ${venue})`;
    await expect(db()`insert into app.checkins (user_id, venue_node_id) values (${user.id}, ${venue})`).rejects.toMatchObject({ code: '23505' });
    // Checked out rows do not count.
    await db()`update app.checkins set checked_out_at = now() where user_id = ${user.id}`;
    await db()`insert into app.checkins (user_id, event_id) values (${user.id}, ${event})`;
    await db()`insert into app.checkins (user_id, venue_node_id) values (${user.id}, ${venue})`;
  });

  it('a check-in is to an event or a venue, never both or neither', async () => {
    const user = await newUser({ prefix: 'cisql' });
    const event = await newEvent(await newCommunity(), '2030-03-02T18:00:00Z');
    const venue = await newVenue();
    await expect(db()`insert into app.checkins (user_id) values (${user.id})`).rejects.toMatchObject({ code: '23514' });
    await expect(
      db()`insert into app.checkins (user_id, event_id, venue_node_id) values (${user.id}, ${event}, ${venue})`,
    ).rejects.toMatchObject({ code: '23514' });
  });

  it("the hat must be the user's own, whatever inserts the row", async () => {
    const user = await newUser({ prefix: 'cisql' });
    const other = await newUser({ prefix: 'cisql' });
    const event = await newEvent(await newCommunity(), '2030-03-03T18:00:00Z');
    const [hat] = await db()`insert into app.hats (user_id, name, hat_type) values (${other.id}, 'theirs', 'social') returning id`;
    await expect(
      db()`insert into app.checkins (user_id, event_id, hat_id) values (${user.id}, ${event}, ${hat!.id})`,
    ).rejects.toMatchObject({ code: 'PT422', hint: 'invalid_hat' });
  });

  it('api.event_checkin is idempotent and api.event_checkout keeps the row', async () => {
    const user = await newUser({ prefix: 'cisql' });
    const event = await newEvent(await newCommunity(), '2030-03-04T18:00:00Z');
    const [first] = await asUser(user.id, (tx) => tx`select * from api.event_checkin(${event})`);
    const [second] = await asUser(user.id, (tx) => tx`select * from api.event_checkin(${event})`);
    expect(first!.created).toBe(true);
    expect(second!.created).toBe(false);
    expect(second!.checkin.id).toBe(first!.checkin.id);
    await asUser(user.id, (tx) => tx`select api.event_checkout(${event})`);
    const rows = await db()`select checked_out_at from app.checkins where user_id = ${user.id}`;
    expect(rows).toHaveLength(1);
    expect(rows[0]!.checked_out_at).toBeInstanceOf(Date);
    await expect(asUser(user.id, (tx) => tx`select api.event_checkout(${event})`)).rejects.toMatchObject({
      code: 'PT404', hint: 'not_checked_in',
    });
  });
});

describe('row-level security', () => {
  it("check-ins: a user reads only their own and cannot check someone else in or out", async () => {
    const alice = await newUser({ prefix: 'cisql' });
    const bob = await newUser({ prefix: 'cisql' });
    const event = await newEvent(await newCommunity(), '2030-04-01T18:00:00Z');
    await asUser(alice.id, (tx) => tx`select * from api.event_checkin(${event})`);
    await asUser(bob.id, (tx) => tx`select * from api.event_checkin(${event})`);
    const seen = await asUser(alice.id, (tx) => tx`select user_id from app.checkins where event_id = ${event}`);
    expect(seen.map((r) => r.user_id)).toEqual([alice.id]);
    await expect(
      asUser(alice.id, (tx) => tx`insert into app.checkins (user_id, event_id) values (${bob.id}, ${event})`),
    ).rejects.toMatchObject({ code: '42501' });
    const changed = await asUser(alice.id, (tx) => tx`update app.checkins set checked_out_at = now() where user_id = ${bob.id} returning id`);
    expect(changed).toHaveLength(0);
  });

  it('connections: a user reads and changes only their own', async () => {
    const alice = await newUser({ prefix: 'cisql' });
    const bob = await newUser({ prefix: 'cisql' });
    const [mine] = await asUser(alice.id, (tx) => tx`select * from api.connection_create(${bob.nodeId})`);
    await asUser(bob.id, (tx) => tx`select * from api.connection_create(${alice.nodeId})`);
    const aliceSees = await asUser(alice.id, (tx) => tx`select id, owner_node_id from app.connections`);
    expect(aliceSees).toEqual([{ id: mine!.id, owner_node_id: alice.nodeId }]);
    await expect(
      asUser(bob.id, (tx) => tx`insert into app.connections (owner_node_id, target_node_id) values (${alice.nodeId}, ${bob.nodeId})`),
    ).rejects.toMatchObject({ code: '42501' });
    const touched = await asUser(bob.id, (tx) => tx`update app.connections set notes = 'x' where id = ${mine!.id} returning id`);
    expect(touched).toHaveLength(0);
    await expect(asUser(bob.id, (tx) => tx`select * from api.connection_get(${mine!.id})`)).rejects.toMatchObject({ code: 'PT404' });
    // The owner column cannot be changed, even by the owner.
    await expect(
      asUser(alice.id, (tx) => tx`update app.connections set owner_node_id = ${bob.nodeId} where id = ${mine!.id}`),
    ).rejects.toMatchObject({ code: '42501' });
  });

  it('request roles cannot read the change log directly', async () => {
    const user = await newUser({ prefix: 'cisql' });
    await expect(asUser(user.id, (tx) => tx`select * from app.change_log limit 1`)).rejects.toMatchObject({ code: '42501' });
  });
});

describe('change log', () => {
  const listener = postgres(databaseUrl, { max: 1, onnotice: () => {} });
  afterAll(() => listener.end({ timeout: 5 }));

  it('logs every insert, update and delete of an event, in order, and NOTIFYs {id, event_id}', async () => {
    const received: Array<{ id: number; event_id: string }> = [];
    const subscription = await listener.listen('event_changes', (payload) => received.push(JSON.parse(payload)));
    try {
      const event = await newEvent(await newCommunity(), '2030-05-01T18:00:00Z');
      await db()`update app.events set title = 'renamed' where id = ${event}`;
      const [node] = await db()`delete from app.events where id = ${event} returning node_id`;
      await db()`delete from app.nodes where id = ${node!.node_id}`;

      const log = await db()`select id, operation, table_name, record_id, changed_at, row_data from app.change_log where record_id = ${event} order by id`;
      expect(log.map((r) => r.operation)).toEqual(['insert', 'update', 'delete']);
      expect(log.every((r) => r.table_name === 'events' && r.changed_at instanceof Date)).toBe(true);
      expect(log[0]!.row_data).toMatchObject({ id: event, title: 'edge' });
      expect(log[1]!.row_data).toMatchObject({ id: event, title: 'renamed' });
      expect(log[2]!.row_data).toMatchObject({ id: event, title: 'renamed' });
      const ids = log.map((r) => Number(r.id));
      expect([...ids].sort((a, b) => a - b)).toEqual(ids);

      await expect.poll(() => received.filter((n) => n.event_id === event).length, { timeout: 5000 }).toBe(3);
      const mine = received.filter((n) => n.event_id === event);
      expect(mine.map((n) => n.id)).toEqual(ids);
      expect(Object.keys(mine[0]!).sort()).toEqual(['event_id', 'id']);
    } finally {
      await subscription.unlisten();
    }
  });

  it('assigns ids in commit order: a second writer waits for the first to commit', async () => {
    const community = await newCommunity();
    const a = await newEvent(community, '2030-05-02T18:00:00Z');
    const b = await newEvent(community, '2030-05-02T19:00:00Z');
    const sql = postgres(databaseUrl, { max: 2, onnotice: () => {} });
    try {
      let release!: () => void;
      const gate = new Promise<void>((resolve) => (release = resolve));
      let firstUpdated!: () => void;
      const updated = new Promise<void>((resolve) => (firstUpdated = resolve));
      const first = sql.begin(async (tx) => {
        await tx`update app.events set title = 'first' where id = ${a}`;
        firstUpdated();
        await gate;
      });
      await updated;
      let secondDone = false;
      const second = sql.begin((tx) => tx`update app.events set title = 'second' where id = ${b}`).then(() => {
        secondDone = true;
      });
      await new Promise((r) => setTimeout(r, 300));
      const finishedBeforeFirstCommitted = secondDone;
      release();
      await first;
      await second;
      expect(finishedBeforeFirstCommitted).toBe(false);
      const log = await db()`
        select record_id from app.change_log where record_id in (${a}, ${b}) and operation = 'update' order by id`;
      expect(log.map((r) => r.record_id)).toEqual([a, b]);
    } finally {
      await sql.end({ timeout: 5 });
    }
  });
});

// The event and check-in rules that need the driver or several connections
// (the rest are pgTAP: supabase/tests/events.test.sql): the plan that serves
// the venue concurrency window (read from auto_explain's notices), and the
// change log's NOTIFY and commit order.
import postgres from 'postgres';
import { afterAll, describe, expect, it } from 'vitest';
import { databaseUrl, db } from '../helpers.ts';
import { newCommunity } from '../support/sql-fixtures.ts';

const newEvent = async (community: string, startsAt: string, endsAt: string | null = null, venue: string | null = null) => {
  const [row] = await db()`select admin.create_event(${community}, 'edge', ${startsAt}::timestamptz, ${endsAt}::timestamptz, ${venue}) as id`;
  return row!.id as string;
};

describe('venue concurrency window', () => {
  it('is served by the (venue_node_id, effective end) index', async () => {
    const notices: string[] = [];
    const sql = postgres(databaseUrl, { max: 1, onnotice: (n) => notices.push(n.message ?? '') });
    try {
      const rollback = new Error('rollback');
      await expect(
        sql.begin(async (tx) => {
          const community = await newCommunity();
          // 200 venues with 100 events each, over ten years around now.
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
            select n.id, ${community}, 'bulk', now() - interval '5 years' + p.g * interval '36 days', p.venue
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

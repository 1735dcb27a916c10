// GET /sync/v1/shape through the real server, with the unmodified clients a
// mobile developer uses: @electric-sql/client's ShapeStream (1.5) and PGlite
// with @electric-sql/pglite-sync (0.6, which brings its own client 1.0). Their
// local copies must equal the REST answers after creates, updates, deletes,
// joins and leaves; no user ever receives another's row; a handle that is not
// the caller's is 409 must-refetch; a long-poll answers when a change arrives.
import { PGlite } from '@electric-sql/pglite';
import { electricSync } from '@electric-sql/pglite-sync';
import { Shape, ShapeStream, type Row } from '@electric-sql/client';
import { isDeepStrictEqual } from 'node:util';
import { afterAll, describe, expect, it } from 'vitest';
import { api, baseUrl, db, registerUser, type TestUser } from '../helpers.ts';
import { createCommunity, createEvent, createHat } from '../support/event-fixtures.ts';
import { addMember } from '../support/sql-fixtures.ts';
import { openStream } from '../support/sse.ts';

const SHAPE_URL = `${baseUrl}/sync/v1/shape`;
const cleanups: (() => unknown)[] = [];
afterAll(async () => {
  for (const c of cleanups.reverse()) await c();
});

/** A value without its null fields (a local table has a column for every field; REST leaves some out). */
function defined(row: Record<string, unknown>): Record<string, unknown> {
  return Object.fromEntries(Object.entries(row).filter(([, v]) => v !== null && v !== undefined));
}
const byId = (rows: Record<string, unknown>[]) => [...rows].map(defined).sort((a, b) => String(a.id).localeCompare(String(b.id)));

async function restTasks(user: TestUser): Promise<Record<string, unknown>[]> {
  const res = await api('GET', '/api/mobile/tasks?limit=100', { token: user.accessToken });
  expect(res.status).toBe(200);
  return res.body.tasks;
}
async function restEvents(user: TestUser): Promise<Record<string, unknown>[]> {
  const res = await api('GET', '/api/mobile/events/upcoming', { token: user.accessToken });
  expect(res.status).toBe(200);
  return res.body;
}

async function until(what: string, check: () => Promise<boolean> | boolean, ms = 20_000): Promise<void> {
  const end = Date.now() + ms;
  for (;;) {
    if (await check()) return;
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** Waits until the local rows equal the REST answer (both read again each time). */
async function converges(what: string, local: () => Promise<Record<string, unknown>[]>, rest: () => Promise<Record<string, unknown>[]>): Promise<void> {
  let last: unknown[] = [];
  try {
    await until(what, async () => {
      const [l, r] = await Promise.all([local(), rest()]);
      last = [byId(l), byId(r)];
      return isDeepStrictEqual(last[0], last[1]);
    });
  } catch (err) {
    expect(last[0], what).toEqual(last[1]);
    throw err;
  }
}

function shapeStream(user: TestUser, table: string): Shape<Row> {
  const controller = new AbortController();
  const stream = new ShapeStream({
    url: SHAPE_URL,
    params: { table },
    headers: { Authorization: () => `Bearer ${user.accessToken}` },
    signal: controller.signal,
  });
  cleanups.push(() => controller.abort());
  return new Shape(stream);
}

async function createTask(user: TestUser, title: string): Promise<string> {
  const res = await api('POST', '/api/mobile/tasks', { token: user.accessToken, body: { title } });
  expect(res.status).toBe(201);
  return res.body.task.id;
}

/** A signed-in member of a fresh community with one upcoming event, another community with one, and a task. */
async function scene(prefix: string) {
  const user = await registerUser(prefix);
  const mine = await createCommunity();
  const other = await createCommunity();
  await addMember(mine.id, user.userId);
  const myEvent = await createEvent({ communityId: mine.id, title: 'Mine', starts: '1 day' });
  const otherEvent = await createEvent({ communityId: other.id, title: 'Other', starts: '2 days' });
  const task = await createTask(user, 'Before the sync');
  return { user, mine, other, myEvent, otherEvent, task };
}

/** The raw protocol: a GET of the shape route, its messages and headers. */
async function shapeGet(user: TestUser | null, query: string): Promise<{ status: number; body: any; headers: Headers }> {
  const res = await fetch(`${SHAPE_URL}?${query}`, { headers: user ? { authorization: `Bearer ${user.accessToken}` } : {} });
  const text = await res.text();
  return { status: res.status, body: text ? JSON.parse(text) : null, headers: res.headers };
}

describe('sync shapes: ShapeStream (@electric-sql/client 1.5)', () => {
  it('keeps tasks and events equal to REST through creates, updates, deletes, joins and leaves', async () => {
    const { user, mine, other, otherEvent, task } = await scene('shape15');
    const tasks = shapeStream(user, 'tasks');
    const events = shapeStream(user, 'events');
    await converges('tasks snapshot', async () => (await tasks.rows) && tasks.currentRows, () => restTasks(user));
    await converges('events snapshot', async () => (await events.rows) && events.currentRows, () => restEvents(user));
    expect(events.currentRows.map((e) => e.title)).toEqual(['Mine']);

    const second = await createTask(user, 'Made while synced');
    expect((await api('PATCH', `/api/mobile/tasks/${task}`, { token: user.accessToken, body: { title: 'Renamed' } })).status).toBe(200);
    await converges('tasks after a create and an update', async () => tasks.currentRows, () => restTasks(user));
    expect(tasks.currentRows.map((t) => (t.meta as { title: string }).title).sort()).toEqual(['Made while synced', 'Renamed']);
    expect((await api('DELETE', `/api/mobile/tasks/${second}`, { token: user.accessToken })).status).toBeLessThan(300);
    await converges('tasks after a delete', async () => tasks.currentRows, () => restTasks(user));
    expect(tasks.currentRows).toHaveLength(1);

    expect((await api('POST', `/api/mobile/communities/${other.id}/join`, { token: user.accessToken })).status).toBeLessThan(300);
    await converges('events after a join', async () => events.currentRows, () => restEvents(user));
    expect(events.currentRows.map((e) => e.title).sort()).toEqual(['Mine', 'Other']);
    await db()`update app.events set title = 'Other, renamed' where id = ${otherEvent.id}`;
    await converges('events after an event update', async () => events.currentRows, () => restEvents(user));
    expect((await api('POST', `/api/mobile/communities/${mine.id}/leave`, { token: user.accessToken })).status).toBeLessThan(300);
    await converges('events after a leave', async () => events.currentRows, () => restEvents(user));
    expect(events.currentRows.map((e) => e.title)).toEqual(['Other, renamed']);
  }, 120_000);
});

describe('sync shapes: the other tables, with ShapeStream', () => {
  const rest = (user: TestUser, path: string, field: string) => async () => {
    const res = await api('GET', path, { token: user.accessToken });
    expect(res.status).toBe(200);
    const value = res.body[field];
    return Array.isArray(value) ? value : [value];
  };

  it('profile, hats, communities, deals and connections equal REST through changes, joins and leaves', async () => {
    const { user, mine, other } = await scene('tables');
    const friend = await registerUser('friend');
    const [friendNode] = await db()`select node_id::text from app.profiles where id = ${friend.userId}`;
    await createHat(user, 'At work');
    const shapes = {
      profile: [shapeStream(user, 'profile'), rest(user, '/api/mobile/profile', 'data')],
      hats: [shapeStream(user, 'hats'), rest(user, '/api/mobile/hats', 'data')],
      communities: [shapeStream(user, 'communities'), rest(user, '/api/mobile/communities', 'data')],
      deals: [shapeStream(user, 'deals'), rest(user, '/api/mobile/deals', 'deals')],
      connections: [shapeStream(user, 'connections'), rest(user, '/api/mobile/connections', 'connections')],
    } as const;
    const allConverge = async (when: string) => {
      for (const [table, [shape, answer]] of Object.entries(shapes)) {
        await converges(`${table} ${when}`, async () => (await shape.rows) && shape.currentRows, answer);
      }
    };
    await allConverge('at the snapshot');

    await db()`update app.profiles set name = 'Renamed' where id = ${user.userId}`;
    await createHat(user, 'At home');
    const dealt = await api('POST', '/api/mobile/tasks', { token: user.accessToken, body: { title: 'Call', deal_context: { company: 'Acme', deal_value: 5 } } });
    expect(dealt.status).toBe(201);
    const made = await api('POST', '/api/mobile/connections', { token: user.accessToken, body: { target_node_id: friendNode!.node_id, notes: 'Met at the wall' } });
    expect(made.status).toBe(201);
    expect((await api('POST', `/api/mobile/communities/${other.id}/join`, { token: user.accessToken })).status).toBeLessThan(300);
    await allConverge('after changes and a join');
    expect(shapes.communities[0].currentRows).toHaveLength(2);
    expect((await api('POST', `/api/mobile/communities/${mine.id}/leave`, { token: user.accessToken })).status).toBeLessThan(300);
    await allConverge('after a leave');
    expect(shapes.communities[0].currentRows.map((c) => c.id)).toEqual([other.id]);
    expect(shapes.profile[0].currentRows.map((p) => p.name)).toEqual(['Renamed']);
  }, 120_000);
});

describe('sync shapes: PGlite + syncShapeToTable (@electric-sql/pglite-sync 0.6)', () => {
  const SQL_TYPES: Record<string, string> = { text: 'text', bool: 'boolean', float8: 'float8', jsonb: 'jsonb' };

  /** A local table made from the shape's electric-schema header, as an app would declare it. */
  async function localTable(pg: PGlite, user: TestUser, table: string): Promise<void> {
    const res = await shapeGet(user, `table=${table}&offset=now`);
    const schema = JSON.parse(res.headers.get('electric-schema')!) as Record<string, { type: string }>;
    const columns = Object.entries(schema).map(([name, c]) => `"${name}" ${SQL_TYPES[c.type]}${name === 'id' ? ' primary key' : ''}`);
    await pg.exec(`create table "${table}" (${columns.join(', ')})`);
  }

  it('keeps local tasks and events tables equal to REST through creates, updates, deletes, joins and leaves', async () => {
    const { user, mine, other, task } = await scene('pglite');
    const pg = await PGlite.create({ extensions: { electric: electricSync() } });
    cleanups.push(() => pg.close());
    const local = (table: string) => async () => (await pg.query<Record<string, unknown>>(`select * from "${table}"`)).rows;
    for (const table of ['tasks', 'events']) {
      await localTable(pg, user, table);
      const sync = await pg.electric.syncShapeToTable({
        shape: { url: SHAPE_URL, params: { table }, headers: { Authorization: `Bearer ${user.accessToken}` } },
        table,
        primaryKey: ['id'],
        shapeKey: null,
      });
      cleanups.push(() => sync.unsubscribe());
    }
    await converges('local tasks', local('tasks'), () => restTasks(user));
    await converges('local events', local('events'), () => restEvents(user));

    const second = await createTask(user, 'Second');
    expect((await api('PATCH', `/api/mobile/tasks/${task}`, { token: user.accessToken, body: { title: 'Changed' } })).status).toBe(200);
    await converges('local tasks after a create and an update', local('tasks'), () => restTasks(user));
    expect((await api('DELETE', `/api/mobile/tasks/${second}`, { token: user.accessToken })).status).toBeLessThan(300);
    await converges('local tasks after a delete', local('tasks'), () => restTasks(user));

    expect((await api('POST', `/api/mobile/communities/${other.id}/join`, { token: user.accessToken })).status).toBeLessThan(300);
    await converges('local events after a join', local('events'), () => restEvents(user));
    expect((await api('POST', `/api/mobile/communities/${mine.id}/leave`, { token: user.accessToken })).status).toBeLessThan(300);
    await converges('local events after a leave', local('events'), () => restEvents(user));
    expect((await local('events')()).map((e) => e.title)).toEqual(['Other']);
  }, 120_000);
});

describe('sync shapes: the protocol', () => {
  it('answers a snapshot with the electric headers, then a long-poll when a change arrives', async () => {
    const { user } = await scene('longpoll');
    const first = await shapeGet(user, 'table=tasks&offset=-1');
    expect(first.status).toBe(200);
    const handle = first.headers.get('electric-handle')!;
    const offset = first.headers.get('electric-offset')!;
    expect(handle).toMatch(/^tasks-/);
    expect(offset).toMatch(/^\d+_0$/);
    expect(first.headers.has('electric-up-to-date')).toBe(true);
    expect(JSON.parse(first.headers.get('electric-schema')!).meta).toEqual({ type: 'jsonb' });
    expect(first.body.at(-1).headers.control).toBe('up-to-date');

    const poll = shapeGet(user, `table=tasks&offset=${offset}&handle=${handle}&live=true`);
    await new Promise((r) => setTimeout(r, 300));
    const id = await createTask(user, 'Wakes the poll');
    const answer = await poll;
    expect(answer.status).toBe(200);
    expect(answer.headers.get('electric-cursor')).toMatch(/^\d+$/);
    const rows = answer.body.filter((m: any) => m.headers.operation);
    expect(rows.map((m: any) => [m.headers.operation, m.value.id])).toEqual([['insert', id]]);
    expect(JSON.parse(rows[0].value.meta).title).toBe('Wakes the poll');
    expect(answer.body.at(-1).headers.control).toBe('up-to-date');
    expect(Number(answer.headers.get('electric-offset')!.split('_')[0])).toBeGreaterThan(Number(offset.split('_')[0]));
  });

  it('409 must-refetch with a new handle for a handle that is not the caller\'s shape', async () => {
    const { user } = await scene('handle');
    const bad = await shapeGet(user, 'table=tasks&offset=0_0&handle=nope');
    expect(bad.status).toBe(409);
    expect(bad.body).toEqual([{ headers: { control: 'must-refetch' } }]);
    expect(bad.headers.get('electric-handle')).toMatch(/^tasks-/);
    const eventsHandle = (await shapeGet(user, 'table=events&offset=now')).headers.get('electric-handle')!;
    expect((await shapeGet(user, `table=tasks&offset=0_0&handle=${eventsHandle}`)).status).toBe(409);
  });

  it('400 for where, columns, an unknown table or a malformed offset; 401 without a token', async () => {
    const { user } = await scene('refused');
    for (const q of ['table=tasks&offset=-1&where=true', 'table=tasks&offset=-1&columns=id', 'table=secrets&offset=-1', 'table=tasks&offset=abc', 'table=tasks&offset=5_0']) {
      const res = await shapeGet(user, q);
      expect(res.status, q).toBe(400);
      expect(res.body.error, q).toBe('bad_request');
    }
    expect((await shapeGet(null, 'table=tasks&offset=-1')).status).toBe(401);
  });
});

describe('sync shapes: the change feed', () => {
  it('the SSE feed\'s __sync_meta and the shape name the same operation for the same change', async () => {
    const { user, mine } = await scene('samemeta');
    const snap = await shapeGet(user, 'table=events&offset=-1');
    const handle = snap.headers.get('electric-handle')!;
    let offset = snap.headers.get('electric-offset')!;
    const sse = await openStream({ token: user.accessToken });
    cleanups.push(() => sse.close());
    expect(sse.status).toBe(200);
    await sse.until((m) => m.event === 'snapshot' || m.json?.__sync_meta !== undefined || m.event === 'ready', 10_000).catch(() => []);
    // One change at a time (a shape sends a row's state, so changes between two requests fold into one message).
    let made: { id: string } | undefined;
    const changes: [string, () => Promise<unknown>][] = [
      ['insert', async () => (made = await createEvent({ communityId: mine.id, title: 'Fresh', starts: '3 days' }))],
      ['update', () => db()`update app.events set title = 'Fresh, renamed' where id = ${made!.id}`],
      ['delete', () => db()`delete from app.events where id = ${made!.id}`],
    ];
    const viaSse: string[] = [];
    const viaShape: string[] = [];
    for (const [op, change] of changes) {
      await change();
      const [m] = (await sse.until((x) => x.json?.id === made!.id && x.json?.__sync_meta?.operation === op, 10_000)).slice(-1);
      viaSse.push(`${m!.id}:${m!.json.__sync_meta.operation}`);
      for (let found = false; !found; ) {
        const res = await shapeGet(user, `table=events&offset=${offset}&handle=${handle}&live=true`);
        expect(res.status).toBe(200);
        for (const msg of res.body) {
          if (msg.value?.id !== made!.id) continue;
          viaShape.push(`${msg.headers.lsn}:${msg.headers.operation}`);
          found = true;
        }
        offset = res.headers.get('electric-offset')!;
      }
    }
    expect(viaShape).toEqual(viaSse);
  }, 60_000);

  it('an idle long-poll holds no database connection', async () => {
    const { user } = await scene('idle');
    const snap = await shapeGet(user, 'table=tasks&offset=-1');
    const query = `table=tasks&offset=${snap.headers.get('electric-offset')}&handle=${snap.headers.get('electric-handle')}&live=true`;
    const controller = new AbortController();
    const polls = Array.from({ length: 12 }, () =>
      fetch(`${SHAPE_URL}?${query}`, { headers: { authorization: `Bearer ${user.accessToken}` }, signal: controller.signal }).catch(() => null),
    );
    await new Promise((r) => setTimeout(r, 1500));
    const [busy] = await db()`
      select count(*)::integer as n from pg_stat_activity
       where datname = current_database() and pid <> pg_backend_pid()
         and (state like 'idle in transaction%' or (state = 'active' and query not ilike '%listen%'))`;
    controller.abort();
    await Promise.all(polls);
    // Twelve waiting long-polls; none of them holds a connection (a maintenance statement may be running).
    expect(busy!.n).toBeLessThan(3);
  });
});

describe('sync shapes: no user receives another\'s row (attacks)', () => {
  const TABLES = ['tasks', 'deals', 'hats', 'connections', 'profile', 'events', 'communities'];

  it('another user\'s rows and changes never reach a shape: snapshot, catch-up, long-poll, their handle', async () => {
    const me = await scene('victimless');
    const them = await scene('victim');
    // My shapes, before they change anything.
    const mine = new Map<string, { handle: string; offset: string }>();
    for (const table of TABLES) {
      const snap = await shapeGet(me.user, `table=${table}&offset=-1`);
      expect(snap.status, table).toBe(200);
      mine.set(table, { handle: snap.headers.get('electric-handle')!, offset: snap.headers.get('electric-offset')! });
    }
    const polls = TABLES.map((table) => shapeGet(me.user, `table=${table}&offset=${mine.get(table)!.offset}&handle=${mine.get(table)!.handle}&live=true`));
    // Their changes: a task made, changed and deleted, a deal, a hat, their profile, their community's event.
    const theirTask = await createTask(them.user, 'Secret plan');
    const dealt = await api('POST', '/api/mobile/tasks', { token: them.user.accessToken, body: { title: 'Deal', deal_context: { company: 'Acme', deal_value: 5 } } });
    expect(dealt.status).toBe(201);
    expect((await api('PATCH', `/api/mobile/tasks/${them.task}`, { token: them.user.accessToken, body: { title: 'Changed plan' } })).status).toBe(200);
    expect((await api('DELETE', `/api/mobile/tasks/${theirTask}`, { token: them.user.accessToken })).status).toBeLessThan(300);
    await createHat(them.user, 'Spy');
    await db()`update app.profiles set name = 'Renamed victim' where id = ${them.user.userId}`;
    await db()`update app.events set title = 'Their event, renamed' where id = ${them.myEvent.id}`;
    const theirDeals = await db()`select id::text from app.deals where created_by = ${them.user.userId}`;
    const theirHats = await db()`select id::text from app.hats where user_id = ${them.user.userId}`;
    const theirs = new Set([them.task, theirTask, them.user.userId, them.myEvent.id, them.mine.id,
                            ...theirDeals.map((r) => r.id as string), ...theirHats.map((r) => r.id as string)]);
    // A change of mine, so that my long-polls of tasks answer.
    const myNew = await createTask(me.user, 'Mine, later');

    const seen: string[] = [];
    const collect = (body: any[]) => {
      for (const m of body) if (m.value) seen.push(String(m.value.id));
    };
    for (const table of TABLES) {
      const { handle, offset } = mine.get(table)!;
      const caughtUp = await shapeGet(me.user, `table=${table}&offset=${offset}&handle=${handle}`);
      expect(caughtUp.status, table).toBe(200);
      collect(caughtUp.body);
      // Their handle with my token: not my shape.
      const theirHandle = (await shapeGet(them.user, `table=${table}&offset=now`)).headers.get('electric-handle')!;
      const refused = await shapeGet(me.user, `table=${table}&offset=${offset}&handle=${theirHandle}`);
      expect(refused.status, table).toBe(409);
      expect(refused.body, table).toEqual([{ headers: { control: 'must-refetch' } }]);
      collect((await shapeGet(me.user, `table=${table}&offset=-1`)).body);
    }
    // The long-polls: tasks answers with my new task; the others with nothing of theirs (at the latest when they time out).
    const answered = await Promise.all(polls);
    for (const poll of answered) {
      expect(poll.status).toBe(200);
      collect(poll.body);
    }
    expect(seen).toContain(myNew);
    expect(seen.filter((id) => theirs.has(id))).toEqual([]);
  }, 120_000);
});

describe('sync shapes: a pruned offset', () => {
  // Last in this file: it moves this database's prune watermark.
  it('409 must-refetch with a new handle, catching up and live, when the offset is older than the log keeps', async () => {
    const { user } = await scene('pruned');
    const snap = await shapeGet(user, 'table=tasks&offset=-1');
    const handle = snap.headers.get('electric-handle')!;
    const offset = snap.headers.get('electric-offset')!;
    await createTask(user, 'After the snapshot');
    await db()`update app.change_log_state set pruned_through = (select max(id) from app.change_log)`;
    for (const live of ['', '&live=true']) {
      const res = await shapeGet(user, `table=tasks&offset=${offset}&handle=${handle}${live}`);
      expect(res.status, live).toBe(409);
      expect(res.body).toEqual([{ headers: { control: 'must-refetch' } }]);
      expect(res.headers.get('electric-handle')).not.toBe(handle);
    }
    // Starting again works.
    const again = await shapeGet(user, 'table=tasks&offset=-1');
    expect(again.status).toBe(200);
    expect(again.body.filter((m: any) => m.value).map((m: any) => JSON.parse(m.value.meta).title).sort()).toEqual(['After the snapshot', 'Before the sync']);
  });
});


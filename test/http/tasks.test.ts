// Tasks over HTTP: every task endpoint (docs/api/mobile.md#tasks-and-links), every row of the
// task status table, the error statuses and bodies (docs/api/conventions.md#errors)
// (422/403 Simple, 404/401 Error), row-level security between two users, and
// races: parallel opposite links never both succeed.
import { describe, expect, it } from 'vitest';
import { api, db, expectErrorShape, registerUser, type TestUser } from '../helpers.ts';
import { ISO, UNKNOWN, UUID } from '../support/formats.ts';
import { createTask, get, post, type Task } from '../support/tasks.ts';

const link = (user: TestUser, from: string, to: string, transition_meta?: unknown) =>
  api('POST', `/api/mobile/tasks/${from}/link`, { token: user.accessToken, body: { destination_task_id: to, transition_meta } });

/** The Simple body (docs/api/conventions.md#errors): exactly {error: string}. */
function expectSimple(body: unknown, message?: RegExp): void {
  expect(Object.keys(body as object)).toEqual(['error']);
  expect(typeof (body as { error: unknown }).error).toBe('string');
  if (message) expect((body as { error: string }).error).toMatch(message);
}

describe('POST /api/mobile/tasks', () => {
  it('creates a task: 201 with the Task, attributes in meta, status pending by default', async () => {
    const user = await registerUser('task-create');
    const res = await post(user, '/api/mobile/tasks', {
      title: 'Call Acme',
      description: 'about the renewal',
      deal_context: { company: 'Acme', deal_value: 1200.5 },
    });
    expect(res.status).toBe(201);
    expect(res.body).toEqual({
      success: true,
      task: {
        id: expect.stringMatching(UUID),
        created_by: user.userId,
        inserted_at: expect.stringMatching(ISO),
        updated_at: expect.stringMatching(ISO),
        meta: {
          title: 'Call Acme',
          description: 'about the renewal',
          status: 'pending',
          deal_context: { company: 'Acme', deal_value: 1200.5 },
        },
      },
    });
  });

  it.each(['pending', 'in_progress', 'completed'])('takes the status given (%s)', async (status) => {
    const user = await registerUser('task-status');
    const task = await createTask(user, { title: 't', status });
    expect(task.meta.status).toBe(status);
  });

  it('accepts an empty object: every attribute is optional', async () => {
    const user = await registerUser('task-empty');
    const task = await createTask(user, {});
    expect(task.meta).toEqual({ status: 'pending' });
  });

  it.each([
    ['no body', undefined],
    ['an array', [{ title: 'x' }]],
    ['status not in the enum', { status: 'done' }],
    ['title not a string', { title: 5 }],
    ['description not a string', { description: {} }],
    ['deal_context not an object', { deal_context: 'Acme' }],
    ['deal_value not a number', { deal_context: { company: 'Acme', deal_value: '100' } }],
    ['company not a string', { deal_context: { company: 7 } }],
    ['empty company', { deal_context: { company: '  ' } }],
    ['title too long', { title: 'x'.repeat(501) }],
  ])('answers 422 with the Simple body for %s', async (_name, body) => {
    const user = await registerUser('task-bad');
    const res = await api('POST', '/api/mobile/tasks', { token: user.accessToken, body });
    expect(res.status).toBe(422);
    expectSimple(res.body);
  });

  it.each([
    ['malformed JSON', '{"title":'],
    ['a top-level JSON string (the parser takes objects and arrays only)', '"title"'],
  ])('%s is 400 with the Error body', async (_name, rawBody) => {
    const user = await registerUser('task-json');
    const res = await api('POST', '/api/mobile/tasks', { token: user.accessToken, rawBody });
    expect(res.status).toBe(400);
    expectErrorShape(res.body);
  });

  it('every task and deal endpoint answers 401 with the Error body without a token', async () => {
    const paths: [string, string][] = [
      ['GET', '/api/mobile/tasks'],
      ['POST', '/api/mobile/tasks'],
      ['GET', `/api/mobile/tasks/${UNKNOWN}`],
      ['PATCH', `/api/mobile/tasks/${UNKNOWN}`],
      ['DELETE', `/api/mobile/tasks/${UNKNOWN}`],
      ['POST', `/api/mobile/tasks/${UNKNOWN}/start`],
      ['POST', `/api/mobile/tasks/${UNKNOWN}/complete`],
      ['POST', `/api/mobile/tasks/${UNKNOWN}/complete_and_link`],
      ['POST', `/api/mobile/tasks/${UNKNOWN}/link`],
      ['GET', `/api/mobile/tasks/${UNKNOWN}/next`],
      ['GET', `/api/mobile/tasks/${UNKNOWN}/previous`],
      ['GET', `/api/mobile/tasks/${UNKNOWN}/chain`],
      ['GET', '/api/mobile/tasks/by_company'],
      ['GET', '/api/mobile/tasks/search?company=x'],
      ['GET', '/api/mobile/deals'],
      ['GET', `/api/mobile/deals/${UNKNOWN}`],
      ['POST', `/api/mobile/deals/${UNKNOWN}/start_task`],
      ['POST', `/api/mobile/deals/${UNKNOWN}/complete_task`],
    ];
    for (const [method, path] of paths) {
      const res = await api(method, path);
      expect(res.status, `${method} ${path}`).toBe(401);
      expectErrorShape(res.body);
    }
  });
});

describe('GET /api/mobile/tasks/{id}', () => {
  it('returns the task', async () => {
    const user = await registerUser('task-get');
    const task = await createTask(user, { title: 'read me' });
    const res = await get(user, `/api/mobile/tasks/${task.id}`);
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ success: true, task });
  });

  it.each([
    // A malformed id names nothing: refused by the route before any SQL runs.
    ['an unknown id', UNKNOWN, 'task_not_found'],
    ['an id that is not a uuid', 'not-a-uuid', 'not_found'],
    ['a number', '12345', 'not_found'],
  ])('answers 404 with the Error body for %s', async (_name, id, code) => {
    const user = await registerUser('task-404');
    const res = await get(user, `/api/mobile/tasks/${id}`);
    expect(res.status).toBe(404);
    expectErrorShape(res.body);
    expect(res.body.error).toBe(code);
  });
});

describe('GET /api/mobile/tasks (list)', () => {
  it('lists the caller\'s tasks newest first, filters by status, pages with page and limit', async () => {
    const user = await registerUser('task-list');
    const created: Task[] = [];
    for (let i = 0; i < 5; i++) created.push(await createTask(user, { title: `t${i}`, status: i % 2 ? 'completed' : 'pending' }));
    const newestFirst = [...created].reverse().map((t) => t.id);

    const all = await get(user, '/api/mobile/tasks');
    expect(all.status).toBe(200);
    expect(all.body.success).toBe(true);
    expect(all.body.tasks.map((t: Task) => t.id)).toEqual(newestFirst);
    expect(all.body.tasks[0]).toEqual(created[4]);

    const completed = await get(user, '/api/mobile/tasks?status=completed');
    expect(completed.body.tasks.map((t: Task) => t.meta.title)).toEqual(['t3', 't1']);

    const page2 = await get(user, '/api/mobile/tasks?page=2&limit=2');
    expect(page2.body.tasks.map((t: Task) => t.id)).toEqual(newestFirst.slice(2, 4));
    const page3 = await get(user, '/api/mobile/tasks?page=3&limit=2');
    expect(page3.body.tasks.map((t: Task) => t.id)).toEqual(newestFirst.slice(4));
    const beyond = await get(user, '/api/mobile/tasks?page=99&limit=2');
    expect(beyond.body).toEqual({ success: true, tasks: [] });
  });

  it('the default page size is 20; limit 100 is allowed', async () => {
    const user = await registerUser('task-pagesize');
    await db()`
      insert into app.tasks (created_by, meta, inserted_at)
      select ${user.userId}, jsonb_build_object('title', 'bulk ' || i, 'status', 'pending'), now() - i * interval '1 second'
        from generate_series(1, 25) i`;
    expect((await get(user, '/api/mobile/tasks')).body.tasks).toHaveLength(20);
    expect((await get(user, '/api/mobile/tasks?limit=100')).body.tasks).toHaveLength(25);
    expect((await get(user, '/api/mobile/tasks?page=2')).body.tasks).toHaveLength(5);
  });

  it.each([
    'status=done',
    'status=',
    'status=pending&status=completed',
    'page=0',
    'page=-1',
    'page=abc',
    'page=1.5',
    'page=',
    'limit=0',
    'limit=101',
    'limit=2.5',
    'limit=ten',
    'page=99999999999',
  ])('answers 422 with the Simple body for ?%s', async (query) => {
    const user = await registerUser('task-listbad');
    const res = await get(user, `/api/mobile/tasks?${query}`);
    expect(res.status).toBe(422);
    expectSimple(res.body);
  });

  it('row-level security: each user lists only their own tasks', async () => {
    const alice = await registerUser('alice');
    const bob = await registerUser('bob');
    await createTask(alice, { title: 'alice task' });
    await createTask(bob, { title: 'bob task' });
    expect((await get(alice, '/api/mobile/tasks')).body.tasks.map((t: Task) => t.meta.title)).toEqual(['alice task']);
    expect((await get(bob, '/api/mobile/tasks')).body.tasks.map((t: Task) => t.meta.title)).toEqual(['bob task']);
  });
});

describe('PATCH /api/mobile/tasks/{id}', () => {
  it('merges title, description and deal_context into meta; status is untouched', async () => {
    const user = await registerUser('task-patch');
    const task = await createTask(user, { title: 'old', description: 'keep me', deal_context: { company: 'Acme', deal_value: 10 } });
    await post(user, `/api/mobile/tasks/${task.id}/start`);
    const res = await api('PATCH', `/api/mobile/tasks/${task.id}`, {
      token: user.accessToken,
      body: { title: 'new', deal_context: { deal_value: 20 } },
    });
    expect(res.status).toBe(200);
    expect(res.body).toEqual({
      success: true,
      task: {
        ...task,
        updated_at: expect.stringMatching(ISO),
        meta: { title: 'new', description: 'keep me', status: 'in_progress', deal_context: { company: 'Acme', deal_value: 20 } },
      },
    });
    expect(new Date(res.body.task.updated_at).getTime()).toBeGreaterThanOrEqual(new Date(task.updated_at).getTime());
  });

  it('null removes a key (JSON merge patch)', async () => {
    const user = await registerUser('task-patchnull');
    const task = await createTask(user, { title: 't', description: 'd', deal_context: { company: 'Acme', deal_value: 5 } });
    const res = await api('PATCH', `/api/mobile/tasks/${task.id}`, {
      token: user.accessToken,
      body: { description: null, deal_context: { deal_value: null } },
    });
    expect(res.body.task.meta).toEqual({ title: 't', status: 'pending', deal_context: { company: 'Acme' } });
  });

  it('refuses a status change with 422 (status changes go through start and complete)', async () => {
    const user = await registerUser('task-patchstatus');
    const task = await createTask(user, { title: 't' });
    const res = await api('PATCH', `/api/mobile/tasks/${task.id}`, { token: user.accessToken, body: { status: 'completed' } });
    expect(res.status).toBe(422);
    expectSimple(res.body, /status/);
    expect((await get(user, `/api/mobile/tasks/${task.id}`)).body.task.meta.status).toBe('pending');
  });

  it.each([
    ['no body', undefined],
    ['an array', []],
    ['title not a string', { title: 1 }],
    ['deal_context not an object', { deal_context: [] }],
    ['deal_value not a number', { deal_context: { deal_value: 'lots' } }],
  ])('answers 422 with the Simple body for %s', async (_name, body) => {
    const user = await registerUser('task-patchbad');
    const task = await createTask(user, { title: 't' });
    const res = await api('PATCH', `/api/mobile/tasks/${task.id}`, { token: user.accessToken, body });
    expect(res.status).toBe(422);
    expectSimple(res.body);
  });

  it('answers 404 for an unknown task and for another user\'s task', async () => {
    const alice = await registerUser('alice-patch');
    const bob = await registerUser('bob-patch');
    const task = await createTask(alice, { title: 'mine' });
    for (const [user, id] of [[bob, task.id], [alice, UNKNOWN], [alice, 'nope']] as const) {
      const res = await api('PATCH', `/api/mobile/tasks/${id}`, { token: user.accessToken, body: { title: 'x' } });
      expect(res.status).toBe(404);
      expectErrorShape(res.body);
    }
    expect((await get(alice, `/api/mobile/tasks/${task.id}`)).body.task.meta.title).toBe('mine');
  });
});

describe('DELETE /api/mobile/tasks/{id}', () => {
  it('deletes: 204 with an empty body; the task and its links are gone', async () => {
    const user = await registerUser('task-delete');
    const a = await createTask(user, { title: 'a' });
    const b = await createTask(user, { title: 'b' });
    expect((await link(user, a.id, b.id)).status).toBe(200);
    const res = await api('DELETE', `/api/mobile/tasks/${b.id}`, { token: user.accessToken });
    expect(res.status).toBe(204);
    expect(res.text).toBe('');
    expect((await get(user, `/api/mobile/tasks/${b.id}`)).status).toBe(404);
    expect((await get(user, `/api/mobile/tasks/${a.id}/next`)).body).toEqual({ success: true, next_task: null });
    const [row] = await db()`select count(*)::int as n from app.task_transitions where origin_id = ${a.id}`;
    expect(row!.n).toBe(0);
  });

  it('another user\'s task is 403 with the Simple body, and stays', async () => {
    const alice = await registerUser('alice-del');
    const bob = await registerUser('bob-del');
    const task = await createTask(alice, { title: 'alice only' });
    const res = await api('DELETE', `/api/mobile/tasks/${task.id}`, { token: bob.accessToken });
    expect(res.status).toBe(403);
    expectSimple(res.body);
    expect((await get(alice, `/api/mobile/tasks/${task.id}`)).status).toBe(200);
  });

  it('an unknown task (or a non-uuid id) is 404 with the Error body', async () => {
    const user = await registerUser('task-del404');
    for (const id of [UNKNOWN, 'xyz']) {
      const res = await api('DELETE', `/api/mobile/tasks/${id}`, { token: user.accessToken });
      expect(res.status).toBe(404);
      expectErrorShape(res.body);
    }
  });
});

describe('task status table', () => {
  it('pending → start → in_progress (200 with the task)', async () => {
    const user = await registerUser('st-start');
    const task = await createTask(user, { title: 't' });
    const res = await post(user, `/api/mobile/tasks/${task.id}/start`);
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ success: true, task: { ...task, updated_at: expect.stringMatching(ISO), meta: { title: 't', status: 'in_progress' } } });
  });

  it.each(['in_progress', 'completed'])('%s → start: 422 "task must be pending to start", unchanged', async (status) => {
    const user = await registerUser('st-start422');
    const task = await createTask(user, { title: 't', status });
    const res = await post(user, `/api/mobile/tasks/${task.id}/start`);
    expect(res.status).toBe(422);
    expect(res.body).toEqual({ error: 'task must be pending to start' });
    expect((await get(user, `/api/mobile/tasks/${task.id}`)).body.task.meta.status).toBe(status);
  });

  it.each(['pending', 'in_progress'])('%s → complete → completed (200 with the task)', async (status) => {
    const user = await registerUser('st-complete');
    const task = await createTask(user, { title: 't', status });
    const res = await post(user, `/api/mobile/tasks/${task.id}/complete`);
    expect(res.status).toBe(200);
    expect(res.body.success).toBe(true);
    expect(res.body.task).toMatchObject({ id: task.id, meta: { title: 't', status: 'completed' } });
  });

  it('completed → complete: 422 "invalid status transition", unchanged', async () => {
    const user = await registerUser('st-complete422');
    const task = await createTask(user, { title: 't', status: 'completed' });
    const res = await post(user, `/api/mobile/tasks/${task.id}/complete`);
    expect(res.status).toBe(422);
    expect(res.body).toEqual({ error: 'invalid status transition' });
  });

  it.each(['pending', 'in_progress'])(
    '%s → complete_and_link: completed, a new pending task linked by a task_transition (200)',
    async (status) => {
      const user = await registerUser('st-cal');
      const task = await createTask(user, { title: 'first', status });
      const res = await post(user, `/api/mobile/tasks/${task.id}/complete_and_link`, {
        next_task: { title: 'second', description: 'then this' },
      });
      expect(res.status).toBe(200);
      expect(res.body).toEqual({
        success: true,
        completed_task: { ...task, updated_at: expect.stringMatching(ISO), meta: { title: 'first', status: 'completed' } },
        next_task: {
          id: expect.stringMatching(UUID),
          created_by: user.userId,
          inserted_at: expect.stringMatching(ISO),
          updated_at: expect.stringMatching(ISO),
          meta: { title: 'second', description: 'then this', status: 'pending' },
        },
      });
      const next = await get(user, `/api/mobile/tasks/${task.id}/next`);
      expect(next.body.next_task).toEqual(res.body.next_task);
      const [row] = await db()`
        select type, created_by, meta from app.task_transitions where origin_id = ${task.id} and destination_id = ${res.body.next_task.id}`;
      expect(row).toEqual({ type: 'task_transition', created_by: user.userId, meta: {} });
    },
  );

  it('complete_and_link may create the next task in_progress', async () => {
    const user = await registerUser('st-cal-ip');
    const task = await createTask(user, { title: 'first' });
    const res = await post(user, `/api/mobile/tasks/${task.id}/complete_and_link`, { next_task: { title: 'n', status: 'in_progress' } });
    expect(res.status).toBe(200);
    expect(res.body.next_task.meta.status).toBe('in_progress');
  });

  it('completed → complete_and_link: 422, unchanged, no task created', async () => {
    const user = await registerUser('st-cal422');
    const task = await createTask(user, { title: 't', status: 'completed' });
    const res = await post(user, `/api/mobile/tasks/${task.id}/complete_and_link`, { next_task: { title: 'n' } });
    expect(res.status).toBe(422);
    expectSimple(res.body, /invalid status transition/);
    expect((await get(user, '/api/mobile/tasks')).body.tasks).toHaveLength(1);
  });

  it.each([
    ['no body', undefined],
    ['no next_task', {}],
    ['next_task not an object', { next_task: 'x' }],
    ['next_task completed', { next_task: { title: 'n', status: 'completed' } }],
    ['next_task title not a string', { next_task: { title: 3 } }],
  ])('complete_and_link with %s: 422, nothing changes', async (_name, body) => {
    const user = await registerUser('st-calbad');
    const task = await createTask(user, { title: 't' });
    const res = await post(user, `/api/mobile/tasks/${task.id}/complete_and_link`, body);
    expect(res.status).toBe(422);
    expectSimple(res.body);
    expect((await get(user, `/api/mobile/tasks/${task.id}`)).body.task.meta.status).toBe('pending');
  });

  it('start, complete, complete_and_link of an unknown, foreign or non-uuid task: 404 with the Error body', async () => {
    const alice = await registerUser('alice-st');
    const bob = await registerUser('bob-st');
    const task = await createTask(alice, { title: 'alice' });
    for (const id of [task.id, UNKNOWN, 'abc']) {
      for (const [op, body] of [['start', undefined], ['complete', undefined], ['complete_and_link', { next_task: {} }]] as const) {
        const res = await post(bob, `/api/mobile/tasks/${id}/${op}`, body);
        expect(res.status, `${op} ${id}`).toBe(404);
        expectErrorShape(res.body);
      }
    }
    expect((await get(alice, `/api/mobile/tasks/${task.id}`)).body.task.meta.status).toBe('pending');
    expect((await get(bob, '/api/mobile/tasks')).body.tasks).toEqual([]);
  });

  it('10 parallel starts of one pending task: exactly one succeeds (20 rounds)', async () => {
    const user = await registerUser('st-race');
    for (let round = 0; round < 20; round++) {
      const task = await createTask(user, { title: `t${round}` });
      const results = await Promise.all(Array.from({ length: 10 }, () => post(user, `/api/mobile/tasks/${task.id}/start`)));
      expect(results.map((r) => r.status).sort(), `round ${round}`).toEqual([200, ...Array(9).fill(422)]);
    }
  });

  it('parallel complete_and_link of one task: exactly one next task is created', async () => {
    const user = await registerUser('st-calrace');
    const task = await createTask(user, { title: 't' });
    const results = await Promise.all(
      Array.from({ length: 8 }, (_, i) => post(user, `/api/mobile/tasks/${task.id}/complete_and_link`, { next_task: { title: `n${i}` } })),
    );
    expect(results.filter((r) => r.status === 200)).toHaveLength(1);
    expect(results.filter((r) => r.status === 422)).toHaveLength(7);
    expect((await get(user, '/api/mobile/tasks')).body.tasks).toHaveLength(2);
  });
});

describe('POST /api/mobile/tasks/{id}/link', () => {
  it('links two tasks: 200 with origin_task_id, destination_task_id and the task_transition event', async () => {
    const user = await registerUser('link');
    const a = await createTask(user, { title: 'a' });
    const b = await createTask(user, { title: 'b' });
    const res = await link(user, a.id, b.id, { reason: 'follow-up', weight: 2 });
    expect(res.status).toBe(200);
    expect(res.body).toEqual({
      success: true,
      link: {
        origin_task_id: a.id,
        destination_task_id: b.id,
        event: {
          id: expect.stringMatching(UUID),
          type: 'task_transition',
          origin_id: a.id,
          destination_id: b.id,
          created_by: user.userId,
          inserted_at: expect.stringMatching(ISO),
          meta: { reason: 'follow-up', weight: 2 },
        },
      },
    });
    const plain = await link(user, b.id, (await createTask(user)).id);
    expect(plain.body.link.event.meta).toEqual({});
  });

  it('a self-link is 422', async () => {
    const user = await registerUser('link-self');
    const a = await createTask(user, { title: 'a' });
    const res = await link(user, a.id, a.id);
    expect(res.status).toBe(422);
    expectSimple(res.body);
  });

  it('a link that closes a cycle is 422 "circular dependency", however long the cycle', async () => {
    const user = await registerUser('link-cycle');
    const tasks: Task[] = [];
    for (let i = 0; i < 5; i++) tasks.push(await createTask(user, { title: `t${i}` }));
    for (let i = 0; i < 4; i++) expect((await link(user, tasks[i]!.id, tasks[i + 1]!.id)).status).toBe(200);
    for (const [from, to] of [[4, 0], [1, 0], [4, 2], [3, 1]] as const) {
      const res = await link(user, tasks[from]!.id, tasks[to]!.id);
      expect(res.status, `${from}→${to}`).toBe(422);
      expectSimple(res.body, /circular dependency/);
    }
    // Not cycles: a shortcut forward, a duplicate link, a branch.
    expect((await link(user, tasks[0]!.id, tasks[4]!.id)).status).toBe(200);
    expect((await link(user, tasks[0]!.id, tasks[1]!.id)).status).toBe(200);
    const [row] = await db()`select count(*)::int as n from app.task_transitions where created_by = ${user.userId}`;
    expect(row!.n).toBe(6);
  });

  it('an unknown or foreign destination is 404; a foreign or unknown origin is 404', async () => {
    const alice = await registerUser('alice-link');
    const bob = await registerUser('bob-link');
    const a = await createTask(alice, { title: 'a' });
    const b = await createTask(bob, { title: 'b' });
    for (const [user, from, to] of [
      [alice, a.id, UNKNOWN],
      [alice, a.id, b.id],
      [bob, a.id, b.id],
      [alice, UNKNOWN, a.id],
      [alice, 'not-a-uuid', a.id],
    ] as const) {
      const res = await link(user, from, to);
      expect(res.status, `${from} → ${to}`).toBe(404);
      expectErrorShape(res.body);
    }
  });

  it.each([
    ['no body', undefined],
    ['no destination', {}],
    ['destination not a uuid', { destination_task_id: 'abc' }],
    ['transition_meta an array', { destination_task_id: UNKNOWN, transition_meta: [1] }],
    ['transition_meta a string', { destination_task_id: UNKNOWN, transition_meta: 'x' }],
  ])('%s: 422 with the Simple body', async (_name, body) => {
    const user = await registerUser('link-bad');
    const a = await createTask(user, { title: 'a' });
    const res = await post(user, `/api/mobile/tasks/${a.id}/link`, body);
    expect(res.status).toBe(422);
    expectSimple(res.body);
  });

  it('race: A→B and B→A sent at the same moment never both succeed (40 rounds)', async () => {
    const user = await registerUser('link-race');
    for (let round = 0; round < 40; round++) {
      const a = await createTask(user, { title: `a${round}` });
      const b = await createTask(user, { title: `b${round}` });
      const [ab, ba] = await Promise.all([link(user, a.id, b.id), link(user, b.id, a.id)]);
      expect([ab.status, ba.status].sort(), `round ${round}`).toEqual([200, 422]);
    }
  });

  it('race: a ring of 4 tasks linked all at once keeps at most 3 links (30 rounds)', async () => {
    const user = await registerUser('ring-race');
    for (let round = 0; round < 30; round++) {
      const ring: Task[] = [];
      for (let i = 0; i < 4; i++) ring.push(await createTask(user, { title: `r${round}.${i}` }));
      const results = await Promise.all(ring.map((t, i) => link(user, t.id, ring[(i + 1) % 4]!.id)));
      const statuses = results.map((r) => r.status).sort();
      expect(statuses, `round ${round}`).toEqual([200, 200, 200, 422]);
    }
  });
});

describe('next, previous and chain', () => {
  it('next and previous follow the most recent link; null when there is none', async () => {
    const user = await registerUser('nextprev');
    const [a, b, c] = [await createTask(user, { title: 'a' }), await createTask(user, { title: 'b' }), await createTask(user, { title: 'c' })];
    expect((await get(user, `/api/mobile/tasks/${a.id}/next`)).body).toEqual({ success: true, next_task: null });
    expect((await get(user, `/api/mobile/tasks/${a.id}/previous`)).body).toEqual({ success: true, previous_task: null });
    await link(user, a.id, b.id);
    await link(user, a.id, c.id);
    await link(user, b.id, c.id);
    const next = await get(user, `/api/mobile/tasks/${a.id}/next`);
    expect(next.status).toBe(200);
    expect(next.body).toEqual({ success: true, next_task: c });
    const previous = await get(user, `/api/mobile/tasks/${c.id}/previous`);
    expect(previous.body).toEqual({ success: true, previous_task: b });
    expect((await get(user, `/api/mobile/tasks/${b.id}/previous`)).body.previous_task).toEqual(a);
  });

  it('next, previous and chain of an unknown, foreign or non-uuid task are 404', async () => {
    const alice = await registerUser('alice-np');
    const bob = await registerUser('bob-np');
    const task = await createTask(alice, { title: 'a' });
    for (const id of [task.id, UNKNOWN, 'x']) {
      for (const op of ['next', 'previous', 'chain']) {
        const res = await get(bob, `/api/mobile/tasks/${id}/${op}`);
        expect(res.status, `${op} ${id}`).toBe(404);
        expectErrorShape(res.body);
      }
    }
  });

  it('chain: the starting task first, forward or backward, bounded by depth', async () => {
    const user = await registerUser('chain');
    const t: Task[] = [];
    for (let i = 0; i < 6; i++) t.push(await createTask(user, { title: `t${i}` }));
    for (let i = 0; i < 5; i++) await link(user, t[i]!.id, t[i + 1]!.id);

    const forward = await get(user, `/api/mobile/tasks/${t[0]!.id}/chain`);
    expect(forward.status).toBe(200);
    expect(forward.body).toEqual({ success: true, chain: t, depth: 50, direction: 'forward' });

    const short = await get(user, `/api/mobile/tasks/${t[1]!.id}/chain?depth=2`);
    expect(short.body.chain.map((x: Task) => x.meta.title)).toEqual(['t1', 't2', 't3']);
    expect(short.body.depth).toBe(2);

    const backward = await get(user, `/api/mobile/tasks/${t[4]!.id}/chain?direction=backward&depth=3`);
    expect(backward.body).toEqual({ success: true, chain: [t[4], t[3], t[2], t[1]], depth: 3, direction: 'backward' });

    const alone = await get(user, `/api/mobile/tasks/${t[5]!.id}/chain`);
    expect(alone.body.chain).toEqual([t[5]]);
  });

  it('chain with branches lists each task once, nearest first, ties by link time', async () => {
    const user = await registerUser('chain-branch');
    const n: Record<string, Task> = {};
    for (const name of ['a', 'b', 'c', 'd', 'e']) n[name] = await createTask(user, { title: name });
    // a → c, a → b (later), b → d, c → d, d → e, a → e (shortcut)
    for (const [from, to] of [['a', 'c'], ['a', 'b'], ['b', 'd'], ['c', 'd'], ['d', 'e'], ['a', 'e']] as const) {
      expect((await link(user, n[from]!.id, n[to]!.id)).status).toBe(200);
    }
    const res = await get(user, `/api/mobile/tasks/${n.a!.id}/chain`);
    expect(res.body.chain.map((x: Task) => x.meta.title)).toEqual(['a', 'c', 'b', 'e', 'd']);
    const back = await get(user, `/api/mobile/tasks/${n.e!.id}/chain?direction=backward`);
    expect(back.body.chain.map((x: Task) => x.meta.title)).toEqual(['e', 'd', 'a', 'b', 'c']);
    const one = await get(user, `/api/mobile/tasks/${n.a!.id}/chain?depth=1`);
    expect(one.body.chain.map((x: Task) => x.meta.title)).toEqual(['a', 'c', 'b', 'e']);
  });

  it.each(['direction=sideways', 'direction=', 'depth=0', 'depth=-1', 'depth=1.5', 'depth=x'])(
    'chain with ?%s: 422 with the Simple body',
    async (query) => {
      const user = await registerUser('chain-bad');
      const task = await createTask(user, { title: 't' });
      const res = await get(user, `/api/mobile/tasks/${task.id}/chain?${query}`);
      expect(res.status).toBe(422);
      expectSimple(res.body);
    },
  );
});

describe('GET /api/mobile/tasks/by_company', () => {
  it('groups the caller\'s tasks by company (case-insensitive) with the latest deal value and the active task', async () => {
    const user = await registerUser('bycompany');
    const a1 = await createTask(user, { title: 'a1', deal_context: { company: 'Acme', deal_value: 100 } });
    const a2 = await createTask(user, { title: 'a2', deal_context: { company: 'ACME', deal_value: 250 } });
    const a3 = await createTask(user, { title: 'a3', status: 'completed', deal_context: { company: 'acme' } });
    const g1 = await createTask(user, { title: 'g1', status: 'completed', deal_context: { company: 'Globex', deal_value: 7 } });
    await createTask(user, { title: 'no company' });
    const started = (await post(user, `/api/mobile/tasks/${a2.id}/start`)).body.task;

    const res = await get(user, '/api/mobile/tasks/by_company');
    expect(res.status).toBe(200);
    expect(res.body).toEqual({
      success: true,
      companies: [
        {
          company_name: 'Acme',
          deal_value: 250,
          task_count: 3,
          active_task: a1,
          all_tasks: [a3, started, a1],
          completed_tasks: [a3],
        },
        {
          company_name: 'Globex',
          deal_value: 7,
          task_count: 1,
          active_task: null,
          all_tasks: [g1],
          completed_tasks: [g1],
        },
      ],
    });
  });

  it('is empty for a user without company tasks, and never shows another user\'s', async () => {
    const alice = await registerUser('alice-bc');
    const bob = await registerUser('bob-bc');
    await createTask(alice, { title: 'x', deal_context: { company: 'Initech' } });
    expect((await get(bob, '/api/mobile/tasks/by_company')).body).toEqual({ success: true, companies: [] });
  });
});

describe('GET /api/mobile/tasks/search', () => {
  it('finds the caller\'s tasks by partial, case-insensitive company', async () => {
    const alice = await registerUser('search');
    const bob = await registerUser('search-bob');
    const a = await createTask(alice, { title: 'a', deal_context: { company: 'Acme Corp' } });
    const b = await createTask(alice, { title: 'b', deal_context: { company: 'Big ACME' } });
    await createTask(alice, { title: 'c', deal_context: { company: 'Globex' } });
    await createTask(bob, { title: 'bob', deal_context: { company: 'Acme' } });
    const res = await get(alice, '/api/mobile/tasks/search?company=acme');
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ success: true, search_query: 'acme', tasks: [b, a] });
  });

  it('LIKE wildcards in the query match literally', async () => {
    const user = await registerUser('search-wild');
    const pct = await createTask(user, { title: 'p', deal_context: { company: '100% Juice' } });
    const under = await createTask(user, { title: 'u', deal_context: { company: 'snake_case Ltd' } });
    await createTask(user, { title: 'x', deal_context: { company: 'snakeXcase Ltd' } });
    expect((await get(user, '/api/mobile/tasks/search?company=%25')).body.tasks).toEqual([pct]);
    expect((await get(user, '/api/mobile/tasks/search?company=e_c')).body.tasks).toEqual([under]);
    expect((await get(user, `/api/mobile/tasks/search?company=${encodeURIComponent('\\')}`)).body.tasks).toEqual([]);
  });

  it.each(['', '?company=', '?company=%20%20', '?other=x'])('without a company (%s): 422 with the Simple body', async (query) => {
    const user = await registerUser('search-bad');
    const res = await get(user, `/api/mobile/tasks/search${query}`);
    expect(res.status).toBe(422);
    expectSimple(res.body);
  });
});

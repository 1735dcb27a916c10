// Deals over HTTP (docs/api/mobile.md#deals): a deal is made by the first
// task that carries deal_context.company (case-insensitive, one per user and
// company); start_task and complete_task drive its current task.
import { describe, expect, it } from 'vitest';
import { api, db, expectErrorShape, registerUser, type TestUser } from '../helpers.ts';
import { UNKNOWN, UUID } from '../support/formats.ts';
import { createTask, get, post, type Task } from '../support/tasks.ts';

interface Deal {
  id: string;
  created_by: string;
  meta: { company: string; deal_value: number | null; current_task_id: string | null; next_action: string | null };
}

const deals = async (user: TestUser): Promise<Deal[]> => (await get(user, '/api/mobile/deals')).body.deals;

describe('deals', () => {
  it('the first task with deal_context.company creates the deal; later ones update deal_value', async () => {
    const user = await registerUser('deal');
    expect(await deals(user)).toEqual([]);
    await createTask(user, { title: 'no deal' });
    expect(await deals(user)).toEqual([]);

    const first = await createTask(user, { title: 'Intro call', deal_context: { company: 'Acme', deal_value: 1000 } });
    const list = await get(user, '/api/mobile/deals');
    expect(list.status).toBe(200);
    expect(list.body).toEqual({
      success: true,
      deals: [
        {
          id: expect.stringMatching(UUID),
          created_by: user.userId,
          meta: { company: 'Acme', deal_value: 1000, current_task_id: first.id, next_action: 'Intro call' },
        },
      ],
    });
    const dealId = list.body.deals[0].id;

    // Same company, other case: the same deal; the latest value wins; the
    // current task (still open) stays.
    await createTask(user, { title: 'Send proposal', deal_context: { company: 'ACME', deal_value: 1500.5 } });
    const one = await get(user, `/api/mobile/deals/${dealId}`);
    expect(one.status).toBe(200);
    expect(one.body).toEqual({
      success: true,
      deal: { id: dealId, created_by: user.userId, meta: { company: 'Acme', deal_value: 1500.5, current_task_id: first.id, next_action: 'Intro call' } },
    });

    // A patch carrying deal_context counts as given too.
    await api('PATCH', `/api/mobile/tasks/${first.id}`, { token: user.accessToken, body: { deal_context: { deal_value: 900 } } });
    expect((await get(user, `/api/mobile/deals/${dealId}`)).body.deal.meta.deal_value).toBe(900);

    // Another company: another deal, newest first.
    await createTask(user, { title: 'Globex', deal_context: { company: 'Globex' } });
    expect((await deals(user)).map((d) => [d.meta.company, d.meta.deal_value])).toEqual([
      ['Globex', null],
      ['Acme', 900],
    ]);
  });

  it('a patch that adds a company creates the deal', async () => {
    const user = await registerUser('deal-patch');
    const task = await createTask(user, { title: 'later' });
    await api('PATCH', `/api/mobile/tasks/${task.id}`, { token: user.accessToken, body: { deal_context: { company: 'Initech', deal_value: 3 } } });
    expect((await deals(user)).map((d) => d.meta)).toEqual([{ company: 'Initech', deal_value: 3, current_task_id: task.id, next_action: 'later' }]);
  });

  it('a new task becomes current when the current one is completed', async () => {
    const user = await registerUser('deal-current');
    const first = await createTask(user, { title: 'one', deal_context: { company: 'Acme' } });
    await post(user, `/api/mobile/tasks/${first.id}/complete`);
    const second = await createTask(user, { title: 'two', deal_context: { company: 'acme' } });
    expect((await deals(user))[0]!.meta).toMatchObject({ current_task_id: second.id, next_action: 'two' });
  });

  it('start_task starts the current task; again is 422', async () => {
    const user = await registerUser('deal-start');
    const task = await createTask(user, { title: 'Call', deal_context: { company: 'Acme', deal_value: 10 } });
    const [deal] = await deals(user);
    const res = await post(user, `/api/mobile/deals/${deal!.id}/start_task`);
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ success: true, deal: deal });
    expect((await get(user, `/api/mobile/tasks/${task.id}`)).body.task.meta.status).toBe('in_progress');

    const again = await post(user, `/api/mobile/deals/${deal!.id}/start_task`);
    expect(again.status).toBe(422);
    expect(again.body).toEqual({ error: 'task must be pending to start' });
  });

  it('complete_task with new_next_action completes, creates the next task, links it and makes it current', async () => {
    const user = await registerUser('deal-complete');
    const task = await createTask(user, { title: 'Call', deal_context: { company: 'Acme', deal_value: 10 } });
    const [deal] = await deals(user);
    const res = await post(user, `/api/mobile/deals/${deal!.id}/complete_task`, { new_next_action: 'Send contract' });
    expect(res.status).toBe(200);
    expect(res.body).toEqual({
      success: true,
      deal: {
        id: deal!.id,
        created_by: user.userId,
        meta: { company: 'Acme', deal_value: 10, current_task_id: expect.stringMatching(UUID), next_action: 'Send contract' },
      },
    });
    const nextId = res.body.deal.meta.current_task_id;
    expect(nextId).not.toBe(task.id);
    expect((await get(user, `/api/mobile/tasks/${task.id}`)).body.task.meta.status).toBe('completed');
    const next = (await get(user, `/api/mobile/tasks/${nextId}`)).body.task;
    expect(next.meta).toEqual({ title: 'Send contract', status: 'pending', deal_context: { company: 'Acme', deal_value: 10 } });
    expect((await get(user, `/api/mobile/tasks/${task.id}/next`)).body.next_task).toEqual(next);

    // The new current task can be started and completed through the deal.
    expect((await post(user, `/api/mobile/deals/${deal!.id}/start_task`)).status).toBe(200);
    const done = await post(user, `/api/mobile/deals/${deal!.id}/complete_task`);
    expect(done.status).toBe(200);
    expect(done.body.deal.meta).toEqual({ company: 'Acme', deal_value: 10, current_task_id: nextId, next_action: null });
    const chain = await get(user, `/api/mobile/tasks/${task.id}/chain`);
    expect(chain.body.chain.map((t: Task) => [t.meta.title, t.meta.status])).toEqual([
      ['Call', 'completed'],
      ['Send contract', 'completed'],
    ]);

    // Nothing left to complete: 422.
    const again = await post(user, `/api/mobile/deals/${deal!.id}/complete_task`, { new_next_action: 'x' });
    expect(again.status).toBe(422);
    expect(again.body).toEqual({ error: 'invalid status transition' });
  });

  it('complete_and_link on the deal\'s current task moves the deal to the new task; start_task and complete_task then work on it', async () => {
    const user = await registerUser('deal-link');
    const call = await createTask(user, { title: 'Call', deal_context: { company: 'Acme', deal_value: 10 } });
    // A later task of the company gives a newer value (and is not current: Call is open).
    const budget = await createTask(user, { title: 'Budget', deal_context: { company: 'ACME', deal_value: 25 } });
    const [deal] = await deals(user);
    expect(deal!.meta).toEqual({ company: 'Acme', deal_value: 25, current_task_id: call.id, next_action: 'Call' });
    expect((await post(user, `/api/mobile/deals/${deal!.id}/start_task`)).status).toBe(200);

    const linked = await post(user, `/api/mobile/tasks/${call.id}/complete_and_link`, { next_task: { title: 'Send proposal', description: 'the PDF' } });
    expect(linked.status).toBe(200);
    const next: Task = linked.body.next_task;
    // The next task carries the company, with the deal's present value (not the older one of Call).
    expect(next.meta).toEqual({ title: 'Send proposal', description: 'the PDF', status: 'pending', deal_context: { company: 'Acme', deal_value: 25 } });
    const moved = (await get(user, `/api/mobile/deals/${deal!.id}`)).body.deal;
    expect(moved.meta).toEqual({ company: 'Acme', deal_value: 25, current_task_id: next.id, next_action: 'Send proposal' });

    // The deal's own transitions now work on the new task.
    const started = await post(user, `/api/mobile/deals/${deal!.id}/start_task`);
    expect(started.status).toBe(200);
    expect((await get(user, `/api/mobile/tasks/${next.id}`)).body.task.meta.status).toBe('in_progress');
    const completed = await post(user, `/api/mobile/deals/${deal!.id}/complete_task`, { new_next_action: 'Sign' });
    expect(completed.status).toBe(200);
    expect(completed.body.deal.meta).toMatchObject({ company: 'Acme', deal_value: 25, next_action: 'Sign' });
    const signId = completed.body.deal.meta.current_task_id;
    expect((await get(user, `/api/mobile/tasks/${next.id}`)).body.task.meta.status).toBe('completed');
    const chain = await get(user, `/api/mobile/tasks/${call.id}/chain`);
    expect(chain.body.chain.map((t: Task) => [t.meta.title, t.meta.status])).toEqual([
      ['Call', 'completed'],
      ['Send proposal', 'completed'],
      ['Sign', 'pending'],
    ]);

    // Continuing a task of the company that is not the current one (the
    // current one is open): the next task carries the company, the deal stays.
    const side = await post(user, `/api/mobile/tasks/${budget.id}/complete_and_link`, { next_task: { title: 'Budget review' } });
    expect(side.status).toBe(200);
    expect(side.body.next_task.meta.deal_context).toEqual({ company: 'ACME', deal_value: 25 });
    expect((await get(user, `/api/mobile/deals/${deal!.id}`)).body.deal.meta).toEqual({
      company: 'Acme',
      deal_value: 25,
      current_task_id: signId,
      next_action: 'Sign',
    });
    expect(await deals(user)).toHaveLength(1);
  });

  it('complete_task with an invalid body is 422', async () => {
    const user = await registerUser('deal-bad');
    await createTask(user, { title: 'Call', deal_context: { company: 'Acme' } });
    const [deal] = await deals(user);
    for (const body of [{ new_next_action: 5 }, [], { new_next_action: 'x'.repeat(501) }]) {
      const res = await post(user, `/api/mobile/deals/${deal!.id}/complete_task`, body);
      expect(res.status).toBe(422);
      expect(Object.keys(res.body)).toEqual(['error']);
    }
  });

  it('a deal whose current task was deleted has none: start_task and complete_task are 422', async () => {
    const user = await registerUser('deal-nocurrent');
    const task = await createTask(user, { title: 'Call', deal_context: { company: 'Acme' } });
    const [deal] = await deals(user);
    expect((await api('DELETE', `/api/mobile/tasks/${task.id}`, { token: user.accessToken })).status).toBe(204);
    expect((await get(user, `/api/mobile/deals/${deal!.id}`)).body.deal.meta.current_task_id).toBeNull();
    for (const op of ['start_task', 'complete_task']) {
      const res = await post(user, `/api/mobile/deals/${deal!.id}/${op}`);
      expect(res.status).toBe(422);
      expect(Object.keys(res.body)).toEqual(['error']);
    }
  });

  it('unknown, foreign and non-uuid deals are 404 with the Error body', async () => {
    const alice = await registerUser('alice-deal');
    const bob = await registerUser('bob-deal');
    await createTask(alice, { title: 'Call', deal_context: { company: 'Acme' } });
    const [deal] = await deals(alice);
    expect(await deals(bob)).toEqual([]);
    for (const id of [deal!.id, UNKNOWN, 'nope']) {
      for (const [method, path] of [
        ['GET', `/api/mobile/deals/${id}`],
        ['POST', `/api/mobile/deals/${id}/start_task`],
        ['POST', `/api/mobile/deals/${id}/complete_task`],
      ] as const) {
        const res = await api(method, path, { token: bob.accessToken });
        expect(res.status, `${method} ${path}`).toBe(404);
        expectErrorShape(res.body);
        expect(res.body.error).toBe(id === 'nope' ? 'not_found' : 'deal_not_found');
      }
    }
    const [task] = await db()`select meta->>'status' as status from app.tasks where created_by = ${alice.userId}`;
    expect(task!.status).toBe('pending');
  });

  it('parallel first tasks of one company make exactly one deal', async () => {
    const user = await registerUser('deal-race');
    const results = await Promise.all(
      Array.from({ length: 10 }, (_, i) =>
        api('POST', '/api/mobile/tasks', { token: user.accessToken, body: { title: `t${i}`, deal_context: { company: i % 2 ? 'Acme' : 'ACME', deal_value: i } } }),
      ),
    );
    expect(results.map((r) => r.status)).toEqual(Array(10).fill(201));
    const list = await deals(user);
    expect(list).toHaveLength(1);
    const ids = results.map((r) => r.body.task.id);
    expect(ids).toContain(list[0]!.meta.current_task_id);
  });
});

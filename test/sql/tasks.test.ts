// SQL-level tests of the task rules, as a DBA would run them after changing
// one: the status guard holds for any update path, the transition functions'
// SQLSTATEs, cycle detection and its per-user lock (two transactions), chains
// over branching graphs without path explosion, row-level security on tasks,
// links and deals, and the deal trigger.
import { describe, expect, it } from 'vitest';
import { asUser, db } from '../helpers.ts';
import { newUser } from '../support/sql-fixtures.ts';

/** Tasks inserted as the table owner, returned in order. */
async function insertTasks(userId: string, titles: string[], status = 'pending'): Promise<string[]> {
  const rows = await db()`
    insert into app.tasks (created_by, meta)
    select ${userId}, jsonb_build_object('title', t.title, 'status', ${status}::text)
      from unnest(${titles}::text[]) with ordinality t(title, n)
    returning id, meta->>'title' as title`;
  const byTitle = new Map(rows.map((r) => [r.title as string, r.id as string]));
  return titles.map((t) => byTitle.get(t)!);
}

const insertLink = (userId: string, from: string, to: string) =>
  db()`insert into app.task_transitions (created_by, origin_id, destination_id) values (${userId}, ${from}, ${to})`;

describe('status guard trigger', () => {
  it('refuses every status change the status table does not allow, whoever updates', async () => {
    const user = (await newUser({ prefix: 'tasksql' })).id;
    const refused: [string, string][] = [
      ['in_progress', 'pending'],
      ['completed', 'pending'],
      ['completed', 'in_progress'],
    ];
    for (const [from, to] of refused) {
      const [id] = await insertTasks(user, [`${from}-${to}`], from);
      await expect(db()`update app.tasks set meta = meta || jsonb_build_object('status', ${to}::text) where id = ${id!}`).rejects.toMatchObject({
        code: 'PT422',
        hint: 'invalid_status_transition',
      });
    }
    const allowed: [string, string][] = [
      ['pending', 'in_progress'],
      ['pending', 'completed'],
      ['in_progress', 'completed'],
    ];
    for (const [from, to] of allowed) {
      const [id] = await insertTasks(user, [`${from}-${to}`], from);
      await db()`update app.tasks set meta = meta || jsonb_build_object('status', ${to}::text) where id = ${id!}`;
    }
  });

  it('a status outside the enum, or a meta that is not an object, is a check violation', async () => {
    const user = (await newUser({ prefix: 'tasksql' })).id;
    await expect(db()`insert into app.tasks (created_by, meta) values (${user}, '{"status": "done"}')`).rejects.toMatchObject({ code: '23514' });
    await expect(db()`insert into app.tasks (created_by, meta) values (${user}, '{}')`).rejects.toMatchObject({ code: '23514' });
    await expect(db()`insert into app.tasks (created_by, meta) values (${user}, '[]')`).rejects.toMatchObject({ code: '23514' });
  });
});

describe('transition functions', () => {
  it('start and complete raise PT404 for an unknown task and PT422 for a wrong state', async () => {
    const user = (await newUser({ prefix: 'tasksql' })).id;
    const [pending, completed] = [(await insertTasks(user, ['p']))[0]!, (await insertTasks(user, ['c'], 'completed'))[0]!];
    const unknown = '00000000-0000-4000-8000-000000000000';
    await expect(asUser(user, (tx) => tx`select * from api.task_start(${unknown})`)).rejects.toMatchObject({ code: 'PT404', hint: 'task_not_found' });
    await expect(asUser(user, (tx) => tx`select * from api.task_complete(${unknown})`)).rejects.toMatchObject({ code: 'PT404' });
    await expect(asUser(user, (tx) => tx`select * from api.task_start(${completed})`)).rejects.toMatchObject({
      code: 'PT422',
      message: 'task must be pending to start',
    });
    await expect(asUser(user, (tx) => tx`select * from api.task_complete(${completed})`)).rejects.toMatchObject({
      code: 'PT422',
      message: 'invalid status transition',
    });
    const [started] = await asUser(user, (tx) => tx`select meta from api.task_start(${pending})`);
    expect(started!.meta.status).toBe('in_progress');
  });

  it('complete_and_link is one transaction: a failure leaves no new task and no link', async () => {
    const user = (await newUser({ prefix: 'tasksql' })).id;
    const [done] = await insertTasks(user, ['done'], 'completed');
    await expect(asUser(user, (tx) => tx`select * from api.task_complete_and_link(${done!}, 'next')`)).rejects.toMatchObject({ code: 'PT422' });
    const [row] = await db()`select count(*)::int as tasks, (select count(*)::int from app.task_transitions where created_by = ${user}) as links
                              from app.tasks where created_by = ${user}`;
    expect(row).toEqual({ tasks: 1, links: 0 });
  });

  it('api.task_delete: PT403 for another user\'s task, PT404 for none', async () => {
    const alice = (await newUser({ prefix: 'tasksql' })).id;
    const bob = (await newUser({ prefix: 'tasksql' })).id;
    const [task] = await insertTasks(alice, ['alice']);
    await expect(asUser(bob, (tx) => tx`select api.task_delete(${task!})`)).rejects.toMatchObject({ code: 'PT403' });
    await expect(asUser(bob, (tx) => tx`select api.task_delete(${'00000000-0000-4000-8000-000000000000'})`)).rejects.toMatchObject({ code: 'PT404' });
    await asUser(alice, (tx) => tx`select api.task_delete(${task!})`);
    const [row] = await db()`select count(*)::int as n from app.tasks where id = ${task!}`;
    expect(row!.n).toBe(0);
  });
});

describe('cycle detection', () => {
  it('task_link_would_cycle: true exactly when the origin is reachable from the destination', async () => {
    const user = (await newUser({ prefix: 'tasksql' })).id;
    const t = await insertTasks(user, ['a', 'b', 'c', 'd', 'x']);
    const [a, b, c, d, x] = t as [string, string, string, string, string];
    await insertLink(user, a, b);
    await insertLink(user, b, c);
    await insertLink(user, a, d);
    const cycles = async (from: string, to: string) =>
      (await db()`select private.task_link_would_cycle(${from}, ${to}) as yes`)[0]!.yes as boolean;
    expect(await cycles(c, a)).toBe(true);
    expect(await cycles(b, a)).toBe(true);
    expect(await cycles(d, a)).toBe(true);
    expect(await cycles(a, a)).toBe(true);
    expect(await cycles(a, c)).toBe(false);
    expect(await cycles(d, b)).toBe(false);
    expect(await cycles(c, d)).toBe(false);
    expect(await cycles(x, a)).toBe(false);
  });

  it('api.task_link raises PT422 circular_dependency, and PT404 for an unknown destination', async () => {
    const user = (await newUser({ prefix: 'tasksql' })).id;
    const [a, b] = (await insertTasks(user, ['a', 'b'])) as [string, string];
    await asUser(user, (tx) => tx`select * from api.task_link(${a}, ${b})`);
    await expect(asUser(user, (tx) => tx`select * from api.task_link(${b}, ${a})`)).rejects.toMatchObject({
      code: 'PT422',
      hint: 'circular_dependency',
    });
    await expect(asUser(user, (tx) => tx`select * from api.task_link(${a}, ${a})`)).rejects.toMatchObject({ code: 'PT422' });
    await expect(asUser(user, (tx) => tx`select * from api.task_link(${a}, ${'00000000-0000-4000-8000-000000000000'})`)).rejects.toMatchObject({
      code: 'PT404',
      hint: 'destination_task_not_found',
    });
  });

  it('a link waits for a concurrent uncommitted link of the same user, then sees it and refuses the cycle', async () => {
    const user = (await newUser({ prefix: 'tasksql' })).id;
    const [a, b] = (await insertTasks(user, ['a', 'b'])) as [string, string];
    const claims = JSON.stringify({ role: 'authenticated', sub: user });
    let second: Promise<unknown> | undefined;
    let secondSettled = false;
    await db().begin(async (tx) => {
      await tx`select set_config('role', 'authenticated', true), set_config('request.jwt.claims', ${claims}, true)`;
      await tx`select * from api.task_link(${a}, ${b})`;
      // B → A in another transaction: it must block on the per-user lock.
      second = asUser(user, (tx2) => tx2`select * from api.task_link(${b}, ${a})`).finally(() => {
        secondSettled = true;
      });
      second.catch(() => {});
      await new Promise((resolve) => setTimeout(resolve, 300));
      expect(secondSettled).toBe(false);
    });
    await expect(second).rejects.toMatchObject({ code: 'PT422', hint: 'circular_dependency' });
    const links = await db()`select origin_id, destination_id from app.task_transitions where created_by = ${user}`;
    expect(links).toEqual([{ origin_id: a, destination_id: b }]);
  });

  it('the lock is per user: another user\'s links do not wait', async () => {
    const alice = (await newUser({ prefix: 'tasksql' })).id;
    const bob = (await newUser({ prefix: 'tasksql' })).id;
    const [a1, a2] = (await insertTasks(alice, ['a1', 'a2'])) as [string, string];
    const [b1, b2] = (await insertTasks(bob, ['b1', 'b2'])) as [string, string];
    const claims = JSON.stringify({ role: 'authenticated', sub: alice });
    await db().begin(async (tx) => {
      await tx`select set_config('role', 'authenticated', true), set_config('request.jwt.claims', ${claims}, true)`;
      await tx`select * from api.task_link(${a1}, ${a2})`;
      const started = Date.now();
      await asUser(bob, (tx2) => tx2`select * from api.task_link(${b1}, ${b2})`);
      expect(Date.now() - started).toBeLessThan(2000);
    });
  });
});

describe('chains', () => {
  it('a ladder of 40 diamonds (2^40 paths) is walked once per task, nearest first', async () => {
    const user = (await newUser({ prefix: 'tasksql' })).id;
    // a0 → b0, a0 → c0, b0 → a1, c0 → a1, ... a40
    const names: string[] = [];
    for (let i = 0; i <= 40; i++) names.push(`a${i}`, ...(i < 40 ? [`b${i}`, `c${i}`] : []));
    const ids = await insertTasks(user, names);
    const id = new Map(names.map((n, i) => [n, ids[i]!]));
    const edges: [string, string][] = [];
    for (let i = 0; i < 40; i++) edges.push([`a${i}`, `b${i}`], [`a${i}`, `c${i}`], [`b${i}`, `a${i + 1}`], [`c${i}`, `a${i + 1}`]);
    await db()`
      insert into app.task_transitions (created_by, origin_id, destination_id, inserted_at)
      select ${user}, e.o, e.d, now() + e.n * interval '1 ms'
        from unnest(${edges.map((e) => id.get(e[0])!)}::uuid[], ${edges.map((e) => id.get(e[1])!)}::uuid[]) with ordinality e(o, d, n)`;

    const started = Date.now();
    const chain = await asUser(user, (tx) => tx`select meta->>'title' as title from api.task_chain(${id.get('a0')!}, 'forward', 1000)`);
    expect(Date.now() - started).toBeLessThan(5000);
    expect(chain).toHaveLength(names.length);
    expect(new Set(chain.map((r) => r.title)).size).toBe(names.length);
    expect(chain.slice(0, 6).map((r) => r.title)).toEqual(['a0', 'b0', 'c0', 'a1', 'b1', 'c1']);

    const back = await asUser(user, (tx) => tx`select meta->>'title' as title from api.task_chain(${id.get('a40')!}, 'backward', 3)`);
    expect(back.map((r) => r.title)).toEqual(['a40', 'b39', 'c39', 'a39', 'b38', 'c38']);
  });

  it('api.task_chain rejects a bad direction or depth with PT422', async () => {
    const user = (await newUser({ prefix: 'tasksql' })).id;
    const [a] = await insertTasks(user, ['a']);
    await expect(asUser(user, (tx) => tx`select * from api.task_chain(${a!}, 'up', 5)`)).rejects.toMatchObject({ code: 'PT422' });
    await expect(asUser(user, (tx) => tx`select * from api.task_chain(${a!}, 'forward', 0)`)).rejects.toMatchObject({ code: 'PT422' });
  });
});

describe('row-level security', () => {
  it('a user reads only their own tasks, links and deals', async () => {
    const alice = (await newUser({ prefix: 'tasksql' })).id;
    const bob = (await newUser({ prefix: 'tasksql' })).id;
    const [a1, a2] = (await insertTasks(alice, ['a1', 'a2'])) as [string, string];
    await insertLink(alice, a1, a2);
    await db()`insert into app.tasks (created_by, meta) values (${alice}, '{"status":"pending","deal_context":{"company":"Acme"}}')`;
    const seen = await asUser(bob, async (tx) => ({
      tasks: (await tx`select count(*)::int as n from app.tasks where created_by = ${alice}`)[0]!.n,
      links: (await tx`select count(*)::int as n from app.task_transitions where created_by = ${alice}`)[0]!.n,
      deals: (await tx`select count(*)::int as n from app.deals where created_by = ${alice}`)[0]!.n,
    }));
    expect(seen).toEqual({ tasks: 0, links: 0, deals: 0 });
    const own = await asUser(alice, async (tx) => (await tx`select count(*)::int as n from app.tasks`)[0]!.n);
    expect(own).toBe(3);
  });

  it('a user cannot link to, change or delete another user\'s task, nor create a task for them', async () => {
    const alice = (await newUser({ prefix: 'tasksql' })).id;
    const bob = (await newUser({ prefix: 'tasksql' })).id;
    const [a1] = await insertTasks(alice, ['a1']);
    const [b1] = await insertTasks(bob, ['b1']);
    await expect(
      asUser(bob, (tx) => tx`insert into app.task_transitions (created_by, origin_id, destination_id) values (${bob}, ${b1!}, ${a1!})`),
    ).rejects.toMatchObject({ code: '42501' });
    await expect(asUser(bob, (tx) => tx`insert into app.tasks (created_by, meta) values (${alice}, '{"status":"pending"}')`)).rejects.toMatchObject({
      code: '42501',
    });
    const changed = await asUser(bob, (tx) => tx`update app.tasks set meta = meta || '{"title":"mine"}' where id = ${a1!}`);
    expect(changed.count).toBe(0);
    const deleted = await asUser(bob, (tx) => tx`delete from app.tasks where id = ${a1!}`);
    expect(deleted.count).toBe(0);
    await expect(asUser(bob, (tx) => tx`select * from api.task_link(${b1!}, ${a1!})`)).rejects.toMatchObject({ code: 'PT404' });
  });
});

describe('deal trigger', () => {
  it('makes one deal per user and company (case-insensitive), keeping the latest deal_value', async () => {
    const user = (await newUser({ prefix: 'tasksql' })).id;
    await db()`insert into app.tasks (created_by, meta) values (${user}, '{"status":"pending","title":"one","deal_context":{"company":"Acme","deal_value":5}}')`;
    await db()`insert into app.tasks (created_by, meta) values (${user}, '{"status":"pending","title":"two","deal_context":{"company":" ACME "}}')`;
    await db()`insert into app.tasks (created_by, meta) values (${user}, '{"status":"pending","title":"three","deal_context":{"company":"acme","deal_value":8}}')`;
    const deals = await db()`select company, deal_value::float8 as value, next_action from app.deals where created_by = ${user}`;
    expect(deals).toEqual([{ company: 'Acme', value: 8, next_action: 'one' }]);
  });
});

// The task rules that need two transactions at once (the rest are pgTAP:
// supabase/tests/tasks.test.sql): link creation is serialised per user by an
// advisory lock, so a link waits for a concurrent uncommitted link of the same
// user and then refuses the cycle it would close, and another user's links do
// not wait.
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

describe('the per-user link lock', () => {
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
      // Done while alice's transaction still holds her lock: had it waited for it, it would fail at its statement timeout.
      await asUser(bob, (tx2) => tx2`select * from api.task_link(${b1}, ${b2})`);
    });
  });
});

// SQL-level tests of the bounded work of issue 14, as a DBA would run them:
// the chain walk expands each task once (a ladder of several thousand links,
// 2^n paths, is walked in one pass), its depth is capped, and free-form
// values have size limits in the tables themselves.
import { describe, expect, it } from 'vitest';
import { asUser, db } from '../helpers.ts';
import { ladder, newUser } from '../support/sql-fixtures.ts';

describe('private.task_chain_walk / api.task_chain', () => {
  it('walks a ladder of 4000 tasks (7997 links) once per task, with breadth-first distances', async () => {
    const user = (await newUser({ prefix: 'boundsql' })).id;
    const ids = await ladder(user, 4000);
    const started = Date.now();
    const walk = await asUser(user, (tx) => tx`select id, steps from private.task_chain_walk(${ids[0]!}, true, 1000)`);
    console.log(`task_chain_walk over a 4000-task ladder at depth 1000: ${Date.now() - started} ms`);
    expect(walk).toHaveLength(2001);
    expect(new Set(walk.map((r) => r.id)).size).toBe(2001);
    const index = new Map(ids.map((id, i) => [id, i]));
    // Task i is ceil(i/2) links from task 0.
    for (const r of walk) expect(r.steps).toBe(Math.ceil(index.get(r.id as string)! / 2));

    const everything = await asUser(user, (tx) => tx`select count(*)::int as n from api.task_chain(${ids[3999]!}, 'backward', 1000)`);
    expect(everything[0]!.n).toBe(2001);
    const chain = await asUser(user, (tx) => tx`select meta->>'title' as title from api.task_chain(${ids[100]!}, 'forward', 2)`);
    expect(chain.map((r) => r.title)).toEqual(['t100', 't101', 't102', 't103', 't104']);
  });

  it('walks only from the caller\'s own task, along their own links', async () => {
    const owner = (await newUser({ prefix: 'boundsql' })).id;
    const other = (await newUser({ prefix: 'boundsql' })).id;
    const ids = await ladder(owner, 5);
    expect(await asUser(other, (tx) => tx`select id from private.task_chain_walk(${ids[0]!}, true, 10)`)).toEqual([]);
    // A link someone else made (only an operator could) is not followed.
    const [foreign] = await ladder(other, 1);
    await db()`insert into app.task_transitions (created_by, origin_id, destination_id) values (${other}, ${ids[4]!}, ${foreign!})`;
    const walk = await asUser(owner, (tx) => tx`select id from private.task_chain_walk(${ids[0]!}, true, 10)`);
    expect(walk.map((r) => r.id).sort()).toEqual([...ids].sort());
  });

  it('depth is 1..1000: PT422 outside', async () => {
    const user = (await newUser({ prefix: 'boundsql' })).id;
    const [a] = await ladder(user, 2);
    for (const depth of [0, 1001, 2147483647]) {
      await expect(asUser(user, (tx) => tx`select * from api.task_chain(${a!}, 'forward', ${depth})`)).rejects.toMatchObject({ code: 'PT422' });
    }
    expect((await db()`select private.task_chain_max_depth() as n`)[0]!.n).toBe(1000);
  });
});

describe('size limits in the tables', () => {
  it('task meta, link meta and connection tags are bounded whatever writes them', async () => {
    const user = (await newUser({ prefix: 'boundsql' })).id;
    const [a, b] = await ladder(user, 2);
    await expect(db()`update app.tasks set meta = meta || jsonb_build_object('x', repeat('x', 140000)) where id = ${a!}`).rejects.toMatchObject({ code: '23514' });
    await expect(
      db()`insert into app.task_transitions (created_by, origin_id, destination_id, meta) values (${user}, ${b!}, ${a!}, jsonb_build_object('x', repeat('x', 33000)))`,
    ).rejects.toMatchObject({ code: '23514' });
    const [node] = await db()`select node_id from app.profiles where id = ${user}`;
    const other = (await newUser({ prefix: 'boundsql' })).id;
    const [target] = await db()`select node_id from app.profiles where id = ${other}`;
    await expect(
      db()`insert into app.connections (owner_node_id, target_node_id, connection_type, tags)
           values (${node!.node_id}, ${target!.node_id}, 'async', array[repeat('x', 5001)])`,
    ).rejects.toMatchObject({ code: '23514' });
  });
});

// The community rules that need several connections at once (the rest are
// pgTAP: supabase/tests/communities.test.sql): member_count, kept by a trigger
// in each membership's transaction, under parallel joins and leaves.
import { describe, expect, it } from 'vitest';
import { db } from '../helpers.ts';
import { newUser } from '../support/sql-fixtures.ts';

describe('member_count trigger', () => {
  it('stays equal to the number of memberships under parallel joins and leaves', async () => {
    const [c] = await db()`select admin.create_community('Busy') as id`;
    const users = await Promise.all(Array.from({ length: 30 }, () => newUser({ prefix: 'admin', name: 'Ada Admin' })));
    const nodes = await db()`select node_id from app.profiles where id in ${db()(users.map((u) => u.id))}`;
    await Promise.all(nodes.map((n) => db()`insert into app.community_members (community_id, member_node_id) values (${c!.id}, ${n.node_id})`));
    await Promise.all(
      nodes.slice(0, 12).map((n) => db()`delete from app.community_members where community_id = ${c!.id} and member_node_id = ${n.node_id}`),
    );
    const [row] = await db()`
      select c.member_count, (select count(*)::int from app.community_members m where m.community_id = c.id) as actual
      from app.communities c where c.id = ${c!.id}`;
    expect(row).toEqual({ member_count: 18, actual: 18 });
  });
});

// SQL-level tests of the community rules: join/leave functions, the
// last-manager trigger, row-level security on memberships, search escaping
// and the pagination helper.
import crypto from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { asAnon, asUser, db } from '../helpers.ts';
import { newCommunity, newUser } from '../support/sql-fixtures.ts';

describe('api.community_join / api.community_leave', () => {
  it('join then leave keeps member_count in step; errors carry PT400/PT404', async () => {
    const user = await newUser({ prefix: 'commsql' });
    const id = await newCommunity();
    const joined = (await asUser(user.id, (tx) => tx`select api.community_join(${id}) as r`))[0]!.r;
    expect(joined).toMatchObject({ member_count: 1, role: 'member' });
    await expect(asUser(user.id, (tx) => tx`select api.community_join(${id})`)).rejects.toMatchObject({ code: 'PT400', hint: 'already_member' });
    expect((await asUser(user.id, (tx) => tx`select api.community_leave(${id}) as r`))[0]!.r).toEqual({ member_count: 0 });
    await expect(asUser(user.id, (tx) => tx`select api.community_leave(${id})`)).rejects.toMatchObject({ code: 'PT400', hint: 'not_a_member' });
    await expect(asUser(user.id, (tx) => tx`select api.community_join(${crypto.randomUUID()})`)).rejects.toMatchObject({ code: 'PT404' });
  });

  it('a user without a node cannot join (PT400 user_has_no_node)', async () => {
    const user = await newUser({ prefix: 'commsql' });
    const id = await newCommunity();
    await db()`update app.profiles set node_id = null where id = ${user.id}`;
    await expect(asUser(user.id, (tx) => tx`select api.community_join(${id})`)).rejects.toMatchObject({ code: 'PT400', hint: 'user_has_no_node' });
  });
});

describe('last manager trigger', () => {
  it('refuses to delete or demote the last manager by any path, but allows deleting the community', async () => {
    const manager = await newUser({ prefix: 'commsql' });
    const id = await newCommunity({ manager: manager });
    await expect(db()`delete from app.community_members where community_id = ${id}`).rejects.toMatchObject({ code: 'PT400', hint: 'last_manager' });
    await expect(db()`update app.community_members set role = 'member' where community_id = ${id}`).rejects.toMatchObject({ code: 'PT400' });
    await db()`delete from app.communities where id = ${id}`;
    const [row] = await db()`select count(*)::int as n from app.community_members where community_id = ${id}`;
    expect(row!.n).toBe(0);
  });
});

describe('row-level security on memberships', () => {
  it('a user cannot add or remove someone else, nor make themselves manager', async () => {
    const alice = await newUser({ prefix: 'commsql' });
    const bob = await newUser({ prefix: 'commsql' });
    const id = await newCommunity();
    await expect(
      asUser(alice.id, (tx) => tx`insert into app.community_members (community_id, member_node_id) values (${id}, ${bob.nodeId})`),
    ).rejects.toMatchObject({ code: '42501' });
    await expect(
      asUser(alice.id, (tx) => tx`insert into app.community_members (community_id, member_node_id, role) values (${id}, ${alice.nodeId}, 'manager')`),
    ).rejects.toMatchObject({ code: '42501' });
    await asUser(bob.id, (tx) => tx`select api.community_join(${id})`);
    const deleted = await asUser(alice.id, (tx) => tx`delete from app.community_members where community_id = ${id} returning 1`);
    expect(deleted).toHaveLength(0);
  });

  it('other users\' profiles stay private; only their display name is exposed', async () => {
    const alice = await newUser({ prefix: 'commsql' });
    const bob = await newUser({ prefix: 'commsql' });
    const rows = await asUser(alice.id, (tx) => tx`select id from app.profiles where id = ${bob.id}`);
    expect(rows).toHaveLength(0);
    // Bob's name was derived from his e-mail: private to him (and managers of his communities).
    const [hidden] = await asUser(alice.id, (tx) => tx`select app.node_display_name(${bob.nodeId}) as name`);
    expect(hidden!.name).toBeNull();
    const [own] = await asUser(bob.id, (tx) => tx`select app.node_display_name(${bob.nodeId}) as name`);
    expect(own!.name).toBe(bob.email.split('@')[0]);
    await asUser(bob.id, (tx) => tx`select api.profile_update('Bob B.')`);
    const [chosen] = await asUser(alice.id, (tx) => tx`select app.node_display_name(${bob.nodeId}) as name`);
    expect(chosen!.name).toBe('Bob B.');
  });

  it('app.node_display_names: the same rule for a set of nodes, leaving out the names the caller may not see', async () => {
    const [alice, bob, carol] = [await newUser({ prefix: 'commsql' }), await newUser({ prefix: 'commsql' }), await newUser({ prefix: 'commsql' })];
    await asUser(carol.id, (tx) => tx`select api.profile_update('Carol C.')`);
    const rows = await asUser(alice.id, (tx) => tx`
      select node_id, name from app.node_display_names(${[alice.nodeId, bob.nodeId, carol.nodeId]}::uuid[])`);
    expect(new Map(rows.map((r) => [r.node_id, r.name]))).toEqual(
      new Map([
        [alice.nodeId, alice.email.split('@')[0]],
        [carol.nodeId, 'Carol C.'],
      ]),
    );
    for (const user of [alice, bob, carol]) {
      const [one] = await asUser(alice.id, (tx) => tx`select app.node_display_name(${user.nodeId}) as name`);
      expect(one!.name).toBe(rows.find((r) => r.node_id === user.nodeId)?.name ?? null);
    }
  });

  it('a manager sees the names of the members of the communities they manage, and only of those', async () => {
    const [manager, member, elsewhere] = [await newUser({ prefix: 'commsql' }), await newUser({ prefix: 'commsql' }), await newUser({ prefix: 'commsql' })];
    const managed = await newCommunity({ manager: manager });
    const other = await newCommunity();
    await asUser(member.id, (tx) => tx`select api.community_join(${managed})`);
    await asUser(elsewhere.id, (tx) => tx`select api.community_join(${other})`);
    await asUser(manager.id, (tx) => tx`select api.community_join(${other})`);
    const rows = await asUser(manager.id, (tx) => tx`
      select node_id, name from app.node_display_names(${[manager.nodeId, member.nodeId, elsewhere.nodeId]}::uuid[])`);
    expect(new Map(rows.map((r) => [r.node_id, r.name]))).toEqual(
      new Map([
        [manager.nodeId, manager.email.split('@')[0]],
        [member.nodeId, member.email.split('@')[0]],
      ]),
    );
  });

  it('api.community_members: managers first, then by joining time; the total is member_count; pages follow on', async () => {
    const manager = await newUser({ prefix: 'commsql' });
    const id = await newCommunity({ manager: manager });
    const members = [];
    for (let i = 0; i < 4; i++) {
      const user = await newUser({ prefix: 'commsql' });
      await asUser(user.id, (tx) => tx`select api.community_join(${id})`);
      // distinct joining times, oldest first
      await db()`update app.community_members set joined_at = now() - ${`${10 - i} minutes`}::interval
                  where community_id = ${id} and member_node_id = ${user.nodeId}`;
      members.push(user);
    }
    const page = async (limit: number, offset: number) =>
      (await asUser(manager.id, (tx) => tx`select api.community_members(${id}, ${limit}, ${offset}) as r`))[0]!.r as {
        data: { id: string; role: string; name: string | null }[];
        pagination: Record<string, number>;
      };
    const first = await page(3, 0);
    expect(first.data.map((m) => [m.id, m.role])).toEqual([
      [manager.nodeId, 'manager'],
      [members[0]!.nodeId, 'member'],
      [members[1]!.nodeId, 'member'],
    ]);
    // the manager of the community sees every member's name (derived from their e-mail here)
    expect(first.data.map((m) => m.name)).toEqual([manager, members[0]!, members[1]!].map((u) => u.email.split('@')[0]));
    expect(first.pagination).toEqual({ total_count: 5, page: 1, page_size: 3, total_pages: 2 });
    const second = await page(3, 3);
    expect(second.data.map((m) => m.id)).toEqual([members[2]!.nodeId, members[3]!.nodeId]);
    expect((await page(3, 6)).data).toEqual([]);
    const [{ n }] = (await db()`select member_count as n from app.communities where id = ${id}`) as unknown as [{ n: number }];
    expect(n).toBe(5);
    // a member sees no e-mail-derived name but their own
    const asMember = (await asUser(members[1]!.id, (tx) => tx`select api.community_members(${id}, 5, 0) as r`))[0]!.r as {
      data: { id: string; name: string | null }[];
    };
    expect(asMember.data.map((m) => m.name)).toEqual([null, null, members[1]!.email.split('@')[0], null, null]);
    await expect(asUser(manager.id, (tx) => tx`select api.community_members(${crypto.randomUUID()}, 5, 0)`)).rejects.toMatchObject({
      code: 'PT404',
    });
  });

  it('anonymous callers read the public community record but no memberships', async () => {
    const manager = await newUser({ prefix: 'commsql' });
    const id = await newCommunity({ manager: manager });
    const [pub] = await asAnon((tx) => tx`select api.community_public(${id}) as r`);
    expect(Object.keys(pub!.r).sort()).toEqual(['created_at', 'description', 'id', 'member_count', 'name', 'tags', 'updated_at']);
    await expect(asAnon((tx) => tx`select * from app.community_members`)).rejects.toMatchObject({ code: '42501' });
  });
});

describe('search and pagination helpers', () => {
  it('app.contains_pattern matches literally', async () => {
    const [row] = await db()`
      select '50% off' like app.contains_pattern('0%') as a, '50 off' like app.contains_pattern('0%') as b,
             'a_b' like app.contains_pattern('_') as c, 'ab' like app.contains_pattern('_') as d,
             'a\\b' like app.contains_pattern('\\') as e`;
    expect(row).toEqual({ a: true, b: false, c: true, d: false, e: true });
  });

  it('app.pagination follows docs/api.md#pagination', async () => {
    const [row] = await db()`select app.pagination(7, 3, 0) as a, app.pagination(7, 3, 6) as b, app.pagination(0, 50, 0) as c, app.pagination(7, 3, 4) as d`;
    expect(row).toEqual({
      a: { total_count: 7, page: 1, page_size: 3, total_pages: 3 },
      b: { total_count: 7, page: 3, page_size: 3, total_pages: 3 },
      c: { total_count: 0, page: 1, page_size: 50, total_pages: 0 },
      d: { total_count: 7, page: 2, page_size: 3, total_pages: 3 },
    });
  });

  it('search_text follows name, description and tag changes; the trigram index serves the search', async () => {
    const id = await newCommunity({ name: 'Original' });
    await db()`update app.communities set description = 'Now with Kayaks', tags = array['paddle'] where id = ${id}`;
    const [row] = await db()`select search_text from app.communities where id = ${id}`;
    expect(row!.search_text).toBe(['original', 'now with kayaks', 'paddle'].join(String.fromCharCode(31)));
    const plan = await db().begin(async (tx) => {
      await tx`set local enable_seqscan = off`;
      return tx`explain select id from app.communities where search_text like ${'%kayak%'}`;
    });
    expect(plan.map((r) => r['QUERY PLAN']).join('\n')).toContain('communities_search_trgm');
  });

  it('paging limits are enforced in SQL too', async () => {
    const user = await newUser({ prefix: 'commsql' });
    await expect(asUser(user.id, (tx) => tx`select api.communities_mine(0, 0)`)).rejects.toMatchObject({ code: 'PT400' });
    await expect(asUser(user.id, (tx) => tx`select api.communities_search('x', 10, -1)`)).rejects.toMatchObject({ code: 'PT400' });
  });
});

// SQL-level tests of the operator functions (schema admin) and of the
// member_count trigger they rely on.
import { describe, expect, it } from 'vitest';
import { db } from '../helpers.ts';
import { newUser } from '../support/sql-fixtures.ts';

describe('admin functions', () => {
  it('create_user makes the same user, profile and node that register makes', async () => {
    const user = await newUser({ prefix: 'admin', name: 'Ada Admin' });
    const [row] = await db()`select p.name, n.kind from app.profiles p join app.nodes n on n.id = p.node_id where p.id = ${user.id}`;
    expect(row).toEqual({ name: 'Ada Admin', kind: 'user' });
  });

  it('create_community with a manager: node, membership as manager, member_count 1', async () => {
    const user = await newUser({ prefix: 'admin', name: 'Ada Admin' });
    const [c] = await db()`select admin.create_community('Runners', 'We run', array['sport','outdoor'], ${user.email}) as id`;
    const [row] = await db()`
      select c.name, c.description, c.tags, c.member_count, n.kind, m.role
      from app.communities c join app.nodes n on n.id = c.node_id
      join app.community_members m on m.community_id = c.id
      join app.profiles p on p.node_id = m.member_node_id
      where c.id = ${c!.id} and p.id = ${user.id}`;
    expect(row).toEqual({ name: 'Runners', description: 'We run', tags: ['sport', 'outdoor'], member_count: 1, kind: 'community', role: 'manager' });
  });

  it('create_community without a manager, and with an unknown manager (P0002, nothing created)', async () => {
    const [c] = await db()`select admin.create_community('Solo') as id`;
    const [row] = await db()`select member_count, tags, is_sandbox, is_draft from app.communities where id = ${c!.id}`;
    expect(row).toEqual({ member_count: 0, tags: [], is_sandbox: false, is_draft: false });
    const name = `ghost-${Date.now()}`;
    await expect(db()`select admin.create_community(${name}, null, '{}', 'nobody@example.com')`).rejects.toMatchObject({ code: 'P0002' });
    const [{ n }] = (await db()`select count(*)::int as n from app.communities where name = ${name}`) as unknown as [{ n: number }];
    expect(n).toBe(0);
  });

  it('add_manager joins a non-member as manager, or promotes a member', async () => {
    const owner = await newUser({ prefix: 'admin', name: 'Ada Admin' });
    const other = await newUser({ prefix: 'admin', name: 'Ada Admin' });
    const [c] = await db()`select admin.create_community('Chess', null, '{}', ${owner.email}) as id`;
    await db()`select admin.add_manager(${c!.id}, ${other.email})`;
    await db()`select admin.add_manager(${c!.id}, ${other.email})`; // idempotent
    const [row] = await db()`select member_count from app.communities where id = ${c!.id}`;
    expect(row!.member_count).toBe(2);
    const roles = await db()`select role from app.community_members where community_id = ${c!.id}`;
    expect(roles.map((r) => r.role)).toEqual(['manager', 'manager']);
    await expect(db()`select admin.add_manager(${crypto.randomUUID()}, ${other.email})`).rejects.toMatchObject({ code: 'P0002' });
  });

  it('set_subscription changes max_hats; unknown plan PT400, unknown user P0002', async () => {
    const user = await newUser({ prefix: 'admin', name: 'Ada Admin' });
    await db()`select admin.set_subscription(${user.email}, 'premium')`;
    const [row] = await db()`select s.max_hats, s.is_premium from app.profiles p join app.subscription_plans s on s.id = p.subscription_type where p.id = ${user.id}`;
    expect(row).toEqual({ max_hats: 10, is_premium: true });
    await expect(db()`select admin.set_subscription(${user.email}, 'gold')`).rejects.toMatchObject({ code: 'PT400' });
    await expect(db()`select admin.set_subscription('nobody@example.com', 'basic')`).rejects.toMatchObject({ code: 'P0002' });
  });

  it('set_community_flags sets sandbox and draft (null leaves a flag)', async () => {
    const [c] = await db()`select admin.create_community('Flags') as id`;
    await db()`select admin.set_community_flags(${c!.id}, true, null)`;
    expect((await db()`select is_sandbox, is_draft from app.communities where id = ${c!.id}`)[0]).toEqual({ is_sandbox: true, is_draft: false });
    await db()`select admin.set_community_flags(${c!.id}, false, true)`;
    expect((await db()`select is_sandbox, is_draft from app.communities where id = ${c!.id}`)[0]).toEqual({ is_sandbox: false, is_draft: true });
    await expect(db()`select admin.set_community_flags(${crypto.randomUUID()}, true, true)`).rejects.toMatchObject({ code: 'P0002' });
  });

  it('create_venue and create_event: nodes, shortlink, location from the venue', async () => {
    const [c] = await db()`select admin.create_community('Events') as id`;
    const [v] = await db()`select admin.create_venue('The Hall', '1 Main St', 52.5, 13.4) as id`;
    const [e] = await db()`select admin.create_event(${c!.id}, 'Meetup', '2030-01-01T18:00:00Z', '2030-01-01T20:00:00Z', ${v!.id}, 'Talks') as id`;
    const [row] = await db()`
      select e.title, e.shortlink, e.location, e.venue_node_id, n.kind, vn.kind as venue_kind
      from app.events e join app.nodes n on n.id = e.node_id join app.nodes vn on vn.id = e.venue_node_id
      where e.id = ${e!.id}`;
    expect(row).toMatchObject({ title: 'Meetup', location: 'The Hall', venue_node_id: v!.id, kind: 'event', venue_kind: 'venue' });
    expect(row!.shortlink).toMatch(/^[A-Za-z0-9]{8}$/);
    await expect(db()`select admin.create_event(${crypto.randomUUID()}, 'x', now())`).rejects.toMatchObject({ code: 'P0002' });
    await expect(db()`select admin.create_event(${c!.id}, 'x', now(), null, ${crypto.randomUUID()})`).rejects.toMatchObject({ code: 'P0002' });
    await expect(db()`select admin.create_event(${c!.id}, 'x', '2030-01-02T00:00:00Z', '2030-01-01T00:00:00Z')`).rejects.toMatchObject({ code: 'PT400' });
  });

  it('shortlinks are unique across many events', async () => {
    const [c] = await db()`select admin.create_community('Many events') as id`;
    await db()`select admin.create_event(${c!.id}, 'e' || i, now()) from generate_series(1, 300) i`;
    const [row] = await db()`select count(*)::int as n, count(distinct shortlink)::int as d from app.events where community_id = ${c!.id}`;
    expect(row).toEqual({ n: 300, d: 300 });
  });
});

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

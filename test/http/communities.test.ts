// Communities over HTTP: every status of docs/api/mobile.md#communities for the seven
// endpoints, pagination edges, search with LIKE wildcards and quotes, and
// races (50 users joining and leaving at once; two managers leaving at once).
import crypto from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { api, db, expectErrorShape, registerUser, type TestUser } from '../helpers.ts';
import { ISO } from '../support/formats.ts';
import { newCommunity, nodeOf } from '../support/sql-fixtures.ts';

const token = () => crypto.randomBytes(4).toString('hex');

const join = (user: TestUser, id: string) => api('POST', `/api/mobile/communities/${id}/join`, { token: user.accessToken });
const leave = (user: TestUser, id: string) => api('POST', `/api/mobile/communities/${id}/leave`, { token: user.accessToken });

function expectFlagged(res: { status: number; body: unknown }, status: number) {
  expect(res.status).toBe(status);
  expect(res.body).toEqual({ success: false, error: expect.any(String) });
}

describe('join and leave', () => {
  it('join: 200 with member_count, role member and joined_at; leave: 200 with member_count', async () => {
    const manager = await registerUser('mgr');
    const user = await registerUser('joiner');
    const id = await newCommunity({ name: `Join ${token()}`, manager });
    const joined = await join(user, id);
    expect(joined.status).toBe(200);
    expect(joined.body).toEqual({ success: true, data: { member_count: 2, role: 'member', joined_at: expect.stringMatching(ISO) } });
    const left = await leave(user, id);
    expect(left.status).toBe(200);
    expect(left.body).toEqual({ success: true, data: { member_count: 1 } });
  });

  it('join when already a member, leave when not a member: 400 flagged', async () => {
    const user = await registerUser();
    const id = await newCommunity({ name: `Twice ${token()}` });
    expect((await join(user, id)).status).toBe(200);
    expectFlagged(await join(user, id), 400);
    expect((await leave(user, id)).status).toBe(200);
    expectFlagged(await leave(user, id), 400);
  });

  it('the last manager cannot leave (400); with a second manager, one may', async () => {
    const a = await registerUser('mgr-a');
    const b = await registerUser('mgr-b');
    const id = await newCommunity({ name: `Managers ${token()}`, manager: a });
    expectFlagged(await leave(a, id), 400);
    await db()`select admin.add_manager(${id}, ${b.email})`;
    expect((await leave(a, id)).status).toBe(200);
    expectFlagged(await leave(b, id), 400);
  });

  it('a user without a node gets 400 on join and leave', async () => {
    const user = await registerUser('nonode');
    const id = await newCommunity({ name: `No node ${token()}` });
    await db()`update app.profiles set node_id = null where id = ${user.userId}`;
    expectFlagged(await join(user, id), 400);
    expectFlagged(await leave(user, id), 400);
  });

  it('unknown community 404, malformed id 400, no credential 401', async () => {
    const user = await registerUser();
    const unknown = crypto.randomUUID();
    expectFlagged(await join(user, unknown), 404);
    expectFlagged(await leave(user, unknown), 404);
    expectFlagged(await join(user, 'not-a-uuid'), 400);
    expectFlagged(await leave(user, 'not-a-uuid'), 400);
    const noAuth = await api('POST', `/api/mobile/communities/${unknown}/join`);
    expect(noAuth.status).toBe(401);
    expectErrorShape(noAuth.body);
  });
});

describe('GET /api/mobile/communities/{id}', () => {
  it('returns CommunityDetail with managers and the caller\'s membership', async () => {
    const manager = await registerUser('detail-mgr');
    const member = await registerUser('detail-member');
    const stranger = await registerUser('detail-stranger');
    const id = await newCommunity({ name: `Detail ${token()}`, description: 'About', tags: ['x', 'y'], manager });
    await join(member, id);

    const asMember = await api('GET', `/api/mobile/communities/${id}`, { token: member.accessToken });
    expect(asMember.status).toBe(200);
    expect(asMember.body).toEqual({
      success: true,
      data: {
        id,
        name: expect.stringMatching(/^Detail /),
        description: 'About',
        tags: ['x', 'y'],
        member_count: 2,
        // The manager's name was derived from their e-mail: private (issue 14).
        managers: [{ id: await nodeOf(manager.userId), name: null }],
        is_member: true,
        is_manager: false,
        joined_at: expect.stringMatching(ISO),
        user_role: 'member',
        created_at: expect.stringMatching(ISO),
        updated_at: expect.stringMatching(ISO),
        image_url: null,
      },
    });
    const asManager = await api('GET', `/api/mobile/communities/${id}`, { token: manager.accessToken });
    expect(asManager.body.data).toMatchObject({ is_member: true, is_manager: true, user_role: 'manager' });
    const asStranger = await api('GET', `/api/mobile/communities/${id}`, { token: stranger.accessToken });
    expect(asStranger.body.data).toMatchObject({ is_member: false, is_manager: false, joined_at: null, user_role: null });
  });

  it('404 unknown, 400 malformed id, 401 without credential', async () => {
    const user = await registerUser();
    expectFlagged(await api('GET', `/api/mobile/communities/${crypto.randomUUID()}`, { token: user.accessToken }), 404);
    expectFlagged(await api('GET', '/api/mobile/communities/123', { token: user.accessToken }), 400);
    expect((await api('GET', `/api/mobile/communities/${crypto.randomUUID()}`)).status).toBe(401);
  });
});

describe('GET /api/mobile/communities/{id}/members', () => {
  it('lists members (node id, role, joined_at, name), managers first, paginated', async () => {
    const manager = await registerUser('roster-mgr');
    const members = [await registerUser('roster-1'), await registerUser('roster-2'), await registerUser('roster-3')];
    const id = await newCommunity({ name: `Roster ${token()}`, manager });
    for (const m of members) await join(m, id);
    const page1 = await api('GET', `/api/mobile/communities/${id}/members?limit=2`, { token: members[0]!.accessToken });
    expect(page1.status).toBe(200);
    expect(page1.body.pagination).toEqual({ total_count: 4, page: 1, page_size: 2, total_pages: 2 });
    expect(page1.body.data[0]).toEqual({ id: await nodeOf(manager.userId), role: 'manager', joined_at: expect.stringMatching(ISO), name: null });
    const page2 = await api('GET', `/api/mobile/communities/${id}/members?limit=2&offset=2`, { token: members[0]!.accessToken });
    const all = [...page1.body.data, ...page2.body.data].map((m: { id: string }) => m.id);
    expect(new Set(all).size).toBe(4);
    expect(all.slice(1)).toEqual(await Promise.all(members.map((m) => nodeOf(m.userId))));
    for (const m of [...page1.body.data, ...page2.body.data]) expect(JSON.stringify(m)).not.toContain('@');
  });

  it('404 unknown community, 400 malformed id or paging', async () => {
    const user = await registerUser();
    expectFlagged(await api('GET', `/api/mobile/communities/${crypto.randomUUID()}/members`, { token: user.accessToken }), 404);
    expectFlagged(await api('GET', '/api/mobile/communities/x/members', { token: user.accessToken }), 400);
    const id = await newCommunity({ name: `Paging ${token()}` });
    expectFlagged(await api('GET', `/api/mobile/communities/${id}/members?limit=0`, { token: user.accessToken }), 400);
  });
});

describe('GET /api/mobile/communities (my communities)', () => {
  it('lists the caller\'s communities with joined_at and role, newest membership first', async () => {
    const user = await registerUser('mine');
    const managed = await newCommunity({ name: `Mine managed ${token()}`, manager: user });
    const joined = await newCommunity({ name: `Mine joined ${token()}` });
    await newCommunity({ name: `Not mine ${token()}` });
    await join(user, joined);
    const res = await api('GET', '/api/mobile/communities', { token: user.accessToken });
    expect(res.status).toBe(200);
    expect(res.body.pagination).toEqual({ total_count: 2, page: 1, page_size: 50, total_pages: 1 });
    expect(res.body.data.map((c: { id: string }) => c.id)).toEqual([joined, managed]);
    expect(res.body.data[0]).toEqual({
      id: joined,
      name: expect.any(String),
      description: null,
      tags: [],
      member_count: 1,
      created_at: expect.stringMatching(ISO),
      updated_at: expect.stringMatching(ISO),
      image_url: null,
      joined_at: expect.stringMatching(ISO),
      role: 'member',
    });
    expect(res.body.data[1]).toMatchObject({ role: 'manager' });
  });

  it('a user without a node simply has none', async () => {
    const user = await registerUser('mine-nonode');
    await db()`update app.profiles set node_id = null where id = ${user.userId}`;
    const res = await api('GET', '/api/mobile/communities', { token: user.accessToken });
    expect(res.body).toEqual({ success: true, data: [], pagination: { total_count: 0, page: 1, page_size: 50, total_pages: 0 } });
  });

  it('pagination: pages never repeat or skip, the last page is short, past the end is empty', async () => {
    const user = await registerUser('pages');
    const ids: string[] = [];
    for (let i = 0; i < 7; i++) {
      const id = await newCommunity({ name: `Page ${i} ${token()}` });
      await join(user, id);
      ids.push(id);
    }
    const seen: string[] = [];
    for (let offset = 0; offset < 7; offset += 3) {
      const res = await api('GET', `/api/mobile/communities?limit=3&offset=${offset}`, { token: user.accessToken });
      expect(res.body.pagination).toEqual({ total_count: 7, page: offset / 3 + 1, page_size: 3, total_pages: 3 });
      seen.push(...res.body.data.map((c: { id: string }) => c.id));
    }
    expect(seen).toEqual([...ids].reverse());
    const past = await api('GET', '/api/mobile/communities?limit=3&offset=30', { token: user.accessToken });
    expect(past.body).toEqual({ success: true, data: [], pagination: { total_count: 7, page: 11, page_size: 3, total_pages: 3 } });
  });

  it.each(['limit=0', 'limit=101', 'limit=-1', 'limit=abc', 'limit=1.5', 'offset=-1', 'offset=x', 'limit=1&limit=2'])(
    'invalid paging %s is 400 flagged',
    async (qs) => {
      const user = await registerUser();
      expectFlagged(await api('GET', `/api/mobile/communities?${qs}`, { token: user.accessToken }), 400);
    },
  );

  it('401 without credential (Error body)', async () => {
    const res = await api('GET', '/api/mobile/communities');
    expect(res.status).toBe(401);
    expectErrorShape(res.body);
  });
});

describe('GET /api/mobile/communities/search', () => {
  it('matches name, description and tags, case-insensitively, with is_member and is_manager', async () => {
    const t = token();
    const user = await registerUser('searcher');
    const byName = await newCommunity({ name: `Alpha ${t} Club`, manager: user });
    const byDescription = await newCommunity({ name: `Beta club`, description: `all about ${t.toUpperCase()}` });
    const byTag = await newCommunity({ name: `Gamma club`, tags: ['other', `TAG${t}`] });
    await newCommunity({ name: `Delta club`, description: 'nothing to see' });
    const res = await api('GET', `/api/mobile/communities/search?q=${t.toUpperCase()}`, { token: user.accessToken });
    expect(res.status).toBe(200);
    expect(res.body.pagination.total_count).toBe(3);
    const byId = new Map(res.body.data.map((c: { id: string }) => [c.id, c]));
    expect([...byId.keys()].sort()).toEqual([byName, byDescription, byTag].sort());
    expect(byId.get(byName)).toMatchObject({ is_member: true, is_manager: true });
    expect(byId.get(byTag)).toMatchObject({ is_member: false, is_manager: false, tags: ['other', `TAG${t}`] });
  });

  it('treats %, _ and quotes literally', async () => {
    const t = token();
    const user = await registerUser();
    const percent = await newCommunity({ name: `${t}% off` });
    await newCommunity({ name: `${t}AB off` });
    const underscore = await newCommunity({ name: `${t}_x` });
    await newCommunity({ name: `${t}Zx` });
    const quote = await newCommunity({ name: `${t}O'Reilly "club"` });
    const search = async (q: string) =>
      (await api('GET', `/api/mobile/communities/search?q=${encodeURIComponent(q)}`, { token: user.accessToken })).body.data.map(
        (c: { id: string }) => c.id,
      );
    expect(await search(`${t}%`)).toEqual([percent]);
    expect(await search(`${t}_`)).toEqual([underscore]);
    expect(await search(`${t}O'Reilly "club"`)).toEqual([quote]);
    expect(await search(`${t}\\`)).toEqual([]);
  });

  it('400 flagged without q or with an empty q; 401 without credential', async () => {
    const user = await registerUser();
    expectFlagged(await api('GET', '/api/mobile/communities/search', { token: user.accessToken }), 400);
    expectFlagged(await api('GET', '/api/mobile/communities/search?q=', { token: user.accessToken }), 400);
    expectFlagged(await api('GET', '/api/mobile/communities/search?q=a&limit=500', { token: user.accessToken }), 400);
    expect((await api('GET', '/api/mobile/communities/search?q=a')).status).toBe(401);
  });
});

describe('GET /api/community/{community_id} (public)', () => {
  it('answers without a credential with public fields only', async () => {
    const manager = await registerUser('public-mgr');
    const id = await newCommunity({ name: `Public ${token()}`, description: 'Open to all', tags: ['a'], manager });
    const res = await api('GET', `/api/community/${id}`);
    expect(res.status).toBe(200);
    expect(res.body).toEqual({
      success: true,
      data: {
        id,
        name: expect.stringMatching(/^Public /),
        description: 'Open to all',
        tags: ['a'],
        member_count: 1,
        created_at: expect.stringMatching(ISO),
        updated_at: expect.stringMatching(ISO),
        image_url: null,
      },
    });
    expect(res.text).not.toContain(manager.email);
    expect(res.text).not.toContain(await nodeOf(manager.userId));
  });

  it('404 unknown, 400 malformed id', async () => {
    expectFlagged(await api('GET', `/api/community/${crypto.randomUUID()}`), 404);
    expectFlagged(await api('GET', '/api/community/nope'), 400);
  });
});

describe('races', () => {
  it('50 users joining and leaving in parallel leave member_count equal to the memberships', async () => {
    const id = await newCommunity({ name: `Race ${token()}` });
    const users = await Promise.all(Array.from({ length: 50 }, (_, i) => registerUser(`race${i}`)));
    const firstHalf = users.slice(0, 25);
    for (const u of firstHalf) await join(u, id);
    // At once: the first half leaves while the second half joins.
    const results = await Promise.all([...firstHalf.map((u) => leave(u, id)), ...users.slice(25).map((u) => join(u, id))]);
    expect(results.every((r) => r.status === 200)).toBe(true);
    const [row] = await db()`
      select c.member_count, (select count(*)::int from app.community_members m where m.community_id = c.id) as actual
      from app.communities c where c.id = ${id}`;
    expect(row).toEqual({ member_count: 25, actual: 25 });
  });

  it('the same user joining twice at once: one 200, one 400', async () => {
    const id = await newCommunity({ name: `Double ${token()}` });
    const user = await registerUser();
    const results = await Promise.all([join(user, id), join(user, id), join(user, id)]);
    expect(results.map((r) => r.status).sort()).toEqual([200, 400, 400]);
    const [row] = await db()`select member_count from app.communities where id = ${id}`;
    expect(row!.member_count).toBe(1);
  });

  it('two managers leaving at once: exactly one succeeds, a manager remains', async () => {
    for (let round = 0; round < 5; round++) {
      const a = await registerUser('duo-a');
      const b = await registerUser('duo-b');
      const id = await newCommunity({ name: `Duo ${token()}`, manager: a });
      await db()`select admin.add_manager(${id}, ${b.email})`;
      const results = await Promise.all([leave(a, id), leave(b, id)]);
      expect(results.map((r) => r.status).sort()).toEqual([200, 400]);
      const [row] = await db()`select count(*)::int as managers from app.community_members where community_id = ${id} and role = 'manager'`;
      expect(row!.managers).toBe(1);
    }
  });
});

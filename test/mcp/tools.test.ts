// The nine tools through the real transport (gateway → MCP process) with the
// SDK client: protocol version, tool listing, every tool, the scoping rules
// with two agents, and bad arguments answered as tool errors.
import { beforeAll, describe, expect, it } from 'vitest';
import { api, db, registerUser, uniqueEmail } from '../helpers.ts';
import { callTool, connect, createAgent, createManagedCommunity, mintOAuthToken, rawMcp, type Agent } from './support.ts';
import { emailLinkRun } from '../support/email-links.ts';

let alice: Agent;
let bob: Agent;
let aliceCommunity: string;
let bobCommunity: string;
let pastEvent: string;
let upcomingEvent: string;

beforeAll(async () => {
  [alice, bob] = await Promise.all([createAgent('alice'), createAgent('bob')]);
  aliceCommunity = await createManagedCommunity(alice.email, 'Alice club');
  bobCommunity = await createManagedCommunity(bob.email, 'Bob club');
  const [past] = await db()`select admin.create_event(${aliceCommunity}, 'Old meetup', now() - interval '10 days', null, null, 'It was fun') as id`;
  const [next] = await db()`select admin.create_event(${aliceCommunity}, 'Next meetup', now() + interval '3 days', null, null, 'Come') as id`;
  pastEvent = past!.id;
  upcomingEvent = next!.id;
});

describe('protocol', () => {
  it('answers the revision asked for when it speaks it (2025-11-25, 2025-06-18, 2025-03-26), 2025-03-26 to older ones, else the latest', async () => {
    const cases: [unknown, string][] = [
      ['2025-11-25', '2025-11-25'],
      ['2025-06-18', '2025-06-18'],
      ['2025-03-26', '2025-03-26'],
      ['2024-11-05', '2025-03-26'],
      ['1999-01-01', '2025-03-26'],
      ['2099-01-01', '2025-11-25'],
      ['not a date', '2025-11-25'],
    ];
    for (const [asked, answered] of cases) {
      const res = await rawMcp(
        { jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: asked, capabilities: {}, clientInfo: { name: 'raw', version: '0' } } },
        { authorization: `Bearer ${alice.apiToken}` },
      );
      expect(res.status).toBe(200);
      expect(res.json.result.protocolVersion, `asked ${String(asked)}`).toBe(answered);
      expect(res.json.result.serverInfo.name).toBe('community-backend');
      const session = res.headers.get('mcp-session-id');
      expect(session).toMatch(/^[0-9a-f-]{36}$/);
      const [row] = await db()`select protocol_version from private.mcp_sessions where id = ${session}`;
      expect(row!.protocol_version).toBe(answered);
    }
  });

  it('connects with the current SDK client and lists nine tools with titles and annotations', async () => {
    const client = await connect(alice.apiToken);
    expect(client.getServerVersion()?.name).toBe('community-backend');
    const { tools } = await client.listTools();
    expect(tools.map((t) => t.name).sort()).toEqual([
      'add_member_to_community',
      'community_profile',
      'create_member',
      'get_event',
      'get_member',
      'list_community_events',
      'search_onboarding_communities',
      'set_member_attributes',
      'set_onboarding_opt_in',
    ]);
    for (const tool of tools) {
      expect(tool.title).toBeTruthy();
      expect(tool.annotations).toMatchObject({
        readOnlyHint: expect.any(Boolean),
        destructiveHint: expect.any(Boolean),
        idempotentHint: expect.any(Boolean),
        openWorldHint: expect.any(Boolean),
      });
      expect(tool.inputSchema.type).toBe('object');
    }
    const create = tools.find((t) => t.name === 'create_member')!;
    expect(create.inputSchema.required).toEqual(['email']);
    expect(create.annotations?.readOnlyHint).toBe(false);
    const attrs = tools.find((t) => t.name === 'set_member_attributes')!;
    expect((attrs.inputSchema.required ?? []).sort()).toEqual(['attributes', 'member_id']);
    expect((attrs.inputSchema.properties as any).member_id.format).toBe('uuid');
    expect((attrs.inputSchema.properties as any).attributes.type).toBe('object');
    const optIn = tools.find((t) => t.name === 'set_onboarding_opt_in')!;
    expect((optIn.inputSchema.properties as any).accepts_handoffs.type).toBe('boolean');
    expect(tools.find((t) => t.name === 'get_event')!.annotations?.readOnlyHint).toBe(true);
  });
});

describe('no tool deletes anyone', () => {
  it('every tool, called by an agent on its own member, itself and another person, leaves every account in place; deleting tools do not exist', async () => {
    // An agent of its own: its tool quotas are not the other tests'.
    const keeper = await createAgent('keeper');
    const oauth = await mintOAuthToken(keeper.userId);
    const viaToken = await connect(keeper.apiToken);
    const viaOAuth = await connect(oauth);
    const created = await callTool(viaToken, 'create_member', { email: uniqueEmail('kept') });
    expect(created.isError).toBe(false);
    const member = created.body.id as string;
    const stranger = await registerUser('kept-stranger');
    const people = [member, keeper.userId, stranger.userId];
    const { tools } = await viaToken.listTools();
    expect(tools.filter((t) => /delete|remove|erase|purge/i.test(t.name)).map((t) => t.name)).toEqual([]);
    for (const client of [viaToken, viaOAuth]) {
      for (const id of people) {
        for (const tool of tools) {
          // Whatever the tool takes, the person's ids in every id field.
          const args = Object.fromEntries(
            Object.keys((tool.inputSchema.properties ?? {}) as Record<string, unknown>).map((key) => [
              key,
              key.endsWith('_id') ? id : key === 'attributes' || key === 'data' ? { deleted: true } : key === 'accepts_handoffs' ? false : uniqueEmail('x'),
            ]),
          );
          await callTool(client, tool.name, args);
        }
      }
      for (const name of ['delete_account', 'delete_user', 'delete_member', 'account_delete']) {
        const res = await callTool(client, name, { member_id: member, user_id: member, email: stranger.email });
        expect(res.isError).toBe(true);
        expect(res.body.error).toBe('unknown_tool');
      }
    }
    const [row] = await db()`select count(*)::int as n from identity.users where id = any(${people}::uuid[])`;
    expect(row!.n).toBe(3);
    expect((await api('GET', '/api/mobile/profile', { token: stranger.accessToken })).status).toBe(200);
    // And the account functions refuse an agent's credential in SQL (supabase/tests/account.test.sql): its claims carry no session.
  });
});

describe('community and event tools', () => {
  it('community_profile shows a managed community with flags and managers', async () => {
    await db()`select admin.set_community_flags(${aliceCommunity}, true, false)`;
    const client = await connect(alice.apiToken);
    const { isError, body } = await callTool(client, 'community_profile', { community_id: aliceCommunity });
    expect(isError).toBe(false);
    expect(body).toMatchObject({ id: aliceCommunity, is_sandbox: true, is_draft: false, member_count: 1, tags: ['mcp', 'test'] });
    expect(body.managers).toHaveLength(1);
  });

  it('list_community_events gives upcoming and past events with status', async () => {
    const client = await connect(alice.apiToken);
    const { isError, body } = await callTool(client, 'list_community_events', { community_id: aliceCommunity });
    expect(isError).toBe(false);
    expect(body.upcoming.map((e: any) => e.id)).toEqual([upcomingEvent]);
    expect(body.upcoming[0]).toMatchObject({ title: 'Next meetup', status: 'upcoming', description: 'Come' });
    expect(body.past.map((e: any) => [e.id, e.status])).toEqual([[pastEvent, 'past']]);
  });

  it('get_event reads an event of a managed community', async () => {
    const client = await connect(alice.apiToken);
    const { isError, body } = await callTool(client, 'get_event', { event_id: upcomingEvent });
    expect(isError).toBe(false);
    expect(body).toMatchObject({ id: upcomingEvent, status: 'upcoming', community_id: aliceCommunity });
  });

  it('set_onboarding_opt_in and search_onboarding_communities', async () => {
    const client = await connect(alice.apiToken);
    expect((await callTool(client, 'search_onboarding_communities', {})).body.communities).toEqual([]);
    const on = await callTool(client, 'set_onboarding_opt_in', { community_id: aliceCommunity, accepts_handoffs: true });
    expect(on.body.accepts_handoffs).toBe(true);
    const listed = await callTool(client, 'search_onboarding_communities');
    expect(listed.body.communities.map((c: any) => c.id)).toEqual([aliceCommunity]);
    // Bob manages his own community only: Alice's opt-in is not his.
    const bobClient = await connect(bob.apiToken);
    expect((await callTool(bobClient, 'search_onboarding_communities', {})).body.communities).toEqual([]);
    await callTool(client, 'set_onboarding_opt_in', { community_id: aliceCommunity, accepts_handoffs: false });
    expect((await callTool(client, 'search_onboarding_communities', {})).body.communities).toEqual([]);
  });

  it('a community the caller does not manage answers exactly like an unknown one', async () => {
    const client = await connect(alice.apiToken);
    const [member] = await db()`select admin.create_community('Joined only', null, '{}', null) as id`;
    // Alice is a plain member of this one.
    await db()`insert into app.community_members (community_id, member_node_id)
               select ${member!.id}, node_id from app.profiles where id = ${alice.userId}`;
    const answers = await Promise.all(
      [bobCommunity, member!.id, crypto.randomUUID()].map((id) => callTool(client, 'community_profile', { community_id: id })),
    );
    for (const answer of answers) {
      expect(answer.isError).toBe(true);
      expect(answer.body).toEqual(answers[0]!.body);
      expect(answer.body.error).toBe('not_found');
    }
    for (const tool of ['list_community_events', 'set_onboarding_opt_in']) {
      const args = tool === 'set_onboarding_opt_in' ? { community_id: bobCommunity, accepts_handoffs: true } : { community_id: bobCommunity };
      const answer = await callTool(client, tool, args);
      expect(answer).toEqual({ isError: true, body: answers[0]!.body });
    }
    const [bobEvent] = await db()`select admin.create_event(${bobCommunity}, 'Bob event', now() + interval '1 day') as id`;
    const event = await callTool(client, 'get_event', { event_id: bobEvent!.id });
    expect(event.isError).toBe(true);
    expect(event.body.error).toBe('not_found');
  });
});

describe('member tools', () => {
  it('create_member, get_member, set_member_attributes and add_member_to_community', async () => {
    const client = await connect(alice.apiToken);
    const email = uniqueEmail('member');
    const created = await callTool(client, 'create_member', {
      email,
      name: 'Marta',
      data: { source: 'chat', interests: ['running'] },
    });
    expect(created.isError).toBe(false);
    expect(created.body).toMatchObject({ email, name: 'Marta', data: { source: 'chat', interests: ['running'] }, attributes: {}, password_set: false });
    const memberId = created.body.id as string;
    // No password: nobody can log in yet; the data is on the member's node.
    const [stored] = await db()`select u.password_hash, n.data from identity.users u join app.profiles p on p.id = u.id
                                join app.nodes n on n.id = p.node_id where u.id = ${memberId}`;
    expect(stored!.password_hash).toBeNull();
    expect(stored!.data).toEqual({ source: 'chat', interests: ['running'] });

    const got = await callTool(client, 'get_member', { member_id: memberId });
    expect(got.body).toMatchObject({ id: memberId, email, data: { source: 'chat' } });

    const set1 = await callTool(client, 'set_member_attributes', { member_id: memberId, attributes: { level: 'beginner', shoe: 42 } });
    expect(set1.body.attributes).toEqual({ level: 'beginner', shoe: 42 });
    const set2 = await callTool(client, 'set_member_attributes', { member_id: memberId, attributes: { level: 'advanced', shoe: null } });
    expect(set2.body.attributes).toEqual({ level: 'advanced' });

    const [before] = await db()`select member_count from app.communities where id = ${aliceCommunity}`;
    const added = await callTool(client, 'add_member_to_community', { member_id: memberId, community_id: aliceCommunity });
    expect(added.isError).toBe(false);
    expect(added.body).toMatchObject({ member_id: memberId, community_id: aliceCommunity, role: 'member', added: true, member_count: before!.member_count });
    const again = await callTool(client, 'add_member_to_community', { member_id: memberId, community_id: aliceCommunity });
    expect(again.body).toMatchObject({ added: false, member_count: added.body.member_count, joined_at: added.body.joined_at });
    const after = await callTool(client, 'get_member', { member_id: memberId });
    expect(after.body.communities.map((c: any) => c.community_id)).toEqual([aliceCommunity]);
    // Handed to it: the member joins when the person claims the account, not before.
    const [joined] = await db()`select count(*)::int as n from app.community_members m join app.profiles p on p.node_id = m.member_node_id
                                where p.id = ${memberId}`;
    expect(joined!.n).toBe(0);

    // Name derived from the e-mail when not given; data defaults to {}.
    const plain = await callTool(client, 'create_member', { email: uniqueEmail('plain') });
    expect(plain.isError).toBe(false);
    expect(plain.body.data).toEqual({});
    expect(typeof plain.body.name).toBe('string');

    // Creating it again answers with the same member (the agent's own, unclaimed).
    const duplicate = await callTool(client, 'create_member', { email });
    expect(duplicate.isError).toBe(false);
    expect(duplicate.body.id).toBe(memberId);
  });

  it('a member created by another agent is invisible, and the same as an unknown one', async () => {
    const aliceClient = await connect(alice.apiToken);
    const bobClient = await connect(bob.apiToken);
    const created = await callTool(aliceClient, 'create_member', { email: uniqueEmail('hidden') });
    const memberId = created.body.id as string;
    const unknown = await callTool(bobClient, 'get_member', { member_id: crypto.randomUUID() });
    expect(unknown).toMatchObject({ isError: true, body: { error: 'not_found' } });
    for (const [tool, args] of [
      ['get_member', { member_id: memberId }],
      ['set_member_attributes', { member_id: memberId, attributes: { x: 1 } }],
      ['add_member_to_community', { member_id: memberId, community_id: bobCommunity }],
    ] as const) {
      expect(await callTool(bobClient, tool, args)).toEqual(unknown);
    }
    // Alice cannot hand her member to Bob's community either.
    const handoff = await callTool(aliceClient, 'add_member_to_community', { member_id: memberId, community_id: bobCommunity });
    const unknownCommunity = await callTool(aliceClient, 'add_member_to_community', { member_id: memberId, community_id: crypto.randomUUID() });
    expect(handoff).toEqual(unknownCommunity);
    expect(handoff.body.error).toBe('not_found');
    const [count] = await db()`select count(*)::int as n from app.community_members m join app.profiles p on p.node_id = m.member_node_id
                               where p.id = ${memberId}`;
    expect(count!.n).toBe(0);
  });
});

describe('accounts that exist, and members who claim theirs (issue 27, findings 8 and 4)', () => {
  /** The answer's keys and their JSON types: what tells one answer from another besides the values. */
  const shapeOf = (body: Record<string, unknown>) =>
    Object.fromEntries(Object.entries(body).map(([k, v]) => [k, Array.isArray(v) ? 'array' : v === null ? 'null' : typeof v]));

  it('create_member for an e-mail that has an account answers as for a new one; the person gets a link; the agent gains nothing', async () => {
    const client = await connect(alice.apiToken);
    const person = await registerUser('existing');
    const fresh = await callTool(client, 'create_member', { email: uniqueEmail('fresh'), name: 'Someone', data: { from: 'chat' } });
    const existing = await callTool(client, 'create_member', { email: person.email, name: 'Someone', data: { from: 'chat' } });
    expect(existing.isError).toBe(false);
    expect(shapeOf(existing.body)).toEqual(shapeOf(fresh.body));
    expect(existing.body).toMatchObject({
      email: person.email,
      name: 'Someone',
      data: { from: 'chat' },
      attributes: {},
      password_set: false,
      communities: [],
      set_password_email: 'queued',
    });
    expect(existing.body.id).not.toBe(person.userId);
    // The account stays out of the agent's reach: its own ids name nothing the agent may use.
    expect(await callTool(client, 'get_member', { member_id: person.userId })).toMatchObject({ isError: true, body: { error: 'not_found' } });
    const add = await callTool(client, 'add_member_to_community', { member_id: person.userId, community_id: aliceCommunity });
    expect(add).toMatchObject({ isError: true, body: { error: 'not_found' } });
    const [owned] = await db()`select count(*)::int as n from app.agent_members where member_id = ${person.userId}`;
    expect(owned!.n).toBe(0);
    const [node] = await db()`select n.data from app.nodes n join app.profiles p on p.node_id = n.id where p.id = ${person.userId}`;
    expect(node!.data).toBeNull();
    // The person gets a link (a reset link: the account has a password), and can still sign in as before.
    const mail = await db()`select purpose, link from app.email_outbox where user_id = ${person.userId}`;
    expect(mail.map((m) => m.purpose)).toEqual(['recover']);
    expect(mail[0]!.link).toContain('/auth/set-password?token=');
    expect((await api('POST', '/api/auth/login', { body: { email: person.email, password: person.password } })).status).toBe(200);
    // At most 5 links an hour to one account, whoever asks.
    for (let i = 0; i < 6; i++) expect((await callTool(client, 'create_member', { email: person.email })).isError).toBe(false);
    const [links] = await db()`select count(*)::int as n from app.email_outbox where user_id = ${person.userId}`;
    expect(links!.n).toBe(5);
  });

  it('attack: create_member, then every member tool, answers an address with an account as a new one (security review round 5)', async () => {
    const client = await connect(alice.apiToken);
    const person = await registerUser('has-account');
    const [countBefore] = await db()`select member_count from app.communities where id = ${aliceCommunity}`;
    const run = async (email: string) => {
      const created = await callTool(client, 'create_member', { email, name: 'Probe', data: { from: 'probe' } });
      const id = created.body.id as string;
      const got = await callTool(client, 'get_member', { member_id: id });
      const byNode = await callTool(client, 'get_member', { member_id: created.body.node_id });
      const attributes = await callTool(client, 'set_member_attributes', { member_id: id, attributes: { probe: true } });
      const added = await callTool(client, 'add_member_to_community', { member_id: id, community_id: aliceCommunity });
      const addedAgain = await callTool(client, 'add_member_to_community', { member_id: id, community_id: aliceCommunity });
      const after = await callTool(client, 'get_member', { member_id: id });
      const again = await callTool(client, 'create_member', { email });
      // What differs by nature (ids, times, the address itself) aside.
      const plain = (v: any): unknown =>
        JSON.parse(JSON.stringify(v), (k, x) => (['id', 'node_id', 'member_id', 'created_at', 'updated_at', 'joined_at', 'email'].includes(k) ? typeof x : x));
      return {
        answers: plain([created, got, byNode, attributes, added, addedAgain, after]),
        sameAgain: again.body.id === id,
        idsGiven: [got.body.id, byNode.body.id, after.body.id].every((x) => x === id),
      };
    };
    const fresh = await run(uniqueEmail('probe-new'));
    const taken = await run(person.email);
    expect(taken).toEqual(fresh);
    expect(fresh.sameAgain && fresh.idsGiven).toBe(true);
    expect(fresh.answers).toContainEqual(expect.objectContaining({ isError: false }));
    // Neither changed the community: the count and the roster are as before.
    const [countAfter] = await db()`select member_count from app.communities where id = ${aliceCommunity}`;
    expect(countAfter!.member_count).toBe(countBefore!.member_count);
    // Nothing of the account was touched; its owner got a link.
    const [node] = await db()`select n.data from app.nodes n join app.profiles p on p.node_id = n.id where p.id = ${person.userId}`;
    expect(node!.data).toBeNull();
    expect((await db()`select 1 from app.agent_members where member_id = ${person.userId}`).length).toBe(0);
  });

  it("once the person claims the account (recovers it and sets a password), it is no longer the agent's", async () => {
    const client = await connect(alice.apiToken);
    const email = uniqueEmail('claimed');
    const created = await callTool(client, 'create_member', { email, name: 'Agent name' });
    const memberId = created.body.id as string;
    expect((await callTool(client, 'get_member', { member_id: memberId })).isError).toBe(false);
    expect((await callTool(client, 'add_member_to_community', { member_id: memberId, community_id: aliceCommunity })).body.added).toBe(true);

    // The real person: recovery link, new password, sign in, rename.
    expect((await api('POST', '/api/auth/recover', { body: { email } })).status).toBe(200);
    await emailLinkRun('recover', email);
    const [row] = await db()<{ link: string }[]>`
      select link from app.email_outbox where to_email = ${email} order by created_at desc limit 1`;
    const token = new URL(row!.link).searchParams.get('token')!;
    expect((await api('POST', '/api/auth/set-password', { body: { token, password: 'my-own-password' } })).status).toBe(200);
    const login = await api('POST', '/api/auth/login', { body: { email, password: 'my-own-password' } });
    expect(login.status).toBe(200);
    expect((await api('PATCH', '/api/mobile/profile', { token: login.body.access_token, body: { name: 'Real name' } })).status).toBe(200);

    const unknown = await callTool(client, 'get_member', { member_id: crypto.randomUUID() });
    expect(await callTool(client, 'get_member', { member_id: memberId })).toEqual(unknown);
    const add = await callTool(client, 'add_member_to_community', { member_id: memberId, community_id: bobCommunity });
    expect(add).toMatchObject({ isError: true, body: { error: 'not_found' } });
    const attrs = await callTool(client, 'set_member_attributes', { member_id: memberId, attributes: { x: 1 } });
    expect(attrs).toMatchObject({ isError: true, body: { error: 'not_found' } });
    // The community the agent handed the member to is joined now that the person claimed the account.
    const joined = await db()`select m.community_id, m.role from app.community_members m join app.profiles p on p.node_id = m.member_node_id
                              where p.id = ${memberId}`;
    expect(joined.map((j) => [j.community_id, j.role])).toEqual([[aliceCommunity, 'member']]);
    // And create_member for that e-mail now answers as for any other account.
    const again = await callTool(client, 'create_member', { email });
    expect(again.isError).toBe(false);
    expect(again.body.id).not.toBe(memberId);
  });
});

describe('bad arguments are tool errors, never JSON-RPC errors or 500s', () => {
  it.each([
    ['community_profile', { community_id: 'not-a-uuid' }],
    ['community_profile', {}],
    ['community_profile', { community_id: crypto.randomUUID(), extra: 1 }],
    ['create_member', { email: 'nope' }],
    ['create_member', { email: 'x@example.com', data: 'text' }],
    ['create_member', { email: 'x@example.com', data: [1, 2] }],
    ['set_member_attributes', { member_id: crypto.randomUUID(), attributes: 'x' }],
    ['set_onboarding_opt_in', { community_id: crypto.randomUUID(), accepts_handoffs: 'yes' }],
    ['get_event', { event_id: 42 }],
  ])('%s %j', async (name, args) => {
    const client = await connect(alice.apiToken);
    const answer = await callTool(client, name, args);
    expect(answer.isError).toBe(true);
    expect(answer.body.error).toBe('invalid_arguments');
    expect(typeof answer.body.message).toBe('string');
  });

  it('positional arguments, a missing name and an unknown tool', async () => {
    const init = await rawMcp(
      { jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-03-26', capabilities: {}, clientInfo: { name: 'raw', version: '0' } } },
      { authorization: `Bearer ${alice.apiToken}` },
    );
    const session = init.headers.get('mcp-session-id')!;
    const headers = { authorization: `Bearer ${alice.apiToken}`, 'mcp-session-id': session, 'mcp-protocol-version': '2025-03-26' };
    const cases: [unknown, string][] = [
      [{ name: 'community_profile', arguments: [crypto.randomUUID()] }, 'invalid_arguments'],
      [{ name: 'community_profile', arguments: 'x' }, 'invalid_arguments'],
      [{ arguments: {} }, 'unknown_tool'],
      [{ name: 'drop_database', arguments: {} }, 'unknown_tool'],
      [undefined, 'unknown_tool'],
    ];
    for (const [params, code] of cases) {
      const res = await rawMcp({ jsonrpc: '2.0', id: 2, method: 'tools/call', ...(params === undefined ? {} : { params }) }, headers);
      expect(res.status).toBe(200);
      expect(res.json.error).toBeUndefined();
      expect(res.json.result.isError).toBe(true);
      expect(JSON.parse(res.json.result.content[0].text).error).toBe(code);
    }
  });

  it('malformed JSON is a JSON-RPC parse error (400), not a 500', async () => {
    const res = await rawMcp('{"jsonrpc":', { authorization: `Bearer ${alice.apiToken}` });
    expect(res.status).toBe(400);
    expect(res.json.error.code).toBe(-32700);
  });
});

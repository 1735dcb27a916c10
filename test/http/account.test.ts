// Deleting an account (docs/api/accounts.md#your-account), through the real gateway:
// every credential of the deleted account tried again (access and refresh
// tokens of two sessions, API tokens, SSE streams opened with either, a
// websocket channel, an agent's OAuth token on /mcp, the calendar feed URL),
// the person's rows gone (not hidden), counts and lists read from other
// accounts, the e-mail registered again; a wrong password counted by the
// login throttle; the last manager refused; an API token refused; an
// account without a password confirming by an e-mailed link; two deletes at
// once; deletes racing joins.
import { afterAll, describe, expect, it } from 'vitest';
import { api, baseUrl, db, forgeToken, registerUser, uniqueEmail, type TestUser } from '../helpers.ts';
import { createCommunity, createEvent, createHat } from '../support/event-fixtures.ts';
import { addMember } from '../support/sql-fixtures.ts';
import { openStream, type SseStream } from '../support/sse.ts';
import { channelClosed, joinedSocket, type JoinedSocket } from '../support/ws-channel.ts';
import { callTool, connect, mintOAuthToken, rawMcp } from '../mcp/support.ts';
import { emailLinkRun } from '../support/email-links.ts';

const streams: SseStream[] = [];
const sockets: JoinedSocket[] = [];
afterAll(() => {
  streams.forEach((s) => s.close());
  sockets.forEach((s) => s.ws.close());
});

const INIT = { jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-03-26', capabilities: {}, clientInfo: { name: 'x', version: '1' } } };

async function login(user: { email: string; password: string }, userAgent = 'account-test'): Promise<{ accessToken: string; refreshToken: string }> {
  const res = await api('POST', '/api/auth/login', { body: { email: user.email, password: user.password }, headers: { 'user-agent': userAgent } });
  expect(res.status, res.text).toBe(200);
  return { accessToken: res.body.access_token, refreshToken: res.body.refresh_token };
}

async function apiToken(user: TestUser): Promise<{ id: string; secret: string }> {
  const res = await api('POST', '/api/docs/tokens', { token: user.accessToken, body: { name: 'everything', permissions: ['*'] } });
  expect(res.status, res.text).toBe(201);
  return { id: res.body.token.id, secret: res.body.token_value };
}

const deleteAccount = (token: string, password?: string) =>
  api('DELETE', '/api/mobile/account', { token, body: password === undefined ? undefined : { password } });

/** The rows of the person left anywhere: none after the deletion. */
async function rowsOf(userId: string, nodeId: string): Promise<Record<string, number>> {
  const [row] = await db()`
    select (select count(*) from identity.users where id = ${userId})::int as users,
           (select count(*) from app.profiles where id = ${userId})::int as profiles,
           (select count(*) from app.nodes where id = ${nodeId})::int as nodes,
           (select count(*) from app.hats where user_id = ${userId})::int as hats,
           (select count(*) from app.community_members where member_node_id = ${nodeId})::int as memberships,
           (select count(*) from app.checkins where user_id = ${userId})::int as checkins,
           (select count(*) from app.connections where owner_node_id = ${nodeId} or target_node_id = ${nodeId})::int as connections,
           (select count(*) from app.tasks where created_by = ${userId})::int as tasks,
           (select count(*) from app.deals where created_by = ${userId})::int as deals,
           (select count(*) from app.api_tokens where user_id = ${userId})::int as api_tokens,
           (select count(*) from identity.oauth_tokens where user_id = ${userId})::int as oauth_tokens,
           (select count(*) from identity.refresh_tokens where user_id = ${userId})::int as refresh_tokens,
           (select count(*) from identity.refresh_tokens r
             where r.session_id in (select session_id from identity.refresh_tokens where user_id = ${userId}) and (r.user_agent is not null or r.ip is not null))::int as session_details,
           (select count(*) from app.calendar_feeds where user_id = ${userId})::int as calendar_feeds,
           (select count(*) from private.mcp_sessions where user_id = ${userId})::int as mcp_sessions,
           (select count(*) from app.mcp_tool_calls where user_id = ${userId})::int as mcp_tool_calls,
           (select count(*) from app.agent_members where member_id = ${userId} or agent_id = ${userId})::int as agent_members,
           (select count(*) from app.event_streams where user_id = ${userId})::int as event_streams,
           (select count(*) from app.email_outbox where user_id = ${userId})::int as email_outbox`;
  return row as Record<string, number>;
}

describe('DELETE /api/mobile/account', () => {
  it('deletes the person: every credential stops at once, the rows are gone, others see the counts fall, the e-mail registers again', async () => {
    const manager = await registerUser('acctmgr');
    const community = await createCommunity(manager.email);
    const event = await createEvent({ communityId: community.id, starts: '-30 minutes', ends: '2 hours' });
    const user = await registerUser('acctdel');
    const second = await login(user, 'second device');
    const other = await registerUser('acctother');

    // What the person has: a membership, a hat, a check-in, connections both ways, a task and a deal, tokens, a feed, an agent grant.
    expect((await api('POST', `/api/mobile/communities/${community.id}/join`, { token: user.accessToken })).status).toBe(200);
    const hat = await createHat(user);
    expect((await api('POST', `/api/mobile/events/${event.id}/checkin`, { token: user.accessToken, body: { hat_id: hat } })).status).toBe(201);
    const [nodes] = await db()`select (select node_id from app.profiles where id = ${user.userId}) as mine,
                                      (select node_id from app.profiles where id = ${manager.userId}) as theirs`;
    const node = nodes!.mine as string;
    expect((await api('POST', '/api/mobile/connections', { token: user.accessToken, body: { target_node_id: nodes!.theirs } })).status).toBe(201);
    expect((await api('POST', '/api/mobile/connections', { token: manager.accessToken, body: { target_node_id: node, notes: 'met at the run' } })).status).toBe(201);
    expect((await api('POST', '/api/mobile/tasks', { token: user.accessToken, body: { title: 'Call Acme', deal_context: { company: 'Acme', deal_value: 100 } } })).status).toBe(201);
    const token = await apiToken(user);
    const feed = await api('POST', '/api/mobile/calendar/feed', { token: user.accessToken });
    expect(feed.status).toBe(201);
    const feedPath = new URL(feed.body.data.url).pathname;
    expect((await fetch(`${baseUrl}${feedPath}`)).status).toBe(200);
    const oauth = await mintOAuthToken(user.userId);
    const agent = await connect(oauth);
    expect((await callTool(agent, 'search_onboarding_communities', {})).isError).toBe(false);

    // Open streams and a channel: with the access token, the API token, the second session.
    const byAccess = await openStream({ token: user.accessToken });
    const byToken = await openStream({ token: token.secret });
    const bySecond = await openStream({ token: second.accessToken });
    streams.push(byAccess, byToken, bySecond);
    for (const s of [byAccess, byToken, bySecond]) {
      expect(s.status).toBe(200);
      await s.until((m) => m.event === 'ready');
    }
    const socket = await joinedSocket(second.accessToken);
    sockets.push(socket);

    const before = await api('GET', `/api/mobile/communities/${community.id}`, { token: other.accessToken });
    expect(before.status).toBe(200);

    const deleted = await deleteAccount(user.accessToken, user.password);
    expect(deleted.status, deleted.text).toBe(200);
    expect(deleted.body).toEqual({ success: true, user_id: user.userId, message: 'account deleted' });

    // Every credential stops at once.
    for (const access of [user.accessToken, second.accessToken]) {
      const res = await api('GET', '/api/mobile/profile', { token: access });
      expect(res.status).toBe(401);
      expect(res.body.error).toBe('session_ended');
      expect((await api('POST', '/api/auth/verify', { body: { token: access } })).status).toBe(401);
    }
    for (const refresh of [user.refreshToken, second.refreshToken]) {
      expect((await api('POST', '/api/auth/refresh', { body: { refresh_token: refresh } })).status).toBe(401);
    }
    const byApiToken = await api('GET', '/api/mobile/profile', { token: token.secret });
    expect(byApiToken.status).toBe(401);
    expect(byApiToken.body.error).toBe('invalid_token');
    for (const s of [byAccess, byToken, bySecond]) await s.waitEnded(5000);
    await channelClosed(socket);
    for (const credential of [user.accessToken, token.secret]) {
      const again = await openStream({ token: credential });
      streams.push(again);
      expect(again.status).toBe(401);
    }
    expect((await rawMcp(INIT, { authorization: `Bearer ${oauth}` })).status).toBe(401);
    expect((await rawMcp(INIT, { authorization: `Bearer ${token.secret}` })).status).toBe(401);
    expect((await fetch(`${baseUrl}${feedPath}`)).status).toBe(404);
    expect((await api('POST', '/api/auth/login', { body: { email: user.email, password: user.password } })).status).toBe(401);

    // The rows are gone.
    expect(Object.entries(await rowsOf(user.userId, node)).filter(([, n]) => n !== 0)).toEqual([]);
    // Its stored files: a storage_purge job, queued in the deleting transaction; the
    // worker may already have run it (test/http/storage-faults.test.ts checks the objects go).
    const [job] = await db()`select j.task_identifier, p.payload from graphile_worker.jobs j join graphile_worker._private_jobs p using (id)
                              where j.key = ${`storage_purge:user:${user.userId}`}`;
    if (job) expect(job).toEqual({ task_identifier: 'storage_purge', payload: { folder_owner: 'user', id: user.userId } });

    // Others: the member count fell, the manager's connection to the person went, the community and its event stay.
    const after = await api('GET', `/api/mobile/communities/${community.id}`, { token: other.accessToken });
    expect(after.body.data.member_count).toBe(before.body.data.member_count - 1);
    const members = await api('GET', `/api/mobile/communities/${community.id}/members`, { token: manager.accessToken });
    expect(members.body.data.map((m: { node_id: string }) => m.node_id)).not.toContain(node);
    const connections = await api('GET', '/api/mobile/connections', { token: manager.accessToken });
    expect(connections.body.connections).toEqual([]);
    expect((await api('GET', `/api/mobile/events/${event.id}`, { token: manager.accessToken })).status).toBe(200);

    // The e-mail address registers again, as a new account.
    const again = await registerUser('unused', { email: user.email, password: 'a brand new password' });
    expect(again.userId).not.toBe(user.userId);
    expect((await api('GET', '/api/mobile/profile', { token: again.accessToken })).status).toBe(200);
    expect((await api('GET', `/api/mobile/communities`, { token: again.accessToken })).body.data).toEqual([]);
  });

  it('a wrong password is 401, changes nothing and counts as a failed sign-in of the account', async () => {
    const user = await registerUser('acctwrong');
    const wrong = await deleteAccount(user.accessToken, 'not the password');
    expect(wrong.status).toBe(401);
    expect(wrong.body.error).toBe('invalid_credentials');
    expect((await api('GET', '/api/mobile/profile', { token: user.accessToken })).status).toBe(200);
    const [failures] = await db()`select count(*)::int as n from private.auth_failures where scope = 'email' and key = ${user.email}`;
    expect(failures!.n).toBe(1);
    // Without a password, an account that has one is told to send it.
    const missing = await deleteAccount(user.accessToken);
    expect(missing.status).toBe(422);
    expect(missing.body.details.issues[0].path).toBe('body.password');
  });

  it('counts with the login throttle: past its limit, 429 for the deletion and for the login alike', async () => {
    const user = await registerUser('acctthrottle');
    // LOGIN_MAX_FAILURES_PER_EMAIL (10 per e-mail and client) wrong passwords.
    for (let i = 0; i < 10; i++) {
      expect((await deleteAccount(user.accessToken, `wrong ${i}`)).status).toBe(401);
    }
    const throttled = await deleteAccount(user.accessToken, user.password);
    expect(throttled.status).toBe(429);
    expect(Number(throttled.headers.get('retry-after'))).toBeGreaterThan(0);
    expect((await api('POST', '/api/auth/login', { body: { email: user.email, password: user.password } })).status).toBe(429);
    expect((await api('GET', '/api/mobile/profile', { token: user.accessToken })).status).toBe(200);
  });

  it('the only manager of a community is 409 naming it; once another member manages it, the deletion goes through', async () => {
    const user = await registerUser('acctsole');
    const deputy = await registerUser('acctdeputy');
    const solo = await createCommunity(user.email);
    const shared = await createCommunity(user.email);
    await addMember(shared.id, deputy.userId, 'manager');
    const [names] = await db()`select (select name from app.communities where id = ${solo.id}) as solo`;

    const refused = await deleteAccount(user.accessToken, user.password);
    expect(refused.status).toBe(409);
    expect(refused.body.error).toBe('last_manager_of_communities');
    expect(refused.body.details).toEqual({ communities: [{ id: solo.id, name: names!.solo }] });
    expect((await api('GET', '/api/mobile/profile', { token: user.accessToken })).status).toBe(200);

    await addMember(solo.id, deputy.userId, 'manager');
    expect((await deleteAccount(user.accessToken, user.password)).status).toBe(200);
    for (const c of [solo, shared]) {
      const [row] = await db()`select member_count, (select count(*)::int from app.community_members where community_id = ${c.id}) as rows
                                 from app.communities where id = ${c.id}`;
      expect(row).toEqual({ member_count: 1, rows: 1 });
    }
  });

  it('an API token cannot delete the account (403), even with permission for every path and the right password', async () => {
    const user = await registerUser('accttoken');
    const token = await apiToken(user);
    const res = await deleteAccount(token.secret, user.password);
    expect(res.status).toBe(403);
    expect(res.body.error).toBe('forbidden');
    for (const [method, path, body] of [
      ['GET', '/api/mobile/account/export', undefined],
      ['GET', '/api/mobile/account/sessions', undefined],
      ['DELETE', '/api/mobile/account/sessions', undefined],
      ['POST', '/api/mobile/account/password', { current_password: user.password, new_password: 'another password' }],
      ['POST', '/api/mobile/account/email', { email: uniqueEmail('x'), password: user.password }],
    ] as const) {
      expect((await api(method, path, { token: token.secret, body })).status, `${method} ${path}`).toBe(403);
    }
    expect((await api('GET', '/api/mobile/profile', { token: user.accessToken })).status).toBe(200);
  });

  it('an account without a password gets a link by e-mail (202); the link deletes it', async () => {
    // A platform attendee (no password), signed in somehow: a session made in SQL, its access token signed with the service's key.
    const email = uniqueEmail('acctnopw');
    const [made] = await db()`select private.create_account(${email}, null) as id`;
    const userId = made!.id as string;
    const [session] = await db()`select * from private.start_session(${userId})`;
    const access = await forgeToken({ sub: userId, email, session_id: session!.session_id });

    const res = await deleteAccount(access);
    expect(res.status, res.text).toBe(202);
    expect(res.body).toMatchObject({ success: true, link_sent: true });
    expect((await api('GET', '/api/mobile/profile', { token: access })).status).toBe(200);
    const [mail] = await db()`select link, subject from app.email_outbox where to_email = ${email} and purpose = 'delete_account'`;
    expect(mail!.link).toMatch(/\/account\/delete\/confirm\?token=[A-Za-z0-9_-]{43}$/);

    const link = new URL(mail!.link);
    const page = await fetch(`${baseUrl}${link.pathname}${link.search}`);
    expect(page.status).toBe(200);
    expect(await page.text()).toContain(email);
    const confirmed = await fetch(`${baseUrl}/account/delete/confirm`, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams({ token: link.searchParams.get('token')! }),
    });
    expect(confirmed.status).toBe(200);
    expect(await confirmed.text()).toContain('Your account is deleted');
    expect((await api('GET', '/api/mobile/profile', { token: access })).status).toBe(401);
    const [gone] = await db()`select count(*)::int as n from identity.users where id = ${userId}`;
    expect(gone!.n).toBe(0);
    // Used once.
    const twice = await fetch(`${baseUrl}/account/delete/confirm`, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams({ token: link.searchParams.get('token')! }),
    });
    expect(twice.status).toBe(400);
  });
});

describe('POST /account/delete (the web page)', () => {
  const ask = (email: string) =>
    fetch(`${baseUrl}/account/delete`, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams({ email }),
    }).then(async (res) => ({
      status: res.status,
      // The per-response CSP nonce aside, the answers are compared byte for byte.
      csp: res.headers.get('content-security-policy')?.replace(/'nonce-[^']+'/g, "'nonce'"),
      text: (await res.text()).replace(/nonce="[^"]+"/g, 'nonce'),
    }));

  it('answers the same page for any address; of 8 requests at once and 6 more the owner gets 5 links, the newest the only one that works', async () => {
    const user = await registerUser('webdelburst');
    const answers = await Promise.all([...Array.from({ length: 8 }, () => ask(user.email)), ask(uniqueEmail('webdel-none'))]);
    for (const a of answers) expect(a).toEqual(answers[0]);
    expect(answers[0]!.status).toBe(200);
    expect(answers[0]!.csp).toContain("default-src 'none'");
    expect(answers[0]!.text).toContain('Check your inbox');
    // Requests at once wait as one job (a repeat replaces it); one after another, each its own: never past 5 an hour.
    await emailLinkRun('delete_account', user.email);
    for (let i = 0; i < 6; i++) {
      expect((await ask(user.email)).status).toBe(200);
      await emailLinkRun('delete_account', user.email);
    }
    const mails = await db()<{ link: string }[]>`
      select link from app.email_outbox where user_id = ${user.userId} and purpose = 'delete_account' order by created_at, id`;
    expect(mails).toHaveLength(5);
    const working = [];
    for (const m of mails) {
      const link = new URL(m.link);
      if ((await fetch(`${baseUrl}${link.pathname}${link.search}`)).status === 200) working.push(m.link);
    }
    expect(working).toHaveLength(1);
    // Hostile input: a page, never a 5xx.
    const bad = await ask('not an address');
    expect(bad.status).toBe(400);
    expect(bad.text).toContain('That is not an e-mail address');
  });
});

describe('races', () => {
  it('two deletes of one account at once: one deletes it, the other is refused with 401', async () => {
    const user = await registerUser('acctrace');
    const second = await login(user);
    const answers = await Promise.all([deleteAccount(user.accessToken, user.password), deleteAccount(second.accessToken, user.password)]);
    expect(answers.map((a) => a.status).sort()).toEqual([200, 401]);
    const [row] = await db()`select count(*)::int as n from identity.users where email = ${user.email}`;
    expect(row!.n).toBe(0);
  });

  it('deletes racing joins: every answer is a success or a 401, and the member count is the rows', async () => {
    const community = await createCommunity();
    const users = await Promise.all(Array.from({ length: 8 }, (_, i) => registerUser(`acctjoin${i}`)));
    const answers = await Promise.all(
      users.flatMap((u) => [
        api('POST', `/api/mobile/communities/${community.id}/join`, { token: u.accessToken }),
        deleteAccount(u.accessToken, u.password),
      ]),
    );
    const joins = answers.filter((_, i) => i % 2 === 0).map((a) => a.status);
    const deletes = answers.filter((_, i) => i % 2 === 1).map((a) => a.status);
    expect(deletes).toEqual(users.map(() => 200));
    for (const status of joins) expect([200, 401]).toContain(status);
    const [row] = await db()`select c.member_count, (select count(*)::int from app.community_members m where m.community_id = c.id) as rows
                               from app.communities c where c.id = ${community.id}`;
    expect(row).toEqual({ member_count: 0, rows: 0 });
  });
});

describe('what others keep', () => {
  it("a manager's webhook endpoint stays; the person's name goes from the stored deliveries; member.deleted carries ids only", async () => {
    const manager = await registerUser('accthookmgr');
    const community = await createCommunity(manager.email);
    const [endpoint] = await db()<{ id: string }[]>`
      insert into app.webhook_endpoints (community_id, url, events, secret, created_by)
      values (${community.id}, 'https://hooks.example.com/acct', array['member.joined', 'member.deleted'], 'whsec_x', ${manager.userId})
      returning id`;
    const user = await registerUser('accthooked', { email: uniqueEmail('accthooked'), password: 'password-of-a-member' });
    await api('PATCH', '/api/mobile/profile', { token: user.accessToken, body: { name: 'Hedy Lamarr' } });
    expect((await api('POST', `/api/mobile/communities/${community.id}/join`, { token: user.accessToken })).status).toBe(200);
    const [joined] = await db()`select payload from app.webhook_deliveries where endpoint_id = ${endpoint!.id} and event_type = 'member.joined'`;
    expect(joined!.payload.data.member.name).toBe('Hedy Lamarr');
    const [node] = await db()`select node_id from app.profiles where id = ${user.userId}`;

    expect((await deleteAccount(user.accessToken, user.password)).status).toBe(200);
    const rows = await db()`select event_type, payload from app.webhook_deliveries where endpoint_id = ${endpoint!.id} order by created_at`;
    expect(rows.map((r) => r.event_type)).toEqual(['member.joined', 'member.deleted']);
    expect(rows[0]!.payload.data.member).toMatchObject({ id: node!.node_id, name: null });
    expect(rows[1]!.payload.data).toEqual({ community_id: community.id, member: { id: node!.node_id }, deleted_at: expect.any(String) });
    expect(JSON.stringify(rows)).not.toContain('Hedy');
    expect(JSON.stringify(rows)).not.toContain(user.email);
    const [kept] = await db()`select created_by from app.webhook_endpoints where id = ${endpoint!.id}`;
    expect(kept).toEqual({ created_by: manager.userId });
  });

  it("an endpoint a deleted manager registered stays with the community, without its maker", async () => {
    const user = await registerUser('acctmaker');
    const deputy = await registerUser('acctmaker2');
    const community = await createCommunity(user.email);
    await addMember(community.id, deputy.userId, 'manager');
    const [endpoint] = await db()<{ id: string }[]>`
      insert into app.webhook_endpoints (community_id, url, events, secret, created_by)
      values (${community.id}, 'https://hooks.example.com/maker', array['member.left'], 'whsec_x', ${user.userId}) returning id`;
    expect((await deleteAccount(user.accessToken, user.password)).status).toBe(200);
    const [kept] = await db()`select created_by, active from app.webhook_endpoints where id = ${endpoint!.id}`;
    expect(kept).toEqual({ created_by: null, active: true });
    // member.left is not sent for a deleted member (member.deleted is).
    const [left] = await db()`select count(*)::int as n from app.webhook_deliveries where endpoint_id = ${endpoint!.id}`;
    expect(left!.n).toBe(0);
  });
});

// The rest of an account its owner controls (docs/api/accounts.md#your-account),
// through the real gateway: sessions seen and ended from another device,
// a password change (other sessions and OAuth grants end, this session and
// the API tokens stay), an e-mail change confirmed from the new address (the
// old one signs in until then; a taken address gets the same answer and a
// page saying it cannot be used), and the export read for completeness and
// for other people's data.
import { afterAll, describe, expect, it } from 'vitest';
import { api, baseUrl, db, registerUser, uniqueEmail, type TestUser } from '../helpers.ts';
import { createCommunity, createEvent, createHat } from '../support/event-fixtures.ts';
import { addMember } from '../support/sql-fixtures.ts';
import { openStream, type SseStream } from '../support/sse.ts';
import { channelClosed, joinedSocket, type JoinedSocket } from '../support/ws-channel.ts';
import { mintOAuthToken, rawMcp } from '../mcp/support.ts';

const streams: SseStream[] = [];
const sockets: JoinedSocket[] = [];
afterAll(() => {
  streams.forEach((s) => s.close());
  sockets.forEach((s) => s.ws.close());
});

const INIT = { jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-03-26', capabilities: {}, clientInfo: { name: 'x', version: '1' } } };

async function login(user: { email: string; password: string }, userAgent: string) {
  const res = await api('POST', '/api/auth/login', { body: { email: user.email, password: user.password }, headers: { 'user-agent': userAgent } });
  expect(res.status, res.text).toBe(200);
  return { accessToken: res.body.access_token as string, refreshToken: res.body.refresh_token as string };
}

const sessions = (token: string) => api('GET', '/api/mobile/account/sessions', { token });

/** A form posted as a browser posts it. */
const postForm = (path: string, fields: Record<string, string>) =>
  fetch(`${baseUrl}${path}`, { method: 'POST', headers: { 'content-type': 'application/x-www-form-urlencoded' }, body: new URLSearchParams(fields) });

describe('sessions', () => {
  it('lists the sessions with their user agent, address and which one is current; ends one from another device', async () => {
    const user = await registerUser('sess');
    const phone = await login(user, 'CommunityApp/2.3 (iPhone)');
    const laptop = await login(user, 'Mozilla/5.0 (X11; Linux x86_64)');
    const refreshed = await api('POST', '/api/auth/refresh', { body: { refresh_token: laptop.refreshToken }, headers: { 'user-agent': 'Mozilla/5.0 refreshed' } });
    expect(refreshed.status).toBe(200);

    const list = await sessions(phone.accessToken);
    expect(list.status).toBe(200);
    expect(list.body).toHaveLength(3);
    const [first, second] = list.body;
    // Most recently used first: the laptop's refresh, then the phone's sign-in.
    expect(first).toMatchObject({ user_agent: 'Mozilla/5.0 refreshed', ip: '127.0.0.1', current: false });
    expect(second).toMatchObject({ user_agent: 'CommunityApp/2.3 (iPhone)', current: true });
    expect(new Date(first.last_used_at).getTime()).toBeGreaterThan(new Date(first.created_at).getTime());

    // The laptop has a stream and a channel open; the phone ends its session.
    const stream = await openStream({ token: refreshed.body.access_token });
    streams.push(stream);
    await stream.until((m) => m.event === 'ready');
    const socket = await joinedSocket(refreshed.body.access_token);
    sockets.push(socket);
    const ended = await api('DELETE', `/api/mobile/account/sessions/${first.id}`, { token: phone.accessToken });
    expect(ended.status).toBe(200);
    expect(ended.body).toEqual({ success: true, id: first.id, current: false });
    const after = await api('GET', '/api/mobile/profile', { token: refreshed.body.access_token });
    expect(after.status).toBe(401);
    expect(after.body.error).toBe('session_ended');
    expect((await api('POST', '/api/auth/refresh', { body: { refresh_token: refreshed.body.refresh_token } })).status).toBe(401);
    await stream.waitEnded(5000);
    await channelClosed(socket);
    expect((await api('GET', '/api/mobile/profile', { token: phone.accessToken })).status).toBe(200);
    expect((await sessions(phone.accessToken)).body).toHaveLength(2);

    // Once ended, or another account's: 404.
    expect((await api('DELETE', `/api/mobile/account/sessions/${first.id}`, { token: phone.accessToken })).status).toBe(404);
    const stranger = await registerUser('sessstranger');
    const theirs = (await sessions(stranger.accessToken)).body[0].id;
    const refused = await api('DELETE', `/api/mobile/account/sessions/${theirs}`, { token: phone.accessToken });
    expect(refused.status).toBe(404);
    expect(refused.body.error).toBe('session_not_found');
    expect((await api('GET', '/api/mobile/profile', { token: stranger.accessToken })).status).toBe(200);

    // All but the current one.
    const rest = await api('DELETE', '/api/mobile/account/sessions', { token: phone.accessToken });
    expect(rest.body).toEqual({ success: true, sessions_ended: 1 });
    expect((await api('GET', '/api/mobile/profile', { token: user.accessToken })).status).toBe(401);
    expect((await sessions(phone.accessToken)).body.map((s: { current: boolean }) => s.current)).toEqual([true]);
  });
});

describe('POST /api/mobile/account/password', () => {
  it('ends every other session and OAuth grant; keeps this session and the API tokens (and says how many)', async () => {
    const user = await registerUser('pwchange');
    const other = await login(user, 'other device');
    const token = await api('POST', '/api/docs/tokens', { token: user.accessToken, body: { name: 'script', permissions: ['*'] } });
    const oauth = await mintOAuthToken(user.userId);
    expect((await rawMcp(INIT, { authorization: `Bearer ${oauth}` })).status).toBe(200);
    const stream = await openStream({ token: other.accessToken });
    streams.push(stream);
    await stream.until((m) => m.event === 'ready');

    const wrong = await api('POST', '/api/mobile/account/password', { token: user.accessToken, body: { current_password: 'nope nope', new_password: 'a new password' } });
    expect(wrong.status).toBe(401);
    const weak = await api('POST', '/api/mobile/account/password', { token: user.accessToken, body: { current_password: user.password, new_password: 'short' } });
    expect(weak.status).toBe(422);

    const changed = await api('POST', '/api/mobile/account/password', {
      token: user.accessToken,
      body: { current_password: user.password, new_password: 'a new password' },
    });
    expect(changed.status, changed.text).toBe(200);
    expect(changed.body).toEqual({ success: true, sessions_ended: 1, api_tokens: 1, message: 'password changed' });

    expect((await api('GET', '/api/mobile/profile', { token: user.accessToken })).status).toBe(200);
    expect((await api('GET', '/api/mobile/profile', { token: other.accessToken })).status).toBe(401);
    await stream.waitEnded(5000);
    expect((await api('GET', '/api/mobile/profile', { token: token.body.token_value })).status).toBe(200);
    expect((await rawMcp(INIT, { authorization: `Bearer ${oauth}` })).status).toBe(401);
    expect((await api('POST', '/api/auth/login', { body: { email: user.email, password: user.password } })).status).toBe(401);
    expect((await api('POST', '/api/auth/login', { body: { email: user.email, password: 'a new password' } })).status).toBe(200);
    // The calling session refreshes as before.
    expect((await api('POST', '/api/auth/refresh', { body: { refresh_token: user.refreshToken } })).status).toBe(200);
  });
});

describe('POST /api/mobile/account/email', () => {
  async function mails(to: string, purpose: string) {
    return db()<{ link: string | null; body_text: string }[]>`
      select link, body_text from app.email_outbox where to_email = ${to} and purpose = ${purpose} order by created_at`;
  }

  it('202; a link to the new address and a notice to the old; the old address signs in until the link is confirmed', async () => {
    const user = await registerUser('mailchange');
    const address = uniqueEmail('mailnew');
    const wrong = await api('POST', '/api/mobile/account/email', { token: user.accessToken, body: { email: address, password: 'wrong password' } });
    expect(wrong.status).toBe(401);
    expect(await mails(address, 'email_change')).toEqual([]);

    const asked = await api('POST', '/api/mobile/account/email', { token: user.accessToken, body: { email: address, password: user.password } });
    expect(asked.status, asked.text).toBe(202);
    const [confirm] = await mails(address, 'email_change');
    const [notice] = await mails(user.email, 'email_change_notice');
    expect(confirm!.link).toMatch(/\/account\/email\/confirm\?type=email_change&token_hash=[A-Za-z0-9_-]{43}$/);
    expect(notice!.body_text).toContain(address);
    expect(notice!.link).toBeNull();

    expect((await api('POST', '/api/auth/login', { body: { email: user.email, password: user.password } })).status).toBe(200);
    expect((await api('POST', '/api/auth/login', { body: { email: address, password: user.password } })).status).toBe(401);
    const exported = await api('GET', '/api/mobile/account/export', { token: user.accessToken });
    expect(exported.body.account.pending_email_change).toMatchObject({ email: address });

    const link = new URL(confirm!.link!);
    const page = await fetch(`${baseUrl}${link.pathname}${link.search}`);
    expect(page.status).toBe(200);
    expect(await page.text()).toContain(address);
    // Opening the page changed nothing.
    expect((await api('POST', '/api/auth/login', { body: { email: user.email, password: user.password } })).status).toBe(200);

    const done = await postForm('/account/email/confirm', { token_hash: link.searchParams.get('token_hash')!, type: 'email_change' });
    expect(done.status).toBe(200);
    expect(await done.text()).toContain(address);
    expect((await api('POST', '/api/auth/login', { body: { email: address, password: user.password } })).status).toBe(200);
    expect((await api('POST', '/api/auth/login', { body: { email: user.email, password: user.password } })).status).toBe(401);
    expect((await api('GET', '/api/mobile/profile', { token: user.accessToken })).body.data.email).toBe(address);
    // Used once.
    expect((await postForm('/account/email/confirm', { token_hash: link.searchParams.get('token_hash')! })).status).toBe(400);
  });

  it('a taken address gets the same 202; its link page says it cannot be used, and nothing changes', async () => {
    const user = await registerUser('mailtaken');
    const owner = await registerUser('mailowner');
    const asked = await api('POST', '/api/mobile/account/email', { token: user.accessToken, body: { email: owner.email, password: user.password } });
    expect(asked.status).toBe(202);
    expect(asked.body).toEqual({ success: true, message: 'a link to confirm the new address is on its way to it; until then, sign in with the current one' });
    const [confirm] = await mails(owner.email, 'email_change');
    const link = new URL(confirm!.link!);
    const page = await fetch(`${baseUrl}${link.pathname}${link.search}`);
    expect(page.status).toBe(409);
    expect(await page.text()).toContain('This address cannot be used');
    const posted = await postForm('/account/email/confirm', { token_hash: link.searchParams.get('token_hash')! });
    expect(posted.status).toBe(409);
    expect((await api('POST', '/api/auth/login', { body: { email: user.email, password: user.password } })).status).toBe(200);
    expect((await api('POST', '/api/auth/login', { body: { email: owner.email, password: owner.password } })).status).toBe(200);
  });

  it('at most 5 an hour per account (429 with Retry-After); an invalid address is 422', async () => {
    const user = await registerUser('mailmany');
    expect((await api('POST', '/api/mobile/account/email', { token: user.accessToken, body: { email: 'not an address', password: user.password } })).status).toBe(422);
    for (let i = 0; i < 5; i++) {
      expect((await api('POST', '/api/mobile/account/email', { token: user.accessToken, body: { email: uniqueEmail('many'), password: user.password } })).status).toBe(202);
    }
    const sixth = await api('POST', '/api/mobile/account/email', { token: user.accessToken, body: { email: uniqueEmail('many'), password: user.password } });
    expect(sixth.status).toBe(429);
    expect(Number(sixth.headers.get('retry-after'))).toBeGreaterThan(0);
    // Only the newest link works.
    const links = await db()<{ used: boolean }[]>`
      select used_at is not null as used from identity.account_links where user_id = ${user.userId} order by created_at`;
    expect(links.map((l) => l.used)).toEqual([true, true, true, true, false]);
  });
});

describe('GET /api/mobile/account/export', () => {
  async function person(prefix: string, name?: string): Promise<TestUser & { nodeId: string }> {
    const user = await registerUser(prefix);
    if (name) await api('PATCH', '/api/mobile/profile', { token: user.accessToken, body: { name } });
    const [row] = await db()`select node_id from app.profiles where id = ${user.userId}`;
    return { ...user, nodeId: row!.node_id as string };
  }

  it('one JSON attachment with everything the service holds about the caller, no secret, and others only as the caller sees them', async () => {
    const user = await person('export', 'Ada Lovelace');
    const chosen = await person('exportchosen', 'Grace Hopper');
    const derived = await person('exportderived');
    const community = await createCommunity(user.email);
    await addMember(community.id, chosen.userId);
    const event = await createEvent({ communityId: community.id, starts: '-10 minutes', ends: '1 hour' });
    const hat = await createHat(user);
    await api('POST', `/api/mobile/events/${event.id}/checkin`, { token: user.accessToken, body: { hat_id: hat } });
    await api('POST', '/api/mobile/connections', { token: user.accessToken, body: { target_node_id: chosen.nodeId, notes: 'ask about COBOL' } });
    await api('POST', '/api/mobile/connections', { token: user.accessToken, body: { target_node_id: derived.nodeId } });
    await api('POST', '/api/mobile/connections', { token: chosen.accessToken, body: { target_node_id: user.nodeId, notes: 'private note of Grace' } });
    await api('POST', '/api/mobile/tasks', { token: user.accessToken, body: { title: 'Call Acme', deal_context: { company: 'Acme', deal_value: 5 } } });
    const token = await api('POST', '/api/docs/tokens', { token: user.accessToken, body: { name: 'export script', permissions: ['/api/mobile/*'] } });
    const feed = await api('POST', '/api/mobile/calendar/feed', { token: user.accessToken });
    await mintOAuthToken(user.userId);
    const [hook] = await db()<{ secret: string }[]>`
      insert into app.webhook_endpoints (community_id, url, events, secret, created_by)
      values (${community.id}, 'https://hooks.example.com/export', array['member.joined'], 'whsec_c2VjcmV0LW9mLXRoZS1ob29r', ${user.userId})
      returning secret`;

    const res = await api('GET', '/api/mobile/account/export', { token: user.accessToken });
    expect(res.status, res.text).toBe(200);
    expect(res.headers.get('content-disposition')).toBe('attachment; filename="account-export.json"');
    expect(res.headers.get('content-type')).toMatch(/^application\/json/);
    const doc = res.body;
    expect(Object.keys(doc).sort()).toEqual(
      ['account', 'agent', 'agent_calls', 'api_test_results', 'api_tokens', 'calendar_feed', 'checkins', 'connections', 'deals', 'event_registrations',
        'exported_at', 'hats', 'memberships', 'oauth_grants', 'profile', 'sessions', 'stored_files', 'task_links', 'tasks', 'webhook_endpoints'].sort(),
    );
    expect(doc.account).toMatchObject({ user_id: user.userId, email: user.email, has_password: true, pending_email_change: null });
    expect(doc.profile).toMatchObject({ name: 'Ada Lovelace', name_source: 'chosen', node_id: user.nodeId });
    expect(doc.hats).toHaveLength(1);
    expect(doc.memberships).toEqual([expect.objectContaining({ community_id: community.id, role: 'manager' })]);
    expect(doc.checkins).toEqual([expect.objectContaining({ event_id: event.id, event_title: event.title, hat_id: hat })]);
    expect(doc.tasks).toHaveLength(1);
    expect(doc.deals).toEqual([expect.objectContaining({ meta: expect.objectContaining({ company: 'Acme' }) })]);
    expect(doc.sessions).toEqual([expect.objectContaining({ current: true })]);
    expect(doc.api_tokens).toEqual([expect.objectContaining({ id: token.body.token.id, name: 'export script', permissions: ['/api/mobile/*'] })]);
    expect(doc.oauth_grants).toEqual([expect.objectContaining({ client_name: 'test', scopes: ['mcp:read', 'mcp:write'], active: true })]);
    expect(doc.calendar_feed).toMatchObject({ exists: true });
    expect(doc.stored_files).toEqual([]);
    expect(doc.webhook_endpoints).toEqual([expect.objectContaining({ url: 'https://hooks.example.com/export', community_id: community.id })]);

    // Others as the caller sees them: a chosen name, not a derived (private) one; others' notes about the caller are theirs.
    const byTarget = Object.fromEntries(doc.connections.map((c: { target_node_id: string; target_name: string | null }) => [c.target_node_id, c.target_name]));
    expect(byTarget).toEqual({ [chosen.nodeId]: 'Grace Hopper', [derived.nodeId]: null });
    const text = res.text;
    for (const secret of [
      token.body.token_value,
      user.refreshToken,
      user.accessToken,
      new URL(feed.body.data.url).pathname.split('/').pop()!.replace('.ics', ''),
      hook!.secret,
      user.password,
      'private note of Grace',
      derived.email,
      chosen.email,
      '$2a$',
    ]) {
      expect(text).not.toContain(secret);
    }
    const [hashes] = await db()`select encode(token_hash, 'hex') as api, (select password_hash from identity.users where id = ${user.userId}) as password
                                  from app.api_tokens where user_id = ${user.userId}`;
    expect(text).not.toContain(hashes!.api);
    expect(text).not.toContain(hashes!.password);
  });

  it('at most 5 an hour per account: 429 with Retry-After', async () => {
    const user = await registerUser('exportlimit');
    for (let i = 0; i < 5; i++) expect((await api('GET', '/api/mobile/account/export', { token: user.accessToken })).status).toBe(200);
    const sixth = await api('GET', '/api/mobile/account/export', { token: user.accessToken });
    expect(sixth.status).toBe(429);
    expect(sixth.body.error).toBe('rate_limited');
    expect(Number(sixth.headers.get('retry-after'))).toBeGreaterThan(3000);
    expect(sixth.body.details.retry_after).toBe(Number(sixth.headers.get('retry-after')));
    // Another account is not held back.
    const other = await registerUser('exportother');
    expect((await api('GET', '/api/mobile/account/export', { token: other.accessToken })).status).toBe(200);
  });
});

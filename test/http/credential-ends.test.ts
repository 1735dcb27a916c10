// Issue 27, findings 2 and 5, performed as the reviewer did: what a credential
// reaches ends when the credential ends.
//   * An event stream opened with an API token outlives nothing: DELETE of
//     the token, its expiry, and a password reset close it at once (no later
//     change is delivered).
//   * A password reset (POST /api/auth/set-password) ends every session, API
//     token and OAuth grant (access and refresh) of the account.
import { afterAll, describe, expect, it } from 'vitest';
import { api, apiKey, baseUrl, db, registerUser, type TestUser } from '../helpers.ts';
import { createCommunity, createEvent } from '../support/event-fixtures.ts';
import { addMember } from '../support/sql-fixtures.ts';
import { openStream, type SseStream } from '../support/sse.ts';
import { callTool, connect, mintOAuthToken, rawMcp } from '../mcp/support.ts';
import { emailLinkRun } from '../support/email-links.ts';

const open: SseStream[] = [];
afterAll(() => open.forEach((s) => s.close()));

async function tokenFor(user: TestUser, body: Record<string, unknown> = {}): Promise<{ id: string; secret: string }> {
  const created = await api('POST', '/api/docs/tokens', {
    token: user.accessToken,
    body: { name: 'stream token', permissions: ['*'], ...body },
  });
  expect(created.status).toBe(201);
  return { id: created.body.token.id, secret: created.body.token_value };
}

/** A member of a community with a stream open with an API token, past its opening. */
async function streamingMember(): Promise<{ user: TestUser; communityId: string; token: { id: string; secret: string }; stream: SseStream }> {
  const community = await createCommunity();
  const user = await registerUser('tokenstream');
  await addMember(community.id, user.userId);
  const token = await tokenFor(user);
  const stream = await openStream({ token: token.secret });
  open.push(stream);
  expect(stream.status).toBe(200);
  await stream.until((m) => m.event === 'ready');
  return { user, communityId: community.id, token, stream };
}

async function resetPassword(user: TestUser, password = 'a-brand-new-password'): Promise<void> {
  await api('POST', '/api/auth/recover', { body: { email: user.email } });
  await emailLinkRun('recover', user.email);
  const [row] = await db()<{ link: string }[]>`
    select link from app.email_outbox where to_email = ${user.email} and purpose = 'recover' order by created_at desc limit 1`;
  const token = new URL(row!.link).searchParams.get('token')!;
  const set = await api('POST', '/api/auth/set-password', { body: { token, password } });
  expect(set.status).toBe(200);
}

describe('an event stream opened with an API token ends with the token', () => {
  it('DELETE /api/docs/tokens/{id} closes it; a change made afterwards is not delivered', async () => {
    const { user, communityId, token, stream } = await streamingMember();
    // The stream is live: a new event arrives.
    const before = await createEvent({ communityId, starts: '2 days' });
    await stream.until((m) => m.event === 'insert' && m.json?.id === before.id);

    const revoked = await api('DELETE', `/api/docs/tokens/${token.id}`, { token: user.accessToken });
    expect(revoked.status).toBe(200);
    await stream.waitEnded(5000);
    const after = await createEvent({ communityId, starts: '3 days' });
    await new Promise((r) => setTimeout(r, 300));
    expect(stream.messages.some((m) => m.json?.id === after.id)).toBe(false);
    // And the token opens no new stream.
    const again = await openStream({ token: token.secret });
    open.push(again);
    expect(again.status).toBe(401);
  });

  it('closes at the token\'s expires_at', async () => {
    const community = await createCommunity();
    const user = await registerUser('tokenexpiry');
    await addMember(community.id, user.userId);
    const token = await tokenFor(user, { expires_at: new Date(Date.now() + 2500).toISOString() });
    const stream = await openStream({ token: token.secret });
    open.push(stream);
    expect(stream.status).toBe(200);
    await stream.until((m) => m.event === 'ready');
    await stream.waitEnded(6000);
  });

  it('a token deactivated in SQL (a DBA, any replica) closes it too', async () => {
    const { token, stream } = await streamingMember();
    await db()`update app.api_tokens set active = false where id = ${token.id}`;
    await stream.waitEnded(5000);
  });
});

describe('a password reset ends everything the account had handed out', () => {
  it('sessions, API tokens (and their streams), OAuth access and refresh tokens', async () => {
    const { user, token, stream } = await streamingMember();
    const narrow = await tokenFor(user, { permissions: ['/api/mobile/profile'] });
    expect((await api('GET', '/api/mobile/profile', { token: narrow.secret })).status).toBe(200);

    // An OAuth grant used on /mcp, and its refresh token.
    const clientId = `reset-client-${Date.now()}`;
    await db()`select private.oauth_client_register(${clientId}, null, 0, extract(epoch from now())::bigint,
                                                    ${db().json({ redirect_uris: ['http://localhost/cb'], client_name: 'reset' })})`;
    const [grant] = await db()<{ access_token: string; refresh_token: string }[]>`
      select * from private.oauth_issue_tokens(${clientId}, ${user.userId}, gen_random_uuid(), ${['mcp:read', 'mcp:write']}, null, 3600)`;
    const agent = await connect(grant!.access_token);
    expect((await callTool(agent, 'search_onboarding_communities', {})).isError).toBe(false);
    const otherGrant = await mintOAuthToken(user.userId);

    await resetPassword(user);

    // The session.
    expect((await api('GET', '/api/mobile/profile', { token: user.accessToken })).status).toBe(401);
    expect((await api('POST', '/api/auth/refresh', { body: { refresh_token: user.refreshToken } })).status).toBe(401);
    // API tokens, and the stream of one.
    for (const secret of [token.secret, narrow.secret]) {
      const res = await api('GET', '/api/mobile/profile', { token: secret });
      expect(res.status).toBe(401);
      expect(res.body.error).toBe('invalid_token');
    }
    await stream.waitEnded(5000);
    // OAuth: access tokens on /mcp, and the refresh token.
    const init = { jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-03-26', capabilities: {}, clientInfo: { name: 'x', version: '1' } } };
    for (const access of [grant!.access_token, otherGrant]) {
      expect((await rawMcp(init, { authorization: `Bearer ${access}` })).status).toBe(401);
    }
    const refreshed = await fetch(`${baseUrl}/token`, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams({ grant_type: 'refresh_token', refresh_token: grant!.refresh_token, client_id: clientId }),
    });
    expect(refreshed.status).toBe(400);
    expect((await refreshed.json()).error).toBe('invalid_grant');

    // The owner signs in with the new password and makes new credentials as usual.
    const login = await api('POST', '/api/auth/login', { body: { email: user.email, password: 'a-brand-new-password' } });
    expect(login.status).toBe(200);
    const fresh = await tokenFor({ ...user, accessToken: login.body.access_token });
    expect((await api('GET', '/api/mobile/profile', { token: fresh.secret })).status).toBe(200);
  });
});

describe('signed storage URLs end with the account\'s credentials (security review round 5)', () => {
  /** A user with a 1-year signed download URL and a signed upload URL of their attachments. */
  async function signedLinks(prefix: string): Promise<{ user: TestUser; download: string; upload: string }> {
    const user = await registerUser(prefix);
    const name = `${user.userId}/kept.txt`;
    const put = await fetch(`${baseUrl}/storage/v1/object/attachments/${name}`, {
      method: 'POST',
      headers: { authorization: `Bearer ${user.accessToken}`, 'content-type': 'text/plain' },
      body: 'kept',
    });
    expect(put.status).toBe(200);
    const signed = await api('POST', `/storage/v1/object/sign/attachments/${name}`, { token: user.accessToken, body: { expiresIn: 31_536_000 } });
    const upload = await api('POST', `/storage/v1/object/upload/sign/attachments/${user.userId}/dropped.txt`, { token: user.accessToken });
    expect([signed.status, upload.status]).toEqual([200, 200]);
    const links = { user, download: `${baseUrl}/storage/v1${signed.body.signedURL}`, upload: `${baseUrl}/storage/v1${upload.body.url}` };
    expect((await fetch(links.download)).status).toBe(200);
    return links;
  }

  async function expectEnded(links: { download: string; upload: string }): Promise<void> {
    const download = await fetch(links.download);
    expect(download.status).toBe(400);
    expect(await download.json()).toMatchObject({ code: 'signature_expired' });
    const upload = await fetch(links.upload, { method: 'PUT', headers: { 'content-type': 'text/plain' }, body: 'after the end' });
    expect(upload.status).toBe(400);
    expect(await upload.json()).toMatchObject({ code: 'signature_expired' });
  }

  it('a password change (POST /api/mobile/account/password)', async () => {
    const links = await signedLinks('signed-pw');
    const changed = await api('POST', '/api/mobile/account/password', {
      token: links.user.accessToken,
      body: { current_password: links.user.password, new_password: 'another-long-password' },
    });
    expect(changed.status).toBe(200);
    await expectEnded(links);
    // What the account signs from now on works.
    const again = await api('POST', `/storage/v1/object/sign/attachments/${links.user.userId}/kept.txt`, { token: links.user.accessToken, body: { expiresIn: 60 } });
    expect((await fetch(`${baseUrl}/storage/v1${again.body.signedURL}`)).status).toBe(200);
  });

  it('a global sign-out (POST /auth/v1/logout?scope=global), not a local one', async () => {
    const links = await signedLinks('signed-out');
    const anon = await apiKey('anon');
    const other = await api('POST', '/api/auth/login', { body: { email: links.user.email, password: links.user.password } });
    const local = await api('POST', '/auth/v1/logout?scope=local', { headers: { apikey: anon }, token: other.body.access_token });
    expect(local.status).toBe(204);
    expect((await fetch(links.download)).status).toBe(200);
    const global = await api('POST', '/auth/v1/logout?scope=global', { headers: { apikey: anon }, token: links.user.accessToken });
    expect(global.status).toBe(204);
    await expectEnded(links);
  });

  it('the account deleted (DELETE /api/mobile/account)', async () => {
    const links = await signedLinks('signed-gone');
    const deleted = await api('DELETE', '/api/mobile/account', { token: links.user.accessToken, body: { password: links.user.password } });
    expect(deleted.status).toBe(200);
    await expectEnded(links);
  });
});

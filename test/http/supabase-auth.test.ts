// Supabase Auth's wire API at /auth/v1, driven by the real supabase-js made
// as Supabase's docs make it: createClient(URL, ANON_KEY), no accessToken
// option. Every answer supabase-js receives is checked against the served
// OpenAPI document (a fetch that runs the contract check), and the error
// bodies are Supabase Auth's ({code, error_code, msg}).
import { createClient, type AuthChangeEvent, type RealtimeChannel, type SupabaseClient } from '@supabase/supabase-js';
import { afterAll, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import { api, apiKey, baseUrl, db, forgeToken, publicUrl, registerUser, uniqueEmail } from '../helpers.ts';
import { createToken } from '../support/api-tokens.ts';
import { contractCheckedFetch } from '../support/contract.ts';
import { waitFor } from '../support/wait.ts';
import { emailLinkRun } from '../support/email-links.ts';

const PASSWORD = 'correct horse battery staple';

const ANON_KEY = await apiKey('anon');

/** fetch, with every JSON answer checked against the OpenAPI document. */
const checkedFetch = contractCheckedFetch(baseUrl, '/auth/v1/');

const clients: SupabaseClient[] = [];
afterAll(async () => {
  for (const c of clients) {
    c.auth.stopAutoRefresh();
    await c.removeAllChannels();
  }
});

/** The one client, as Supabase's docs make it. */
function supabase(): SupabaseClient {
  const c = createClient(baseUrl, ANON_KEY, {
    global: { fetch: checkedFetch },
    auth: { persistSession: false },
    realtime: { transport: WebSocket as never, timeout: 5000 },
  });
  clients.push(c);
  return c;
}

function subscribe(channel: RealtimeChannel): Promise<string> {
  return new Promise((resolve) => {
    const timer = setTimeout(() => resolve('TEST_TIMEOUT'), 8000);
    channel.subscribe((status) => {
      if (status === 'SUBSCRIBED' || status === 'CHANNEL_ERROR' || status === 'TIMED_OUT') {
        clearTimeout(timer);
        resolve(status);
      }
    });
  });
}

describe('supabase-js against /auth/v1', () => {
  it('signs up, signs in, reads and updates the user, refreshes and signs out; onAuthStateChange fires', async () => {
    const client = supabase();
    const events: AuthChangeEvent[] = [];
    client.auth.onAuthStateChange((event) => {
      events.push(event);
    });
    const email = uniqueEmail('sb');

    const up = await client.auth.signUp({ email, password: PASSWORD, options: { data: { nickname: 'Ada' } } });
    expect(up.error).toBeNull();
    expect(up.data.session?.access_token).toBeTruthy();
    expect(up.data.user).toMatchObject({ email, aud: 'authenticated', role: 'authenticated', app_metadata: { provider: 'email' }, user_metadata: { nickname: 'Ada' } });
    expect(up.data.user!.identities).toHaveLength(1);
    expect(up.data.session!.expires_at).toBeGreaterThan(Date.now() / 1000);

    const taken = await client.auth.signUp({ email, password: PASSWORD });
    expect(taken.error).toMatchObject({ status: 422, code: 'user_already_exists' });

    const wrong = await client.auth.signInWithPassword({ email, password: 'not the password' });
    expect(wrong.error).toMatchObject({ status: 400, code: 'invalid_credentials', message: 'Invalid login credentials' });

    const signedIn = await client.auth.signInWithPassword({ email, password: PASSWORD });
    expect(signedIn.error).toBeNull();
    const userId = signedIn.data.user!.id;
    expect(signedIn.data.user!.last_sign_in_at).toBeTruthy();

    const got = await client.auth.getUser();
    expect(got.error).toBeNull();
    expect(got.data.user).toMatchObject({ id: userId, email, user_metadata: { nickname: 'Ada' } });

    // The access token works on the rest of the service too (one identity).
    const profile = await api('GET', '/api/mobile/profile', { token: signedIn.data.session!.access_token });
    expect(profile.status).toBe(200);

    const updated = await client.auth.updateUser({ data: { city: 'Berlin', nickname: null } });
    expect(updated.error).toBeNull();
    expect(updated.data.user!.user_metadata).toEqual({ city: 'Berlin' });
    const [stored] = await db()`select user_metadata from identity.users where id = ${userId}`;
    expect(stored!.user_metadata).toEqual({ city: 'Berlin' });

    const before = (await client.auth.getSession()).data.session!;
    const refreshed = await client.auth.refreshSession();
    expect(refreshed.error).toBeNull();
    expect(refreshed.data.session!.refresh_token).not.toBe(before.refresh_token);

    // The rotated refresh token used again: Supabase's code, and the session ends (reuse detection).
    const reused = await fetch(`${baseUrl}/auth/v1/token?grant_type=refresh_token`, {
      method: 'POST',
      headers: { apikey: ANON_KEY, 'content-type': 'application/json' },
      body: JSON.stringify({ refresh_token: before.refresh_token }),
    });
    expect(reused.status).toBe(400);
    expect(await reused.json()).toEqual({ code: 400, error_code: 'refresh_token_already_used', msg: 'Invalid Refresh Token: Already Used' });
    const afterReuse = await client.auth.getUser();
    expect(afterReuse.error).not.toBeNull();

    await client.auth.signInWithPassword({ email, password: PASSWORD });
    const out = await client.auth.signOut();
    expect(out.error).toBeNull();
    expect((await client.auth.getSession()).data.session).toBeNull();
    await waitFor(() => (events.includes('SIGNED_OUT') ? true : undefined), 'SIGNED_OUT');
    expect(events).toEqual(expect.arrayContaining(['INITIAL_SESSION', 'SIGNED_IN', 'USER_UPDATED', 'TOKEN_REFRESHED', 'SIGNED_OUT']));
  });

  it('refreshes a session whose access token has expired, with the session it belongs to', async () => {
    const email = uniqueEmail('sb-exp');
    await api('POST', '/api/auth/register', { body: { email, password: PASSWORD } });
    const login = await api('POST', '/api/auth/login', { body: { email, password: PASSWORD } });
    const [session] = await db()`select session_id from identity.refresh_tokens where user_id = ${login.body.user_id} and revoked_at is null`;
    const expired = await forgeToken({ sub: login.body.user_id, email, session_id: session!.session_id }, { expiresIn: Math.floor(Date.now() / 1000) - 60 });
    expect((await api('GET', '/api/mobile/profile', { token: expired })).status).toBe(401);

    const client = supabase();
    const set = await client.auth.setSession({ access_token: expired, refresh_token: login.body.refresh_token });
    expect(set.error).toBeNull();
    const got = await client.auth.getUser();
    expect(got.error).toBeNull();
    expect(got.data.user!.email).toBe(email);
    const now = (await client.auth.getSession()).data.session!;
    expect(now.access_token).not.toBe(expired);
    expect(now.expires_at!).toBeGreaterThan(Date.now() / 1000);
    // The /api/auth refresh token was rotated: it no longer works.
    expect((await api('POST', '/api/auth/refresh', { body: { refresh_token: login.body.refresh_token } })).status).toBe(401);
  });

  it('changes the password with the current one; every other session ends', async () => {
    const email = uniqueEmail('sb-pw');
    const client = supabase();
    await client.auth.signUp({ email, password: PASSWORD });
    const other = supabase();
    await other.auth.signInWithPassword({ email, password: PASSWORD });

    const without = await client.auth.updateUser({ password: 'a much longer passphrase' });
    expect(without.error).toMatchObject({ status: 400, code: 'current_password_required' });
    const mismatch = await client.auth.updateUser({ password: 'a much longer passphrase', current_password: 'wrong wrong wrong' });
    expect(mismatch.error).toMatchObject({ status: 400, code: 'current_password_mismatch' });
    const weak = await client.auth.updateUser({ password: 'short', current_password: PASSWORD });
    expect(weak.error).toMatchObject({ status: 422, code: 'weak_password' });

    const changed = await client.auth.updateUser({ password: 'a much longer passphrase', current_password: PASSWORD });
    expect(changed.error).toBeNull();
    expect((await client.auth.getUser()).error).toBeNull();
    expect((await other.auth.getUser()).error).not.toBeNull();
    expect((await supabase().auth.signInWithPassword({ email, password: 'a much longer passphrase' })).error).toBeNull();
    expect((await supabase().auth.signInWithPassword({ email, password: PASSWORD })).error).toMatchObject({ code: 'invalid_credentials' });
  });

  it('asks for an e-mail change with the current password: new_email until the link is opened', async () => {
    const email = uniqueEmail('sb-mail');
    const client = supabase();
    await client.auth.signUp({ email, password: PASSWORD });
    const next = uniqueEmail('sb-mail-new');
    const asked = await client.auth.updateUser({ email: next, current_password: PASSWORD });
    expect(asked.error).toBeNull();
    expect(asked.data.user).toMatchObject({ email, new_email: next });
    const [mail] = await db()`select link from app.email_outbox where to_email = ${next}`;
    const tokenHash = new URL(mail!.link as string).searchParams.get('token_hash')!;
    expect(tokenHash).toBeTruthy();

    // The link's token_hash, as supabase-js verifies it: the address changes.
    const verified = await client.auth.verifyOtp({ type: 'email_change', token_hash: tokenHash });
    expect(verified.error).toBeNull();
    expect(verified.data.user).toMatchObject({ email: next });
    expect((await client.auth.getUser()).data.user!.email).toBe(next);
    // Used once: Supabase's answer for a link it no longer knows.
    const again = await client.auth.verifyOtp({ type: 'email_change', token_hash: tokenHash });
    expect(again.error).toMatchObject({ status: 403, code: 'otp_expired' });
    expect((await client.auth.verifyOtp({ type: 'signup', token_hash: tokenHash })).error).toMatchObject({ status: 403, code: 'otp_expired' });
    // The link's token is no sign-in code.
    expect((await client.auth.verifyOtp({ type: 'email', email: next, token: '123456' })).error).toMatchObject({ status: 403, code: 'otp_expired' });
  });

  it('resetPasswordForEmail queues the set-password e-mail, the same answer for an unknown address', async () => {
    const email = uniqueEmail('sb-recover');
    await api('POST', '/api/auth/register', { body: { email, password: PASSWORD } });
    const client = supabase();
    expect((await client.auth.resetPasswordForEmail(email)).error).toBeNull();
    expect((await client.auth.resetPasswordForEmail(uniqueEmail('nobody'))).error).toBeNull();
    await waitFor(async () => ((await db()`select 1 from app.email_outbox where to_email = ${email}`).length > 0 ? true : undefined), 'the e-mail');
  });

  it('recovery: the token of the e-mailed link signs in (verifyOtp), and that session sets the password once without the current one', async () => {
    const email = uniqueEmail('sb-recovery');
    const before = supabase();
    await before.auth.signUp({ email, password: PASSWORD });
    const client = supabase();
    expect((await client.auth.resetPasswordForEmail(email)).error).toBeNull();
    await emailLinkRun('recover', email);
    const [mail] = await db()`select link from app.email_outbox where to_email = ${email} and link like '%set-password%'`;
    const token = new URL(mail!.link as string).searchParams.get('token')!;

    const verified = await client.auth.verifyOtp({ type: 'recovery', token_hash: token });
    expect(verified.error).toBeNull();
    expect(verified.data.session?.access_token).toBeTruthy();
    expect(verified.data.user!.email).toBe(email);
    // The reset revokes whoever held the account: the earlier session is gone.
    expect((await before.auth.getUser()).error).not.toBeNull();
    // The link works once.
    expect((await supabase().auth.verifyOtp({ type: 'recovery', token_hash: token })).error).toMatchObject({ status: 403, code: 'otp_expired' });

    const set = await client.auth.updateUser({ password: 'a brand new passphrase' });
    expect(set.error).toBeNull();
    expect((await supabase().auth.signInWithPassword({ email, password: 'a brand new passphrase' })).error).toBeNull();
    // Once: the next change needs the current password again.
    const again = await client.auth.updateUser({ password: 'yet another passphrase' });
    expect(again.error).toMatchObject({ status: 400, code: 'current_password_required' });
  });

  it('signOut with the scopes of Supabase: others keeps this session, local ends only this one', async () => {
    const email = uniqueEmail('sb-scope');
    const a = supabase();
    await a.auth.signUp({ email, password: PASSWORD });
    const b = supabase();
    await b.auth.signInWithPassword({ email, password: PASSWORD });
    const bToken = (await b.auth.getSession()).data.session!.access_token;
    expect((await a.auth.signOut({ scope: 'others' })).error).toBeNull();
    expect((await a.auth.getUser()).error).toBeNull();
    expect((await api('GET', '/api/mobile/profile', { token: bToken })).status).toBe(401);
    const aToken = (await a.auth.getSession()).data.session!.access_token;
    expect((await a.auth.signOut({ scope: 'local' })).error).toBeNull();
    expect((await api('GET', '/api/mobile/profile', { token: aToken })).status).toBe(401);
  });

  it('the same client subscribes a realtime channel with its session; signOut stops it', async () => {
    const client = supabase();
    const email = uniqueEmail('sb-rt');
    await client.auth.signUp({ email, password: PASSWORD });
    const channel = client.channel('feed').on('postgres_changes', { event: '*', schema: 'app', table: 'events' }, () => {});
    expect(await subscribe(channel)).toBe('SUBSCRIBED');
    const token = (await client.auth.getSession()).data.session!.access_token;
    await client.auth.signOut();
    await waitFor(() => (channel.state !== 'joined' ? true : undefined), 'the channel to stop', 10_000);
    expect(channel.state).not.toBe('joined');
    // The session ended on the server, not only in the client: its access token is refused everywhere.
    expect((await api('GET', '/api/mobile/profile', { token })).status).toBe(401);
  });

  it('phone sign-in is answered as Supabase Auth answers when disabled', async () => {
    const client = supabase();
    expect((await client.auth.signUp({ phone: '+15555550100', password: PASSWORD })).error).toMatchObject({ status: 422, code: 'phone_provider_disabled' });
    expect((await client.auth.signInWithOtp({ phone: '+15555550100' })).error).toMatchObject({ status: 422, code: 'phone_provider_disabled' });
    const settings = await api('GET', '/auth/v1/settings', { headers: { apikey: ANON_KEY } });
    expect(settings.status).toBe(200);
    expect(settings.body).toMatchObject({ external: { email: true, phone: false, google: false }, mailer_autoconfirm: true, disable_signup: false });
  });
});

describe('API keys on /auth/v1', () => {
  it('refuses a request without an apikey, or with a key signed by another secret or of another kind', async () => {
    const body = { email: uniqueEmail('nokey'), password: PASSWORD };
    const none = await api('POST', '/auth/v1/token?grant_type=password', { body });
    expect(none.status).toBe(401);
    expect(none.body).toEqual({ code: 401, error_code: 'no_api_key', msg: 'No API key found in request' });
    const foreign = await api('POST', '/auth/v1/token?grant_type=password', { body, headers: { apikey: await apiKey('anon', 'x'.repeat(40)) } });
    expect(foreign.body).toMatchObject({ code: 401, error_code: 'invalid_api_key' });
    // An access token is not an API key.
    const user = await api('POST', '/api/auth/register', { body });
    expect(user.status).toBe(201);
    const login = await api('POST', '/api/auth/login', { body });
    const asKey = await api('GET', '/auth/v1/settings', { headers: { apikey: login.body.access_token } });
    expect(asKey.status).toBe(401);
    // And an API key is not an access token.
    // As Supabase Auth answers: a bearer token that is not valid is 403 bad_jwt; none is 401 no_authorization.
    const anonAsBearer = await api('GET', '/auth/v1/user', { headers: { apikey: ANON_KEY }, token: ANON_KEY });
    expect(anonAsBearer.status).toBe(403);
    expect(anonAsBearer.body).toMatchObject({ code: 403, error_code: 'bad_jwt' });
    const noBearer = await api('GET', '/auth/v1/user', { headers: { apikey: ANON_KEY } });
    expect(noBearer.status).toBe(401);
    expect(noBearer.body).toMatchObject({ code: 401, error_code: 'no_authorization' });
    const expired = await api('GET', '/auth/v1/user', { headers: { apikey: ANON_KEY }, token: await forgeToken({ sub: crypto.randomUUID() }, { expiresIn: Math.floor(Date.now() / 1000) - 60 }) });
    expect(expired.body).toMatchObject({ code: 403, error_code: 'bad_jwt' });
    // A session that ended: 403 session_not_found.
    await api('POST', '/api/auth/logout', { body: { refresh_token: login.body.refresh_token } });
    const ended = await api('GET', '/auth/v1/user', { headers: { apikey: ANON_KEY }, token: login.body.access_token });
    expect(ended.body).toMatchObject({ code: 403, error_code: 'session_not_found' });
    const service = await apiKey('service_role');
    expect((await api('GET', '/auth/v1/settings', { headers: { apikey: service } })).status).toBe(200);
  });

  it('a wrong password on /auth/v1 counts with the /api/auth/login throttle (one door count)', async () => {
    const email = uniqueEmail('sb-throttle');
    await api('POST', '/api/auth/register', { body: { email, password: PASSWORD } });
    const headers = { apikey: ANON_KEY, 'x-forwarded-for': '203.0.113.77' };
    let status = 0;
    for (let i = 0; i < 40 && status !== 429; i++) {
      const res = i % 2 === 0
        ? await api('POST', '/auth/v1/token?grant_type=password', { headers, body: { email, password: `wrong ${i}` } })
        : await api('POST', '/api/auth/login', { headers, body: { email, password: `wrong ${i}` } });
      status = res.status;
      if (status === 429 && i % 2 === 0) expect(res.body).toMatchObject({ code: 429, error_code: 'over_request_rate_limit' });
    }
    expect(status).toBe(429);
  });
});

describe('GET /auth/v1/verify (the link form)', () => {
  async function recoveryToken(email: string): Promise<string> {
    expect((await supabase().auth.resetPasswordForEmail(email)).error).toBeNull();
    await emailLinkRun('recover', email);
    const [mail] = await db()`select link from app.email_outbox where to_email = ${email} and link like '%set-password%' order by id desc limit 1`;
    return new URL(mail!.link as string).searchParams.get('token')!;
  }
  const open = (query: Record<string, string>) => fetch(`${baseUrl}/auth/v1/verify?${new URLSearchParams(query)}`, { redirect: 'manual' });

  it('a recovery link signs in and redirects 303 to redirect_to with the session in the fragment, which supabase-js takes', async () => {
    const email = uniqueEmail('sb-link');
    await supabase().auth.signUp({ email, password: PASSWORD });
    const target = `${publicUrl}/app/reset?x=1`;
    const token = await recoveryToken(email);
    const res = await open({ type: 'recovery', token, redirect_to: target });
    expect(res.status).toBe(303);
    const location = new URL(res.headers.get('location')!);
    expect(`${location.origin}${location.pathname}${location.search}`).toBe(target);
    const fragment = new URLSearchParams(location.hash.slice(1));
    expect(fragment.get('type')).toBe('recovery');
    expect(fragment.get('token_type')).toBe('bearer');
    expect(Number(fragment.get('expires_at'))).toBeGreaterThan(Date.now() / 1000);
    // The session of the fragment is a session of this service (as supabase-js's detectSessionInUrl would set it).
    const client = supabase();
    const set = await client.auth.setSession({ access_token: fragment.get('access_token')!, refresh_token: fragment.get('refresh_token')! });
    expect(set.error).toBeNull();
    expect((await client.auth.getUser()).data.user!.email).toBe(email);
    expect((await client.auth.updateUser({ password: 'set from the link form' })).error).toBeNull();
    expect((await supabase().auth.signInWithPassword({ email, password: 'set from the link form' })).error).toBeNull();

    // Used once: the error in the fragment, as Supabase Auth redirects it.
    const again = await open({ type: 'recovery', token, redirect_to: target });
    expect(again.status).toBe(303);
    const error = new URLSearchParams(new URL(again.headers.get('location')!).hash.slice(1));
    expect(Object.fromEntries(error)).toMatchObject({ error: 'access_denied', error_code: 'otp_expired' });
  });

  it('never redirects off the allow-list: another host, a look-alike host or user-info goes to the site instead (attack: open redirect carrying a session)', async () => {
    const site = new URL(publicUrl);
    for (const evil of [
      'https://evil.example/steal',
      `${site.protocol}//${site.host}.evil.example/`,
      `${site.protocol}//${site.host}@evil.example/`,
      '//evil.example/x',
      'javascript:alert(1)',
    ]) {
      const email = uniqueEmail('sb-open');
      await supabase().auth.signUp({ email, password: PASSWORD });
      const res = await open({ type: 'recovery', token: await recoveryToken(email), redirect_to: evil });
      expect(res.status, evil).toBe(303);
      const location = new URL(res.headers.get('location')!);
      expect(location.host, evil).toBe(site.host);
      expect(location.hash, evil).toContain('access_token=');
    }
  });
});

describe('PUT /auth/v1/user: every change or none', () => {
  it('a new password and user_metadata that is refused: neither is saved', async () => {
    const email = uniqueEmail('sb-atomic');
    const client = supabase();
    await client.auth.signUp({ email, password: PASSWORD, options: { data: { keep: 'me' } } });
    const refused = await client.auth.updateUser({ password: 'not saved either', current_password: PASSWORD, data: { big: 'x'.repeat(20_000) } } as never);
    expect(refused.error).toMatchObject({ status: 422 });
    expect((await supabase().auth.signInWithPassword({ email, password: PASSWORD })).error).toBeNull();
    expect((await supabase().auth.signInWithPassword({ email, password: 'not saved either' })).error).not.toBeNull();
    expect((await client.auth.getUser()).data.user!.user_metadata).toEqual({ keep: 'me' });
  });

  it('a new password and e-mail address together, in one call', async () => {
    const email = uniqueEmail('sb-both');
    const client = supabase();
    await client.auth.signUp({ email, password: PASSWORD });
    const next = uniqueEmail('sb-both-new');
    const both = await client.auth.updateUser({ email: next, password: 'both changed at once', current_password: PASSWORD, data: { n: 1 } } as never);
    expect(both.error).toBeNull();
    expect(both.data.user).toMatchObject({ email, new_email: next, user_metadata: { n: 1 } });
    expect((await supabase().auth.signInWithPassword({ email, password: 'both changed at once' })).error).toBeNull();
  });
});

describe('/auth/v1/admin/users: the service-role key only', () => {
  it('supabase.auth.admin lists, reads and deletes users with the service-role key', async () => {
    const service = createClient(baseUrl, await apiKey('service_role'), {
      auth: { persistSession: false, autoRefreshToken: false },
      global: { fetch: checkedFetch },
      realtime: { transport: WebSocket as never },
    });
    const email = uniqueEmail('sb-admin');
    const up = await supabase().auth.signUp({ email, password: PASSWORD });
    const id = up.data.user!.id;
    const list = await service.auth.admin.listUsers({ page: 1, perPage: 1000 });
    expect(list.error).toBeNull();
    expect(list.data.users.length).toBeGreaterThan(0);
    const second = await service.auth.admin.listUsers({ page: 2, perPage: 1 });
    expect(second.error).toBeNull();
    expect(second.data.users).toHaveLength(1);
    const got = await service.auth.admin.getUserById(id);
    expect(got.error).toBeNull();
    expect(got.data.user).toMatchObject({ id, email });
    const deleted = await service.auth.admin.deleteUser(id);
    expect(deleted.error).toBeNull();
    expect((await db()`select 1 from identity.users where id = ${id}`).length).toBe(0);
    expect((await service.auth.admin.getUserById(id)).error).toMatchObject({ status: 404, code: 'user_not_found' });
    expect((await supabase().auth.signInWithPassword({ email, password: PASSWORD })).error).toMatchObject({ code: 'invalid_credentials' });
  });

  it('supabase.auth.admin creates and updates users: the password hashed in the gateway, every change or none, a new password ends the sessions', async () => {
    const service = createClient(baseUrl, await apiKey('service_role'), {
      auth: { persistSession: false, autoRefreshToken: false },
      global: { fetch: checkedFetch },
      realtime: { transport: WebSocket as never },
    });
    const email = uniqueEmail('sb-admin-made');
    const made = await service.auth.admin.createUser({ email, password: PASSWORD, email_confirm: true, user_metadata: { name: 'Made' } });
    expect(made.error).toBeNull();
    expect(made.data.user).toMatchObject({ email, user_metadata: { name: 'Made' }, app_metadata: { provider: 'email' } });
    const id = made.data.user!.id;
    // Hashed in the gateway as every password is (bcrypt), never stored as given.
    const [stored] = await db()<{ password_hash: string }[]>`select password_hash from identity.users where id = ${id}`;
    expect(stored!.password_hash).toMatch(/^\$2[aby]\$/);
    const user = supabase();
    const signedIn = await user.auth.signInWithPassword({ email, password: PASSWORD });
    expect(signedIn.error).toBeNull();

    const again = await service.auth.admin.createUser({ email: email.toUpperCase(), password: PASSWORD });
    expect(again.error).toMatchObject({ status: 422, code: 'email_exists' });
    const phone = await service.auth.admin.createUser({ phone: '+15555550100', password: PASSWORD });
    expect(phone.error).toMatchObject({ status: 422, code: 'phone_provider_disabled' });
    const banned = await service.auth.admin.createUser({ email: uniqueEmail('sb-admin-ban'), ban_duration: '24h' });
    expect(banned.error).toMatchObject({ status: 422, code: 'validation_failed' });

    // All or nothing: a taken address with new metadata changes neither.
    const other = uniqueEmail('sb-admin-other');
    await supabase().auth.signUp({ email: other, password: PASSWORD });
    const refused = await service.auth.admin.updateUserById(id, { email: other, user_metadata: { name: 'Changed' } });
    expect(refused.error).toMatchObject({ status: 422, code: 'email_exists' });
    expect((await service.auth.admin.getUserById(id)).data.user).toMatchObject({ email, user_metadata: { name: 'Made' } });

    const renamed = uniqueEmail('sb-admin-renamed');
    const updated = await service.auth.admin.updateUserById(id, { email: renamed, password: 'another horse battery staple', user_metadata: { name: null, city: 'Lyon' } });
    expect(updated.error).toBeNull();
    expect(updated.data.user).toMatchObject({ email: renamed, user_metadata: { city: 'Lyon' } });
    expect(updated.data.user!.user_metadata).not.toHaveProperty('name');
    // The new password ended the user's session: its refresh token no longer works.
    expect((await user.auth.refreshSession()).error).not.toBeNull();
    expect((await supabase().auth.signInWithPassword({ email, password: PASSWORD })).error).toMatchObject({ code: 'invalid_credentials' });
    expect((await supabase().auth.signInWithPassword({ email: renamed, password: 'another horse battery staple' })).error).toBeNull();
    expect((await service.auth.admin.updateUserById('00000000-0000-4000-8000-000000000000', { user_metadata: {} })).error).toMatchObject({ status: 404, code: 'user_not_found' });
  });

  it('attack: the anon key, a user\'s access token or the anon key with a service-role apikey are 403 not_admin, and change nothing', async () => {
    const email = uniqueEmail('sb-notadmin');
    const up = await supabase().auth.signUp({ email, password: PASSWORD });
    const id = up.data.user!.id;
    const token = up.data.session!.access_token;
    const service = await apiKey('service_role');
    const attempts = [
      { apikey: ANON_KEY, bearer: ANON_KEY },
      { apikey: ANON_KEY, bearer: token },
      { apikey: service, bearer: token },
      { apikey: service, bearer: ANON_KEY },
      { apikey: ANON_KEY, bearer: service },
    ];
    for (const { apikey, bearer } of attempts) {
      for (const [method, path, body] of [
        ['GET', '/auth/v1/admin/users', undefined],
        ['GET', `/auth/v1/admin/users/${id}`, undefined],
        ['DELETE', `/auth/v1/admin/users/${id}`, undefined],
        ['POST', '/auth/v1/admin/users', { email: uniqueEmail('sb-notadmin-made'), password: PASSWORD }],
        ['PUT', `/auth/v1/admin/users/${id}`, { password: 'taken over by an attacker', user_metadata: { owned: true } }],
      ] as const) {
        const res = await api(method, path, { headers: { apikey }, token: bearer, ...(body ? { body } : {}) });
        expect(res.status, `${method} ${path}`).toBe(403);
        expect(res.body).toMatchObject({ code: 403, error_code: 'not_admin' });
      }
    }
    const none = await api('GET', '/auth/v1/admin/users', { headers: { apikey: service } });
    expect(none.body).toMatchObject({ code: 401, error_code: 'no_authorization' });
    // And the supabase-js user client (anon key + session) is refused too.
    const client = supabase();
    // The refused PUTs changed nothing: the password still signs in, the metadata is as it was.
    const signedIn = await client.auth.signInWithPassword({ email, password: PASSWORD });
    expect(signedIn.error).toBeNull();
    expect(signedIn.data.user!.user_metadata).not.toHaveProperty('owned');
    expect((await client.auth.admin.deleteUser(id)).error).toMatchObject({ status: 403, code: 'not_admin' });
    expect((await db()`select 1 from identity.users where id = ${id}`).length).toBe(1);
  });

  it('a credential refused outside the admin routes is 403 forbidden, not not_admin (security review round 5)', async () => {
    const user = await registerUser('sb-narrow');
    const narrow = await createToken(user, { permissions: ['/api/mobile/tasks*'] });
    const wide = await createToken(user, { permissions: ['/*'] });
    // A token whose permissions do not name the path.
    const get = await api('GET', '/auth/v1/user', { headers: { apikey: ANON_KEY }, token: narrow.secret });
    expect(get.status).toBe(403);
    expect(get.body).toMatchObject({ code: 403, error_code: 'forbidden' });
    // An API token cannot change the account, whatever its permissions.
    const put = await api('PUT', '/auth/v1/user', { headers: { apikey: ANON_KEY }, token: wide.secret, body: { data: { x: 1 } } });
    expect(put.status).toBe(403);
    expect(put.body).toMatchObject({ code: 403, error_code: 'forbidden' });
  });
});

describe('one client for storage', () => {
  it('the signed-in client uploads and downloads with its session, with no extra line; signed out, it cannot', async () => {
    const client = supabase();
    const email = uniqueEmail('sb-storage');
    const up = await client.auth.signUp({ email, password: PASSWORD });
    const path = `${up.data.user!.id}/note.txt`;
    const put = await client.storage.from('attachments').upload(path, new Blob(['from the one client'], { type: 'text/plain' }));
    expect(put.error).toBeNull();
    const got = await client.storage.from('attachments').download(path);
    expect(got.error).toBeNull();
    expect(await got.data!.text()).toBe('from the one client');
    await client.auth.signOut();
    expect((await client.storage.from('attachments').download(path)).error).not.toBeNull();
  });
});

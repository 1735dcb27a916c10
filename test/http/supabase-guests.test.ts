// Guests through supabase-js unchanged (docs/supabase-sdks.md#guests):
// signInAnonymously gives a real user, `is_anonymous` in its User object and
// its access token; SQL decides what a guest may do (private.require_full_account);
// updateUser({ email, password }) makes it a full account keeping its id and
// what it made; guest sign-ins are counted per client address; with
// AUTH_ANONYMOUS_USERS=off they are refused as Supabase Auth refuses them;
// unconverted guests are pruned (private.guests_prune, the worker's crontab).
// Two dedicated gateways on the test database (TRUST_PROXY=1, so each test is
// its own client address; one with guests off).
import { decodeJwt } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../gateway/core/process/config.ts';
import { createLogger } from '../../gateway/core/process/log.ts';
import { startGateway, type RunningGateway } from '../../gateway/server.ts';
import { PERIODIC_JOBS } from '../../gateway/jobs/crontab.ts';
import { api, apiKey, databaseUrl, db, jwtSecret, publicUrl, registerUser, uniqueEmail } from '../helpers.ts';
import { createCommunity, createEvent } from '../support/event-fixtures.ts';
import { randomIp, stopSupabaseClients, supabaseAt } from '../support/supabase-js.ts';

const PASSWORD = 'correct horse battery staple';
const ANON_KEY = await apiKey('anon');
const GUESTS_PER_IP = 3;

let gateway: RunningGateway;
let guestsOff: RunningGateway;
const gatewayEnv = {
  PUBLIC_URL: publicUrl,
  PORT: '0',
  HOST: '127.0.0.1',
  JWT_SECRET: jwtSecret,
  DB_POOL_MAX: '4',
  TRUST_PROXY: '1',
};
beforeAll(async () => {
  gateway = await startGateway(loadConfig({ ...gatewayEnv, GUEST_SIGN_INS_PER_IP: String(GUESTS_PER_IP) }), databaseUrl, createLogger('silent'), {
    includeCurrentMigration: true,
  });
  guestsOff = await startGateway(loadConfig({ ...gatewayEnv, AUTH_ANONYMOUS_USERS: 'off' }), databaseUrl, createLogger('silent'), {
    includeCurrentMigration: true,
  });
});
afterAll(async () => {
  stopSupabaseClients();
  await gateway?.close();
  await guestsOff?.close();
});

const supabase = (on: RunningGateway = gateway, ip = randomIp()) => supabaseAt(on.url, ip);

/** A request to the shared gateway (a guest's token works on every gateway of the service), its answer checked against the OpenAPI document. */
const call = (method: string, path: string, token: string, body?: unknown) => api(method, path, { token, body });

async function guest(data?: Record<string, unknown>) {
  const client = supabase();
  const { data: signedIn, error } = await client.auth.signInAnonymously(data ? { options: { data } } : undefined);
  expect(error).toBeNull();
  return { client, session: signedIn.session!, user: signedIn.user! };
}

describe('guests through supabase-js', () => {
  it('signInAnonymously gives a real user with is_anonymous in its User object and its access token', async () => {
    const { client, session, user } = await guest({ nickname: 'Visitor' });
    expect(user).toMatchObject({
      email: '',
      is_anonymous: true,
      identities: [],
      app_metadata: {},
      user_metadata: { nickname: 'Visitor' },
    });
    expect(decodeJwt(session.access_token)).toMatchObject({
      sub: user.id,
      is_anonymous: true,
      role: 'authenticated',
      email: '',
      // One SQL function makes every extra claim (private.access_token_claims): a guest's have no provider.
      app_metadata: {},
      user_metadata: { nickname: 'Visitor' },
    });
    const [row] = await db()`select email, password_hash, is_anonymous from identity.users where id = ${user.id}`;
    expect(row).toEqual({
      email: null,
      password_hash: null,
      is_anonymous: true,
    });
    expect((await client.auth.getUser()).data.user).toMatchObject({
      id: user.id,
      is_anonymous: true,
    });
    // A refreshed token still says so.
    const refreshed = await client.auth.refreshSession();
    expect(refreshed.error).toBeNull();
    expect(decodeJwt(refreshed.data.session!.access_token)).toMatchObject({
      sub: user.id,
      is_anonymous: true,
    });
    const settings = await fetch(`${gateway.url}/auth/v1/settings`, {
      headers: { apikey: ANON_KEY },
    }).then((r) => r.json());
    expect(settings).toMatchObject({
      anonymous_users: true,
      external: { anonymous_users: true },
    });
  });

  it('a guest reads a community and its events, joins it and checks in, but creates no API token', async () => {
    const { session } = await guest();
    const community = await createCommunity();
    const event = await createEvent({
      communityId: community.id,
      starts: '-1 hours',
      ends: '2 hours',
    });
    expect((await call('GET', `/api/mobile/communities/${community.id}`, session.access_token)).status).toBe(200);
    const joined = await call('POST', `/api/mobile/communities/${community.id}/join`, session.access_token);
    expect(joined.status, joined.text).toBe(200);
    expect((await call('GET', `/api/mobile/events/${event.id}`, session.access_token)).status).toBe(200);
    // Its own profile and export: no address yet.
    const profile = await call('GET', '/api/mobile/profile', session.access_token);
    expect(profile.status, profile.text).toBe(200);
    expect(profile.body.data.email).toBeNull();
    const checkin = await call('POST', `/api/mobile/events/${event.id}/checkin`, session.access_token, {});
    expect(checkin.status, checkin.text).toBeLessThan(300);
    // Attack: a guest mints a long-lived credential.
    const token = await call('POST', '/api/docs/tokens', session.access_token, {
      name: 'guest token',
      permissions: ['/*'],
    });
    expect(token.status, token.text).toBe(403);
    expect(token.body.error).toBe('forbidden');
    expect((await db()`select count(*)::int as n from app.api_tokens t join identity.users u on u.id = t.user_id where u.is_anonymous`)[0]!.n).toBe(0);
  });

  it('updateUser({ email, password }) makes the guest a full account with the same id and what it made', async () => {
    const { client, user } = await guest();
    const community = await createCommunity();
    const { data: s } = await client.auth.getSession();
    expect((await call('POST', `/api/mobile/communities/${community.id}/join`, s.session!.access_token)).status).toBe(200);

    const email = uniqueEmail('guest');
    // One of the two alone is refused: a guest without a way back in would be locked out.
    expect((await client.auth.updateUser({ password: PASSWORD })).error).toMatchObject({ status: 422 });
    const updated = await client.auth.updateUser({
      email,
      password: PASSWORD,
      data: { nickname: 'Ada' },
    });
    expect(updated.error).toBeNull();
    expect(updated.data.user).toMatchObject({
      id: user.id,
      email,
      is_anonymous: false,
      app_metadata: { provider: 'email' },
      user_metadata: { nickname: 'Ada' },
    });

    // Signed in with the new password: the same user, its membership kept, a full account now.
    const again = supabase();
    const signedIn = await again.auth.signInWithPassword({
      email,
      password: PASSWORD,
    });
    expect(signedIn.error).toBeNull();
    expect(signedIn.data.user!.id).toBe(user.id);
    expect(decodeJwt(signedIn.data.session!.access_token)).toMatchObject({
      is_anonymous: false,
      email,
      app_metadata: { provider: 'email', providers: ['email'] },
    });
    const mine = await call('GET', '/api/mobile/communities', signedIn.data.session!.access_token);
    expect(JSON.stringify(mine.body)).toContain(community.id);
    expect((await call('POST', '/api/docs/tokens', signedIn.data.session!.access_token, { name: 'now allowed', permissions: ['/*'] })).status).toBe(201);
    // Converted once: a second updateUser is a plain account's (needs current_password).
    expect(
      (
        await client.auth.updateUser({
          email: uniqueEmail('again'),
          password: PASSWORD,
        })
      ).error
    ).toMatchObject({ status: 400 });
  });

  it("a guest cannot take an existing account's address", async () => {
    const owner = await registerUser('owner');
    const { client, user } = await guest();
    const taken = await client.auth.updateUser({
      email: owner.email,
      password: PASSWORD,
    });
    expect(taken.error).toMatchObject({ status: 422, code: 'email_exists' });
    const [row] = await db()`select email, is_anonymous from identity.users where id = ${user.id}`;
    expect(row).toEqual({ email: null, is_anonymous: true });
    // The owner's password still works, and is the only one.
    expect(
      (
        await supabase().auth.signInWithPassword({
          email: owner.email,
          password: owner.password,
        })
      ).error
    ).toBeNull();
  });

  it('guest sign-ins are counted per client address: past the limit 429, other addresses unaffected', async () => {
    const ip = randomIp();
    for (let i = 0; i < GUESTS_PER_IP; i++) expect((await supabase(gateway, ip).auth.signInAnonymously()).error).toBeNull();
    const refused = await supabase(gateway, ip).auth.signInAnonymously();
    expect(refused.error).toMatchObject({ status: 429 });
    expect((await db()`select count(*)::int as n from private.auth_failures where scope = 'guest' and key = ${ip}`)[0]!.n).toBe(GUESTS_PER_IP);
    expect((await supabase(gateway, randomIp()).auth.signInAnonymously()).error).toBeNull();
  });

  it('AUTH_ANONYMOUS_USERS=off: refused as Supabase Auth refuses, and settings say so', async () => {
    const before = (await db()`select count(*)::int as n from identity.users where is_anonymous`)[0]!.n;
    const { error } = await supabase(guestsOff).auth.signInAnonymously();
    expect(error).toMatchObject({
      status: 422,
      code: 'anonymous_provider_disabled',
    });
    expect((await db()`select count(*)::int as n from identity.users where is_anonymous`)[0]!.n).toBe(before);
    const settings = await fetch(`${guestsOff.url}/auth/v1/settings`, {
      headers: { apikey: ANON_KEY },
    }).then((r) => r.json());
    expect(settings).toMatchObject({
      anonymous_users: false,
      external: { anonymous_users: false },
    });
  });

  it('unconverted guests are pruned by the worker job; converted ones and accounts stay', async () => {
    const old = await guest();
    const converted = await guest();
    expect(
      (
        await converted.client.auth.updateUser({
          email: uniqueEmail('kept'),
          password: PASSWORD,
        })
      ).error
    ).toBeNull();
    const member = await registerUser('stays');
    await db()`update identity.users set created_at = now() - interval '31 days' where id in ${db()([old.user.id, converted.user.id, member.userId])}`;
    expect(PERIODIC_JOBS.find((j) => j.task === 'prune_guests')).toBeTruthy();
    await db()`select private.guests_prune(interval '30 days', 10000)`;
    const left = await db()`select id from identity.users where id in ${db()([old.user.id, converted.user.id, member.userId])}`;
    expect(left.map((r) => r.id).sort()).toEqual([converted.user.id, member.userId].sort());
    // The pruned guest's session is over.
    expect((await old.client.auth.getUser()).error).toBeTruthy();
  });
});

// Access tokens signed with the database's asymmetric keys and published as a
// JWKS (gateway/core/auth/jwt.ts, signing-keys.ts, sql/areas/jwks.sql):
// supabase-js getClaims verifies without asking the service, a standby key is
// published before it signs, a previous key verifies until revoked, a revoked
// key verifies nothing on any door, HS256 tokens and API keys still work.
// Also the admin side of Supabase Auth that server code relies on:
// listUsers' paging headers, app_metadata, GoTrue's invalid-e-mail answer.
import { createClient, type SupabaseClient } from '@supabase/supabase-js';
import { decodeJwt, decodeProtectedHeader, importJWK, SignJWT } from 'jose';
import { afterAll, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import { api, apiKey, baseUrl, db, forgeToken, publicUrl, registerUser, uniqueEmail } from '../helpers.ts';
import { contractCheckedFetch } from '../support/contract.ts';
import { eventually } from '../support/wait.ts';
import { newSigningKey } from '../../gateway/core/auth/signing-keys.ts';

const ANON_KEY = await apiKey('anon');
const SERVICE_KEY = await apiKey('service_role');

/** Every request a client sends, and fetch with every /auth/v1 answer checked against the OpenAPI document. */
function countingFetch(): { fetch: typeof fetch; requests: string[] } {
  const requests: string[] = [];
  return { requests, fetch: contractCheckedFetch(baseUrl, '/auth/v1/', (request) => requests.push(request)) };
}

const clients: SupabaseClient[] = [];
afterAll(() => {
  for (const c of clients) c.auth.stopAutoRefresh();
});

function supabase(key = ANON_KEY, fetchImpl: typeof fetch = countingFetch().fetch): SupabaseClient {
  const c = createClient(baseUrl, key, { global: { fetch: fetchImpl }, auth: { persistSession: false, autoRefreshToken: false }, realtime: { transport: WebSocket as never } });
  clients.push(c);
  return c;
}

async function jwks(): Promise<{ keys: { kid: string; alg: string; kty: string }[] }> {
  const res = await api('GET', '/auth/v1/.well-known/jwks.json');
  expect(res.status).toBe(200);
  return res.body;
}

async function signIn(email: string, password: string): Promise<string> {
  const res = await api('POST', '/api/auth/login', { body: { email, password } });
  expect(res.status).toBe(200);
  return res.body.access_token as string;
}

/** The status of the same token on each door: REST, Supabase Auth's getUser, /mcp. */
async function doors(token: string): Promise<{ rest: number; auth: number; mcp: number }> {
  const rest = (await api('GET', '/api/mobile/profile', { token })).status;
  const auth = (await api('GET', '/auth/v1/user', { token, headers: { apikey: ANON_KEY } })).status;
  const mcp = (
    await fetch(`${baseUrl}/mcp`, {
      method: 'POST',
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
      body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/list' }),
    })
  ).status;
  return { rest, auth, mcp };
}

describe('access tokens signed with an asymmetric key, published as a JWKS', () => {
  it('supabase-js getClaims verifies the access token with the JWKS alone: one fetch of it, no call to /user', async () => {
    const user = await registerUser('claims');
    const counted = countingFetch();
    const client = supabase(ANON_KEY, counted.fetch);
    const { data: signedIn, error } = await client.auth.signInWithPassword({ email: user.email, password: user.password });
    expect(error).toBeNull();
    const token = signedIn.session!.access_token;
    const header = decodeProtectedHeader(token);
    expect(header.alg).toBe('ES256');
    expect((await jwks()).keys.map((k) => k.kid)).toContain(header.kid);

    counted.requests.length = 0;
    const first = await client.auth.getClaims();
    expect(first.error).toBeNull();
    expect(first.data!.claims.sub).toBe(user.userId);
    expect(first.data!.header.kid).toBe(header.kid);
    expect(counted.requests).toEqual(['GET /auth/v1/.well-known/jwks.json']);

    // The JWKS is cached: verifying again (this token or a token given) asks nothing.
    counted.requests.length = 0;
    expect((await client.auth.getClaims(token)).error).toBeNull();
    expect((await client.auth.getClaims()).data!.claims.email).toBe(user.email);
    expect(counted.requests).toEqual([]);

    // A token whose payload was changed does not verify (locally, still without a call).
    const [h, p, s] = token.split('.');
    const changed = Buffer.from(JSON.stringify({ ...decodeJwt(token), sub: crypto.randomUUID() })).toString('base64url');
    const forged = await client.auth.getClaims(`${h}.${changed}.${s}`);
    expect(forged.error?.message).toMatch(/signature/i);
    expect(p).not.toBe(changed);
    expect(counted.requests).toEqual([]);
  });

  it('HS256 tokens signed with JWT_SECRET, and the API keys, keep working beside the asymmetric keys', async () => {
    const user = await registerUser('legacy');
    const { session_id } = decodeJwt(user.accessToken);
    const legacy = await forgeToken({ sub: user.userId, email: user.email, session_id });
    expect(decodeProtectedHeader(legacy).alg).toBe('HS256');
    expect(await doors(legacy)).toMatchObject({ rest: 200, auth: 200 });
    // The API keys are HS256 JWTs of the same secret: a service-role client still administers.
    const { data, error } = await supabase(SERVICE_KEY).auth.admin.getUserById(user.userId);
    expect(error).toBeNull();
    expect(data.user?.email).toBe(user.email);
    // An HS256 token signed with another secret is refused.
    const other = await forgeToken({ sub: user.userId, session_id }, { secret: 'another secret of at least thirty-two chars' });
    expect((await doors(other)).rest).toBe(401);
  });

  it('attack: a token signed with a key the service never had, naming the current kid, is refused on every door', async () => {
    const user = await registerUser('forger');
    const { kid } = decodeProtectedHeader(user.accessToken);
    const stranger = await newSigningKey('ES256');
    const forged = await new SignJWT({ ...decodeJwt(user.accessToken) })
      .setProtectedHeader({ alg: 'ES256', kid: kid!, typ: 'JWT' })
      .sign(await importJWK(stranger.privateJwk, 'ES256'));
    const statuses = await doors(forged);
    expect(statuses.rest).toBe(401);
    expect(statuses.auth).toBe(403);
    expect(statuses.mcp).toBe(401);
  });

  it('rotation: a standby key is published before it signs, the previous one verifies until revoked; attack: a revoked key is refused on REST, /auth/v1 and /mcp', async () => {
    const user = await registerUser('rotate');
    const before = user.accessToken;
    const oldKid = decodeProtectedHeader(before).kid!;

    // add: published (every process reloads on NOTIFY), not signing.
    const standby = await newSigningKey('RS256');
    await db()`select admin.signing_key_add(${standby.kid}, ${standby.alg}, ${db().json(standby.publicJwk as never)}, ${db().json(standby.privateJwk as never)})`;
    await eventually('the standby key published', async () => (await jwks()).keys.some((k) => k.kid === standby.kid));
    const published = (await jwks()).keys.find((k) => k.kid === standby.kid)!;
    expect(published).toMatchObject({ kty: 'RSA', alg: 'RS256', use: 'sig' });
    expect(published).not.toHaveProperty('d');
    expect(decodeProtectedHeader(await signIn(user.email, user.password)).kid).toBe(oldKid);
    // Only one standby at a time; the current key cannot be revoked.
    const second = await newSigningKey('ES256');
    await expect(db()`select admin.signing_key_add(${second.kid}, 'ES256', ${db().json(second.publicJwk as never)}, ${db().json(second.privateJwk as never)})`).rejects.toThrow(/standby key exists/);
    await expect(db()`select admin.signing_key_revoke(${oldKid})`).rejects.toThrow(/current key/);

    // rotate: the standby signs; the previous key still verifies (and is still published).
    await db()`select admin.signing_key_rotate()`;
    const after = await eventually('a token signed with the new key', async () => {
      const token = await signIn(user.email, user.password);
      return decodeProtectedHeader(token).kid === standby.kid && token;
    });
    expect(decodeProtectedHeader(after).alg).toBe('RS256');
    expect(await doors(after)).toMatchObject({ rest: 200, auth: 200 });
    expect(await doors(before)).toMatchObject({ rest: 200, auth: 200 });
    expect((await jwks()).keys.map((k) => k.kid)).toEqual(expect.arrayContaining([standby.kid, oldKid]));
    // supabase-js verifies the RS256 token locally too.
    expect((await supabase().auth.getClaims(after)).data?.claims.sub).toBe(user.userId);

    // revoke: the old key's tokens are refused on every door, at once, and it leaves the JWKS.
    await db()`select admin.signing_key_revoke(${oldKid})`;
    await eventually('the revoked key unpublished', async () => !(await jwks()).keys.some((k) => k.kid === oldKid));
    const refused = await doors(before);
    expect(refused.rest).toBe(401);
    expect(refused.auth).toBe(403);
    expect(refused.mcp).toBe(401);
    expect(await doors(after)).toMatchObject({ rest: 200, auth: 200 });
    const rows = await db()`select kid, status from admin.signing_keys_list()`;
    expect(rows.find((r) => r.kid === oldKid)?.status).toBe('revoked');
    expect(rows.find((r) => r.kid === standby.kid)?.status).toBe('current');
  });

  it('no request role reads the private keys', async () => {
    for (const role of ['anon', 'authenticated', 'service_role']) {
      await expect(db().begin(async (tx) => {
        await tx.unsafe(`set local role ${role}`);
        return tx`select private_jwk from identity.signing_keys`;
      })).rejects.toThrow(/permission denied/);
    }
  });
});

describe('auth.admin.listUsers: paging as supabase-js reads it', () => {
  it('works with no arguments (empty page and per_page) and sends X-Total-Count and Link', async () => {
    await registerUser('page');
    await registerUser('page');
    await registerUser('page');
    const admin = supabase(SERVICE_KEY);
    const all = await admin.auth.admin.listUsers();
    expect(all.error).toBeNull();
    const total = (all.data as unknown as { total: number }).total;
    expect(total).toBeGreaterThanOrEqual(3);
    expect(all.data.users).toHaveLength(total);

    const first = await admin.auth.admin.listUsers({ page: 1, perPage: 2 });
    expect(first.error).toBeNull();
    expect(first.data.users).toHaveLength(2);
    expect(first.data).toMatchObject({ nextPage: 2, lastPage: Math.ceil(total / 2), total });

    const res = await fetch(`${baseUrl}/auth/v1/admin/users?page=2&per_page=2`, { headers: { apikey: SERVICE_KEY, authorization: `Bearer ${SERVICE_KEY}` } });
    expect(res.status).toBe(200);
    expect(res.headers.get('x-total-count')).toBe(String(total));
    const last = Math.ceil(total / 2);
    const next = last > 2 ? `<${publicUrl}/auth/v1/admin/users?page=3&per_page=2>; rel="next", ` : '';
    expect(res.headers.get('link')).toBe(`${next}<${publicUrl}/auth/v1/admin/users?page=${last}&per_page=2>; rel="last"`);
  });
});

describe('app_metadata: the service says it, the user reads it', () => {
  it('the service-role key sets it (updateUserById); the user reads it in getUser and, after a refresh, in the access token', async () => {
    const user = await registerUser('appmeta');
    const admin = supabase(SERVICE_KEY);
    const updated = await admin.auth.admin.updateUserById(user.userId, { app_metadata: { plan: 'pro', roles: ['organiser'] } });
    expect(updated.error).toBeNull();
    expect(updated.data.user?.app_metadata).toEqual({ provider: 'email', providers: ['email'], plan: 'pro', roles: ['organiser'] });

    const client = supabase();
    const { data } = await client.auth.signInWithPassword({ email: user.email, password: user.password });
    const claims = decodeJwt(data.session!.access_token);
    expect(claims.app_metadata).toMatchObject({ plan: 'pro', roles: ['organiser'] });
    expect((await client.auth.getUser()).data.user?.app_metadata).toMatchObject({ plan: 'pro' });
    expect((await client.auth.getClaims()).data?.claims.app_metadata).toMatchObject({ plan: 'pro' });

    // A key given as null is removed; the next refreshed token carries the change.
    await admin.auth.admin.updateUserById(user.userId, { app_metadata: { plan: null } });
    const refreshed = await client.auth.refreshSession();
    expect(decodeJwt(refreshed.data.session!.access_token).app_metadata).toEqual({ provider: 'email', providers: ['email'], roles: ['organiser'] });

    // Rules read it from the claims (private.app_metadata()).
    const [row] = await db().begin(async (tx) => {
      await tx`select set_config('request.jwt.claims', ${JSON.stringify(decodeJwt(refreshed.data.session!.access_token))}, true)`;
      await tx.unsafe('set local role authenticated');
      return tx`select private.app_metadata() as meta`;
    });
    expect(row!.meta).toMatchObject({ roles: ['organiser'] });
  });

  it('attack: a user cannot write their own app_metadata, through PUT /auth/v1/user or the admin route', async () => {
    const user = await registerUser('selfpromote');
    const client = supabase();
    await client.auth.signInWithPassword({ email: user.email, password: user.password });
    const own = await api('PUT', '/auth/v1/user', { token: user.accessToken, headers: { apikey: ANON_KEY }, body: { app_metadata: { role: 'admin' }, data: { name: 'x' } } });
    expect(own.status).toBe(403);
    expect(own.body).toMatchObject({ error_code: 'not_admin' });
    const viaAdmin = await api('PUT', `/auth/v1/admin/users/${user.userId}`, { token: user.accessToken, headers: { apikey: ANON_KEY }, body: { app_metadata: { role: 'admin' } } });
    expect(viaAdmin.status).toBe(403);
    const [stored] = await db()`select app_metadata, user_metadata from identity.users where id = ${user.userId}`;
    expect(stored).toEqual({ app_metadata: {}, user_metadata: {} });
    // user_metadata travels in the token under its own name: it cannot stand in for app_metadata or the role.
    await client.auth.updateUser({ data: { app_metadata: { role: 'admin' }, role: 'service_role' } });
    const claims = decodeJwt((await client.auth.refreshSession()).data.session!.access_token);
    expect(claims.role).toBe('authenticated');
    expect(claims.app_metadata).toEqual({ provider: 'email', providers: ['email'] });
  });
});

describe("GoTrue's validation errors", () => {
  it('an invalid e-mail is 400 validation_failed "Unable to validate email address: invalid format", on sign-up and the admin routes', async () => {
    const signUp = await supabase().auth.signUp({ email: 'not-an-address', password: 'correct horse battery staple' });
    expect(signUp.error).toMatchObject({ status: 400, code: 'validation_failed', message: 'Unable to validate email address: invalid format' });
    const created = await supabase(SERVICE_KEY).auth.admin.createUser({ email: 'also not@an address', password: 'correct horse battery staple' });
    expect(created.error).toMatchObject({ status: 400, code: 'validation_failed', message: 'Unable to validate email address: invalid format' });
    const res = await api('POST', '/auth/v1/signup', { headers: { apikey: ANON_KEY }, body: { email: 'x@', password: 'correct horse battery staple' } });
    expect(res.status).toBe(400);
    expect(res.body).toEqual({ code: 400, error_code: 'validation_failed', msg: 'Unable to validate email address: invalid format' });
    // A valid one still signs up.
    expect((await supabase().auth.signUp({ email: uniqueEmail('valid'), password: 'correct horse battery staple' })).error).toBeNull();
  });
});

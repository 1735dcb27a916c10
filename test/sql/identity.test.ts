// The caller's database identity (gateway/core/auth/identity.ts), pinned for
// each kind of credential: made real (through the gateway's endpoints, or in
// SQL as the OAuth flow makes it), verified by the code each door verifies
// it with, turned into claims, and run in a real transaction
// (core/database/transaction.ts withClaims): the Postgres role, auth.uid()
// and auth.jwt() are what every SQL rule reads. A change to any of them
// changes what SQL sees, so it is made here, on purpose.
import crypto from 'node:crypto';
import { beforeAll, describe, expect, it } from 'vitest';
import { authenticateApiToken } from '../../gateway/core/auth/api-tokens.ts';
import { bearerToken } from '../../gateway/core/auth/bearer.ts';
import { callerOf, claimsOf } from '../../gateway/core/auth/identity.ts';
import { createAccessTokenVerifier, type AccessClaims } from '../../gateway/core/auth/jwt.ts';
import { withClaims, type RequestClaims } from '../../gateway/core/database/transaction.ts';
import { authenticateAgent } from '../../mcp-server/credentials.ts';
import { baseUrl, db, jwtSecret, publicUrl, registerUser } from '../helpers.ts';
import { createToken } from '../support/api-tokens.ts';
import { newCommunity } from '../support/sql-fixtures.ts';
import { mintOAuthToken } from '../mcp/support.ts';

const issuer = `${publicUrl}/api/auth`;
// The keys a door verifies access tokens with: the published signing keys
// (the JWKS) and JWT_SECRET for HS256 tokens.
let verify: (token: string) => AccessClaims;
beforeAll(async () => {
  const { keys } = (await (await fetch(`${baseUrl}/auth/v1/.well-known/jwks.json`)).json()) as { keys: (crypto.JsonWebKey & { alg: string; kid: string })[] };
  const published = keys.map((jwk) => ({
    alg: jwk.alg,
    kid: jwk.kid,
    material: crypto.createPublicKey({ key: jwk, format: 'jwk' }).export({ type: 'spki', format: 'pem' }) as string,
  }));
  verify = createAccessTokenVerifier([{ alg: 'HS256', kid: undefined, material: Buffer.from(jwtSecret) }, ...published], { issuer });
});
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;
const seconds = (iso: string) => Math.floor(Date.parse(iso) / 1000);

interface SeenBySql {
  role: string;
  uid: string | null;
  jwt: Record<string, unknown> | null;
}

/** What SQL sees in a transaction run with `claims`. */
async function seenBySql(claims: RequestClaims | null): Promise<SeenBySql> {
  const [row] = await withClaims(db(), claims, (tx) => tx<SeenBySql[]>`
    select current_user::text as role, auth.uid() as uid, nullif(current_setting('request.jwt.claims', true), '')::jsonb as jwt`);
  return row!;
}

describe("the caller's database identity, per kind of credential", () => {
  it('an access token: its verified claims as signed, run as authenticated', async () => {
    const user = await registerUser('identity');
    const claims = claimsOf({ kind: 'access_token', claims: verify(user.accessToken) });
    expect(claims).toEqual({
      role: 'authenticated',
      aud: 'authenticated',
      iss: issuer,
      sub: user.userId,
      email: user.email,
      session_id: expect.stringMatching(UUID),
      iat: expect.any(Number),
      exp: expect.any(Number),
      // Supabase Auth's claims, from private.access_token_claims.
      app_metadata: { provider: 'email', providers: ['email'] },
      user_metadata: {},
      is_anonymous: false,
    });
    expect(await seenBySql(claims)).toEqual({ role: 'authenticated', uid: user.userId, jwt: { ...claims } });
    // The REST pipeline's caller runs with exactly these claims.
    expect(callerOf({ kind: 'access_token', claims: verify(user.accessToken) })).toEqual({ user: claims, apiToken: null });
  });

  it('a personal API token: its owner, the token, no community, and its expiry when it has one', async () => {
    const user = await registerUser('identity-pat');
    const expiresAt = new Date(Date.now() + 86_400_000).toISOString();
    const expiring = await createToken(user, { permissions: ['/api/mobile/*', '/mcp'], expires_at: expiresAt });
    const claims = claimsOf({ kind: 'api_token', token: await authenticateApiToken(db(), expiring.secret, '/api/mobile/profile') });
    expect(claims).toEqual({
      role: 'authenticated',
      aud: 'authenticated',
      sub: user.userId,
      token_id: expiring.id,
      token_community_id: null,
      exp: seconds(expiresAt),
    });
    expect(await seenBySql(claims)).toEqual({ role: 'authenticated', uid: user.userId, jwt: claims });
    // The same claims on the REST doors and on /mcp.
    expect(callerOf({ kind: 'api_token', token: await authenticateApiToken(db(), expiring.secret, '/api/mobile/profile') })).toEqual({
      user: claims,
      apiToken: { id: expiring.id, communityId: null },
    });
    expect((await authenticateAgent(db(), expiring.secret, '/mcp', [])).claims).toEqual(claims);

    const forever = await createToken(user, { permissions: ['/*'] });
    const foreverClaims = claimsOf({ kind: 'api_token', token: await authenticateApiToken(db(), forever.secret, '/api/mobile/profile') });
    expect(foreverClaims).toEqual({ role: 'authenticated', aud: 'authenticated', sub: user.userId, token_id: forever.id, token_community_id: null });
  });

  it("a community-scoped API token: its owner, the token and the token's community", async () => {
    const manager = await registerUser('identity-scoped');
    const community = await newCommunity({ manager: manager.email });
    const scoped = await createToken(manager, { community_id: community, permissions: ['/api/v1/platform/*'] });
    const token = await authenticateApiToken(db(), scoped.secret, '/api/v1/platform/events');
    const claims = claimsOf({ kind: 'api_token', token });
    expect(claims).toEqual({
      role: 'authenticated',
      aud: 'authenticated',
      sub: manager.userId,
      token_id: scoped.id,
      token_community_id: community,
    });
    expect(await seenBySql(claims)).toEqual({ role: 'authenticated', uid: manager.userId, jwt: claims });
    expect(callerOf({ kind: 'api_token', token }).apiToken).toEqual({ id: scoped.id, communityId: community });
  });

  it('an OAuth access token (the MCP process): the user, the client and the expiry', async () => {
    const user = await registerUser('identity-oauth');
    const secret = await mintOAuthToken(user.userId);
    const agent = await authenticateAgent(db(), secret, '/mcp', []);
    expect(agent.claims).toEqual({
      role: 'authenticated',
      aud: 'authenticated',
      sub: user.userId,
      oauth_client_id: agent.clientId,
      exp: agent.expiresAt,
    });
    expect(agent.clientId).toMatch(/^test-client-/);
    expect(await seenBySql(agent.claims)).toEqual({ role: 'authenticated', uid: user.userId, jwt: agent.claims });
  });

  it('no credential: anon, with no user', async () => {
    const claims = claimsOf({ kind: 'anon' });
    expect(claims).toEqual({ role: 'anon' });
    expect(await seenBySql(claims)).toEqual({ role: 'anon', uid: null, jwt: { role: 'anon' } });
  });

  it("the gateway itself: no claims, the connection's own role", async () => {
    const [own] = await db()<{ role: string }[]>`select current_user::text as role`;
    expect(claimsOf({ kind: 'gateway' })).toBeNull();
    expect(await seenBySql(claimsOf({ kind: 'gateway' }))).toEqual({ role: own!.role, uid: null, jwt: null });
  });
});

describe('the bearer header, one parser for every door', () => {
  it('takes `Bearer <token>` in any case, and nothing else', () => {
    expect(bearerToken('Bearer abc.def')).toBe('abc.def');
    expect(bearerToken('bearer   cbk_x  ')).toBe('cbk_x');
    expect(bearerToken('BEARER t')).toBe('t');
    for (const header of [undefined, '', 'Bearer', 'Bearer ', 'Basic dXNlcjpwYXNz', 'Bearer a b', 'Token abc', ' Bearer abc']) {
      expect(bearerToken(header), String(header)).toBeNull();
    }
  });
});

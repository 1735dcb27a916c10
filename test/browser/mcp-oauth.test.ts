// OAuth 2.0 for the agent interface, as an MCP client does it: the SDK
// client's own auth support (discovery from the 401, dynamic client
// registration, authorization code + PKCE S256) with the sign-in and consent
// page completed in headless Chromium; then tools work with the access token
// and the refresh token rotates. Plus the discovery documents and the
// refusals (wrong password, denial, code reuse, wrong verifier).
import crypto from 'node:crypto';
import http from 'node:http';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { UnauthorizedError, type OAuthClientProvider } from '@modelcontextprotocol/sdk/client/auth.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { OAuthClientInformationMixed, OAuthClientMetadata, OAuthTokens } from '@modelcontextprotocol/sdk/shared/auth.js';
import type { BrowserContext } from 'playwright-core';
import { chromiumAvailable, launchChromium, type Browser } from '../support/browser.ts';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { api, baseUrl, db, publicUrl, registerUser, type TestUser } from '../helpers.ts';
import { callTool, createManagedCommunity } from '../mcp/support.ts';

const available = chromiumAvailable('mcp-oauth');

/** An in-memory OAuth client for the SDK, redirecting to a local callback. */
class TestClientProvider implements OAuthClientProvider {
  info: OAuthClientInformationMixed | undefined;
  saved: OAuthTokens | undefined;
  verifier = '';
  authorizationUrl: URL | undefined;
  constructor(readonly redirect: string) {}
  get redirectUrl(): string {
    return this.redirect;
  }
  get clientMetadata(): OAuthClientMetadata {
    return {
      client_name: 'Test <Agent>',
      redirect_uris: [this.redirect],
      grant_types: ['authorization_code', 'refresh_token'],
      response_types: ['code'],
      token_endpoint_auth_method: 'none',
    };
  }
  clientInformation() {
    return this.info;
  }
  saveClientInformation(info: OAuthClientInformationMixed) {
    this.info = info;
  }
  tokens() {
    return this.saved;
  }
  saveTokens(tokens: OAuthTokens) {
    this.saved = tokens;
  }
  redirectToAuthorization(url: URL) {
    this.authorizationUrl = url;
  }
  saveCodeVerifier(v: string) {
    this.verifier = v;
  }
  codeVerifier() {
    return this.verifier;
  }
}

/** A local redirect target that remembers the query it received. */
async function callbackServer(): Promise<{ url: string; next(): Promise<URLSearchParams>; close(): Promise<void> }> {
  let waiting: ((q: URLSearchParams) => void) | undefined;
  const server = http.createServer((req, res) => {
    const query = new URL(req.url ?? '/', 'http://x').searchParams;
    res.end('done');
    waiting?.(query);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()));
  const port = (server.address() as { port: number }).port;
  return {
    url: `http://127.0.0.1:${port}/callback`,
    next: () => new Promise((resolve) => (waiting = resolve)),
    close: () => new Promise((resolve) => server.close(() => resolve())),
  };
}

describe('discovery documents', () => {
  it('authorization server, OpenID configuration and protected resource describe the same endpoints', async () => {
    const as = await api('GET', '/.well-known/oauth-authorization-server');
    const oidc = await api('GET', '/.well-known/openid-configuration');
    const prm = await api('GET', '/.well-known/oauth-protected-resource/mcp');
    const prmRoot = await api('GET', '/.well-known/oauth-protected-resource');
    expect(as.status).toBe(200);
    expect(as.body).toMatchObject({
      authorization_endpoint: `${baseUrl}/authorize`,
      token_endpoint: `${baseUrl}/token`,
      registration_endpoint: `${baseUrl}/register`,
      code_challenge_methods_supported: ['S256'],
      response_types_supported: ['code'],
    });
    for (const key of ['issuer', 'authorization_endpoint', 'token_endpoint', 'registration_endpoint', 'revocation_endpoint']) {
      expect(oidc.body[key]).toBe(as.body[key]);
    }
    expect(prm.body).toMatchObject({ resource: `${baseUrl}/mcp`, authorization_servers: [as.body.issuer] });
    expect(prmRoot.body).toEqual(prm.body);
  });
});

describe.skipIf(!available)('authorization code + PKCE with the SDK client and a real browser', () => {
  let context: BrowserContext;
  let browser: Browser | undefined;
  let user: TestUser;
  let community: string;
  let callback: Awaited<ReturnType<typeof callbackServer>>;

  beforeAll(async () => {
    user = await registerUser('oauth');
    community = await createManagedCommunity(user.email);
    callback = await callbackServer();
    browser = await launchChromium('mcp-oauth');
    context = browser.context;
  });

  afterAll(async () => {
    await browser?.close();
    await callback?.close();
  });

  /** Opens the authorization URL, signs in, and returns the query the client's redirect URI got. */
  async function consent(url: URL, password: string, decision: 'allow' | 'deny' = 'allow'): Promise<URLSearchParams> {
    const page = await context.newPage();
    try {
      await page.goto(url.href);
      await page.fill('#email', user.email);
      await page.fill('#password', password);
      const arrived = callback.next();
      await page.click(`button[value="${decision}"]`);
      return await arrived;
    } finally {
      await page.close();
    }
  }

  it('connects, signs in and consents, then calls tools; refresh rotates; a wrong password is refused', async () => {
    const provider = new TestClientProvider(callback.url);
    const first = new Client({ name: 'oauth-agent', version: '1' });
    const transport = new StreamableHTTPClientTransport(new URL(`${baseUrl}/mcp`), { authProvider: provider });
    // 1. No token yet: 401 → discovery → registration → authorization URL.
    await expect(first.connect(transport)).rejects.toBeInstanceOf(UnauthorizedError);
    expect(provider.info?.client_id).toBeTruthy();
    const url = provider.authorizationUrl!;
    expect(url.origin + url.pathname).toBe(`${baseUrl}/authorize`);
    expect(url.searchParams.get('code_challenge_method')).toBe('S256');

    // 2. A wrong password shows the form again (401), escaped client name.
    const page = await context.newPage();
    const response = await page.goto(url.href);
    expect(response!.status()).toBe(200);
    expect(response!.headers()['content-security-policy']).toContain("frame-ancestors 'none'");
    expect(await page.textContent('h1')).toContain('Test <Agent>');
    await page.fill('#email', user.email);
    await page.fill('#password', 'wrong password');
    const [wrong] = await Promise.all([page.waitForNavigation(), page.click('button[value="allow"]')]);
    expect(wrong!.status()).toBe(401);
    expect(await page.textContent('[role=alert]')).toContain('Wrong e-mail or password');
    // 3. The right one: redirect to the client with a code (and the state).
    await page.fill('#email', user.email);
    await page.fill('#password', user.password);
    const arrived = callback.next();
    await page.click('button[value="allow"]');
    const query = await arrived;
    await page.close();
    const code = query.get('code')!;
    expect(code).toBeTruthy();
    expect(query.get('state')).toBe(url.searchParams.get('state'));

    // 4. The SDK exchanges the code (PKCE verifier) for tokens.
    await transport.finishAuth(code);
    expect(provider.saved?.access_token).toMatch(/^cboa_/);
    expect(provider.saved?.refresh_token).toMatch(/^cbor_/);
    const client = new Client({ name: 'oauth-agent', version: '1' });
    await client.connect(new StreamableHTTPClientTransport(new URL(`${baseUrl}/mcp`), { authProvider: provider }));
    const answer = await callTool(client, 'community_profile', { community_id: community });
    expect(answer.isError).toBe(false);
    expect(answer.body.id).toBe(community);
    await client.close();

    // The code is single-use: a second exchange fails and revokes what it issued.
    const reuse = await fetch(`${baseUrl}/token`, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams({
        grant_type: 'authorization_code',
        code,
        code_verifier: provider.verifier,
        client_id: provider.info!.client_id,
        redirect_uri: callback.url,
      }),
    });
    expect(reuse.status).toBe(400);
    expect((await reuse.json()).error).toBe('invalid_grant');
    const revoked = await fetch(`${baseUrl}/mcp`, {
      method: 'POST',
      headers: { authorization: `Bearer ${provider.saved!.access_token}`, 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
      body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/list' }),
    });
    expect(revoked.status).toBe(401);

    // Stored hashed only.
    const [stored] = await db()`select count(*)::int as n from identity.oauth_tokens
                                where token_hash = extensions.digest(${provider.saved!.access_token}, 'sha256')`;
    expect(stored!.n).toBe(1);
    const plain = await db()`select 1 from identity.oauth_tokens where encode(token_hash, 'escape') like '%cboa_%'`;
    expect(plain).toHaveLength(0);
  });

  it('step-up (MCP 2025-11-25): a read-only token meets 403 insufficient_scope on a write; the SDK client asks for both scopes, the user consents, the call goes through', async () => {
    const provider = new TestClientProvider(callback.url);
    const registering = new StreamableHTTPClientTransport(new URL(`${baseUrl}/mcp`), { authProvider: provider });
    await expect(new Client({ name: 'step-up', version: '1' }).connect(registering)).rejects.toBeInstanceOf(UnauthorizedError);
    // As after an earlier consent to reading only: a read-only token of this client, for /mcp.
    const [row] = await db()`select * from private.oauth_issue_tokens(${provider.info!.client_id}, ${user.userId}, gen_random_uuid(),
                                                                     ${['mcp:read']}, ${`${publicUrl}/mcp`}, 3600)`;
    provider.saved = { access_token: row!.access_token, token_type: 'Bearer', scope: 'mcp:read' };
    provider.authorizationUrl = undefined;
    const transport = new StreamableHTTPClientTransport(new URL(`${baseUrl}/mcp`), { authProvider: provider });
    const client = new Client({ name: 'step-up', version: '1' });
    await client.connect(transport);
    await client.listTools();
    expect((await callTool(client, 'community_profile', { community_id: community })).isError).toBe(false);

    const write = { community_id: community, accepts_handoffs: true };
    await expect(client.callTool({ name: 'set_onboarding_opt_in', arguments: write })).rejects.toBeInstanceOf(UnauthorizedError);
    const url = provider.authorizationUrl!;
    expect(url.searchParams.get('scope')).toBe('mcp:read mcp:write');
    const query = await consent(url, user.password);
    await transport.finishAuth(query.get('code')!);
    expect(provider.saved!.scope).toBe('mcp:read mcp:write');
    const answer = await callTool(client, 'set_onboarding_opt_in', write);
    expect(answer).toMatchObject({ isError: false, body: { id: community, accepts_handoffs: true } });
    await client.close();
  });

  it('refresh tokens rotate; a rotated one revokes the family', async () => {
    const provider = new TestClientProvider(callback.url);
    const transport = new StreamableHTTPClientTransport(new URL(`${baseUrl}/mcp`), { authProvider: provider });
    await expect(new Client({ name: 'r', version: '1' }).connect(transport)).rejects.toBeInstanceOf(UnauthorizedError);
    const query = await consent(provider.authorizationUrl!, user.password);
    await transport.finishAuth(query.get('code')!);
    const refresh = (token: string) =>
      fetch(`${baseUrl}/token`, {
        method: 'POST',
        headers: { 'content-type': 'application/x-www-form-urlencoded' },
        body: new URLSearchParams({ grant_type: 'refresh_token', refresh_token: token, client_id: provider.info!.client_id }),
      });
    const firstRefresh = provider.saved!.refresh_token!;
    const rotated = await refresh(firstRefresh);
    expect(rotated.status).toBe(200);
    const next = (await rotated.json()) as OAuthTokens;
    expect(next.refresh_token).not.toBe(firstRefresh);
    expect((await refresh(firstRefresh)).status).toBe(400);
    // Reuse revoked the family, the new pair included.
    expect((await refresh(next.refresh_token!)).status).toBe(400);
  });

  it('denial redirects with access_denied; a wrong PKCE verifier is invalid_grant', async () => {
    const provider = new TestClientProvider(callback.url);
    const transport = new StreamableHTTPClientTransport(new URL(`${baseUrl}/mcp`), { authProvider: provider });
    await expect(new Client({ name: 'd', version: '1' }).connect(transport)).rejects.toBeInstanceOf(UnauthorizedError);
    const denied = await consent(provider.authorizationUrl!, '', 'deny');
    expect(denied.get('error')).toBe('access_denied');

    const again = new StreamableHTTPClientTransport(new URL(`${baseUrl}/mcp`), { authProvider: provider });
    await expect(new Client({ name: 'd', version: '1' }).connect(again)).rejects.toBeInstanceOf(UnauthorizedError);
    const granted = await consent(provider.authorizationUrl!, user.password);
    const exchange = await fetch(`${baseUrl}/token`, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams({
        grant_type: 'authorization_code',
        code: granted.get('code')!,
        code_verifier: crypto.randomBytes(32).toString('base64url'),
        client_id: provider.info!.client_id,
        redirect_uri: callback.url,
      }),
    });
    expect(exchange.status).toBe(400);
    expect((await exchange.json()).error).toBe('invalid_grant');
  });
});

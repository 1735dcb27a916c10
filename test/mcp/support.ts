// Helpers for the agent-interface tests: agents (users with a personal API
// token or an OAuth access token), communities they manage, and an MCP SDK
// client connected through the gateway's /mcp.
import crypto from 'node:crypto';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { afterAll, expect } from 'vitest';
import { loadConfig } from '../../gateway/core/process/config.ts';
import { createLogger } from '../../gateway/core/process/log.ts';
import { startMcpServer, type RunningMcpServer } from '../../mcp-server/server.ts';
import { api, baseUrl, databaseUrl, db, mcpUrl, publicUrl, registerUser, type TestUser } from '../helpers.ts';
import { newCommunity } from '../support/sql-fixtures.ts';

export { mcpUrl };

export interface Agent extends TestUser {
  /** A personal API token (cbk_...). */
  apiToken: string;
}

/** A registered user with a personal API token (its permissions name /mcp: they govern /mcp too). */
export async function createAgent(prefix = 'agent'): Promise<Agent> {
  const user = await registerUser(prefix);
  const created = await api('POST', '/api/docs/tokens', {
    token: user.accessToken,
    body: { name: 'mcp test', permissions: ['/api/*', '/mcp'] },
  });
  if (created.status !== 201) throw new Error(`token creation failed: ${created.status} ${created.text}`);
  return { ...user, apiToken: created.body.token_value };
}

/** An OAuth access token minted directly in SQL (the browser flow has its own test), for `resource` if given. */
export async function mintOAuthToken(userId: string, scopes = ['mcp:read', 'mcp:write'], resource: string | null = null): Promise<string> {
  const clientId = `test-client-${crypto.randomBytes(4).toString('hex')}`;
  await db()`select private.oauth_client_register(${clientId}, null, 0, extract(epoch from now())::bigint,
                                                  ${db().json({ redirect_uris: ['http://localhost/cb'], client_name: 'test' })})`;
  const [row] = await db()`select * from private.oauth_issue_tokens(${clientId}, ${userId}, gen_random_uuid(), ${scopes}, ${resource}, 3600)`;
  return row!.access_token as string;
}

/** A community managed by the user (through the operator function). */
export function createManagedCommunity(managerEmail: string, name = 'Community'): Promise<string> {
  return newCommunity({ name: `${name} ${crypto.randomBytes(3).toString('hex')}`, description: 'A place', tags: ['mcp', 'test'], manager: managerEmail });
}

const clients: Client[] = [];
afterAll(async () => {
  await Promise.all(clients.splice(0).map((c) => c.close().catch(() => {})));
});

/**
 * An SDK client connected (initialized, at the current protocol revision)
 * through the gateway with the bearer credential. It has listed the tools, as
 * an agent does: from then on the SDK checks every tool's structuredContent
 * against its outputSchema (so every test of a tool checks its answer's shape).
 */
export async function connect(token: string, url = `${baseUrl}/mcp`): Promise<Client> {
  const client = new Client({ name: 'mcp-tests', version: '1.0.0' });
  const transport = new StreamableHTTPClientTransport(new URL(url), {
    requestInit: { headers: { authorization: `Bearer ${token}` } },
  });
  await client.connect(transport);
  clients.push(client);
  await client.listTools();
  return client;
}

export interface ToolAnswer<T = any> {
  isError: boolean;
  body: T;
}

/** Calls a tool and parses its JSON text answer. */
export async function callTool<T = any>(client: Client, name: string, args?: unknown): Promise<ToolAnswer<T>> {
  const result = await client.callTool({ name, arguments: args as Record<string, unknown> | undefined });
  const content = result.content as { type: string; text: string }[];
  const text = content[0]?.type === 'text' ? content[0].text : '';
  const body = JSON.parse(text) as T;
  // A success carries the same object as structuredContent (which the SDK
  // has checked against the tool's outputSchema); an error carries none.
  if (result.isError === true) expect(result.structuredContent).toBeUndefined();
  else expect(result.structuredContent).toEqual(body);
  return { isError: result.isError === true, body };
}

/** A raw JSON-RPC POST to /mcp (for what the SDK client never sends). */
export async function rawMcp(
  body: unknown,
  headers: Record<string, string> = {},
  url = `${baseUrl}/mcp`,
): Promise<{ status: number; headers: Headers; text: string; json: any }> {
  const res = await fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', ...headers },
    body: typeof body === 'string' ? body : JSON.stringify(body),
  });
  const text = await res.text();
  return { status: res.status, headers: res.headers, text, json: parseRpc(text) };
}

/** The JSON-RPC message of a JSON or single-event SSE answer. */
export function parseRpc(text: string): any {
  try {
    return JSON.parse(text);
  } catch {
    const data = text
      .split('\n')
      .filter((l) => l.startsWith('data:'))
      .map((l) => l.slice(5).trim())
      .filter(Boolean);
    return data.length ? JSON.parse(data[data.length - 1]!) : undefined;
  }
}

/**
 * An extra MCP process (in this test process) on the shared test database,
 * reached directly: for replica and rate-limit tests. It trusts
 * X-Forwarded-For from loopback, so a test can pick the client address.
 */
export async function startReplica(env: Record<string, string> = {}): Promise<RunningMcpServer> {
  const config = loadConfig({
    PORT: new URL(baseUrl).port,
    PUBLIC_URL: publicUrl,
    MCP_PORT: '0',
    MCP_HOST: '127.0.0.1',
    TRUST_PROXY: '1',
    DB_POOL_MAX: '10',
    ...env,
  });
  const server = await startMcpServer(config, databaseUrl, createLogger('silent'));
  afterAll(() => server.close());
  return server;
}

/** The redirect URI of the OAuth clients the tests register (nothing listens there). */
export const REDIRECT = 'http://127.0.0.1:9/callback';

/** Dynamic client registration (a public client), as a script would do it. */
export async function registerClient(redirectUris = [REDIRECT]): Promise<{ status: number; body: any }> {
  const res = await fetch(`${baseUrl}/register`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({
      client_name: 'script',
      redirect_uris: redirectUris,
      grant_types: ['authorization_code', 'refresh_token'],
      response_types: ['code'],
      token_endpoint_auth_method: 'none',
    }),
  });
  return { status: res.status, body: await res.json() };
}

/** GET /authorize for a fresh PKCE pair: the consent page's hidden request token. */
export async function authorize(clientId: string, redirectUri = REDIRECT): Promise<{ request: string; verifier: string; page: Response }> {
  const verifier = crypto.randomBytes(32).toString('base64url');
  const challenge = crypto.createHash('sha256').update(verifier).digest('base64url');
  const url = new URL(`${baseUrl}/authorize`);
  for (const [k, v] of Object.entries({
    response_type: 'code',
    client_id: clientId,
    redirect_uri: redirectUri,
    code_challenge: challenge,
    code_challenge_method: 'S256',
    state: 'st',
    scope: 'mcp:read mcp:write',
  })) url.searchParams.set(k, v);
  const page = await fetch(url, { redirect: 'manual' });
  expect(page.status).toBe(200);
  const html = await page.clone().text();
  const request = /name="request" value="([^"]+)"/.exec(html)?.[1];
  expect(request).toBeTruthy();
  return { request: request!, verifier, page };
}

/** The consent form, posted as the page would post it (allow). */
export async function consent(request: string, email: string, password: string) {
  const res = await fetch(`${baseUrl}/oauth/consent`, {
    method: 'POST',
    headers: { 'content-type': 'application/x-www-form-urlencoded' },
    body: new URLSearchParams({ request, email, password, decision: 'allow' }),
    redirect: 'manual',
  });
  return { status: res.status, location: res.headers.get('location'), retryAfter: res.headers.get('retry-after'), html: await res.text() };
}

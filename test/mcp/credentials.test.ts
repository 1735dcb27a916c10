// Credentials and sessions on /mcp: 401 with WWW-Authenticate, 403 for a
// community-scoped token, OAuth access tokens and their scopes, session ids
// kept in Postgres, DNS-rebinding protection, and the audit log.
import http from 'node:http';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { beforeAll, describe, expect, it } from 'vitest';
import { api, baseUrl, db, uniqueEmail } from '../helpers.ts';
import { callTool, connect, createAgent, createManagedCommunity, mintOAuthToken, parseRpc, rawMcp, type Agent } from './support.ts';

const INIT = {
  jsonrpc: '2.0',
  id: 1,
  method: 'initialize',
  params: { protocolVersion: '2025-03-26', capabilities: {}, clientInfo: { name: 'raw-client', version: '9' } },
};

let agent: Agent;
let community: string;

beforeAll(async () => {
  agent = await createAgent('cred');
  community = await createManagedCommunity(agent.email);
});

describe('credentials', () => {
  it('no credential: 401 with WWW-Authenticate pointing at the protected-resource metadata', async () => {
    const res = await rawMcp(INIT);
    expect(res.status).toBe(401);
    const challenge = res.headers.get('www-authenticate')!;
    expect(challenge).toMatch(/^Bearer /);
    expect(challenge).toContain(`resource_metadata="${baseUrl}/.well-known/oauth-protected-resource/mcp"`);
    expect(res.json).toMatchObject({ error: 'unauthorized' });
    const get = await fetch(`${baseUrl}/mcp`, { headers: { accept: 'text/event-stream' } });
    expect(get.status).toBe(401);
  });

  it.each([
    ['garbage', 'not-a-token'],
    ['unknown API token', `cbk_${'a'.repeat(40)}`],
    ['unknown OAuth token', 'cboa_abcdefghijklmnopqrstuvwxyz0123456789ABCDEFG'],
    ['a login JWT', 'login'],
  ])('%s: 401 invalid_token', async (_label, token) => {
    const bearer = token === 'login' ? agent.accessToken : token;
    const res = await rawMcp(INIT, { authorization: `Bearer ${bearer}` });
    expect(res.status).toBe(401);
    expect(res.headers.get('www-authenticate')).toContain('error="invalid_token"');
  });

  it('a deactivated API token is 401', async () => {
    const created = await api('POST', '/api/docs/tokens', { token: agent.accessToken, body: { name: 'short-lived', permissions: ['*'] } });
    const secret = created.body.token_value as string;
    expect((await rawMcp(INIT, { authorization: `Bearer ${secret}` })).status).toBe(200);
    await api('DELETE', `/api/docs/tokens/${created.body.token.id}`, { token: agent.accessToken });
    expect((await rawMcp(INIT, { authorization: `Bearer ${secret}` })).status).toBe(401);
  });

  it('a community-scoped API token is 403 community_scope_violation', async () => {
    const created = await api('POST', '/api/docs/tokens', {
      token: agent.accessToken,
      body: { name: 'scoped', permissions: ['/api/v1/*'], community_id: community },
    });
    expect(created.status).toBe(201);
    const res = await rawMcp(INIT, { authorization: `Bearer ${created.body.token_value}` });
    expect(res.status).toBe(403);
    expect(res.json).toMatchObject({ error: 'community_scope_violation' });
  });

  it("a token's permissions govern /mcp too (issue 27, finding 3): no pattern matching /mcp is 403, create_member included", async () => {
    for (const permissions of [['/api/mobile/profile'], ['/nothing'], ['/api/*'], ['/mcp/x'], ['/mc']]) {
      const created = await api('POST', '/api/docs/tokens', { token: agent.accessToken, body: { name: 'narrow', permissions } });
      const secret = created.body.token_value as string;
      const init = await rawMcp(INIT, { authorization: `Bearer ${secret}` });
      expect(init.status, JSON.stringify(permissions)).toBe(403);
      expect(init.json).toMatchObject({ error: 'forbidden' });
      const call = await rawMcp(
        { jsonrpc: '2.0', id: 2, method: 'tools/call', params: { name: 'create_member', arguments: { email: uniqueEmail('narrow') } } },
        { authorization: `Bearer ${secret}`, 'mcp-protocol-version': '2025-03-26' },
      );
      expect(call.status).toBe(403);
      // Its REST paths still work as before.
      if (permissions[0] === '/api/mobile/profile') {
        expect((await api('GET', '/api/mobile/profile', { token: secret })).status).toBe(200);
      }
    }
    const [made] = await db()`select count(*)::int as n from app.agent_members where agent_id = ${agent.userId}`;
    expect(made!.n).toBe(0);
    // A pattern that matches /mcp: the exact path, a prefix, or *.
    for (const permissions of [['/mcp'], ['/m*'], ['*'], ['/api/mobile/profile', '/mcp']]) {
      const created = await api('POST', '/api/docs/tokens', { token: agent.accessToken, body: { name: 'mcp', permissions } });
      const client = await connect(created.body.token_value);
      expect((await callTool(client, 'community_profile', { community_id: community })).isError, JSON.stringify(permissions)).toBe(false);
      // /mcp/ is the same resource, governed by the same pattern.
      expect((await rawMcp(INIT, { authorization: `Bearer ${created.body.token_value}` }, `${baseUrl}/mcp/`)).status).toBe(200);
    }
  });

  it('the tools check it in SQL too: claims of a token that does not match /mcp, or has ended, are refused by every tool', async () => {
    const narrow = await api('POST', '/api/docs/tokens', { token: agent.accessToken, body: { name: 'sql', permissions: ['/api/*'] } });
    const wide = await api('POST', '/api/docs/tokens', { token: agent.accessToken, body: { name: 'sql', permissions: ['/mcp'] } });
    const claims = (tokenId: string) => ({ role: 'authenticated' as const, sub: agent.userId, aud: 'authenticated', token_id: tokenId, token_community_id: null });
    const { withClaims } = await import('../../gateway/core/database/transaction.ts');
    const call = (tokenId: string) => withClaims(db(), claims(tokenId), (tx) => tx`select api.mcp_community_profile(${community}) as p`);
    await expect(call(narrow.body.token.id)).rejects.toMatchObject({ code: 'PT403', hint: 'forbidden' });
    await expect(call(wide.body.token.id)).resolves.toHaveLength(1);
    await api('DELETE', `/api/docs/tokens/${wide.body.token.id}`, { token: agent.accessToken });
    await expect(call(wide.body.token.id)).rejects.toMatchObject({ code: 'PT403', hint: 'forbidden' });
  });

  it('an OAuth access token works; a read-only one reads (its writes: test/mcp/protocol.test.ts, scope step-up)', async () => {
    const full = await connect(await mintOAuthToken(agent.userId));
    expect((await callTool(full, 'community_profile', { community_id: community })).isError).toBe(false);
    const readOnly = await connect(await mintOAuthToken(agent.userId, ['mcp:read']));
    expect((await callTool(readOnly, 'community_profile', { community_id: community })).isError).toBe(false);
  });

  it('a revoked or expired OAuth token is 401', async () => {
    const token = await mintOAuthToken(agent.userId);
    await db()`update identity.oauth_tokens set expires_at = now() - interval '1 second'
               where token_hash = extensions.digest(${token}, 'sha256')`;
    expect((await rawMcp(INIT, { authorization: `Bearer ${token}` })).status).toBe(401);
  });
});

describe('sessions', () => {
  async function initialize(token: string): Promise<string> {
    const res = await rawMcp(INIT, { authorization: `Bearer ${token}` });
    expect(res.status).toBe(200);
    return res.headers.get('mcp-session-id')!;
  }

  it('initialize records the session in Postgres; unknown, foreign and ended sessions are 404', async () => {
    const session = await initialize(agent.apiToken);
    const [row] = await db()`select user_id, client_name, client_version, protocol_version from private.mcp_sessions where id = ${session}`;
    expect(row).toEqual({ user_id: agent.userId, client_name: 'raw-client', client_version: '9', protocol_version: '2025-03-26' });
    const list = { jsonrpc: '2.0', id: 2, method: 'tools/list' };
    const headers = { authorization: `Bearer ${agent.apiToken}`, 'mcp-protocol-version': '2025-03-26' };
    expect((await rawMcp(list, { ...headers, 'mcp-session-id': session })).status).toBe(200);
    expect((await rawMcp(list, { ...headers, 'mcp-session-id': crypto.randomUUID() })).status).toBe(404);
    expect((await rawMcp(list, { ...headers, 'mcp-session-id': 'not-a-uuid' })).status).toBe(404);
    // Another user presenting this session id.
    const other = await createAgent('other');
    expect((await rawMcp(list, { ...headers, authorization: `Bearer ${other.apiToken}`, 'mcp-session-id': session })).status).toBe(404);
    // DELETE ends it.
    const del = await fetch(`${baseUrl}/mcp`, { method: 'DELETE', headers: { ...headers, 'mcp-session-id': session } });
    expect(del.status).toBe(200);
    expect((await rawMcp(list, { ...headers, 'mcp-session-id': session })).status).toBe(404);
  });

  it('GET /mcp opens the server-sent-events stream through the gateway', async () => {
    const session = await initialize(agent.apiToken);
    const controller = new AbortController();
    const res = await fetch(`${baseUrl}/mcp`, {
      headers: { authorization: `Bearer ${agent.apiToken}`, accept: 'text/event-stream', 'mcp-session-id': session, 'mcp-protocol-version': '2025-03-26' },
      signal: controller.signal,
    });
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toContain('text/event-stream');
    controller.abort();
  });

  it('the SDK client ends its session on close (DELETE)', async () => {
    const client = new Client({ name: 'closing', version: '1' });
    const transport = new StreamableHTTPClientTransport(new URL(`${baseUrl}/mcp`), {
      requestInit: { headers: { authorization: `Bearer ${agent.apiToken}` } },
    });
    await client.connect(transport);
    const session = transport.sessionId!;
    expect(session).toBeTruthy();
    await transport.terminateSession();
    await client.close();
    const [row] = await db()`select ended_at from private.mcp_sessions where id = ${session}`;
    expect(row!.ended_at).not.toBeNull();
  });
});

describe('DNS-rebinding protection', () => {
  it('refuses a foreign Host or Origin', async () => {
    const headers = { authorization: `Bearer ${agent.apiToken}` };
    expect((await rawMcp(INIT, { ...headers, origin: 'http://evil.example' })).status).toBe(403);
    // fetch cannot set Host: plain http.
    const status = await new Promise<number>((resolve, reject) => {
      const body = JSON.stringify(INIT);
      const req = http.request(
        `${baseUrl}/mcp`,
        {
          method: 'POST',
          headers: { ...headers, host: 'evil.example', 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
        },
        (res) => {
          res.resume();
          resolve(res.statusCode ?? 0);
        },
      );
      req.on('error', reject);
      req.end(body);
    });
    expect(status).toBe(403);
    expect((await rawMcp(INIT, { ...headers, origin: baseUrl })).status).toBe(200);
  });
});

describe('audit', () => {
  it('records every call with outcome and duration; the owner reads their own; secrets are redacted', async () => {
    const auditor = await createAgent('audited');
    const own = await createManagedCommunity(auditor.email);
    const client = await connect(auditor.apiToken);
    await callTool(client, 'community_profile', { community_id: own });
    await callTool(client, 'community_profile', { community_id: crypto.randomUUID() });
    await callTool(client, 'create_member', { email: uniqueEmail('audit'), data: { password: 'hunter22', nested: { api_key: 'k' }, ok: 1 } });
    // Records are written just after each answer.
    let mine = await api('GET', '/api/docs/agent-calls', { token: auditor.accessToken });
    for (let i = 0; i < 20 && mine.body.data.length < 3; i++) {
      await new Promise((r) => setTimeout(r, 100));
      mine = await api('GET', '/api/docs/agent-calls', { token: auditor.accessToken });
    }
    expect(mine.status).toBe(200);
    const calls = mine.body.data as any[];
    expect(calls.map((c) => [c.tool, c.outcome])).toEqual([
      ['create_member', 'ok'],
      ['community_profile', 'not_found'],
      ['community_profile', 'ok'],
    ]);
    expect(calls[0].arguments.data).toEqual({ password: '[redacted]', nested: { api_key: '[redacted]' }, ok: 1 });
    expect(calls[0].credential_kind).toBe('api_token');
    expect(Number(calls[0].duration_ms)).toBeGreaterThan(0);
    expect(JSON.stringify(calls)).not.toContain('hunter22');
    // Someone else sees none of them.
    const other = await api('GET', '/api/docs/agent-calls', { token: agent.accessToken });
    expect((other.body.data as any[]).some((c) => calls.some((mineCall) => mineCall.id === c.id))).toBe(false);
    // The operator view.
    const rows = await db()`select tool, outcome from admin.mcp_tool_calls(${auditor.email}, 10)`;
    expect(rows.map((r) => r.tool)).toEqual(['create_member', 'community_profile', 'community_profile']);
  });

  /** A session of the agent, for raw JSON-RPC posts (what the SDK client cannot send). */
  async function rawSession(token: string): Promise<Record<string, string>> {
    const init = await rawMcp(INIT, { authorization: `Bearer ${token}` });
    expect(init.status).toBe(200);
    return { authorization: `Bearer ${token}`, 'mcp-session-id': init.headers.get('mcp-session-id')!, 'mcp-protocol-version': '2025-03-26' };
  }

  async function recordedCalls(userId: string, n: number): Promise<any[]> {
    for (let i = 0; i < 50; i++) {
      const rows = await db()`select tool, outcome, arguments, error_message, octet_length(arguments::text) as bytes
                                from app.mcp_tool_calls where user_id = ${userId} order by id`;
      if (rows.length >= n) return rows;
      await new Promise((r) => setTimeout(r, 100));
    }
    throw new Error(`fewer than ${n} recorded calls`);
  }

  it('arguments nested 20,000 levels deep are refused before any SQL (issue 27, finding 10): a tool error, recorded, every time; no transaction left open', async () => {
    const deep = await createAgent('deep');
    const headers = await rawSession(deep.apiToken);
    const nested = `${'['.repeat(20_000)}${']'.repeat(20_000)}`;
    for (let i = 0; i < 3; i++) {
      const body = `{"jsonrpc":"2.0","id":${10 + i},"method":"tools/call","params":{"name":"create_member","arguments":{"email":"${uniqueEmail('deep')}","data":{"d":${nested}}}}}`;
      const res = await fetch(`${baseUrl}/mcp`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', ...headers },
        body,
        signal: AbortSignal.timeout(10_000),
      });
      expect(res.status).toBe(200);
      const answer = parseRpc(await res.text());
      expect(answer.result.isError).toBe(true);
      const error = JSON.parse(answer.result.content[0].text);
      expect(error.error).toBe('invalid_arguments');
      expect(error.message).toContain('nested deeper than 64 levels');
    }
    // Each call is recorded, with why its arguments are not.
    const rows = await recordedCalls(deep.userId, 3);
    expect(rows.map((r) => [r.tool, r.outcome])).toEqual(Array(3).fill(['create_member', 'invalid_arguments']));
    expect(rows[0].arguments.not_recorded).toContain('nested deeper than 64 levels');
    // The process still answers, and none of its connections was left in a transaction.
    const client = await connect(deep.apiToken);
    expect((await callTool(client, 'search_onboarding_communities', {})).isError).toBe(false);
    const stuck = await db()`select count(*)::int as n from pg_stat_activity
                              where datname = current_database() and application_name = 'mcp-server' and state like 'idle in transaction%'
                                and state_change < now() - interval '1 second'`;
    expect(stuck[0]!.n).toBe(0);
  });

  it('900 KB of refused arguments are recorded as at most about 16 KB, marked as truncated (issue 27, finding 7)', async () => {
    const big = await createAgent('bigargs');
    const client = await connect(big.apiToken);
    const junk = crypto.randomUUID().repeat(25_000);
    const answer = await callTool(client, 'community_profile', { community_id: 'not-a-uuid', junk });
    expect(answer.body.error).toBe('invalid_arguments');
    const [row] = await recordedCalls(big.userId, 1);
    expect(row.bytes).toBeLessThanOrEqual(17_000);
    expect(row.arguments).toMatchObject({ truncated: true, bytes: expect.any(Number) });
    expect(row.arguments.bytes).toBeGreaterThan(900_000);
    expect(typeof row.arguments.preview).toBe('string');
  });
});

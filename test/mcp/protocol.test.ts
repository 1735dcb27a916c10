// The protocol revisions of the agent interface, each spoken by the MCP SDK
// client release that speaks it (1.12.3: 2025-03-26, 1.21.2: 2025-06-18, the
// current one: 2025-11-25), through the gateway: what tools/list and
// tools/call give at each revision (outputSchema and structuredContent from
// 2025-06-18 on), the schemas themselves, the MCP-Protocol-Version header,
// scope step-up (2025-11-25), and access tokens bound to this resource
// (RFC 8707, from 2025-06-18 on).
import crypto from 'node:crypto';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { Ajv2020 } from 'ajv/dist/2020.js';
import addFormatsModule from 'ajv-formats';
import { Client as Client0326 } from 'mcp-sdk-2025-03-26/client/index.js';
import { StreamableHTTPClientTransport as Transport0326 } from 'mcp-sdk-2025-03-26/client/streamableHttp.js';
import { Client as Client0618 } from 'mcp-sdk-2025-06-18/client/index.js';
import { StreamableHTTPClientTransport as Transport0618 } from 'mcp-sdk-2025-06-18/client/streamableHttp.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { baseUrl, db, publicUrl, uniqueEmail } from '../helpers.ts';
import { callTool, connect, createAgent, createManagedCommunity, mintOAuthToken, parseRpc, rawMcp, type Agent } from './support.ts';

let agent: Agent;
let community: string;

beforeAll(async () => {
  agent = await createAgent('protocol');
  community = await createManagedCommunity(agent.email);
});

/** What the three client releases have in common here. */
interface AnyClient {
  connect(transport: never): Promise<void>;
  listTools(): Promise<{ tools: { name: string; inputSchema: unknown; outputSchema?: unknown }[] }>;
  callTool(params: { name: string; arguments?: Record<string, unknown> }): Promise<Record<string, unknown>>;
  close(): Promise<void>;
}

const releases = [
  {
    sdk: '1.12.3',
    version: '2025-03-26',
    make: (headers: Record<string, string>) => ({
      client: new Client0326({ name: 'sdk-1.12', version: '1' }) as unknown as AnyClient,
      transport: new Transport0326(new URL(`${baseUrl}/mcp`), { requestInit: { headers } }),
    }),
  },
  {
    sdk: '1.21.2',
    version: '2025-06-18',
    make: (headers: Record<string, string>) => ({
      client: new Client0618({ name: 'sdk-1.21', version: '1' }) as unknown as AnyClient,
      transport: new Transport0618(new URL(`${baseUrl}/mcp`), { requestInit: { headers } }),
    }),
  },
  {
    sdk: 'current',
    version: '2025-11-25',
    make: (headers: Record<string, string>) => ({
      client: new Client({ name: 'sdk-current', version: '1' }) as unknown as AnyClient,
      transport: new StreamableHTTPClientTransport(new URL(`${baseUrl}/mcp`), { requestInit: { headers } }),
    }),
  },
] as const;

const opened: AnyClient[] = [];
afterAll(async () => {
  await Promise.all(opened.map((c) => c.close().catch(() => {})));
});

async function connectWith(release: (typeof releases)[number], token: string): Promise<{ client: AnyClient; sessionId: string }> {
  const { client, transport } = release.make({ authorization: `Bearer ${token}` });
  await client.connect(transport as never);
  opened.push(client);
  return { client, sessionId: (transport as { sessionId?: string }).sessionId! };
}

/** Every place of a JSON Schema that says nothing about a value: `{}` or `true` as items or additionalProperties. */
function undescribed(schema: unknown, path = '$'): string[] {
  if (!schema || typeof schema !== 'object') return [];
  const node = schema as Record<string, unknown>;
  const found: string[] = [];
  for (const key of ['items', 'additionalProperties'] as const) {
    const sub = node[key];
    if (sub === true || (sub && typeof sub === 'object' && Object.keys(sub).length === 0)) found.push(`${path}.${key}`);
  }
  for (const [key, value] of Object.entries(node)) {
    if (Array.isArray(value)) value.forEach((v, i) => found.push(...undescribed(v, `${path}.${key}[${i}]`)));
    else if (value && typeof value === 'object') found.push(...undescribed(value, `${path}.${key}`));
  }
  return found;
}

describe('each revision, with the SDK client release that speaks it', () => {
  for (const release of releases) {
    it(`SDK ${release.sdk} negotiates ${release.version}; ${release.version === '2025-03-26' ? 'no' : 'an'} outputSchema and structuredContent`, async () => {
      const { client, sessionId } = await connectWith(release, agent.apiToken);
      const [session] = await db()`select protocol_version from private.mcp_sessions where id = ${sessionId}`;
      expect(session!.protocol_version).toBe(release.version);

      const structured = release.version !== '2025-03-26';
      const { tools } = await client.listTools();
      expect(tools).toHaveLength(9);
      for (const tool of tools) expect(tool.outputSchema !== undefined, tool.name).toBe(structured);

      // The 2025-06-18 and current clients check structuredContent against the outputSchema themselves.
      const result = await client.callTool({ name: 'community_profile', arguments: { community_id: community } });
      expect(result.isError).toBeFalsy();
      const text = JSON.parse((result.content as { text: string }[])[0]!.text);
      expect(text).toMatchObject({ id: community, is_draft: false, accepts_handoffs: false });
      if (structured) expect(result.structuredContent).toEqual(text);
      else expect(result.structuredContent).toBeUndefined();

      const refused = await client.callTool({ name: 'get_event', arguments: { event_id: crypto.randomUUID() } });
      expect(refused.isError).toBe(true);
      expect(refused.structuredContent).toBeUndefined();
      expect(JSON.parse((refused.content as { text: string }[])[0]!.text).error).toBe('not_found');
    });
  }
});

describe('the tool schemas', () => {
  it('are JSON Schema 2020-12 that describe every value: no bare {} (create_member.data, set_member_attributes.attributes)', async () => {
    const client = await connect(agent.apiToken);
    const { tools } = await client.listTools();
    const ajv = new Ajv2020({ strict: false, allErrors: true });
    const addFormats = ((addFormatsModule as unknown as { default?: unknown }).default ?? addFormatsModule) as (a: Ajv2020) => void;
    addFormats(ajv);
    for (const tool of tools) {
      for (const [which, schema] of [['inputSchema', tool.inputSchema], ['outputSchema', tool.outputSchema]] as const) {
        expect(schema, `${tool.name}.${which}`).toBeDefined();
        expect(schema!.$schema).toBe('https://json-schema.org/draft/2020-12/schema');
        expect(schema!.type).toBe('object');
        expect(undescribed(schema), `${tool.name}.${which}`).toEqual([]);
        expect(() => ajv.compile(schema!), `${tool.name}.${which} compiles`).not.toThrow();
      }
    }
    const data = (tools.find((t) => t.name === 'create_member')!.inputSchema.properties as any).data;
    const attributes = (tools.find((t) => t.name === 'set_member_attributes')!.inputSchema.properties as any).attributes;
    for (const free of [data, attributes]) {
      expect(free.type).toBe('object');
      expect(free.description).toBeTruthy();
      expect(free.additionalProperties).toEqual({
        type: ['string', 'number', 'boolean', 'null', 'array', 'object'],
        description: expect.any(String),
      });
    }
    // A member's answer: the same free-form objects, described the same way.
    const member = tools.find((t) => t.name === 'get_member')!.outputSchema as any;
    expect(member.properties.data.additionalProperties.type).toContain('object');
    expect(member.required).toEqual(expect.arrayContaining(['id', 'node_id', 'email', 'data', 'attributes', 'communities']));
  });

  it('every tool answers what its outputSchema says (the SDK checks each structuredContent)', async () => {
    const client = await connect(agent.apiToken);
    const event = await db()`select admin.create_event(${community}, 'Schema night', now() + interval '2 days', null, null, null) as id`;
    const email = uniqueEmail('schema-member');
    const calls: [string, Record<string, unknown>][] = [
      ['community_profile', { community_id: community }],
      ['list_community_events', { community_id: community }],
      ['get_event', { event_id: event[0]!.id }],
      ['set_onboarding_opt_in', { community_id: community, accepts_handoffs: true }],
      ['search_onboarding_communities', {}],
      ['create_member', { email, name: 'Schema Member', data: { source: 'test', tags: ['a'], nested: { n: 1 } } }],
    ];
    const answers: Record<string, any> = {};
    for (const [name, args] of calls) {
      const answer = await callTool(client, name, args);
      expect(answer.isError, name).toBe(false);
      answers[name] = answer.body;
    }
    const memberId = answers.create_member.id;
    for (const [name, args] of [
      ['get_member', { member_id: memberId }],
      ['set_member_attributes', { member_id: memberId, attributes: { tier: 'gold', score: 3, gone: null } }],
      ['add_member_to_community', { member_id: memberId, community_id: community }],
    ] as const) {
      const answer = await callTool(client, name, args);
      expect(answer.isError, name).toBe(false);
      answers[name] = answer.body;
    }
    expect(answers.list_community_events.upcoming[0]).toMatchObject({ id: event[0]!.id, status: 'upcoming', can_sync: true });
    expect(answers.set_member_attributes.attributes).toEqual({ tier: 'gold', score: 3 });
    expect(answers.add_member_to_community).toMatchObject({ added: true, role: 'member' });
  });
});

describe('MCP-Protocol-Version', () => {
  it('a version this server does not speak is 400; a request naming none speaks 2025-03-26', async () => {
    const init = await rawMcp(
      { jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'raw', version: '0' } } },
      { authorization: `Bearer ${agent.apiToken}` },
    );
    const session = init.headers.get('mcp-session-id')!;
    const headers = { authorization: `Bearer ${agent.apiToken}`, 'mcp-session-id': session };
    const list = { jsonrpc: '2.0', id: 2, method: 'tools/list' };
    const unknown = await rawMcp(list, { ...headers, 'mcp-protocol-version': '2024-11-05' });
    expect(unknown.status).toBe(400);
    expect(unknown.json.error.message).toContain('MCP-Protocol-Version');
    const none = await rawMcp(list, headers);
    expect(none.status).toBe(200);
    expect(none.json.result.tools[0].outputSchema).toBeUndefined();
    const current = await rawMcp(list, { ...headers, 'mcp-protocol-version': '2025-11-25' });
    expect(current.json.result.tools[0].outputSchema).toBeDefined();
  });
});

describe('authorization of the newer revisions', () => {
  it('scope step-up (2025-11-25): a read-only OAuth token calling a write tool gets 403 insufficient_scope naming the scopes to ask for; older revisions a tool error', async () => {
    const community = await createManagedCommunity(agent.email, 'Step-up');
    const readOnly = await mintOAuthToken(agent.userId, ['mcp:read']);
    const init = await rawMcp(
      { jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'raw', version: '0' } } },
      { authorization: `Bearer ${readOnly}` },
    );
    const headers = { authorization: `Bearer ${readOnly}`, 'mcp-session-id': init.headers.get('mcp-session-id')!, 'mcp-protocol-version': '2025-11-25' };
    const write = { jsonrpc: '2.0', id: 2, method: 'tools/call', params: { name: 'set_onboarding_opt_in', arguments: { community_id: community, accepts_handoffs: true } } };
    const refused = await rawMcp(write, headers);
    expect(refused.status).toBe(403);
    expect(refused.json).toMatchObject({ error: 'insufficient_scope' });
    const challenge = refused.headers.get('www-authenticate')!;
    expect(challenge).toContain('error="insufficient_scope"');
    expect(challenge).toContain('scope="mcp:read mcp:write"');
    expect(challenge).toContain(`resource_metadata="${new URL(publicUrl).origin}/.well-known/oauth-protected-resource/mcp"`);
    const [flag] = await db()`select accepts_handoffs from app.communities where id = ${community}`;
    expect(flag!.accepts_handoffs).toBe(false);
    // Reads go through.
    const read = await rawMcp({ jsonrpc: '2.0', id: 3, method: 'tools/call', params: { name: 'community_profile', arguments: { community_id: community } } }, headers);
    expect(read.status).toBe(200);
    expect(read.json.result.isError).toBeFalsy();

    // The current client without an auth provider sees the 403.
    const current = await connect(readOnly);
    await expect(current.callTool({ name: 'set_onboarding_opt_in', arguments: { community_id: community, accepts_handoffs: true } })).rejects.toThrow(/403|insufficient_scope/);
    // A 2025-06-18 client gets the tool error, as before.
    const { client: older } = await connectWith(releases[1], readOnly);
    const answer = await older.callTool({ name: 'set_onboarding_opt_in', arguments: { community_id: community, accepts_handoffs: true } });
    expect(answer.isError).toBe(true);
    expect(JSON.parse((answer.content as { text: string }[])[0]!.text).error).toBe('insufficient_scope');
  });

  it('access tokens are for this resource (RFC 8707): one issued for another is 401; /authorize refuses another; a grant naming none is bound to /mcp', async () => {
    const foreign = await mintOAuthToken(agent.userId, ['mcp:read', 'mcp:write'], 'https://other.example/mcp');
    const refused = await rawMcp({ jsonrpc: '2.0', id: 1, method: 'tools/list' }, { authorization: `Bearer ${foreign}` });
    expect(refused.status).toBe(401);
    expect(refused.headers.get('www-authenticate')).toContain('error="invalid_token"');
    expect(refused.json.message).toContain('another resource');

    // A client registers and asks for a code.
    const redirect = 'http://127.0.0.1:9/callback';
    const registered = await fetch(`${baseUrl}/register`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ client_name: 'resource test', redirect_uris: [redirect], token_endpoint_auth_method: 'none' }),
    });
    expect(registered.status).toBe(201);
    const clientId = ((await registered.json()) as { client_id: string }).client_id;
    const verifier = crypto.randomBytes(32).toString('base64url');
    const challenge = crypto.createHash('sha256').update(verifier).digest('base64url');
    const authorize = (resource?: string) => {
      const url = new URL('/authorize', baseUrl);
      const params: Record<string, string> = {
        response_type: 'code',
        client_id: clientId,
        redirect_uri: redirect,
        code_challenge: challenge,
        code_challenge_method: 'S256',
        state: 'st',
        ...(resource ? { resource } : {}),
      };
      for (const [k, v] of Object.entries(params)) url.searchParams.set(k, v);
      return fetch(url, { redirect: 'manual' });
    };
    const other = await authorize('https://other.example/mcp');
    expect(other.status).toBe(302);
    expect(new URL(other.headers.get('location')!).searchParams.get('error')).toBe('invalid_target');

    // Without `resource`: sign in on the consent form, exchange the code.
    const page = await authorize();
    expect(page.status).toBe(200);
    const requestToken = /name="request" value="([^"]+)"/.exec(await page.text())![1]!;
    const consent = await fetch(`${baseUrl}/oauth/consent`, {
      method: 'POST',
      redirect: 'manual',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams({ request: requestToken, email: agent.email, password: agent.password, decision: 'allow' }),
    });
    expect(consent.status).toBe(302);
    const code = new URL(consent.headers.get('location')!).searchParams.get('code')!;
    const token = await fetch(`${baseUrl}/token`, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams({ grant_type: 'authorization_code', code, code_verifier: verifier, client_id: clientId, redirect_uri: redirect }),
    });
    expect(token.status).toBe(200);
    const accessToken = ((await token.json()) as { access_token: string }).access_token;
    const [stored] = await db()`select resource from identity.oauth_tokens where token_hash = extensions.digest(${accessToken}, 'sha256')`;
    expect(stored!.resource).toBe(`${publicUrl}/mcp`);
    const works = await rawMcp({ jsonrpc: '2.0', id: 1, method: 'ping' }, { authorization: `Bearer ${accessToken}` });
    expect(works.status).toBe(200);
    expect(parseRpc(works.text).result).toEqual({});
  });
});

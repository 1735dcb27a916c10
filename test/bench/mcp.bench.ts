// The agent interface (issue 10): tools/call through the gateway and the MCP
// process, against the REST route that reads the same thing (community
// detail; one event), with a personal API token on both sides, plus the MCP
// call straight to the MCP process (no gateway hop). Each MCP call is what a
// connected client sends: one POST with the session id.
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { Bench, Stats } from './harness.ts';

const N = Number(process.env.BENCH_MCP_N ?? 300);

const bench: Bench = {
  name: 'mcp',
  description: `tools/call vs REST on the same rows, ${N} sequential calls each`,
  async run(ctx) {
    const me = await ctx.user();
    const created = (await ctx.call('POST', '/api/docs/tokens', {
      token: me.token,
      body: { name: 'bench', permissions: ['*'] },
    })) as { token_value: string };
    const apiToken = created.token_value;
    const [community] = await ctx.sql`select admin.create_community('Bench club', 'x', '{a,b}', ${me.email}) as id`;
    const [event] = await ctx.sql`select admin.create_event(${community!.id}, 'Bench event', now() + interval '1 day') as id`;
    const connect = async (base: string) => {
      const client = new Client({ name: 'bench', version: '1' });
      await client.connect(
        new StreamableHTTPClientTransport(new URL(`${base}/mcp`), { requestInit: { headers: { authorization: `Bearer ${apiToken}` } } }),
      );
      return client;
    };
    const viaGateway = await connect(ctx.env.baseUrl);
    const direct = await connect(ctx.env.mcpUrl);
    const results: Stats[] = [];
    try {
      results.push(
        await ctx.measure('REST GET /api/mobile/communities/{id} (API token)', N, () =>
          ctx.call('GET', `/api/mobile/communities/${community!.id}`, { token: apiToken }),
        ),
      );
      results.push(
        await ctx.measure('MCP tools/call community_profile (gateway)', N, () =>
          viaGateway.callTool({ name: 'community_profile', arguments: { community_id: community!.id } }),
        ),
      );
      results.push(
        await ctx.measure('MCP tools/call community_profile (direct)', N, () =>
          direct.callTool({ name: 'community_profile', arguments: { community_id: community!.id } }),
        ),
      );
      results.push(await ctx.measure('REST GET /api/mobile/events/{id} (API token)', N, () => ctx.call('GET', `/api/mobile/events/${event!.id}`, { token: apiToken })));
      results.push(
        await ctx.measure('MCP tools/call get_event (gateway)', N, () =>
          viaGateway.callTool({ name: 'get_event', arguments: { event_id: event!.id } }),
        ),
      );
    } finally {
      await viaGateway.close();
      await direct.close();
    }
    return results;
  },
};

export default bench;

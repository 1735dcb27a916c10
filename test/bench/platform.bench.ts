// API tokens and platform integration: what authenticating with an API token
// costs against an access token (the token is checked and counted in SQL, in
// its own statement before the request's transaction), how fast a platform
// pushes events, one at a time and from 10 concurrent clients, and what
// changing one costs (PATCH: the row locked, SEQUENCE, the change log and
// the webhook trigger), with a time zone given or not.
import crypto from 'node:crypto';
import { summarize, type Bench, type BenchContext } from './harness.ts';

function eventBody(communityId: string, externalPlatform: string, externalId: string, venue?: { name: string; address: string }) {
  return {
    community_id: communityId,
    external_platform: externalPlatform,
    external_id: externalId,
    title: 'Bench event',
    description: 'pushed',
    date: new Date(Date.now() + 86_400_000).toISOString(),
    venue,
  };
}

async function eventsPerSecond(ctx: BenchContext, token: string, communityId: string, total: number, clients: number): Promise<number> {
  let next = 0;
  const started = process.hrtime.bigint();
  await Promise.all(
    Array.from({ length: clients }, async () => {
      while (next < total) {
        next++;
        await ctx.call('POST', '/api/v1/platform/events', {
          token,
          expect: 201,
          body: eventBody(communityId, 'platform_a', crypto.randomUUID(), { name: `Venue ${next % 20}`, address: 'Bench St' }),
        });
      }
    }),
  );
  const seconds = Number(process.hrtime.bigint() - started) / 1e9;
  return total / seconds;
}

const bench: Bench = {
  name: 'platform',
  description: 'API tokens vs access tokens, and platform event creation',
  async run(ctx) {
    const { token, email } = await ctx.user();
    const created = (await ctx.call('POST', '/api/docs/tokens', {
      token,
      body: { name: 'bench', permissions: ['/api/mobile/*', '/api/v1/platform/*'] },
    })) as { token_value: string };
    const apiToken = created.token_value;
    const [community] = await ctx.sql`select admin.create_community('Bench platform', null, '{}', ${email}) as id`;
    const communityId = community!.id as string;

    // Interleaved, so both see the same machine load.
    const samples: Record<'access' | 'api', number[]> = { access: [], api: [] };
    for (let n = 0; n < 1040; n++) {
      const kind = n % 2 === 0 ? 'access' : 'api';
      const t0 = process.hrtime.bigint();
      await ctx.call('GET', '/api/mobile/profile', { token: kind === 'access' ? token : apiToken });
      if (n >= 40) samples[kind].push(Number(process.hrtime.bigint() - t0) / 1e6);
    }
    const access = summarize('GET /api/mobile/profile (access token)', samples.access);
    const viaToken = summarize('GET /api/mobile/profile (API token)', samples.api);
    ctx.progress(`API token / access token median latency: ${(viaToken.medianMs / access.medianMs).toFixed(2)}`);

    let i = 0;
    const create = await ctx.measure('POST /api/v1/platform/events (new event, reused venue)', 200, () =>
      ctx.call('POST', '/api/v1/platform/events', {
        token,
        expect: 201,
        body: eventBody(communityId, 'platform_b', `seq-${i++}`, { name: 'Bench hall', address: '1 Bench St' }),
      }),
    );
    const repeat = await ctx.measure('POST /api/v1/platform/events (existing: 200)', 200, () =>
      ctx.call('POST', '/api/v1/platform/events', {
        token,
        expect: 200,
        body: eventBody(communityId, 'platform_b', 'seq-0'),
      }),
    );
    const zoned = await ctx.measure('POST /api/v1/platform/events (new event, timezone given)', 200, () =>
      ctx.call('POST', '/api/v1/platform/events', {
        token,
        expect: 201,
        body: { ...eventBody(communityId, 'platform_c', `tz-${i++}`, { name: 'Bench hall', address: '1 Bench St' }), timezone: 'europe/berlin' },
      }),
    );
    let n = 0;
    const patch = await ctx.measure('PATCH /api/v1/platform/events/{id} (title)', 200, () =>
      ctx.call('PATCH', '/api/v1/platform/events/external/platform_b/seq-1', { token, expect: 200, body: { title: `Renamed ${n++}` } }),
    );
    const patchZone = await ctx.measure('PATCH /api/v1/platform/events/{id} (timezone)', 200, () =>
      ctx.call('PATCH', '/api/v1/platform/events/external/platform_b/seq-2', {
        token,
        expect: 200,
        body: { timezone: n++ % 2 === 0 ? 'Europe/Paris' : 'america/new_york' },
      }),
    );
    const sequential = await eventsPerSecond(ctx, token, communityId, 300, 1);
    const parallel = await eventsPerSecond(ctx, token, communityId, 300, 10);
    ctx.progress(`platform event creation: ${sequential.toFixed(0)} events/s sequential, ${parallel.toFixed(0)} events/s with 10 concurrent clients`);
    return [access, viaToken, create, repeat, zoned, patch, patchZone];
  },
};
export default bench;

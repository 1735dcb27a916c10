// Events, check-ins and connections at a realistic size: 2,000 communities
// with 100 events each (200,000 events over four years, three quarters of
// them past), 500 venues carrying them, a user in 20 communities with 50
// current check-ins and 500 connections. Measures the reads the mobile app
// makes most and the check-in paths (idempotent repeat, venue window lookup).
import type { Bench } from './harness.ts';

const bench: Bench = {
  name: 'events',
  description: 'upcoming list, event read, check-ins, venue window, connections',
  async run(ctx) {
    const { sql } = ctx;
    const { token, userId } = await ctx.user();
    const hat = (await ctx.call('POST', '/api/mobile/hats', { token, body: { hat: { name: 'Me', hat_type: 'social' } } })) as {
      data: { id: string };
    };

    ctx.progress('loading 2,000 communities, 500 venues, 200,000 events');
    await sql`alter table app.events disable trigger _900_log_change`;
    await sql`
      with n as (insert into app.nodes (kind) select 'community' from generate_series(1, 2000) returning id)
      insert into app.communities (node_id, name) select id, 'bench community' from n`;
    await sql`
      with n as (insert into app.nodes (kind) select 'venue' from generate_series(1, 500) returning id)
      insert into app.venues (node_id, name) select id, 'bench venue' from n`;
    await sql`
      with c as (select id, row_number() over (order by id) as r from app.communities),
           v as (select node_id, row_number() over (order by node_id) as r from app.venues),
           plan as (
             select c.id as community_id, g,
                    now() - interval '3 years' + (random() * 4 * 365) * interval '1 day' as starts_at,
                    (select node_id from v where v.r = 1 + (c.r * 100 + g) % 500) as venue
               from c, generate_series(1, 100) g
           ),
           numbered as (select *, row_number() over () as r from plan),
           n as (insert into app.nodes (kind) select 'event' from numbered returning id),
           nn as (select id, row_number() over () as r from n)
      insert into app.events (node_id, community_id, title, starts_at, ends_at, venue_node_id)
      select nn.id, p.community_id, 'bench event ' || p.r, p.starts_at,
             case when p.r % 3 = 0 then null else p.starts_at + interval '3 hours' end, p.venue
        from numbered p join nn using (r)`;
    await sql`alter table app.events enable trigger _900_log_change`;

    ctx.progress('memberships, check-ins and connections for the measured user');
    const [me] = await sql`select node_id from app.profiles where id = ${userId}`;
    await sql`
      insert into app.community_members (community_id, member_node_id)
      select id, ${me!.node_id} from app.communities order by id limit 20`;
    await sql`
      insert into app.checkins (user_id, event_id, hat_id)
      select ${userId}, id, ${hat.data.id} from app.events order by starts_at desc limit 50`;
    await sql`
      insert into app.connections (owner_node_id, target_node_id, notes, created_at)
      select ${me!.node_id}, id, 'met', now() - (row_number() over ()) * interval '1 hour'
        from (select id from app.nodes where kind = 'community' limit 500) n`;
    await sql`analyze`;

    const [anEvent] = await sql`select id from app.events where starts_at > now() order by starts_at limit 1`;
    const events = await sql`select id from app.events where starts_at > now() + interval '1 day' order by id limit 600`;
    // A venue with nothing on now (the window lookup finds zero events among ~400).
    const [quietVenue] = await sql`
      select v.node_id from app.venues v
       where not exists (select from private.venue_concurrent_events(v.node_id)) limit 1`;
    // A venue with exactly one event on now.
    const [busy] = await sql`select node_id, venue_node_id from app.events where venue_node_id is not null limit 1`;
    await sql`update app.events set starts_at = now() - interval '30 minutes', ends_at = now() + interval '1 hour' where node_id = ${busy!.node_id}`;
    await sql`update app.events set starts_at = starts_at - interval '2 years', ends_at = ends_at - interval '2 years'
               where venue_node_id = ${busy!.venue_node_id} and node_id <> ${busy!.node_id}
                 and starts_at > now() - interval '1 day'`;
    const [count] = await sql`select count(*)::int as n from app.events`;
    ctx.progress(`${count!.n} events loaded`);

    const upcoming = (await ctx.call('GET', '/api/mobile/events/upcoming', { token })) as unknown[];
    ctx.progress(`upcoming returns ${upcoming.length} events`);

    let nextEvent = 0; // every timed or warm-up call checks in to a new event
    return [
      await ctx.measure('GET /api/mobile/events/upcoming (20 communities, 100 events)', 200, () =>
        ctx.call('GET', '/api/mobile/events/upcoming', { token }),
      ),
      await ctx.measure('GET /api/mobile/events/{id}', 300, () => ctx.call('GET', `/api/mobile/events/${anEvent!.id}`, { token })),
      await ctx.measure('POST event checkin (first, 201)', 500, () =>
        ctx.call('POST', `/api/mobile/events/${events[nextEvent++]!.id}/checkin`, { token, expect: 201 }),
      ),
      await ctx.measure('POST event checkin (repeat, 200)', 300, () =>
        ctx.call('POST', `/api/mobile/events/${anEvent!.id}/checkin`, { token }),
      ),
      await ctx.measure('POST venue checkin (window: 0 of ~400 events)', 300, () =>
        ctx.call('POST', `/api/mobile/venues/${quietVenue!.node_id}/checkin`, { token, body: { hat_id: hat.data.id } }),
      ),
      await ctx.measure('GET /l/checkin/venue/{id} (one concurrent event, 302)', 300, async () => {
        const res = await fetch(`${ctx.env.baseUrl}/l/checkin/venue/${busy!.venue_node_id}`, { redirect: 'manual' });
        await res.arrayBuffer();
        if (res.status !== 302) throw new Error(`venue link: ${res.status}`);
      }),
      await ctx.measure('GET /api/mobile/checkins (~570 current)', 200, () => ctx.call('GET', '/api/mobile/checkins', { token })),
      await ctx.measure('GET /api/mobile/connections (500)', 200, () => ctx.call('GET', '/api/mobile/connections', { token })),
      await ctx.measure('GET /api/mobile/connections/recent (20)', 300, () => ctx.call('GET', '/api/mobile/connections/recent', { token })),
    ];
  },
};
export default bench;

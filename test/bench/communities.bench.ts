// Communities at scale (issue 3): 100k communities, 1M memberships over 20k
// user nodes; latency of the caller's list, search (common word, rare phrase,
// two letters), detail, a members page and a join+leave pair.
import type { Bench, Stats } from './harness.ts';

const COMMUNITIES = Number(process.env.BENCH_COMMUNITIES ?? 100_000);
const USERS = 20_000;
const PER_COMMUNITY = 10; // 1M memberships at 100k communities

const bench: Bench = {
  name: 'communities',
  description: `${COMMUNITIES.toLocaleString()} communities, ${(COMMUNITIES * PER_COMMUNITY).toLocaleString()} memberships`,
  async run(ctx) {
    const { sql } = ctx;
    ctx.progress(`loading ${USERS} user nodes and ${COMMUNITIES} communities`);
    // One transaction, so the temporary table stays on one connection.
    await sql.begin(async (sql) => {
    await sql`create temporary table bench_users (n serial primary key, id uuid not null) on commit drop`;
    await sql`with ins as (insert into app.nodes (kind) select 'user' from generate_series(1, ${USERS}) returning id)
              insert into bench_users (id) select id from ins`;
    await sql`
      with topics(t) as (select unnest(array['Running','Chess','Book','Climbing','Jazz','Coding','Garden','Cycling','Photo','Yoga',
                                             'Cooking','Hiking','Film','Startup','Language','Board game','Poetry','Kayak','Dance','Science'])),
           kinds(k) as (select unnest(array['Club','Circle','Society','Collective','Meetup','Guild','Crew','Lab'])),
           numbered as (select i, (select array_agg(t) from topics) as ts, (select array_agg(k) from kinds) as ks
                        from generate_series(1, ${COMMUNITIES}) i),
           nodes as (insert into app.nodes (kind) select 'community' from generate_series(1, ${COMMUNITIES}) returning id),
           numbered_nodes as (select row_number() over () as i, id from nodes)
      insert into app.communities (node_id, name, description, tags)
      select nn.id,
             n.ts[1 + n.i % 20] || ' ' || n.ks[1 + (n.i / 20) % 8] || ' ' || n.i,
             'A community for ' || lower(n.ts[1 + (n.i * 7) % 20]) || ' lovers in district ' || (n.i % 97),
             array[lower(n.ts[1 + n.i % 20]), 'district-' || (n.i % 97)]
      from numbered n join numbered_nodes nn on nn.i = n.i`;
    ctx.progress('loading memberships (member_count trigger off, counts set afterwards)');
    await sql`alter table app.community_members disable trigger _500_member_count`;
    await sql`
      insert into app.community_members (community_id, member_node_id, joined_at)
      select c.id, u.id, now() - (k || ' minutes')::interval
      from (select id, row_number() over (order by id) as i from app.communities) c
      cross join generate_series(1, ${PER_COMMUNITY}) k
      join bench_users u on u.n = 1 + ((c.i * 7919 + k * 4729) % ${USERS})
      on conflict do nothing`;
    await sql`alter table app.community_members enable trigger _500_member_count`;
    await sql`update app.communities c set member_count = m.n
              from (select community_id, count(*)::int as n from app.community_members group by 1) m
              where m.community_id = c.id`;
    });
    await sql`analyze app.communities`;
    await sql`analyze app.community_members`;
    const [{ memberships }] = (await sql`select count(*)::int as memberships from app.community_members`) as unknown as [{ memberships: number }];
    ctx.progress(`loaded: ${memberships.toLocaleString()} memberships`);

    // The measured user belongs to 60 communities and manages one.
    const me = await ctx.user();
    await sql`insert into app.community_members (community_id, member_node_id)
              select c.id, p.node_id from app.profiles p, (select id from app.communities order by id limit 60) c
              where p.id = ${me.userId}`;
    const [target] = await sql`select id from app.communities order by id offset 1000 limit 1`;
    const managed = await sql`select admin.create_community('Bench managed', null, '{}', ${me.email}) as id`;
    void managed;
    const id = target!.id as string;
    const token = me.token;

    const rows: Stats[] = [];
    rows.push(await ctx.measure('GET /communities (my 61, page of 50)', 200, () => ctx.call('GET', '/api/mobile/communities', { token })));
    rows.push(await ctx.measure('search q=chess (10k matches, page of 50)', 100, () => ctx.call('GET', '/api/mobile/communities/search?q=chess', { token })));
    rows.push(await ctx.measure('search q="jazz club 4" (rare)', 100, () => ctx.call('GET', '/api/mobile/communities/search?q=jazz%20club%204', { token })));
    rows.push(await ctx.measure('search q=district-42 (tag, ~1k matches)', 100, () => ctx.call('GET', '/api/mobile/communities/search?q=district-42', { token })));
    rows.push(await ctx.measure('search q=ch (2 letters, no trigram)', 30, () => ctx.call('GET', '/api/mobile/communities/search?q=ch', { token })));
    rows.push(await ctx.measure('GET /communities/{id} (detail)', 200, () => ctx.call('GET', `/api/mobile/communities/${id}`, { token })));
    rows.push(await ctx.measure('GET /communities/{id}/members', 200, () => ctx.call('GET', `/api/mobile/communities/${id}/members`, { token })));
    rows.push(
      await ctx.measure('POST join + POST leave', 100, async () => {
        await ctx.call('POST', `/api/mobile/communities/${id}/join`, { token });
        await ctx.call('POST', `/api/mobile/communities/${id}/leave`, { token });
      }),
    );
    return rows;
  },
};
export default bench;

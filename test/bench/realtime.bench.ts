// The realtime feed under load: one gateway process holding N concurrent SSE
// streams (BENCH_REALTIME_STREAMS, default 1000) of N/5 users (5 each, the
// per-user cap), all members of one community, and the delay from an event
// update's commit to its arrival on every stream (median, p95, p99 over all
// streams and changes). A second scenario changes an event of a community
// with one member: the delay to the one stream that sees it while 999 others
// are open (the hub reads only the users private.event_stream_audience names).
//
// The streams are read by this same process (the harness starts the gateway
// in-process), so the figures include the clients' own parsing on the same
// event loop: they are an upper bound for the server's share.
import { SignJWT } from 'jose';
import type { Bench, Stats } from './harness.ts';
import { summarize } from './harness.ts';

const STREAM_PATH = '/api/mobile/events/upcoming/stream';

interface Reader {
  ready: boolean;
  /** title → arrival time (performance.now()) */
  arrivals: Map<string, number>;
  abort: AbortController;
}

async function openReader(baseUrl: string, token: string): Promise<Reader> {
  const reader: Reader = { ready: false, arrivals: new Map(), abort: new AbortController() };
  const res = await fetch(baseUrl + STREAM_PATH, { headers: { authorization: `Bearer ${token}` }, signal: reader.abort.signal });
  if (res.status !== 200 || !res.body) throw new Error(`stream: ${res.status} ${await res.text()}`);
  const body = res.body.getReader();
  const decoder = new TextDecoder();
  let buffer = '';
  void (async () => {
    try {
      for (;;) {
        const { done, value } = await body.read();
        if (done) break;
        const now = performance.now();
        buffer += decoder.decode(value, { stream: true });
        let end: number;
        while ((end = buffer.indexOf('\n\n')) >= 0) {
          const block = buffer.slice(0, end);
          buffer = buffer.slice(end + 2);
          if (block.startsWith('event: ready')) reader.ready = true;
          else if (block.startsWith('event: update')) {
            const data = block.slice(block.indexOf('data: ') + 6);
            reader.arrivals.set((JSON.parse(data) as { title: string }).title, now);
          }
        }
      }
    } catch {
      // aborted at the end
    }
  })();
  return reader;
}

async function until(condition: () => boolean, timeoutMs: number, what: string): Promise<void> {
  const started = Date.now();
  while (!condition()) {
    if (Date.now() - started > timeoutMs) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 5));
  }
}

const bench: Bench = {
  name: 'realtime',
  description: 'SSE upcoming stream: concurrent streams per process, commit-to-delivery delay',
  async run(ctx) {
    const { sql, env } = ctx;
    const streams = Number(process.env.BENCH_REALTIME_STREAMS ?? 1000);
    const perUser = 5;
    const users = Math.ceil(streams / perUser);
    const changes = Number(process.env.BENCH_REALTIME_CHANGES ?? 40);

    ctx.progress(`creating ${users} users in one community`);
    const [community] = await sql`select admin.create_community('Bench feed') as id`;
    const [hash] = await sql`select identity.hash_password('bench-password') as h`;
    const rows = await sql<{ id: string }[]>`
      with u as (
        insert into identity.users (email, password_hash)
        select 'feed-' || g || '-' || md5(random()::text) || '@example.com', ${hash!.h} from generate_series(1, ${users}) g
        returning id
      ), n as (
        insert into app.nodes (kind) select 'user' from u returning id
      ), pairs as (
        select u.id as user_id, n.id as node_id
          from (select id, row_number() over () as r from u) u
          join (select id, row_number() over () as r from n) n using (r)
      ), p as (
        insert into app.profiles (id, name, node_id) select user_id, 'Feed', node_id from pairs returning id, node_id
      ), m as (
        insert into app.community_members (community_id, member_node_id)
        select ${community!.id}, node_id from p
      )
      select id from p`;
    const [event] = await sql`select admin.create_event(${community!.id}, 'bench-start', now() + interval '1 day') as id`;
    // A second community with one member (the first user) for the second scenario.
    const [quiet] = await sql`select admin.create_community('Bench quiet') as id`;
    await sql`
      insert into app.community_members (community_id, member_node_id)
      select ${quiet!.id}, node_id from app.profiles where id = ${rows[0]!.id}`;
    const [quietEvent] = await sql`select admin.create_event(${quiet!.id}, 'quiet-start', now() + interval '1 day') as id`;

    const secret = new TextEncoder().encode(env.jwtSecret);
    const tokens = await Promise.all(
      rows.map((r) =>
        new SignJWT({ role: 'authenticated' })
          .setProtectedHeader({ alg: 'HS256', typ: 'JWT' })
          .setSubject(r.id)
          .setAudience('authenticated')
          .setIssuer(`${env.config.publicUrl}/api/auth`)
          .setIssuedAt()
          .setExpirationTime('2h')
          .sign(secret),
      ),
    );

    const rssBefore = process.memoryUsage().rss;
    ctx.progress(`opening ${streams} streams`);
    const readers: Reader[] = [];
    for (let i = 0; i < streams; i += 100) {
      const batch = Array.from({ length: Math.min(100, streams - i) }, (_, j) => openReader(env.baseUrl, tokens[Math.floor((i + j) / perUser)]!));
      readers.push(...(await Promise.all(batch)));
    }
    await until(() => readers.every((r) => r.ready), 60_000, 'every stream to be ready');
    const rss = process.memoryUsage().rss;
    ctx.progress(
      `${readers.length} streams open (${users} users); process RSS +${Math.round((rss - rssBefore) / 1048576)} MB ` +
        `(gateway and clients together, ~${Math.round((rss - rssBefore) / readers.length / 1024)} KB per stream)`,
    );

    ctx.progress(`${changes} updates seen by every stream`);
    const delays: number[] = [];
    const perChange: number[] = [];
    for (let k = 0; k < changes; k++) {
      const title = `bench-${k}`;
      await sql`update app.events set title = ${title} where id = ${event!.id}`;
      const committed = performance.now();
      await until(() => readers.every((r) => r.arrivals.has(title)), 60_000, `${title} on every stream`);
      let last = 0;
      for (const r of readers) {
        const d = r.arrivals.get(title)! - committed;
        delays.push(d);
        last = Math.max(last, d);
      }
      perChange.push(last);
      await new Promise((r) => setTimeout(r, 50));
    }

    ctx.progress(`${changes} updates seen by one stream of one user (${readers.length - 1} other streams open)`);
    const lone: number[] = [];
    for (let k = 0; k < changes; k++) {
      const title = `quiet-${k}`;
      await sql`update app.events set title = ${title} where id = ${quietEvent!.id}`;
      const committed = performance.now();
      await until(() => readers[0]!.arrivals.has(title), 30_000, `${title}`);
      lone.push(readers[0]!.arrivals.get(title)! - committed);
      await new Promise((r) => setTimeout(r, 50));
    }

    for (const r of readers) r.abort.abort();
    await new Promise((r) => setTimeout(r, 500));

    const results: Stats[] = [
      summarize(`commit→delivery, ${readers.length} streams of ${users} users (all see it; n = streams × changes)`, delays),
      summarize(`commit→last stream, per change (${readers.length} streams)`, perChange),
      summarize(`commit→delivery, 1 of ${readers.length} streams sees it`, lone),
    ];
    return results;
  },
};
export default bench;

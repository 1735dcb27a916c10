// What a calendar app polling a community feed costs per poll: a community
// with 1,000 events (from 30 days ago to two years ahead, at 50 venues,
// descriptions of ~200 characters; 100 past and 10 deleted ones among them),
// polled by a separate client process one request at a time, without and
// with If-None-Match, uncompressed (the baseline, as before compression) and
// with Accept-Encoding gzip and br. Reports latency (median, p95, x
// baseline), the bytes on the wire, and CPU per poll of the gateway (this
// process: the client runs in its own) and of Postgres (the gateway's
// backends, from /proc; not measured with BENCH_DATABASE_URL). And the SQL
// call alone, both ways.
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import { CALENDAR_FORMAT, renderCalendar, type CalendarDocument } from '../../gateway/http/calendar.ts';
import { summarize, type Bench, type Stats } from './harness.ts';

const EVENTS = Number(process.env.BENCH_CALENDAR_EVENTS ?? 1000);
const POLLS = Number(process.env.BENCH_CALENDAR_POLLS ?? 300);
const CLOCK_TICKS = 100;

/** CPU time (µs) a process has used so far (Linux /proc), 0 when it is gone. */
function processCpuUs(pid: number): number {
  try {
    const fields = fs.readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
    return ((Number(fields[11]) + Number(fields[12])) * 1e6) / CLOCK_TICKS;
  } catch {
    return 0;
  }
}

/**
 * The client: `n` sequential GETs in its own process, asking for `encoding`
 * (identity: uncompressed); the latency (ms) of each (decoding included, as a
 * calendar app pays it) and the bytes on the wire of the last.
 */
function poll(url: string, n: number, etag: string | undefined, encoding: string): Promise<{ times: number[]; bytes: number; statuses: number[] }> {
  const script = `
    const [url, n, etag, encoding] = [process.argv[1], Number(process.argv[2]), process.argv[3], process.argv[4]];
    const times = [], statuses = [];
    let bytes = 0;
    for (let i = 0; i < n; i++) {
      const t0 = performance.now();
      const res = await fetch(url, { headers: { 'accept-encoding': encoding, ...(etag ? { 'if-none-match': etag } : {}) } });
      const body = await res.arrayBuffer();
      times.push(performance.now() - t0);
      statuses.push(res.status);
      bytes = Number(res.headers.get('content-length') ?? body.byteLength);
    }
    process.stdout.write(JSON.stringify({ times, bytes, statuses }));
  `;
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ['--input-type=module', '-e', script, url, String(n), etag ?? '', encoding], {
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    let out = '';
    child.stdout.on('data', (chunk: Buffer) => (out += chunk.toString()));
    child.on('error', reject);
    child.on('exit', (code) => (code === 0 ? resolve(JSON.parse(out)) : reject(new Error(`poll client exited with ${code}`))));
  });
}

const bench: Bench = {
  name: 'calendar',
  description: `a calendar app polling a ${EVENTS}-event community feed, without and with If-None-Match`,
  async run(ctx) {
    const { sql } = ctx;
    ctx.progress(`loading a community with ${EVENTS} events at 50 venues`);
    const [community] = await sql`select admin.create_community('Bench calendar club', 'A community with many events') as id`;
    await sql`
      with n as (insert into app.nodes (kind) select 'venue' from generate_series(1, 50) returning id)
      insert into app.venues (node_id, name, address) select id, 'Bench venue', '1 Bench Street, Bench City' from n`;
    await sql`
      with v as (select node_id, row_number() over (order by node_id) as r from app.venues where name = 'Bench venue'),
           plan as (select g, now() - interval '30 days' + (g * (760.0 / ${EVENTS})) * interval '1 day' as starts_at from generate_series(1, ${EVENTS}) g),
           n as (insert into app.nodes (kind) select 'event' from plan returning id),
           nn as (select id, row_number() over () as r from n)
      insert into app.events (node_id, community_id, title, description, starts_at, ends_at, venue_node_id, location)
      select nn.id, ${community!.id}, 'Bench event ' || p.g || ': talks, drinks; and more',
             repeat('A description with commas, semicolons; and an emoji 🎉. ', 4),
             p.starts_at, case when p.g % 3 = 0 then null else p.starts_at + interval '3 hours' end,
             (select node_id from v where v.r = 1 + p.g % 50), 'Bench venue'
        from plan p join nn on nn.r = p.g`;
    // Ten updated and ten deleted (listed as cancelled).
    await sql`update app.events set title = title || ' (moved)' where id in (select id from app.events where community_id = ${community!.id} order by starts_at desc limit 10)`;
    await sql`delete from app.events where id in (select id from app.events where community_id = ${community!.id} order by starts_at desc offset 10 limit 10)`;
    await sql`analyze`;
    const path = `/c/${community!.id}/calendar.ics`;
    const url = `${ctx.env.baseUrl}${path}`;

    const first = await fetch(url, { headers: { 'accept-encoding': 'identity' } });
    const text = await first.text();
    const etag = first.headers.get('etag')!;
    const listed = (text.match(/\r\nBEGIN:VEVENT\r\n/g) ?? []).length;
    ctx.progress(`the feed lists ${listed} events, ${Buffer.byteLength(text)} bytes; ETag ${etag}`);

    const local = !process.env.BENCH_DATABASE_URL;
    const backends = async () =>
      local ? ((await sql`select pid from pg_stat_activity where application_name like 'gateway%'`) as unknown as { pid: number }[]).map((r) => r.pid) : [];
    const postgresCpu = async () => (await backends()).reduce((sum, pid) => sum + processCpuUs(pid), 0);

    const rows: Stats[] = [];
    const cpu: string[] = [];
    for (const [label, conditional, encoding] of [
      ['GET feed, no If-None-Match (200), uncompressed', false, 'identity'],
      ['GET feed, no If-None-Match (200), gzip', false, 'gzip'],
      ['GET feed, no If-None-Match (200), br', false, 'br'],
      ['GET feed, If-None-Match (304), uncompressed', true, 'identity'],
      ['GET feed, If-None-Match (304), br', true, 'br'],
    ] as const) {
      await poll(url, 20, conditional ? etag : undefined, encoding); // warm-up (pool connections, plans)
      const pg0 = await postgresCpu();
      const gw0 = process.cpuUsage();
      const result = await poll(url, POLLS, conditional ? etag : undefined, encoding);
      const gw = process.cpuUsage(gw0);
      const pg = (await postgresCpu()) - pg0;
      const expected = conditional ? 304 : 200;
      if (result.statuses.some((s) => s !== expected)) throw new Error(`${label}: statuses ${[...new Set(result.statuses)].join(', ')}`);
      rows.push(summarize(`${label}, ${result.bytes} bytes`, result.times));
      cpu.push(
        `  ${label}: gateway CPU ${((gw.user + gw.system) / POLLS / 1000).toFixed(2)} ms/poll, ` +
          `Postgres CPU ${local ? `${(pg / POLLS / 1000).toFixed(2)} ms/poll` : 'not measured (BENCH_DATABASE_URL)'}, ${result.bytes} bytes`,
      );
    }

    // The SQL call alone (one statement, one round trip; the function is security definer, so as any caller).
    const call = (conditional: boolean) =>
      sql`select etag, calendar is null as not_modified
            from api.calendar_community(${community!.id}, ${ctx.env.config.publicUrl}, ${CALENDAR_FORMAT},
                                        ${conditional ? [etag] : null}, null)`;
    rows.push(await ctx.measure('SQL api.calendar_community, full calendar', 200, () => call(false)));
    rows.push(await ctx.measure('SQL api.calendar_community, validators only (304)', 200, () => call(true)));
    // The renderer alone (this process), the same 1,000 entries in UTC and in a
    // zone (local times through TZDate, a VTIMEZONE): what writing TZIDs costs.
    const [answer] = await sql<{ calendar: CalendarDocument }[]>`
      select calendar from api.calendar_community(${community!.id}, ${ctx.env.config.publicUrl}, ${CALENDAR_FORMAT}, null, null)`;
    const utc = answer!.calendar;
    const zoned: CalendarDocument = { ...utc, events: utc.events.map((e) => ({ ...e, timezone: 'Europe/Paris' })) };
    rows.push(await ctx.measure(`render ${utc.events.length} entries in UTC`, 50, async () => renderCalendar(utc, 3600)));
    rows.push(await ctx.measure(`render ${utc.events.length} entries in Europe/Paris (TZID, VTIMEZONE)`, 50, async () => renderCalendar(zoned, 3600)));
    console.log(cpu.join('\n'));
    return rows;
  },
};
export default bench;

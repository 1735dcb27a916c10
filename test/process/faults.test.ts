// Faults, with real processes (issue 12):
//   (a) the gateway SIGKILLed under a parallel write load: every acknowledged
//       write is in the database, none half written, the watchdog stops the
//       embedded Postgres (no orphan), and the next start comes up;
//   (c) SIGTERM under load drains in-flight requests and exits in bounded time;
//   (b) Postgres stopped and started under a running gateway: requests fail
//       fast with 503, /health says 503, everything recovers by itself, the
//       realtime stream included (resuming with Last-Event-ID loses nothing).
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import postgres from 'postgres';
import { describe, expect, it } from 'vitest';
import { ensureDatabase, isAlive, startEmbeddedPostgres } from '../../gateway/core/process/embedded-postgres.ts';
import { createLogger } from '../../gateway/core/process/log.ts';
import { runMigrations } from '../../gateway/core/database/migrate.ts';
import { uniqueEmail } from '../helpers.ts';
import { openStream, type SseStream } from '../support/sse.ts';
import { exited, freePort, startGatewayProcess, waitUntil } from '../support/processes.ts';
import { testDir } from '../support/test-dir.ts';

async function call(base: string, method: string, path: string, token?: string, body?: unknown) {
  const res = await fetch(base + path, {
    method,
    headers: { ...(token ? { authorization: `Bearer ${token}` } : {}), ...(body ? { 'content-type': 'application/json' } : {}) },
    body: body ? JSON.stringify(body) : undefined,
  });
  const text = await res.text();
  let json: any;
  try {
    json = JSON.parse(text);
  } catch {
    json = undefined;
  }
  return { status: res.status, body: json };
}

async function signUp(base: string): Promise<{ email: string; token: string }> {
  const email = uniqueEmail('fault');
  const reg = await call(base, 'POST', '/api/auth/register', undefined, { email, password: 'password123' });
  if (reg.status !== 201) throw new Error(`register ${reg.status}`);
  const login = await call(base, 'POST', '/api/auth/login', undefined, { email, password: 'password123' });
  if (login.status !== 200) throw new Error(`login ${login.status} ${JSON.stringify(login.body)}`);
  return { email, token: login.body.access_token };
}

describe('the gateway killed with SIGKILL under a parallel write load', () => {
  it('loses no acknowledged write, half-writes nothing, leaves no Postgres, and starts again', { timeout: 300_000 }, async () => {
    const dataDir = path.join(testDir, `kill-${crypto.randomBytes(3).toString('hex')}`);
    const env = { DATA_DIR: dataDir, PORT: String(freePort()), EMBEDDED_PG_PORT: String(freePort()) };
    const first = await startGatewayProcess(env);
    const password = fs.readFileSync(path.join(dataDir, 'postgres', 'superuser-password'), 'utf8').trim();
    const dbUrl = `postgres://postgres:${encodeURIComponent(password)}@127.0.0.1:${env.EMBEDDED_PG_PORT}/app`;
    const pidFile = path.join(dataDir, 'postgres', 'data', 'postmaster.pid');
    const postgresPid = Number(fs.readFileSync(pidFile, 'utf8').split('\n')[0]);

    const users = await Promise.all(Array.from({ length: 6 }, () => signUp(first.url)));
    let sql = postgres(dbUrl, { max: 2, onnotice: () => {} });
    const [community] = await sql`select admin.create_community(${'Kill test ' + crypto.randomBytes(3).toString('hex')}) as id`;
    await sql.end();

    // Writers: tasks carrying a deal (task + deal written together), joins and leaves (member_count).
    const acknowledged: string[] = [];
    let stop = false;
    let attempts = 0;
    const writer = async (user: { token: string }, u: number) => {
      for (let i = 0; !stop; i++) {
        attempts++;
        try {
          const task = await call(first.url, 'POST', '/api/mobile/tasks', user.token, {
            title: `task ${u}-${i}`,
            deal_context: { company: `Company ${u}-${i % 3}`, deal_value: i },
          });
          if (task.status === 201) acknowledged.push(task.body.task?.id ?? task.body.id ?? task.body.data?.id);
          await call(first.url, 'POST', `/api/mobile/communities/${community!.id}/${i % 2 === 0 ? 'join' : 'leave'}`, user.token);
        } catch {
          return; // the gateway is gone
        }
      }
    };
    const load = users.map((user, u) => writer(user, u));
    await waitUntil(() => acknowledged.length >= 60, 60_000, 'some acknowledged writes');
    first.child.kill('SIGKILL');
    stop = true;
    await Promise.all(load);
    expect(acknowledged.every((id) => typeof id === 'string')).toBe(true);

    // No orphan: the watchdog stops Postgres once the gateway is gone.
    const orphanGoneMs = await waitUntil(() => !isAlive(postgresPid), 30_000, 'the embedded Postgres to stop');

    const second = await startGatewayProcess(env);
    expect((await fetch(`${second.url}/health`)).status).toBe(200);
    sql = postgres(dbUrl, { max: 2, onnotice: () => {} });
    try {
      const found = await sql`select count(*)::int as n from app.tasks where id = any(${acknowledged}::uuid[])`;
      const dealless = await sql`
        select count(*)::int as n from app.tasks t
         where t.company_key is not null
           and not exists (select from app.deals d where d.created_by = t.created_by and lower(btrim(d.company)) = t.company_key)`;
      const drift = await sql`
        select count(*)::int as n from app.communities c
         where c.member_count <> (select count(*) from app.community_members m where m.community_id = c.id)`;
      console.log(
        `SIGKILL under load: ${attempts} writes attempted, ${acknowledged.length} acknowledged, ${found[0]!.n} found; ` +
          `orphan Postgres stopped ${orphanGoneMs} ms after the kill`,
      );
      expect(found[0]!.n).toBe(acknowledged.length);
      expect(dealless[0]!.n).toBe(0);
      expect(drift[0]!.n).toBe(0);
    } finally {
      await sql.end();
    }

    // (c) SIGTERM under load: requests being served complete and are answered,
    // requests not yet started are refused or reset (and nothing of them ran),
    // and the process exits in bounded time.
    const emails = Array.from({ length: 16 }, () => uniqueEmail('drain'));
    const inFlight = emails.map((email) =>
      call(second.url, 'POST', '/api/auth/register', undefined, { email, password: 'password123' }).then(
        (r) => r.status,
        (err: Error & { cause?: { code?: string } }) => `not served (${err.cause?.code ?? err.message})`,
      ),
    );
    await new Promise((r) => setTimeout(r, 300));
    const termAt = Date.now();
    second.child.kill('SIGTERM');
    const code = await exited(second.child);
    const drainMs = Date.now() - termAt;
    const statuses = await Promise.all(inFlight);
    console.log(`SIGTERM under load: exited ${code} after ${drainMs} ms; answers: ${statuses.join(' ')}`);
    expect(code).toBe(0);
    expect(drainMs).toBeLessThan(20_000); // bounded by the statement timeout (15 s) + 1 s
    for (const s of statuses) expect(s === 201 || s === 503 || String(s).startsWith('not served')).toBe(true);
    expect(statuses.filter((s) => s === 201).length).toBeGreaterThan(0);

    // Every answered registration is there; none that was not answered 201 is.
    const cluster = await startEmbeddedPostgres({ dir: path.join(dataDir, 'postgres'), port: Number(env.EMBEDDED_PG_PORT), persistent: true, log: createLogger('silent') });
    sql = postgres(dbUrl, { max: 1, onnotice: () => {} });
    try {
      const rows = await sql`select email from identity.users where email = any(${emails})`;
      const stored = new Set(rows.map((r) => r.email as string));
      emails.forEach((email, i) => expect(stored.has(email), `${email}: ${statuses[i]}`).toBe(statuses[i] === 201));
    } finally {
      await sql.end();
      await cluster.stop();
    }
  });
});

describe('Postgres stopped and started under a running gateway', () => {
  it('fails fast with 503, says so on /health, and recovers by itself, the stream included', { timeout: 300_000 }, async () => {
    const dir = path.join(testDir, `restart-${crypto.randomBytes(3).toString('hex')}`);
    const port = freePort();
    const quiet = createLogger('silent');
    let cluster = await startEmbeddedPostgres({ dir, port, persistent: true, log: quiet });
    await ensureDatabase(cluster.urlFor('postgres'), 'app');
    const dbUrl = cluster.urlFor('app');
    // With DATABASE_URL the gateway applies committed migrations only: apply current/ as well first.
    await runMigrations(dbUrl, quiet, { includeCurrent: true });
    const gw = await startGatewayProcess({ DATABASE_URL: dbUrl, PORT: String(freePort()), DATA_DIR: dir, LOG_LEVEL: 'info' });
    const streams: SseStream[] = [];
    let sql = postgres(dbUrl, { max: 2, onnotice: () => {} });
    try {
      const user = await signUp(gw.url);
      const [community] = await sql`select admin.create_community(${'Restart ' + crypto.randomBytes(3).toString('hex')}, null, '{}', ${user.email}) as id`;
      const stream = await openStream({ base: gw.url, token: user.token });
      streams.push(stream);
      expect(stream.status, JSON.stringify(stream.body)).toBe(200);
      const event = async (title: string) => {
        await sql`select admin.create_event(${community!.id}, ${title}, now() + interval '1 day')`;
      };
      await event('before restart');
      await stream.until((m) => m.json?.title === 'before restart', 20_000);

      // Down.
      await cluster.stop();
      await sql.end({ timeout: 1 });
      const timings: number[] = [];
      for (let i = 0; i < 5; i++) {
        const started = Date.now();
        const r = await call(gw.url, 'GET', '/api/mobile/profile', user.token);
        timings.push(Date.now() - started);
        expect(r.status).toBe(503);
        expect(r.body.error).toBe('service_unavailable');
        expect(typeof r.body.message).toBe('string');
      }
      const health = await call(gw.url, 'GET', '/health');
      expect(health.status).toBe(503);
      expect(Math.max(...timings)).toBeLessThan(3_000);
      // A new stream is refused the same way (it does not wait for a batch).
      const refused = await call(gw.url, 'GET', '/api/mobile/events/upcoming/stream', user.token);
      expect(refused.status).toBe(503);
      expect(refused.body.error).toBe('service_unavailable');

      // Up again: everything recovers without touching the gateway.
      cluster = await startEmbeddedPostgres({ dir, port, persistent: true, log: quiet });
      const upAt = Date.now();
      const healthMs = await waitUntil(async () => (await call(gw.url, 'GET', '/health')).status === 200, 30_000, '/health 200');
      await waitUntil(async () => (await call(gw.url, 'GET', '/api/mobile/profile', user.token)).status === 200, 30_000, 'requests to succeed');
      const requestsMs = Date.now() - upAt;

      sql = postgres(dbUrl, { max: 2, onnotice: () => {} });
      await event('after restart');
      // The stream either carries on, or ended and resumes with Last-Event-ID: nothing is lost.
      await stream.waitFor(() => stream.ended || stream.messages.some((m) => m.json?.title === 'after restart'), 30_000, 'the stream');
      let received = stream.messages;
      if (!stream.messages.some((m) => m.json?.title === 'after restart')) {
        const lastId = [...stream.messages].reverse().find((m) => m.id)?.id;
        const resumed = await openStream({ base: gw.url, token: user.token, lastEventId: lastId });
        streams.push(resumed);
        expect(resumed.status).toBe(200);
        await resumed.until((m) => m.json?.title === 'after restart', 30_000);
        received = [...received, ...resumed.messages];
      }
      await event('later');
      const last = streams.at(-1)!;
      await last.until((m) => m.json?.title === 'later', 30_000);
      const titles = new Set([...received, ...last.messages].map((m) => m.json?.title));
      for (const t of ['before restart', 'after restart', 'later']) expect(titles.has(t)).toBe(true);
      console.log(
        `database restart: requests while down answered 503 in ${Math.max(...timings)} ms at most; ` +
          `/health 200 ${healthMs} ms and requests 200 ${requestsMs} ms after Postgres was back; ` +
          `stream ${streams.length > 1 ? 'resumed with Last-Event-ID' : 'carried on'}`,
      );
    } finally {
      for (const s of streams) s.close();
      gw.child.kill('SIGTERM');
      await exited(gw.child);
      await sql.end({ timeout: 1 });
      await cluster.stop();
    }
  });
});

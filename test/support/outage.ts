// A database outage under load, measured: shared by test/process/outage.test.ts
// and `npm run bench -- faults`. No Vitest here (the bench runs outside it).
//
//   1. A Postgres of its own that can be stopped and started again: the
//      embedded Postgres 18, or Debian's PostgreSQL 15 when `server` says so.
//   2. A real gateway process on it (DATABASE_URL), with a short statement
//      timeout and the realtime safety poll off, so that a change reaching a
//      stream soon after the outage can only have come through LISTEN.
//   3. `clients` users each reading their profile in a loop (a new request as
//      soon as the last is answered), and one SSE stream open throughout.
//   4. Postgres stopped with a fast shutdown (every backend terminated, in
//      the middle of requests), `downSeconds` later started again.
//   5. Measured from the moment Postgres accepts connections again: /health
//      200, the first profile answered 200, and the first change delivered to
//      the stream (events are created every 100 ms from then on).
import { spawnSync } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import postgres from 'postgres';
import { ensureDatabase, startEmbeddedPostgres, type RunningPostgres } from '../../gateway/tooling/embedded-postgres.ts';
import { createLogger } from '../../gateway/core/log.ts';
import { runMigrations } from '../../gateway/core/migrate.ts';
import { pg15Program } from '../../gateway/tooling/pg15.ts';
import { exited, freePort, startGatewayProcess, waitUntil } from './processes.ts';

/** The gateway's statement timeout during the outage runs: every answer is due within it + 2 s. */
export const OUTAGE_STATEMENT_TIMEOUT_MS = 5_000;
/** A client gives up on a request after this long (and counts it as unanswered). */
const CLIENT_TIMEOUT_MS = 30_000;

export interface OutageOptions {
  /** A folder for the cluster's data (removed afterwards). */
  dir: string;
  downSeconds: number;
  clients: number;
  /** 'embedded' (Postgres 18 from npm) or 'pg15' (Debian's, /usr/lib/postgresql/15). */
  server?: 'embedded' | 'pg15';
  /** Extra environment for the gateway process. */
  env?: Record<string, string>;
}

export interface OutageReport {
  server: string;
  requests: number;
  ok: number;
  /** 503 answers (each with Retry-After). */
  refused: number;
  /** Requests refused while the database was down (or coming back). */
  failedWhileDown: number;
  /** Requests answered 200 that were sent after the database was back. */
  okAfter: number;
  /** Requests refused though sent once the gateway served again (a pool that lost connections refuses them). */
  refusedAfter: number;
  /** Requests with no answer within the client's timeout, or a broken connection. */
  unanswered: string[];
  /** Answers other than 200, or 503 with Retry-After. */
  unexpected: string[];
  longestMs: number;
  healthBackMs: number;
  servedBackMs: number;
  listenBackMs: number;
  /** Lines the gateway logged at level error or above. */
  errorLines: number;
  /** Events created after the return that never reached the open stream. */
  streamGaps: string[];
  /** Events the stream delivered more than once. */
  streamDuplicates: string[];
  streamInOrder: boolean;
  summary: string;
}

/** A Postgres server that can be stopped (fast shutdown) and started again on the same data. */
interface Restartable {
  url: string;
  name: string;
  stop(): Promise<void>;
  start(): Promise<void>;
  dispose(): Promise<void>;
}

async function embedded(dir: string): Promise<Restartable> {
  const port = freePort();
  const quiet = createLogger('silent');
  const start = () => startEmbeddedPostgres({ dir, port, persistent: true, log: quiet });
  let cluster: RunningPostgres | null = await start();
  await ensureDatabase(cluster.urlFor('postgres'), 'app');
  return {
    url: cluster.urlFor('app'),
    name: 'embedded Postgres 18',
    async stop() {
      await cluster?.stop(); // SIGINT: fast shutdown
      cluster = null;
    },
    async start() {
      cluster = await start();
    },
    async dispose() {
      await cluster?.stop();
      fs.rmSync(dir, { recursive: true, force: true });
    },
  };
}

async function pg15(dir: string): Promise<Restartable> {
  const pgCtl = pg15Program('pg_ctl');
  const initdb = pg15Program('initdb');
  if (!pgCtl || !initdb) throw new Error('PostgreSQL 15 is not installed (apt-get install postgresql-15)');
  fs.mkdirSync(dir, { recursive: true, mode: 0o755 });
  const asRoot = process.getuid?.() === 0;
  if (asRoot) spawnSync('chown', ['postgres:', dir]);
  const run = (program: string, args: string[]) => {
    const quoted = [program, ...args].map((a) => `'${a.replaceAll("'", `'\\''`)}'`).join(' ');
    const result = asRoot ? spawnSync('su', ['postgres', '-s', '/bin/sh', '-c', quoted], { encoding: 'utf8' }) : spawnSync(program, args, { encoding: 'utf8' });
    if (result.status !== 0) throw new Error(`${path.basename(program)}: ${result.stderr || result.stdout}`);
  };
  const data = path.join(dir, 'data');
  const port = freePort();
  run(initdb, ['-D', data, '-U', 'postgres', '--auth=trust', '-E', 'UTF8', '--locale=C', '--no-sync']);
  const start = async () =>
    run(pgCtl, ['-D', data, '-l', path.join(dir, 'server.log'), '-w', 'start', '-o', `-p ${port} -c listen_addresses=127.0.0.1 -c unix_socket_directories=${dir} -c fsync=off -c max_connections=200`]);
  await start();
  await ensureDatabase(`postgres://postgres@127.0.0.1:${port}/postgres`, 'app');
  return {
    url: `postgres://postgres@127.0.0.1:${port}/app`,
    name: 'PostgreSQL 15',
    stop: async () => run(pgCtl, ['-D', data, '-m', 'fast', '-w', 'stop']),
    start,
    async dispose() {
      try {
        run(pgCtl, ['-D', data, '-m', 'immediate', '-w', 'stop']);
      } catch {
        // already stopped
      }
      fs.rmSync(dir, { recursive: true, force: true });
    },
  };
}

interface Sample {
  client: number;
  startedAt: number;
  endedAt: number;
  status: number | string;
  retryAfter: string | null;
}

async function call(base: string, method: string, urlPath: string, token?: string, body?: unknown) {
  const res = await fetch(base + urlPath, {
    method,
    headers: { ...(token ? { authorization: `Bearer ${token}` } : {}), ...(body ? { 'content-type': 'application/json' } : {}) },
    body: body ? JSON.stringify(body) : undefined,
    signal: AbortSignal.timeout(CLIENT_TIMEOUT_MS),
  });
  const text = await res.text();
  return { status: res.status, headers: res.headers, json: text ? (JSON.parse(text) as any) : undefined };
}

/** An SSE stream reduced to what the measure needs: the time each event title arrived. */
async function watchStream(base: string, token: string) {
  const controller = new AbortController();
  const res = await fetch(`${base}/api/mobile/events/upcoming/stream`, {
    headers: { authorization: `Bearer ${token}`, accept: 'text/event-stream' },
    signal: controller.signal,
  });
  if (res.status !== 200) throw new Error(`stream: ${res.status}`);
  const arrived = new Map<string, number>();
  /** Every insert message's title, in order of arrival (duplicates included). */
  const inserts: string[] = [];
  void (async () => {
    const decoder = new TextDecoder();
    let buffer = '';
    try {
      for await (const chunk of res.body as unknown as AsyncIterable<Uint8Array>) {
        buffer += decoder.decode(chunk, { stream: true });
        let end: number;
        while ((end = buffer.indexOf('\n\n')) !== -1) {
          const message = buffer.slice(0, end);
          buffer = buffer.slice(end + 2);
          const title = /"title":"(outage [^"]*)"/.exec(message)?.[1];
          if (!title || !/^event: insert$/m.test(message)) continue;
          inserts.push(title);
          if (!arrived.has(title)) arrived.set(title, Date.now());
        }
      }
    } catch {
      // closed
    }
  })();
  return { arrived, inserts, close: () => controller.abort() };
}

export async function runOutage(options: OutageOptions): Promise<OutageReport> {
  const server = options.server === 'pg15' ? await pg15(options.dir) : await embedded(options.dir);
  const quiet = createLogger('silent');
  // With DATABASE_URL the gateway applies committed migrations only: current/ too, first.
  await runMigrations(server.url, quiet, { includeCurrent: true });
  const gateway = await startGatewayProcess({
    DATABASE_URL: server.url,
    PORT: String(freePort()),
    DATA_DIR: options.dir,
    LOG_LEVEL: 'info',
    STATEMENT_TIMEOUT_MS: String(OUTAGE_STATEMENT_TIMEOUT_MS),
    REALTIME_POLL_SECONDS: '600',
    ...options.env,
  });
  const base = gateway.url;
  let admin = postgres(server.url, { max: 2, onnotice: () => {} });
  const samples: Sample[] = [];
  let stream: Awaited<ReturnType<typeof watchStream>> | undefined;
  try {
    const users: { email: string; token: string }[] = [];
    for (let i = 0; i < options.clients; i++) {
      const email = `outage-${crypto.randomBytes(6).toString('hex')}@example.com`;
      await call(base, 'POST', '/api/auth/register', undefined, { email, password: 'password123' });
      const login = await call(base, 'POST', '/api/auth/login', undefined, { email, password: 'password123' });
      if (login.status !== 200) throw new Error(`login: ${login.status}`);
      users.push({ email, token: login.json.access_token });
    }
    const [community] = await admin`select admin.create_community(${'Outage ' + crypto.randomBytes(3).toString('hex')}, null, '{}', ${users[0]!.email}) as id`;
    stream = await watchStream(base, users[0]!.token);

    let loading = true;
    const load = users.map(async (user, client) => {
      while (loading) {
        const startedAt = Date.now();
        let status: number | string;
        let retryAfter: string | null = null;
        try {
          const res = await call(base, 'GET', '/api/mobile/profile', user.token);
          status = res.status;
          retryAfter = res.headers.get('retry-after');
        } catch (err) {
          const e = err as Error & { cause?: { code?: string } };
          status = e.name === 'TimeoutError' ? 'no answer' : `no answer (${e.cause?.code ?? e.message})`;
        }
        samples.push({ client, startedAt, endedAt: Date.now(), status, retryAfter });
        // A refused request is retried after a short pause, as a client honouring Retry-After soon would.
        if (status !== 200) await new Promise((r) => setTimeout(r, 50));
      }
    });

    await new Promise((r) => setTimeout(r, 1_000));
    await admin.end({ timeout: 1 });
    const downAt = Date.now();
    await server.stop();
    await new Promise((r) => setTimeout(r, options.downSeconds * 1000));
    await server.start();
    const upAt = Date.now();
    admin = postgres(server.url, { max: 2, onnotice: () => {} });

    // Events every 100 ms from now on; the first to reach the stream says when LISTEN was back.
    let creating = true;
    const created: string[] = [];
    const creator = (async () => {
      for (let i = 0; creating; i++) {
        const title = `outage ${i}`;
        await admin`select admin.create_event(${community!.id}, ${title}, now() + interval '1 day')`.then(() => created.push(title), () => {});
        await new Promise((r) => setTimeout(r, 100));
      }
    })();
    const health = (async () => {
      await waitUntil(async () => (await fetch(`${base}/health`, { signal: AbortSignal.timeout(CLIENT_TIMEOUT_MS) })).status === 200, 60_000, '/health 200');
      return Date.now() - upAt;
    })();
    const served = (async () => {
      await waitUntil(() => samples.some((s) => s.status === 200 && s.endedAt > upAt), 60_000, 'a profile answered 200');
      return Math.min(...samples.filter((s) => s.status === 200 && s.endedAt > upAt).map((s) => s.endedAt)) - upAt;
    })();
    const listen = (async () => {
      await waitUntil(() => stream!.arrived.size > 0, 60_000, 'a change on the stream');
      return Math.min(...stream!.arrived.values()) - upAt;
    })();
    const [healthBackMs, servedBackMs, listenBackMs] = await Promise.all([health, served, listen]);
    await new Promise((r) => setTimeout(r, 3_000));
    loading = false;
    creating = false;
    await Promise.all([...load, creator]);
    // Every event created after the return reaches the stream once, in order.
    await waitUntil(() => stream!.inserts.length >= created.length, 10_000, 'every change on the stream').catch(() => {});
    const streamGaps = created.filter((t) => !stream!.inserts.includes(t));
    const streamDuplicates = stream.inserts.filter((t, i) => stream!.inserts.indexOf(t) !== i);
    const streamInOrder = stream.inserts.every((t, i) => i === 0 || Number(t.split(' ')[1]) > Number(stream!.inserts[i - 1]!.split(' ')[1]));

    const unanswered = samples.filter((s) => typeof s.status === 'string').map((s) => `client ${s.client} at ${s.startedAt - downAt} ms: ${s.status}`);
    const unexpected = samples
      .filter((s) => typeof s.status === 'number' && s.status !== 200 && !(s.status === 503 && s.retryAfter))
      .map((s) => `client ${s.client} at ${s.startedAt - downAt} ms: ${s.status} (Retry-After ${s.retryAfter})`);
    const refused = samples.filter((s) => s.status === 503).length;
    const longestMs = Math.max(...samples.map((s) => s.endedAt - s.startedAt));
    const errorLines = gateway
      .output()
      .split('\n')
      .filter((line) => /"level":(50|60)/.test(line)).length;
    const report: OutageReport = {
      server: server.name,
      requests: samples.length,
      ok: samples.filter((s) => s.status === 200).length,
      refused,
      failedWhileDown: samples.filter((s) => s.status !== 200 && s.startedAt >= downAt - 100).length,
      okAfter: samples.filter((s) => s.status === 200 && s.startedAt >= upAt).length,
      refusedAfter: samples.filter((s) => s.status !== 200 && s.startedAt >= upAt + servedBackMs + 500).length,
      unanswered,
      unexpected,
      longestMs,
      healthBackMs,
      servedBackMs,
      listenBackMs,
      errorLines,
      streamGaps,
      streamDuplicates,
      streamInOrder,
      summary: '',
    };
    report.summary =
      `${server.name} down ${options.downSeconds} s under ${options.clients} clients: ${report.requests} requests, ` +
      `${report.ok} × 200, ${refused} × 503 (${report.refusedAfter} once served again), ${unanswered.length} unanswered, ${unexpected.length} unexpected, longest answer ${longestMs} ms; ` +
      `after the return: /health 200 in ${healthBackMs} ms, requests served in ${servedBackMs} ms, LISTEN back in ${listenBackMs} ms; ` +
      `stream: ${created.length} events after the return, ${streamGaps.length} missing, ${streamDuplicates.length} duplicated; ` +
      `${errorLines} error lines logged`;
    return report;
  } finally {
    stream?.close();
    gateway.child.kill('SIGTERM');
    const killer = setTimeout(() => gateway.child.kill('SIGKILL'), 30_000);
    await exited(gateway.child);
    clearTimeout(killer);
    await admin.end({ timeout: 1 });
    await server.dispose();
  }
}

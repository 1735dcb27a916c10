// `npm run bench -- webhooks`: what one job worker (graphile-worker,
// WORKER_CONCURRENCY, default 4) sustains delivering webhooks to a fast
// receiver on loopback, and how long a change waits between its COMMIT and
// its delivery on an idle system.
//
//   throughput  BENCH_WEBHOOK_DELIVERIES (default 3000) deliveries queued
//               while no worker runs, over BENCH_WEBHOOK_ENDPOINTS endpoints
//               (default 8: one queue each), then one worker started: the
//               deliveries per second until the receiver has them all. Also
//               with one endpoint (its deliveries go one at a time, in order).
//   latency     BENCH_WEBHOOK_CHANGES (default 300) changes committed one at
//               a time (admin.create_event, autocommit, in a community with
//               one endpoint), each waited for: the receiver's arrival time
//               minus the time the statement was sent (p50/p95/p99; ms clock).
//   stall       the fourth security review's attack: a community registers
//               20 endpoints that accept the connection and never answer,
//               then creates 3 events (60 deliveries, 10 s each before they
//               time out). While it goes on, BENCH_WEBHOOK_STALL_CHANGES
//               (default 30) changes of another community, one at a time,
//               as in `latency`; then BENCH_WEBHOOK_STALL_MAILS (default 10)
//               recovery e-mails, one at a time, from the queueing
//               transaction to their arrival at a real SMTP server
//               (smtp-server, on loopback). The worker has SMTP here.
//
// The gateway of the environment runs no worker (WORKER=off); the one
// measured runs in this process (startJobWorker, as `npm run worker` does).
import net from 'node:net';
import postgres from 'postgres';
import { SMTPServer } from 'smtp-server';
import { startJobWorker } from '../../gateway/jobs/worker.ts';
import { createLogger } from '../../gateway/core/process/log.ts';
import { startTestEnvironment } from '../support/environment.ts';
import { WebhookReceiver } from '../support/webhook-receiver.ts';
import { formatTable, summarize, type Bench } from './harness.ts';

const DELIVERIES = Number(process.env.BENCH_WEBHOOK_DELIVERIES ?? 3000);
const ENDPOINTS = Number(process.env.BENCH_WEBHOOK_ENDPOINTS ?? 8);
const CHANGES = Number(process.env.BENCH_WEBHOOK_CHANGES ?? 300);
const CONCURRENCY = Number(process.env.WORKER_CONCURRENCY ?? 4);
const STALL_CHANGES = Number(process.env.BENCH_WEBHOOK_STALL_CHANGES ?? 30);
const STALL_MAILS = Number(process.env.BENCH_WEBHOOK_STALL_MAILS ?? 10);

const bench: Bench = {
  name: 'webhooks',
  description: 'deliveries per second of one job worker, and commit-to-delivery latency on an idle system',
  async standalone() {
    const env = await startTestEnvironment({
      serverUrl: process.env.BENCH_DATABASE_URL,
      settings: { shared_buffers: '256MB' },
      env: { WORKER: 'off' },
    });
    const sql = postgres(env.databaseUrl, { max: 4, onnotice: () => {} });
    const receiver = await new WebhookReceiver().start();
    const mails: number[] = [];
    const smtp = new SMTPServer({
      authOptional: true,
      disabledCommands: ['STARTTLS'],
      onData(stream, _session, callback) {
        stream.resume();
        stream.on('end', () => (mails.push(Date.now()), callback()));
      },
    });
    await new Promise<void>((resolve) => smtp.listen(0, '127.0.0.1', () => resolve()));
    const log = createLogger(process.env.BENCH_WORKER_LOG ?? 'warn', 'bench-worker');
    const worker = (options: { retrySchedule?: number[]; smtp?: boolean } = {}) =>
      startJobWorker({
        connectionString: env.databaseUrl,
        concurrency: CONCURRENCY,
        webhooks: { allowPrivateTargets: true, retrySchedule: options.retrySchedule ?? [1] },
        smtp: options.smtp ? { url: `smtp://127.0.0.1:${(smtp.server.address() as net.AddressInfo).port}`, from: 'Bench <bench@example.com>' } : undefined,
        changeLogRetentionSeconds: 86_400,
        log,
      });
    const community = async (name: string, endpoints: number) => {
      const [row] = await sql<{ id: string }[]>`select admin.create_community(${name}) as id`;
      const paths: string[] = [];
      for (let i = 0; i < endpoints; i++) {
        const path = `/${name}-${i}`;
        paths.push(path);
        await sql`insert into app.webhook_endpoints (community_id, url, events, secret)
                  values (${row!.id}, ${receiver.url(path)}, '{event.created}', private.webhook_new_secret())`;
      }
      return { id: row!.id, paths };
    };
    const results: Record<string, unknown> = {};
    try {
      // Throughput: queue everything first, then let one worker drain it.
      const rows = [];
      for (const [label, endpoints] of [[`${ENDPOINTS} endpoints`, ENDPOINTS], ['1 endpoint (in order)', 1]] as const) {
        const c = await community(`tp${endpoints}`, endpoints);
        const perEndpoint = Math.ceil(DELIVERIES / endpoints);
        // One emit per change, as the triggers do (each queues one delivery per endpoint).
        await sql`select private.webhook_emit(${c.id}, 'event.created', jsonb_build_object('n', n)) from generate_series(1, ${perEndpoint}) n`;
        const total = perEndpoint * endpoints;
        const before = receiver.received.length;
        const started = Date.now();
        const w = await worker();
        await waitUntil(() => receiver.received.length - before >= total, 600_000);
        const seconds = (Date.now() - started) / 1000;
        await w.stop();
        const perSecond = total / seconds;
        rows.push({ label, total, seconds, perSecond });
        console.log(`  ${label}: ${total} deliveries in ${seconds.toFixed(1)} s = ${perSecond.toFixed(0)}/s (concurrency ${CONCURRENCY})`);
      }
      results.throughput = rows;

      // Latency: one change at a time on an otherwise idle system.
      const c = await community('latency', 1);
      const w = await worker();
      const samples: number[] = [];
      try {
        for (let i = 0; i < CHANGES + 20; i++) {
          const before = receiver.received.length;
          // From sending the statement (it commits at once): the delivery can
          // arrive before this process has read the COMMIT's answer.
          const sent = Date.now();
          await sql`select admin.create_event(${c.id}, ${`Latency ${i}`}, now() + interval '1 day')`;
          await waitUntil(() => receiver.received.length > before, 30_000);
          const arrived = receiver.received[receiver.received.length - 1]!.at;
          if (i >= 20) samples.push(arrived - sent);
        }
      } finally {
        await w.stop();
      }
      const stats = summarize('change sent → delivery received (idle, one endpoint)', samples);
      console.log(formatTable([stats]));
      results.latency = stats;

      // Stall: 20 endpoints of one community never answer; another community's deliveries and the e-mails.
      const attacker = await community('stall', 20);
      for (const path of attacker.paths) receiver.answer(path, [], { hang: true });
      const victim = await community('victim', 1);
      const [person] = await sql<{ id: string }[]>`select admin.create_user('bench-recover@example.com', 'correct horse battery') as id`;
      const stalled = await worker({ retrySchedule: [5, 300, 1800, 7200, 18000, 36000, 36000], smtp: true });
      const stallRows = [];
      try {
        for (let i = 0; i < 3; i++) await sql`select admin.create_event(${attacker.id}, ${`Stall ${i}`}, now() + interval '1 day')`;
        await waitUntil(() => receiver.received.some((r) => attacker.paths.includes(r.path)), 60_000);
        const deliveries: number[] = [];
        for (let i = 0; i < STALL_CHANGES; i++) {
          const before = receiver.at(victim.paths[0]!).length;
          const sent = Date.now();
          await sql`select admin.create_event(${victim.id}, ${`Unaffected ${i}`}, now() + interval '1 day')`;
          await waitUntil(() => receiver.at(victim.paths[0]!).length > before, 600_000);
          deliveries.push(receiver.at(victim.paths[0]!).at(-1)!.at - sent);
        }
        const queued: number[] = [];
        for (let i = 0; i < STALL_MAILS; i++) {
          const before = mails.length;
          const sent = Date.now();
          await sql`select private.queue_password_email(${person!.id}, 'recover', 'https://bench.example.com')`;
          await waitUntil(() => mails.length > before, 600_000);
          queued.push(mails.at(-1)! - sent);
        }
        const [tried] = await sql<{ tried: number; total: number }[]>`
          select count(*) filter (where d.attempts > 0)::int as tried, count(*)::int as total
            from app.webhook_deliveries d join app.webhook_endpoints e on e.id = d.endpoint_id where e.community_id = ${attacker.id}`;
        stallRows.push(
          summarize("another community's change → delivery, during the stall", deliveries),
          summarize('recovery e-mail queued → at the SMTP server, during the stall', queued),
        );
        console.log(formatTable(stallRows));
        console.log(`  the stalled community's deliveries tried meanwhile: ${tried!.tried} of ${tried!.total}`);
        results.stall = { rows: stallRows, stalledTried: tried };
      } finally {
        // The worker stops before the database does: the receiver lets go of the stalled requests
        // (each delivery then fails at once and is recorded), and the worker waits for those jobs.
        await receiver.stop();
        await stalled.stop(15_000);
      }
    } finally {
      await receiver.stop();
      await new Promise<void>((resolve) => smtp.close(() => resolve()));
      await sql.end({ timeout: 5 });
      await env.stop();
    }
    return results;
  },
};

async function waitUntil(done: () => boolean, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!done()) {
    if (Date.now() > deadline) throw new Error('timed out');
    await new Promise((resolve) => setTimeout(resolve, 1));
  }
}

export default bench;

// One community's webhooks cannot stall anyone else's background work, on a
// database of its own (its gateway runs no worker; the one job worker is
// started here, with the defaults of a real deployment: WORKER_CONCURRENCY 4,
// WEBHOOK_COMMUNITY_CONCURRENCY 2, SMTP to a real server on a random port):
//
//   * the attack of the fourth security review, over HTTP: a manager
//     registers 20 endpoints that accept the connection and never answer,
//     then creates 3 events (60 deliveries, 10 s each before they time out).
//     Another community's delivery and a recovery e-mail are done while
//     most of the stalled deliveries have not even been tried;
//   * an endpoint backs off after 3 failed attempts in a row: its other
//     deliveries wait, without spending attempts, until the pause ends or a
//     manager pings it.
import crypto from 'node:crypto';
import net from 'node:net';
import postgres from 'postgres';
import { SMTPServer } from 'smtp-server';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startJobWorker, type JobWorker } from '../../gateway/jobs/worker.ts';
import { createLogger } from '../../gateway/core/process/log.ts';
import { databaseServer, databaseUrl } from '../helpers.ts';
import { checkContract } from '../support/contract.ts';
import { startTestEnvironment, type TestEnvironment } from '../support/environment.ts';
import { WebhookReceiver } from '../support/webhook-receiver.ts';
import { eventually } from '../support/wait.ts';

let env: TestEnvironment;
let sql: postgres.Sql;
let worker: JobWorker;
let smtp: SMTPServer;
const mails: { to: string[]; at: number }[] = [];
const receiver = new WebhookReceiver();

beforeAll(async () => {
  await receiver.start();
  smtp = new SMTPServer({
    authOptional: true,
    disabledCommands: ['STARTTLS'],
    onData(stream, session, callback) {
      stream.resume();
      stream.on('end', () => {
        mails.push({ to: session.envelope.rcptTo.map((r) => r.address), at: Date.now() });
        callback();
      });
    },
  });
  await new Promise<void>((resolve) => smtp.listen(0, '127.0.0.1', () => resolve()));
  env = await startTestEnvironment({ ...databaseServer, env: { WORKER: 'off' } });
  sql = postgres(env.databaseUrl, { max: 4, onnotice: () => {} });
  worker = await startJobWorker({
    connectionString: env.databaseUrl,
    concurrency: 4,
    smtp: { url: `smtp://127.0.0.1:${(smtp.server.address() as net.AddressInfo).port}`, from: 'Community <no-reply@example.com>' },
    // Retries 30 s and 60 s apart: an endpoint backs off for 30 s after its third failure in a row.
    webhooks: { allowPrivateTargets: true, retrySchedule: [30, 60] },
    changeLogRetentionSeconds: 86_400,
    log: createLogger('silent'),
  });
}, 180_000);

afterAll(async () => {
  await worker?.stop(2_000);
  await receiver.stop();
  await sql?.end({ timeout: 5 });
  await env?.stop();
  await new Promise<void>((resolve) => smtp.close(() => resolve()));
}, 60_000);

async function call(method: string, path: string, token?: string, body?: unknown) {
  const res = await fetch(env.baseUrl + path, {
    method,
    headers: { ...(token ? { authorization: `Bearer ${token}` } : {}), ...(body ? { 'content-type': 'application/json' } : {}) },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await res.text();
  const parsed = text ? JSON.parse(text) : undefined;
  await checkContract(env.baseUrl, method, path, res.status, res.headers.get('content-type'), parsed);
  return { status: res.status, body: parsed };
}

const tag = () => crypto.randomBytes(4).toString('hex');

/** A manager (registered and signed in over HTTP) of a new community (made by an operator). */
async function managedCommunity(name: string): Promise<{ token: string; email: string; communityId: string }> {
  const email = `${name}-${tag()}@example.com`;
  const password = 'correct horse battery';
  expect((await call('POST', '/api/auth/register', undefined, { email, password })).status).toBe(201);
  const login = await call('POST', '/api/auth/login', undefined, { email, password });
  const [row] = await sql<{ id: string }[]>`select admin.create_community(${`${name} ${tag()}`}, null, '{}', ${email}) as id`;
  return { token: login.body.access_token, email, communityId: row!.id };
}

async function hook(c: { token: string; communityId: string }, path: string): Promise<string> {
  const res = await call('POST', '/api/v1/platform/webhooks', c.token, {
    community_id: c.communityId,
    url: receiver.url(path),
    events: ['event.created'],
  });
  expect(res.status).toBe(201);
  return res.body.data.id;
}

async function platformEvent(c: { token: string; communityId: string }, title: string): Promise<void> {
  const res = await call('POST', '/api/v1/platform/events', c.token, {
    community_id: c.communityId,
    external_platform: 'platform_a',
    external_id: `ext-${tag()}`,
    title,
    description: 'Doors at six',
    date: new Date(Date.now() + 86_400_000).toISOString(),
  });
  expect(res.status).toBe(201);
}

const deliveriesOf = (communityId: string) => sql<{ status: string; attempts: number }[]>`
  select d.status, d.attempts from app.webhook_deliveries d join app.webhook_endpoints e on e.id = d.endpoint_id
   where e.community_id = ${communityId}`;

describe('a community whose endpoints never answer', () => {
  it('holds only its own share: another community\'s delivery and a recovery e-mail go out while its deliveries wait', async () => {
    const attacker = await managedCommunity('stall');
    const hanging = Array.from({ length: 20 }, (_, i) => `/stall-${i}-${tag()}`);
    for (const path of hanging) receiver.answer(path, [], { hang: true });
    for (const path of hanging) await hook(attacker, path);
    const other = await managedCommunity('other');
    const otherPath = `/other-${tag()}`;
    await hook(other, otherPath);
    const person = `recover-${tag()}@example.com`;
    expect((await call('POST', '/api/auth/register', undefined, { email: person, password: 'correct horse battery' })).status).toBe(201);

    for (let i = 0; i < 3; i++) await platformEvent(attacker, `Stall ${i}`);
    // The attack is on: the stalled endpoints hold the senders they may have.
    const hangingSeen = () => receiver.received.filter((r) => hanging.includes(r.path)).length;
    await eventually('the stalled endpoints receiving', async () => hangingSeen() >= 2);

    const started = Date.now();
    await platformEvent(other, 'Unaffected');
    expect((await call('POST', '/api/auth/recover', undefined, { email: person })).status).toBe(200);
    const [delivered] = await receiver.waitFor(otherPath, (rs) => rs.length >= 1, { timeoutMs: 20_000, what: "the other community's delivery" });
    const mail = await eventually('the recovery e-mail', async () => mails.find((m) => m.to.includes(person)), 20_000);

    // Done while the stalled ones still wait: most not even tried, none delivered.
    const stalled = await deliveriesOf(attacker.communityId);
    expect(stalled).toHaveLength(60);
    expect(stalled.filter((d) => d.status === 'succeeded')).toHaveLength(0);
    expect(stalled.filter((d) => d.attempts === 0).length).toBeGreaterThan(40);
    console.log(
      `stall attack: the other community's delivery after ${delivered!.at - started} ms, the e-mail after ${mail.at - started} ms; ` +
        `${stalled.filter((d) => d.attempts > 0).length} of the 60 stalled deliveries tried so far`,
    );
    await sql`delete from app.webhook_endpoints where community_id = ${attacker.communityId}`;
  });
});

describe('an endpoint that keeps failing', () => {
  it('backs off after 3 failed attempts in a row: the rest waits without spending attempts, until a ping ends the pause', async () => {
    const c = await managedCommunity('failing');
    const path = `/failing-${tag()}`;
    receiver.answer(path, [], { status: 500 });
    const id = await hook(c, path);
    for (let i = 0; i < 6; i++) await platformEvent(c, `Failing ${i}`);
    await receiver.waitFor(path, (rs) => rs.length >= 3);
    const list = async () => (await call('GET', `/api/v1/platform/webhooks?community_id=${c.communityId}`, c.token)).body.data[0];
    const backingOff = await eventually('the back-off', async () => (await list()).backoff_until);
    expect(new Date(backingOff).getTime()).toBeGreaterThan(Date.now() + 10_000);
    // Nothing more is tried during the pause (the first retries are 30 s away too).
    await new Promise((resolve) => setTimeout(resolve, 1_500));
    expect(receiver.at(path)).toHaveLength(3);
    const waiting = await deliveriesOf(c.communityId);
    expect(waiting.map((d) => d.attempts).sort()).toEqual([0, 0, 0, 1, 1, 1]);

    // The receiver is fixed; a ping ends the pause and succeeds, and the rest follows.
    receiver.answer(path, [], { status: 200 });
    expect((await call('POST', `/api/v1/platform/webhooks/${id}/ping`, c.token)).status).toBe(202);
    await receiver.waitFor(path, (rs) => rs.some((r) => r.payload.type === 'webhook.ping'));
    expect((await list()).backoff_until).toBeNull();
    await eventually('the waiting deliveries sent', async () => {
      const ds = await deliveriesOf(c.communityId);
      return ds.filter((d) => d.status === 'succeeded').length >= 4 && ds;
    });
  });
});

// The doors that e-mail a link to whoever has an address tell nobody whether
// an address has an account (security review round 5, item 6): POST
// /api/auth/recover, POST /auth/v1/recover and POST /account/delete took
// longer for an address with an account (they looked it up and wrote the
// link in the request). Now the request does the same work either way: it
// counts the client address and queues an email_link job, and the job looks
// the address up after the answer.
//
// Timings are not asserted (the machine is shared); what the timing came
// from is: a gateway of its own with no job worker (its own database), so
// that what each request wrote stays to be compared: the same answer, and
// the same rows written in every table, for an address with an account and
// one without. Then a job worker runs the jobs, and only the account gets its
// e-mail.
import crypto from 'node:crypto';
import { SignJWT } from 'jose';
import { describe, expect, it } from 'vitest';
import { createLogger } from '../../gateway/core/process/log.ts';
import { startJobWorker } from '../../gateway/jobs/worker.ts';
import { ownGateway } from '../support/own-gateway.ts';
import { eventually } from '../support/wait.ts';

const gateway = ownGateway({ WORKER: 'off' });

/** How many rows every table of the service (and of the job queue) holds. */
async function rowCounts(): Promise<Record<string, number>> {
  const tables = await gateway.sql<{ name: string }[]>`
    select n.nspname || '.' || c.relname as name
      from pg_catalog.pg_class c join pg_catalog.pg_namespace n on n.oid = c.relnamespace
     where c.relkind in ('r', 'p') and n.nspname in ('api', 'app', 'identity', 'private', 'admin', 'graphile_worker')
     order by 1`;
  const counts: Record<string, number> = {};
  for (const { name } of tables) counts[name] = (await gateway.sql<{ n: number }[]>`select count(*)::int as n from ${gateway.sql(name)}`)[0]!.n;
  return counts;
}

/** The tables whose row counts `request` changed, and by how much. */
async function written(request: () => Promise<unknown>): Promise<Record<string, number>> {
  const before = await rowCounts();
  await request();
  const after = await rowCounts();
  return Object.fromEntries(Object.keys(after).filter((t) => after[t] !== before[t]).map((t) => [t, after[t]! - before[t]!]));
}

/** The anon key of this gateway (its secret and its issuer). */
function anonKey(): Promise<string> {
  return new SignJWT({ role: 'anon', ref: 'api-key' })
    .setProtectedHeader({ alg: 'HS256', typ: 'JWT' })
    .setIssuer(`${gateway.env.config.publicUrl}/api/auth`)
    .setIssuedAt()
    .setExpirationTime('1h')
    .sign(new TextEncoder().encode(gateway.env.jwtSecret));
}

async function account(): Promise<string> {
  const email = `has-account-${crypto.randomBytes(4).toString('hex')}@example.com`;
  const res = await fetch(`${gateway.env.baseUrl}/api/auth/register`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ email, password: 'password-links' }),
  });
  expect(res.status).toBe(201);
  return email;
}

interface Answer {
  status: number;
  body: string;
}

const doors: Record<string, { kind: 'recover' | 'delete_account'; send: (email: string) => Promise<Answer> }> = {
  'POST /api/auth/recover': {
    kind: 'recover',
    send: async (email) => {
      const res = await fetch(`${gateway.env.baseUrl}/api/auth/recover`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ email }) });
      return { status: res.status, body: await res.text() };
    },
  },
  'POST /auth/v1/recover': {
    kind: 'recover',
    send: async (email) => {
      const res = await fetch(`${gateway.env.baseUrl}/auth/v1/recover`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', apikey: await anonKey() },
        body: JSON.stringify({ email }),
      });
      return { status: res.status, body: await res.text() };
    },
  },
  'POST /account/delete': {
    kind: 'delete_account',
    send: async (email) => {
      const res = await fetch(`${gateway.env.baseUrl}/account/delete`, { method: 'POST', headers: { 'content-type': 'application/x-www-form-urlencoded' }, body: new URLSearchParams({ email }) });
      // The page's script nonce differs from answer to answer.
      return { status: res.status, body: (await res.text()).replace(/nonce-[A-Za-z0-9+/=_-]+|nonce="[^"]*"/g, 'nonce') };
    },
  },
};

describe('a door that e-mails a link does the same for an address with an account and one without', () => {
  for (const [door, { kind, send }] of Object.entries(doors)) {
    it(door, async () => {
      const known = await account();
      const unknown = `no-account-${crypto.randomBytes(4).toString('hex')}@example.com`;
      // Once before: the job queue records a task's name the first time it sees it.
      await send(`warm-up-${crypto.randomBytes(4).toString('hex')}@example.com`);
      let knownAnswer!: Answer;
      let unknownAnswer!: Answer;
      const knownRows = await written(async () => (knownAnswer = await send(known)));
      const unknownRows = await written(async () => (unknownAnswer = await send(unknown)));
      expect(knownAnswer.status, knownAnswer.body).toBe(200);
      expect(unknownAnswer).toEqual(knownAnswer);
      // The same rows: the request counted per client address and one job queued, nothing looked up or written for the account.
      expect(knownRows, JSON.stringify([knownRows, unknownRows])).toEqual(unknownRows);
      expect(knownRows).toEqual({ 'graphile_worker._private_jobs': 1, 'private.auth_failures': 1 });
      const jobs = await gateway.sql<{ key: string; task: string; kind: string }[]>`
        select j.key, j.task_identifier as task, p.payload->>'kind' as kind
          from graphile_worker.jobs j join graphile_worker._private_jobs p on p.id = j.id
         where j.key in (${`email_link:${kind}:${known}`}, ${`email_link:${kind}:${unknown}`}) order by j.key`;
      expect(jobs.map((j) => [j.task, j.kind])).toEqual([
        ['email_link', kind],
        ['email_link', kind],
      ]);

      // The jobs run: the account's e-mail is queued, nothing for the other address.
      const worker = await startJobWorker({
        connectionString: gateway.env.databaseUrl,
        concurrency: 1,
        webhooks: { allowPrivateTargets: true, retrySchedule: [1] },
        changeLogRetentionSeconds: 3600,
        log: createLogger('silent'),
      });
      try {
        await eventually('the email_link jobs to run', async () => {
          const [left] = await gateway.sql<{ n: number }[]>`select count(*)::int as n from graphile_worker.jobs where key like 'email_link:%'`;
          return left!.n === 0;
        });
      } finally {
        await worker.stop();
      }
      const mail = await gateway.sql<{ to_email: string; purpose: string }[]>`
        select to_email, purpose from app.email_outbox where to_email in (${known}, ${unknown})`;
      expect(mail).toEqual([{ to_email: known, purpose: kind }]);
    });
  }
});

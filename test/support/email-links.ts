// The doors that e-mail a link to whoever has an address (POST
// /api/auth/recover, /auth/v1/recover, /account/delete) answer before anything
// is looked up: a job (email_link, gateway/jobs/mail.ts) finds the account and
// queues its e-mail. A test that reads the link waits for that job.
import { db } from '../helpers.ts';
import { eventually } from './wait.ts';

/** Waits until the email_link job that a request for `email` queued (kind recover or delete_account) has run. */
export async function emailLinkRun(kind: 'recover' | 'delete_account', email: string, timeoutMs = 15_000): Promise<void> {
  const key = `email_link:${kind}:${email.trim().toLowerCase()}`;
  await eventually(
    `the ${kind} link job of ${email}`,
    async () => (await db()<{ n: number }[]>`select count(*)::int as n from graphile_worker.jobs where key = ${key}`)[0]!.n === 0,
    timeoutMs,
  );
}

// The `send_email` task: sends one message of the e-mail outbox
// (app.email_outbox: set-password and recovery links, webhook notices) over
// SMTP_URL with nodemailer. SQL queues the message and its job in one
// transaction (private.email_queue); a failed send records its error and
// fails the job, which graphile-worker retries with back-off (10 attempts).
// A worker without SMTP_URL does not take these jobs: messages wait in the
// outbox (`npm run admin -- outbox` shows them, links included) until a
// worker with SMTP runs.
//
// What this replaced: a mailer.ts, a sender loop in every gateway
// woken by NOTIFY email_outbox and a 30 s timer, leasing batches with
// private.email_outbox_claim (`for update skip locked`, an expiring lease
// for a crash between sending and recording).
import nodemailer, { type Transporter } from 'nodemailer';
import type { Task } from 'graphile-worker';
import { emails, metricsOn } from '../core/process/metrics.ts';

export interface SmtpOptions {
  url: string;
  from: string;
}

interface OutboxRow {
  id: string;
  to_email: string;
  subject: string;
  body_text: string;
}

export function sendEmailTask(smtp: SmtpOptions): { task: Task; close(): void } {
  const transport: Transporter = nodemailer.createTransport(smtp.url);
  const task: Task = async (payload, helpers) => {
    const id = (payload as { id?: unknown } | null)?.id;
    if (typeof id !== 'string') return;
    const { rows } = await helpers.query<OutboxRow>('select * from private.email_outbox_begin($1::uuid)', [id]);
    const message = rows[0];
    if (!message) return; // sent already
    try {
      await transport.sendMail({ from: smtp.from, to: message.to_email, subject: message.subject, text: message.body_text });
    } catch (err) {
      if (metricsOn()) emails.inc({ outcome: 'failed' });
      await helpers.query('select private.email_outbox_failed($1::uuid, $2::text)', [id, err instanceof Error ? err.message : String(err)]);
      throw err;
    }
    if (metricsOn()) emails.inc({ outcome: 'sent' });
    await helpers.query('select private.email_outbox_sent($1::uuid)', [id]);
  };
  return { task, close: () => transport.close() };
}

/**
 * The `email_link` task: {kind: 'recover' | 'delete_account' | 'otp', email,
 * public_url}, queued by a door that e-mails a link to whoever has an address
 * (private.email_link_enqueue) and run after it answered, so that the
 * answer does not depend on whether an account has the address:
 * private.email_link_send looks it up and queues the e-mail.
 */
export const emailLinkTask: Task = async (payload, helpers) => {
  const { kind, email, public_url: publicUrl } = (payload ?? {}) as { kind?: unknown; email?: unknown; public_url?: unknown };
  if (typeof kind !== 'string' || typeof email !== 'string' || typeof publicUrl !== 'string') return;
  await helpers.query('select private.email_link_send($1, $2, $3)', [kind, email, publicUrl]);
};

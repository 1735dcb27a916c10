// The e-mail outbox worker: sends what SQL queued in app.email_outbox
// (set-password and recovery links) over SMTP_URL with nodemailer.
//
// It wakes on NOTIFY email_outbox and on a timer (a missed notification, a
// retry that came due), leases a batch with private.email_outbox_claim (rows
// locked with skip locked, so every replica can run a worker), sends each
// message and records the outcome. A crash between sending and recording
// means the lease expires and the message is sent again: at-least-once.
// Without SMTP_URL no worker runs; operators read the outbox with
// `npm run admin -- outbox`.
import nodemailer, { type Transporter } from 'nodemailer';
import type { Sql } from '../core/db.ts';
import type { Logger } from '../core/log.ts';

export interface MailerOptions {
  smtpUrl: string;
  from: string;
  /** How often to look for due messages without a notification. */
  pollIntervalMs?: number;
  batchSize?: number;
  /** A session connection for LISTEN when `sql` goes through a transaction-mode pooler. */
  listenSql?: Sql;
}

interface OutboxRow {
  id: string;
  to_email: string;
  subject: string;
  body_text: string;
}

export interface OutboxWorker {
  /** Sends every due message now; resolves with how many were sent. */
  drain(): Promise<number>;
  close(): Promise<void>;
}

export async function startOutboxWorker(sql: Sql, options: MailerOptions, log: Logger): Promise<OutboxWorker> {
  const transport: Transporter = nodemailer.createTransport(options.smtpUrl);
  const batchSize = options.batchSize ?? 20;
  let running: Promise<number> | null = null;
  let again = false;
  let closed = false;

  const sendBatch = async (): Promise<number> => {
    let sent = 0;
    for (;;) {
      const rows = await sql<OutboxRow[]>`
        select id, to_email, subject, body_text from private.email_outbox_claim(${batchSize})`;
      for (const row of rows) {
        try {
          await transport.sendMail({ from: options.from, to: row.to_email, subject: row.subject, text: row.body_text });
          await sql`select private.email_outbox_sent(${row.id})`;
          sent++;
        } catch (err) {
          const message = err instanceof Error ? err.message : String(err);
          log.warn({ outboxId: row.id, error: message }, 'e-mail not sent; will retry');
          await sql`select private.email_outbox_failed(${row.id}, ${message})`;
        }
      }
      if (rows.length < batchSize || closed) return sent;
    }
  };

  // One drain at a time; a wake-up during a drain runs one more after it.
  const drain = (): Promise<number> => {
    if (running) {
      again = true;
      return running;
    }
    running = sendBatch()
      .catch((err: unknown) => {
        log.warn({ error: err instanceof Error ? err.message : String(err) }, 'outbox drain failed');
        return 0;
      })
      .finally(() => {
        running = null;
        if (again && !closed) {
          again = false;
          void drain();
        }
      });
    return running;
  };

  const listener = await (options.listenSql ?? sql).listen('email_outbox', () => void drain());
  const timer = setInterval(() => void drain(), options.pollIntervalMs ?? 30_000);
  timer.unref();
  void drain();

  return {
    drain,
    async close() {
      closed = true;
      clearInterval(timer);
      await listener.unlisten().catch(() => {});
      await running;
      transport.close();
    },
  };
}

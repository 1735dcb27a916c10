// Set-password links and password recovery through the real gateway, and the
// job worker's send_email task sending them to a real SMTP server (the
// smtp-server package, on a random local port).
import net from 'node:net';
import { SMTPServer } from 'smtp-server';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startJobWorker, type JobWorker } from '../../gateway/jobs/worker.ts';
import { createLogger } from '../../gateway/core/process/log.ts';
import { api, baseUrl, databaseUrl, db, expectErrorShape, publicUrl, registerUser, uniqueEmail } from '../helpers.ts';
import { eventually } from '../support/wait.ts';
import { emailLinkRun } from '../support/email-links.ts';

interface OutboxRow {
  id: string;
  to_email: string;
  purpose: string;
  subject: string;
  body_text: string;
  link: string | null;
  sent_at: Date | null;
  attempts: number;
  last_error: string | null;
}

async function outboxFor(email: string): Promise<OutboxRow[]> {
  return db()<OutboxRow[]>`select * from app.email_outbox where to_email = ${email} order by created_at`;
}

function tokenOf(link: string): string {
  return new URL(link).searchParams.get('token')!;
}

/** A user made through the API whose password an operator then removed, as for accounts made without one. */
async function passwordlessUser(): Promise<{ userId: string; email: string }> {
  const user = await registerUser('nopw');
  await db()`update identity.users set password_hash = null where id = ${user.userId}`;
  return { userId: user.userId, email: user.email };
}

async function invite(userId: string): Promise<string> {
  await db()`select private.queue_password_email(${userId}, 'invite', ${publicUrl})`;
  const [row] = await db()<{ link: string }[]>`
    select link from app.email_outbox where user_id = ${userId} order by created_at desc limit 1`;
  return row!.link;
}

describe('POST /api/auth/recover', () => {
  it('answers the same whether or not the account exists, and queues a link only for a real account', async () => {
    const user = await registerUser('recover');
    const unknown = uniqueEmail('nobody');
    const known = await api('POST', '/api/auth/recover', { body: { email: user.email } });
    const missing = await api('POST', '/api/auth/recover', { body: { email: unknown } });
    expect(known.status).toBe(200);
    expect(missing.status).toBe(200);
    expect(missing.body).toEqual(known.body);
    expect(known.body.success).toBe(true);

    await emailLinkRun('recover', user.email);
    await emailLinkRun('recover', unknown);
    const rows = await outboxFor(user.email);
    expect(rows).toHaveLength(1);
    expect(rows[0]!.purpose).toBe('recover');
    expect(rows[0]!.link).toMatch(new RegExp(`^${publicUrl}/auth/set-password\\?token=[A-Za-z0-9_-]{43}$`));
    expect(rows[0]!.body_text).toContain(rows[0]!.link!);
    expect(await outboxFor(unknown)).toEqual([]);
    // Only the token's hash is stored.
    const [stored] = await db()<{ n: number }[]>`
      select count(*)::int as n from identity.password_tokens
       where user_id = ${user.userId} and token_hash = extensions.digest(${tokenOf(rows[0]!.link!)}, 'sha256')`;
    expect(stored!.n).toBe(1);
  });

  it('queues at most 5 recovery links an hour per account, still answering 200', async () => {
    const user = await registerUser('flood');
    const answers = await Promise.all(
      Array.from({ length: 8 }, () => api('POST', '/api/auth/recover', { body: { email: user.email } })),
    );
    expect(answers.map((a) => a.status)).toEqual(Array(8).fill(200));
    // Racing requests wait as one job (a repeat replaces it): at least one link.
    await emailLinkRun('recover', user.email);
    expect((await outboxFor(user.email)).length).toBeGreaterThanOrEqual(1);
    // One after another, each its own job: never past 5.
    for (let i = 0; i < 6; i++) {
      expect((await api('POST', '/api/auth/recover', { body: { email: user.email } })).status).toBe(200);
      await emailLinkRun('recover', user.email);
    }
    expect(await outboxFor(user.email)).toHaveLength(5);
  });

  it('rejects a malformed body with 400 and the Error body', async () => {
    for (const body of [{}, { email: 'not-an-email' }, { email: 42 }, { email: 'a\u0000b@example.com' }]) {
      const res = await api('POST', '/api/auth/recover', { body });
      expect(res.status).toBe(400);
      expectErrorShape(res.body);
    }
  });
});

describe('set-password link', () => {
  it('sets the password once; then the user signs in and the link is used up', async () => {
    const user = await passwordlessUser();
    const link = await invite(user.userId);
    expect(link.startsWith(`${publicUrl}/auth/set-password?token=`)).toBe(true);

    // Nobody can sign in before a password is set.
    const before = await api('POST', '/api/auth/login', { body: { email: user.email, password: 'whatever-password' } });
    expect(before.status).toBe(401);

    const pageUrl = baseUrl + new URL(link).pathname + new URL(link).search;
    const page = await fetch(pageUrl);
    expect(page.status).toBe(200);
    expect(page.headers.get('content-type')).toMatch(/text\/html/);
    expect(page.headers.get('content-security-policy')).toContain("default-src 'none'");
    expect(await page.text()).toContain('Choose your password');

    const set = await api('POST', '/api/auth/set-password', { body: { token: tokenOf(link), password: 'a-new-password' } });
    expect(set.status).toBe(200);
    expect(set.body).toEqual({ success: true, user_id: user.userId, email: user.email });

    const login = await api('POST', '/api/auth/login', { body: { email: user.email, password: 'a-new-password' } });
    expect(login.status).toBe(200);

    const again = await api('POST', '/api/auth/set-password', { body: { token: tokenOf(link), password: 'another-password' } });
    expect(again.status).toBe(400);
    expectErrorShape(again.body);
    expect(again.body.error).toBe('invalid_link');
    const pageAgain = await fetch(pageUrl);
    expect(pageAgain.status).toBe(404);
    expect(await pageAgain.text()).toContain('This link is not valid');
  });

  it('refuses an expired link, and a link replaced by a newer one', async () => {
    const user = await passwordlessUser();
    const first = await invite(user.userId);
    const second = await invite(user.userId);
    const replaced = await api('POST', '/api/auth/set-password', { body: { token: tokenOf(first), password: 'password-one' } });
    expect(replaced.status).toBe(400);
    expect(replaced.body.error).toBe('invalid_link');

    await db()`update identity.password_tokens set expires_at = now() - interval '1 second'
                where token_hash = extensions.digest(${tokenOf(second)}, 'sha256')`;
    const expired = await api('POST', '/api/auth/set-password', { body: { token: tokenOf(second), password: 'password-two' } });
    expect(expired.status).toBe(400);
    expect(expired.body.error).toBe('invalid_link');
  });

  it('a recovery ends the sessions of the account', async () => {
    const user = await registerUser('sessions');
    await api('POST', '/api/auth/recover', { body: { email: user.email } });
    await emailLinkRun('recover', user.email);
    const [row] = await outboxFor(user.email);
    const set = await api('POST', '/api/auth/set-password', { body: { token: tokenOf(row!.link!), password: 'brand-new-password' } });
    expect(set.status).toBe(200);
    const refresh = await api('POST', '/api/auth/refresh', { body: { refresh_token: user.refreshToken } });
    expect(refresh.status).toBe(401);
    const oldPassword = await api('POST', '/api/auth/login', { body: { email: user.email, password: user.password } });
    expect(oldPassword.status).toBe(401);
  });

  it('two uses of one link at the same moment: exactly one succeeds', async () => {
    const user = await passwordlessUser();
    const token = tokenOf(await invite(user.userId));
    const results = await Promise.all(
      Array.from({ length: 10 }, (_, i) => api('POST', '/api/auth/set-password', { body: { token, password: `password-${i}` } })),
    );
    expect(results.filter((r) => r.status === 200)).toHaveLength(1);
    expect(results.filter((r) => r.status === 400)).toHaveLength(9);
  });

  it('answers bad input with 400 (API) or the HTML error page (page), never 500', async () => {
    const user = await passwordlessUser();
    const token = tokenOf(await invite(user.userId));
    const weak = await api('POST', '/api/auth/set-password', { body: { token, password: 'short' } });
    expect(weak.status).toBe(400);
    expectErrorShape(weak.body);
    for (const body of [{}, { token: 'x', password: 'long-enough-password' }, { token, password: 12345678 }, []]) {
      const res = await api('POST', '/api/auth/set-password', { body });
      expect(res.status).toBe(400);
      expectErrorShape(res.body);
    }
    for (const query of ['', '?token=', '?token=%00', '?token=%ED%A0%80', '?token=a&token=b', `?token=${'A'.repeat(43)}`]) {
      const res = await fetch(`${baseUrl}/auth/set-password${query}`);
      expect(res.status).toBeGreaterThanOrEqual(400);
      expect(res.status).toBeLessThan(500);
      expect(res.headers.get('content-type')).toMatch(/text\/html/);
    }
  });
});

describe('send_email jobs (graphile-worker, real SMTP server)', () => {
  interface Received {
    to: string[];
    data: string;
  }
  let smtp: SMTPServer;
  let smtpPort: number;
  const received: Received[] = [];
  let rejectAll = false;

  beforeAll(async () => {
    smtp = new SMTPServer({
      authOptional: true,
      disabledCommands: ['STARTTLS'],
      onRcptTo(_address, _session, callback) {
        if (rejectAll) return callback(new Error('mailbox unavailable'));
        callback();
      },
      onData(stream, session, callback) {
        const chunks: Buffer[] = [];
        stream.on('data', (c: Buffer) => chunks.push(c));
        stream.on('end', () => {
          received.push({ to: session.envelope.rcptTo.map((r) => r.address), data: Buffer.concat(chunks).toString('utf8') });
          callback();
        });
      },
    });
    await new Promise<void>((resolve) => smtp.listen(0, '127.0.0.1', () => resolve()));
    smtpPort = (smtp.server.address() as net.AddressInfo).port;
  });

  afterAll(async () => {
    await new Promise<void>((resolve) => smtp.close(() => resolve()));
  });

  /** A job worker with SMTP (the test gateway's own worker has none, so e-mail jobs wait for this one). */
  const mailWorker = (): Promise<JobWorker> =>
    startJobWorker({
      connectionString: databaseUrl,
      concurrency: 4,
      smtp: { url: `smtp://127.0.0.1:${smtpPort}`, from: 'Community <no-reply@example.com>' },
      webhooks: { allowPrivateTargets: true, retrySchedule: [1, 1] },
      changeLogRetentionSeconds: 86_400,
      log: createLogger('silent'),
    });

  it('sends a queued recovery e-mail with its link, then forgets the link', async () => {
    const user = await registerUser('smtp');
    await api('POST', '/api/auth/recover', { body: { email: user.email } });
    await emailLinkRun('recover', user.email);
    const [queued] = await outboxFor(user.email);
    const [job] = await db()`select task_identifier, max_attempts from graphile_worker.jobs where key = ${`email:${queued!.id}`}`;
    expect(job).toEqual({ task_identifier: 'send_email', max_attempts: 10 });
    const worker = await mailWorker();
    try {
      await eventually('the e-mail to be sent', async () => (await outboxFor(user.email))[0]?.sent_at);
    } finally {
      await worker.stop();
    }
    const mail = received.find((m) => m.to.includes(user.email));
    expect(mail).toBeDefined();
    expect(mail!.data).toContain('Subject: Reset your password');
    expect(mail!.data.replace(/=\r?\n/g, '')).toContain(tokenOf(queued!.link!));
    const [sent] = await outboxFor(user.email);
    expect(sent!.sent_at).not.toBeNull();
    expect(sent!.attempts).toBe(1);
    expect(sent!.link).toBeNull();
    expect(sent!.body_text).not.toContain(tokenOf(queued!.link!));
    // The job is done (graphile-worker deletes completed jobs).
    expect(await db()`select id from graphile_worker.jobs where key = ${`email:${queued!.id}`}`).toHaveLength(0);
    // The link still works after sending: only the stored copy forgot it.
    const set = await api('POST', '/api/auth/set-password', { body: { token: tokenOf(queued!.link!), password: 'mailed-password' } });
    expect(set.status).toBe(200);
  });

  it('two workers at once send every message exactly once', async () => {
    const users = await Promise.all(Array.from({ length: 12 }, () => registerUser('pair')));
    await Promise.all(users.map((u) => api('POST', '/api/auth/recover', { body: { email: u.email } })));
    await Promise.all(users.map((u) => emailLinkRun('recover', u.email)));
    const [a, b] = await Promise.all([mailWorker(), mailWorker()]);
    try {
      await eventually('every e-mail to be sent', async () => {
        const rows = await db()`select count(*)::int as n from app.email_outbox where to_email in ${db()(users.map((u) => u.email))} and sent_at is not null`;
        return rows[0]!.n === users.length;
      });
    } finally {
      await Promise.all([a.stop(), b.stop()]);
    }
    for (const u of users) {
      expect(received.filter((m) => m.to.includes(u.email))).toHaveLength(1);
    }
  });

  it('a refused message is kept with its error and its job retried later', async () => {
    const user = await registerUser('refused');
    await api('POST', '/api/auth/recover', { body: { email: user.email } });
    await emailLinkRun('recover', user.email);
    rejectAll = true;
    const worker = await mailWorker();
    try {
      await eventually('the failed attempt', async () => (await outboxFor(user.email))[0]?.last_error);
    } finally {
      await worker.stop();
      rejectAll = false;
    }
    const [row] = await outboxFor(user.email);
    expect(row!.sent_at).toBeNull();
    expect(row!.attempts).toBe(1);
    expect(row!.last_error).toMatch(/mailbox unavailable/);
    expect(row!.link).not.toBeNull();
    const [job] = await db()<{ attempts: number; later: boolean; last_error: string }[]>`
      select attempts, run_at > now() as later, last_error from graphile_worker.jobs where key = ${`email:${row!.id}`}`;
    expect(job).toMatchObject({ attempts: 1, later: true });
    expect(job!.last_error).toMatch(/mailbox unavailable/);
  });
});

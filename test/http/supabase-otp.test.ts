// E-mailed sign-in codes and magic links through supabase-js unchanged
// (docs/supabase-sdks.md#e-mail-codes-and-magic-links): signInWithOtp e-mails
// a 6-digit code and a link through the outbox; verifyOtp({ email, token,
// type: 'email' }) and the link each sign in once; wrong codes count as failed
// sign-ins of the address and client (429 past the limit), the fifth voids
// the code; the answers are the same for a known and an unknown address.
// A dedicated gateway on the test database (TRUST_PROXY=1: each test is its
// own client address; LOGIN_MAX_FAILURES_PER_EMAIL=3).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../gateway/core/process/config.ts';
import { createLogger } from '../../gateway/core/process/log.ts';
import { startGateway, type RunningGateway } from '../../gateway/server.ts';
import { databaseUrl, db, jwtSecret, publicUrl, registerUser, uniqueEmail } from '../helpers.ts';
import { randomIp, stopSupabaseClients, supabaseAt, type SeenAnswer } from '../support/supabase-js.ts';
import { eventually } from '../support/wait.ts';

const MAX_FAILURES = 3;

let gateway: RunningGateway;
beforeAll(async () => {
  const config = loadConfig({
    PUBLIC_URL: publicUrl,
    PORT: '0',
    HOST: '127.0.0.1',
    JWT_SECRET: jwtSecret,
    DB_POOL_MAX: '4',
    TRUST_PROXY: '1',
    LOGIN_MAX_FAILURES_PER_EMAIL: String(MAX_FAILURES),
  });
  gateway = await startGateway(config, databaseUrl, createLogger('silent'), { includeCurrentMigration: true });
});
afterAll(async () => {
  stopSupabaseClients();
  await gateway?.close();
});

const supabase = (ip = randomIp(), seen?: SeenAnswer[]) => supabaseAt(gateway.url, ip, seen);

/** The code and link of the newest sign-in e-mail to `email`, once the job has queued it. */
async function mailTo(email: string): Promise<{ code: string; link: string }> {
  let mail: { body_text: string; link: string } | undefined;
  await eventually(
    `the sign-in e-mail to ${email}`,
    async () => {
      [mail] = await db()<{ body_text: string; link: string }[]>`
        select body_text, link from app.email_outbox where to_email = ${email} and purpose = 'otp' order by created_at desc limit 1`;
      return mail !== undefined;
    },
    20_000
  );
  return { code: /Your code: (\d{6})/.exec(mail!.body_text)![1]!, link: mail!.link };
}

const wrongCode = (code: string) => String((Number(code) + 1) % 1_000_000).padStart(6, '0');

describe('e-mail codes and magic links through supabase-js', () => {
  it('signInWithOtp e-mails a code; verifyOtp signs in with it once', async () => {
    const user = await registerUser('otp');
    const client = supabase();
    const sent = await client.auth.signInWithOtp({ email: user.email });
    expect(sent.error).toBeNull();
    const { code, link } = await mailTo(user.email);
    expect(code).toMatch(/^\d{6}$/);
    expect(link).toContain('/auth/v1/verify?type=magiclink&token=');

    const verified = await client.auth.verifyOtp({ email: user.email, token: code, type: 'email' });
    expect(verified.error).toBeNull();
    expect(verified.data.user!.id).toBe(user.userId);
    expect((await client.auth.getUser()).data.user!.email).toBe(user.email);
    // Single use: the same code again, and the link of the same e-mail, are refused.
    expect((await supabase().auth.verifyOtp({ email: user.email, token: code, type: 'email' })).error).toMatchObject({ status: 403, code: 'otp_expired' });
    const again = await fetch(link.replace(publicUrl, gateway.url), { redirect: 'manual' });
    expect(again.headers.get('location')).toContain('error_code=otp_expired');
  });

  it('the magic link signs in once; a newer e-mail voids the older code', async () => {
    const user = await registerUser('magic');
    await supabase().auth.signInWithOtp({ email: user.email });
    const first = await mailTo(user.email);
    await db()`update app.email_outbox set purpose = 'otp-seen' where to_email = ${user.email} and purpose = 'otp'`;
    await supabase().auth.signInWithOtp({ email: user.email });
    const second = await mailTo(user.email);
    expect(second.link).not.toBe(first.link);
    expect((await supabase().auth.verifyOtp({ email: user.email, token: first.code, type: 'email' })).error).toMatchObject({ status: 403 });

    const res = await fetch(second.link.replace(publicUrl, gateway.url), { redirect: 'manual' });
    expect(res.status).toBe(303);
    const fragment = new URLSearchParams(new URL(res.headers.get('location')!).hash.slice(1));
    expect(fragment.get('type')).toBe('magiclink');
    const client = supabase();
    const set = await client.auth.setSession({ access_token: fragment.get('access_token')!, refresh_token: fragment.get('refresh_token')! });
    expect(set.error).toBeNull();
    expect(set.data.user!.id).toBe(user.userId);
    const replay = await fetch(second.link.replace(publicUrl, gateway.url), { redirect: 'manual' });
    expect(replay.headers.get('location')).toContain('error_code=otp_expired');
    // The code of that e-mail went with its link.
    expect((await supabase().auth.verifyOtp({ email: user.email, token: second.code, type: 'email' })).error).toMatchObject({ status: 403 });
  });

  it('attack: guessing codes is throttled per address and client, and five wrong codes void the code', async () => {
    const user = await registerUser('guess');
    await supabase().auth.signInWithOtp({ email: user.email });
    const { code } = await mailTo(user.email);
    const ip = randomIp();
    for (let i = 0; i < MAX_FAILURES; i++) {
      expect((await supabase(ip).auth.verifyOtp({ email: user.email, token: wrongCode(code), type: 'email' })).error).toMatchObject({ status: 403 });
    }
    // Past the limit, even the right code from that client waits.
    expect((await supabase(ip).auth.verifyOtp({ email: user.email, token: code, type: 'email' })).error).toMatchObject({ status: 429 });
    // From other clients: two more wrong codes make five, and the code is void.
    for (let i = 0; i < 2; i++) {
      expect((await supabase().auth.verifyOtp({ email: user.email, token: wrongCode(code), type: 'email' })).error).toMatchObject({ status: 403 });
    }
    expect((await supabase().auth.verifyOtp({ email: user.email, token: code, type: 'email' })).error).toMatchObject({ status: 403, code: 'otp_expired' });
  });

  it('an expired code is refused', async () => {
    const user = await registerUser('late');
    await supabase().auth.signInWithOtp({ email: user.email });
    const { code } = await mailTo(user.email);
    await db()`update identity.email_codes set expires_at = now() - interval '1 second' where user_id = ${user.userId}`;
    expect((await supabase().auth.verifyOtp({ email: user.email, token: code, type: 'email' })).error).toMatchObject({ status: 403, code: 'otp_expired' });
  });

  it('attack (enumeration): a known and an unknown address get the same answers', async () => {
    const user = await registerUser('known');
    const unknown = uniqueEmail('nobody');
    const known: SeenAnswer[] = [];
    const stranger: SeenAnswer[] = [];
    await supabase(randomIp(), known).auth.signInWithOtp({ email: user.email });
    await supabase(randomIp(), stranger).auth.signInWithOtp({ email: unknown });
    await supabase(randomIp(), known).auth.verifyOtp({ email: user.email, token: '000000', type: 'email' });
    await supabase(randomIp(), stranger).auth.verifyOtp({ email: unknown, token: '000000', type: 'email' });
    expect(stranger).toEqual(known);
    expect(known.map((s) => s.status)).toEqual([200, 403]);
    await mailTo(user.email);
    expect(await db()`select 1 from app.email_outbox where to_email = ${unknown}`).toHaveLength(0);
    expect(await db()`select 1 from identity.users where email = ${unknown}`).toHaveLength(0);
  });

  it('an address that is not one is 400 validation_failed, as Supabase Auth answers', async () => {
    const { error } = await supabase().auth.signInWithOtp({ email: 'not-an-address' });
    expect(error).toMatchObject({ status: 400, code: 'validation_failed', message: 'Unable to validate email address: invalid format' });
  });
});

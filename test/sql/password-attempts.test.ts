// Sign-in attempts (issue 25): the password is compared in the process
// (gateway/core/passwords.ts), every rule around it is SQL. What a DBA runs
// after changing private.password_attempt_start / _finish.
import { describe, expect, it } from 'vitest';
import { Passwords } from '../../gateway/core/passwords.ts';
import { asAnon, asUser, db, passwords, sqlSignIn, uniqueEmail } from '../helpers.ts';

const newUser = async (password = 'password123') => {
  const email = uniqueEmail('attempt');
  const [row] = await db()`select admin.create_user(${email}, ${password}) as id`;
  return { email, password, id: row!.id as string };
};

interface Attempt {
  status: string;
  retry_after: number;
  attempt: string | null;
  password_hash: string | null;
  rehash: boolean;
}

const start = async (email: string, ip: string, cost = 10, door = 'login', perEmailClient = 10) =>
  (await db()`select * from private.password_attempt_start(${door}, ${email}, ${ip}, ${cost}, ${perEmailClient}, 100, 1000000, 900)`)[0] as unknown as Attempt;
const finish = async (attempt: string, matched: boolean, newHash: string | null = null) =>
  (await db()`select * from private.auth_login_finish(${attempt}, ${matched}, ${newHash})`)[0]!;
const failures = async (key: string) =>
  (await db()`select count(*)::int as n from private.auth_failures where scope = 'email_client' and key = ${key}`)[0]!.n as number;
const ip = () => `198.51.100.${Math.floor(Math.random() * 250) + 1}`;

/** The fastest of n runs of each of a and b, alternated (the least disturbed by other work on the machine), in ms. */
async function fastestMs(n: number, a: () => Promise<unknown>, b: () => Promise<unknown>): Promise<[number, number]> {
  const best = [Infinity, Infinity];
  for (let i = 0; i < n; i++) {
    for (const [k, fn] of [a, b].entries()) {
      const t0 = performance.now();
      await fn();
      best[k] = Math.min(best[k]!, performance.now() - t0);
    }
  }
  return best as [number, number];
}

describe('password_attempt_start', () => {
  it('an unknown e-mail, an account without a password and a wrong password take the same path: a hash at the configured cost to compare, whose comparison costs the same', async () => {
    const user = await newUser();
    const [none] = await db()`select private.create_account(${uniqueEmail('nopw')}, null, null) as id`;
    const [noneEmail] = await db()`select email from identity.users where id = ${none!.id}`;
    const known = await start(user.email, ip());
    const unknown = await start(uniqueEmail('nobody'), ip());
    const passwordless = await start(noneEmail!.email, ip());
    for (const a of [known, unknown, passwordless]) {
      expect(a).toMatchObject({ status: 'check', retry_after: 0, rehash: false });
      expect(a.attempt).toMatch(/^[A-Za-z0-9_-]{43}$/);
      expect(a.password_hash).toMatch(/^\$2[ab]\$10\$[./A-Za-z0-9]{53}$/);
    }
    expect(unknown.password_hash).toBe(passwordless.password_hash);
    expect(unknown.password_hash).not.toBe(known.password_hash);
    // At BCRYPT_COST 12 the dummy is a cost-12 hash too.
    expect((await start(uniqueEmail('nobody'), ip(), 12)).password_hash).toMatch(/^\$2a\$12\$/);

    // The dummy is a real bcrypt hash: comparing with it takes the time a wrong password takes.
    const [real, dummy] = await fastestMs(
      7,
      () => passwords.verifyNow('wrong-password', known.password_hash!),
      () => passwords.verifyNow('wrong-password', unknown.password_hash!),
    );
    console.log(`verify: account hash ${real.toFixed(1)} ms, dummy ${dummy.toFixed(1)} ms`);
    expect(dummy).toBeGreaterThan(real * 0.5);
    expect(dummy).toBeLessThan(real * 2);
    expect(await passwords.verifyNow('password123', unknown.password_hash!)).toBe(false);

    // All three finish the same way.
    for (const a of [known, unknown, passwordless]) {
      expect(await finish(a.attempt!, false)).toMatchObject({ status: 'invalid', user_id: null, refresh_token: null });
    }
    // Claiming a match for the dummy does not sign anyone in.
    expect((await finish((await start(noneEmail!.email, ip())).attempt!, true)).status).toBe('invalid');
  });

  it('throttling is checked before (no hash is handed out) and counted after the comparison; attempts being checked count', async () => {
    const user = await newUser();
    const from = ip();
    const key = `${user.email} ${from}`;
    const first = await start(user.email, from, 10, 'login', 3);
    expect(await failures(key)).toBe(0); // not counted when handed out...
    expect((await finish(first.attempt!, false)).status).toBe('invalid');
    expect(await failures(key)).toBe(1); // ...but when the outcome is recorded.

    // Two attempts in flight and one failure: the limit (3) is reached until they finish.
    const a = await start(user.email, from, 10, 'login', 3);
    const b = await start(user.email, from, 10, 'login', 3);
    const blocked = await start(user.email, from, 10, 'login', 3);
    expect(blocked).toMatchObject({ status: 'throttled', attempt: null, password_hash: null });
    expect(blocked.retry_after).toBeGreaterThan(0);
    expect((await finish(a.attempt!, true)).status).toBe('ok'); // a success clears this client's failures
    expect(await failures(key)).toBe(0);
    expect((await start(user.email, from, 10, 'login', 3)).status).toBe('check');
    await finish(b.attempt!, false);
  });

  it('request roles cannot start or finish an attempt (a hash never reaches them)', async () => {
    const user = await newUser();
    await expect(asAnon((tx) => tx`select * from private.password_attempt_start('login', ${user.email}, null, 10, 10, 100, 100, 900)`)).rejects.toMatchObject({
      code: '42501',
    });
    await expect(asUser(user.id, (tx) => tx`select * from private.auth_login_finish('x', true, null)`)).rejects.toMatchObject({ code: '42501' });
    await expect(asUser(user.id, (tx) => tx`select * from private.password_attempts`)).rejects.toMatchObject({ code: '42501' });
  });
});

describe('password_attempt_finish', () => {
  it('an attempt is single-use and belongs to its door', async () => {
    const user = await newUser();
    const a = await start(user.email, ip());
    expect((await db()`select * from private.oauth_request_approve('no-such-request', ${a.attempt}, true, null)`)[0]!.status).toBe('request_expired');
    // The OAuth door consumed nothing of a login attempt...
    const ok = await finish(a.attempt!, true);
    expect(ok).toMatchObject({ status: 'ok', user_id: user.id, refresh_token: expect.any(String), session_id: expect.any(String) });
    // ...and a login attempt is used once.
    expect((await finish(a.attempt!, true)).status).toBe('expired');
    expect((await finish('never-handed-out', true)).status).toBe('expired');
  });

  it('a password set between the two halves makes the attempt fail (and it is counted); an attempt older than 60 s does not sign in', async () => {
    const user = await newUser();
    const from = ip();
    const a = await start(user.email, from);
    await db()`update identity.users set password_hash = identity.hash_password('another password') where id = ${user.id}`;
    expect((await finish(a.attempt!, true)).status).toBe('invalid');
    expect(await failures(`${user.email} ${from}`)).toBe(1);

    const old = await start(user.email, from);
    await db()`update private.password_attempts set expires_at = now() - interval '1 second' where attempt_hash = identity.token_hash(${old.attempt})`;
    expect((await finish(old.attempt!, true)).status).toBe('expired');
  });

  it('a pgcrypto hash (admin.create_user) verifies and is re-hashed at the configured cost; a malformed or cheaper new hash is not stored', async () => {
    const user = await newUser('correct horse');
    const hashOf = async () => (await db()`select password_hash from identity.users where id = ${user.id}`)[0]!.password_hash as string;
    expect(await hashOf()).toMatch(/^\$2a\$10\$/);
    // At cost 10 (the default) it is kept.
    expect((await sqlSignIn(user.email, 'correct horse')).status).toBe('ok');
    expect(await hashOf()).toMatch(/^\$2a\$10\$/);
    // At cost 11 it is re-hashed at the next successful sign-in...
    expect((await start(user.email, ip(), 11)).rehash).toBe(true);
    expect((await sqlSignIn(user.email, 'correct horse', ip(), 11)).status).toBe('ok');
    const rehashed = await hashOf();
    expect(rehashed).toMatch(/^\$2a\$11\$/);
    expect((await sqlSignIn(user.email, 'correct horse', ip(), 11)).status).toBe('ok');
    expect(await hashOf()).toBe(rehashed);
    // ...and never replaced by something that is not a bcrypt hash of a higher cost.
    for (const bad of ['not a hash', await new Passwords({ cost: 10, concurrency: 1, maxQueued: 1 }).hashNow('correct horse')]) {
      const a = await start(user.email, ip(), 12);
      expect((await finish(a.attempt!, true, bad)).status).toBe('ok');
      expect(await hashOf()).toBe(rehashed);
    }
  });
});

describe('the format of a hash the processes make', () => {
  it('is $2a$, and pgcrypto in psql verifies it (an operator can check a password with crypt())', async () => {
    const hash = await passwords.hash('198.51.100.1', 'correct horse battery');
    expect(hash).toMatch(/^\$2a\$10\$/);
    const [row] = await db()`
      select extensions.crypt(encode(extensions.digest(${'correct horse battery'}, 'sha256'), 'base64'), ${hash}) = ${hash} as ok,
             extensions.crypt(encode(extensions.digest(${'wrong horse'}, 'sha256'), 'base64'), ${hash}) = ${hash} as wrong`;
    expect(row).toEqual({ ok: true, wrong: false });
  });
});

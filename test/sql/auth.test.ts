// Signing in where the process takes part (the rest are pgTAP:
// supabase/tests/auth.test.sql): the password is compared in the gateway's
// and the MCP process's code (gateway/core/auth/passwords.ts), so what depends on
// that comparison, on its timing or on its hash format is tested here with
// the same code; and two refreshes of one token at once, which needs two
// connections.
import { describe, expect, it } from 'vitest';
import { Passwords } from '../../gateway/core/auth/passwords.ts';
import { asAnon, db, passwords, sqlSignIn, uniqueEmail } from '../helpers.ts';
import { newUser as newSqlUser } from '../support/sql-fixtures.ts';

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
const ip = () => `198.51.100.${Math.floor(Math.random() * 250) + 1}`;

describe('passwords compared in the process', () => {
  it('passwords longer than 72 bytes are not truncated (in the process, and in pgcrypto for operators)', async () => {
    const long = 'x'.repeat(80);
    expect(await passwords.verifyNow(long + 'a', await passwords.hashNow(long + 'b'))).toBe(false);
    const [row] = await db()`select identity.hash_password(${long + 'b'}) as h`;
    expect(await passwords.verifyNow(long + 'a', row!.h)).toBe(false);
    expect(await passwords.verifyNow(long + 'b', row!.h)).toBe(true);
  });

  it('hashes made by pgcrypto (admin.create_user) and by the process verify in both; $2b$ verifies in the process', async () => {
    const [row] = await db()`select identity.hash_password('correct horse') as h`;
    expect(row!.h).toMatch(/^\$2a\$10\$/);
    expect(await passwords.verifyNow('correct horse', row!.h)).toBe(true);
    const made = await passwords.hashNow('correct horse');
    expect(made).toMatch(/^\$2a\$10\$/);
    expect(await passwords.verifyNow('correct horse', made)).toBe(true);
    expect(await passwords.verifyNow('correct horse', made.replace(/^\$2a\$/, '$2b$'))).toBe(true);
    // pgcrypto verifies the process's hashes too (an operator comparing by hand).
    const [same] = await db()`select extensions.crypt(encode(extensions.digest('correct horse', 'sha256'), 'base64'), ${made}) = ${made} as same`;
    expect(same!.same).toBe(true);
    expect(await passwords.verifyNow('correct horse', 'not a hash')).toBe(false);
  });

  it('is $2a$, and pgcrypto in psql verifies it (an operator can check a password with crypt())', async () => {
    const hash = await passwords.hash('198.51.100.1', 'correct horse battery');
    expect(hash).toMatch(/^\$2a\$10\$/);
    const [row] = await db()`
      select extensions.crypt(encode(extensions.digest(${'correct horse battery'}, 'sha256'), 'base64'), ${hash}) = ${hash} as ok,
             extensions.crypt(encode(extensions.digest(${'wrong horse'}, 'sha256'), 'base64'), ${hash}) = ${hash} as wrong`;
    expect(row).toEqual({ ok: true, wrong: false });
  });

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

    // The dummy is a real bcrypt hash of the account's cost (above: well formed, `$2a$10$`), and
    // bcrypt's work is set by the cost alone: comparing with it is the work a wrong password is.
    expect(unknown.password_hash!.slice(0, 7)).toBe(known.password_hash!.slice(0, 7));
    expect(await passwords.verifyNow('password123', unknown.password_hash!)).toBe(false);

    // All three finish the same way.
    for (const a of [known, unknown, passwordless]) {
      expect(await finish(a.attempt!, false)).toMatchObject({ status: 'invalid', user_id: null, refresh_token: null });
    }
    // Claiming a match for the dummy does not sign anyone in.
    expect((await finish((await start(noneEmail!.email, ip())).attempt!, true)).status).toBe('invalid');
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

describe('signing in and refreshing', () => {
  const refresh = async (token: string) => (await asAnon((tx) => tx`select * from api.auth_refresh(${token})`))[0]!;

  it('sign-in: invalid for a wrong password and for an unknown e-mail alike', async () => {
    const user = await newSqlUser();
    const ok = await sqlSignIn(user.email, user.password);
    expect(ok).toMatchObject({ status: 'ok', user_id: user.id, refresh_token: expect.any(String) });
    for (const [email, password] of [[user.email, 'wrong-password'], [uniqueEmail(), 'password123']]) {
      expect(await sqlSignIn(email!, password!)).toMatchObject({ status: 'invalid', user_id: null, refresh_token: null });
    }
  });

  it('two parallel refreshes of one token: one rotation wins, the other is treated as reuse', async () => {
    const user = await newSqlUser();
    const { refresh_token: token } = await sqlSignIn(user.email, user.password);
    const results = await Promise.all([refresh(token!), refresh(token!)]);
    expect(results.map((r) => r.status).sort()).toEqual(['ok', 'reused']);
  });
});

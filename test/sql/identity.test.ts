// SQL-level tests of the Supabase compatibility layer and identity functions:
// what a DBA runs after changing them.
import { describe, expect, it } from 'vitest';
import { asAnon, asUser, db, passwords, sqlSignIn, uniqueEmail } from '../helpers.ts';
import { newUser } from '../support/sql-fixtures.ts';

describe('compatibility layer', () => {
  it('has the Supabase roles', async () => {
    const rows = await db()`select rolname from pg_roles where rolname in ('anon','authenticated','service_role','authenticator') order by 1`;
    expect(rows.map((r) => r.rolname)).toEqual(['anon', 'authenticated', 'authenticator', 'service_role']);
  });

  it('auth.uid() and auth.jwt() read request.jwt.claims', async () => {
    const id = crypto.randomUUID();
    const [row] = await asUser(id, (tx) => tx`select auth.uid() as uid, auth.jwt() ->> 'role' as role, current_user as who`);
    expect(row).toEqual({ uid: id, role: 'authenticated', who: 'authenticated' });
    const [anon] = await asAnon((tx) => tx`select auth.uid() as uid, current_user as who`);
    expect(anon).toEqual({ uid: null, who: 'anon' });
  });

  it('request roles cannot call functions they were not granted', async () => {
    await expect(asAnon((tx) => tx`select * from api.profile_get()`)).rejects.toMatchObject({ code: '42501' });
    await expect(asUser(crypto.randomUUID(), (tx) => tx`select admin.create_user('x@example.com', 'password123')`)).rejects.toMatchObject({ code: '42501' });
    await expect(asUser(crypto.randomUUID(), (tx) => tx`select password_hash from identity.users`)).rejects.toMatchObject({ code: '42501' });
  });
});

describe('accounts and passwords', () => {
  it('create_account makes user, node and profile, with a bcrypt hash', async () => {
    const user = await newUser();
    const [row] = await db()`
      select u.email, u.password_hash, p.name, p.subscription_type, n.kind
      from identity.users u join app.profiles p on p.id = u.id join app.nodes n on n.id = p.node_id
      where u.id = ${user.id}`;
    expect(row).toMatchObject({ email: user.email, name: user.email.split('@')[0], subscription_type: 'basic', kind: 'user' });
    expect(row!.password_hash).toMatch(/^\$2[abxy]\$10\$/);
    expect(row!.password_hash).not.toContain(user.password);
  });

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

  it('rejects a duplicate e-mail (PT409), a short password and a bad e-mail (PT400)', async () => {
    const user = await newUser();
    await expect(db()`select admin.create_user(${user.email.toUpperCase()}, 'password123')`).rejects.toMatchObject({ code: 'PT409', hint: 'email_taken' });
    await expect(db()`select admin.create_user(${uniqueEmail()}, 'short')`).rejects.toMatchObject({ code: 'PT400' });
    await expect(db()`select admin.create_user('nobody', 'password123')`).rejects.toMatchObject({ code: 'PT400' });
  });

  it('sign-in: invalid for a wrong password and for an unknown e-mail alike', async () => {
    const user = await newUser();
    const ok = await sqlSignIn(user.email, user.password);
    expect(ok).toMatchObject({ status: 'ok', user_id: user.id, refresh_token: expect.any(String) });
    for (const [email, password] of [[user.email, 'wrong-password'], [uniqueEmail(), 'password123']]) {
      expect(await sqlSignIn(email!, password!)).toMatchObject({ status: 'invalid', user_id: null, refresh_token: null });
    }
  });
});

describe('refresh tokens', () => {
  const login = async () => {
    const user = await newUser();
    const s = await sqlSignIn(user.email, user.password);
    return { user, token: s.refresh_token!, session: s.session_id! };
  };
  const refresh = async (token: string) => (await asAnon((tx) => tx`select * from api.auth_refresh(${token})`))[0]!;

  it('stores only hashes', async () => {
    const { token, session } = await login();
    const rows = await db()`select token_hash from identity.refresh_tokens where session_id = ${session}`;
    expect(rows).toHaveLength(1);
    expect(Buffer.from(rows[0]!.token_hash).toString('utf8')).not.toContain(token);
  });

  it('rotates, and a reuse revokes the family (the revocation commits)', async () => {
    const { token, session } = await login();
    const first = await refresh(token);
    expect(first.status).toBe('ok');
    expect((await refresh(token)).status).toBe('reused');
    expect((await refresh(first.refresh_token)).status).toBe('revoked');
    const [live] = await db()`select count(*)::int as n from identity.refresh_tokens where session_id = ${session} and revoked_at is null`;
    expect(live!.n).toBe(0);
  });

  it('expired and unknown tokens', async () => {
    const { token, session } = await login();
    await db()`update identity.refresh_tokens set expires_at = now() - interval '1 second' where session_id = ${session}`;
    expect((await refresh(token)).status).toBe('expired');
    expect((await refresh('no-such-token')).status).toBe('invalid');
  });

  it('two parallel refreshes of one token: one rotation wins, the other is treated as reuse', async () => {
    const { token } = await login();
    const results = await Promise.all([refresh(token), refresh(token)]);
    expect(results.map((r) => r.status).sort()).toEqual(['ok', 'reused']);
  });
});

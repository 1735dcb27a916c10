// SQL-level tests of the Supabase compatibility layer and identity functions:
// what a DBA runs after changing them.
import { describe, expect, it } from 'vitest';
import { asAnon, asUser, db, uniqueEmail } from '../helpers.ts';
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

  it('passwords longer than 72 bytes are not truncated', async () => {
    const long = 'x'.repeat(80);
    const [row] = await db()`select identity.password_matches(${long + 'a'}, identity.hash_password(${long + 'b'})) as same`;
    expect(row!.same).toBe(false);
  });

  it('rejects a duplicate e-mail (PT409), a short password and a bad e-mail (PT400)', async () => {
    const user = await newUser();
    await expect(db()`select admin.create_user(${user.email.toUpperCase()}, 'password123')`).rejects.toMatchObject({ code: 'PT409', hint: 'email_taken' });
    await expect(db()`select admin.create_user(${uniqueEmail()}, 'short')`).rejects.toMatchObject({ code: 'PT400' });
    await expect(db()`select admin.create_user('nobody', 'password123')`).rejects.toMatchObject({ code: 'PT400' });
  });

  it('auth_login: PT401 for a wrong password and for an unknown e-mail alike', async () => {
    const user = await newUser();
    const [ok] = await asAnon((tx) => tx`select * from api.auth_login(${user.email}, ${user.password})`);
    expect(ok).toMatchObject({ user_id: user.id, email: user.email, refresh_token: expect.any(String) });
    for (const [email, password] of [[user.email, 'wrong-password'], [uniqueEmail(), 'password123']]) {
      await expect(asAnon((tx) => tx`select * from api.auth_login(${email!}, ${password!})`)).rejects.toMatchObject({
        code: 'PT401',
        message: 'invalid email or password',
      });
    }
  });
});

describe('refresh tokens', () => {
  const login = async () => {
    const user = await newUser();
    const [s] = await asAnon((tx) => tx`select * from api.auth_login(${user.email}, ${user.password})`);
    return { user, token: s!.refresh_token as string, session: s!.session_id as string };
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

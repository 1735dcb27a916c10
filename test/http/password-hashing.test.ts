// Passwords are hashed in the processes, not in Postgres (issue 25), through
// the real gateway and MCP process:
//   * hashes made in psql by pgcrypto (admin.create_user, or crypt(…,
//     gen_salt('bf')) at its default cost 6) sign in, at the login and the
//     OAuth consent form, and a hash below BCRYPT_COST is re-hashed then;
//   * a hash is never in a response or in the log.
// The floods (a bounded queue per process, one client cannot fill it) start
// gateway processes of their own: test/load/password-hashing-floods.test.ts.
import fs from 'node:fs';
import { describe, expect, it } from 'vitest';
import { api, db, logFile, uniqueEmail } from '../helpers.ts';
import { authorize, consent, registerClient } from '../mcp/support.ts';
import { emailLinkRun } from '../support/email-links.ts';

const hashOf = async (userId: string) => (await db()`select password_hash from identity.users where id = ${userId}`)[0]!.password_hash as string;

/** An account made in psql: admin.create_user (pgcrypto, $2a$10$), optionally then given pgcrypto's default-cost hash. */
async function psqlUser(password: string, pgcryptoDefaultCost = false): Promise<{ id: string; email: string }> {
  const email = uniqueEmail('psql');
  const [row] = await db()`select admin.create_user(${email}, ${password}) as id`;
  if (pgcryptoDefaultCost) {
    await db()`update identity.users set password_hash = extensions.crypt(encode(extensions.digest(${password}, 'sha256'), 'base64'), extensions.gen_salt('bf'))
                where id = ${row!.id}`;
  }
  return { id: row!.id, email };
}

describe('hashes made in psql', () => {
  it('admin.create_user\'s pgcrypto hash signs in; one below BCRYPT_COST (pgcrypto\'s default, cost 6) is re-hashed at the login', async () => {
    const made = await psqlUser('correct horse');
    const before = await hashOf(made.id);
    expect(before).toMatch(/^\$2a\$10\$/);
    expect((await api('POST', '/api/auth/login', { body: { email: made.email, password: 'correct horse' } })).status).toBe(200);
    expect(await hashOf(made.id)).toBe(before); // already at BCRYPT_COST (10)

    const cheap = await psqlUser('battery staple', true);
    expect(await hashOf(cheap.id)).toMatch(/^\$2a\$06\$/);
    expect((await api('POST', '/api/auth/login', { body: { email: cheap.email, password: 'wrong password' } })).status).toBe(401);
    expect(await hashOf(cheap.id)).toMatch(/^\$2a\$06\$/); // a failure re-hashes nothing
    expect((await api('POST', '/api/auth/login', { body: { email: cheap.email, password: 'battery staple' } })).status).toBe(200);
    const rehashed = await hashOf(cheap.id);
    expect(rehashed).toMatch(/^\$2a\$10\$/);
    expect((await api('POST', '/api/auth/login', { body: { email: cheap.email, password: 'battery staple' } })).status).toBe(200);
    expect(await hashOf(cheap.id)).toBe(rehashed);
  });

  it('the OAuth consent form (MCP process) signs in with it and re-hashes it too', async () => {
    const cheap = await psqlUser('battery staple', true);
    const client = await registerClient();
    const { request } = await authorize(client.body.client_id);
    expect((await consent(request, cheap.email, 'wrong password')).status).toBe(401);
    expect(await hashOf(cheap.id)).toMatch(/^\$2a\$06\$/);
    const ok = await consent(request, cheap.email, 'battery staple');
    expect(ok.status).toBe(302);
    expect(new URL(ok.location!).searchParams.get('code')).toBeTruthy();
    expect(await hashOf(cheap.id)).toMatch(/^\$2a\$10\$/);
  });
});

describe('a hash never leaves the server', () => {
  it('no response and no log line holds a password hash (register, signup, login, consent, set-password, refresh)', async () => {
    const texts: string[] = [];
    const call = async (method: string, p: string, body?: unknown, token?: string) => {
      const res = await api(method, p, { body, token });
      texts.push(res.text, JSON.stringify([...res.headers]));
      return res;
    };
    const email = uniqueEmail('nohash');
    const reg = await call('POST', '/api/auth/register', { email, password: 'first password' });
    await call('POST', '/api/auth/register', { email, password: 'first password' }); // taken
    await call('POST', '/api/auth/signup', { email: uniqueEmail('nohash'), password: 'first password' });
    await call('POST', '/api/auth/login', { email, password: 'wrong password' });
    await call('POST', '/api/auth/login', { email: uniqueEmail('nobody'), password: 'wrong password' });
    const login = await call('POST', '/api/auth/login', { email, password: 'first password' });
    await call('POST', '/api/auth/refresh', { refresh_token: login.body.refresh_token });
    await call('GET', '/api/mobile/profile', undefined, login.body.access_token);
    const first = await hashOf(reg.body.user_id);

    await call('POST', '/api/auth/recover', { email });
    await emailLinkRun('recover', email);
    const [link] = await db()`select link from app.email_outbox where to_email = ${email} order by created_at desc limit 1`;
    const token = new URL(link!.link).searchParams.get('token')!;
    await call('POST', '/api/auth/set-password', { token, password: 'second password' });
    const second = await hashOf(reg.body.user_id);
    expect(second).not.toBe(first);
    expect(second).toMatch(/^\$2a\$10\$/);

    const client = await registerClient();
    const { request } = await authorize(client.body.client_id);
    const consented = await consent(request, email, 'second password');
    texts.push(consented.html, consented.location ?? '');

    const responses = texts.join('\n');
    const log = fs.readFileSync(logFile, 'utf8');
    expect(log).toContain(reg.body.user_id); // the requests were logged...
    for (const hash of [first, second]) {
      // ...neither the hash nor its salt is in any answer or log line
      for (const part of [hash, hash.slice(7, 29), hash.slice(29)]) {
        expect(responses).not.toContain(part);
        expect(log).not.toContain(part);
      }
    }
    expect(log).not.toMatch(/\$2[abxy]\$\d\d\$/);
    for (const password of ['first password', 'second password', 'wrong password']) expect(log).not.toContain(password);
  });
});


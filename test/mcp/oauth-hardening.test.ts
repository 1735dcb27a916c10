// Issue 27, performed as the reviewer did, through the gateway's OAuth paths
// (plain HTTP, as a script would, no browser):
//   * finding 1: the consent form checks passwords with the login's
//     throttling: an account locked out of /api/auth/login is locked out of
//     the form too, and failures on the form count for the login;
//   * finding 10: a redirect_uri whose host would end the consent page's
//     Content-Security-Policy directive is refused at registration and never
//     copied into the header; a form body in charset=utf-16 on /token is 415.
import crypto from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { api, baseUrl, db, registerUser, type TestUser } from '../helpers.ts';
import { authorize, consent, REDIRECT, registerClient } from './support.ts';

async function lockOutOfLogin(user: TestUser): Promise<void> {
  // The shared gateway: 10 failures per e-mail and client (every test client is 127.0.0.1).
  for (let i = 0; i < 10; i++) {
    expect((await api('POST', '/api/auth/login', { body: { email: user.email, password: `wrong-${i}` } })).status).toBe(401);
  }
  expect((await api('POST', '/api/auth/login', { body: { email: user.email, password: 'wrong' } })).status).toBe(429);
}

describe('the consent form is throttled like the login (finding 1)', () => {
  it('an account locked out of /api/auth/login gets 429 on the form, for wrong guesses and for the right password: no code', async () => {
    const user = await registerUser('consentlock');
    const client = await registerClient();
    expect(client.status).toBe(201);
    await lockOutOfLogin(user);

    let { request } = await authorize(client.body.client_id);
    for (let i = 0; i < 40; i++) {
      if (i % 5 === 4) ({ request } = await authorize(client.body.client_id));
      const guess = await consent(request, user.email, `guess-${i}`);
      expect(guess.status).toBe(429);
      expect(Number(guess.retryAfter)).toBeGreaterThanOrEqual(1);
      expect(guess.html).toContain('Too many failed sign-ins');
    }
    const right = await consent(request, user.email, user.password);
    expect(right.status).toBe(429);
    expect(right.location).toBeNull();
    const [codes] = await db()<{ n: number }[]>`select count(*)::int as n from identity.oauth_codes where user_id = ${user.userId}`;
    expect(codes!.n).toBe(0);
  });

  it('failures on the form count for the login: after 10 there, the login is 429 even with the right password', async () => {
    const user = await registerUser('consentcount');
    const client = await registerClient();
    for (let i = 0; i < 10; i++) {
      const { request } = await authorize(client.body.client_id);
      expect((await consent(request, user.email, `guess-${i}`)).status).toBe(401);
    }
    const { request } = await authorize(client.body.client_id);
    expect((await consent(request, user.email, user.password)).status).toBe(429);
    const login = await api('POST', '/api/auth/login', { body: { email: user.email, password: user.password } });
    expect(login.status).toBe(429);
    expect(login.headers.get('retry-after')).toMatch(/^\d+$/);
  });

  it('below the limit the right password still gets a code, and the code gets tokens', async () => {
    const user = await registerUser('consentok');
    const client = await registerClient();
    const { request, verifier } = await authorize(client.body.client_id);
    expect((await consent(request, user.email, 'wrong-once')).status).toBe(401);
    const ok = await consent(request, user.email, user.password);
    expect(ok.status).toBe(302);
    const code = new URL(ok.location!).searchParams.get('code')!;
    const tokens = await fetch(`${baseUrl}/token`, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams({ grant_type: 'authorization_code', code, code_verifier: verifier, client_id: client.body.client_id, redirect_uri: REDIRECT }),
    });
    expect(tokens.status).toBe(200);
    expect((await tokens.json()).access_token).toMatch(/^cboa_/);
  });
});

describe('the consent page\'s Content-Security-Policy (finding 10)', () => {
  it('a redirect_uri whose host carries `;` is refused at registration', async () => {
    for (const uri of ['https://evil.example;script-src-elem/cb', 'https://evil.example;script-src-elem', 'http://a,b.example/cb']) {
      const res = await registerClient([uri]);
      expect(res.status, uri).toBe(400);
      expect(res.body.error).toBe('invalid_client_metadata');
    }
  });

  it('a client stored with such a redirect_uri (registered before) never gets it into the header', async () => {
    const uri = 'https://evil.example;script-src-elem/cb';
    const clientId = `legacy-${crypto.randomBytes(4).toString('hex')}`;
    await db()`select private.oauth_client_register(${clientId}, null, 0, extract(epoch from now())::bigint,
                                                    ${db().json({ redirect_uris: [uri], client_name: 'legacy', token_endpoint_auth_method: 'none' })})`;
    const { page } = await authorize(clientId, uri);
    const csp = page.headers.get('content-security-policy')!;
    expect(csp).not.toContain('evil.example');
    expect(csp).not.toContain('script-src-elem');
    expect(csp).toContain("form-action 'self'");
  });

  it('an ordinary redirect_uri is still allowed as the form target', async () => {
    const client = await registerClient();
    const { page } = await authorize(client.body.client_id);
    expect(page.headers.get('content-security-policy')).toContain("form-action 'self' http://127.0.0.1:9");
  });
});

describe('request bodies on the OAuth endpoints (finding 10)', () => {
  it('POST /token as application/x-www-form-urlencoded; charset=utf-16 is 415, not 500', async () => {
    for (const charset of ['utf-16', 'utf-32', 'koi8-r']) {
      const res = await fetch(`${baseUrl}/token`, {
        method: 'POST',
        headers: { 'content-type': `application/x-www-form-urlencoded; charset=${charset}` },
        body: 'grant_type=refresh_token&refresh_token=x&client_id=y',
      });
      expect(res.status, charset).toBe(415);
      expect((await res.json()).error).toBe('unsupported_media_type');
    }
  });
});

// Authentication over HTTP: every status of register, signup, login, verify,
// refresh and logout; JWT tampering; refresh-token reuse; what reaches the logs.
import fs from 'node:fs';
import { describe, expect, it } from 'vitest';
import { api, expectErrorShape, forgeToken, logFile, registerUser, uniqueEmail, unsignedToken } from '../helpers.ts';
import { UUID } from '../support/formats.ts';

describe('POST /api/auth/register', () => {
  it('creates an account: 201 with user_id, email and message', async () => {
    const email = uniqueEmail();
    const res = await api('POST', '/api/auth/register', { body: { email, password: 'password123' } });
    expect(res.status).toBe(201);
    expect(res.body).toEqual({ user_id: expect.stringMatching(UUID), email, message: expect.any(String) });
  });

  it('normalises the e-mail and rejects a duplicate in any case with 400', async () => {
    const email = uniqueEmail();
    expect((await api('POST', '/api/auth/register', { body: { email, password: 'password123' } })).status).toBe(201);
    const again = await api('POST', '/api/auth/register', { body: { email: email.toUpperCase(), password: 'password123' } });
    expect(again.status).toBe(400);
    expectErrorShape(again.body);
    expect(again.body.error).toBe('email_taken');
  });

  it.each([
    ['no body', undefined],
    ['empty object', {}],
    ['missing password', { email: 'a@example.com' }],
    ['short password', { email: 'a@example.com', password: 'short' }],
    ['invalid email', { email: 'not-an-email', password: 'password123' }],
    ['email not a string', { email: 42, password: 'password123' }],
    ['array body', [1, 2]],
  ])('answers 400 with the Error body for %s', async (_name, body) => {
    const res = await api('POST', '/api/auth/register', { body });
    expect(res.status).toBe(400);
    expectErrorShape(res.body);
  });

  it('answers 400 for malformed JSON and 413 for a body over 1 MB', async () => {
    const bad = await api('POST', '/api/auth/register', { rawBody: '{"email": "a@example.com",' });
    expect(bad.status).toBe(400);
    expect(bad.body).toEqual({ error: 'invalid_json', message: expect.any(String), details: null });
    const big = await api('POST', '/api/auth/register', {
      rawBody: JSON.stringify({ email: 'a@example.com', password: 'x'.repeat(1_100_000) }),
    });
    expect(big.status).toBe(413);
    expectErrorShape(big.body);
  });

  it('two registrations of one e-mail racing: exactly one succeeds', async () => {
    const email = uniqueEmail('race');
    const results = await Promise.all(
      Array.from({ length: 6 }, () => api('POST', '/api/auth/register', { body: { email, password: 'password123' } })),
    );
    expect(results.map((r) => r.status).sort()).toEqual([201, 400, 400, 400, 400, 400]);
  });
});

describe('POST /api/auth/signup', () => {
  it('creates an account: 201 with user_id and email', async () => {
    const email = uniqueEmail();
    const res = await api('POST', '/api/auth/signup', { body: { email, password: 'password123' } });
    expect(res.status).toBe(201);
    expect(res.body).toMatchObject({ user_id: expect.stringMatching(UUID), email });
  });

  it('answers 422 for a duplicate e-mail and 400 for a bad body', async () => {
    const email = uniqueEmail();
    await api('POST', '/api/auth/signup', { body: { email, password: 'password123' } });
    const dup = await api('POST', '/api/auth/signup', { body: { email, password: 'password123' } });
    expect(dup.status).toBe(422);
    expectErrorShape(dup.body);
    const bad = await api('POST', '/api/auth/signup', { body: { email, password: '1234567' } });
    expect(bad.status).toBe(400);
    expectErrorShape(bad.body);
  });
});

describe('POST /api/auth/login', () => {
  it('returns access_token, refresh_token and expires_in (seconds)', async () => {
    const user = await registerUser();
    const res = await api('POST', '/api/auth/login', { body: { email: user.email, password: user.password } });
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({
      access_token: expect.any(String),
      refresh_token: expect.any(String),
      expires_in: 3600,
    });
  });

  it('answers a wrong password and an unknown e-mail with the same 401', async () => {
    const user = await registerUser();
    const wrong = await api('POST', '/api/auth/login', { body: { email: user.email, password: 'wrong-password' } });
    const unknown = await api('POST', '/api/auth/login', { body: { email: uniqueEmail(), password: 'wrong-password' } });
    expect(wrong.status).toBe(401);
    expect(unknown.status).toBe(401);
    expectErrorShape(wrong.body);
    expect(unknown.body).toEqual(wrong.body);
  });

  it('answers 400 for a missing field', async () => {
    const res = await api('POST', '/api/auth/login', { body: { email: 'a@example.com' } });
    expect(res.status).toBe(400);
    expectErrorShape(res.body);
  });
});

describe('access tokens', () => {
  it('verify: 200 with valid and user_id for a real token', async () => {
    const user = await registerUser();
    const res = await api('POST', '/api/auth/verify', { body: { token: user.accessToken } });
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ valid: true, user_id: user.userId });
  });

  it('verify: 400 without a token', async () => {
    const res = await api('POST', '/api/auth/verify', { body: {} });
    expect(res.status).toBe(400);
  });

  it('rejects tampered tokens on verify and on every protected route with 401', async () => {
    const user = await registerUser();
    const [header, payload] = user.accessToken.split('.');
    const otherPayload = Buffer.from(
      JSON.stringify({ ...JSON.parse(Buffer.from(payload!, 'base64url').toString()), sub: crypto.randomUUID() }),
    ).toString('base64url');
    const bad: Record<string, string> = {
      garbage: 'not-a-jwt',
      'alg none': unsignedToken({ sub: user.userId }),
      'other key': await forgeToken({ sub: user.userId }, { secret: 'another-secret-that-is-long-enough-1234' }),
      expired: await forgeToken({ sub: user.userId }, { expiresIn: Math.floor(Date.now() / 1000) - 60 }),
      'wrong audience': await forgeToken({ sub: user.userId }, { audience: 'someone-else' }),
      'wrong issuer': await forgeToken({ sub: user.userId }, { issuer: 'https://evil.example.com' }),
      'swapped payload': `${header}.${otherPayload}.${user.accessToken.split('.')[2]}`,
      'not a user id': await forgeToken({ sub: 'admin' }),
    };
    for (const [name, token] of Object.entries(bad)) {
      const verify = await api('POST', '/api/auth/verify', { body: { token } });
      expect(verify.status, name).toBe(401);
      expectErrorShape(verify.body);
      const profile = await api('GET', '/api/mobile/profile', { token });
      expect(profile.status, name).toBe(401);
      expectErrorShape(profile.body);
    }
  });

  it('accepts a token the test forges with the right key (so the rejections above are about the tampering)', async () => {
    const user = await registerUser();
    const token = await forgeToken({ sub: user.userId });
    expect((await api('GET', '/api/mobile/profile', { token })).status).toBe(200);
  });

  it('verify: 401 for a well-signed token of a user that no longer exists', async () => {
    const token = await forgeToken({ sub: crypto.randomUUID() });
    expect((await api('POST', '/api/auth/verify', { body: { token } })).status).toBe(401);
  });

  it.each([
    ['no header', {}],
    ['not bearer', { authorization: 'Basic dXNlcjpwYXNz' }],
    ['empty bearer', { authorization: 'Bearer ' }],
  ])('protected routes answer 401 with the Error body: %s', async (_name, headers) => {
    for (const path of ['/api/mobile/profile', '/api/mobile/hats', '/api/mobile/hat_types']) {
      const res = await api('GET', path, { headers });
      expect(res.status).toBe(401);
      expectErrorShape(res.body);
      expect(res.headers.get('www-authenticate')).toBe('Bearer');
    }
    const post = await api('POST', '/api/mobile/hats', { headers, body: { hat: { name: 'x', hat_type: 'social' } } });
    expect(post.status).toBe(401);
  });
});

describe('refresh tokens', () => {
  it('rotate: a refresh gives a new working pair', async () => {
    const user = await registerUser();
    const res = await api('POST', '/api/auth/refresh', { body: { refresh_token: user.refreshToken } });
    expect(res.status).toBe(200);
    expect(res.body.refresh_token).not.toBe(user.refreshToken);
    expect((await api('GET', '/api/mobile/profile', { token: res.body.access_token })).status).toBe(200);
  });

  it('reusing a rotated token is 401 and revokes the whole family', async () => {
    const user = await registerUser();
    const first = await api('POST', '/api/auth/refresh', { body: { refresh_token: user.refreshToken } });
    expect(first.status).toBe(200);
    const reuse = await api('POST', '/api/auth/refresh', { body: { refresh_token: user.refreshToken } });
    expect(reuse.status).toBe(401);
    expectErrorShape(reuse.body);
    // The token issued by the legitimate rotation is now dead too.
    const afterReuse = await api('POST', '/api/auth/refresh', { body: { refresh_token: first.body.refresh_token } });
    expect(afterReuse.status).toBe(401);
  });

  it('a reuse does not touch the user\'s other sessions', async () => {
    const user = await registerUser();
    const other = await api('POST', '/api/auth/login', { body: { email: user.email, password: user.password } });
    await api('POST', '/api/auth/refresh', { body: { refresh_token: user.refreshToken } });
    await api('POST', '/api/auth/refresh', { body: { refresh_token: user.refreshToken } });
    expect((await api('POST', '/api/auth/refresh', { body: { refresh_token: other.body.refresh_token } })).status).toBe(200);
  });

  it('unknown token 401, missing token 400', async () => {
    expect((await api('POST', '/api/auth/refresh', { body: { refresh_token: 'nope' } })).status).toBe(401);
    expect((await api('POST', '/api/auth/refresh', { body: {} })).status).toBe(400);
  });

  it('logout revokes the session: its refresh token stops working', async () => {
    const user = await registerUser();
    const out = await api('POST', '/api/auth/logout', { body: { refresh_token: user.refreshToken } });
    expect(out.status).toBe(200);
    expect(out.body).toMatchObject({ success: true });
    expect((await api('POST', '/api/auth/refresh', { body: { refresh_token: user.refreshToken } })).status).toBe(401);
    expect((await api('POST', '/api/auth/logout', { body: { refresh_token: 'unknown' } })).status).toBe(401);
  });
});

describe('the pipeline', () => {
  it('unknown routes answer a JSON 404 Error body', async () => {
    const res = await api('GET', '/api/nope');
    expect(res.status).toBe(404);
    expectErrorShape(res.body);
    expect((await api('DELETE', '/api/mobile/profile', { token: 'x' })).status).toBe(404);
  });

  it('every response carries a request id, and a sane incoming one is kept', async () => {
    const res = await api('GET', '/health', { headers: { 'x-request-id': 'abc-123' } });
    expect(res.headers.get('x-request-id')).toBe('abc-123');
    const generated = await api('GET', '/health', { headers: { 'x-request-id': 'bad id with spaces' } });
    expect(generated.headers.get('x-request-id')).toMatch(UUID);
  });

  it('health answers 200 once migrated', async () => {
    const res = await api('GET', '/health');
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ status: 'ok' });
  });

  it('never writes passwords or tokens to the log', async () => {
    const user = await registerUser('logcheck');
    await api('POST', '/api/auth/login', { body: { email: user.email, password: 'definitely-wrong-pw' } });
    await api('POST', '/api/auth/verify', { body: { token: user.accessToken } });
    await api('GET', '/api/mobile/profile', { token: user.accessToken });
    await api('POST', '/api/auth/refresh', { body: { refresh_token: user.refreshToken } });
    const logs = fs.readFileSync(logFile, 'utf8');
    expect(logs).toContain(user.userId); // the requests were logged...
    for (const secret of [user.password, 'definitely-wrong-pw', user.accessToken, user.refreshToken]) {
      expect(logs).not.toContain(secret); // ...their secrets were not
    }
  });
});

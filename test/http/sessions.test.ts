// Sessions end when they are ended (issue 14): after logout, or after a
// refresh token's reuse revoked the session, the session's access tokens fail
// on the next request (REST 401), and its open SSE streams and websocket
// channels are closed.
import crypto from 'node:crypto';
import { describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import { withClaims } from '../../gateway/core/database/transaction.ts';
import { api, asUser, baseUrl, db, registerUser } from '../helpers.ts';
import { openStream } from '../support/sse.ts';
import { joinedSocket } from '../support/ws-channel.ts';
import { waitFor } from '../support/wait.ts';

describe('logout ends the session', () => {
  it('the access token fails on the next request; streams and channels of the session close; other sessions live on', async () => {
    const user = await registerUser('session');
    const other = await api('POST', '/api/auth/login', { body: { email: user.email, password: user.password } });
    expect(other.status).toBe(200);

    expect((await api('GET', '/api/mobile/profile', { token: user.accessToken })).status).toBe(200);
    const stream = await openStream({ token: user.accessToken });
    expect(stream.status).toBe(200);
    const socket = await joinedSocket(user.accessToken);
    try {
      const out = await api('POST', '/api/auth/logout', { body: { refresh_token: user.refreshToken } });
      expect(out.status).toBe(200);

      const after = await api('GET', '/api/mobile/profile', { token: user.accessToken });
      expect(after.status).toBe(401);
      expect(after.body).toMatchObject({ error: 'session_ended' });
      expect(after.headers.get('www-authenticate')).toBe('Bearer');
      const write = await api('POST', '/api/mobile/hats', { token: user.accessToken, body: { hat: { name: 'x', hat_type: 'professional' } } });
      expect(write.status).toBe(401);
      const verify = await api('POST', '/api/auth/verify', { body: { token: user.accessToken } });
      expect(verify.status).toBe(401);

      await stream.waitEnded(5000);
      const closed = await waitFor(() => socket.frames.find((f) => f[3] === 'phx_close'), 'the channel to close');
      expect(closed[2]).toBe('realtime:feed');
      expect(socket.frames.find((f) => f[3] === 'system' && (f[4] as { status: string }).status === 'error')?.[4]).toMatchObject({
        message: 'the session has ended',
      });
      const reopened = await openStream({ token: user.accessToken });
      expect(reopened.status).toBe(401);

      // The user's other session is untouched.
      expect((await api('GET', '/api/mobile/profile', { token: other.body.access_token })).status).toBe(200);
    } finally {
      stream.close();
      socket.ws.close();
    }
  });
});

describe('refresh-token reuse ends the session', () => {
  it('the access tokens of the revoked session fail at once, the new pair of the thief too', async () => {
    const user = await registerUser('reuse');
    const rotated = await api('POST', '/api/auth/refresh', { body: { refresh_token: user.refreshToken } });
    expect(rotated.status).toBe(200);
    expect((await api('GET', '/api/mobile/profile', { token: rotated.body.access_token })).status).toBe(200);

    const reuse = await api('POST', '/api/auth/refresh', { body: { refresh_token: user.refreshToken } });
    expect(reuse.status).toBe(401);
    for (const token of [user.accessToken, rotated.body.access_token]) {
      const res = await api('GET', '/api/mobile/profile', { token });
      expect(res.status).toBe(401);
      expect(res.body.error).toBe('session_ended');
    }
  });
});

describe('private.check_session (SQL)', () => {
  it('true for a live, unknown or missing session; PT401 once the session is ended', async () => {
    const user = await registerUser('checksql');
    const [row] = await db()`select session_id from identity.refresh_tokens where user_id = ${user.userId} limit 1`;
    const sessionId = row!.session_id as string;
    expect((await db()`select private.check_session(${sessionId}::uuid) as ok`)[0]!.ok).toBe(true);
    expect((await db()`select private.check_session(${crypto.randomUUID()}::uuid) as ok`)[0]!.ok).toBe(true);
    expect((await db()`select private.check_session(null) as ok`)[0]!.ok).toBe(true);
    // A claim that is not a uuid names no session (the gateway passes null).
    expect(await withClaims(db(), { role: 'authenticated', sub: user.userId, session_id: 'not-a-uuid' }, (tx) => tx`select 1 as one`)).toEqual([{ one: 1 }]);
    await db()`select api.auth_logout(${user.refreshToken})`;
    await expect(db()`select private.check_session(${sessionId}::uuid)`).rejects.toMatchObject({ code: 'PT401', hint: 'session_ended' });
    const claims = { role: 'authenticated' as const, sub: user.userId, session_id: sessionId };
    await expect(asUser(user.userId, (tx) => tx`select 1`)).resolves.toBeDefined();
    await expect(withClaims(db(), claims, (tx) => tx`select 1`)).rejects.toMatchObject({ code: 'PT401' });
  });
});

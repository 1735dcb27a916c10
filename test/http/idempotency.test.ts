// Idempotency-Key on POST, PATCH and DELETE of the mobile, platform and token
// interfaces, through the real gateway and Postgres, counting the rows made:
// a replay (same status and body, Idempotent-Replayed: true, nothing new),
// the key reused for another request (422), racing requests with one key
// (exactly one effect, the others 409 or the replay), a request held in
// flight (409 at once), refused requests (nothing kept: the retry runs), a
// request that failed with a 5xx (nothing kept: the retry runs), keys of two
// users and of two credentials of one user, the attacks of the fourth
// security review (a stored answer replayed to another credential, to a
// credential the route refuses now, a refusal replayed to the owner), the cap
// per caller, the key's own validation, and the OpenAPI document.
import crypto from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { api, db, registerUser, type TestUser } from '../helpers.ts';
import { createToken } from '../support/api-tokens.ts';
import { newCommunity } from '../support/sql-fixtures.ts';

const newKey = () => crypto.randomUUID();

const keyed = (key: string, user: TestUser | string) => ({
  token: typeof user === 'string' ? user : user.accessToken,
  headers: { 'idempotency-key': key },
});

async function taskCount(user: TestUser, title: string): Promise<number> {
  const [row] = await db()`select count(*)::int as n from app.tasks where created_by = ${user.userId} and meta ->> 'title' = ${title}`;
  return row!.n as number;
}

async function keyRows(user: TestUser): Promise<number> {
  const [row] = await db()`select count(*)::int as n from app.idempotency_keys where user_id = ${user.userId}`;
  return row!.n as number;
}

describe('replay', () => {
  it('the same request again: the first status and body, Idempotent-Replayed: true, nothing new', async () => {
    const user = await registerUser('idem');
    const key = newKey();
    const first = await api('POST', '/api/mobile/tasks', { ...keyed(key, user), body: { title: 'once', description: 'd' } });
    expect(first.status).toBe(201);
    expect(first.headers.get('idempotent-replayed')).toBeNull();
    for (let i = 0; i < 3; i++) {
      const again = await api('POST', '/api/mobile/tasks', { ...keyed(key, user), body: { title: 'once', description: 'd' } });
      expect(again.status).toBe(201);
      expect(again.text).toBe(first.text);
      expect(again.headers.get('idempotent-replayed')).toBe('true');
      expect(again.headers.get('content-type')).toBe('application/json; charset=utf-8');
      expect(again.headers.get('x-request-id')).not.toBe(first.headers.get('x-request-id'));
    }
    expect(await taskCount(user, 'once')).toBe(1);
    // Without the key, the request runs again (and keeps no record).
    const rows = await keyRows(user);
    expect((await api('POST', '/api/mobile/tasks', { token: user.accessToken, body: { title: 'once', description: 'd' } })).status).toBe(201);
    expect(await taskCount(user, 'once')).toBe(2);
    expect(await keyRows(user)).toBe(rows);
  });

  it('PATCH and DELETE replay too; a refusal from SQL (404) keeps nothing: the same key runs again', async () => {
    const user = await registerUser('idem');
    const created = await api('POST', '/api/mobile/tasks', { token: user.accessToken, body: { title: 'patch me' } });
    const id = created.body.task.id as string;
    const patchKey = newKey();
    const patched = await api('PATCH', `/api/mobile/tasks/${id}`, { ...keyed(patchKey, user), body: { title: 'patched' } });
    expect(patched.status).toBe(200);
    const updatedAt = patched.body.task.updated_at;
    await new Promise((resolve) => setTimeout(resolve, 20));
    const again = await api('PATCH', `/api/mobile/tasks/${id}`, { ...keyed(patchKey, user), body: { title: 'patched' } });
    expect(again.headers.get('idempotent-replayed')).toBe('true');
    expect(again.text).toBe(patched.text);
    const [row] = await db()`select updated_at from app.tasks where id = ${id}`;
    expect(row!.updated_at.toISOString()).toBe(updatedAt); // not updated twice

    const deleteKey = newKey();
    const deleted = await api('DELETE', `/api/mobile/tasks/${id}`, keyed(deleteKey, user));
    expect(deleted.status).toBe(204);
    const deletedAgain = await api('DELETE', `/api/mobile/tasks/${id}`, keyed(deleteKey, user));
    expect(deletedAgain.status).toBe(204);
    expect(deletedAgain.headers.get('idempotent-replayed')).toBe('true');
    expect(deletedAgain.text).toBe('');
    // A new key: the task is gone, 404, and a refusal keeps nothing: the same key runs again.
    const rows = await keyRows(user);
    const missingKey = newKey();
    const missing = await api('DELETE', `/api/mobile/tasks/${id}`, keyed(missingKey, user));
    expect(missing.status).toBe(404);
    expect(missing.body.error).toBe('task_not_found');
    const missingAgain = await api('DELETE', `/api/mobile/tasks/${id}`, keyed(missingKey, user));
    expect(missingAgain.status).toBe(404);
    expect(missingAgain.headers.get('idempotent-replayed')).toBeNull();
    expect(await keyRows(user)).toBe(rows);
  });

  it('a key belongs to its credential: an API token and its owner\'s session each run their own request with it', async () => {
    const user = await registerUser('idem');
    const token = await createToken(user, { permissions: ['/api/mobile/*'] });
    const key = newKey();
    const hat = { hat: { name: 'Token hat', hat_type: 'social' } };
    const viaToken = await api('POST', '/api/mobile/hats', { ...keyed(key, token.secret), body: hat });
    expect(viaToken.status).toBe(201);
    const viaAccess = await api('POST', '/api/mobile/hats', { ...keyed(key, user), body: hat });
    expect(viaAccess.status).toBe(201);
    expect(viaAccess.headers.get('idempotent-replayed')).toBeNull();
    expect(viaAccess.body.data.id).not.toBe(viaToken.body.data.id);
    // Each replays its own answer; a refreshed access token is the same session.
    const againToken = await api('POST', '/api/mobile/hats', { ...keyed(key, token.secret), body: hat });
    expect(againToken.headers.get('idempotent-replayed')).toBe('true');
    expect(againToken.text).toBe(viaToken.text);
    const refreshed = await api('POST', '/api/auth/refresh', { body: { refresh_token: user.refreshToken } });
    expect(refreshed.status).toBe(200);
    const againAccess = await api('POST', '/api/mobile/hats', { ...keyed(key, refreshed.body.access_token as string), body: hat });
    expect(againAccess.headers.get('idempotent-replayed')).toBe('true');
    expect(againAccess.text).toBe(viaAccess.text);
    // Another session of the same user (a second sign-in) is another credential.
    const login = await api('POST', '/api/auth/login', { body: { email: user.email, password: user.password } });
    const otherSession = await api('POST', '/api/mobile/hats', { ...keyed(key, login.body.access_token as string), body: hat });
    expect(otherSession.status).toBe(201);
    expect(otherSession.headers.get('idempotent-replayed')).toBeNull();
    const [row] = await db()`select count(*)::int as n from app.hats where user_id = ${user.userId} and name = 'Token hat'`;
    expect(row!.n).toBe(3);
  });

  it('a secret shown once (an API token) is replayed, but stored only encrypted', async () => {
    const user = await registerUser('idem');
    const key = newKey();
    const body = { name: 'replayed token', permissions: ['/api/mobile/*'] };
    const first = await api('POST', '/api/docs/tokens', { ...keyed(key, user), body });
    expect(first.status).toBe(201);
    const again = await api('POST', '/api/docs/tokens', { ...keyed(key, user), body });
    expect(again.headers.get('idempotent-replayed')).toBe('true');
    expect(again.body.token_value).toBe(first.body.token_value);
    const [{ n }] = (await db()`select count(*)::int as n from app.api_tokens where user_id = ${user.userId}`) as unknown as [{ n: number }];
    expect(n).toBe(1);
    const stored = await db()`select key_hash, answer from app.idempotency_keys where user_id = ${user.userId}`;
    expect(stored).toHaveLength(1);
    const raw = Buffer.concat([stored[0]!.key_hash as Buffer, stored[0]!.answer as Buffer]);
    expect(raw.includes(Buffer.from(first.body.token_value as string))).toBe(false);
    expect(raw.includes(Buffer.from(key))).toBe(false);
    expect(raw.includes(Buffer.from('replayed token'))).toBe(false);
  });

  it('a platform POST replays; a GET ignores the header', async () => {
    const manager = await registerUser('idem-manager');
    const community = await newCommunity({ manager });
    const key = newKey();
    const body = {
      community_id: community,
      external_platform: 'platform_a',
      external_id: `ext-${crypto.randomBytes(6).toString('hex')}`,
      title: 'Pushed',
      description: 'From a platform',
      date: new Date(Date.now() + 86_400_000).toISOString(),
    };
    const first = await api('POST', '/api/v1/platform/events', { ...keyed(key, manager), body });
    expect(first.status).toBe(201);
    const again = await api('POST', '/api/v1/platform/events', { ...keyed(key, manager), body });
    expect(again.status).toBe(201); // the first answer, not the 200 a plain repeat gets
    expect(again.headers.get('idempotent-replayed')).toBe('true');
    const get = await api('GET', '/api/mobile/profile', keyed(key, manager));
    expect(get.status).toBe(200);
    expect(get.headers.get('idempotent-replayed')).toBeNull();
  });
});

describe('reuse', () => {
  it('the same key with another body, path or method: 422 idempotency_key_reused, nothing done', async () => {
    const user = await registerUser('idem');
    const key = newKey();
    expect((await api('POST', '/api/mobile/tasks', { ...keyed(key, user), body: { title: 'first' } })).status).toBe(201);
    const otherBody = await api('POST', '/api/mobile/tasks', { ...keyed(key, user), body: { title: 'second' } });
    expect(otherBody.status).toBe(422);
    expect(otherBody.body).toMatchObject({ error: 'idempotency_key_reused' });
    const otherPath = await api('POST', '/api/mobile/hats', { ...keyed(key, user), body: { hat: { name: 'h', hat_type: 'social' } } });
    expect(otherPath.status).toBe(422);
    expect(otherPath.body.error).toBe('idempotency_key_reused');
    const task = await api('POST', '/api/mobile/tasks', { token: user.accessToken, body: { title: 'x' } });
    const otherMethod = await api('PATCH', `/api/mobile/tasks/${task.body.task.id}`, { ...keyed(key, user), body: { title: 'first' } });
    expect(otherMethod.status).toBe(422);
    expect(otherMethod.body.error).toBe('idempotency_key_reused');
    expect(await taskCount(user, 'second')).toBe(0);
    expect(await taskCount(user, 'first')).toBe(1);
    const [hats] = await db()`select count(*)::int as n from app.hats where user_id = ${user.userId}`;
    expect(hats!.n).toBe(0);
  });

  it('keys of two users do not collide', async () => {
    const alice = await registerUser('idem-alice');
    const bob = await registerUser('idem-bob');
    const key = newKey();
    const a = await api('POST', '/api/mobile/tasks', { ...keyed(key, alice), body: { title: 'shared key' } });
    const b = await api('POST', '/api/mobile/tasks', { ...keyed(key, bob), body: { title: 'shared key' } });
    expect(a.status).toBe(201);
    expect(b.status).toBe(201);
    expect(b.headers.get('idempotent-replayed')).toBeNull();
    expect(b.body.task.id).not.toBe(a.body.task.id);
    expect(await taskCount(alice, 'shared key')).toBe(1);
    expect(await taskCount(bob, 'shared key')).toBe(1);
    // Bob's other body with the same key is his own affair.
    expect((await api('POST', '/api/mobile/tasks', { ...keyed(key, bob), body: { title: 'other' } })).body.error).toBe('idempotency_key_reused');
    expect((await api('POST', '/api/mobile/tasks', { ...keyed(key, alice), body: { title: 'shared key' } })).headers.get('idempotent-replayed')).toBe('true');
  });
});

describe('concurrency', () => {
  it('racing requests with one key: exactly one effect; the others 409 or the replay', async () => {
    const user = await registerUser('idem-race');
    for (const round of [1, 2, 3]) {
      const key = newKey();
      const title = `race ${round}`;
      const answers = await Promise.all(
        Array.from({ length: 12 }, () => api('POST', '/api/mobile/tasks', { ...keyed(key, user), body: { title } })),
      );
      const fresh = answers.filter((a) => a.status === 201 && a.headers.get('idempotent-replayed') === null);
      expect(fresh).toHaveLength(1);
      for (const answer of answers) {
        if (answer.status === 409) expect(answer.body.error).toBe('idempotency_key_in_progress');
        else {
          expect(answer.status).toBe(201);
          expect(answer.body.task.id).toBe(fresh[0]!.body.task.id);
        }
      }
      expect(await taskCount(user, title)).toBe(1);
    }
  });

  it('a request still running holds its key: the same key is 409 at once, then the replay', async () => {
    const user = await registerUser('idem-hold');
    const task = await api('POST', '/api/mobile/tasks', { token: user.accessToken, body: { title: 'held' } });
    const id = task.body.task.id as string;
    const key = newKey();
    // Hold the task's row: POST .../start locks it, so the keyed request waits inside its transaction.
    const holder = await db().reserve();
    try {
      await holder`begin`;
      await holder`select id from app.tasks where id = ${id} for update`;
      const first = api('POST', `/api/mobile/tasks/${id}/start`, keyed(key, user));
      // Until the first request has claimed the key and waits on the row.
      for (let i = 0; i < 100; i++) {
        const [waiting] = await db()`select count(*)::int as n from pg_stat_activity where datname = current_database() and wait_event_type = 'Lock' and query like '%api.task_start%'`;
        if (waiting!.n > 0) break;
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
      // Answered while the row is still held: it did not wait for the first request's lock.
      const second = await api('POST', `/api/mobile/tasks/${id}/start`, keyed(key, user));
      expect(second.status).toBe(409);
      expect(second.body).toMatchObject({ error: 'idempotency_key_in_progress', details: { retry_after: 1 } });
      expect(second.headers.get('retry-after')).toBe('1');
      await holder`commit`;
      const done = await first;
      expect(done.status).toBe(200);
      expect(done.body.task.meta.status).toBe('in_progress');
      const third = await api('POST', `/api/mobile/tasks/${id}/start`, keyed(key, user));
      expect(third.status).toBe(200);
      expect(third.headers.get('idempotent-replayed')).toBe('true');
      expect(third.text).toBe(done.text);
    } finally {
      await holder`rollback`.catch(() => {});
      holder.release();
    }
  });
});

describe('failures', () => {
  it('a key on a request that fails validation keeps nothing: the same key then runs the corrected request', async () => {
    const user = await registerUser('idem-invalid');
    const key = newKey();
    const refused = await api('POST', '/api/mobile/tasks', { ...keyed(key, user), body: { title: 'bad status', status: 'bogus' } });
    expect(refused.status).toBe(422);
    expect(refused.body).toEqual({ error: expect.stringMatching(/^body\.status/) }); // the route's Simple body
    const again = await api('POST', '/api/mobile/tasks', { ...keyed(key, user), body: { title: 'bad status', status: 'bogus' } });
    expect(again.status).toBe(422);
    expect(again.headers.get('idempotent-replayed')).toBeNull();
    expect(await keyRows(user)).toBe(0);
    const fixed = await api('POST', '/api/mobile/tasks', { ...keyed(key, user), body: { title: 'bad status' } });
    expect(fixed.status).toBe(201);
    expect(await taskCount(user, 'bad status')).toBe(1);
    expect((await api('POST', '/api/mobile/tasks', { ...keyed(key, user), body: { title: 'bad status' } })).headers.get('idempotent-replayed')).toBe('true');
  });

  it('a request that fails with a 5xx (rolled back) keeps nothing: the retry with the key runs', async () => {
    const user = await registerUser('idem-5xx');
    const title = `fail ${crypto.randomBytes(4).toString('hex')}`;
    const trigger = `idem_test_fail_${crypto.randomBytes(4).toString('hex')}`;
    await db().unsafe(`
      create function public.${trigger}() returns trigger language plpgsql as $$
      begin
        if new.meta ->> 'title' = '${title}' then raise exception 'simulated failure'; end if;
        return new;
      end $$;
      create trigger ${trigger} before insert on app.tasks for each row execute function public.${trigger}();`);
    const key = newKey();
    try {
      // 500 is no documented answer: the contract check is off for the simulated failure.
      const failed = await api('POST', '/api/mobile/tasks', { ...keyed(key, user), body: { title }, noContract: true });
      expect(failed.status).toBe(500);
      expect(failed.body.error).toBe('internal_error');
      expect(await keyRows(user)).toBe(0);
      // Retried while it still fails: still nothing kept.
      expect((await api('POST', '/api/mobile/tasks', { ...keyed(key, user), body: { title }, noContract: true })).status).toBe(500);
      expect(await keyRows(user)).toBe(0);
    } finally {
      await db().unsafe(`drop trigger if exists ${trigger} on app.tasks; drop function if exists public.${trigger}();`);
    }
    const retried = await api('POST', '/api/mobile/tasks', { ...keyed(key, user), body: { title } });
    expect(retried.status).toBe(201);
    expect(retried.headers.get('idempotent-replayed')).toBeNull();
    expect(await taskCount(user, title)).toBe(1);
    expect(await keyRows(user)).toBe(1);
  });

  it('the key itself: 1-255 printable ASCII characters, else the route\'s invalid-input answer (not kept)', async () => {
    const user = await registerUser('idem-key');
    for (const bad of ['', 'x'.repeat(256), 'clé']) {
      const res = await api('POST', '/api/mobile/tasks', { ...keyed(bad, user), body: { title: 'k' } });
      expect(res.status, JSON.stringify(bad)).toBe(422);
      expect(res.body).toEqual({ error: expect.stringMatching(/^header\.idempotency-key: /) });
    }
    // A route whose invalid-input answer is 400 with the Flagged body.
    const community = await newCommunity();
    const join = await api('POST', `/api/mobile/communities/${community}/join`, { ...keyed('x'.repeat(256), user) });
    expect(join.status).toBe(400);
    expect(join.body).toEqual({ success: false, error: expect.stringMatching(/^header\.idempotency-key: /) });
    expect(await taskCount(user, 'k')).toBe(0);
    expect(await keyRows(user)).toBe(0);
    // 255 printable characters (spaces and punctuation included) are a key.
    const longest = ` !~${'k'.repeat(249)}~! `.slice(0, 255).replace(/^ | $/g, 'k');
    expect((await api('POST', '/api/mobile/tasks', { ...keyed(longest, user), body: { title: 'k' } })).status).toBe(201);
    expect((await api('POST', '/api/mobile/tasks', { ...keyed(longest, user), body: { title: 'k' } })).headers.get('idempotent-replayed')).toBe('true');
  });

  it('without a credential the key changes nothing: 401', async () => {
    const res = await api('POST', '/api/mobile/tasks', { headers: { 'idempotency-key': newKey() }, body: { title: 'anon' } });
    expect(res.status).toBe(401);
  });
});

describe('a stored answer goes to the credential that made it, after the route\'s authorization (security review round 4)', () => {
  /** A user managing two communities, Zulu with a webhook endpoint, and Alpha. */
  async function twoCommunities(prefix: string) {
    const user = await registerUser(prefix);
    const zulu = await newCommunity({ manager: user });
    const alpha = await newCommunity({ manager: user });
    const hook = await api('POST', '/api/v1/platform/webhooks', {
      token: user.accessToken,
      body: { community_id: zulu, url: 'https://hooks.example.com/zulu', events: ['member.left'] },
    });
    expect(hook.status, hook.text).toBe(201);
    return { user, zulu, alpha, rotatePath: `/api/v1/platform/webhooks/${hook.body.data.id as string}/rotate_secret`, hookId: hook.body.data.id as string };
  }
  const storedSecret = async (hookId: string) => (await db()`select secret from app.webhook_endpoints where id = ${hookId}`)[0]!.secret as string;

  it('a webhook secret rotated in Zulu with a key is not replayed to her API token scoped to Alpha: it gets its own 403', async () => {
    const { user, alpha, rotatePath, hookId } = await twoCommunities('idem-rotate');
    const key = newKey();
    const rotated = await api('POST', rotatePath, keyed(key, user));
    expect(rotated.status).toBe(200);
    const secret = rotated.body.data.secret as string;
    expect(secret).toMatch(/^whsec_/);

    const alphaToken = await createToken(user, { community_id: alpha, permissions: ['*'] });
    const withoutKey = await api('POST', rotatePath, { token: alphaToken.secret });
    expect(withoutKey.status).toBe(403);
    const withKey = await api('POST', rotatePath, keyed(key, alphaToken.secret));
    expect(withKey.status).toBe(403);
    expect(withKey.body.error).toBe('community_scope_violation');
    expect(withKey.headers.get('idempotent-replayed')).toBeNull();
    expect(withKey.text).not.toContain(secret);
    expect(await storedSecret(hookId)).toBe(secret);
  });

  it('POST /api/docs/tokens with a key is not replayed to an API token (which may not create tokens): 403, no token_value', async () => {
    const user = await registerUser('idem-mint');
    const key = newKey();
    const body = { name: 'minted', permissions: ['*'] };
    const first = await api('POST', '/api/docs/tokens', { ...keyed(key, user), body });
    expect(first.status).toBe(201);
    const personal = await createToken(user, { permissions: ['*'] });
    const replayed = await api('POST', '/api/docs/tokens', { ...keyed(key, personal.secret), body });
    expect(replayed.status).toBe(403);
    expect(replayed.body.error).toBe('forbidden');
    expect(replayed.headers.get('idempotent-replayed')).toBeNull();
    expect(replayed.text).not.toContain(first.body.token_value as string);
    const [row] = await db()`select count(*)::int as n from app.api_tokens where user_id = ${user.userId}`;
    expect(row!.n).toBe(2); // the minted one and the personal one
  });

  it('a refusal for a narrow token is not replayed to the owner: the owner\'s request runs', async () => {
    const user = await registerUser('idem-narrow');
    const narrow = await createToken(user, { permissions: ['/api/docs/tokens'] });
    const key = newKey();
    const body = { name: 'wanted', permissions: ['/api/mobile/*'] };
    const refused = await api('POST', '/api/docs/tokens', { ...keyed(key, narrow.secret), body });
    expect(refused.status).toBe(403);
    const owner = await api('POST', '/api/docs/tokens', { ...keyed(key, user), body });
    expect(owner.status).toBe(201);
    expect(owner.headers.get('idempotent-replayed')).toBeNull();
    expect(owner.body.token_value).toMatch(/^cbk_/);
  });

  it('the same credential gets the stored answer only while the route authorizes it: demoted, its 403; a manager again, the replay', async () => {
    const { user, zulu, rotatePath, hookId } = await twoCommunities('idem-demoted');
    const successor = await registerUser('idem-successor');
    await db()`select admin.add_manager(${zulu}, ${successor.email})`;
    const personal = await createToken(user, { permissions: ['/api/v1/platform/*'] });
    const key = newKey();
    const rotated = await api('POST', rotatePath, keyed(key, personal.secret));
    expect(rotated.status).toBe(200);
    const secret = rotated.body.data.secret as string;
    const setRole = (role: string) => db()`
      update app.community_members m set role = ${role}
        from app.profiles p where p.node_id = m.member_node_id and p.id = ${user.userId} and m.community_id = ${zulu}`;

    await setRole('member');
    const demoted = await api('POST', rotatePath, keyed(key, personal.secret));
    expect(demoted.status).toBe(403);
    expect(demoted.body.error).toBe('not_community_manager');
    expect(demoted.text).not.toContain(secret);

    await setRole('manager');
    const again = await api('POST', rotatePath, keyed(key, personal.secret));
    expect(again.status).toBe(200);
    expect(again.headers.get('idempotent-replayed')).toBe('true');
    expect(again.text).toBe(rotated.text);
    // The route ran behind the replay to authorize it; its rotation was rolled back.
    expect(await storedSecret(hookId)).toBe(secret);
  });

  it('an ended credential gets its own 401: a deactivated API token, a logged-out session', async () => {
    const { user, rotatePath } = await twoCommunities('idem-ended');
    const personal = await createToken(user, { permissions: ['/api/v1/platform/*'] });
    const tokenKey = newKey();
    const sessionKey = newKey();
    expect((await api('POST', rotatePath, keyed(tokenKey, personal.secret))).status).toBe(200);
    expect((await api('POST', rotatePath, keyed(sessionKey, user))).status).toBe(200);
    expect((await api('DELETE', `/api/docs/tokens/${personal.id}`, { token: user.accessToken })).status).toBe(200);
    const viaToken = await api('POST', rotatePath, keyed(tokenKey, personal.secret));
    expect(viaToken.status).toBe(401);
    expect(viaToken.body.error).toBe('invalid_token');
    expect((await api('POST', '/api/auth/logout', { body: { refresh_token: user.refreshToken } })).status).toBe(200);
    const viaSession = await api('POST', rotatePath, keyed(sessionKey, user));
    expect(viaSession.status).toBe(401);
    expect(viaSession.body.error).toBe('session_ended');
  });
});

describe('what is kept (security review round 4)', () => {
  it('keyed refusals keep no record: 60 refused requests, no row', async () => {
    const user = await registerUser('idem-refusals');
    const missing = crypto.randomUUID();
    const answers = await Promise.all(
      Array.from({ length: 60 }, (_, i) =>
        i % 2
          ? api('PATCH', `/api/mobile/tasks/${missing}`, { ...keyed(newKey(), user), body: { title: 'x' } })
          : api('POST', '/api/mobile/tasks', { ...keyed(newKey(), user), body: { title: 'x', status: 'bogus' } }),
      ),
    );
    expect(new Set(answers.map((a) => a.status))).toEqual(new Set([404, 422]));
    expect(await keyRows(user)).toBe(0);
  });

  it('a caller keeps at most 1,000 answers: the one past the cap deletes the oldest 100, also under parallel requests', async () => {
    const user = await registerUser('idem-cap');
    /** Keyed task creations, `clients` at a time; their keys. */
    const create = async (n: number, title: string, clients = 10): Promise<string[]> => {
      const keys = Array.from({ length: n }, newKey);
      let next = 0;
      await Promise.all(
        Array.from({ length: clients }, async () => {
          while (next < n) {
            const key = keys[next++]!;
            const res = await api('POST', '/api/mobile/tasks', { ...keyed(key, user), body: { title } });
            expect(res.status).toBe(201);
          }
        }),
      );
      return keys;
    };
    await create(1000, 'filling');
    expect(await keyRows(user)).toBe(1000);
    const newest = await db()`
      select encode(key_hash, 'hex') as k from app.idempotency_keys where user_id = ${user.userId} order by created_at desc limit 899`;

    const [past] = await create(1, 'past the cap', 1);
    expect(await keyRows(user)).toBe(900);
    const kept = await db()`select encode(key_hash, 'hex') as k from app.idempotency_keys where user_id = ${user.userId}`;
    const digest = (key: string) => crypto.createHash('sha256').update(key).digest('hex');
    expect(new Set(kept.map((r) => r.k as string))).toEqual(new Set([...newest.map((r) => r.k as string), digest(past!)]));
    const again = await api('POST', '/api/mobile/tasks', { ...keyed(past!, user), body: { title: 'past the cap' } });
    expect(again.headers.get('idempotent-replayed')).toBe('true');

    // 150 more, 10 at a time: the count never passes the cap.
    await create(150, 'burst');
    const rows = await keyRows(user);
    expect(rows).toBeGreaterThanOrEqual(900);
    expect(rows).toBeLessThanOrEqual(1000);
    const [counted] = await db()`select records from app.idempotency_callers where user_id = ${user.userId}`;
    expect(counted!.records).toBe(rows);
    expect(await taskCount(user, 'burst')).toBe(150);
  });
});

describe('OpenAPI document', () => {
  it('documents the header, 409 and 422 on POST, PATCH and DELETE of the mobile, platform and token interfaces only', async () => {
    const doc = (await api('GET', '/api/docs/openapi.json')).body as {
      paths: Record<string, Record<string, { parameters?: { in: string; name: string }[]; responses: Record<string, { description: string; headers?: Record<string, unknown> }> }>>;
    };
    const keyParam = (path: string, method: string) =>
      doc.paths[path]![method]!.parameters?.some((p) => p.in === 'header' && p.name === 'Idempotency-Key') ?? false;
    for (const [path, method] of [
      ['/api/mobile/tasks', 'post'],
      ['/api/mobile/tasks/{id}', 'patch'],
      ['/api/mobile/tasks/{id}', 'delete'],
      ['/api/v1/platform/events', 'post'],
      ['/api/docs/tokens', 'post'],
      ['/api/docs/tokens/{id}', 'delete'],
      ['/api/mobile/calendar/feed', 'post'],
    ] as const) {
      expect(keyParam(path, method), `${method} ${path}`).toBe(true);
      const responses = doc.paths[path]![method]!.responses;
      expect(responses['409']!.description).toContain('idempotency_key_in_progress');
      expect(responses['422']!.description).toContain('idempotency_key_reused');
      const success = Object.keys(responses).find((s) => Number(s) < 300)!;
      expect(responses[success]!.headers).toHaveProperty('Idempotent-Replayed');
    }
    for (const [path, method] of [
      ['/api/mobile/tasks', 'get'],
      ['/api/auth/login', 'post'],
      ['/api/v1/forms', 'post'],
      ['/api/docs/test', 'post'],
    ] as const) {
      expect(keyParam(path, method), `${method} ${path}`).toBe(false);
    }
  });
});

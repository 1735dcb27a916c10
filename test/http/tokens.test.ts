// API tokens over HTTP: create, list, deactivate; the secret shown once and
// stored only as a hash; tokens as bearer credentials (permission patterns,
// 401 for unknown, inactive and expired, 403 for a path no pattern allows);
// exact usage counting under concurrent use; isolation between users;
// community-scoped tokens (their community's platform endpoints only: every
// other door refused, as the fourth security review tried them); bad input;
// and no secret in the gateway's log.
import crypto from 'node:crypto';
import fs from 'node:fs';
import { describe, expect, it } from 'vitest';
import { api, db, expectErrorShape, logFile, registerUser } from '../helpers.ts';
import { createToken, joinCommunity, SECRET } from '../support/api-tokens.ts';
import { ISO, UUID } from '../support/formats.ts';
import { openStream } from '../support/sse.ts';
import { newCommunity } from '../support/sql-fixtures.ts';

const randomSecret = () => {
  const alphabet = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789';
  return 'cbk_' + Array.from(crypto.randomBytes(40), (b) => alphabet[b % 62]).join('');
};
const tokenRow = async (id: string) => {
  const [row] = await db()`select * from app.api_tokens where id = ${id}`;
  return row!;
};

describe('POST /api/docs/tokens', () => {
  it('creates a token: 201 with the ApiToken and its secret, shown this once', async () => {
    const user = await registerUser('tok');
    const res = await api('POST', '/api/docs/tokens', {
      token: user.accessToken,
      body: { name: 'CI', permissions: ['/api/mobile/*', '/api/docs/tokens'], expires_at: '2099-01-01T00:00:00+02:00' },
    });
    expect(res.status).toBe(201);
    expect(res.body).toEqual({
      token: {
        id: expect.stringMatching(UUID),
        name: 'CI',
        permissions: ['/api/mobile/*', '/api/docs/tokens'],
        community_id: null,
        created_at: expect.stringMatching(ISO),
        expires_at: '2098-12-31T22:00:00.000Z',
        active: true,
        last_used_at: null,
        usage_count: 0,
      },
      token_value: expect.stringMatching(SECRET),
    });
    const secret: string = res.body.token_value;

    // Listed without the secret.
    const list = await api('GET', '/api/docs/tokens', { token: user.accessToken });
    expect(list.status).toBe(200);
    expect(list.body.tokens).toEqual([res.body.token]);
    expect(list.text).not.toContain(secret);
    expect(list.text).not.toContain('token_value');

    // Stored as its SHA-256 only.
    const row = await tokenRow(res.body.token.id);
    expect(Buffer.from(row.token_hash).equals(crypto.createHash('sha256').update(secret).digest())).toBe(true);
    const [all] = await db()`select to_jsonb(t)::text as t from app.api_tokens t where id = ${res.body.token.id}`;
    expect(all!.t).not.toContain(secret);
    expect(all!.t).not.toContain(secret.slice(4));
  });

  it('makes a different random secret every time', async () => {
    const user = await registerUser('tok');
    const secrets = await Promise.all(Array.from({ length: 5 }, () => createToken(user).then((t) => t.secret)));
    expect(new Set(secrets).size).toBe(5);
  });

  it.each([
    ['no body', undefined],
    ['empty object', {}],
    ['missing name', { permissions: ['/*'] }],
    ['empty name', { name: '  ', permissions: ['/*'] }],
    ['missing permissions', { name: 'x' }],
    ['empty permissions', { name: 'x', permissions: [] }],
    ['permission not a path', { name: 'x', permissions: ['api/mobile'] }],
    ['star inside a pattern', { name: 'x', permissions: ['/api/*/profile'] }],
    ['permission with a space', { name: 'x', permissions: ['/api/ mobile'] }],
    ['permissions not an array', { name: 'x', permissions: '/*' }],
    ['permission not a string', { name: 'x', permissions: [42] }],
    ['expires_at not a date', { name: 'x', permissions: ['/*'], expires_at: 'tomorrow' }],
    ['expires_at in the past', { name: 'x', permissions: ['/*'], expires_at: '2001-01-01T00:00:00Z' }],
    ['community_id not a uuid', { name: 'x', permissions: ['/*'], community_id: 'abc' }],
    ['array body', [1, 2]],
  ])('answers 422 with the Error body for %s', async (_name, body) => {
    const user = await registerUser('tok');
    const res = await api('POST', '/api/docs/tokens', { token: user.accessToken, body });
    expect(res.status).toBe(422);
    expectErrorShape(res.body);
  });

  it('answers 400 for malformed JSON and 401 without a credential', async () => {
    const user = await registerUser('tok');
    const bad = await api('POST', '/api/docs/tokens', { token: user.accessToken, rawBody: '{"name": ' });
    expect(bad.status).toBe(400);
    expectErrorShape(bad.body);
    const anonymous = await api('POST', '/api/docs/tokens', { body: { name: 'x', permissions: ['/*'] } });
    expect(anonymous.status).toBe(401);
    expectErrorShape(anonymous.body);
    expect((await api('GET', '/api/docs/tokens')).status).toBe(401);
    expect((await api('DELETE', `/api/docs/tokens/${crypto.randomUUID()}`)).status).toBe(401);
  });

  it('an API token cannot create tokens (a leaked token cannot widen its reach): 403', async () => {
    const user = await registerUser('tok');
    const { secret } = await createToken(user, { permissions: ['/api/docs/*'] });
    const res = await api('POST', '/api/docs/tokens', { token: secret, body: { name: 'child', permissions: ['/*'] } });
    expect(res.status).toBe(403);
    expectErrorShape(res.body);
    // Listing with a token is fine.
    expect((await api('GET', '/api/docs/tokens', { token: secret })).status).toBe(200);
  });
});

describe('community-scoped tokens', () => {
  it('a manager of the community creates one; anyone else gets 403', async () => {
    const manager = await registerUser('mgr');
    const member = await registerUser('member');
    const stranger = await registerUser('stranger');
    const community = await newCommunity({ manager: manager });
    await joinCommunity(member, community);

    const created = await createToken(manager, { community_id: community });
    expect(created.token.community_id).toBe(community);

    for (const user of [member, stranger]) {
      const res = await api('POST', '/api/docs/tokens', {
        token: user.accessToken,
        body: { name: 'x', permissions: ['/*'], community_id: community },
      });
      expect(res.status).toBe(403);
      expectErrorShape(res.body);
      expect(res.body.error).toBe('not_community_manager');
    }
    const unknown = await api('POST', '/api/docs/tokens', {
      token: manager.accessToken,
      body: { name: 'x', permissions: ['/*'], community_id: crypto.randomUUID() },
    });
    expect(unknown.status).toBe(403);
    const [count] = await db()`select count(*)::int as n from app.api_tokens where community_id = ${community}`;
    expect(count!.n).toBe(1);
  });
});

describe("a community-scoped token reaches its community's platform endpoints only (security review round 4)", () => {
  /** Bravo's manager, who is also a member of Alpha, with a token scoped to Bravo that has every permission. */
  async function scopedToBravo() {
    const owner = await registerUser('scope-owner');
    const bravo = await newCommunity({ manager: owner });
    const alpha = await newCommunity({ manager: owner });
    const joinable = await newCommunity();
    const scoped = await createToken(owner, { community_id: bravo, permissions: ['*'] });
    return { owner, bravo, alpha, joinable, scoped };
  }
  const refusedAsOutOfScope = (res: { status: number; body: any; text: string }, what: string) => {
    expect(res.status, what).toBe(403);
    expect(res.text, what).toMatch(/community_scope_violation|scoped to a community/);
  };

  it("the owner's profile (with the e-mail), tasks, deals, connections, hats and tokens: 403 community_scope_violation", async () => {
    const { owner, scoped } = await scopedToBravo();
    for (const path of [
      '/api/mobile/profile',
      '/api/mobile/tasks',
      '/api/mobile/deals',
      '/api/mobile/connections',
      '/api/mobile/hats',
      '/api/mobile/checkins',
      '/api/mobile/events/upcoming',
      '/api/docs/tokens',
    ]) {
      const res = await api('GET', path, { token: scoped.secret });
      refusedAsOutOfScope(res, path);
      expect(res.text, path).not.toContain(owner.email);
    }
    // Also spelled in another case (the routing ignores case).
    refusedAsOutOfScope(await api('GET', '/API/Mobile/PROFILE', { token: scoped.secret, noContract: true }), 'upper case');
    // The Error body where the route has it.
    const profile = await api('GET', '/api/mobile/profile', { token: scoped.secret });
    expect(profile.body).toMatchObject({ error: 'community_scope_violation' });
    // Writes: a task, a hat.
    refusedAsOutOfScope(await api('POST', '/api/mobile/tasks', { token: scoped.secret, body: { title: 'as the owner' } }), 'task');
    refusedAsOutOfScope(await api('POST', '/api/mobile/hats', { token: scoped.secret, body: { hat: { name: 'h', hat_type: 'social' } } }), 'hat');
    const [made] = await db()`select (select count(*) from app.tasks where created_by = ${owner.userId})::int as tasks,
                                     (select count(*) from app.hats where user_id = ${owner.userId})::int as hats`;
    expect(made).toEqual({ tasks: 0, hats: 0 });
  });

  it('no calendar feed, no event stream (header or ?access_token=), no joining another community', async () => {
    const { owner, alpha, joinable, scoped } = await scopedToBravo();
    refusedAsOutOfScope(await api('POST', '/api/mobile/calendar/feed', { token: scoped.secret }), 'calendar feed');
    const [feeds] = await db()`select count(*)::int as n from app.calendar_feeds where user_id = ${owner.userId}`;
    expect(feeds!.n).toBe(0);

    for (const s of [await openStream({ token: scoped.secret }), await openStream({ query: `?access_token=${scoped.secret}` })]) {
      expect(s.status).toBe(403);
      expect(s.body).toMatchObject({ error: 'community_scope_violation' });
      s.close();
    }
    const [streams] = await db()`select count(*)::int as n from app.event_streams where user_id = ${owner.userId}`;
    expect(streams!.n).toBe(0);

    for (const community of [joinable, alpha]) {
      const join = await api('POST', `/api/mobile/communities/${community}/join`, { token: scoped.secret });
      refusedAsOutOfScope(join, 'join');
    }
    const [joined] = await db()`
      select count(*)::int as n from app.community_members m join app.profiles p on p.node_id = m.member_node_id
       where p.id = ${owner.userId} and m.community_id = ${joinable}`;
    expect(joined!.n).toBe(0);
    expect((await api('POST', `/api/mobile/communities/${alpha}/leave`, { token: scoped.secret })).status).toBe(403);
  });

  it("its own community's platform endpoints work; another community's are 403 community_scope_violation; every use is counted", async () => {
    const { owner, bravo, alpha, scoped } = await scopedToBravo();
    const event = (community: string) => ({
      community_id: community,
      external_platform: 'platform_a',
      external_id: `scope-${crypto.randomBytes(6).toString('hex')}`,
      title: 'Pushed',
      description: '',
      date: new Date(Date.now() + 86_400_000).toISOString(),
    });
    expect((await api('POST', '/api/v1/platform/events', { token: scoped.secret, body: event(bravo) })).status).toBe(201);
    expect((await api('GET', `/api/v1/platform/webhooks?community_id=${bravo}`, { token: scoped.secret })).status).toBe(200);
    const elsewhere = await api('POST', '/api/v1/platform/events', { token: scoped.secret, body: event(alpha) });
    expect(elsewhere.status).toBe(403);
    expect(elsewhere.body.error).toBe('community_scope_violation');
    const hooks = await api('GET', `/api/v1/platform/webhooks?community_id=${alpha}`, { token: scoped.secret });
    expect(hooks.body.error).toBe('community_scope_violation');
    // The owner's own credentials are untouched.
    expect((await api('GET', '/api/mobile/profile', { token: owner.accessToken })).body.data.email).toBe(owner.email);
    const personal = await createToken(owner, { permissions: ['*'] });
    expect((await api('GET', '/api/mobile/profile', { token: personal.secret })).status).toBe(200);
    // Refused uses count, like every use.
    const before = Number((await tokenRow(scoped.id)).usage_count);
    await api('GET', '/api/mobile/profile', { token: scoped.secret });
    expect(Number((await tokenRow(scoped.id)).usage_count)).toBe(before + 1);
  });
});

describe('tokens as bearer credentials', () => {
  it('acts as its owner on a path its permissions allow', async () => {
    const user = await registerUser('bearer');
    const { secret } = await createToken(user, { permissions: ['/api/mobile/*'] });
    const res = await api('GET', '/api/mobile/profile', { token: secret });
    expect(res.status).toBe(200);
    expect(res.body.data.id).toBe(user.userId);
  });

  it('matches patterns exactly or by prefix ending in *; any other path is 403', async () => {
    const user = await registerUser('bearer');
    const exact = await createToken(user, { permissions: ['/api/mobile/profile'] });
    const prefix = await createToken(user, { permissions: ['/api/mobile/ha*'] });
    const everything = await createToken(user, { permissions: ['*'] });
    const cases: [string, string, number][] = [
      [exact.secret, '/api/mobile/profile', 200],
      [exact.secret, '/api/mobile/hats', 403],
      [exact.secret, '/api/mobile/profile/', 403], // exact means exact
      [prefix.secret, '/api/mobile/hats', 200],
      [prefix.secret, '/api/mobile/hat_types', 200],
      [prefix.secret, '/api/mobile/profile', 403],
      [everything.secret, '/api/mobile/communities', 200],
    ];
    for (const [secret, path, status] of cases) {
      const res = await api('GET', path, { token: secret });
      expect(res.status, `${path} → ${res.text}`).toBe(status);
      if (status === 403) {
        expectErrorShape(res.body);
        expect(res.body.error).toBe('forbidden');
      }
    }
  });

  it('unknown, malformed, inactive and expired tokens are 401 (invalid_token)', async () => {
    const user = await registerUser('bearer');
    const inactive = await createToken(user);
    const expired = await createToken(user);
    const del = await api('DELETE', `/api/docs/tokens/${inactive.id}`, { token: user.accessToken });
    expect(del.status).toBe(200);
    await db()`update app.api_tokens set expires_at = now() - interval '1 second' where id = ${expired.id}`;

    for (const secret of [randomSecret(), 'cbk_short', 'cbk_' + 'x'.repeat(39) + '!', inactive.secret, expired.secret]) {
      const res = await api('GET', '/api/mobile/profile', { token: secret });
      expect(res.status).toBe(401);
      expectErrorShape(res.body);
      expect(res.body.error).toBe('invalid_token');
      expect(res.text).not.toContain(secret);
      expect(res.headers.get('www-authenticate')).toBe('Bearer');
    }
    expect((await tokenRow(inactive.id)).usage_count).toBe('0');
  });

  it('a token of a given expiry works until then', async () => {
    const user = await registerUser('bearer');
    const soon = await createToken(user, { expires_at: new Date(Date.now() + 60_000).toISOString() });
    expect((await api('GET', '/api/mobile/profile', { token: soon.secret })).status).toBe(200);
  });

  it('every use counts, a refused path and a failing request included; 50 concurrent uses add exactly 50', async () => {
    const user = await registerUser('count');
    const { id, secret } = await createToken(user, { permissions: ['/api/mobile/profile', '/api/mobile/events/*'] });

    const missing = await api('GET', `/api/mobile/events/${crypto.randomUUID()}`, { token: secret });
    expect(missing.status).toBe(404);
    expect((await api('GET', '/api/mobile/hats', { token: secret })).status).toBe(403);
    let row = await tokenRow(id);
    expect(Number(row.usage_count)).toBe(2);
    const firstUse = row.last_used_at as Date;
    expect(firstUse).toBeInstanceOf(Date);

    const results = await Promise.all(Array.from({ length: 50 }, () => api('GET', '/api/mobile/profile', { token: secret })));
    expect(results.map((r) => r.status)).toEqual(Array(50).fill(200));
    row = await tokenRow(id);
    expect(Number(row.usage_count)).toBe(52);
    expect((row.last_used_at as Date).getTime()).toBeGreaterThanOrEqual(firstUse.getTime());

    const listed = await api('GET', '/api/docs/tokens', { token: user.accessToken });
    expect(listed.body.tokens[0]).toMatchObject({ id, usage_count: 52, last_used_at: expect.stringMatching(ISO) });
  });
});

describe('GET and DELETE /api/docs/tokens across users', () => {
  it("another user's token is invisible and cannot be deactivated (404, as unknown)", async () => {
    const alice = await registerUser('alice');
    const bob = await registerUser('bob');
    const aliceToken = await createToken(alice, { name: 'alice token' });
    await createToken(bob, { name: 'bob token' });

    const bobList = await api('GET', '/api/docs/tokens', { token: bob.accessToken });
    expect(bobList.body.tokens.map((t: { name: string }) => t.name)).toEqual(['bob token']);

    const steal = await api('DELETE', `/api/docs/tokens/${aliceToken.id}`, { token: bob.accessToken });
    expect(steal.status).toBe(404);
    expectErrorShape(steal.body);
    const unknown = await api('DELETE', `/api/docs/tokens/${crypto.randomUUID()}`, { token: bob.accessToken });
    expect(unknown.status).toBe(404);
    expect(unknown.body).toEqual({ ...steal.body });
    expect((await api('DELETE', '/api/docs/tokens/not-a-uuid', { token: bob.accessToken })).status).toBe(404);

    expect((await tokenRow(aliceToken.id)).active).toBe(true);
    expect((await api('GET', '/api/mobile/profile', { token: aliceToken.secret })).status).toBe(200);
  });

  it('DELETE deactivates (idempotent): the token stays listed, inactive, and stops working', async () => {
    const user = await registerUser('del');
    const { id, secret } = await createToken(user);
    const first = await api('DELETE', `/api/docs/tokens/${id}`, { token: user.accessToken });
    expect(first.status).toBe(200);
    expect(first.body).toMatchObject({ success: true, token: { id, active: false } });
    expect(first.text).not.toContain(secret);
    const again = await api('DELETE', `/api/docs/tokens/${id}`, { token: user.accessToken });
    expect(again.status).toBe(200);
    const list = await api('GET', '/api/docs/tokens', { token: user.accessToken });
    expect(list.body.tokens).toEqual([expect.objectContaining({ id, active: false })]);
    expect((await api('GET', '/api/mobile/profile', { token: secret })).status).toBe(401);
  });

  it('a token may deactivate itself', async () => {
    const user = await registerUser('del');
    const { id, secret } = await createToken(user, { permissions: ['/api/docs/tokens*'] });
    expect((await api('DELETE', `/api/docs/tokens/${id}`, { token: secret })).status).toBe(200);
    expect((await api('GET', '/api/docs/tokens', { token: secret })).status).toBe(401);
  });
});

describe('logging', () => {
  it('never writes a token secret to the log', async () => {
    const user = await registerUser('toklog');
    const { secret } = await createToken(user, { permissions: ['/api/mobile/profile'] });
    await api('GET', '/api/mobile/profile', { token: secret });
    await api('GET', '/api/mobile/hats', { token: secret }); // 403
    await api('GET', '/api/docs/tokens', { token: user.accessToken });
    const { id: goneId, secret: gone } = await createToken(user);
    await api('DELETE', `/api/docs/tokens/${goneId}`, { token: user.accessToken });
    await api('GET', '/api/mobile/profile', { token: gone }); // 401
    const logs = fs.readFileSync(logFile, 'utf8');
    expect(logs).toContain(user.userId);
    for (const s of [secret, gone]) {
      expect(logs).not.toContain(s);
      expect(logs).not.toContain(s.slice(4));
    }
  });
});

// SQL-level tests of the API token rules: pattern syntax and matching,
// the secret's format and hash, authentication (unknown, inactive, expired,
// the usage counter under concurrent use), row-level security between users,
// community-scoped creation, and that a token cannot mint tokens.
import crypto from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { withClaims } from '../../gateway/core/db.ts';
import { asAnon, asUser, db } from '../helpers.ts';
import { newUser } from '../support/sql-fixtures.ts';
import { sqlState } from '../support/sql-state.ts';

const create = (userId: string, permissions: string[] = ['/*'], communityId: string | null = null, expiresAt: string | null = null) =>
  asUser(userId, (tx) => tx<{ token: Record<string, any>; token_value: string }[]>`
    select * from api.api_token_create('t', ${permissions}, ${expiresAt}, ${communityId})`).then((rows) => rows[0]!);

const authenticate = (secret: string, path: string) =>
  asAnon((tx) => tx`select * from api.api_token_authenticate(${secret}, ${path})`).then((rows) => rows[0]!);

describe('permission patterns', () => {
  it.each([
    [['/api/mobile/profile'], '/api/mobile/profile', true],
    [['/api/mobile/profile'], '/api/mobile/profile/', false],
    [['/api/mobile/profile'], '/api/mobile/profiles', false],
    [['/api/mobile/*'], '/api/mobile/profile', true],
    [['/api/mobile/*'], '/api/mobile/', true],
    [['/api/mobile/*'], '/api/mobile', false],
    [['/api/mobile*'], '/api/mobile', true],
    [['/api/mob*'], '/api/mobile/tasks/1', true],
    [['/api/docs/*', '/api/mobile/hats'], '/api/mobile/hats', true],
    [['/api/docs/*', '/api/mobile/hats'], '/api/mobile/hat_types', false],
    [['*'], '/anything', true],
    [['/*'], '/api/mobile/profile', true],
    [['/api/%'], '/api/mobile', false], // no LIKE wildcards
    [['/api/_obile'], '/api/mobile', false],
  ])('%j allows %s: %s', async (patterns, path, allowed) => {
    const [row] = await db()`select private.api_token_path_allowed(${patterns}, ${path}) as ok`;
    expect(row!.ok).toBe(allowed);
  });

  it('a null path matches nothing', async () => {
    const [row] = await db()`select private.api_token_path_allowed(array['*'], null) as ok`;
    expect(row!.ok).toBe(false);
  });

  it.each([
    ['*', true],
    ['/', true],
    ['/api/mobile/*', true],
    ['/api/mobile/profile', true],
    ['api/mobile', false],
    ['/api/*/x', false],
    ['/api/**', false],
    ['/api mobile', false],
    ['', false],
    ['/' + 'a'.repeat(500), false],
  ])('pattern %j is valid: %s', async (pattern, valid) => {
    const [row] = await db()`select private.api_token_pattern_valid(${pattern}) as ok`;
    expect(row!.ok).toBe(valid);
  });
});

describe('api.api_token_create', () => {
  it('returns the secret once (cbk_ + 40 base62) and stores only its SHA-256', async () => {
    const user = await newUser({ prefix: 'toksql' });
    const created = await create(user.id);
    expect(created.token_value).toMatch(/^cbk_[A-Za-z0-9]{40}$/);
    const [row] = await db()`select token_hash, to_jsonb(t)::text as everything from app.api_tokens t where id = ${created.token.id}`;
    expect(Buffer.from(row!.token_hash).equals(crypto.createHash('sha256').update(created.token_value).digest())).toBe(true);
    expect(row!.everything).not.toContain(created.token_value.slice(4));
    expect(JSON.stringify(created.token)).not.toContain(created.token_value);
  });

  it('secrets use the whole base62 alphabet', async () => {
    const [row] = await db()`select string_agg(private.new_api_token_secret(), '') as s from generate_series(1, 200)`;
    const chars = new Set((row!.s as string).replaceAll('cbk_', ''));
    expect(chars.size).toBe(62);
  });

  it('rejects invalid input with PT422, a non-manager community scope with PT403, and an API token caller with PT403', async () => {
    const user = await newUser({ prefix: 'toksql' });
    expect(await sqlState(create(user.id, []))).toBe('PT422');
    expect(await sqlState(create(user.id, ['no-slash']))).toBe('PT422');
    expect(await sqlState(create(user.id, ['/*'], null, '2000-01-01T00:00:00Z'))).toBe('PT422');
    expect(await sqlState(create(user.id, ['/*'], crypto.randomUUID()))).toBe('PT403');

    const [community] = await db()`select admin.create_community('tok sql', null, '{}', ${user.email}) as id`;
    const scoped = await create(user.id, ['/*'], community!.id);
    expect(scoped.token.community_id).toBe(community!.id);

    const viaToken = withClaims(db(), { role: 'authenticated', sub: user.id, token_id: scoped.token.id, token_community_id: null }, (tx) =>
      tx`select * from api.api_token_create('x', array['/*'], null, null)`,
    );
    expect(await sqlState(viaToken)).toBe('PT403');
  });

  it('rejects a malformed pattern written directly to the table (trigger)', async () => {
    const user = await newUser({ prefix: 'toksql' });
    const direct = db()`insert into app.api_tokens (user_id, name, permissions, token_hash)
                        values (${user.id}, 'x', array['nope'], extensions.digest('x', 'sha256'))`;
    expect(await sqlState(direct)).toBe('PT422');
  });
});

describe('api.api_token_authenticate', () => {
  it('returns the owner, scope and path verdict, and counts the use', async () => {
    const user = await newUser({ prefix: 'toksql' });
    const created = await create(user.id, ['/api/mobile/*']);
    const allowed = await authenticate(created.token_value, '/api/mobile/profile');
    expect(allowed).toEqual({ token_id: created.token.id, user_id: user.id, community_id: null, path_allowed: true, expires_at: null, refusal: null });
    const refused = await authenticate(created.token_value, '/api/docs/tokens');
    expect(refused).toMatchObject({ path_allowed: false, refusal: 'forbidden' });
    const [row] = await db()`select usage_count, last_used_at from app.api_tokens where id = ${created.token.id}`;
    expect(Number(row!.usage_count)).toBe(2);
    expect(row!.last_used_at).toBeInstanceOf(Date);
  });

  it('unknown, inactive and expired tokens raise PT401 and count nothing', async () => {
    const user = await newUser({ prefix: 'toksql' });
    const inactive = await create(user.id);
    const expired = await create(user.id);
    await db()`update app.api_tokens set active = false where id = ${inactive.token.id}`;
    await db()`update app.api_tokens set expires_at = now() - interval '1 ms' where id = ${expired.token.id}`;
    for (const secret of ['cbk_' + 'A'.repeat(40), inactive.token_value, expired.token_value, '']) {
      expect(await sqlState(authenticate(secret, '/api/mobile/profile'))).toBe('PT401');
    }
    const rows = await db()`select usage_count from app.api_tokens where id in (${inactive.token.id}, ${expired.token.id})`;
    expect(rows.map((r) => Number(r.usage_count))).toEqual([0, 0]);
  });

  it('50 concurrent authentications add exactly 50', async () => {
    const user = await newUser({ prefix: 'toksql' });
    const created = await create(user.id);
    await Promise.all(Array.from({ length: 50 }, () => authenticate(created.token_value, '/x')));
    const [row] = await db()`select usage_count from app.api_tokens where id = ${created.token.id}`;
    expect(Number(row!.usage_count)).toBe(50);
  });
});

describe('row-level security and deactivation', () => {
  it("a user reads and deactivates only their own tokens; nobody reads a hash", async () => {
    const alice = await newUser({ prefix: 'toksql' });
    const bob = await newUser({ prefix: 'toksql' });
    const aliceToken = await create(alice.id);
    await create(bob.id);

    const bobSees = await asUser(bob.id, (tx) => tx`select id, user_id from app.api_tokens`);
    expect(bobSees.map((r) => r.user_id)).toEqual([bob.id]);
    const bobLists = await asUser(bob.id, (tx) => tx`select t from api.api_tokens_list() t`);
    expect(bobLists).toHaveLength(1);

    expect(await sqlState(asUser(bob.id, (tx) => tx`select api.api_token_deactivate(${aliceToken.token.id})`))).toBe('PT404');
    const sneaky = await asUser(bob.id, (tx) => tx`update app.api_tokens set active = false where id = ${aliceToken.token.id} returning id`);
    expect(sneaky).toHaveLength(0);
    expect(await sqlState(asUser(alice.id, (tx) => tx`select token_hash from app.api_tokens`))).toBe('42501');

    const [done] = await asUser(alice.id, (tx) => tx`select api.api_token_deactivate(${aliceToken.token.id}) as t`);
    expect(done!.t).toMatchObject({ id: aliceToken.token.id, active: false });
  });
});

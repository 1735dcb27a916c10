// Profile and hats over HTTP: the profile and hat shapes, the hat limit (also
// under 10 parallel creates), the primary hat, row-level security between two
// users, and bad input answered with 422, never 500.
import { describe, expect, it } from 'vitest';
import { api, db, expectErrorShape, registerUser } from '../helpers.ts';

const ISO = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?Z$/;

const createHat = (token: string, hat: unknown) => api('POST', '/api/mobile/hats', { token, body: { hat } });

describe('GET /api/mobile/profile', () => {
  it('returns the UserProfile of the caller', async () => {
    const user = await registerUser('profile');
    const res = await api('GET', '/api/mobile/profile', { token: user.accessToken });
    expect(res.status).toBe(200);
    expect(res.body).toEqual({
      success: true,
      data: {
        id: user.userId,
        email: user.email,
        name: user.email.split('@')[0],
        is_premium: false,
        subscription_type: 'basic',
        max_hats: 3,
        node_id: expect.stringMatching(/^[0-9a-f-]{36}$/),
        created_at: expect.stringMatching(ISO),
        updated_at: expect.stringMatching(ISO),
        avatar_url: null,
      },
    });
  });

  it('reflects a premium subscription set by an operator', async () => {
    const user = await registerUser('premium');
    await db()`select admin.set_subscription(${user.email}, 'premium')`;
    const res = await api('GET', '/api/mobile/profile', { token: user.accessToken });
    expect(res.body.data).toMatchObject({ is_premium: true, subscription_type: 'premium', max_hats: 10 });
  });

  it('answers 404 with the flagged body when the profile record is missing', async () => {
    const user = await registerUser('noprofile');
    await db()`delete from app.profiles where id = ${user.userId}`;
    const res = await api('GET', '/api/mobile/profile', { token: user.accessToken });
    expect(res.status).toBe(404);
    expect(res.body).toEqual({ success: false, error: expect.any(String) });
  });
});

describe('hats', () => {
  it('creates hats: 201 with the Hat; the first is primary, later ones are not', async () => {
    const user = await registerUser('hats');
    const first = await createHat(user.accessToken, { name: 'At work', hat_type: 'professional', description: 'CTO' });
    expect(first.status).toBe(201);
    expect(first.body).toEqual({
      success: true,
      data: {
        id: expect.stringMatching(/^[0-9a-f-]{36}$/),
        name: 'At work',
        hat_type: 'professional',
        description: 'CTO',
        is_primary: true,
        created_at: expect.stringMatching(ISO),
      },
    });
    const second = await createHat(user.accessToken, { name: 'Weekends', hat_type: 'social' });
    expect(second.status).toBe(201);
    expect(second.body.data).toMatchObject({ is_primary: false, description: null });

    const list = await api('GET', '/api/mobile/hats', { token: user.accessToken });
    expect(list.status).toBe(200);
    expect(list.body.success).toBe(true);
    expect(list.body.data.map((h: { name: string }) => h.name)).toEqual(['At work', 'Weekends']);
  });

  it('enforces max_hats: a basic user gets 3, the 4th is 422', async () => {
    const user = await registerUser('limit');
    for (const name of ['a', 'b', 'c']) {
      expect((await createHat(user.accessToken, { name, hat_type: 'social' })).status).toBe(201);
    }
    const fourth = await createHat(user.accessToken, { name: 'd', hat_type: 'social' });
    expect(fourth.status).toBe(422);
    expectErrorShape(fourth.body);
    expect(fourth.body.error).toBe('hat_limit_reached');
  });

  it('a premium user may have 10', async () => {
    const user = await registerUser('limit10');
    await db()`select admin.set_subscription(${user.email}, 'premium')`;
    const statuses = [];
    for (let i = 0; i < 11; i++) statuses.push((await createHat(user.accessToken, { name: `hat ${i}`, hat_type: 'mentor' })).status);
    expect(statuses).toEqual([...Array(10).fill(201), 422]);
  });

  it('10 parallel creates for a basic user: exactly 3 succeed, exactly one is primary', async () => {
    const user = await registerUser('race');
    const results = await Promise.all(
      Array.from({ length: 10 }, (_, i) => createHat(user.accessToken, { name: `parallel ${i}`, hat_type: 'founder' })),
    );
    const statuses = results.map((r) => r.status);
    expect(statuses.filter((s) => s === 201)).toHaveLength(3);
    expect(statuses.filter((s) => s === 422)).toHaveLength(7);
    const [row] = await db()`
      select count(*)::int as hats, count(*) filter (where is_primary)::int as primaries
      from app.hats where user_id = ${user.userId}`;
    expect(row).toEqual({ hats: 3, primaries: 1 });
  });

  it('row-level security: a user sees only their own hats', async () => {
    const alice = await registerUser('alice');
    const bob = await registerUser('bob');
    await createHat(alice.accessToken, { name: 'Alice hat', hat_type: 'investor' });
    await createHat(bob.accessToken, { name: 'Bob hat', hat_type: 'volunteer' });
    const aliceHats = await api('GET', '/api/mobile/hats', { token: alice.accessToken });
    const bobHats = await api('GET', '/api/mobile/hats', { token: bob.accessToken });
    expect(aliceHats.body.data.map((h: { name: string }) => h.name)).toEqual(['Alice hat']);
    expect(bobHats.body.data.map((h: { name: string }) => h.name)).toEqual(['Bob hat']);
    const bobProfile = await api('GET', '/api/mobile/profile', { token: bob.accessToken });
    expect(bobProfile.body.data.id).toBe(bob.userId);
  });

  it.each([
    ['no body', undefined],
    ['no hat', {}],
    ['hat not an object', { hat: 'x' }],
    ['missing name', { hat: { hat_type: 'social' } }],
    ['empty name', { hat: { name: '   ', hat_type: 'social' } }],
    ['name too long', { hat: { name: 'x'.repeat(101), hat_type: 'social' } }],
    ['missing hat_type', { hat: { name: 'x' } }],
    ['hat_type not a string', { hat: { name: 'x', hat_type: 7 } }],
    ['unknown hat_type', { hat: { name: 'x', hat_type: 'wizard' } }],
    ['description not a string', { hat: { name: 'x', hat_type: 'social', description: 5 } }],
  ])('POST /api/mobile/hats answers 422 with the Error body for %s', async (_name, body) => {
    const user = await registerUser('bad');
    const res = await api('POST', '/api/mobile/hats', { token: user.accessToken, body });
    expect(res.status).toBe(422);
    expectErrorShape(res.body);
  });

  it('malformed JSON on POST /api/mobile/hats is 400', async () => {
    const user = await registerUser('badjson');
    const res = await api('POST', '/api/mobile/hats', { token: user.accessToken, rawBody: '{"hat":' });
    expect(res.status).toBe(400);
    expectErrorShape(res.body);
  });
});

describe('GET /api/mobile/hat_types', () => {
  it('lists the seeded types as objects with id, name and description', async () => {
    const user = await registerUser('types');
    const res = await api('GET', '/api/mobile/hat_types', { token: user.accessToken });
    expect(res.status).toBe(200);
    expect(res.body.success).toBe(true);
    const ids = res.body.data.map((t: { id: string }) => t.id);
    expect(ids).toEqual(expect.arrayContaining(['professional', 'social', 'founder', 'investor', 'mentor', 'volunteer']));
    for (const t of res.body.data) expect(t).toEqual({ id: expect.any(String), name: expect.any(String), description: expect.any(String) });
  });
});

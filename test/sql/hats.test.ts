// SQL-level tests of the hat rules: the limit trigger holds for any insert
// path, the first hat is primary, and row-level security isolates users.
import { describe, expect, it } from 'vitest';
import { asUser, db } from '../helpers.ts';
import { newUser } from '../support/sql-fixtures.ts';

describe('hat limit trigger', () => {
  it('holds even for inserts that bypass the API (as the table owner)', async () => {
    const user = await newUser({ prefix: 'hatsql' });
    for (let i = 0; i < 3; i++) {
      await db()`insert into app.hats (user_id, name, hat_type) values (${user.id}, ${'h' + i}, 'social')`;
    }
    await expect(db()`insert into app.hats (user_id, name, hat_type) values (${user.id}, 'h4', 'social')`).rejects.toMatchObject({
      code: 'PT422',
      hint: 'hat_limit_reached',
    });
  });

  it('follows the plan: raising basic.max_hats in subscription_plans raises the limit', async () => {
    const user = await newUser({ prefix: 'hatsql' });
    const rollback = new Error('rollback');
    await expect(
      db().begin(async (tx) => {
        await tx`update app.subscription_plans set max_hats = 4 where id = 'basic'`;
        for (let i = 0; i < 4; i++) await tx`insert into app.hats (user_id, name, hat_type) values (${user.id}, ${'h' + i}, 'social')`;
        await expect(tx`insert into app.hats (user_id, name, hat_type) values (${user.id}, 'h5', 'social')`).rejects.toMatchObject({ code: 'PT422' });
        throw rollback;
      }),
    ).rejects.toBe(rollback);
    const [plan] = await db()`select max_hats from app.subscription_plans where id = 'basic'`;
    expect(plan!.max_hats).toBe(3);
  });

  it('makes only the first hat primary, whatever the insert says', async () => {
    const user = await newUser({ prefix: 'hatsql' });
    await db()`insert into app.hats (user_id, name, hat_type, is_primary) values (${user.id}, 'one', 'social', false)`;
    await db()`insert into app.hats (user_id, name, hat_type, is_primary) values (${user.id}, 'two', 'social', true)`;
    const rows = await db()`select name, is_primary from app.hats where user_id = ${user.id} order by created_at, name`;
    expect(rows).toEqual([{ name: 'one', is_primary: true }, { name: 'two', is_primary: false }]);
  });
});

describe('row-level security on hats and profiles', () => {
  it('a user reads only their own rows, whatever the query asks for', async () => {
    const alice = await newUser({ prefix: 'hatsql' });
    const bob = await newUser({ prefix: 'hatsql' });
    await asUser(alice.id, (tx) => tx`select * from api.hat_create('alice hat', 'social')`);
    await asUser(bob.id, (tx) => tx`select * from api.hat_create('bob hat', 'social')`);
    const seen = await asUser(alice.id, (tx) => tx`select name from app.hats where user_id in (${alice.id}, ${bob.id})`);
    expect(seen.map((r) => r.name)).toEqual(['alice hat']);
    const profiles = await asUser(alice.id, (tx) => tx`select id from app.profiles where id in (${alice.id}, ${bob.id})`);
    expect(profiles.map((r) => r.id)).toEqual([alice.id]);
  });

  it('a user cannot create a hat for someone else', async () => {
    const alice = await newUser({ prefix: 'hatsql' });
    const bob = await newUser({ prefix: 'hatsql' });
    await expect(
      asUser(alice.id, (tx) => tx`insert into app.hats (user_id, name, hat_type) values (${bob.id}, 'sneaky', 'social')`),
    ).rejects.toMatchObject({ code: '42501' });
  });

  it('api.hat_create rejects an unknown hat type with PT422', async () => {
    const user = await newUser({ prefix: 'hatsql' });
    await expect(asUser(user.id, (tx) => tx`select * from api.hat_create('x', 'wizard')`)).rejects.toMatchObject({
      code: 'PT422',
      hint: 'unknown_hat_type',
    });
  });
});

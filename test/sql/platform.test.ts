// The platform rules that need several connections or the process (the rest
// are pgTAP: supabase/tests/platform.test.sql): identical event creations at
// once make one event, and an account made without a password cannot sign
// in (the password is compared in the process).
import { describe, expect, it } from 'vitest';
import { asUser, db, sqlSignIn, uniqueEmail } from '../helpers.ts';
import { newCommunity, newUser } from '../support/sql-fixtures.ts';
import { sqlState } from '../support/sql-state.ts';

describe('api.platform_event_create', () => {
  it('20 concurrent identical calls make one event; one reports created', async () => {
    const manager = await newUser({ prefix: 'platsql' });
    const community = await newCommunity({ manager: manager });
    const externalId = `sql-${crypto.randomUUID()}`;
    const results = await Promise.all(
      Array.from({ length: 20 }, () =>
        asUser(manager.id, (tx) => tx`
          select api.platform_event_create(${community}, 'platform_c', ${externalId}, 'Race', '', now() + interval '1 day',
                                           null, 'https://c.example/1', null, null, null, null, null) as r`).then((rows) => rows[0]!.r),
      ),
    );
    expect(results.filter((r) => r.created)).toHaveLength(1);
    expect(new Set(results.map((r) => r.event_id)).size).toBe(1);
    const [row] = await db()`select count(*)::int as n, max(platform_c_url) as url from app.events where external_id = ${externalId}`;
    expect(row).toEqual({ n: 1, url: 'https://c.example/1' });
  });
});

describe('accounts without a password', () => {
  it('private.create_account(email, null, name) makes user, profile and node with no password; the name defaults to the local part', async () => {
    const email = uniqueEmail('nopw');
    const [row] = await db()`select private.create_account(${email}, null, null) as id`;
    const [user] = await db()`
      select u.password_hash, p.name, p.node_id from identity.users u join app.profiles p on p.id = u.id where u.id = ${row!.id}`;
    expect(user!.password_hash).toBeNull();
    expect(user!.name).toBe(email.split('@')[0]);
    expect(user!.node_id).toBeTruthy();
    const [login] = await db()`select count(*)::int as n from identity.users where email = ${email} and password_hash is not null`;
    expect(login!.n).toBe(0);
    expect((await sqlSignIn(email, '')).status).toBe('invalid');
    expect(await sqlState(db()`select private.create_account(${uniqueEmail()}, 'short', null)`)).toBe('PT400');
  });
});

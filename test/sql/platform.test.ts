// SQL-level tests of the platform rules: who may act for a community
// (private.platform_authorize), venue matching, idempotent event creation
// under concurrency, accounts without a password, check-ins for a given user
// (and that request roles still check in only themselves), and forms.
import crypto from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { withClaims, type RequestClaims } from '../../gateway/core/db.ts';
import { asAnon, asUser, db, sqlSignIn, uniqueEmail } from '../helpers.ts';
import { newCommunity, newUser } from '../support/sql-fixtures.ts';
import { sqlState } from '../support/sql-state.ts';

const claimsFor = (userId: string, tokenCommunity: string | null = null, tokenId: string | null = null): RequestClaims => ({
  role: 'authenticated',
  sub: userId,
  ...(tokenId ? { token_id: tokenId, token_community_id: tokenCommunity } : {}),
});
const authorize = (claims: RequestClaims, community: string) =>
  withClaims(db(), claims, (tx) => tx`select private.platform_authorize(${community})`);

describe('private.platform_authorize', () => {
  it('admits a manager (access token or personal token) and a community token of that community only', async () => {
    const manager = await newUser({ prefix: 'platsql' });
    const other = await newUser({ prefix: 'platsql' });
    const community = await newCommunity({ manager: manager });
    const second = await newCommunity({ manager: manager });
    const tokenId = crypto.randomUUID();

    expect(await sqlState(authorize(claimsFor(manager.id), community))).toBe('ok');
    expect(await sqlState(authorize(claimsFor(manager.id, null, tokenId), community))).toBe('ok');
    expect(await sqlState(authorize(claimsFor(manager.id, community, tokenId), community))).toBe('ok');
    expect(await sqlState(authorize(claimsFor(manager.id, second, tokenId), community))).toBe('PT403');
    expect(await sqlState(authorize(claimsFor(other.id), community))).toBe('PT403');
    expect(await sqlState(authorize(claimsFor(other.id, community, tokenId), community))).toBe('PT403');
    expect(await sqlState(authorize(claimsFor(manager.id), crypto.randomUUID()))).toBe('PT403');
    expect(await sqlState(asAnon((tx) => tx`select api.platform_checkin(${crypto.randomUUID()}, 'a@b.c')`))).toBe('42501');
  });
});

describe('private.platform_venue', () => {
  const venue = (name: string, address: string | null, lat: number | null = null, lng: number | null = null) =>
    db()`select node_id, location_id from private.platform_venue(${name}, ${address}, ${lat}, ${lng})`.then((r) => r[0]!);

  it('matches name and address case-insensitively, then coordinates (1e-6), else creates', async () => {
    const tag = crypto.randomBytes(4).toString('hex');
    const hall = await venue(`Hall ${tag}`, ' 5 High St ', 10.123456, 20.654321);
    expect(Number.isInteger(hall.location_id)).toBe(true);
    expect(await venue(`HALL ${tag}`, '5 high st')).toEqual(hall);
    expect(await venue(`Else ${tag}`, 'x', 10.1234565, 20.6543215)).toEqual(hall);
    expect((await venue(`Else ${tag}`, 'x', 10.12348, 20.654321)).node_id).not.toBe(hall.node_id);
    // A missing address matches a missing address only.
    const bare = await venue(`Bare ${tag}`, null);
    expect(await venue(`bare ${tag}`, '')).toEqual(bare);
    expect((await venue(`Bare ${tag}`, 'Somewhere')).node_id).not.toBe(bare.node_id);
    expect(await sqlState(venue(`x ${tag}`, null, 1, null))).toBe('PT422');
    expect(await sqlState(venue('  ', null))).toBe('PT422');
  });
});

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

  it('the unique constraint holds even without the function', async () => {
    const community = await newCommunity();
    const insert = () => db()`
      with n as (insert into app.nodes (kind) values ('event') returning id)
      insert into app.events (node_id, community_id, title, starts_at, external_platform, external_id)
      select n.id, ${community}, 'x', now(), 'platform_a', 'dup-' || ${community}::text from n`;
    await insert();
    expect(await sqlState(insert())).toBe('23505');
    const halfSet = db()`
      with n as (insert into app.nodes (kind) values ('event') returning id)
      insert into app.events (node_id, community_id, title, starts_at, external_platform)
      select n.id, ${community}, 'x', now(), 'platform_a' from n`;
    expect(await sqlState(halfSet)).toBe('23514');
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

describe('check-ins for a given user', () => {
  it('private.check_in_user is idempotent; a request role can still only check itself in', async () => {
    const alice = await newUser({ prefix: 'platsql' });
    const bob = await newUser({ prefix: 'platsql' });
    const community = await newCommunity();
    const [event] = await db()`select admin.create_event(${community}, 'ci', now() + interval '1 hour') as id`;
    const checkIn = () => db()`select * from private.check_in_user(${alice.id}, ${event!.id}, null, null, null, null)`.then((r) => r[0]!);
    const first = await checkIn();
    const again = await checkIn();
    expect(first.created).toBe(true);
    expect(again).toEqual({ created: false, checkin: first.checkin });

    const forged = asUser(bob.id, (tx) => tx`select * from private.check_in_user(${alice.id}, ${event!.id}, null, null, null, 'public')`);
    expect(await sqlState(forged)).toBe('42501');
    const own = await asUser(bob.id, (tx) => tx`select * from private.check_in(${event!.id}, null, null, null, null)`);
    expect(own[0]!.created).toBe(true);
  });
});

describe('forms', () => {
  it('stores objects only, at most 64 KB, and lists them newest first', async () => {
    const submit = (text: string) => asAnon((tx) => tx`select api.form_submit(${text}) as id`).then((r) => r[0]!.id);
    const first = await submit('{"n":1}');
    const second = await submit('{"n":2}');
    expect(await sqlState(submit('[1]'))).toBe('PT400');
    expect(await sqlState(submit('"x"'))).toBe('PT400');
    expect(await sqlState(submit('{"a":'))).toBe('PT400');
    expect(await sqlState(submit(JSON.stringify({ v: 'x'.repeat(65_536) })))).toBe('PT413');
    expect(await sqlState(asAnon((tx) => tx`select * from admin.forms_list()`))).toBe('42501');

    const listed = await db()`select id, payload, size_bytes from admin.forms_list(10000, null) where id in (${first}, ${second})`;
    expect(listed.map((r) => r.id)).toEqual([second, first]);
    expect(listed[0]).toMatchObject({ payload: { n: 2 }, size_bytes: 7 });
    const none = await db()`select id from admin.forms_list(10, now() + interval '1 hour')`;
    expect(none).toHaveLength(0);
  });
});

// Privacy of names (issue 14): a name derived from the e-mail address is shown
// only to its user and to managers of a community the user belongs to; every
// other signed-in user (and anyone signed out) sees name: null, and no
// response a stranger can get holds the e-mail or any part of it. A user
// chooses a name at register/signup or with PATCH /api/mobile/profile; a
// chosen name is shown to everyone who sees the member.
import crypto from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { api, db, registerUser, type ApiResponse, type TestUser } from '../helpers.ts';
import { createCommunity, createEvent } from '../support/event-fixtures.ts';
import { addMember, nodeOf } from '../support/sql-fixtures.ts';
import { openStream } from '../support/sse.ts';

/** A user whose e-mail is as distinctive as a real one (each part searchable). */
async function victim(): Promise<TestUser & { parts: string[] }> {
  const tag = crypto.randomBytes(4).toString('hex');
  const email = `jane.doe${tag}.1987@mailhost${tag}.example`;
  const user = await registerUser('victim', { email, password: 'correct horse battery' });
  const local = email.split('@')[0]!;
  return {
    ...user,
    // The e-mail, its local part, and every distinctive piece of it.
    parts: [email, local, `doe${tag}`, `mailhost${tag}`],
  };
}

function expectNoTrace(res: ApiResponse | { status: number; text: string }, parts: string[], where: string): void {
  for (const part of parts) expect(res.text.toLowerCase(), `${where} leaks "${part}"`).not.toContain(part.toLowerCase());
}

describe('a name derived from the e-mail is private', () => {
  it('strangers (signed in or not) see name: null and no part of the e-mail anywhere; the user and their managers see it', async () => {
    const jane = await victim();
    const manager = await registerUser('np-mgr');
    const stranger = await registerUser('np-stranger');
    const fellow = await registerUser('np-fellow');
    const managed = await createCommunity(manager.email);
    const ownCommunity = await createCommunity(jane.email); // Jane manages this one
    await addMember(managed.id, jane.userId);
    await addMember(managed.id, fellow.userId);
    await addMember(ownCommunity.id, fellow.userId);
    const event = await createEvent({ communityId: managed.id, starts: '2 days' });
    const janeNode = await nodeOf(jane.userId);
    expect((await api('POST', `/api/mobile/events/${event.id}/checkin`, { token: jane.accessToken, body: {} })).status).toBeLessThan(500);

    // Everything a stranger or a fellow member can read that concerns Jane.
    for (const [who, token] of [
      ['stranger', stranger.accessToken],
      ['fellow member', fellow.accessToken],
    ] as const) {
      const responses: [string, ApiResponse][] = [];
      for (const c of [managed, ownCommunity]) {
        responses.push([`detail ${c.id}`, await api('GET', `/api/mobile/communities/${c.id}`, { token })]);
        responses.push([`members ${c.id}`, await api('GET', `/api/mobile/communities/${c.id}/members?limit=100`, { token })]);
        responses.push([`public ${c.id}`, await api('GET', `/api/community/${c.id}`)]);
      }
      responses.push(['search', await api('GET', '/api/mobile/communities/search?q=Community', { token })]);
      responses.push(['mine', await api('GET', '/api/mobile/communities', { token })]);
      responses.push(['upcoming', await api('GET', '/api/mobile/events/upcoming', { token })]);
      responses.push(['event', await api('GET', `/api/mobile/events/${event.id}`, { token })]);
      responses.push(['event page', await api('GET', `/e/${event.shortlink}`)]);
      responses.push(['checkin page', await api('GET', `/checkin/event/${event.nodeId}`)]);
      for (const [where, res] of responses) {
        expect(res.status, where).toBeLessThan(500);
        expectNoTrace(res, jane.parts, `${where} (as ${who})`);
      }
      const members = await api('GET', `/api/mobile/communities/${managed.id}/members?limit=100`, { token });
      expect(members.body.data.find((m: { id: string }) => m.id === janeNode)).toMatchObject({ name: null });
      const detail = await api('GET', `/api/mobile/communities/${ownCommunity.id}`, { token });
      expect(detail.body.data.managers).toEqual([{ id: janeNode, name: null }]);
    }

    const stream = await openStream({ token: fellow.accessToken });
    try {
      await stream.until((m) => m.event === 'ready');
      expectNoTrace({ status: 200, text: JSON.stringify(stream.messages) }, jane.parts, 'the event stream');
    } finally {
      stream.close();
    }

    // The manager of a community Jane belongs to sees the derived name; Jane sees her own.
    const local = jane.email.split('@')[0];
    const asManager = await api('GET', `/api/mobile/communities/${managed.id}/members?limit=100`, { token: manager.accessToken });
    expect(asManager.body.data.find((m: { id: string }) => m.id === janeNode)).toMatchObject({ name: local });
    const asJane = await api('GET', `/api/mobile/communities/${ownCommunity.id}`, { token: jane.accessToken });
    expect(asJane.body.data.managers).toEqual([{ id: janeNode, name: local }]);
    expect((await api('GET', '/api/mobile/profile', { token: jane.accessToken })).body.data).toMatchObject({ name: local, email: jane.email });
  });

  it('PATCH /api/mobile/profile sets a chosen name, which everyone then sees', async () => {
    const jane = await victim();
    const stranger = await registerUser('np-stranger');
    const community = await createCommunity();
    await addMember(community.id, jane.userId);

    const patched = await api('PATCH', '/api/mobile/profile', { token: jane.accessToken, body: { name: '  Jane D.  ' } });
    expect(patched.status).toBe(200);
    expect(patched.body).toEqual({
      success: true,
      data: expect.objectContaining({ id: jane.userId, email: jane.email, name: 'Jane D.', node_id: await nodeOf(jane.userId) }),
    });
    const members = await api('GET', `/api/mobile/communities/${community.id}/members`, { token: stranger.accessToken });
    expect(members.body.data.find((m: { id: string }) => m.id === patched.body.data.node_id)).toMatchObject({ name: 'Jane D.' });
    const [row] = await db()`select name_source from app.profiles where id = ${jane.userId}`;
    expect(row!.name_source).toBe('chosen');

    for (const body of [{ name: '' }, { name: '   ' }, { name: 'x'.repeat(201) }, {}, { name: 5 }]) {
      const bad = await api('PATCH', '/api/mobile/profile', { token: jane.accessToken, body });
      expect(bad.status, JSON.stringify(body)).toBe(422);
    }
    expect((await api('PATCH', '/api/mobile/profile', { body: { name: 'x' } })).status).toBe(401);
  });

  it('a name given at register or signup is chosen (public); without one it is derived (private)', async () => {
    const stranger = await registerUser('np-stranger');
    const community = await createCommunity();
    const named = `named-${crypto.randomBytes(4).toString('hex')}@example.com`;
    const reg = await api('POST', '/api/auth/register', { body: { email: named, password: 'password123', name: 'Ada Lovelace' } });
    expect(reg.status).toBe(201);
    const signed = `signed-${crypto.randomBytes(4).toString('hex')}@example.com`;
    const sign = await api('POST', '/api/auth/signup', { body: { email: signed, password: 'password123', name: 'Grace Hopper' } });
    expect(sign.status).toBe(201);
    const plain = `plain-${crypto.randomBytes(4).toString('hex')}@example.com`;
    const reg2 = await api('POST', '/api/auth/register', { body: { email: plain, password: 'password123' } });
    for (const id of [reg.body.user_id, sign.body.user_id, reg2.body.user_id]) await addMember(community.id, id);
    const members = await api('GET', `/api/mobile/communities/${community.id}/members`, { token: stranger.accessToken });
    expect(members.body.data.map((m: { name: string | null }) => m.name)).toEqual(['Ada Lovelace', 'Grace Hopper', null]);
    const bad = await api('POST', '/api/auth/register', { body: { email: `x-${crypto.randomBytes(4).toString('hex')}@example.com`, password: 'password123', name: 'x'.repeat(201) } });
    expect(bad.status).toBe(400);
  });

  it('existing rows: a name equal to the e-mail local part is derived, anything else chosen (the migration rule)', async () => {
    const rows = await db()`
      select count(*)::int as wrong from app.profiles p join identity.users u on u.id = p.id
       where (p.name = split_part(u.email, '@', 1)) <> (p.name_source = 'email')
         and p.created_at < now() - interval '1 second'
         -- An e-mail change keeps the name the old address gave (still private): not the migration's rule.
         and not exists (select 1 from identity.account_links l
                          where l.user_id = u.id and l.purpose = 'email_change' and l.used_at is not null)`;
    expect(rows[0]!.wrong).toBe(0);
  });
});

// /realtime/v1/websocket: the real @supabase/supabase-js client subscribing to
// postgres_changes on app.events through this gateway, plus the protocol
// edges with a raw websocket (heartbeat, refusals, broadcast and presence).
import { createClient, type RealtimeChannel, type SupabaseClient } from '@supabase/supabase-js';
import { afterAll, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import { api, baseUrl, db, forgeToken, registerUser } from '../helpers.ts';
import { createCommunity, createEvent } from '../support/event-fixtures.ts';
import { addMember } from '../support/sql-fixtures.ts';
import { openStream } from '../support/sse.ts';
import { waitFor } from '../support/wait.ts';

const clients: SupabaseClient[] = [];
afterAll(async () => {
  for (const c of clients) await c.removeAllChannels();
});

/**
 * A supabase-js client pointed at the gateway, as an app would make it (the
 * key is not used by the gateway). The token is set before any channel
 * subscribes, so joins carry it (see the raw test of a join without one).
 */
async function client(token: string): Promise<SupabaseClient> {
  const c = createClient(baseUrl, 'any-anon-key', {
    accessToken: async () => token,
    realtime: { transport: WebSocket as never, timeout: 5000 },
  });
  clients.push(c);
  await c.realtime.setAuth(token);
  return c;
}

interface Change {
  eventType: string;
  schema: string;
  table: string;
  commit_timestamp: string;
  new: Record<string, any>;
  old: Record<string, any>;
  errors: unknown;
}

/** Subscribes and resolves once the server has accepted (or refused) the channel. */
function subscribe(channel: RealtimeChannel): Promise<{ status: string; error?: Error }> {
  return new Promise((resolve) => {
    const timer = setTimeout(() => resolve({ status: 'TEST_TIMEOUT' }), 8000);
    channel.subscribe((status, error) => {
      if (status === 'SUBSCRIBED' || status === 'CHANNEL_ERROR' || status === 'TIMED_OUT') {
        clearTimeout(timer);
        resolve({ status, error });
      }
    });
  });
}

describe('supabase-js postgres_changes through /realtime/v1/websocket', () => {
  it('receives an insert, an update and a delete of app.events', async () => {
    const user = await registerUser('ws');
    const community = await createCommunity();
    const supabase = await client(user.accessToken);
    const received: Change[] = [];
    const channel = supabase
      .channel('upcoming')
      .on('postgres_changes', { event: '*', schema: 'app', table: 'events' }, (payload) => received.push(payload as unknown as Change));
    expect(await subscribe(channel)).toEqual({ status: 'SUBSCRIBED', error: undefined });

    const event = await createEvent({ communityId: community.id, title: 'Live', starts: '1 day' });
    await db()`update app.events set title = 'Live v2' where id = ${event.id}`;
    await db()`delete from app.events where id = ${event.id}`;

    const mine = () => received.filter((c) => (c.new.id ?? c.old.id) === event.id);
    await waitFor(() => (mine().length >= 3 ? true : undefined), 'three changes');
    const [insert, update, del] = mine();
    expect(insert).toMatchObject({ eventType: 'INSERT', schema: 'app', table: 'events', errors: null, old: {} });
    expect(insert!.new).toMatchObject({ id: event.id, title: 'Live', community_id: community.id, shortlink: event.shortlink });
    expect(insert!.commit_timestamp).toMatch(/^\d{4}-\d{2}-\d{2}T/);
    expect(update).toMatchObject({ eventType: 'UPDATE', new: { id: event.id, title: 'Live v2' }, old: { id: event.id } });
    expect(del).toMatchObject({ eventType: 'DELETE', new: {}, old: { id: event.id } });
  });

  it('routes by event type and filter, per subscription', async () => {
    const user = await registerUser('ws');
    const mine = await createCommunity();
    const other = await createCommunity();
    const supabase = await client(user.accessToken);
    const inserts: Change[] = [];
    const filtered: Change[] = [];
    const channel = supabase
      .channel('routing')
      .on('postgres_changes', { event: 'INSERT', schema: 'app', table: 'events' }, (p) => inserts.push(p as unknown as Change))
      .on('postgres_changes', { event: '*', schema: 'app', table: 'events', filter: `community_id=eq.${mine.id}` }, (p) =>
        filtered.push(p as unknown as Change),
      );
    expect((await subscribe(channel)).status).toBe('SUBSCRIBED');

    const a = await createEvent({ communityId: other.id, title: 'Other', starts: '1 day' });
    const b = await createEvent({ communityId: mine.id, title: 'Mine', starts: '1 day' });
    await db()`update app.events set title = 'Mine v2' where id = ${b.id}`;
    await waitFor(() => (filtered.length >= 2 ? true : undefined), 'the filtered changes');
    await waitFor(() => (inserts.some((c) => c.new.id === b.id) ? true : undefined), 'the insert of b');
    expect(inserts.some((c) => c.new.id === a.id)).toBe(true);
    expect(inserts.every((c) => c.eventType === 'INSERT')).toBe(true);
    expect(filtered.map((c) => `${c.eventType}:${c.new.title}`)).toEqual(['INSERT:Mine', 'UPDATE:Mine v2']);
  });

  it('an API token is no access token here: a community-scoped one (or any) is refused the channel', async () => {
    const user = await registerUser('ws-token');
    const community = await createCommunity(user.email);
    const created = await api('POST', '/api/docs/tokens', {
      token: user.accessToken,
      body: { name: 'scoped', permissions: ['*'], community_id: community.id },
    });
    expect(created.status).toBe(201);
    const channel = (await client(created.body.token_value as string))
      .channel('scoped')
      .on('postgres_changes', { event: '*', schema: 'app', table: 'events' }, () => {});
    const refused = await subscribe(channel);
    expect(refused.status).toBe('CHANNEL_ERROR');
    expect(String(refused.error?.message)).toContain('invalid access token');
    const [streams] = await db()`select count(*)::int as n from app.event_streams where user_id = ${user.userId}`;
    expect(streams!.n).toBe(0);
  });

  it('refuses a channel without a valid access token, for another table, or with presence', async () => {
    const user = await registerUser('ws');
    const expired = await forgeToken({ sub: user.userId }, { expiresIn: -10 });
    const bad = (await client(expired)).channel('bad').on('postgres_changes', { event: '*', schema: 'app', table: 'events' }, () => {});
    const refused = await subscribe(bad);
    expect(refused.status).toBe('CHANNEL_ERROR');
    expect(String(refused.error?.message)).toContain('invalid access token');

    const ok = await client(user.accessToken);
    const wrongTable = await subscribe(ok.channel('t').on('postgres_changes', { event: '*', schema: 'public', table: 'todos' }, () => {}));
    expect(wrongTable.status).toBe('CHANNEL_ERROR');
    expect(String(wrongTable.error?.message)).toContain('only app.events');

    const presence = await subscribe(ok.channel('p', { config: { presence: { key: 'me', enabled: true } } }));
    expect(presence.status).toBe('CHANNEL_ERROR');
    expect(String(presence.error?.message)).toContain('presence is not supported');
  });
});

describe('/realtime/v1/websocket protocol', () => {
  function connect(vsn = '2.0.0'): Promise<{ ws: WebSocket; frames: unknown[][]; next: (match: (f: unknown[]) => boolean) => Promise<unknown[]> }> {
    return new Promise((resolve, reject) => {
      const ws = new WebSocket(`${baseUrl.replace('http', 'ws')}/realtime/v1/websocket?apikey=x&vsn=${vsn}`);
      const frames: unknown[][] = [];
      ws.on('message', (data) => frames.push(JSON.parse(String(data))));
      ws.on('error', reject);
      ws.on('open', () =>
        resolve({
          ws,
          frames,
          next: (match) => waitFor(() => frames.find(match), 'a frame'),
        }),
      );
    });
  }

  it('answers heartbeats, unknown topics, broadcast, and joins of the caller with a reply and a system message', async () => {
    const user = await registerUser('ws');
    const { ws, next } = await connect();
    try {
      ws.send(JSON.stringify([null, '1', 'phoenix', 'heartbeat', {}]));
      expect(await next((f) => f[1] === '1')).toEqual([null, '1', 'phoenix', 'phx_reply', { status: 'ok', response: {} }]);

      ws.send(JSON.stringify(['2', '2', 'realtime:nowhere', 'broadcast', { type: 'broadcast', event: 'x', payload: {} }]));
      expect(await next((f) => f[1] === '2')).toMatchObject(['2', '2', 'realtime:nowhere', 'phx_reply', { status: 'error' }]);

      ws.send(
        JSON.stringify([
          '3',
          '3',
          'realtime:feed',
          'phx_join',
          { config: { postgres_changes: [{ event: 'INSERT', schema: 'app', table: 'events' }] }, access_token: user.accessToken },
        ]),
      );
      const reply = (await next((f) => f[1] === '3')) as [string, string, string, string, any];
      expect(reply[3]).toBe('phx_reply');
      expect(reply[4].status).toBe('ok');
      expect(reply[4].response.postgres_changes).toEqual([{ id: expect.any(Number), event: 'INSERT', schema: 'app', table: 'events' }]);
      expect(await next((f) => f[3] === 'system')).toMatchObject(['3', null, 'realtime:feed', 'system', { status: 'ok', extension: 'postgres_changes' }]);

      ws.send(JSON.stringify(['3', '4', 'realtime:feed', 'presence', { type: 'presence', event: 'track', payload: {} }]));
      expect(await next((f) => f[1] === '4')).toMatchObject(['3', '4', 'realtime:feed', 'phx_reply', { status: 'error' }]);

      ws.send(JSON.stringify(['3', '5', 'realtime:feed', 'phx_leave', {}]));
      expect(await next((f) => f[1] === '5')).toEqual(['3', '5', 'realtime:feed', 'phx_reply', { status: 'ok', response: {} }]);
    } finally {
      ws.close();
    }
  });

  it('a channel joined without a token receives nothing until access_token names the user', async () => {
    const user = await registerUser('ws');
    const community = await createCommunity();
    const { ws, frames, next } = await connect();
    try {
      const join = { config: { postgres_changes: [{ event: '*', schema: 'app', table: 'events', filter: `community_id=eq.${community.id}` }] } };
      ws.send(JSON.stringify(['1', '1', 'realtime:late', 'phx_join', join]));
      expect(await next((f) => f[1] === '1')).toMatchObject(['1', '1', 'realtime:late', 'phx_reply', { status: 'ok' }]);
      await createEvent({ communityId: community.id, title: 'Before the token', starts: '1 day' });
      await new Promise((r) => setTimeout(r, 300));
      expect(frames.filter((f) => f[3] === 'postgres_changes')).toEqual([]);

      ws.send(JSON.stringify(['1', '2', 'realtime:late', 'access_token', { access_token: user.accessToken }]));
      expect(await next((f) => f[1] === '2')).toMatchObject(['1', '2', 'realtime:late', 'phx_reply', { status: 'ok' }]);
      const after = await createEvent({ communityId: community.id, title: 'After the token', starts: '1 day' });
      const change = (await next((f) => f[3] === 'postgres_changes')) as [string, null, string, string, any];
      expect(change[0]).toBe('1');
      expect(change[4].data).toMatchObject({ type: 'INSERT', schema: 'app', table: 'events', errors: null, record: { id: after.id } });
      expect(change[4].data.columns).toContainEqual({ name: 'starts_at', type: 'timestamptz' });

      // A bad token closes the channel.
      ws.send(JSON.stringify(['1', '3', 'realtime:late', 'access_token', { access_token: 'garbage' }]));
      expect(await next((f) => f[3] === 'phx_close')).toEqual(['1', '1', 'realtime:late', 'phx_close', {}]);
    } finally {
      ws.close();
    }
  });

  it('speaks vsn 1.0.0 object frames too', async () => {
    const { ws, frames } = await connect('1.0.0');
    try {
      ws.send(JSON.stringify({ topic: 'phoenix', event: 'heartbeat', payload: {}, ref: '9', join_ref: null }));
      const reply = await waitFor(() => frames.find((f) => (f as unknown as { ref: string }).ref === '9'), 'the reply');
      expect(reply).toEqual({ join_ref: null, ref: '9', topic: 'phoenix', event: 'phx_reply', payload: { status: 'ok', response: {} } });
    } finally {
      ws.close();
    }
  });

  it('refuses other paths and unknown protocol versions before upgrading', async () => {
    const refused = (url: string) =>
      new Promise<number>((resolve) => {
        const ws = new WebSocket(url);
        ws.on('unexpected-response', (_req, res) => resolve(res.statusCode ?? 0));
        ws.on('error', () => {});
      });
    const wsBase = baseUrl.replace('http', 'ws');
    expect(await refused(`${wsBase}/realtime/v1/other`)).toBe(404);
    expect(await refused(`${wsBase}/realtime/v1/websocket?vsn=9.9.9`)).toBe(400);
  });

  it('a websocket with a joined channel counts against the per-user stream cap', async () => {
    const user = await registerUser('ws');
    const streams = await Promise.all([1, 2, 3, 4].map(() => openStream({ token: user.accessToken })));
    expect(streams.map((s) => s.status)).toEqual([200, 200, 200, 200]);
    try {
      const supabase = await client(user.accessToken);
      const first = await subscribe(supabase.channel('one').on('postgres_changes', { event: '*', schema: 'app', table: 'events' }, () => {}));
      expect(first.status).toBe('SUBSCRIBED');
      const fifthStream = await openStream({ token: user.accessToken });
      expect(fifthStream.status).toBe(429);
      const other = await client(user.accessToken);
      const refused = await subscribe(other.channel('two').on('postgres_changes', { event: '*', schema: 'app', table: 'events' }, () => {}));
      expect(refused.status).toBe('CHANNEL_ERROR');
      expect(String(refused.error?.message)).toContain('too many open streams');
    } finally {
      streams.forEach((s) => s.close());
    }
  });

  it('membership does not matter here: events are readable by every signed-in user (row-level security), as on Supabase', async () => {
    const user = await registerUser('ws');
    const community = await createCommunity();
    const member = await registerUser('ws');
    await addMember(community.id, member.userId);
    const got: Change[] = [];
    const channel = (await client(user.accessToken))
      .channel('rls')
      .on('postgres_changes', { event: 'INSERT', schema: 'app', table: 'events', filter: `community_id=eq.${community.id}` }, (p) =>
        got.push(p as unknown as Change),
      );
    expect((await subscribe(channel)).status).toBe('SUBSCRIBED');
    const event = await createEvent({ communityId: community.id, title: 'Open to all', starts: '1 day' });
    await waitFor(() => got.find((c) => c.new.id === event.id), 'the insert');
  });
});

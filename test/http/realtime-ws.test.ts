// /realtime/v1/websocket: the real @supabase/supabase-js client subscribing to
// postgres_changes on app.events through this gateway, plus the protocol
// edges with a raw websocket (heartbeat, refusals, broadcast and presence).
import { spawn } from 'node:child_process';
import readline from 'node:readline';
import { createClient, type RealtimeChannel, type SupabaseClient } from '@supabase/supabase-js';
import { afterAll, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import { api, baseUrl, db, forgeToken, registerUser } from '../helpers.ts';
import { createCommunity, createEvent } from '../support/event-fixtures.ts';
import { addMember } from '../support/sql-fixtures.ts';
import { openStream } from '../support/sse.ts';
import { waitFor } from '../support/wait.ts';
import { jsBlockAfter, writeSnippet } from '../support/docs-snippet.ts';

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

  it('a join without a token is refused; the rejoin with one receives every change since that join', async () => {
    const user = await registerUser('ws');
    const community = await createCommunity();
    const { ws, frames, next } = await connect();
    try {
      const join = { config: { postgres_changes: [{ event: '*', schema: 'app', table: 'events', filter: `community_id=eq.${community.id}` }] } };
      const before = await createEvent({ communityId: community.id, title: 'Before the join', starts: '1 day' });
      // The hub has seen that change (its head moved) before the join comes.
      await new Promise((r) => setTimeout(r, 300));
      ws.send(JSON.stringify(['1', '1', 'realtime:late', 'phx_join', join]));
      const refused = (await next((f) => f[1] === '1')) as [string, string, string, string, any];
      expect(refused).toMatchObject(['1', '1', 'realtime:late', 'phx_reply', { status: 'error' }]);
      expect(refused[4].response.reason).toContain('an access token is required');
      const between = await createEvent({ communityId: community.id, title: 'Between the joins', starts: '1 day' });
      await new Promise((r) => setTimeout(r, 300));
      expect(frames.filter((f) => f[3] === 'postgres_changes')).toEqual([]);
      // An access_token message is no way in for a refused topic.
      ws.send(JSON.stringify(['1', '2', 'realtime:late', 'access_token', { access_token: user.accessToken }]));
      expect(await next((f) => f[1] === '2')).toMatchObject(['1', '2', 'realtime:late', 'phx_reply', { status: 'error', response: { reason: 'unmatched topic' } }]);

      // The rejoin, as supabase-js makes it: the same topic, the token in the join.
      ws.send(JSON.stringify(['3', '3', 'realtime:late', 'phx_join', { ...join, access_token: user.accessToken }]));
      expect(await next((f) => f[1] === '3')).toMatchObject(['3', '3', 'realtime:late', 'phx_reply', { status: 'ok' }]);
      const after = await createEvent({ communityId: community.id, title: 'After the token', starts: '1 day' });
      await waitFor(() => (frames.filter((f) => f[3] === 'postgres_changes').length >= 2 ? true : undefined), 'two changes');
      await new Promise((r) => setTimeout(r, 300));
      const changes = frames.filter((f) => f[3] === 'postgres_changes') as [string, null, string, string, any][];
      expect(changes.map((c) => c[4].data.record.id)).toEqual([between.id, after.id]);
      expect(changes.every((c) => c[0] === '3')).toBe(true);
      expect(changes[0]![4].data).toMatchObject({ type: 'INSERT', schema: 'app', table: 'events', errors: null });
      expect(changes[0]![4].data.columns).toContainEqual({ name: 'starts_at', type: 'timestamptz' });
      expect(changes.some((c) => c[4].data.record.id === before.id)).toBe(false);

      // A fresh token of the same user is taken; a bad one closes the channel.
      ws.send(JSON.stringify(['3', '4', 'realtime:late', 'access_token', { access_token: user.accessToken }]));
      expect(await next((f) => f[1] === '4')).toMatchObject(['3', '4', 'realtime:late', 'phx_reply', { status: 'ok' }]);
      ws.send(JSON.stringify(['3', '5', 'realtime:late', 'access_token', { access_token: 'garbage' }]));
      expect(await next((f) => f[3] === 'phx_close')).toEqual(['3', '3', 'realtime:late', 'phx_close', {}]);
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

describe("docs/realtime.md's supabase-js block, run as written", () => {
  it('in its own Node process, receives every event made each second from subscribe on, none of the first ones lost', async () => {
    const user = await registerUser('ws-docs');
    const community = await createCommunity();
    // What the block leaves to the reader, then the block as it stands.
    const file = writeSnippet('realtime-snippet', 'test/http/realtime-ws.test.ts', [
      'const GATEWAY_URL = process.env.GATEWAY_URL',
      "const ANON_KEY = 'any non-empty string'",
      'const accessToken = process.env.ACCESS_TOKEN',
      'const communityId = process.env.COMMUNITY_ID',
      'const onChange = (payload) => console.log(JSON.stringify(payload))',
      jsBlockAfter('realtime.md', '## supabase-js (websocket)'),
      "console.log(JSON.stringify({ subscribed: true }))",
    ]);

    const child = spawn(process.execPath, [file], {
      env: { ...process.env, GATEWAY_URL: baseUrl, ACCESS_TOKEN: user.accessToken, COMMUNITY_ID: community.id },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stderr = '';
    child.stderr.on('data', (d) => (stderr += String(d)));
    const lines: any[] = [];
    readline.createInterface({ input: child.stdout }).on('line', (line) => lines.push(JSON.parse(line)));
    try {
      await waitFor(() => (lines.some((l) => l.subscribed) ? true : undefined), `the program to subscribe (stderr: ${stderr})`);
      // From subscribe on, an event every second for 12 s: past the first
      // join (refused for want of a token) and past the old 10 s grace.
      const made: string[] = [];
      await new Promise((r) => setTimeout(r, 500));
      for (let i = 0; i < 12; i++) {
        const started = Date.now();
        made.push((await createEvent({ communityId: community.id, title: `Second ${i}`, starts: '1 day' })).id);
        await new Promise((r) => setTimeout(r, Math.max(0, 1000 - (Date.now() - started))));
      }
      const received = () => lines.filter((l) => l.eventType === 'INSERT').map((l) => l.new.id as string);
      await waitFor(() => (received().length >= made.length ? true : undefined), 'every insert', 10_000).catch(() => undefined);
      expect(received()).toEqual(made);
      expect(lines.filter((l) => l.eventType).every((l) => l.schema === 'app' && l.table === 'events' && l.new.community_id === community.id)).toBe(true);
    } finally {
      child.kill();
    }
  }, 40_000);
});

// Outbound webhooks through the real gateway and its job worker (the test
// environment runs it with WEBHOOK_ALLOW_PRIVATE_TARGETS=1 and
// WEBHOOK_RETRY_SCHEDULE=1,1), delivered to a real HTTP receiver in this
// process that verifies every signature with the `standardwebhooks` package.
// Crashed workers, two workers at once and the address rule (SSRF) without
// the allow flag: test/process/webhook-workers.test.ts.
import crypto from 'node:crypto';
import net from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { api, db, registerUser, type TestUser } from '../helpers.ts';
import { ownGateway } from '../support/own-gateway.ts';
import { verifyWebhook, WebhookReceiver, type ReceivedWebhook } from '../support/webhook-receiver.ts';
import { eventually } from '../support/wait.ts';
import { NO_ANSWER } from '../../gateway/jobs/webhooks.ts';
import { freePort } from '../../gateway/core/process/free-port.ts';

const ALL_TYPES = ['event.created', 'event.updated', 'event.deleted', 'attendee.registered', 'checkin.created', 'member.joined', 'member.left', 'member.deleted'];

const receiver = new WebhookReceiver();
beforeAll(async () => {
  await receiver.start();
});
afterAll(async () => {
  await receiver.stop();
});

const tag = () => crypto.randomBytes(5).toString('hex');

interface Community {
  manager: TestUser;
  communityId: string;
}

async function managedCommunity(): Promise<Community> {
  const manager = await registerUser('hookmgr');
  const [row] = await db()<{ id: string }[]>`select admin.create_community(${`Hooks ${tag()}`}, null, '{}', ${manager.email}) as id`;
  return { manager, communityId: row!.id };
}

interface Hook {
  id: string;
  secret: string;
  path: string;
}

async function createWebhook(c: Community, events = ALL_TYPES, token = c.manager.accessToken): Promise<Hook> {
  const path = `/hook-${tag()}`;
  const res = await api('POST', '/api/v1/platform/webhooks', {
    token,
    body: { community_id: c.communityId, url: receiver.url(path), events, description: 'test receiver' },
  });
  expect(res.status, res.text).toBe(201);
  return { id: res.body.data.id, secret: res.body.data.secret, path };
}

async function platformEvent(c: Community, title = `Event ${tag()}`) {
  const res = await api('POST', '/api/v1/platform/events', {
    token: c.manager.accessToken,
    body: {
      community_id: c.communityId,
      external_platform: 'platform_a',
      external_id: `ext-${tag()}`,
      title,
      description: 'Doors at six',
      date: new Date(Date.now() + 86_400_000).toISOString(),
    },
  });
  expect(res.status, res.text).toBe(201);
  return res.body.data as { event_id: string; event_node_id: string; title: string };
}

async function deliveries(c: Community, hook: Hook) {
  const res = await api('GET', `/api/v1/platform/webhooks/${hook.id}/deliveries?limit=100`, { token: c.manager.accessToken });
  expect(res.status, res.text).toBe(200);
  return res.body.data as any[];
}

/** The next webhook of `type` at the hook's path (verified with its secret). */
async function received(hook: Hook, type: string, match: (r: ReceivedWebhook) => boolean = () => true): Promise<ReceivedWebhook> {
  const [request] = (
    await receiver.waitFor(hook.path, (rs) => rs.some((r) => r.payload.type === type && match(r)), { what: `${type} at ${hook.path}` })
  ).filter((r) => r.payload.type === type && match(r));
  expect(verifyWebhook(hook.secret, request!)).toEqual(request!.payload);
  return request!;
}

/**
 * `count` deliveries of an endpoint that failed past their retries, queued
 * from `first` ago on, `step` apart (SQL intervals); each body's data is {n}.
 */
function failedDeliveries(sql: ReturnType<typeof db>, hookId: string, count: number, first: string, step: string) {
  return sql`
    insert into app.webhook_deliveries (endpoint_id, event_type, payload, status, attempts, next_attempt_at, last_status_code, last_error, created_at)
    select ${hookId}, 'event.created', jsonb_build_object('type', 'event.created', 'timestamp', now(), 'data', jsonb_build_object('n', g)),
           'failed', 8, null, 500, 'HTTP 500', now() - ${first}::interval + ${step}::interval * g
      from generate_series(1, ${count}::int) g`;
}

describe('managing webhook endpoints', () => {
  it('creates (secret shown once), lists, changes and deletes an endpoint', async () => {
    const c = await managedCommunity();
    const created = await api('POST', '/api/v1/platform/webhooks', {
      token: c.manager.accessToken,
      body: { community_id: c.communityId, url: receiver.url('/crud'), events: ['event.created', 'member.joined'] },
    });
    expect(created.status).toBe(201);
    expect(created.body.success).toBe(true);
    const hook = created.body.data;
    expect(hook).toMatchObject({ community_id: c.communityId, url: receiver.url('/crud'), active: true, description: null });
    expect(hook.events.sort()).toEqual(['event.created', 'member.joined']);
    expect(hook.secret).toMatch(/^whsec_[A-Za-z0-9+/]+=*$/);
    expect(Buffer.from(hook.secret.slice('whsec_'.length), 'base64').length).toBeGreaterThanOrEqual(24);

    const list = await api('GET', `/api/v1/platform/webhooks?community_id=${c.communityId}`, { token: c.manager.accessToken });
    expect(list.status).toBe(200);
    expect(list.body.data).toHaveLength(1);
    expect(list.body.data[0].id).toBe(hook.id);
    expect(list.body.data[0]).not.toHaveProperty('secret');
    expect(list.text).not.toContain(hook.secret);

    const patched = await api('PATCH', `/api/v1/platform/webhooks/${hook.id}`, {
      token: c.manager.accessToken,
      body: { events: ['member.left'], description: 'CRM sync', active: false },
    });
    expect(patched.status).toBe(200);
    expect(patched.body.data).toMatchObject({ events: ['member.left'], description: 'CRM sync', active: false, url: hook.url });
    const cleared = await api('PATCH', `/api/v1/platform/webhooks/${hook.id}`, { token: c.manager.accessToken, body: { description: null } });
    expect(cleared.body.data.description).toBeNull();

    const deleted = await api('DELETE', `/api/v1/platform/webhooks/${hook.id}`, { token: c.manager.accessToken });
    expect(deleted.status).toBe(204);
    expect(deleted.text).toBe('');
    const again = await api('PATCH', `/api/v1/platform/webhooks/${hook.id}`, { token: c.manager.accessToken, body: { active: true } });
    expect(again.status).toBe(404);
    expect(again.body.error).toBe('webhook_not_found');
  });

  it('refuses unknown event types and malformed input with 422, never 500', async () => {
    const c = await managedCommunity();
    const bad = [
      { community_id: c.communityId, url: receiver.url('/x'), events: ['event.exploded'] },
      { community_id: c.communityId, url: receiver.url('/x'), events: [] },
      { community_id: c.communityId, url: 'not a url', events: ['event.created'] },
      { community_id: c.communityId, url: 'ftp://example.com/x', events: ['event.created'] },
      { community_id: c.communityId, url: receiver.url('/x'), events: 'event.created' },
      { community_id: 'nope', url: receiver.url('/x'), events: ['event.created'] },
      { community_id: c.communityId, url: receiver.url('/x'), events: ['event.created'], description: 'x'.repeat(501) },
    ];
    for (const body of bad) {
      const res = await api('POST', '/api/v1/platform/webhooks', { token: c.manager.accessToken, body });
      expect(res.status, JSON.stringify(body)).toBe(422);
      expect(typeof res.body.error).toBe('string');
    }
    const hook = await createWebhook(c, ['event.created']);
    const patch = await api('PATCH', `/api/v1/platform/webhooks/${hook.id}`, { token: c.manager.accessToken, body: { events: ['nope'] } });
    expect(patch.status).toBe(422);
    const list = await api('GET', '/api/v1/platform/webhooks', { token: c.manager.accessToken });
    expect(list.status).toBe(422);
    const page = await api('GET', `/api/v1/platform/webhooks/${hook.id}/deliveries?limit=0`, { token: c.manager.accessToken });
    expect(page.status).toBe(422);
  });

  it('takes the platform credentials: a manager, or an API token of that community; anyone else 403, unknown ids 404', async () => {
    const c = await managedCommunity();
    const other = await managedCommunity();
    const hook = await createWebhook(c, ['event.created']);
    const ping = await api('POST', `/api/v1/platform/webhooks/${hook.id}/ping`, { token: c.manager.accessToken });
    const delivery = ping.body.data;

    // Another community's manager: 403 on everything of this community.
    const o = other.manager.accessToken;
    const forbidden: [string, string, unknown?][] = [
      ['POST', '/api/v1/platform/webhooks', { community_id: c.communityId, url: receiver.url('/x'), events: ['event.created'] }],
      ['GET', `/api/v1/platform/webhooks?community_id=${c.communityId}`],
      ['PATCH', `/api/v1/platform/webhooks/${hook.id}`, { active: false }],
      ['DELETE', `/api/v1/platform/webhooks/${hook.id}`],
      ['POST', `/api/v1/platform/webhooks/${hook.id}/rotate_secret`],
      ['POST', `/api/v1/platform/webhooks/${hook.id}/ping`],
      ['GET', `/api/v1/platform/webhooks/${hook.id}/deliveries`],
      ['POST', `/api/v1/platform/webhooks/${hook.id}/deliveries/${delivery.id}/replay`],
    ];
    for (const [method, path, body] of forbidden) {
      const res = await api(method, path, { token: o, body });
      expect(res.status, `${method} ${path}`).toBe(403);
      expect(res.text).not.toContain(hook.secret);
    }
    // Unknown ids: 404.
    const unknown = crypto.randomUUID();
    for (const [method, path] of [
      ['PATCH', `/api/v1/platform/webhooks/${unknown}`],
      ['DELETE', `/api/v1/platform/webhooks/${unknown}`],
      ['POST', `/api/v1/platform/webhooks/${unknown}/ping`],
      ['GET', `/api/v1/platform/webhooks/${unknown}/deliveries`],
      ['POST', `/api/v1/platform/webhooks/${hook.id}/deliveries/${unknown}/replay`],
      ['POST', `/api/v1/platform/webhooks/not-a-uuid/rotate_secret`],
    ] as const) {
      const res = await api(method, path, { token: c.manager.accessToken, body: method === 'PATCH' ? { active: true } : undefined });
      expect(res.status, `${method} ${path}`).toBe(404);
    }
    // A plain member is 403; no credential 401.
    const member = await registerUser('hookmember');
    await api('POST', `/api/mobile/communities/${c.communityId}/join`, { token: member.accessToken });
    expect((await api('GET', `/api/v1/platform/webhooks?community_id=${c.communityId}`, { token: member.accessToken })).status).toBe(403);
    expect((await api('GET', `/api/v1/platform/webhooks?community_id=${c.communityId}`)).status).toBe(401);

    // API tokens: one scoped to this community works; one scoped to another community does not.
    const scoped = await api('POST', '/api/docs/tokens', {
      token: c.manager.accessToken,
      body: { name: 'hooks', permissions: ['/api/v1/platform/*'], community_id: c.communityId },
    });
    expect(scoped.status, scoped.text).toBe(201);
    const viaToken = await createWebhook(c, ['member.joined'], scoped.body.token_value);
    expect(viaToken.secret).toMatch(/^whsec_/);
    const elsewhere = await api('POST', '/api/docs/tokens', {
      token: other.manager.accessToken,
      body: { name: 'hooks', permissions: ['/api/v1/platform/*'], community_id: other.communityId },
    });
    const elsewhereToken = elsewhere.body.token_value;
    const refused = await api('GET', `/api/v1/platform/webhooks?community_id=${c.communityId}`, { token: elsewhereToken });
    expect(refused.status).toBe(403);
  });
});

describe('deliveries', () => {
  it('delivers every event type, signed, after the REST call (or the operator SQL) that causes it', async () => {
    const c = await managedCommunity();
    const hook = await createWebhook(c);

    // event.created: the Event object, as GET /api/mobile/events/{id} gives it to a manager.
    const created = await platformEvent(c);
    const eventCreated = await received(hook, 'event.created', (r) => r.payload.data.id === created.event_id);
    const rest = await api('GET', `/api/mobile/events/${created.event_id}`, { token: c.manager.accessToken });
    expect(eventCreated.payload.data).toEqual(rest.body);
    expect(eventCreated.headers['webhook-id']).toMatch(/^msg_[0-9a-f]{32}$/);
    expect(Math.abs(Number(eventCreated.headers['webhook-timestamp']) - Date.now() / 1000)).toBeLessThan(30);
    expect(eventCreated.headers['content-type']).toBe('application/json');
    expect(new Date(eventCreated.payload.timestamp).getTime()).toBeGreaterThan(Date.now() - 60_000);

    // attendee.registered (a new account: it joins the community, member.joined too).
    const email = `attendee-${tag()}@example.com`;
    const attendee = await api('POST', `/api/v1/platform/events/${created.event_node_id}/attendees`, {
      token: c.manager.accessToken,
      body: { email, name: 'Ada Attendee' },
    });
    expect(attendee.status).toBe(201);
    const registered = await received(hook, 'attendee.registered');
    expect(registered.payload.data).toMatchObject({ event_id: created.event_id, event_node_id: created.event_node_id, email, external_platform: 'platform_a' });
    const attendeeJoined = await received(hook, 'member.joined');
    expect(attendeeJoined.payload.data.member).toMatchObject({ role: 'member', name: 'Ada Attendee' });

    // member.joined and checkin.created through the mobile API.
    const member = await registerUser('hookjoin');
    const join = await api('POST', `/api/mobile/communities/${c.communityId}/join`, { token: member.accessToken });
    expect(join.status).toBe(200);
    const [profile] = await db()<{ node_id: string }[]>`select node_id from app.profiles where id = ${member.userId}`;
    const memberNode = profile!.node_id;
    const joined = await received(hook, 'member.joined', (r) => r.payload.data.member.id === memberNode);
    expect(joined.payload.data).toEqual({
      community_id: c.communityId,
      member: { id: memberNode, role: 'member', joined_at: join.body.data.joined_at, name: expect.any(String) },
    });
    expect(joined.body).not.toContain('@');
    const checkin = await api('POST', `/api/mobile/events/${created.event_id}/checkin`, { token: member.accessToken, body: { visibility: 'public' } });
    expect(checkin.status).toBe(201);
    const checkedIn = await received(hook, 'checkin.created');
    expect(checkedIn.payload.data).toMatchObject({
      id: checkin.body.checkin.id,
      event_id: created.event_id,
      event_node_id: created.event_node_id,
      visibility: 'public',
      member: { id: memberNode },
    });
    expect(checkedIn.body).not.toContain(member.email);

    // member.left
    const leave = await api('POST', `/api/mobile/communities/${c.communityId}/leave`, { token: member.accessToken });
    expect(leave.status).toBe(200);
    const left = await received(hook, 'member.left');
    expect(left.payload.data).toMatchObject({ community_id: c.communityId, member: { id: memberNode, role: 'member' } });

    // member.deleted: a member deletes their account (ids only; no member.left for it).
    const gone = await registerUser('hookgone');
    expect((await api('POST', `/api/mobile/communities/${c.communityId}/join`, { token: gone.accessToken })).status).toBe(200);
    const [goneProfile] = await db()<{ node_id: string }[]>`select node_id from app.profiles where id = ${gone.userId}`;
    await received(hook, 'member.joined', (r) => r.payload.data.member.id === goneProfile!.node_id);
    expect((await api('DELETE', '/api/mobile/account', { token: gone.accessToken, body: { password: gone.password } })).status).toBe(200);
    const deletedMember = await received(hook, 'member.deleted');
    expect(deletedMember.payload.data).toEqual({ community_id: c.communityId, member: { id: goneProfile!.node_id }, deleted_at: expect.any(String) });

    // No REST route changes or deletes an event: an operator's SQL does, and is delivered the same way.
    await db()`update app.events set title = 'Renamed by an operator' where id = ${created.event_id}`;
    const updated = await received(hook, 'event.updated');
    expect(updated.payload.data).toMatchObject({ id: created.event_id, title: 'Renamed by an operator' });
    await db()`delete from app.checkins where event_id = ${created.event_id}`;
    await db()`delete from app.event_attendees where event_id = ${created.event_id}`;
    await db()`delete from app.events where id = ${created.event_id}`;
    const deleted = await received(hook, 'event.deleted');
    expect(deleted.payload.data.id).toBe(created.event_id);

    // In the order of the changes, each once, and each recorded as succeeded.
    const types = receiver.at(hook.path).map((r) => r.payload.type);
    expect(types).toEqual([
      'event.created',
      'member.joined', // the attendee's new account joins the community, in the same transaction as ...
      'attendee.registered',
      'member.joined',
      'checkin.created',
      'member.left',
      'member.joined',
      'member.deleted',
      'event.updated',
      'event.deleted',
    ]);
    expect(new Set(types)).toEqual(new Set(ALL_TYPES));
    const rows = await eventually('every delivery recorded', async () => {
      const all = await deliveries(c, hook);
      return all.every((d) => d.status === 'succeeded') && all;
    });
    expect(rows).toHaveLength(types.length);
    expect(rows[0]).toMatchObject({ attempts: 1, last_status_code: 200, last_error: null, next_attempt_at: null });
    expect(rows.map((d) => d.webhook_id).sort()).toEqual(receiver.at(hook.path).map((r) => r.headers['webhook-id']).sort());
  });

  it('sends the deliveries of one endpoint in the order of their changes', async () => {
    const c = await managedCommunity();
    const hook = await createWebhook(c, ['event.created']);
    const titles = Array.from({ length: 8 }, (_, i) => `Ordered ${i} ${tag()}`);
    for (const title of titles) await platformEvent(c, title);
    const got = await receiver.waitFor(hook.path, (rs) => rs.length >= titles.length);
    expect(got.map((r) => r.payload.data.title)).toEqual(titles);
  });

  it('sends nothing for a change that was rolled back', async () => {
    const c = await managedCommunity();
    const hook = await createWebhook(c, ['event.created']);
    await db()
      .begin(async (tx) => {
        await tx`select admin.create_event(${c.communityId}, 'Rolled back', now() + interval '1 day')`;
        throw new Error('roll back');
      })
      .catch(() => {});
    // A later change in the same queue: once it has arrived, anything before it would have too.
    await db()`select admin.create_event(${c.communityId}, 'Committed', now() + interval '1 day')`;
    await received(hook, 'event.created', (r) => r.payload.data.title === 'Committed');
    expect(receiver.at(hook.path).map((r) => r.payload.data.title)).toEqual(['Committed']);
    expect((await deliveries(c, hook)).map((d) => d.payload.data.title)).toEqual(['Committed']);
  });

  it('retries a failed attempt with the same webhook-id and body, keeping 1 KB of the answer', async () => {
    const c = await managedCommunity();
    const hook = await createWebhook(c, ['member.joined']);
    receiver.answer(hook.path, [{ status: 500, body: 'x'.repeat(5000) }]);
    const member = await registerUser('hookretry');
    await api('POST', `/api/mobile/communities/${c.communityId}/join`, { token: member.accessToken });
    await receiver.waitFor(hook.path, (rs) => rs.length >= 1);
    const retrying = await eventually('the failed attempt recorded', async () => {
      const [d] = await deliveries(c, hook);
      return d?.status === 'retrying' && d;
    });
    expect(retrying).toMatchObject({ attempts: 1, last_status_code: 500, last_error: 'HTTP 500' });
    expect(retrying.last_response_body).toBe('x'.repeat(1024));
    expect(new Date(retrying.next_attempt_at).getTime()).toBeGreaterThan(new Date(retrying.created_at).getTime());

    const [first, second] = await receiver.waitFor(hook.path, (rs) => rs.length >= 2);
    expect(second!.headers['webhook-id']).toBe(first!.headers['webhook-id']);
    expect(second!.body).toBe(first!.body);
    expect(verifyWebhook(hook.secret, second!)).toEqual(second!.payload);
    // About a second apart (WEBHOOK_RETRY_SCHEDULE=1,1: 1 s ± 20 %, found by a poll of 1 s at most).
    expect(second!.at - first!.at).toBeGreaterThanOrEqual(700);
    const done = await eventually('the delivery succeeded', async () => {
      const [d] = await deliveries(c, hook);
      return d?.status === 'succeeded' && d;
    });
    expect(done).toMatchObject({ attempts: 2, last_status_code: 200, last_error: null, last_response_body: 'ok' });
    expect(done.delivered_at).not.toBeNull();
  });

  it('gives up after the retry schedule; a redirect is a failure and is not followed', async () => {
    const c = await managedCommunity();
    const hook = await createWebhook(c, ['member.joined']);
    receiver.answer(hook.path, [], { status: 302, headers: { location: receiver.url(`${hook.path}/elsewhere`) } });
    await api('POST', `/api/mobile/communities/${c.communityId}/join`, { token: (await registerUser('hookredir')).accessToken });
    const failed = await eventually('the delivery failed', async () => {
      const [d] = await deliveries(c, hook);
      return d?.status === 'failed' && d;
    });
    expect(failed).toMatchObject({ attempts: 3, last_status_code: 302, next_attempt_at: null });
    expect(failed.last_error).toMatch(/redirects are not followed/);
    expect(receiver.at(hook.path)).toHaveLength(3);
    expect(receiver.at(`${hook.path}/elsewhere`)).toHaveLength(0);
  });

  it('replays a delivery: the same webhook-id and body, as a new attempt', async () => {
    const c = await managedCommunity();
    const hook = await createWebhook(c, ['event.created']);
    await platformEvent(c);
    const original = await received(hook, 'event.created');
    const [delivery] = await eventually('the delivery succeeded', async () => {
      const all = await deliveries(c, hook);
      return all[0]?.status === 'succeeded' && all;
    });
    const replay = await api('POST', `/api/v1/platform/webhooks/${hook.id}/deliveries/${delivery.id}/replay`, { token: c.manager.accessToken });
    expect(replay.status).toBe(202);
    expect(replay.body.data).toMatchObject({ id: delivery.id, status: 'pending', webhook_id: delivery.webhook_id });
    const [, again] = await receiver.waitFor(hook.path, (rs) => rs.length >= 2);
    expect(again!.headers['webhook-id']).toBe(original.headers['webhook-id']);
    expect(again!.body).toBe(original.body);
    expect(verifyWebhook(hook.secret, again!)).toEqual(original.payload);
    await eventually('the replay recorded', async () => {
      const [d] = await deliveries(c, hook);
      return d?.status === 'succeeded' && d.attempts === 2;
    });
    // A delivery of another endpoint is not this endpoint's: 404.
    const otherHook = await createWebhook(c, ['event.created']);
    const crossed = await api('POST', `/api/v1/platform/webhooks/${otherHook.id}/deliveries/${delivery.id}/replay`, { token: c.manager.accessToken });
    expect(crossed.status).toBe(404);
    expect(crossed.body.error).toBe('delivery_not_found');
  });

  it('pings; a paused endpoint gets nothing and cannot be pinged (409)', async () => {
    const c = await managedCommunity();
    const hook = await createWebhook(c, ['event.created']);
    const ping = await api('POST', `/api/v1/platform/webhooks/${hook.id}/ping`, { token: c.manager.accessToken });
    expect(ping.status).toBe(202);
    expect(ping.body.data).toMatchObject({ event_type: 'webhook.ping', status: 'pending', attempts: 0 });
    const pinged = await received(hook, 'webhook.ping');
    expect(pinged.payload.data).toEqual({ endpoint_id: hook.id, community_id: c.communityId });
    expect(pinged.headers['webhook-id']).toBe(ping.body.data.webhook_id);

    await api('PATCH', `/api/v1/platform/webhooks/${hook.id}`, { token: c.manager.accessToken, body: { active: false } });
    const refused = await api('POST', `/api/v1/platform/webhooks/${hook.id}/ping`, { token: c.manager.accessToken });
    expect(refused.status).toBe(409);
    expect(refused.body.error).toBe('webhook_inactive');
    await platformEvent(c, 'While paused');
    await api('PATCH', `/api/v1/platform/webhooks/${hook.id}`, { token: c.manager.accessToken, body: { active: true } });
    await platformEvent(c, 'After resuming');
    await received(hook, 'event.created', (r) => r.payload.data.title === 'After resuming');
    expect(receiver.at(hook.path).map((r) => r.payload.data.title ?? r.payload.type)).toEqual(['webhook.ping', 'After resuming']);
  });

  it('rotates the secret: both secrets sign for 24 hours, then only the new one', async () => {
    const c = await managedCommunity();
    const hook = await createWebhook(c, ['event.created']);
    const rotated = await api('POST', `/api/v1/platform/webhooks/${hook.id}/rotate_secret`, { token: c.manager.accessToken });
    expect(rotated.status).toBe(200);
    const newSecret: string = rotated.body.data.secret;
    expect(newSecret).toMatch(/^whsec_/);
    expect(newSecret).not.toBe(hook.secret);

    await api('POST', `/api/v1/platform/webhooks/${hook.id}/ping`, { token: c.manager.accessToken });
    const [during] = await receiver.waitFor(hook.path, (rs) => rs.length >= 1);
    expect(during!.headers['webhook-signature']!.split(' ')).toHaveLength(2);
    expect(verifyWebhook(newSecret, during!)).toEqual(during!.payload);
    expect(verifyWebhook(hook.secret, during!)).toEqual(during!.payload);

    // 24 hours later (the rotation's age set back in the database):
    await db()`update app.webhook_endpoints set previous_secret_expires_at = now() - interval '1 second' where id = ${hook.id}`;
    await api('POST', `/api/v1/platform/webhooks/${hook.id}/ping`, { token: c.manager.accessToken });
    const [, after] = await receiver.waitFor(hook.path, (rs) => rs.length >= 2);
    expect(after!.headers['webhook-signature']!.split(' ')).toHaveLength(1);
    expect(verifyWebhook(newSecret, after!)).toEqual(after!.payload);
    expect(() => verifyWebhook(hook.secret, after!)).toThrow(/signature/i);
  });

  it('turns off an endpoint whose last 20 deliveries failed, and e-mails the managers', async () => {
    const c = await managedCommunity();
    const hook = await createWebhook(c, ['event.created']);
    receiver.answer(hook.path, [], { status: 500 });
    // 19 deliveries that failed earlier (past their retries), as the worker
    // records them: 20 failing through their retries over HTTP would take
    // minutes, since the endpoint backs off from its third failed attempt in a row.
    await db()`
      insert into app.webhook_deliveries (endpoint_id, event_type, payload, status, attempts, next_attempt_at, last_status_code, last_error, created_at)
      select ${hook.id}, 'event.created', jsonb_build_object('type', 'event.created', 'timestamp', now(), 'data', '{}'::jsonb),
             'failed', 3, null, 500, 'HTTP 500', now() - interval '1 hour' + make_interval(secs => g)
        from generate_series(1, 19) g`;
    // The 20th fails through its retries.
    await db()`select admin.create_event(${c.communityId}, 'Failing', now() + interval '1 day')`;
    const off = await eventually(
      'the endpoint turned off',
      async () => {
        const list = await api('GET', `/api/v1/platform/webhooks?community_id=${c.communityId}`, { token: c.manager.accessToken });
        return list.body.data[0].active === false && list.body.data[0];
      },
      30_000,
    );
    expect(off.active).toBe(false);
    const all = await deliveries(c, hook);
    expect(all.filter((d) => d.status === 'failed')).toHaveLength(20);
    const mail = await db()`select subject, body_text from app.email_outbox where to_email = ${c.manager.email} and purpose = 'webhook_disabled'`;
    expect(mail).toHaveLength(1);
    expect(mail[0]!.body_text).toContain(receiver.url(hook.path));
    // Nothing more goes out until a manager turns it on again.
    await db()`select admin.create_event(${c.communityId}, 'After turning off', now() + interval '1 day')`;
    const ping = await api('POST', `/api/v1/platform/webhooks/${hook.id}/ping`, { token: c.manager.accessToken });
    expect(ping.status).toBe(409);
  });

  it('records the same error for every attempt without an answer: an open port, a closed one and an unknown name look alike', async () => {
    const c = await managedCommunity();
    const targets = [
      `https://127.0.0.1:${receiver.listeningPort}/not-tls`, // open, but no TLS: the handshake fails
      `https://127.0.0.1:${await freePort()}/closed`, // nothing listens: connection refused
      'https://no-such-host.invalid/hook', // no address
    ];
    const outcomes = [];
    for (const url of targets) {
      const res = await api('POST', '/api/v1/platform/webhooks', {
        token: c.manager.accessToken,
        body: { community_id: c.communityId, url, events: ['event.created'] },
      });
      expect(res.status, url).toBe(201);
      const hook = { id: res.body.data.id as string, secret: '', path: '' };
      await api('POST', `/api/v1/platform/webhooks/${hook.id}/ping`, { token: c.manager.accessToken });
      const [failed] = await eventually(`the attempt to ${url}`, async () => {
        const ds = await deliveries(c, hook);
        return ds[0]?.attempts >= 1 && ds[0].status !== 'pending' && ds;
      });
      outcomes.push({ last_error: failed.last_error, last_status_code: failed.last_status_code, last_response_body: failed.last_response_body });
      await api('DELETE', `/api/v1/platform/webhooks/${hook.id}`, { token: c.manager.accessToken });
    }
    expect(outcomes).toEqual(targets.map(() => ({ last_error: NO_ANSWER, last_status_code: null, last_response_body: null })));
  });

  it('gives a connection 3 seconds to be up (TLS included), not the 10 s of an answer', { timeout: 30_000 }, async () => {
    // A port that accepts the connection and never answers the TLS handshake (as a filtered or stalled host would).
    const held: { opened: number; closed?: number }[] = [];
    const silent = net.createServer((socket) => {
      const entry: { opened: number; closed?: number } = { opened: Date.now() };
      held.push(entry);
      socket.on('close', () => (entry.closed = Date.now()));
      socket.on('error', () => {});
      socket.resume(); // read (and drop) the ClientHello, so that the worker's close is seen
    });
    await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', () => resolve()));
    try {
      const c = await managedCommunity();
      const res = await api('POST', '/api/v1/platform/webhooks', {
        token: c.manager.accessToken,
        body: { community_id: c.communityId, url: `https://127.0.0.1:${(silent.address() as net.AddressInfo).port}/hook`, events: ['event.created'] },
      });
      const hook = { id: res.body.data.id as string, secret: '', path: '' };
      await api('POST', `/api/v1/platform/webhooks/${hook.id}/ping`, { token: c.manager.accessToken });
      const failed = await eventually('the attempt given up', async () => {
        const [d] = await deliveries(c, hook);
        return d?.status === 'retrying' && d;
      });
      expect(failed).toMatchObject({ last_error: NO_ANSWER, last_status_code: null });
      const first = await eventually('the connection closed by the worker', async () => held[0]?.closed !== undefined && held[0]);
      expect(first.closed! - first.opened).toBeGreaterThanOrEqual(2_500);
      expect(first.closed! - first.opened).toBeLessThan(9_000);
      await api('DELETE', `/api/v1/platform/webhooks/${hook.id}`, { token: c.manager.accessToken });
    } finally {
      silent.close();
    }
  });

  it('gives a receiver 10 seconds to answer', { timeout: 30_000 }, async () => {
    const c = await managedCommunity();
    const hook = await createWebhook(c, ['event.created']);
    receiver.answer(hook.path, [{ hang: true }]);
    await api('POST', `/api/v1/platform/webhooks/${hook.id}/ping`, { token: c.manager.accessToken });
    const [first] = await receiver.waitFor(hook.path, (rs) => rs.length >= 1);
    const timedOut = await eventually(
      'the timeout recorded',
      async () => {
        const [d] = await deliveries(c, hook);
        return d?.status === 'retrying' && d;
      },
      20_000,
    );
    // The same record as any other attempt without an answer (the log says it was the timeout).
    expect(timedOut.last_error).toBe(NO_ANSWER);
    expect(timedOut.last_status_code).toBeNull();
    expect(Date.now() - first!.at).toBeGreaterThanOrEqual(9_500);
    await api('DELETE', `/api/v1/platform/webhooks/${hook.id}`, { token: c.manager.accessToken });
  });
});

describe('operating an endpoint: order, filters, recovery', () => {
  it('every body carries `sequence`, growing with the changes; message_id is the webhook-id header (webhook_id its deprecated name)', async () => {
    const c = await managedCommunity();
    const hook = await createWebhook(c, ['event.created', 'event.updated']);
    const event = await platformEvent(c, 'First');
    for (const title of ['Second', 'Third']) {
      const res = await api('PATCH', `/api/v1/platform/events/${event.event_id}`, { token: c.manager.accessToken, body: { title } });
      expect(res.status).toBe(200);
    }
    const got = await receiver.waitFor(hook.path, (rs) => rs.length >= 3);
    const sequences = got.map((r) => (r.payload as any).sequence as number);
    expect(sequences.every((n) => Number.isInteger(n))).toBe(true);
    expect([...sequences].sort((a, b) => a - b)).toEqual(sequences);
    expect(new Set(sequences).size).toBe(3);
    for (const r of got) expect(verifyWebhook(hook.secret, r)).toEqual(r.payload);
    const listed = await eventually('all delivered', async () => {
      const all = await deliveries(c, hook);
      return all.length === 3 && all.every((d) => d.status === 'succeeded') && all;
    });
    for (const d of listed) {
      const sent = got.find((r) => r.headers['webhook-id'] === d.message_id)!;
      expect(sent, d.message_id).toBeDefined();
      expect(d.webhook_id).toBe(d.message_id);
      expect(d.sequence).toBe((sent.payload as any).sequence);
      expect(d.payload).toEqual(sent.payload);
    }
  });

  it('under a retry a newer change can arrive first: its higher `sequence` says which is newer', async () => {
    const c = await managedCommunity();
    const hook = await createWebhook(c, ['event.created', 'event.updated']);
    receiver.answer(hook.path, [{ status: 503 }]);
    const event = await platformEvent(c, 'Created');
    await receiver.waitFor(hook.path, (rs) => rs.length >= 1);
    // The created delivery waits for its retry (about 1 s); the update is sent meanwhile.
    await api('PATCH', `/api/v1/platform/events/${event.event_id}`, { token: c.manager.accessToken, body: { title: 'Updated' } });
    const got = await receiver.waitFor(hook.path, (rs) => rs.length >= 3);
    expect(got.map((r) => r.payload.type)).toEqual(['event.created', 'event.updated', 'event.created']);
    const [failedCreate, update, retriedCreate] = got as [ReceivedWebhook, ReceivedWebhook, ReceivedWebhook];
    expect(retriedCreate.headers['webhook-id']).toBe(failedCreate.headers['webhook-id']);
    // A receiver keeping the highest sequence per event keeps the update.
    expect((retriedCreate.payload as any).sequence).toBeLessThan((update.payload as any).sequence);
    expect(update.payload.data.title).toBe('Updated');
  });

  it('lists deliveries by status and time (?status, ?since, ?until), the pagination counting what matches; a bad filter is 422', async () => {
    const c = await managedCommunity();
    const hook = await createWebhook(c, ['event.created']);
    await db()`
      insert into app.webhook_deliveries (endpoint_id, event_type, payload, status, attempts, next_attempt_at, last_status_code, last_error, created_at)
      select ${hook.id}, 'event.created', jsonb_build_object('type', 'event.created', 'timestamp', now(), 'data', jsonb_build_object('n', g)),
             case when g % 3 = 0 then 'succeeded' else 'failed' end, 3, null, 500, 'HTTP 500',
             timestamptz '2026-01-01 00:00:00+00' + make_interval(hours => g)
        from generate_series(1, 12) g`;
    const list = (query: string) => api('GET', `/api/v1/platform/webhooks/${hook.id}/deliveries?limit=100&${query}`, { token: c.manager.accessToken });
    const failed = await list('status=failed');
    expect(failed.status).toBe(200);
    expect(failed.body.data.map((d: any) => d.payload.data.n)).toEqual([11, 10, 8, 7, 5, 4, 2, 1]);
    expect(failed.body.pagination.total_count).toBe(8);
    const window = await list(`since=${encodeURIComponent('2026-01-01T03:00:00Z')}&until=${encodeURIComponent('2026-01-01T06:00:00+00:00')}`);
    expect(window.body.data.map((d: any) => d.payload.data.n)).toEqual([5, 4, 3]);
    const both = await list('status=succeeded&since=2026-01-01T06:00:00Z');
    expect(both.body.data.map((d: any) => d.payload.data.n)).toEqual([12, 9, 6]);
    for (const bad of ['status=lost', 'since=yesterday', 'until=2026-13-01T00:00:00Z', 'status=failed&status=succeeded']) {
      const res = await list(bad);
      expect(res.status, bad).toBe(422);
      expect(res.body.error).toBe('validation_error');
    }
  });

  it('recovers everything failed since T in one call, oldest first, after the endpoint was turned off and on again; 409 while off', async () => {
    const c = await managedCommunity();
    const hook = await createWebhook(c, ['event.created']);
    // 25 deliveries that failed (past their retries) over the last hours; the endpoint was turned off.
    await failedDeliveries(db(), hook.id, 25, '26 hours', '1 hour');
    await db()`update app.webhook_endpoints set active = false, disabled_reason = 'failing' where id = ${hook.id}`;
    const since = (await db()`select (now() - interval '20 hours' - interval '30 minutes') as t`)[0]!.t as Date;
    const recover = (body: unknown, token = c.manager.accessToken) => api('POST', `/api/v1/platform/webhooks/${hook.id}/recover`, { token, body });

    const off = await recover({ since: since.toISOString() });
    expect(off.status).toBe(409);
    expect(off.body.error).toBe('webhook_inactive');
    expect((await api('PATCH', `/api/v1/platform/webhooks/${hook.id}`, { token: c.manager.accessToken, body: { active: true } })).status).toBe(200);

    const stranger = await registerUser('hookstranger');
    expect((await recover({ since: since.toISOString() }, stranger.accessToken)).status).toBe(403);
    expect((await api('POST', `/api/v1/platform/webhooks/${crypto.randomUUID()}/recover`, { token: c.manager.accessToken, body: { since: since.toISOString() } })).status).toBe(404);
    for (const bad of [{}, { since: 'last tuesday' }, { since: since.toISOString(), until: 42 }]) {
      const res = await recover(bad);
      expect(res.status, JSON.stringify(bad)).toBe(422);
    }

    // Those queued in the last 20.5 hours: n = 6..25, and not before `until`.
    const res = await recover({ since: since.toISOString(), until: new Date(Date.now() - 30 * 60_000).toISOString() });
    expect(res.status, res.text).toBe(202);
    expect(res.body.data).toEqual({ recovered: 20, remaining: 0 });
    const got = await receiver.waitFor(hook.path, (rs) => rs.length >= 20, { what: '20 recovered deliveries', timeoutMs: 20_000 });
    expect(got.map((r) => r.payload.data.n)).toEqual(Array.from({ length: 20 }, (_, i) => i + 6));
    for (const r of got) expect(verifyWebhook(hook.secret, r)).toEqual(r.payload);
    const after = await eventually('the recovered ones succeeded', async () => {
      const all = await deliveries(c, hook);
      return all.filter((d) => d.status === 'succeeded').length === 20 && all;
    });
    expect(after.filter((d: any) => d.status === 'failed').map((d: any) => d.payload.data.n).sort((a: number, b: number) => a - b)).toEqual([1, 2, 3, 4, 5]);
    // Recovering again finds nothing failed in the range.
    expect((await recover({ since: since.toISOString() })).body.data).toEqual({ recovered: 0, remaining: 0 });
  });
});

describe('a URL change (security review round 5)', () => {
  it('deliveries queued for the old URL never go to the new one: not sent, not recovered, not replayed; new ones are', async () => {
    const c = await managedCommunity();
    const hook = await createWebhook(c, ['event.created']);
    // Failed deliveries of the old URL (past their retries), queued over the last hours.
    await failedDeliveries(db(), hook.id, 30, '3 hours', '1 minute');
    // One waiting for its retry at the old URL.
    receiver.answer(hook.path, [{ status: 503 }, { status: 503 }, { status: 503 }]);
    const waiting = await platformEvent(c, 'Waiting at the old URL');
    await receiver.waitFor(hook.path, (rs) => rs.length >= 1);

    // The manager aims the endpoint at someone else.
    const victim = `/victim-${tag()}`;
    const changed = await api('PATCH', `/api/v1/platform/webhooks/${hook.id}`, { token: c.manager.accessToken, body: { url: receiver.url(victim) } });
    expect(changed.status).toBe(200);
    const recovered = await api('POST', `/api/v1/platform/webhooks/${hook.id}/recover`, {
      token: c.manager.accessToken,
      body: { since: new Date(Date.now() - 24 * 3_600_000).toISOString() },
    });
    expect(recovered.status).toBe(202);
    expect(recovered.body.data).toEqual({ recovered: 0, remaining: 0 });
    const all = await deliveries(c, hook);
    const old = all.find((d) => d.payload.data.n === 1)!;
    const replay = await api('POST', `/api/v1/platform/webhooks/${hook.id}/deliveries/${old.id}/replay`, { token: c.manager.accessToken });
    expect(replay.status).toBe(409);
    expect(replay.body.error).toBe('webhook_url_changed');
    // The one that waited for its retry failed with the change.
    await eventually('the waiting delivery to fail with the change', async () => {
      const retried = (await deliveries(c, hook)).find((d) => d.payload.data.title === waiting.title)!;
      return retried.status === 'failed' && retried.last_error === "the endpoint's URL changed after it was queued";
    });

    // What is queued from now on goes to the new URL, and only that.
    const fresh = await platformEvent(c, 'After the change');
    const got = await receiver.waitFor(victim, (rs) => rs.length >= 1);
    await new Promise((resolve) => setTimeout(resolve, 1500)); // a retry of the old one would have come by now
    const atVictim = receiver.received.filter((r) => r.path === victim);
    expect(atVictim.map((r) => r.payload.data.title)).toEqual([fresh.title]);
    expect(got[0]!.payload.data.title).toBe('After the change');
  });
});

describe('recover is rate-limited per endpoint (security review round 5)', () => {
  // A gateway of its own with no job worker: the recovered deliveries wait, none is sent.
  const gateway = ownGateway({ WORKER: 'off' });

  it('at most 10,000 deliveries an hour: the next call is 429 rate_limited with Retry-After', async () => {
    const email = `hookrate-${tag()}@example.com`;
    const json = { 'content-type': 'application/json' };
    await fetch(`${gateway.env.baseUrl}/api/auth/register`, { method: 'POST', headers: json, body: JSON.stringify({ email, password: 'password-hooks' }) });
    const login = await fetch(`${gateway.env.baseUrl}/api/auth/login`, { method: 'POST', headers: json, body: JSON.stringify({ email, password: 'password-hooks' }) });
    const auth = { ...json, authorization: `Bearer ${((await login.json()) as { access_token: string }).access_token}` };
    const [community] = await gateway.sql<{ id: string }[]>`select admin.create_community(${`Rate ${tag()}`}, null, '{}', ${email}) as id`;
    const created = await fetch(`${gateway.env.baseUrl}/api/v1/platform/webhooks`, {
      method: 'POST',
      headers: auth,
      body: JSON.stringify({ community_id: community!.id, url: receiver.url(`/rate-${tag()}`), events: ['event.created'] }),
    });
    const hookId = ((await created.json()) as { data: { id: string } }).data.id;
    await failedDeliveries(gateway.sql, hookId, 10_005, '2 hours', '0.1 second');
    const recover = () =>
      fetch(`${gateway.env.baseUrl}/api/v1/platform/webhooks/${hookId}/recover`, { method: 'POST', headers: auth, body: JSON.stringify({ since: new Date(Date.now() - 3 * 3_600_000).toISOString() }) });
    const first = await recover();
    expect(first.status).toBe(202);
    expect(((await first.json()) as { data: unknown }).data).toEqual({ recovered: 10_000, remaining: 5 });
    // They fail again (the receiver was down): recovering them all again at once is refused for the hour.
    await gateway.sql`update app.webhook_deliveries set status = 'failed', next_attempt_at = null where endpoint_id = ${hookId}`;
    const second = await recover();
    expect(second.status).toBe(429);
    expect(((await second.json()) as { error: string }).error).toBe('rate_limited');
    expect(Number(second.headers.get('retry-after'))).toBeGreaterThan(3000);
  });
});

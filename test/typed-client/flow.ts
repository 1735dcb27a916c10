// A client program as a client developer writes one, with nothing of this
// repository but its served OpenAPI document: types generated from
// /api/docs/openapi.json by openapi-typescript (into generated/, at test time,
// not committed) and requests sent with openapi-fetch. It drives a flow over
// every area of the interface. test/http/typed-client.test.ts generates the
// types, compiles this file with `tsc --strict` (tsconfig.json beside it)
// and runs it against the test gateway.
//
// It is written as natural client code: numbers for numeric parameters,
// required fields read without `?.`, errors narrowed by their `error` code.
import assert from 'node:assert/strict';
import createClient, { type Middleware } from 'openapi-fetch';
import type { components, paths } from './generated/openapi.ts';

type Task = components['schemas']['Task'];
type Deal = components['schemas']['Deal'];

/** What the flow needs that no endpoint makes: an operator creates communities. */
export interface Operator {
  createCommunity(name: string, description: string, tags: string[], managerEmail: string): Promise<string>;
}

export interface FlowOptions {
  baseUrl: string;
  operator: Operator;
  /** Where requests go (default: globalThis.fetch). */
  fetch?: (request: Request) => Promise<Response>;
}

/** What the flow did, for the test to report. */
export interface FlowReport {
  requests: number;
  areas: string[];
}

/** A client that sends `Authorization: Bearer <token>` when a token is set. */
function api(options: FlowOptions, report: FlowReport) {
  let token: string | undefined;
  const client = createClient<paths>({ baseUrl: options.baseUrl, fetch: options.fetch });
  const auth: Middleware = {
    onRequest({ request }) {
      report.requests++;
      if (token) request.headers.set('Authorization', `Bearer ${token}`);
      return request;
    },
  };
  client.use(auth);
  return Object.assign(client, {
    signIn(value: string | undefined) {
      token = value;
    },
  });
}

export async function clientFlow(options: FlowOptions): Promise<FlowReport> {
  const report: FlowReport = { requests: 0, areas: [] };
  const area = (name: string) => report.areas.push(name);
  const client = api(options, report);
  const suffix = Math.random().toString(36).slice(2, 10);
  const email = `typed-${suffix}@example.com`;
  const password = 'correct horse battery staple';

  // -------------------------------------------------------------------------
  area('health');
  {
    const { data } = await client.GET('/health');
    assert.equal(data?.status, 'ok');
  }

  // -------------------------------------------------------------------------
  area('auth');
  let refreshToken: string;
  {
    const registered = await client.POST('/api/auth/register', { body: { email, password, name: 'Ada Typed' } });
    assert.ok(registered.data, 'register');
    assert.equal(registered.data.email, email);

    const duplicate = await client.POST('/api/auth/register', { body: { email, password } });
    assert.equal(duplicate.response.status, 400);
    assert.equal(duplicate.error?.error, 'email_taken');

    const login = await client.POST('/api/auth/login', { body: { email, password } });
    assert.ok(login.data, 'login');
    const seconds: number = login.data.expires_in;
    assert.ok(seconds > 0);

    const refreshed = await client.POST('/api/auth/refresh', { body: { refresh_token: login.data.refresh_token } });
    assert.ok(refreshed.data, 'refresh');
    refreshToken = refreshed.data.refresh_token;
    client.signIn(refreshed.data.access_token);

    const verified = await client.POST('/api/auth/verify', { body: { token: refreshed.data.access_token } });
    assert.equal(verified.data?.user_id, registered.data.user_id);

    const recover = await client.POST('/api/auth/recover', { body: { email } });
    assert.equal(recover.data?.success, true);
  }

  // -------------------------------------------------------------------------
  area('profile and hats');
  let myNode: string;
  let hatId: string;
  {
    const { data: profile } = await client.GET('/api/mobile/profile');
    assert.ok(profile);
    assert.ok(profile.data.node_id, 'a new account has a node');
    myNode = profile.data.node_id;
    const maxHats: number = profile.data.max_hats;
    assert.ok(maxHats >= 1);

    const renamed = await client.PATCH('/api/mobile/profile', { body: { name: 'Ada Lovelace' } });
    assert.equal(renamed.data?.data.name, 'Ada Lovelace');

    const { data: types } = await client.GET('/api/mobile/hat_types');
    assert.ok(types);
    const professional = types.data.find((type) => type.id === 'professional');
    assert.ok(professional);

    const created = await client.POST('/api/mobile/hats', {
      body: { hat: { name: 'At work', hat_type: professional.id, description: 'Product design' } },
    });
    assert.ok(created.data);
    assert.equal(created.data.data.is_primary, true);
    hatId = created.data.data.id;

    const { data: hats } = await client.GET('/api/mobile/hats');
    assert.deepEqual(
      hats?.data.map((hat) => hat.hat_type),
      ['professional'],
    );
  }

  // -------------------------------------------------------------------------
  area('communities');
  const communityName = `Typed Climbers ${suffix}`;
  const communityId = await options.operator.createCommunity(communityName, 'Bouldering evenings', ['climbing'], email);
  {
    const { data: mine } = await client.GET('/api/mobile/communities', { params: { query: { limit: 10, offset: 0 } } });
    assert.ok(mine);
    const membership = mine.data.find((community) => community.id === communityId);
    assert.ok(membership);
    assert.equal(membership.role, 'manager');
    assert.equal(mine.pagination.page_size, 10);

    const { data: found } = await client.GET('/api/mobile/communities/search', { params: { query: { q: communityName, limit: 5 } } });
    assert.ok(found);
    assert.equal(found.data[0]?.is_manager, true);

    const { data: one } = await client.GET('/api/mobile/communities/{id}', { params: { path: { id: communityId } } });
    assert.ok(one);
    assert.equal(one.data.user_role, 'manager');
    assert.deepEqual(
      one.data.managers.map((manager) => manager.id),
      [myNode],
    );

    const { data: members } = await client.GET('/api/mobile/communities/{id}/members', {
      params: { path: { id: communityId }, query: { limit: 20, offset: 0 } },
    });
    assert.equal(members?.pagination.total_count, 1);

    const again = await client.POST('/api/mobile/communities/{id}/join', { params: { path: { id: communityId } } });
    assert.equal(again.response.status, 400);
    // 400 here is the Flagged body: {success: false, error: <message>}.
    assert.ok(again.error && 'success' in again.error);
    assert.equal(again.error.success, false);

    const { data: page } = await client.GET('/api/community/{community_id}', { params: { path: { community_id: communityId } } });
    assert.equal(page?.data.name, communityName);
  }

  // -------------------------------------------------------------------------
  area('platform');
  let eventId: string;
  let eventNodeId: string;
  let venueNodeId: string;
  {
    const starts = new Date(Date.now() + 60 * 60 * 1000);
    const { data: pushed, response } = await client.POST('/api/v1/platform/events', {
      body: {
        community_id: communityId,
        external_platform: 'platform_a',
        external_id: `evt-${suffix}`,
        title: 'Bouldering night',
        description: 'Open session for all levels.',
        date: starts.toISOString(),
        end_time: new Date(starts.getTime() + 3 * 60 * 60 * 1000).toISOString(),
        venue: { name: `Boulderhalle ${suffix}`, latitude: 52.5451, longitude: 13.3592 },
      },
    });
    assert.equal(response.status, 201);
    assert.ok(pushed);
    assert.ok(pushed.data.venue);
    eventId = pushed.data.event_id;
    eventNodeId = pushed.data.event_node_id;
    venueNodeId = pushed.data.venue.venue_node_id;

    const attendee = await client.POST('/api/v1/platform/events/{event_node_id}/attendees', {
      params: { path: { event_node_id: eventNodeId } },
      body: { email: `guest-${suffix}@example.com`, name: 'Grace Guest' },
    });
    assert.equal(attendee.data?.data.user_created, true);

    const checkin = await client.POST('/api/v1/platform/events/{event_node_id}/checkins', {
      params: { path: { event_node_id: eventNodeId } },
      body: { email: `guest-${suffix}@example.com` },
    });
    assert.equal(checkin.data?.data.already_checked_in, false);

    const form = await client.POST('/api/v1/forms', { body: { form: 'contact', message: 'Beginner courses?' } });
    assert.equal(form.data?.success, true);
  }

  // -------------------------------------------------------------------------
  area('webhooks');
  {
    const registered = await client.POST('/api/v1/platform/webhooks', {
      body: {
        community_id: communityId,
        url: 'https://hooks.example.com/community',
        events: ['member.left', 'event.updated'],
        description: 'Sync to our CRM',
      },
    });
    assert.equal(registered.response.status, 201);
    assert.ok(registered.data);
    const webhook = registered.data.data;
    const secret: string = webhook.secret;
    assert.match(secret, /^whsec_/);
    assert.equal(webhook.active, true);

    const { data: listed } = await client.GET('/api/v1/platform/webhooks', { params: { query: { community_id: communityId } } });
    assert.ok(listed);
    const mine = listed.data.find((hook) => hook.id === webhook.id);
    assert.ok(mine);
    assert.deepEqual(mine.events, ['event.updated', 'member.left']);
    assert.equal(mine.description, 'Sync to our CRM');
    assert.equal('secret' in mine, false);

    const paused = await client.PATCH('/api/v1/platform/webhooks/{id}', { params: { path: { id: webhook.id } }, body: { active: false } });
    assert.equal(paused.data?.data.active, false);
    const ping = await client.POST('/api/v1/platform/webhooks/{id}/ping', { params: { path: { id: webhook.id } } });
    assert.equal(ping.response.status, 409);
    assert.equal(ping.error?.error, 'webhook_inactive');

    const rotated = await client.POST('/api/v1/platform/webhooks/{id}/rotate_secret', { params: { path: { id: webhook.id } } });
    assert.ok(rotated.data);
    assert.notEqual(rotated.data.data.secret, secret);

    const { data: deliveries } = await client.GET('/api/v1/platform/webhooks/{id}/deliveries', {
      params: { path: { id: webhook.id }, query: { limit: 10, offset: 0 } },
    });
    assert.ok(deliveries);
    // Nothing was sent: paused endpoints get no deliveries, and nothing changed meanwhile.
    assert.equal(deliveries.pagination.total_count, 0);
    assert.equal(deliveries.pagination.page_size, 10);
    assert.deepEqual(deliveries.data, []);

    const removed = await client.DELETE('/api/v1/platform/webhooks/{id}', { params: { path: { id: webhook.id } } });
    assert.equal(removed.response.status, 204);
    const gone = await client.GET('/api/v1/platform/webhooks/{id}/deliveries', { params: { path: { id: webhook.id } } });
    assert.equal(gone.error?.error, 'webhook_not_found');
  }

  // -------------------------------------------------------------------------
  area('events and check-ins');
  {
    const { data: upcoming } = await client.GET('/api/mobile/events/upcoming');
    assert.ok(upcoming);
    const event = upcoming.find((item) => item.id === eventId);
    assert.ok(event);
    assert.equal(event.description, 'Open session for all levels.');
    assert.ok(event.end_time);
    assert.deepEqual(event.external_platforms, []);

    const { data: byNode } = await client.GET('/api/mobile/events/{id}', { params: { path: { id: eventNodeId } } });
    assert.equal(byNode?.id, eventId);

    const venue = await client.POST('/api/mobile/venues/{venue_id}/checkin', {
      params: { path: { venue_id: venueNodeId } },
      body: { hat_id: hatId, visibility: 'public' },
    });
    assert.equal(venue.response.status, 201);
    assert.ok(venue.data && 'checkin' in venue.data);
    assert.equal(venue.data.type, 'event');
    assert.equal(venue.data.checkin.event_id, eventId);

    const { data: current } = await client.GET('/api/mobile/checkins');
    assert.ok(current);
    const first = current.checkins[0];
    assert.ok(first && first.type === 'event');
    assert.equal(first.event_title, 'Bouldering night');

    const out = await client.DELETE('/api/mobile/events/{event_id}/checkin', { params: { path: { event_id: eventId } } });
    assert.equal(out.data?.message, 'checked out');

    const back = await client.POST('/api/mobile/events/{event_id}/checkin', {
      params: { path: { event_id: eventId } },
      body: { hat_id: hatId, visibility: 'anonymous' },
    });
    assert.equal(back.response.status, 201);
    assert.equal(back.data?.checkin.hat_id, hatId);
  }

  // -------------------------------------------------------------------------
  area('calendars');
  {
    const { data: feed, response } = await client.POST('/api/mobile/calendar/feed');
    assert.equal(response.status, 201);
    assert.ok(feed);
    assert.equal(feed.data.webcal_url, feed.data.url.replace(/^https?:/, 'webcal:'));
    // The URL is what a calendar app subscribes to; its last segment is the feed's secret.
    const token = new URL(feed.data.url).pathname.replace(/^\/cal\/(.+)\.ics$/, '$1');
    const calendar = await client.GET('/cal/{token}.ics', { params: { path: { token } }, parseAs: 'text' });
    assert.equal(calendar.response.status, 200);
    assert.match(calendar.response.headers.get('content-type') ?? '', /^text\/calendar/);
    assert.ok(calendar.data?.includes('SUMMARY:Bouldering night'));
    const etag = calendar.response.headers.get('etag');
    assert.ok(etag);
    const unchanged = await client.GET('/cal/{token}.ics', { params: { path: { token }, header: { 'if-none-match': etag } }, parseAs: 'text' });
    assert.equal(unchanged.response.status, 304);

    const revoked = await client.DELETE('/api/mobile/calendar/feed');
    assert.equal(revoked.response.status, 204);
    const ended = await client.GET('/cal/{token}.ics', { params: { path: { token } }, parseAs: 'text' });
    assert.equal(ended.response.status, 404);
  }

  // -------------------------------------------------------------------------
  area('connections');
  {
    const other = api(options, report);
    const otherEmail = `typed-other-${suffix}@example.com`;
    await other.POST('/api/auth/register', { body: { email: otherEmail, password, name: 'Grace Hopper' } });
    const login = await other.POST('/api/auth/login', { body: { email: otherEmail, password } });
    assert.ok(login.data);
    other.signIn(login.data.access_token);
    const { data: theirs } = await other.GET('/api/mobile/profile');
    assert.ok(theirs?.data.node_id);

    const made = await client.POST('/api/mobile/connections', {
      body: {
        target_node_id: theirs.data.node_id,
        event_id: eventId,
        my_hat_id: hatId,
        notes: 'Works on accessible maps.',
        strength: 'medium',
        tags: ['design'],
      },
    });
    assert.ok(made.data);
    assert.equal(made.data.connection.connection_type, 'in_event');
    const connectionId = made.data.connection.id;

    const changed = await client.PATCH('/api/mobile/connections/{id}', {
      params: { path: { id: connectionId } },
      body: { strength: 'strong', tags: null },
    });
    assert.equal(changed.data?.connection.strength, 'strong');

    const { data: recent } = await client.GET('/api/mobile/connections/recent');
    assert.equal(recent?.connections[0]?.id, connectionId);
    const { data: all } = await client.GET('/api/mobile/connections');
    assert.equal(all?.connections.length, 1);
    const { data: atEvent } = await client.GET('/api/mobile/events/{event_id}/connections', { params: { path: { event_id: eventId } } });
    assert.equal(atEvent?.connections[0]?.target_node_id, theirs.data.node_id);
    const { data: one } = await client.GET('/api/mobile/connections/{id}', { params: { path: { id: connectionId } } });
    assert.equal(one?.connection.notes, 'Works on accessible maps.');

    const hidden = await other.GET('/api/mobile/connections/{id}', { params: { path: { id: connectionId } } });
    assert.equal(hidden.response.status, 404);
    assert.equal(hidden.error?.error, 'connection_not_found');
  }

  // -------------------------------------------------------------------------
  area('tasks and deals');
  {
    const created = await client.POST('/api/mobile/tasks', {
      body: { title: 'Call Acme about the renewal', deal_context: { company: `Acme ${suffix}`, deal_value: 12000 } },
    });
    assert.ok(created.data);
    const task: Task = created.data.task;
    assert.equal(task.meta.status, 'pending');
    assert.equal(task.meta.deal_context?.deal_value, 12000);

    const { data: list } = await client.GET('/api/mobile/tasks', { params: { query: { status: 'pending', page: 1, limit: 10 } } });
    assert.equal(list?.tasks[0]?.id, task.id);

    const { data: deals } = await client.GET('/api/mobile/deals');
    assert.ok(deals);
    const deal: Deal | undefined = deals.deals.find((item) => item.meta.company === `Acme ${suffix}`);
    assert.ok(deal);
    assert.equal(deal.meta.current_task_id, task.id);
    assert.equal(deal.meta.deal_value, 12000);

    const started = await client.POST('/api/mobile/deals/{id}/start_task', { params: { path: { id: deal.id } } });
    assert.ok(started.data);
    const startedTask = await client.GET('/api/mobile/tasks/{id}', { params: { path: { id: task.id } } });
    assert.equal(startedTask.data?.task.meta.status, 'in_progress');

    const completed = await client.POST('/api/mobile/deals/{id}/complete_task', {
      params: { path: { id: deal.id } },
      body: { new_next_action: 'Send Acme the quote' },
    });
    assert.ok(completed.data);
    const quoteTaskId = completed.data.deal.meta.current_task_id;
    assert.ok(quoteTaskId);
    assert.equal(completed.data.deal.meta.next_action, 'Send Acme the quote');

    const linked = await client.POST('/api/mobile/tasks/{id}/complete_and_link', {
      params: { path: { id: quoteTaskId } },
      body: { next_task: { title: 'Sign the contract', status: 'in_progress' } },
    });
    assert.ok(linked.data);
    assert.equal(linked.data.completed_task.meta.status, 'completed');
    assert.equal(linked.data.next_task.meta.deal_context?.company, `Acme ${suffix}`);
    const { data: dealNow } = await client.GET('/api/mobile/deals/{id}', { params: { path: { id: deal.id } } });
    assert.equal(dealNow?.deal.meta.current_task_id, linked.data.next_task.id);

    const { data: chain } = await client.GET('/api/mobile/tasks/{id}/chain', {
      params: { path: { id: task.id }, query: { direction: 'forward', depth: 5 } },
    });
    assert.deepEqual(
      chain?.chain.map((item) => item.meta.title),
      ['Call Acme about the renewal', 'Send Acme the quote', 'Sign the contract'],
    );
    const { data: next } = await client.GET('/api/mobile/tasks/{id}/next', { params: { path: { id: task.id } } });
    assert.equal(next?.next_task?.id, quoteTaskId);
    const { data: previous } = await client.GET('/api/mobile/tasks/{id}/previous', { params: { path: { id: task.id } } });
    assert.equal(previous?.previous_task, null);

    const { data: grouped } = await client.GET('/api/mobile/tasks/by_company');
    const company = grouped?.companies.find((item) => item.company_name === `Acme ${suffix}`);
    assert.equal(company?.task_count, 3);
    assert.equal(company?.active_task?.id, linked.data.next_task.id);
    const { data: search } = await client.GET('/api/mobile/tasks/search', { params: { query: { company: suffix } } });
    assert.equal(search?.tasks.length, 3);

    const extra = await client.POST('/api/mobile/tasks', { body: { title: 'Book the venue' } });
    assert.ok(extra.data);
    const link = await client.POST('/api/mobile/tasks/{id}/link', {
      params: { path: { id: linked.data.next_task.id } },
      body: { destination_task_id: extra.data.task.id, transition_meta: { reason: 'contract signed' } },
    });
    assert.equal(link.data?.link.event.type, 'task_transition');
    const cycle = await client.POST('/api/mobile/tasks/{id}/link', {
      params: { path: { id: extra.data.task.id } },
      body: { destination_task_id: task.id },
    });
    assert.equal(cycle.response.status, 422);
    assert.ok(cycle.error);
    assert.match(cycle.error.error, /circular/);

    const patched = await client.PATCH('/api/mobile/tasks/{id}', { params: { path: { id: extra.data.task.id } }, body: { description: 'Two rooms' } });
    assert.equal(patched.data?.task.meta.description, 'Two rooms');
    const begun = await client.POST('/api/mobile/tasks/{id}/start', { params: { path: { id: extra.data.task.id } } });
    assert.equal(begun.data?.task.meta.status, 'in_progress');
    const done = await client.POST('/api/mobile/tasks/{id}/complete', { params: { path: { id: extra.data.task.id } } });
    assert.equal(done.data?.task.meta.status, 'completed');
    const removed = await client.DELETE('/api/mobile/tasks/{id}', { params: { path: { id: extra.data.task.id } } });
    assert.equal(removed.response.status, 204);
    const gone = await client.GET('/api/mobile/tasks/{id}', { params: { path: { id: extra.data.task.id } } });
    assert.equal(gone.error?.error, 'task_not_found');
  }

  // -------------------------------------------------------------------------
  area('tokens');
  {
    const created = await client.POST('/api/docs/tokens', { body: { name: 'Typed client', permissions: ['/api/mobile/*'] } });
    assert.ok(created.data);
    assert.equal(created.data.token.usage_count, 0);
    const tokenClient = api(options, report);
    tokenClient.signIn(created.data.token_value);
    const { data: viaToken } = await tokenClient.GET('/api/mobile/profile');
    assert.equal(viaToken?.data.node_id, myNode);
    const outside = await tokenClient.GET('/api/docs/tokens');
    assert.equal(outside.response.status, 403);

    const { data: tokens } = await client.GET('/api/docs/tokens');
    const listed = tokens?.tokens.find((token) => token.id === created.data.token.id);
    assert.ok(listed);
    assert.ok(listed.usage_count >= 1);
    assert.equal(listed.community_id, null);

    // The live test executor takes an API token allowed on /api/docs/*.
    const docsToken = await client.POST('/api/docs/tokens', { body: { name: 'Docs', permissions: ['*'] } });
    assert.ok(docsToken.data);
    const tester = api(options, report);
    tester.signIn(docsToken.data.token_value);
    const { data: endpoints } = await tester.GET('/api/docs/endpoints');
    const profileEndpoint = endpoints?.find((endpoint) => endpoint.path === '/api/mobile/profile' && endpoint.http_method === 'GET');
    assert.ok(profileEndpoint);
    const { data: replay } = await tester.POST('/api/docs/test', {
      body: { endpoint_id: profileEndpoint.id, method: 'GET', path: '/api/mobile/profile' },
    });
    assert.equal(replay?.status, 200);
    const { data: calls } = await tester.GET('/api/docs/agent-calls', { params: { query: { limit: 5 } } });
    assert.deepEqual(calls?.data, []);

    const deactivated = await client.DELETE('/api/docs/tokens/{id}', { params: { path: { id: created.data.token.id } } });
    assert.equal(deactivated.data?.token.active, false);
    const refused = await tokenClient.GET('/api/mobile/profile');
    assert.equal(refused.response.status, 401);
  }

  // -------------------------------------------------------------------------
  area('leaving');
  {
    const left = await client.POST('/api/mobile/communities/{id}/leave', { params: { path: { id: communityId } } });
    assert.equal(left.response.status, 400);
    assert.ok(left.error);
    assert.match(left.error.error, /manager/);
    const out = await client.POST('/api/auth/logout', { body: { refresh_token: refreshToken } });
    assert.equal(out.data?.message, 'logged out');
    const ended = await client.GET('/api/mobile/profile');
    assert.equal(ended.response.status, 401);
  }

  return report;
}

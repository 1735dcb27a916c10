// A client program as a developer who picks openapi-zod-client writes one:
// the Zodios client it generated from /api/docs/openapi.json (into
// generated/, at test time, not committed; axios, with zod 3 checking every
// request and every answer against the document's schemas), and nothing
// else of this repository. test/process/typed-client-zodios.test.ts generates the
// client, compiles this file with `tsc --strict` (tsconfig.json beside it)
// and runs it against the test gateway.
//
// It goes where the generated schemas once failed to compile or to parse:
// nullable enums (a community's `user_role` for a non-member, a check-in's
// `visibility`, a connection's `connection_type` and `strength`), in answers
// and in requests, and the API token `permissions` pattern; and it sends an
// `Idempotency-Key` as the generated header parameter.
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import { createApiClient } from './generated/client.ts';

export interface ZodFlowOptions {
  baseUrl: string;
  /** What the flow needs that no endpoint makes: an operator creates communities. */
  operator: { createCommunity(name: string, description: string, tags: string[], managerEmail: string): Promise<string> };
}

/** A client signed in with `token` (axios sends the header with every request). */
function signedIn(baseUrl: string, token: string) {
  return createApiClient(baseUrl, { axiosConfig: { headers: { authorization: `Bearer ${token}` } } });
}

export async function zodClientFlow(options: ZodFlowOptions): Promise<{ requests: number }> {
  let requests = 0;
  const count = <T>(answer: Promise<T>): Promise<T> => {
    requests++;
    return answer;
  };
  const suffix = crypto.randomBytes(4).toString('hex');
  const password = `pw-${suffix}-zod-client`;
  const anonymous = createApiClient(options.baseUrl);

  // Accounts.
  const email = `zod-${suffix}@example.com`;
  const otherEmail = `zod-other-${suffix}@example.com`;
  await count(anonymous.post_auth_register({ email, password, name: 'Ada Lovelace' }));
  await count(anonymous.post_auth_register({ email: otherEmail, password, name: 'Grace Hopper' }));
  const mine = await count(anonymous.post_auth_login({ email, password }));
  const theirs = await count(anonymous.post_auth_login({ email: otherEmail, password }));
  const client = signedIn(options.baseUrl, mine.access_token);
  const other = signedIn(options.baseUrl, theirs.access_token);

  // A hat, sent twice with one Idempotency-Key: the second is the first's answer.
  const key = crypto.randomUUID();
  const hat = await count(client.post_hats({ hat: { name: 'At work', hat_type: 'professional' } }, { headers: { 'Idempotency-Key': key } }));
  const again = await count(client.post_hats({ hat: { name: 'At work', hat_type: 'professional' } }, { headers: { 'Idempotency-Key': key } }));
  assert.equal(again.data.id, hat.data.id);
  const hats = await count(client.get_hats());
  assert.equal(hats.data.length, 1);

  // A community: its manager's role, and a non-member's null one.
  const communityId = await options.operator.createCommunity(`Zod Climbers ${suffix}`, 'Bouldering evenings', ['climbing'], email);
  const managed = await count(client.get_communities_by_id({ params: { id: communityId } }));
  assert.equal(managed.data.user_role, 'manager');
  const outside = await count(other.get_communities_by_id({ params: { id: communityId } }));
  const role: 'member' | 'manager' | null = outside.data.user_role;
  assert.equal(role, null);

  // An event (pushed as a platform would), and a check-in with no visibility given (null).
  const pushed = await count(
    client.post_platform_events({
      community_id: communityId,
      external_platform: 'platform_a',
      external_id: `zod-${suffix}`,
      title: 'Bouldering night',
      description: 'Open session for all levels.',
      date: new Date(Date.now() - 30 * 60_000).toISOString(),
      end_time: new Date(Date.now() + 3 * 3600_000).toISOString(),
    }),
  );
  const eventId = pushed.data.event_id;
  const checkin = await count(client.post_events_by_event_id_checkin({ hat_id: hat.data.id, visibility: null }, { params: { event_id: eventId } }));
  assert.equal(checkin.checkin.visibility, 'anonymous');

  // A connection: made without a type or a strength, then its strength set and cleared.
  const them = await count(other.get_profile());
  assert.ok(them.data.node_id);
  const made = await count(client.post_connections({ target_node_id: them.data.node_id, notes: 'Works on accessible maps.' }));
  const strength: 'weak' | 'medium' | 'strong' | null = made.connection.strength;
  assert.equal(strength, null);
  const set = await count(client.patch_connections_by_id({ strength: 'strong' }, { params: { id: made.connection.id } }));
  assert.equal(set.connection.strength, 'strong');
  const cleared = await count(client.patch_connections_by_id({ strength: null }, { params: { id: made.connection.id } }));
  assert.equal(cleared.connection.strength, null);
  const listed = await count(client.get_connections());
  assert.equal(listed.connections[0]?.id, made.connection.id);

  // An API token whose permission the pattern checks (on the client, before sending).
  const token = await count(client.post_docs_tokens({ name: 'zod client', permissions: ['/api/mobile/*'] }));
  assert.deepEqual(token.token.permissions, ['/api/mobile/*']);
  await assert.rejects(() => client.post_docs_tokens({ name: 'bad', permissions: ['api/mobile'] }), /permissions|Invalid/);

  return { requests };
}

// Fixtures shared by the token and platform tests: API tokens made through
// the real endpoint, and communities made by the operator function.
import { expect } from 'vitest';
import { api, db, type TestUser } from '../helpers.ts';

export const SECRET = /^cbk_[A-Za-z0-9]{40}$/;

export interface CreatedToken {
  id: string;
  secret: string;
  token: Record<string, unknown>;
}

/** Creates an API token for the user through POST /api/docs/tokens (201 expected). */
export async function createToken(
  user: TestUser,
  body: { name?: string; permissions?: string[]; expires_at?: string | null; community_id?: string | null } = {},
): Promise<CreatedToken> {
  const res = await api('POST', '/api/docs/tokens', {
    token: user.accessToken,
    body: { name: 'test token', permissions: ['/*'], ...body },
  });
  expect(res.status, res.text).toBe(201);
  return { id: res.body.token.id, secret: res.body.token_value, token: res.body.token };
}

/** A community made by the operator function; `manager`, if given, manages it. */
export async function newCommunity(manager?: TestUser): Promise<string> {
  const [row] = await db()`
    select admin.create_community(${'club ' + Math.random().toString(36).slice(2)}, null, '{}', ${manager?.email ?? null}) as id`;
  return row!.id as string;
}

/** Makes the user a plain member of the community (not a manager). */
export async function joinCommunity(user: TestUser, communityId: string): Promise<void> {
  const res = await api('POST', `/api/mobile/communities/${communityId}/join`, { token: user.accessToken });
  expect(res.status, res.text).toBe(200);
}

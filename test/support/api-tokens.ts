// Fixtures shared by the token and platform tests: API tokens made through
// the real endpoint, and joining a community through it.
import { expect } from 'vitest';
import { api, type TestUser } from '../helpers.ts';

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

/** Makes the user a plain member of the community (not a manager). */
export async function joinCommunity(user: TestUser, communityId: string): Promise<void> {
  const res = await api('POST', `/api/mobile/communities/${communityId}/join`, { token: user.accessToken });
  expect(res.status, res.text).toBe(200);
}

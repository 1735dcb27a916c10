// Personal API tokens come from helper 9a's gateway/lib/api-tokens.ts
// (contract section 1). Until that branch is merged here, API-token secrets
// are recognised but refused.
import type { Sql } from '../gateway/lib/db.ts';
import { HttpError } from '../gateway/lib/errors.ts';

export interface ApiTokenOwner {
  tokenId: string;
  userId: string;
  communityId: string | null;
}

export function isApiTokenSecret(s: string): boolean {
  return /^cbk_[A-Za-z0-9]{40}$/.test(s);
}

export async function authenticateApiTokenForMcp(_sql: Sql, _secret: string, _path: string): Promise<ApiTokenOwner> {
  throw new HttpError(401, 'invalid_token', 'API tokens are not available yet');
}

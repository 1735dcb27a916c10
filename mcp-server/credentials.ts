// Who is calling: every /mcp request carries a bearer credential, either a
// personal API token (contract: gateway/core/auth/api-tokens.ts) or an OAuth access
// token issued by this server's authorization endpoints. The agent is the
// credential's owner.
import type { Sql } from '../gateway/core/database/pool.ts';
import type { RequestClaims } from '../gateway/core/database/transaction.ts';
import { HttpError, toHttpError } from '../gateway/core/web/errors.ts';
import { authenticateApiToken, isApiTokenSecret } from '../gateway/core/auth/api-tokens.ts';
import { claimsOf } from '../gateway/core/auth/identity.ts';

/** OAuth scopes: read tools need mcp:read, write tools mcp:write. Personal API tokens carry both. */
export const SCOPES = ['mcp:read', 'mcp:write'] as const;

export interface Agent {
  userId: string;
  kind: 'api_token' | 'oauth';
  credentialId: string;
  /** The OAuth client, for OAuth access tokens. */
  clientId: string | null;
  scopes: string[];
  /** The bearer secret itself (the SDK's AuthInfo wants it; never logged or stored). */
  token: string;
  expiresAt?: number;
  /** What its tools run as (gateway/core/auth/identity.ts). */
  claims: RequestClaims;
}

interface OAuthTokenRow {
  token_id: string;
  user_id: string;
  client_id: string;
  scopes: string[];
  resource: string | null;
  expires_at: Date;
}

/**
 * The agent behind a bearer secret. Throws HttpError 401 (invalid_token) for
 * an unknown, expired or revoked credential; 403 for an API token whose
 * permissions do not match the path (forbidden) or that is community-scoped
 * (community_scope_violation).
 */
export async function authenticateAgent(sql: Sql, token: string, path: string, resourceUrls: string[]): Promise<Agent> {
  if (isApiTokenSecret(token)) {
    // A token's permissions and community scope govern every path it is presented
    // on, /mcp included (SQL's: api.api_token_authenticate refuses, 403; the tools
    // check it again, private.mcp_agent).
    const owner = await authenticateApiToken(sql, token, path);
    return {
      userId: owner.userId,
      kind: 'api_token',
      credentialId: owner.tokenId,
      clientId: null,
      scopes: [...SCOPES],
      token,
      claims: claimsOf({ kind: 'api_token', token: owner }),
    };
  }
  let row: OAuthTokenRow | undefined;
  try {
    [row] = await sql<OAuthTokenRow[]>`select * from private.oauth_token_authenticate(${token})`;
  } catch (err) {
    const httpError = toHttpError(err);
    if (httpError.status === 401) throw new HttpError(401, 'invalid_token', 'invalid or expired access token');
    throw err;
  }
  if (!row) throw new HttpError(401, 'invalid_token', 'invalid or expired access token');
  if (row.resource && !resourceUrls.includes(row.resource.replace(/\/+$/, ''))) {
    throw new HttpError(401, 'invalid_token', 'the access token was issued for another resource');
  }
  return {
    userId: row.user_id,
    kind: 'oauth',
    credentialId: row.token_id,
    clientId: row.client_id,
    scopes: row.scopes,
    token,
    expiresAt: Math.floor(row.expires_at.getTime() / 1000),
    claims: claimsOf({ kind: 'oauth', userId: row.user_id, clientId: row.client_id, expiresAt: row.expires_at }),
  };
}

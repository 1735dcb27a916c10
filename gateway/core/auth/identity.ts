// The caller's database identity, made here and nowhere else: the claims a
// transaction runs with (request.jwt.claims, whose `role` picks the Postgres
// role; database/transaction.ts sets both), made from a credential that has
// been verified, for every door (the REST pipeline, the SSE stream, the
// websocket, the auth routes, the MCP process). SQL reads them with
// auth.uid() and auth.jwt() (its session, its API token, its community).
//
//   access token        its verified claims, as signed (jwt.ts): role
//                       authenticated, sub, aud, iss, iat, exp, email,
//                       session_id (the session logout ends)
//   API token           role authenticated, aud, sub (the owner), token_id,
//                       token_community_id (a community-scoped token's
//                       community, else null), exp when it expires
//   OAuth access token  role authenticated, aud, sub (the user), oauth_client_id, exp
//   none                role anon
//   the service-role key  role service_role, no user: the operator, on the
//                       routes that take it (/storage/v1: http/route.ts
//                       serviceRole), which the storage rules recognise
//   the gateway itself  no claims (null): the connection's own role, for the
//                       private functions only the processes call
//
// `exp` travels with every expiring credential so that what outlives its
// request (a stream, a websocket channel) ends with it.
// test/sql/identity.test.ts pins the claims of each kind as Postgres sees them.
import type { RequestClaims } from '../database/transaction.ts';
import type { ApiTokenAuthentication, ApiTokenInfo } from './api-tokens.ts';
import { AUDIENCE, type AccessClaims } from './jwt.ts';

/** A credential whose verification has succeeded (or none at all). */
export type VerifiedCredential =
  | { kind: 'anon' }
  | { kind: 'service_role' }
  | { kind: 'gateway' }
  | { kind: 'access_token'; claims: AccessClaims }
  | { kind: 'api_token'; token: ApiTokenAuthentication }
  | { kind: 'oauth'; userId: string; clientId: string; expiresAt: Date };

const ANON: RequestClaims = Object.freeze({ role: 'anon' });
const SERVICE_ROLE: RequestClaims = Object.freeze({ role: 'service_role' });

/** The claims `credential` runs with; null for the gateway's own role. */
export function claimsOf(credential: Exclude<VerifiedCredential, { kind: 'gateway' }>): RequestClaims;
export function claimsOf(credential: VerifiedCredential): RequestClaims | null;
export function claimsOf(credential: VerifiedCredential): RequestClaims | null {
  switch (credential.kind) {
    case 'anon':
      return ANON;
    case 'service_role':
      return SERVICE_ROLE;
    case 'gateway':
      return null;
    case 'access_token':
      // Verified (jwt.ts: role authenticated, a uuid sub), cached and frozen:
      // the same object for every request with the token, so its JSON is made once.
      return credential.claims;
    case 'api_token': {
      const { token } = credential;
      return {
        role: 'authenticated',
        aud: AUDIENCE,
        sub: token.userId,
        token_id: token.tokenId,
        token_community_id: token.communityId,
        ...(token.expiresAt ? { exp: epochSeconds(token.expiresAt) } : {}),
      };
    }
    case 'oauth':
      return {
        role: 'authenticated',
        aud: AUDIENCE,
        sub: credential.userId,
        oauth_client_id: credential.clientId,
        exp: epochSeconds(credential.expiresAt),
      };
  }
}

function epochSeconds(at: Date): number {
  return Math.floor(at.getTime() / 1000);
}

/**
 * Who a REST request (or stream) runs as, once its bearer credential is
 * verified: `user` is its claims (sub, session_id or token_id, exp...);
 * `apiToken` the token, for an API token.
 */
export interface Caller {
  user: AccessClaims;
  apiToken: ApiTokenInfo | null;
}

/** The caller behind a verified access token or API token. */
export function callerOf(credential: Extract<VerifiedCredential, { kind: 'access_token' | 'api_token' }>): Caller {
  if (credential.kind === 'access_token') return { user: credential.claims, apiToken: null };
  const { token } = credential;
  return { user: claimsOf(credential) as AccessClaims, apiToken: { id: token.tokenId, communityId: token.communityId } };
}

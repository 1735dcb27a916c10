// API tokens as bearer credentials.
//
// A bearer that starts with the token prefix is an API token, never a JWT
// (JWTs start with `eyJ`). It is authenticated by api.api_token_authenticate
// in its own short statement, before the request's transaction, so a use is
// counted even when the request then fails. Unknown, inactive and expired
// tokens, and malformed ones, are 401. Whether the token may be used on the
// path is SQL's too, and its refusal is thrown here, for every door that takes
// API tokens (the REST pipeline, the stream, /mcp): 403 community_scope_violation
// for a community-scoped token off its platform endpoints, 403 forbidden for a
// path no permission pattern matches. The secret is never put in an error, and
// a database error about it is reduced to its status (the statement's
// parameters never reach a log).
import { z } from 'zod';
import { DEADLINE_MARGIN_MS, withDeadline, type Sql } from '../database/pool.ts';
import { HttpError, toHttpError } from '../web/errors.ts';
import { LIMITS } from '../web/limits.ts';

export const API_TOKEN_PREFIX = 'cbk_';
const SECRET_SHAPE = /^cbk_[A-Za-z0-9]{40}$/;

/** Whether a bearer credential is (meant to be) an API token rather than a JWT. */
export function isApiTokenSecret(s: string): boolean {
  return s.startsWith(API_TOKEN_PREFIX);
}

export interface ApiTokenAuthentication {
  tokenId: string;
  userId: string;
  communityId: string | null;
  /** When the token expires; null: never. */
  expiresAt: Date | null;
}

/** What a route handler sees of the token that authenticated the request. */
export interface ApiTokenInfo {
  id: string;
  communityId: string | null;
}

interface IdentityRow {
  token_id: string;
  user_id: string;
  community_id: string | null;
  path_allowed: boolean;
  expires_at: Date | null;
  refusal: 'community_scope_violation' | 'forbidden' | null;
}

const invalidToken = () => new HttpError(401, 'invalid_token', 'invalid, inactive or expired API token');

/** What a refusal of api.api_token_authenticate says. */
const REFUSALS = {
  community_scope_violation: "this API token is scoped to a community: it may call that community's platform endpoints (/api/v1/platform/...) only",
  forbidden: "this API token's permissions do not include this path",
} as const;

/**
 * Authenticates an API token for a request path and counts the use. Throws
 * HttpError 401 (invalid_token) for an unknown, inactive, expired or
 * malformed token, and 403 when the token may not be used on the path
 * (community_scope_violation, forbidden: SQL's refusal); 503 when the
 * database does not answer by `deadlineMs` (the request's statement timeout
 * and margin).
 */
export async function authenticateApiToken(
  sql: Sql,
  secret: string,
  path: string,
  deadlineMs = 15_000 + DEADLINE_MARGIN_MS,
): Promise<ApiTokenAuthentication> {
  if (!SECRET_SHAPE.test(secret)) throw invalidToken();
  let rows: IdentityRow[];
  try {
    // Bounded like a request's transaction; cut, it is 503 (only the token's use count may have moved).
    rows = await withDeadline(sql, deadlineMs, () => sql<IdentityRow[]>`select * from api.api_token_authenticate(${secret}, ${path})`);
  } catch (err) {
    const httpError = toHttpError(err);
    if (httpError.status === 401) throw invalidToken();
    throw httpError;
  }
  const row = rows[0];
  if (!row) throw invalidToken();
  if (row.refusal || !row.path_allowed) {
    const code = row.refusal ?? 'forbidden';
    throw new HttpError(403, code, REFUSALS[code]);
  }
  return {
    tokenId: row.token_id,
    userId: row.user_id,
    communityId: row.community_id,
    expiresAt: row.expires_at,
  };
}

/** A permission pattern: `*`, an exact path, or a prefix ending in `*` (SQL checks the same). */
export const PermissionPattern = z
  .string()
  .max(LIMITS.apiTokenPatternMaxLength)
  .regex(/^(\*|\/[^*\s]*\*?)$/, { message: 'must be `*`, a path starting with / or a prefix ending in *' })
  .describe('`*` (every path), an exact path, or a path prefix ending in `*`.')
  .meta({ example: '/api/mobile/*' });

/** The ApiToken object (docs/api/integration.md#api-tokens), with community_id, as private.api_token_json builds it. */
export const ApiToken = z.object({
  id: z.uuid().describe("The token's id (not its secret).").meta({ example: '5f0c8a9e-3b1d-4c62-9a7e-2d4b6f8a1c03' }),
  name: z.string().describe('What it is for.').meta({ example: 'Calendar sync script' }),
  permissions: z.array(z.string()).describe('The path patterns it may call.').meta({ example: ['/api/mobile/*'] }),
  community_id: z
    .uuid()
    .nullable()
    .describe('For a community-scoped token: the community it may act on (platform integration); else null.')
    .meta({ example: null }),
  created_at: z.iso.datetime().describe('When it was created.').meta({ example: '2026-05-14T18:30:00.000Z' }),
  expires_at: z.iso.datetime().nullable().describe('When it stops working; null: never.').meta({ example: '2030-12-31T23:59:59.000Z' }),
  active: z.boolean().describe('False once deactivated.').meta({ example: true }),
  last_used_at: z.iso.datetime().nullable().describe('When it was last used; null: never.').meta({ example: '2026-05-15T08:12:45.120Z' }),
  usage_count: z.number().int().min(0).describe('How many requests it has authenticated.').meta({ example: 42 }),
});
export type ApiToken = z.infer<typeof ApiToken>;

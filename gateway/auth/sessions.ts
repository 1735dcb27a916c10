// Sessions, for both sign-in doors (/api/auth and /auth/v1): what a sign-in
// starts and a refresh rotates. A refresh token is only ever handled by the
// api.auth_* SQL functions (rotation, reuse detection, expiry: every rule is
// SQL); this module signs the access token of a session and refreshes one.
import { z } from 'zod';
import type { Context, Services } from '../http/route.ts';
import { HttpError } from '../core/web/errors.ts';
import { Id } from '../http/responses.ts';
import { DEFAULT_AUTH_LIMITS, tooManyRequests } from '../core/web/throttle.ts';

/** A session as SQL answers a sign-in or a refresh: its user, and its refresh token. */
export interface AuthSession {
  user_id: string;
  /** Null for a guest. */
  email: string | null;
  refresh_token: string;
  session_id: string;
}

/** What the sign-in services need of a request. */
export type SignInRequest = Pick<Context<unknown, unknown, unknown>, 'db' | 'services' | 'clientIp' | 'userAgent'>;

/** The failure window of the sign-in limits, in minutes (LOGIN_FAILURE_WINDOW_SECONDS by default). */
export const WINDOW_MINUTES = DEFAULT_AUTH_LIMITS.windowSeconds / 60;

export const UserId = Id.describe("The account's id (its profile's id too).");

export const RefreshToken = z
  .string()
  .min(1)
  .max(512)
  .describe('The refresh token of the session, from login or the last refresh.')
  .meta({ example: 'rt_3q2v9ZkHnA7wXy1bLm5sPd8cQe4uTf6g' });

/** The message of a reused refresh token's 401. */
export const REFRESH_TOKEN_REUSED = 'refresh token reuse detected; the session has been revoked';

/**
 * The access token of a session (core/auth/jwt.ts), and the seconds it is
 * valid: its claims beyond the session's are SQL's (private.access_token_claims:
 * app_metadata, user_metadata, is_anonymous), read as the gateway's own role.
 */
export async function accessTokenOf(services: Services, session: AuthSession): Promise<{ accessToken: string; expiresIn: number }> {
  const [row] = await services.sql<{ claims: Record<string, unknown> | null }[]>`select private.access_token_claims(${session.user_id}) as claims`;
  // A guest's tokens have an empty `email`, as Supabase Auth's.
  return services.tokens.issue({ id: session.user_id, email: session.email ?? '', sessionId: session.session_id, claims: row?.claims ?? {} });
}

/**
 * A refresh token rotated, for every door that takes one (POST
 * /api/auth/refresh, POST /auth/v1/token?grant_type=refresh_token): the
 * session's new refresh token, or 401 invalid_refresh_token (its message says
 * reused, expired, revoked or invalid; a reused token ends its session), or 429.
 */
export async function refreshSession({ db, services, clientIp, userAgent }: SignInRequest, refreshToken: string): Promise<AuthSession> {
  const limits = services.authLimits ?? DEFAULT_AUTH_LIMITS;
  const [row] = await db(
    (tx) => tx<(Omit<AuthSession, 'refresh_token'> & { status: string; retry_after: number; new_refresh_token: string })[]>`
      select * from api.auth_refresh_throttled(${refreshToken}, ${clientIp}, ${limits.maxFailuresPerIp}, ${limits.windowSeconds}, ${userAgent})`,
  );
  if (row?.status === 'throttled') throw tooManyRequests(row.retry_after, 'too many failed refreshes, try again later');
  const result = row && { ...row, refresh_token: row.new_refresh_token };
  if (!result || result.status !== 'ok') {
    const reason = result?.status === 'reused' ? REFRESH_TOKEN_REUSED : `refresh token is ${result?.status ?? 'invalid'}`;
    throw new HttpError(401, 'invalid_refresh_token', reason);
  }
  return result;
}

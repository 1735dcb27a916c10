// POST /api/auth/verify: an access token checked (its signature and expiry
// here, core/auth/jwt.ts; its session by SQL, api.auth_verify), invalid ones
// counted per address.
import { z } from 'zod';
import { defineRoute } from '../../http/route.ts';
import { HttpError } from '../../core/web/errors.ts';
import { InvalidTokenError } from '../../core/auth/jwt.ts';
import { claimsOf } from '../../core/auth/identity.ts';
import { DateTime, errors, Id } from '../../http/responses.ts';
import { DEFAULT_AUTH_LIMITS, tooManyRequests } from '../../core/web/throttle.ts';
import { WINDOW_MINUTES } from '../sessions.ts';

export const authVerifyRoutes = [
  defineRoute({
    method: 'post',
    path: '/api/auth/verify',
    summary: 'Check an access token.',
    description:
      'Checks an access token: its signature, expiry and session. Answers the user it names and when it expires.',
    limits: [
      `Invalid tokens are counted per address (by default ${DEFAULT_AUTH_LIMITS.maxFailuresPerIp} in ${WINDOW_MINUTES} minutes); past them: 429 with Retry-After.`,
    ],
    auth: 'public',
    body: z.object({
      token: z
        .string()
        .min(1)
        .max(8192)
        .describe('The access token to check.')
        .meta({ example: 'eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiI1ZjBjOGE5ZS0zYjFkLTRjNjItOWE3ZS0yZDRiNmY4YTFjMDMifQ.sig' }),
    }),
    invalidStatus: 400,
    responses: {
      200: z.object({
        valid: z.literal(true).describe('Always true (an invalid token is 401).'),
        user_id: Id.describe('The user the token names.'),
        expires_at: DateTime.describe('When the token expires.'),
      }),
      401: errors('invalid_token', 'session_ended'),
      429: errors('rate_limited'),
    },
    async handler({ body, db, services, clientIp }) {
      const limits = services.authLimits ?? DEFAULT_AUTH_LIMITS;
      const [wait] = await db(
        (tx) => tx<{ seconds: number }[]>`select api.auth_verify_wait(${clientIp}, ${limits.maxFailuresPerIp}, ${limits.windowSeconds}) as seconds`,
      );
      if (wait && wait.seconds > 0) throw tooManyRequests(wait.seconds, 'too many invalid tokens, try again later');
      let claims;
      try {
        claims = await services.tokens.verify(body.token);
      } catch (err) {
        if (err instanceof InvalidTokenError) {
          await db((tx) => tx`select api.auth_verify_failed(${clientIp})`);
          throw new HttpError(401, 'invalid_token', err.message);
        }
        throw err;
      }
      const [user] = await db((tx) => tx<{ user_id: string; email: string }[]>`select * from api.auth_verify()`, claimsOf({ kind: 'access_token', claims }));
      return { status: 200, body: { valid: true, user_id: user!.user_id, expires_at: new Date(claims.exp! * 1000).toISOString() } };
    },
  }),
];

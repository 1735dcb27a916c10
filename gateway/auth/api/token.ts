// POST /api/auth/login and /api/auth/refresh: a session's token pair, from
// an e-mail and a password (gateway/auth/sign-in.ts) or from the session's
// refresh token (gateway/auth/sessions.ts).
import { z } from 'zod';
import { defineRoute, type Services } from '../../http/route.ts';
import { errors } from '../../http/responses.ts';
import { Email } from '../../core/web/schemas.ts';
import { DEFAULT_AUTH_LIMITS } from '../../core/web/throttle.ts';
import { signInWithPassword } from '../sign-in.ts';
import { accessTokenOf, refreshSession, RefreshToken, UserId, WINDOW_MINUTES, type AuthSession } from '../sessions.ts';

const LoginBody = z.object({
  email: Email.describe('The e-mail address of the account.'),
  password: z.string().min(1).max(1024).describe("The account's password.").meta({ example: 'correct horse battery staple' }),
});

const TokenPair = z
  .object({
    access_token: z
      .string()
      .describe('The access token (JWT): send it as `Authorization: Bearer <access_token>`.')
      .meta({ example: 'eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiI1ZjBjOGE5ZS0zYjFkLTRjNjItOWE3ZS0yZDRiNmY4YTFjMDMifQ.sig' }),
    token_type: z.literal('bearer').describe('Always `bearer`.'),
    expires_in: z.number().int().describe('Seconds until the access token expires; refresh it before then.').meta({ example: 3600 }),
    refresh_token: RefreshToken.describe('The refresh token: exchange it once for a new pair (POST /api/auth/refresh).'),
    user_id: UserId,
  })
  .meta({ id: 'TokenPair', description: 'An access token and the refresh token of its session.' });

async function tokenPair(services: Services, session: AuthSession) {
  const { accessToken, expiresIn } = await accessTokenOf(services, session);
  return {
    access_token: accessToken,
    token_type: 'bearer',
    expires_in: expiresIn,
    refresh_token: session.refresh_token,
    user_id: session.user_id,
  };
}

export const authTokenRoutes = [
  defineRoute({
    method: 'post',
    path: '/api/auth/login',
    summary: 'Exchange e-mail and password for an access token and a refresh token.',
    description:
      'Exchanges an e-mail and a password for an access token (JWT) and a refresh token, which starts a session. Wrong e-mail and wrong password get the same answer.',
    limits: [
      `Failed sign-ins are counted per e-mail and client, per e-mail and per address (by default ${DEFAULT_AUTH_LIMITS.maxFailuresPerEmailAndClient}, ${DEFAULT_AUTH_LIMITS.maxFailuresPerEmail} and ${DEFAULT_AUTH_LIMITS.maxFailuresPerIp} in ${WINDOW_MINUTES} minutes); past them: 429 with Retry-After.`,
    ],
    auth: 'public',
    body: LoginBody,
    invalidStatus: 400,
    responses: { 200: TokenPair, 401: errors('invalid_credentials'), 429: errors('rate_limited'), 503: errors('service_unavailable') },
    async handler(ctx) {
      return { status: 200, body: await tokenPair(ctx.services, await signInWithPassword(ctx, ctx.body.email, ctx.body.password)) };
    },
  }),

  defineRoute({
    method: 'post',
    path: '/api/auth/refresh',
    summary: 'Rotate a refresh token for a new token pair; reusing a rotated token ends the session.',
    description:
      "Exchanges the session's refresh token for a new access token and a new refresh token. Each refresh token works once: using a rotated one again ends the session (a stolen token stops working for both).",
    limits: [
      `Failed refreshes are counted per address (by default ${DEFAULT_AUTH_LIMITS.maxFailuresPerIp} in ${WINDOW_MINUTES} minutes); past them: 429 with Retry-After.`,
    ],
    auth: 'public',
    body: z.object({ refresh_token: RefreshToken }),
    invalidStatus: 400,
    responses: { 200: TokenPair, 401: errors('invalid_refresh_token'), 429: errors('rate_limited') },
    async handler(ctx) {
      return { status: 200, body: await tokenPair(ctx.services, await refreshSession(ctx, ctx.body.refresh_token)) };
    },
  }),
];

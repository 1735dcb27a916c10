// POST /auth/v1/token (supabase-js `auth.signInWithPassword`,
// `auth.refreshSession`): grant_type=password signs in as POST
// /api/auth/login does (gateway/auth/sign-in.ts), grant_type=refresh_token
// rotates the refresh token as POST /api/auth/refresh does
// (gateway/auth/sessions.ts).
import { z } from 'zod';
import { defineRoute } from '../../http/route.ts';
import { HttpError } from '../../core/web/errors.ts';
import { Email } from '../../core/web/schemas.ts';
import { DEFAULT_AUTH_LIMITS } from '../../core/web/throttle.ts';
import { errors } from '../../http/responses.ts';
import { signInWithPassword } from '../sign-in.ts';
import { refreshSession, REFRESH_TOKEN_REUSED, WINDOW_MINUTES } from '../sessions.ts';
import { API_KEY_LIMIT, COMMON, restated, Session, sessionOf } from './shapes.ts';

export const supabaseAuthTokenRoutes = [
  defineRoute({
    ...COMMON,
    method: 'post',
    path: '/auth/v1/token',
    summary: 'Supabase Auth: sign in with a password, or refresh a session.',
    description:
      "Supabase Auth's token endpoint (supabase-js `auth.signInWithPassword`, `auth.refreshSession` and its automatic refresh). `grant_type=password` takes `email` and `password` and starts a session, as POST /api/auth/login does; `grant_type=refresh_token` takes `refresh_token` and rotates it, as POST /api/auth/refresh does: a refresh token works once, and one used twice ends its session (`refresh_token_already_used`). Other grant types (pkce, id_token, web3) are 400 `provider_disabled`.",
    limits: [
      API_KEY_LIMIT,
      `Failed sign-ins are counted with those of POST /api/auth/login: per e-mail and client, per e-mail and per address (by default ${DEFAULT_AUTH_LIMITS.maxFailuresPerEmailAndClient}, ${DEFAULT_AUTH_LIMITS.maxFailuresPerEmail} and ${DEFAULT_AUTH_LIMITS.maxFailuresPerIp} in ${WINDOW_MINUTES} minutes); failed refreshes per address; past them: 429 with Retry-After.`,
    ],
    query: z.object({
      grant_type: z.string().max(64).describe('`password` or `refresh_token`.').meta({ example: 'password' }),
    }),
    body: z
      .object({
        email: Email.optional().describe('grant_type=password: the e-mail address of the account.'),
        password: z.string().max(1024).optional().describe("grant_type=password: the account's password.").meta({ example: 'correct horse battery staple' }),
        refresh_token: z.string().max(512).optional().describe('grant_type=refresh_token: the refresh token of the session.').meta({ example: 'rt_3q2v9ZkHnA7wXy1bLm5sPd8cQe4uTf6g' }),
      })
      .meta({ example: { email: 'ada@example.com', password: 'correct horse battery staple' } }),
    invalidStatus: 400,
    responses: {
      200: Session,
      400: errors('invalid_credentials', 'invalid_refresh_token', 'provider_disabled', 'invalid_email'),
      401: errors('unauthorized'),
      429: errors('rate_limited'),
      503: errors('service_unavailable'),
    },
    async handler(ctx) {
      const { body, query } = ctx;
      if (query.grant_type === 'password') {
        if (!body.email || !body.password) throw new HttpError(400, 'invalid_credentials', 'Invalid login credentials', { error_code: 'validation_failed' });
        const session = await signInWithPassword(ctx, body.email, body.password).catch(restated('invalid_credentials', 400, 'invalid_credentials', 'Invalid login credentials'));
        return { status: 200, body: await sessionOf(ctx, session) };
      }
      if (query.grant_type === 'refresh_token') {
        if (!body.refresh_token) throw new HttpError(400, 'invalid_refresh_token', 'Invalid Refresh Token: Refresh Token Not Found', { error_code: 'refresh_token_not_found' });
        const session = await refreshSession(ctx, body.refresh_token).catch((err: unknown) => {
          if (err instanceof HttpError && err.message === REFRESH_TOKEN_REUSED) restated('invalid_refresh_token', 400, 'refresh_token_already_used', 'Invalid Refresh Token: Already Used')(err);
          return restated('invalid_refresh_token', 400, 'refresh_token_not_found', 'Invalid Refresh Token: Refresh Token Not Found')(err);
        });
        return { status: 200, body: await sessionOf(ctx, session) };
      }
      throw new HttpError(400, 'provider_disabled', 'unsupported_grant_type', { error_code: 'validation_failed' });
    },
  }),
];

// POST /auth/v1/signup (supabase-js `auth.signUp`): an account made as
// POST /api/auth/register makes one (gateway/auth/sign-in.ts), signed in at
// once as any sign-in is. Without e-mail and password (supabase-js
// `auth.signInAnonymously`): a guest and its session (api.auth_guest_sign_in).
import { z } from 'zod';
import { defineRoute } from '../../http/route.ts';
import { claimsOf } from '../../core/auth/identity.ts';
import { HttpError } from '../../core/web/errors.ts';
import type { Context } from '../../http/route.ts';
import { Email } from '../../core/web/schemas.ts';
import { DEFAULT_AUTH_LIMITS, PASSWORD_SET_LIMIT, tooManyRequests } from '../../core/web/throttle.ts';
import { errors } from '../../http/responses.ts';
import { register, registrationHash, signInWithPassword } from '../sign-in.ts';
import type { AuthSession } from '../sessions.ts';
import { API_KEY_LIMIT, COMMON, disabled, PasswordField, restated, Session, sessionOf, strongEnough, UserMetadata } from './shapes.ts';

export const supabaseAuthSignupRoutes = [
  defineRoute({
    ...COMMON,
    method: 'post',
    path: '/auth/v1/signup',
    summary: 'Supabase Auth: sign up with e-mail and password, or as a guest; answers a session.',
    description:
      "Supabase Auth's sign-up (supabase-js `auth.signUp`): creates the account as POST /api/auth/register does and signs it in at once (no confirmation e-mail: `mailer_autoconfirm` is true in GET /auth/v1/settings). A taken address is 422 `user_already_exists`. `data` becomes user_metadata. Phone sign-ups are 422, as Supabase Auth answers when they are disabled.\n\nWithout `email` and `password` (supabase-js `auth.signInAnonymously`): a guest, a real user with no e-mail and no password, `is_anonymous` true in its User object and its access tokens. A guest reads what any signed-in user reads and joins communities and checks in to events, but creates no API token and no webhook (403); PUT /auth/v1/user with `email` and `password` makes it a full account, same id. Unconverted guests are deleted after GUEST_RETENTION_DAYS. With AUTH_ANONYMOUS_USERS=off: 422 `anonymous_provider_disabled`.",
    limits: [
      API_KEY_LIMIT,
      PASSWORD_SET_LIMIT,
      `Guest sign-ins are counted per client address (GUEST_SIGN_INS_PER_IP, by default ${DEFAULT_AUTH_LIMITS.maxGuestSignInsPerIp} an hour); past them: 429 with Retry-After.`,
    ],
    body: z
      .object({
        email: Email.optional().describe('The e-mail address to sign in with.'),
        password: PasswordField.optional(),
        phone: z.string().max(64).optional().describe('Not offered: 422 `phone_provider_disabled`.').meta({ example: '+15555550100' }),
        data: UserMetadata.optional(),
      })
      .meta({ example: { email: 'ada@example.com', password: 'correct horse battery staple', data: { name: 'Ada' } } }),
    invalidStatus: 422,
    responses: {
      200: Session,
      401: errors('unauthorized'),
      400: errors('invalid_email'),
      422: errors('email_taken', 'weak_password', 'provider_disabled'),
      429: errors('rate_limited'),
      503: errors('service_unavailable'),
    },
    async handler(ctx) {
      const { body } = ctx;
      if (body.phone !== undefined) throw disabled('Phone signups');
      if (body.email === undefined && body.password === undefined) return { status: 200, body: await sessionOf(ctx, await signInAsGuest(ctx, body.data)) };
      if (body.email === undefined || body.password === undefined) throw new HttpError(422, 'invalid_email', 'Signup requires a valid email and password', { error_code: 'validation_failed' });
      strongEnough(body.password);
      const credentials = { email: body.email, password: body.password, name: null };
      const taken = restated('email_taken', 422, 'user_already_exists', 'User already registered');
      const passwordHash = await registrationHash({ ...ctx, body: credentials }).catch(taken);
      await ctx.db((tx) => register(tx, credentials, passwordHash)).catch(taken);
      // The new account signs in as any sign-in does (the same throttle and sessions).
      const session = await signInWithPassword(ctx, body.email, body.password);
      const answer = await sessionOf(ctx, session);
      if (body.data && Object.keys(body.data).length > 0) {
        // As the new session's own access token, with the claims every sign-in runs with (core/auth/identity.ts).
        const claims = claimsOf({ kind: 'access_token', claims: await ctx.services.tokens.verify(answer.access_token) });
        const [row] = await ctx.db((tx) => tx<{ user: unknown }[]>`select api.auth_user_metadata_update(${tx.json(body.data as never)}::jsonb) as user`, claims);
        answer.user = row!.user;
      }
      return { status: 200, body: answer };
    },
  }),
];

/** A new guest and its session (api.auth_guest_sign_in, counted per client address); 422 when AUTH_ANONYMOUS_USERS is off, 429 past the count. */
async function signInAsGuest(ctx: Pick<Context<unknown, unknown, unknown>, 'db' | 'services' | 'clientIp' | 'userAgent'>, data: Record<string, unknown> | undefined): Promise<AuthSession> {
  if (ctx.services.guestsEnabled === false) throw disabled('Anonymous sign-ins');
  const limits = ctx.services.authLimits ?? DEFAULT_AUTH_LIMITS;
  const [row] = await ctx.db(
    (tx) => tx<(AuthSession & { status: string; retry_after: number })[]>`
      select * from api.auth_guest_sign_in(${ctx.clientIp}, ${limits.maxGuestSignInsPerIp}, 3600, ${ctx.userAgent},
                                           ${data && Object.keys(data).length > 0 ? tx.json(data as never) : null}::jsonb)`,
  );
  if (row!.status === 'throttled') throw tooManyRequests(row!.retry_after, 'Request rate limit reached');
  return row!;
}

// Supabase Auth's (GoTrue's) REST API at /auth/v1, the part the Supabase SDKs
// use for e-mail and password accounts (docs/supabase-sdks.md): the same
// doors as /api/auth/* and /api/mobile/account/*, answered in Supabase's
// shapes. Nothing here is a second system: a sign-in is signInWithPassword
// (routes/auth.ts: the same throttle, hashing queue and sessions), a refresh
// is refreshSession (rotation and reuse detection in SQL), a password or
// e-mail change checks the password again as the account routes do
// (routes/account.ts reauthenticate), and the User object is
// private.auth_user_object over the one user table. Every route requires an
// API key (`apikey`, as the SDKs send it) and answers Supabase Auth's error
// body (core/web/errors.ts, `supabase_auth`).
import { z } from 'zod';
import { defineRoute, type Context, type Services } from '../http/route.ts';
import { HttpError, toHttpError } from '../core/web/errors.ts';
import type { ErrorCode } from '../core/web/error-codes.ts';
import { claimsOf } from '../core/auth/identity.ts';
import { LIMITS } from '../core/web/limits.ts';
import { Email } from '../core/web/schemas.ts';
import { DEFAULT_AUTH_LIMITS, EMAIL_LINK_LIMIT, PASSWORD_SET_LIMIT } from '../core/web/throttle.ts';
import { content, errors, noContent, type SecurityScheme } from '../http/responses.ts';
import { redirectTarget } from '../core/web/redirects.ts';
import { bearerToken } from '../core/auth/bearer.ts';
import { refreshSession, register, registrationHash, REFRESH_TOKEN_REUSED, signInWithPassword, type AuthSession } from './auth.ts';
import { reauthenticate } from './account.ts';
import { queueEmailLink } from './password.ts';

const WINDOW_MINUTES = DEFAULT_AUTH_LIMITS.windowSeconds / 60;

// ---------------------------------------------------------------------------
// Shapes (Supabase Auth's openapi.yaml: UserSchema, AccessTokenResponseSchema)
// ---------------------------------------------------------------------------

const Time = z.string().describe('A time (RFC 3339, UTC).').meta({ example: '2026-05-01T09:30:00.000Z' });

const UserMetadata = z.record(z.string(), z.unknown()).describe('What the user says about themselves (`data` of sign-up and PUT /user).').meta({ example: { name: 'Ada' } });

const Identity = z
  .object({
    identity_id: z.uuid().describe("The identity's id."),
    id: z.uuid().describe("The provider's id of the user (the user's id)."),
    user_id: z.uuid().describe("The user's id."),
    provider: z.literal('email').describe('Always `email`.'),
    email: z.string().describe('The e-mail address.').meta({ example: 'ada@example.com' }),
    identity_data: z
      .object({
        sub: z.uuid().describe("The user's id."),
        email: z.string().describe('The e-mail address.').meta({ example: 'ada@example.com' }),
        email_verified: z.boolean().describe('Always true.'),
        phone_verified: z.boolean().describe('Always false.'),
      })
      .describe("The provider's data."),
    last_sign_in_at: Time.nullable().describe('The latest sign-in, or null.'),
    created_at: Time.describe('When the account was made.'),
    updated_at: Time.describe('When it last changed.'),
  })
  .describe('A way the user signs in: here always the e-mail address and a password.');

export const SupabaseUser = z
  .object({
    id: z.uuid().describe("The user's id (its profile's id too)."),
    aud: z.literal('authenticated').describe('Always `authenticated`.'),
    role: z.literal('authenticated').describe('Always `authenticated`.'),
    email: z.string().describe('The e-mail address the account signs in with.').meta({ example: 'ada@example.com' }),
    phone: z.literal('').describe('Always empty: no phone sign-in.'),
    email_confirmed_at: Time.describe('When the address was confirmed: the sign-up (no confirmation step).'),
    confirmed_at: Time.describe('The same as email_confirmed_at.'),
    last_sign_in_at: Time.nullable().describe('The latest sign-in, or null.'),
    app_metadata: z
      .object({
        provider: z.literal('email').describe('Always `email`.'),
        providers: z.array(z.literal('email')).describe('Always `["email"]`.'),
      })
      .describe('Set by the service.'),
    user_metadata: UserMetadata,
    identities: z.array(Identity).describe('The ways the user signs in.'),
    created_at: Time.describe('When the account was made.'),
    updated_at: Time.describe('When it last changed.'),
    is_anonymous: z.literal(false).describe('Always false: no anonymous sign-in.'),
    new_email: z.string().optional().describe('While an e-mail change waits for its link: the new address.').meta({ example: 'ada@new.example.com' }),
    email_change_sent_at: Time.optional().describe('While an e-mail change waits for its link: when it was sent.'),
  })
  .meta({ id: 'SupabaseUser', description: "A user as Supabase Auth's User object." });

const Session = z
  .object({
    access_token: z.string().describe('The access token (JWT), as from POST /api/auth/login: it works on every route of this service.').meta({ example: 'eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiI1ZjBjIn0.sig' }),
    token_type: z.literal('bearer').describe('Always `bearer`.'),
    expires_in: z.number().int().describe('Seconds until the access token expires.').meta({ example: 3600 }),
    expires_at: z.number().int().describe('When the access token expires, in seconds since 1970.').meta({ example: 1780000000 }),
    refresh_token: z.string().describe('The refresh token: exchange it once (POST /auth/v1/token?grant_type=refresh_token).').meta({ example: 'rt_3q2v9ZkHnA7wXy1bLm5sPd8cQe4uTf6g' }),
    user: SupabaseUser,
  })
  .meta({ id: 'SupabaseSession', description: "A session as Supabase Auth's access token response." });

/** The session answer for a new session: a signed access token and the User object (as the gateway's role: the token is not the request's yet). */
async function sessionOf({ db, services }: { db: Context<unknown, unknown, unknown>['db']; services: Services }, session: AuthSession) {
  const { accessToken, expiresIn } = await services.tokens.issue({ id: session.user_id, email: session.email, sessionId: session.session_id });
  const [row] = await db((tx) => tx<{ user: unknown }[]>`select private.auth_user_object(${session.user_id}) as user`, claimsOf({ kind: 'gateway' }));
  return {
    access_token: accessToken,
    token_type: 'bearer',
    expires_in: expiresIn,
    expires_at: Math.floor(Date.now() / 1000) + expiresIn,
    refresh_token: session.refresh_token,
    user: row!.user,
  };
}

/**
 * A failure of the shared doors with code `code` answered as Supabase Auth
 * answers it: its status, its `error_code` and message; every other failure
 * as it is.
 */
function restated(code: ErrorCode, status: number, errorCode: string, msg?: string) {
  return (err: unknown): never => {
    const httpError = toHttpError(err);
    if (httpError.code === code) throw new HttpError(status, code, msg ?? httpError.message, { error_code: errorCode });
    throw err;
  };
}

const disabled = (what: string) => new HttpError(422, 'provider_disabled', `${what} are disabled`, { error_code: what.startsWith('Anonymous') ? 'anonymous_provider_disabled' : what.startsWith('Phone') ? 'phone_provider_disabled' : 'provider_disabled' });

const API_KEY_LIMIT = 'Every request carries an API key in `apikey` (the anon key, or the service-role key: `npm run admin -- keys`); without one: 401.';

const COMMON = { auth: 'public', apiKey: 'required', errorShape: 'supabase_auth' } as const;
const SIGNED_IN = { auth: 'user' as const, apiKey: 'required' as const, errorShape: 'supabase_auth' as const, security: ['bearerAuth'] as SecurityScheme[] };

const ADMIN = { auth: 'public', apiKey: 'required', errorShape: 'supabase_auth', security: ['bearerAuth'] as SecurityScheme[] } as const;
const ADMIN_LIMIT = 'Only with the service-role key (`npm run admin -- keys`) both as `apikey` and as the bearer token, as `createClient(URL, SERVICE_ROLE_KEY)` sends it; the anon key or a user\'s access token: 403 `not_admin`.';

/**
 * The admin routes' credential: the bearer token must be the service-role key
 * (Supabase Auth's requireAdmin): none is 401 `no_authorization`, any other
 * (the anon key, a user's access token) 403 `not_admin`.
 */
function requireServiceRole(ctx: Context<unknown, unknown, unknown>): void {
  const bearer = bearerToken(ctx.request.headers.authorization);
  if (bearer === null) throw new HttpError(401, 'unauthorized', 'This endpoint requires a valid Bearer token');
  if (ctx.services.tokens.apiKeyRole(bearer) !== 'service_role' || ctx.apiKeyRole !== 'service_role') {
    throw new HttpError(403, 'forbidden', 'User not allowed', { error_code: 'not_admin' });
  }
}

const notFound = (err: unknown): never => {
  if (toHttpError(err).code === 'not_found') throw new HttpError(404, 'not_found', 'User not found', { error_code: 'user_not_found' });
  throw err;
};

/** Supabase Auth's 403 for a credential that is there but not valid (`bad_jwt`) or whose session ended (`session_not_found`). */
const TOKEN_REFUSED = errors('unauthorized', 'invalid_token', 'session_ended');

const PasswordField = z.string().max(1024).describe(`The password: at least ${LIMITS.passwordMinLength} characters.`).meta({ example: 'correct horse battery staple' });

function strongEnough(password: string): void {
  if (password.length < LIMITS.passwordMinLength) {
    throw new HttpError(422, 'weak_password', `Password should be at least ${LIMITS.passwordMinLength} characters.`);
  }
}

/** The fields of an admin create or update besides `email`, as Supabase Auth takes them; those this service does not offer are declared so that they are refused (422) rather than ignored. */
const ADMIN_USER_FIELDS = {
  password: PasswordField.optional(),
  user_metadata: UserMetadata.optional(),
  email_confirm: z.boolean().optional().describe('Accepted and ignored: every account is confirmed.'),
  phone: z.string().max(64).optional().describe('Not offered: 422 `phone_provider_disabled`.').meta({ example: '+15555550100' }),
  app_metadata: z.record(z.string(), z.unknown()).optional().describe('Not offered: 422 (app_metadata is set by the service).'),
  ban_duration: z.string().max(64).optional().describe('Not offered: 422.'),
  role: z.string().max(64).optional().describe('Not offered: 422 (every user has the role `authenticated`).'),
};

/**
 * An admin create or update's refusals and inputs, the same for both: the
 * fields not offered, a weak password; then the password hashed in the
 * gateway (as every password is) and user_metadata (null: unchanged).
 */
async function adminUserInput(
  ctx: Context<unknown, unknown, unknown>,
  body: { password?: string; user_metadata?: Record<string, unknown>; phone?: string; app_metadata?: unknown; ban_duration?: unknown; role?: unknown },
) {
  if (body.phone !== undefined) throw disabled('Phone signups');
  for (const field of ['app_metadata', 'ban_duration', 'role'] as const) {
    if (body[field] !== undefined) throw new HttpError(422, 'validation_error', `${field} is not offered by this service`, { error_code: 'validation_failed' });
  }
  if (body.password !== undefined) strongEnough(body.password);
  return {
    passwordHash: body.password !== undefined ? await ctx.services.passwords.hash(ctx.clientIp, body.password) : null,
    metadata: body.user_metadata === undefined ? null : (body.user_metadata as never),
  };
}

/** A taken address, as Supabase Auth's admin endpoints answer it. */
const EMAIL_EXISTS = restated('email_taken', 422, 'email_exists', 'A user with this email address has already been registered');

export const supabaseAuthRoutes = [
  defineRoute({
    ...COMMON,
    method: 'post',
    path: '/auth/v1/signup',
    summary: 'Supabase Auth: sign up with e-mail and password; answers a session.',
    description:
      "Supabase Auth's sign-up (supabase-js `auth.signUp`): creates the account as POST /api/auth/register does and signs it in at once (no confirmation e-mail: `mailer_autoconfirm` is true in GET /auth/v1/settings). A taken address is 422 `user_already_exists`. `data` becomes user_metadata. Phone and anonymous sign-ups are 422, as Supabase Auth answers when they are disabled.",
    limits: [API_KEY_LIMIT, PASSWORD_SET_LIMIT],
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
      422: errors('email_taken', 'weak_password', 'provider_disabled', 'invalid_email'),
      429: errors('rate_limited'),
      503: errors('service_unavailable'),
    },
    async handler(ctx) {
      const { body } = ctx;
      if (body.phone !== undefined) throw disabled('Phone signups');
      if (body.email === undefined || body.password === undefined) throw disabled('Anonymous sign-ins');
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
      400: errors('invalid_credentials', 'invalid_refresh_token', 'provider_disabled'),
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

  defineRoute({
    ...SIGNED_IN,
    method: 'get',
    path: '/auth/v1/user',
    summary: 'Supabase Auth: the signed-in user.',
    description: "Supabase Auth's user endpoint (supabase-js `auth.getUser`): the caller as a User object. Takes any access token of this service, from /auth/v1 or /api/auth.",
    limits: [API_KEY_LIMIT],
    responses: { 200: SupabaseUser, 401: errors('unauthorized'), 403: TOKEN_REFUSED },
    async handler({ db }) {
      const [row] = await db((tx) => tx<{ user: unknown }[]>`select api.auth_user() as user`);
      return { status: 200, body: row!.user };
    },
  }),

  defineRoute({
    ...SIGNED_IN,
    method: 'put',
    path: '/auth/v1/user',
    summary: 'Supabase Auth: change the password, the e-mail address or user_metadata.',
    description:
      "Supabase Auth's user update (supabase-js `auth.updateUser`). In a session a recovery link started (POST /auth/v1/verify type=recovery), `password` alone needs no `current_password`, once, within the hour. `data` is merged into user_metadata (a key set to null is removed). `password` changes the password as POST /api/mobile/account/password does (every other session ends) and `email` asks for an e-mail change as POST /api/mobile/account/email does (a link to the new address, the `new_email` of the answer until it is opened): both need `current_password` (Supabase Auth's \"require current password\" setting, always on here), checked as a sign-in is. Only the access token of a sign-in updates a user.",
    limits: [API_KEY_LIMIT, 'A wrong `current_password` counts as a failed sign-in of the account; past the limits: 429 with Retry-After.'],
    idempotencyKey: false,
    body: z
      .object({
        email: Email.optional().describe('A new e-mail address: confirmed by a link sent to it.'),
        password: PasswordField.optional(),
        current_password: z.string().max(1024).optional().describe('The password now: needed with `password` or `email`.').meta({ example: 'correct horse battery staple' }),
        data: UserMetadata.optional(),
      })
      .meta({ example: { data: { name: 'Ada' } } }),
    invalidStatus: 422,
    responses: {
      200: SupabaseUser,
      400: errors('current_password_required', 'invalid_credentials'),
      401: errors('unauthorized'),
      403: errors('forbidden', 'unauthorized', 'invalid_token', 'session_ended'),
      422: errors('weak_password', 'invalid_email'),
      429: errors('rate_limited'),
    },
    async handler(ctx) {
      const { body } = ctx;
      const [current] = await ctx.db((tx) => tx<{ user: { email: string } }[]>`select api.auth_user() as user`);
      const newEmail = body.email !== undefined && body.email.toLowerCase() !== current!.user.email ? body.email : null;
      if (body.password !== undefined) strongEnough(body.password);
      // Every password check first (each gives a single-use proof); then one SQL call makes every change or none.
      const needsProof = (body.password !== undefined && (body.current_password || newEmail !== null)) || newEmail !== null;
      if (needsProof && !body.current_password) {
        throw new HttpError(400, 'current_password_required', 'Current password required when setting new password.', { error_code: 'current_password_required' });
      }
      const proof = async () => {
        const check = await reauthenticate(ctx, body.current_password, 'body.current_password').catch(
          restated('invalid_credentials', 400, 'current_password_mismatch', 'Current password required when setting new password.'),
        );
        if (check.kind !== 'proof') throw new HttpError(400, 'invalid_credentials', 'this account has no password', { error_code: 'current_password_mismatch' });
        return check.proof;
      };
      const passwordProof = body.password !== undefined && needsProof ? await proof() : null;
      const emailProof = newEmail !== null ? await proof() : null;
      const passwordHash = body.password !== undefined ? await ctx.services.passwords.hash(ctx.clientIp, body.password) : null;
      const [row] = await ctx
        .db(
          (tx) => tx<{ user: unknown }[]>`
            select api.auth_user_update(${passwordProof}, ${emailProof}, ${passwordHash}, ${newEmail},
                                        ${ctx.services.publicUrl}, ${tx.json((body.data ?? {}) as never)}::jsonb) as user`,
        )
        .catch(restated('current_password_required', 400, 'current_password_required', 'Current password required when setting new password.'));
      return { status: 200, body: row!.user };
    },
  }),

  defineRoute({
    ...SIGNED_IN,
    method: 'post',
    path: '/auth/v1/logout',
    summary: 'Supabase Auth: sign out this session, every session, or the others.',
    description:
      "Supabase Auth's logout (supabase-js `auth.signOut`): `scope=global` (the default) ends every session of the user, `local` the calling one, `others` all but the calling one: their refresh tokens, access tokens, streams and realtime channels stop at once. `global` also ends every signed storage URL the user made (downloads and uploads).",
    limits: [API_KEY_LIMIT],
    query: z.object({
      scope: z.enum(['global', 'local', 'others']).default('global').describe('Which sessions end.'),
    }),
    invalidStatus: 400,
    responses: { 204: noContent('Signed out.'), 401: errors('unauthorized'), 403: TOKEN_REFUSED },
    async handler({ db, query }) {
      await db((tx) => tx`select api.account_sign_out(${query.scope})`);
      return { status: 204 };
    },
  }),

  defineRoute({
    ...COMMON,
    method: 'post',
    path: '/auth/v1/recover',
    summary: 'Supabase Auth: e-mail a password-reset link.',
    description:
      "Supabase Auth's password recovery (supabase-js `auth.resetPasswordForEmail`): e-mails the account with this address a link to set a new password, as POST /api/auth/recover does; the same answer when there is no such account.",
    limits: [API_KEY_LIMIT, EMAIL_LINK_LIMIT],
    body: z.object({ email: Email.describe('The e-mail address of the account.') }).meta({ example: { email: 'ada@example.com' } }),
    invalidStatus: 422,
    responses: { 200: z.object({}).describe('Always empty.'), 401: errors('unauthorized'), 429: errors('rate_limited') },
    async handler(ctx) {
      await queueEmailLink(ctx, 'recover', ctx.body.email);
      return { status: 200, body: {} };
    },
  }),

  defineRoute({
    ...COMMON,
    method: 'post',
    path: '/auth/v1/verify',
    summary: 'Supabase Auth: a recovery link signs in; an e-mail change link confirms the new address.',
    description:
      "Supabase Auth's verification (supabase-js `auth.verifyOtp({ type, token_hash })`). `type: 'recovery'` with the `token` of a set-password link (POST /auth/v1/recover) as `token_hash` signs its account in: the link is used up, every other credential of the account ends (as the set-password page does), and the answer is a session in which PUT /auth/v1/user may set the password once, within the hour, without the current one. `type: 'email_change'` with the `token_hash` of an e-mail change link (the link PUT /auth/v1/user and POST /api/mobile/account/email send) makes the new address the account's, as the link's page does; the answer is the User object (no session: the link proves the mailbox, not the account). A used, replaced or expired link is 403 `otp_expired`, an address another account took meanwhile 422 `email_exists`. Sign-up needs no confirmation here, so `signup` and the other types are 403 `otp_expired`, as Supabase Auth answers a link it does not know; the `email` + `token` (one-time code) form is 422 `otp_disabled`.",
    limits: [API_KEY_LIMIT],
    body: z
      .object({
        type: z.string().max(32).describe('`recovery` or `email_change` (others: 403 `otp_expired`).').meta({ example: 'email_change' }),
        token_hash: z.string().max(512).optional().describe('The `token_hash` of the e-mailed link.').meta({ example: 'Jq2v9ZkHnA7wXy1bLm5sPd8cQe4uTf6gH0rS2vW3xY4' }),
        token: z.string().max(64).optional().describe('A one-time code: not offered (422 `otp_disabled`).').meta({ example: '123456' }),
        email: z.string().max(320).optional().describe('With `token`: not offered.').meta({ example: 'ada@example.com' }),
      })
      .meta({ example: { type: 'email_change', token_hash: 'Jq2v9ZkHnA7wXy1bLm5sPd8cQe4uTf6gH0rS2vW3xY4' } }),
    invalidStatus: 422,
    responses: {
      200: z.union([Session, SupabaseUser]).describe('recovery: a session; email_change: the User object.'),
      401: errors('unauthorized'),
      403: errors('invalid_link'),
      422: errors('email_taken', 'provider_disabled'),
    },
    async handler(ctx) {
      const { body, db } = ctx;
      if (body.token_hash === undefined) throw new HttpError(422, 'provider_disabled', 'Email logins are disabled', { error_code: 'otp_disabled' });
      const expired = () => new HttpError(403, 'invalid_link', 'Email link is invalid or has expired', { error_code: 'otp_expired' });
      if (body.type === 'recovery') {
        const [started] = await ctx.db(
          (tx) => tx<AuthSession[]>`select * from api.auth_recovery_verify(${body.token_hash!}, ${ctx.userAgent}, ${ctx.clientIp})`,
        ).catch((err: unknown) => {
          if (toHttpError(err).code === 'invalid_link') throw expired();
          throw err;
        });
        return { status: 200, body: await sessionOf(ctx, started!) };
      }
      if (body.type !== 'email_change') throw expired();
      const [row] = await db((tx) => tx<{ result: { user_id: string } }[]>`select api.account_email_change_confirm(${body.token_hash!}) as result`).catch(
        (err: unknown) => {
          const httpError = toHttpError(err);
          if (httpError.code === 'invalid_link') throw expired();
          return restated('email_taken', 422, 'email_exists', 'A user with this email address has already been registered')(err);
        },
      );
      const [user] = await db((tx) => tx<{ user: unknown }[]>`select private.auth_user_object(${row!.result.user_id}) as user`, claimsOf({ kind: 'gateway' }));
      return { status: 200, body: user!.user };
    },
  }),

  defineRoute({
    auth: 'public',
    errorShape: 'supabase_auth',
    readWrite: true,
    method: 'get',
    path: '/auth/v1/verify',
    summary: 'Supabase Auth: the link form of an e-mailed link: verifies it, then 303 to `redirect_to` with the session in the fragment.',
    description:
      "Supabase Auth's link form of verification (a browser opens it, so no API key). `type=recovery` with the `token` (a set-password link's token) signs its account in as POST /auth/v1/verify does and answers 303 to `redirect_to` with the session in the URL fragment (`#access_token=...&expires_at=...&expires_in=...&refresh_token=...&token_type=bearer&type=recovery`), which supabase-js reads (`detectSessionInUrl`; the implicit flow: PKCE codes are not offered). `type=email_change` confirms the new address and answers 303 with `#message=...&type=email_change` (no session: the link proves the mailbox, not the account). A link that is used, replaced, expired or of another type answers 303 with `#error=access_denied&error_code=otp_expired&error_description=...`. `redirect_to` must be the site's address (SITE_URL, default PUBLIC_URL) or below one of AUTH_REDIRECT_URLS; any other address is replaced by the site's (no open redirect).",
    query: z.object({
      type: z.string().max(32).describe('`recovery` or `email_change`.').meta({ example: 'recovery' }),
      token: z.string().min(1).max(512).describe("The link's token (its token_hash).").meta({ example: 'Jq2v9ZkHnA7wXy1bLm5sPd8cQe4uTf6gH0rS2vW3xY4' }),
      redirect_to: z.string().max(2048).optional().describe('Where to go next: the site, or an address of AUTH_REDIRECT_URLS (else the site).').meta({ example: 'https://app.example.com/reset' }),
    }),
    invalidStatus: 400,
    responses: {
      303: content('text/html', 'A redirect: `Location` is `redirect_to` (or the site) with the session, the message or the error in its fragment.'),
      400: errors('validation_error'),
    },
    async handler(ctx) {
      const { query } = ctx;
      const target = redirectTarget(query.redirect_to, ctx.services.authRedirects ?? { siteUrl: ctx.services.publicUrl, allowed: [] });
      let fragment: Record<string, string>;
      try {
        if (query.type === 'recovery') {
          const [started] = await ctx.db((tx) => tx<AuthSession[]>`select * from api.auth_recovery_verify(${query.token}, ${ctx.userAgent}, ${ctx.clientIp})`);
          const session = await sessionOf(ctx, started!);
          fragment = {
            access_token: session.access_token,
            expires_at: String(session.expires_at),
            expires_in: String(session.expires_in),
            refresh_token: session.refresh_token,
            token_type: 'bearer',
            type: 'recovery',
          };
        } else if (query.type === 'email_change') {
          await ctx.db((tx) => tx`select api.account_email_change_confirm(${query.token})`);
          fragment = { message: 'Email change confirmed', type: 'email_change' };
        } else {
          throw new HttpError(403, 'invalid_link', 'Email link is invalid or has expired');
        }
      } catch (err) {
        const httpError = toHttpError(err);
        if (httpError.code !== 'invalid_link' && httpError.code !== 'email_taken') throw err;
        fragment =
          httpError.code === 'invalid_link'
            ? { error: 'access_denied', error_code: 'otp_expired', error_description: 'Email link is invalid or has expired' }
            : { error: 'invalid_request', error_code: 'email_exists', error_description: 'A user with this email address has already been registered' };
      }
      const location = `${target.split('#')[0]}#${new URLSearchParams({ ...fragment, sb: '' }).toString()}`;
      return { status: 303, redirect: location, headers: { 'Cache-Control': 'no-store', 'Referrer-Policy': 'no-referrer' } };
    },
  }),

  defineRoute({
    ...COMMON,
    method: 'post',
    path: '/auth/v1/otp',
    summary: 'Supabase Auth: one-time codes and magic links (not offered).',
    description: "Supabase Auth's passwordless sign-in (supabase-js `auth.signInWithOtp`): not offered here, answered as Supabase Auth answers when it is disabled (422 `otp_disabled`).",
    limits: [API_KEY_LIMIT],
    body: z.object({ email: z.string().max(320).optional().describe('Ignored.').meta({ example: 'ada@example.com' }) }).meta({ example: { email: 'ada@example.com' } }),
    invalidStatus: 422,
    responses: {
      200: z.object({}).describe("Supabase Auth's answer when a code was sent: never given here (documented for the SDKs' sake)."),
      401: errors('unauthorized'),
      422: errors('provider_disabled'),
    },
    async handler() {
      throw new HttpError(422, 'provider_disabled', 'Signups not allowed for otp', { error_code: 'otp_disabled' });
    },
  }),

  defineRoute({
    ...COMMON,
    method: 'get',
    path: '/auth/v1/settings',
    summary: "Supabase Auth: what this service offers (e-mail and password only).",
    description: "Supabase Auth's settings: e-mail sign-in on, every external provider and phone off, sign-up open and confirmed at once.",
    limits: [API_KEY_LIMIT],
    responses: {
      200: z
        .object({
          external: z.record(z.string(), z.boolean()).describe('Each sign-in provider, on or off.').meta({ example: { email: true, phone: false } }),
          disable_signup: z.boolean().describe('Always false.'),
          mailer_autoconfirm: z.boolean().describe('Always true: sign-up needs no confirmation.'),
          phone_autoconfirm: z.boolean().describe('Always false.'),
          sms_provider: z.string().describe('Always empty.').meta({ example: '' }),
          saml_enabled: z.boolean().describe('Always false.'),
          anonymous_users: z.boolean().describe('Always false.'),
        })
        .meta({ id: 'SupabaseAuthSettings', description: "Supabase Auth's settings." }),
      401: errors('unauthorized'),
    },
    async handler() {
      const off = Object.fromEntries(
        ['anonymous_users', 'apple', 'azure', 'bitbucket', 'discord', 'facebook', 'figma', 'fly', 'github', 'gitlab', 'google', 'keycloak', 'kakao', 'linkedin', 'linkedin_oidc', 'notion', 'phone', 'slack', 'slack_oidc', 'spotify', 'twitch', 'twitter', 'workos', 'zoom', 'saml'].map((p) => [p, false]),
      );
      return {
        status: 200,
        body: { external: { ...off, email: true }, disable_signup: false, mailer_autoconfirm: true, phone_autoconfirm: false, sms_provider: '', saml_enabled: false, anonymous_users: false },
      };
    },
  }),

  defineRoute({
    ...ADMIN,
    method: 'get',
    path: '/auth/v1/admin/users',
    summary: 'Supabase Auth admin: a page of the users (the service-role key only).',
    description:
      "Supabase Auth's user list (supabase-js `auth.admin.listUsers({ page, perPage })`), for the service-role key only: the accounts as User objects, oldest first, with `aud` and the `X-Total-Count` header. Runs the operator's SQL (admin.users_list).",
    limits: [ADMIN_LIMIT],
    query: z.object({
      page: z.coerce.number().int().min(1).max(1_000_000).default(1).describe('The page, from 1.'),
      per_page: z.coerce.number().int().min(1).max(1000).default(50).describe('Users a page (at most 1,000).'),
    }),
    invalidStatus: 400,
    responses: {
      200: z.object({ users: z.array(SupabaseUser).describe('The page of users.'), aud: z.literal('authenticated').describe('Always `authenticated`.') }).describe('A page of users.'),
      401: errors('unauthorized'),
      403: errors('forbidden'),
    },
    async handler(ctx) {
      requireServiceRole(ctx);
      const [row] = await ctx.db((tx) => tx<{ page: { users: unknown[]; total: number } }[]>`select admin.users_list(${ctx.query.page}, ${ctx.query.per_page}) as page`, claimsOf({ kind: 'gateway' }));
      return { status: 200, body: { users: row!.page.users, aud: 'authenticated' }, headers: { 'X-Total-Count': String(row!.page.total) } };
    },
  }),

  defineRoute({
    ...ADMIN,
    method: 'post',
    path: '/auth/v1/admin/users',
    summary: 'Supabase Auth admin: create a user (the service-role key only).',
    description:
      "Supabase Auth's user creation (supabase-js `auth.admin.createUser`), for the service-role key only: creates the account as sign-up does (profile and node; the password hashed in the gateway) with `user_metadata` merged, and answers the User object. Without a password the account signs in after a set-password link (POST /auth/v1/recover). Accounts need no confirmation here, so `email_confirm` changes nothing. A taken address is 422 `email_exists`; phone users are 422 `phone_provider_disabled`; `app_metadata`, `ban_duration` and `role` are not offered (422). Runs admin.user_create.",
    limits: [ADMIN_LIMIT],
    body: z
      .object({
        email: Email.optional().describe('The e-mail address the account signs in with (required: there are no phone users).'),
        ...ADMIN_USER_FIELDS,
      })
      .meta({ example: { email: 'ada@example.com', password: 'correct horse battery staple', email_confirm: true, user_metadata: { name: 'Ada' } } }),
    invalidStatus: 422,
    responses: {
      200: SupabaseUser,
      401: errors('unauthorized'),
      403: errors('forbidden'),
      422: errors('email_taken', 'weak_password', 'provider_disabled', 'invalid_email', 'validation_error'),
    },
    async handler(ctx) {
      requireServiceRole(ctx);
      const { body } = ctx;
      if (body.phone === undefined && body.email === undefined) throw new HttpError(422, 'validation_error', 'An email address is required', { error_code: 'validation_failed' });
      const { passwordHash, metadata } = await adminUserInput(ctx, body);
      const [row] = await ctx
        .db((tx) => tx<{ user: unknown }[]>`select admin.user_create(${body.email!}, ${passwordHash}, ${metadata === null ? null : tx.json(metadata)}::jsonb) as user`, claimsOf({ kind: 'gateway' }))
        .catch(EMAIL_EXISTS);
      return { status: 200, body: row!.user };
    },
  }),

  defineRoute({
    ...ADMIN,
    method: 'put',
    path: '/auth/v1/admin/users/:id',
    summary: 'Supabase Auth admin: change a user (the service-role key only).',
    description:
      "Supabase Auth's user update (supabase-js `auth.admin.updateUserById`), for the service-role key only, every change at once or none: `email` becomes the account's address at once (no link), `password` replaces the password (hashed in the gateway) and ends every session of the account, `user_metadata` is merged as PUT /auth/v1/user merges it. Answers the User object. A taken address is 422 `email_exists`; `phone`, `app_metadata`, `ban_duration` and `role` are not offered (422). Runs admin.user_update.",
    limits: [ADMIN_LIMIT],
    params: z.object({ id: z.uuid().describe("The user's id.") }),
    invalidParamsStatus: 404,
    body: z
      .object({
        email: Email.optional().describe('The new e-mail address.'),
        ...ADMIN_USER_FIELDS,
      })
      .meta({ example: { user_metadata: { name: 'Ada' } } }),
    invalidStatus: 422,
    responses: {
      200: SupabaseUser,
      401: errors('unauthorized'),
      403: errors('forbidden'),
      404: errors('not_found'),
      422: errors('email_taken', 'weak_password', 'provider_disabled', 'invalid_email', 'validation_error'),
    },
    async handler(ctx) {
      requireServiceRole(ctx);
      const { body } = ctx;
      const { passwordHash, metadata } = await adminUserInput(ctx, body);
      const [row] = await ctx
        .db(
          (tx) => tx<{ user: unknown }[]>`
            select admin.user_update(${ctx.params.id}, ${body.email ?? null}, ${passwordHash}, ${metadata === null ? null : tx.json(metadata)}::jsonb) as user`,
          claimsOf({ kind: 'gateway' }),
        )
        .catch(notFound)
        .catch(EMAIL_EXISTS);
      return { status: 200, body: row!.user };
    },
  }),

  defineRoute({
    ...ADMIN,
    method: 'get',
    path: '/auth/v1/admin/users/:id',
    summary: 'Supabase Auth admin: one user (the service-role key only).',
    description: "Supabase Auth's user lookup (supabase-js `auth.admin.getUserById`), for the service-role key only: the account as a User object (admin.user_get).",
    limits: [ADMIN_LIMIT],
    params: z.object({ id: z.uuid().describe("The user's id.") }),
    invalidParamsStatus: 404,
    responses: { 200: SupabaseUser, 401: errors('unauthorized'), 403: errors('forbidden'), 404: errors('not_found') },
    async handler(ctx) {
      requireServiceRole(ctx);
      const [row] = await ctx.db((tx) => tx<{ user: unknown }[]>`select admin.user_get(${ctx.params.id}) as user`, claimsOf({ kind: 'gateway' })).catch(notFound);
      return { status: 200, body: row!.user };
    },
  }),

  defineRoute({
    ...ADMIN,
    method: 'delete',
    path: '/auth/v1/admin/users/:id',
    summary: 'Supabase Auth admin: delete a user (the service-role key only).',
    description:
      "Supabase Auth's user deletion (supabase-js `auth.admin.deleteUser`), for the service-role key only: deletes the account and everything of the person as `npm run admin -- delete-user` does (admin.user_delete); refused (409) while the account is the only manager of a community. Answers the User object as it was.",
    limits: [ADMIN_LIMIT],
    params: z.object({ id: z.uuid().describe("The user's id.") }),
    invalidParamsStatus: 404,
    idempotencyKey: false,
    responses: { 200: SupabaseUser, 401: errors('unauthorized'), 403: errors('forbidden'), 404: errors('not_found'), 409: errors('last_manager_of_communities') },
    async handler(ctx) {
      requireServiceRole(ctx);
      const [row] = await ctx
        .db(async (tx) => {
          const user = await tx<{ user: unknown }[]>`select admin.user_get(${ctx.params.id}) as user`;
          await tx`select admin.user_delete(${ctx.params.id})`;
          return user;
        }, claimsOf({ kind: 'gateway' }))
        .catch(notFound);
      return { status: 200, body: row!.user };
    },
  }),
];

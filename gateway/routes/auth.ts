// Authentication (docs/api.md#authentication): register, signup, login,
// verify, refresh and logout. Refresh tokens are only ever
// handled by the api.auth_* SQL functions; this module signs the access
// token. Passwords are hashed and verified here (core/passwords.ts, bounded
// per process; the database's CPU is shared by every process), and every
// rule around them is SQL: a login is
//   private.password_attempt_start   throttling checked; the hash to compare
//                                    (a dummy for an unknown e-mail) and an attempt
//   the comparison (bcrypt, on the thread pool)
//   private.auth_login_finish        the attempt consumed: a failure counted,
//                                    or a session (and a re-hash stored)
// Both run as the gateway's own role (private functions: no request role can
// read a hash); neither a password nor a hash is logged or answered.
import { z } from 'zod';
import { defineRoute, type Context, type Services } from '../http/route.ts';
import type { Tx } from '../core/db.ts';
import { HttpError, unavailable } from '../core/errors.ts';
import { InvalidTokenError } from '../core/jwt.ts';
import { DateTime, errors, Id, succeeded } from '../http/responses.ts';
import { LIMITS } from '../core/limits.ts';
import { Email, Password, ProfileName } from '../core/schemas.ts';
import { checkPassword, hashNewPassword, type PasswordAttempt, type PasswordSetStart } from '../core/passwords.ts';
import { DEFAULT_AUTH_LIMITS, PASSWORD_SET_LIMIT, tooManyRequests } from '../core/throttle.ts';

/** `name` is optional: without one the profile's name is derived from the e-mail and shown only to the user and their communities' managers. */
const Credentials = z
  .object({
    email: Email.describe('The e-mail address to sign in with (trimmed; at most 320 characters).'),
    password: Password.describe(`At least ${LIMITS.passwordMinLength} characters.`),
    name: ProfileName.nullish()
      .describe("The name other members see. Without one, a name is made from the e-mail address and shown only to you and your communities' managers.")
      .meta({ example: 'Ada Lovelace' }),
  })
  .meta({ example: { email: 'ada@example.com', password: 'correct horse battery staple', name: 'Ada Lovelace' } });
const LoginBody = z.object({
  email: Email.describe('The e-mail address of the account.'),
  password: z.string().min(1).max(1024).describe("The account's password.").meta({ example: 'correct horse battery staple' }),
});
const RefreshToken = z
  .string()
  .min(1)
  .max(512)
  .describe('The refresh token of the session, from login or the last refresh.')
  .meta({ example: 'rt_3q2v9ZkHnA7wXy1bLm5sPd8cQe4uTf6g' });
const RefreshBody = z.object({ refresh_token: RefreshToken });

/** The failure window of the sign-in limits, in minutes (LOGIN_FAILURE_WINDOW_SECONDS by default). */
const WINDOW_MINUTES = DEFAULT_AUTH_LIMITS.windowSeconds / 60;

const UserId = Id.describe("The account's id (its profile's id too).");

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

interface AuthUser {
  user_id: string;
  email: string;
}
interface AuthSession extends AuthUser {
  refresh_token: string;
  session_id: string;
}

const register = (tx: Tx, body: z.infer<typeof Credentials>, passwordHash: string) =>
  tx<AuthUser[]>`select * from api.auth_register(${body.email}, ${passwordHash}, ${body.name ?? null})`;

/** Register and signup: the e-mail checked and the request counted per address (SQL), then the hash in the client's turn. */
async function registrationHash({
  body,
  db,
  services,
  clientIp,
}: Pick<Context<undefined, undefined, z.infer<typeof Credentials>>, 'body' | 'db' | 'services' | 'clientIp'>): Promise<string> {
  const limits = services.authLimits ?? DEFAULT_AUTH_LIMITS;
  return hashNewPassword(services.passwords, clientIp, body.password, async () => {
    const [start] = await db(
      (tx) => tx<PasswordSetStart[]>`
        select * from private.password_set_start('register', ${clientIp}, ${limits.maxPasswordSetsPerIp}, ${limits.windowSeconds}, ${body.email})`,
      null,
    );
    return start;
  });
}

async function tokenPair(services: Services, session: AuthSession) {
  const { accessToken, expiresIn } = await services.tokens.issue({
    id: session.user_id,
    email: session.email,
    sessionId: session.session_id,
  });
  return {
    access_token: accessToken,
    token_type: 'bearer',
    expires_in: expiresIn,
    refresh_token: session.refresh_token,
    user_id: session.user_id,
  };
}

export const authRoutes = [
  defineRoute({
    method: 'post',
    path: '/api/auth/register',
    summary: 'Create an account (user, profile and node).',
    description:
      'Creates an account: a user, its profile and its node (what other members connect to). Then sign in with POST /api/auth/login. A duplicate e-mail is 400 `email_taken` here (POST /api/auth/signup answers 422).',
    limits: [PASSWORD_SET_LIMIT],
    auth: 'public',
    body: Credentials,
    invalidStatus: 400,
    statusOverrides: { 409: 400 },
    responses: {
      201: z.object({
        user_id: UserId,
        email: z.string().describe('The e-mail address, as stored (trimmed).').meta({ example: 'ada@example.com' }),
        message: z.string().describe('`account created`.').meta({ example: 'account created' }),
      }),
      400: errors('email_taken', 'invalid_email', 'weak_password'),
      429: errors('rate_limited'),
      503: errors('service_unavailable'),
    },
    async handler(request) {
      const passwordHash = await registrationHash(request);
      const [user] = await request.db((tx) => register(tx, request.body, passwordHash));
      return { status: 201, body: { user_id: user!.user_id, email: user!.email, message: 'account created' } };
    },
  }),

  defineRoute({
    method: 'post',
    path: '/api/auth/signup',
    summary: 'Create an account; a duplicate e-mail is 422.',
    description:
      'Creates an account, as POST /api/auth/register does, but answers a duplicate e-mail with 422 `email_taken` and no `message`.',
    limits: [PASSWORD_SET_LIMIT],
    auth: 'public',
    body: Credentials,
    invalidStatus: 400,
    statusOverrides: { 409: 422 },
    responses: {
      201: z.object({ user_id: UserId, email: z.string().describe('The e-mail address, as stored (trimmed).').meta({ example: 'ada@example.com' }) }),
      400: errors('invalid_email', 'weak_password'),
      422: errors('email_taken'),
      429: errors('rate_limited'),
      503: errors('service_unavailable'),
    },
    async handler(request) {
      const passwordHash = await registrationHash(request);
      const [user] = await request.db((tx) => register(tx, request.body, passwordHash));
      return { status: 201, body: { user_id: user!.user_id, email: user!.email } };
    },
  }),

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
    async handler({ body, db, services, clientIp }) {
      const limits = services.authLimits ?? DEFAULT_AUTH_LIMITS;
      const { passwords } = services;
      // A place for the password work first: refused (503) before any SQL.
      const place = passwords.enter(clientIp);
      let checked;
      let attempt: PasswordAttempt | undefined;
      try {
        [attempt] = await db(
          (tx) => tx<PasswordAttempt[]>`
            select * from private.password_attempt_start('login', ${body.email}, ${clientIp}, ${passwords.cost},
                                                         ${limits.maxFailuresPerEmailAndClient}, ${limits.maxFailuresPerEmail},
                                                         ${limits.maxFailuresPerIp}, ${limits.windowSeconds})`,
          null,
        );
        if (attempt?.status === 'throttled') throw tooManyRequests(attempt.retry_after, 'too many failed logins, try again later');
        checked = await checkPassword(passwords, place, body.password, attempt!);
      } finally {
        place.leave();
      }
      const [result] = await db(
        (tx) => tx<(AuthSession & { status: string; user_email: string })[]>`
          select * from private.auth_login_finish(${attempt!.attempt}, ${checked.matched}, ${checked.newHash})`,
        null,
      );
      // The same answers whether or not the e-mail exists.
      if (result?.status === 'expired') throw unavailable('the sign-in took too long, try again');
      if (result?.status !== 'ok') throw new HttpError(401, 'invalid_credentials', 'invalid email or password');
      return { status: 200, body: await tokenPair(services, { ...result, email: result.user_email }) };
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
    body: RefreshBody,
    invalidStatus: 400,
    responses: { 200: TokenPair, 401: errors('invalid_refresh_token'), 429: errors('rate_limited') },
    async handler({ body, db, services, clientIp }) {
      const limits = services.authLimits ?? DEFAULT_AUTH_LIMITS;
      const [row] = await db(
        (tx) => tx<(Omit<AuthSession, 'refresh_token'> & { status: string; retry_after: number; new_refresh_token: string })[]>`
          select * from api.auth_refresh_throttled(${body.refresh_token}, ${clientIp}, ${limits.maxFailuresPerIp}, ${limits.windowSeconds})`,
      );
      if (row?.status === 'throttled') throw tooManyRequests(row.retry_after, 'too many failed refreshes, try again later');
      const result = row && { ...row, refresh_token: row.new_refresh_token };
      if (!result || result.status !== 'ok') {
        const reason = result?.status === 'reused' ? 'refresh token reuse detected; the session has been revoked' : `refresh token is ${result?.status ?? 'invalid'}`;
        throw new HttpError(401, 'invalid_refresh_token', reason);
      }
      return { status: 200, body: await tokenPair(services, result) };
    },
  }),

  defineRoute({
    method: 'post',
    path: '/api/auth/logout',
    summary: 'End the session of a refresh token.',
    description:
      'Ends the session of the refresh token: its refresh token stops working, and its access tokens stop working at once too (401 `session_ended`).',
    auth: 'public',
    body: RefreshBody,
    invalidStatus: 400,
    responses: { 200: succeeded({ message: z.string().describe('`logged out`.').meta({ example: 'logged out' }) }), 401: errors('invalid_refresh_token') },
    async handler({ body, db }) {
      await db((tx) => tx`select api.auth_logout(${body.refresh_token})`);
      return { status: 200, body: { success: true, message: 'logged out' } };
    },
  }),

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
      const [user] = await db((tx) => tx<AuthUser[]>`select * from api.auth_verify()`, { ...claims, role: 'authenticated' });
      return { status: 200, body: { valid: true, user_id: user!.user_id, expires_at: new Date(claims.exp! * 1000).toISOString() } };
    },
  }),
];

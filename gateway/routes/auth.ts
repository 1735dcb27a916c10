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
import { defineRoute, type Services } from '../http/route.ts';
import type { Tx } from '../core/db.ts';
import { HttpError, unavailable } from '../core/errors.ts';
import { InvalidTokenError } from '../core/jwt.ts';
import { DateTime, errors, Id, succeeded } from '../http/responses.ts';
import { Email, Password, ProfileName } from '../core/schemas.ts';
import { checkPassword } from '../core/passwords.ts';
import { DEFAULT_AUTH_LIMITS, tooManyRequests } from '../core/throttle.ts';

/** `name` is optional: without one the profile's name is derived from the e-mail and shown only to the user and their communities' managers. */
const Credentials = z.object({ email: Email, password: Password, name: ProfileName.nullish() });
const LoginBody = z.object({ email: Email, password: z.string().min(1).max(1024) });
const RefreshBody = z.object({ refresh_token: z.string().min(1).max(512) });

const TokenPair = z
  .object({
    access_token: z.string(),
    token_type: z.literal('bearer'),
    expires_in: z.number().int().meta({ description: 'seconds' }),
    refresh_token: z.string(),
    user_id: Id,
  })
  .meta({ id: 'TokenPair' });

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

interface AttemptRow {
  status: 'throttled' | 'check';
  retry_after: number;
  attempt: string;
  password_hash: string;
  rehash: boolean;
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
    auth: 'public',
    body: Credentials,
    invalidStatus: 400,
    statusOverrides: { 409: 400 },
    responses: { 201: z.object({ user_id: Id, email: z.string(), message: z.string() }), 400: errors('email_taken', 'invalid_email', 'weak_password'), 503: errors('service_unavailable') },
    async handler({ body, db, services }) {
      const passwordHash = await services.passwords.hash(body.password);
      const [user] = await db((tx) => register(tx, body, passwordHash));
      return { status: 201, body: { user_id: user!.user_id, email: user!.email, message: 'account created' } };
    },
  }),

  defineRoute({
    method: 'post',
    path: '/api/auth/signup',
    summary: 'Create an account; a duplicate e-mail is 422.',
    auth: 'public',
    body: Credentials,
    invalidStatus: 400,
    statusOverrides: { 409: 422 },
    responses: { 201: z.object({ user_id: Id, email: z.string() }), 400: errors('invalid_email', 'weak_password'), 422: errors('email_taken'), 503: errors('service_unavailable') },
    async handler({ body, db, services }) {
      const passwordHash = await services.passwords.hash(body.password);
      const [user] = await db((tx) => register(tx, body, passwordHash));
      return { status: 201, body: { user_id: user!.user_id, email: user!.email } };
    },
  }),

  defineRoute({
    method: 'post',
    path: '/api/auth/login',
    summary: 'Exchange e-mail and password for an access token and a refresh token.',
    auth: 'public',
    body: LoginBody,
    invalidStatus: 400,
    responses: { 200: TokenPair, 401: errors('invalid_credentials'), 429: errors('rate_limited'), 503: errors('service_unavailable') },
    async handler({ body, db, services, clientIp }) {
      const limits = services.authLimits ?? DEFAULT_AUTH_LIMITS;
      const { passwords } = services;
      // A place for the password work first: refused (503) before any SQL.
      const place = passwords.enter();
      let checked;
      let attempt: AttemptRow | undefined;
      try {
        [attempt] = await db(
          (tx) => tx<AttemptRow[]>`
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
    auth: 'public',
    body: RefreshBody,
    invalidStatus: 400,
    responses: { 200: succeeded({ message: z.string() }), 401: errors('invalid_refresh_token') },
    async handler({ body, db }) {
      await db((tx) => tx`select api.auth_logout(${body.refresh_token})`);
      return { status: 200, body: { success: true, message: 'logged out' } };
    },
  }),

  defineRoute({
    method: 'post',
    path: '/api/auth/verify',
    summary: 'Check an access token.',
    auth: 'public',
    body: z.object({ token: z.string().min(1).max(8192) }),
    invalidStatus: 400,
    responses: { 200: z.object({ valid: z.literal(true), user_id: Id, expires_at: DateTime }), 401: errors('invalid_token', 'session_ended'), 429: errors('rate_limited') },
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

// Spec section 4, "Authentication" (and section 5): register, signup, login,
// verify, plus refresh and logout (DESIGN.md). Passwords and refresh tokens are
// only ever handled by the api.auth_* SQL functions; this module signs the
// access token.
import { z } from 'zod';
import { defineRoute, type Services } from '../http/route.ts';
import type { Tx } from '../lib/db.ts';
import { HttpError } from '../lib/errors.ts';
import { InvalidTokenError } from '../lib/jwt.ts';
import { DateTime, errors, Id, succeeded } from '../lib/openapi.ts';
import { Email, Password } from '../lib/schemas.ts';

const Credentials = z.object({ email: Email, password: Password });
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

const register = (tx: Tx, email: string, password: string) =>
  tx<AuthUser[]>`select * from api.auth_register(${email}, ${password})`;

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
    responses: { 201: z.object({ user_id: Id, email: z.string(), message: z.string() }), 400: errors('email_taken', 'invalid_email', 'weak_password') },
    async handler({ body, db }) {
      const [user] = await db((tx) => register(tx, body.email, body.password));
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
    responses: { 201: z.object({ user_id: Id, email: z.string() }), 400: errors('invalid_email', 'weak_password'), 422: errors('email_taken') },
    async handler({ body, db }) {
      const [user] = await db((tx) => register(tx, body.email, body.password));
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
    responses: { 200: TokenPair, 401: errors('invalid_credentials') },
    async handler({ body, db, services }) {
      const [session] = await db((tx) => tx<AuthSession[]>`select * from api.auth_login(${body.email}, ${body.password})`);
      return { status: 200, body: await tokenPair(services, session!) };
    },
  }),

  defineRoute({
    method: 'post',
    path: '/api/auth/refresh',
    summary: 'Rotate a refresh token for a new token pair; reusing a rotated token ends the session.',
    auth: 'public',
    body: RefreshBody,
    invalidStatus: 400,
    responses: { 200: TokenPair, 401: errors('invalid_refresh_token') },
    async handler({ body, db, services }) {
      const [result] = await db(
        (tx) => tx<(AuthSession & { status: string })[]>`select * from api.auth_refresh(${body.refresh_token})`,
      );
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
    responses: { 200: z.object({ valid: z.literal(true), user_id: Id, expires_at: DateTime }), 401: errors('invalid_token') },
    async handler({ body, db, services }) {
      let claims;
      try {
        claims = await services.tokens.verify(body.token);
      } catch (err) {
        if (err instanceof InvalidTokenError) throw new HttpError(401, 'invalid_token', err.message);
        throw err;
      }
      const [user] = await db((tx) => tx<AuthUser[]>`select * from api.auth_verify()`, { ...claims, role: 'authenticated' });
      return { status: 200, body: { valid: true, user_id: user!.user_id, expires_at: new Date(claims.exp! * 1000).toISOString() } };
    },
  }),
];

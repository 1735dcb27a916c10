// What the /auth/v1 routes share (Supabase Auth's, GoTrue's, shapes): the
// User and session objects as Supabase Auth's openapi.yaml describes them
// (UserSchema, AccessTokenResponseSchema), the session answer, and how a
// refusal of the shared doors is restated in Supabase Auth's terms. Every
// route requires an API key (`apikey`, as the SDKs send it) and answers
// Supabase Auth's error body (core/web/errors.ts, `supabase_auth`).
import { z } from 'zod';
import type { Context, Services } from '../../http/route.ts';
import { HttpError, toHttpError } from '../../core/web/errors.ts';
import type { ErrorCode } from '../../core/web/error-codes.ts';
import { claimsOf } from '../../core/auth/identity.ts';
import { LIMITS } from '../../core/web/limits.ts';
import { errors, type SecurityScheme } from '../../http/responses.ts';
import { accessTokenOf, type AuthSession } from '../sessions.ts';

const Time = z.string().describe('A time (RFC 3339, UTC).').meta({ example: '2026-05-01T09:30:00.000Z' });

export const UserMetadata = z.record(z.string(), z.unknown()).describe('What the user says about themselves (`data` of sign-up and PUT /user).').meta({ example: { name: 'Ada' } });

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
    email: z.string().describe('The e-mail address the account signs in with; empty for a guest.').meta({ example: 'ada@example.com' }),
    phone: z.literal('').describe('Always empty: no phone sign-in.'),
    email_confirmed_at: Time.optional().describe('When the address was confirmed: the sign-up (no confirmation step). Absent for a guest.'),
    confirmed_at: Time.optional().describe('The same as email_confirmed_at.'),
    last_sign_in_at: Time.nullable().describe('The latest sign-in, or null.'),
    app_metadata: z
      .looseObject({
        provider: z.literal('email').optional().describe('`email`; absent for a guest.'),
        providers: z.array(z.literal('email')).optional().describe('`["email"]`; absent for a guest.'),
      })
      .describe('Set by the service: the sign-in provider, and whatever its operators set with the service-role key (PUT /auth/v1/admin/users/{id}); carried in the access token (claim `app_metadata`). The user reads it and cannot change it.'),
    user_metadata: UserMetadata,
    identities: z.array(Identity).describe('The ways the user signs in (none for a guest).'),
    created_at: Time.describe('When the account was made.'),
    updated_at: Time.describe('When it last changed.'),
    is_anonymous: z.boolean().describe('True for a guest (POST /auth/v1/signup without e-mail: supabase-js `signInAnonymously`) until it sets an e-mail and a password.'),
    new_email: z.string().optional().describe('While an e-mail change waits for its link: the new address.').meta({ example: 'ada@new.example.com' }),
    email_change_sent_at: Time.optional().describe('While an e-mail change waits for its link: when it was sent.'),
  })
  .meta({ id: 'SupabaseUser', description: "A user as Supabase Auth's User object." });

export const Session = z
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
export async function sessionOf({ db, services }: { db: Context<unknown, unknown, unknown>['db']; services: Services }, session: AuthSession) {
  const { accessToken, expiresIn } = await accessTokenOf(services, session);
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
export function restated(code: ErrorCode, status: number, errorCode: string, msg?: string) {
  return (err: unknown): never => {
    const httpError = toHttpError(err);
    if (httpError.code === code) throw new HttpError(status, code, msg ?? httpError.message, { error_code: errorCode });
    throw err;
  };
}

export const disabled = (what: string) => new HttpError(422, 'provider_disabled', `${what} are disabled`, { error_code: what.startsWith('Anonymous') ? 'anonymous_provider_disabled' : what.startsWith('Phone') ? 'phone_provider_disabled' : 'provider_disabled' });

export const API_KEY_LIMIT = 'Every request carries an API key in `apikey` (the anon key, or the service-role key: `npm run admin -- keys`); without one: 401.';

export const COMMON = { auth: 'public', apiKey: 'required', errorShape: 'supabase_auth' } as const;
export const SIGNED_IN = { auth: 'user' as const, apiKey: 'required' as const, errorShape: 'supabase_auth' as const, security: ['bearerAuth'] as SecurityScheme[] };

/** Supabase Auth's 403 for a credential that is there but not valid (`bad_jwt`) or whose session ended (`session_not_found`). */
export const TOKEN_REFUSED = errors('unauthorized', 'invalid_token', 'session_ended');

export const PasswordField = z.string().max(1024).describe(`The password: at least ${LIMITS.passwordMinLength} characters.`).meta({ example: 'correct horse battery staple' });

export function strongEnough(password: string): void {
  if (password.length < LIMITS.passwordMinLength) {
    throw new HttpError(422, 'weak_password', `Password should be at least ${LIMITS.passwordMinLength} characters.`);
  }
}


// POST /api/auth/register and /api/auth/signup: an account made with an
// e-mail address and a password (gateway/auth/sign-in.ts); then sign in with
// POST /api/auth/login.
import { z } from 'zod';
import { defineRoute } from '../../http/route.ts';
import { errors } from '../../http/responses.ts';
import { LIMITS } from '../../core/web/limits.ts';
import { Email, Password, ProfileName } from '../../core/web/schemas.ts';
import { PASSWORD_SET_LIMIT } from '../../core/web/throttle.ts';
import { register, registrationHash } from '../sign-in.ts';
import { UserId } from '../sessions.ts';

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

export const authSignupRoutes = [
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
];

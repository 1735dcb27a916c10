// POST /auth/v1/recover (supabase-js `auth.resetPasswordForEmail`): a
// set-password link e-mailed as POST /api/auth/recover e-mails it
// (gateway/auth/email-links.ts).
import { z } from 'zod';
import { defineRoute } from '../../http/route.ts';
import { Email } from '../../core/web/schemas.ts';
import { EMAIL_LINK_LIMIT } from '../../core/web/throttle.ts';
import { errors } from '../../http/responses.ts';
import { queueEmailLink } from '../email-links.ts';
import { API_KEY_LIMIT, COMMON } from './shapes.ts';

export const supabaseAuthRecoverRoutes = [
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
    responses: { 200: z.object({}).describe('Always empty.'), 400: errors('invalid_email'), 401: errors('unauthorized'), 429: errors('rate_limited') },
    async handler(ctx) {
      await queueEmailLink(ctx, 'recover', ctx.body.email);
      return { status: 200, body: {} };
    },
  }),
];

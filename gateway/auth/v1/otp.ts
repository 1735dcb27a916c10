// POST /auth/v1/otp (supabase-js `auth.signInWithOtp`): e-mails the account
// with the address a 6-digit code and a magic link, as a recovery link is
// e-mailed (gateway/auth/email-links.ts: the account looked up by a job
// after the answer, so the answer is the same for any address). The code is
// verified by POST /auth/v1/verify, the link by GET /auth/v1/verify
// (verify.ts); codes, links, expiry and limits are SQL (api.auth_otp_*).
import { z } from 'zod';
import { defineRoute } from '../../http/route.ts';
import { Email } from '../../core/web/schemas.ts';
import { EMAIL_LINK_LIMIT } from '../../core/web/throttle.ts';
import { errors } from '../../http/responses.ts';
import { queueEmailLink } from '../email-links.ts';
import { API_KEY_LIMIT, COMMON, disabled } from './shapes.ts';

export const supabaseAuthOtpRoutes = [
  defineRoute({
    ...COMMON,
    method: 'post',
    path: '/auth/v1/otp',
    summary: 'Supabase Auth: e-mail a one-time sign-in code and a magic link.',
    description:
      "Supabase Auth's passwordless sign-in (supabase-js `auth.signInWithOtp({ email })`): e-mails the account with this address a 6-digit code and a link, both valid once, for an hour; a newer e-mail voids the older code. The code signs in with POST /auth/v1/verify (`verifyOtp({ email, token, type: 'email' })`), the link with GET /auth/v1/verify. The answer is the same whether or not an account has the address; no account is created here (`create_user` is ignored: sign up first). `phone` is 422 `phone_provider_disabled`.",
    limits: [API_KEY_LIMIT, EMAIL_LINK_LIMIT, 'At most 5 codes an hour are e-mailed to one account.'],
    body: z
      .object({
        email: Email.optional().describe('The e-mail address of the account.'),
        phone: z.string().max(64).optional().describe('Not offered: 422 `phone_provider_disabled`.').meta({ example: '+15555550100' }),
        create_user: z.boolean().optional().describe('Ignored: no account is created by a code.'),
      })
      .meta({ example: { email: 'ada@example.com' } }),
    invalidStatus: 422,
    responses: {
      200: z.object({}).describe('Always empty, for any address.'),
      401: errors('unauthorized'),
      400: errors('invalid_email'),
      422: errors('provider_disabled'),
      429: errors('rate_limited'),
    },
    async handler(ctx) {
      if (ctx.body.email === undefined) throw disabled('Phone logins');
      await queueEmailLink(ctx, 'otp', ctx.body.email);
      return { status: 200, body: {} };
    },
  }),
];

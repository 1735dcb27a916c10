// POST /auth/v1/otp (supabase-js `auth.signInWithOtp`): passwordless
// sign-in, not offered: answered as Supabase Auth answers when it is disabled.
import { z } from 'zod';
import { defineRoute } from '../../http/route.ts';
import { HttpError } from '../../core/web/errors.ts';
import { errors } from '../../http/responses.ts';
import { API_KEY_LIMIT, COMMON } from './shapes.ts';

export const supabaseAuthOtpRoutes = [
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
      400: errors('invalid_email'),
      422: errors('provider_disabled'),
    },
    async handler() {
      throw new HttpError(422, 'provider_disabled', 'Signups not allowed for otp', { error_code: 'otp_disabled' });
    },
  }),
];

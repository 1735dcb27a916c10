// POST and GET /auth/v1/verify (supabase-js `auth.verifyOtp`, and the link
// form a browser opens): a recovery link signs its account in, an e-mail
// change link confirms the new address (api.auth_recovery_verify,
// api.account_email_change_confirm); an e-mailed sign-in code or its magic
// link (POST /auth/v1/otp) signs in (api.auth_otp_verify, api.auth_magic_link_verify).
import { z } from 'zod';
import { defineRoute } from '../../http/route.ts';
import { HttpError, toHttpError } from '../../core/web/errors.ts';
import { DEFAULT_AUTH_LIMITS, tooManyRequests } from '../../core/web/throttle.ts';
import { claimsOf } from '../../core/auth/identity.ts';
import { redirectTarget } from '../../core/web/redirects.ts';
import { content, errors } from '../../http/responses.ts';
import type { AuthSession } from '../sessions.ts';
import { API_KEY_LIMIT, COMMON, restated, Session, sessionOf, SupabaseUser } from './shapes.ts';

export const supabaseAuthVerifyRoutes = [
  defineRoute({
    ...COMMON,
    method: 'post',
    path: '/auth/v1/verify',
    summary: 'Supabase Auth: a recovery link signs in; an e-mail change link confirms the new address.',
    description:
      "Supabase Auth's verification (supabase-js `auth.verifyOtp({ type, token_hash })`). `type: 'recovery'` with the `token` of a set-password link (POST /auth/v1/recover) as `token_hash` signs its account in: the link is used up, every other credential of the account ends (as the set-password page does), and the answer is a session in which PUT /auth/v1/user may set the password once, within the hour, without the current one. `type: 'email_change'` with the `token_hash` of an e-mail change link (the link PUT /auth/v1/user and POST /api/mobile/account/email send) makes the new address the account's, as the link's page does; the answer is the User object (no session: the link proves the mailbox, not the account). A used, replaced or expired link is 403 `otp_expired`, an address another account took meanwhile 422 `email_exists`. Sign-up needs no confirmation here, so `signup` and the other types are 403 `otp_expired`, as Supabase Auth answers a link it does not know; \n\n`type: 'email'` (or `magiclink`) with `email` and `token`, the 6-digit code POST /auth/v1/otp e-mailed, signs its account in once and answers a session; with `token_hash`, the token of the e-mailed link does the same. A wrong, used or expired code is 403 `otp_expired`, the same for an address without an account; wrong codes count as failed sign-ins of the address (the limits of passwords; past them 429), and the fifth wrong code voids the code.",
    limits: [API_KEY_LIMIT, 'Wrong codes count as failed sign-ins of the address, with those of passwords (POST /auth/v1/token); past the limits: 429 with Retry-After.'],
    body: z
      .object({
        type: z.string().max(32).describe('`recovery`, `email_change`, `email` or `magiclink` (others: 403 `otp_expired`).').meta({ example: 'email_change' }),
        token_hash: z.string().max(512).optional().describe('The `token_hash` of the e-mailed link.').meta({ example: 'Jq2v9ZkHnA7wXy1bLm5sPd8cQe4uTf6gH0rS2vW3xY4' }),
        token: z.string().max(64).optional().describe('type `email`: the 6-digit code e-mailed by POST /auth/v1/otp.').meta({ example: '123456' }),
        email: z.string().max(320).optional().describe('With `token`: the address the code was sent to.').meta({ example: 'ada@example.com' }),
      })
      .meta({ example: { type: 'email_change', token_hash: 'Jq2v9ZkHnA7wXy1bLm5sPd8cQe4uTf6gH0rS2vW3xY4' } }),
    invalidStatus: 422,
    responses: {
      200: z.union([Session, SupabaseUser]).describe('recovery: a session; email_change: the User object.'),
      401: errors('unauthorized'),
      403: errors('invalid_link'),
      422: errors('email_taken', 'provider_disabled'),
      429: errors('rate_limited'),
    },
    async handler(ctx) {
      const { body, db } = ctx;
      const expired = () => new HttpError(403, 'invalid_link', 'Email link is invalid or has expired', { error_code: 'otp_expired' });
      const signInCode = body.type === 'email' || body.type === 'magiclink';
      if (signInCode && body.token_hash === undefined && body.token !== undefined && body.email !== undefined) {
        const limits = ctx.services.authLimits ?? DEFAULT_AUTH_LIMITS;
        const [row] = await db(
          (tx) => tx<(AuthSession & { status: string; retry_after: number; user_email: string })[]>`
            select * from api.auth_otp_verify(${body.email!}, ${body.token!}, ${ctx.clientIp}, ${ctx.userAgent},
                                              ${limits.maxFailuresPerEmailAndClient}, ${limits.maxFailuresPerEmail},
                                              ${limits.maxFailuresPerIp}, ${limits.windowSeconds})`,
        );
        if (row!.status === 'throttled') throw tooManyRequests(row!.retry_after, 'too many failed sign-ins, try again later');
        if (row!.status !== 'ok') throw new HttpError(403, 'invalid_link', 'Token has expired or is invalid', { error_code: 'otp_expired' });
        return { status: 200, body: await sessionOf(ctx, { ...row!, email: row!.user_email }) };
      }
      if (body.token_hash === undefined) throw new HttpError(422, 'provider_disabled', 'Email logins are disabled', { error_code: 'otp_disabled' });
      if (signInCode) {
        const [started] = await db((tx) => tx<AuthSession[]>`select * from api.auth_magic_link_verify(${body.token_hash!}, ${ctx.userAgent}, ${ctx.clientIp})`).catch(
          (err: unknown) => {
            if (toHttpError(err).code === 'invalid_link') throw expired();
            throw err;
          },
        );
        return { status: 200, body: await sessionOf(ctx, started!) };
      }
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
      "Supabase Auth's link form of verification (a browser opens it, so no API key). `type=recovery` with the `token` (a set-password link's token) signs its account in as POST /auth/v1/verify does and answers 303 to `redirect_to` with the session in the URL fragment (`#access_token=...&expires_at=...&expires_in=...&refresh_token=...&token_type=bearer&type=recovery`), which supabase-js reads (`detectSessionInUrl`; the implicit flow: PKCE codes are not offered). `type=magiclink`, the link POST /auth/v1/otp e-mails, signs in the same way (`type=magiclink` in the fragment), once, within the hour. `type=email_change` confirms the new address and answers 303 with `#message=...&type=email_change` (no session: the link proves the mailbox, not the account). A link that is used, replaced, expired or of another type answers 303 with `#error=access_denied&error_code=otp_expired&error_description=...`. `redirect_to` must be the site's address (SITE_URL, default PUBLIC_URL) or below one of AUTH_REDIRECT_URLS; any other address is replaced by the site's (no open redirect).",
    query: z.object({
      type: z.string().max(32).describe('`recovery`, `magiclink` or `email_change`.').meta({ example: 'recovery' }),
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
        if (query.type === 'recovery' || query.type === 'magiclink' || query.type === 'email') {
          const [started] = await ctx.db((tx) =>
            query.type === 'recovery'
              ? tx<AuthSession[]>`select * from api.auth_recovery_verify(${query.token}, ${ctx.userAgent}, ${ctx.clientIp})`
              : tx<AuthSession[]>`select * from api.auth_magic_link_verify(${query.token}, ${ctx.userAgent}, ${ctx.clientIp})`,
          );
          const session = await sessionOf(ctx, started!);
          fragment = {
            access_token: session.access_token,
            expires_at: String(session.expires_at),
            expires_in: String(session.expires_in),
            refresh_token: session.refresh_token,
            token_type: 'bearer',
            type: query.type === 'recovery' ? 'recovery' : 'magiclink',
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
];

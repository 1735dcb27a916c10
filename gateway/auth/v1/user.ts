// GET and PUT /auth/v1/user (supabase-js `auth.getUser`, `auth.updateUser`):
// the caller as a User object; a password or e-mail change checks the
// password again as the account routes do (gateway/auth/reauthenticate.ts).
import { z } from 'zod';
import { defineRoute } from '../../http/route.ts';
import { HttpError } from '../../core/web/errors.ts';
import { Email } from '../../core/web/schemas.ts';
import { errors } from '../../http/responses.ts';
import { reauthenticate } from '../reauthenticate.ts';
import { registrationHash } from '../sign-in.ts';
import { API_KEY_LIMIT, PasswordField, restated, SIGNED_IN, strongEnough, SupabaseUser, TOKEN_REFUSED, UserMetadata } from './shapes.ts';

export const supabaseAuthUserRoutes = [
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
      "Supabase Auth's user update (supabase-js `auth.updateUser`). In a session a recovery link started (POST /auth/v1/verify type=recovery), `password` alone needs no `current_password`, once, within the hour. `data` is merged into user_metadata (a key set to null is removed). `password` changes the password as POST /api/mobile/account/password does (every other session ends) and `email` asks for an e-mail change as POST /api/mobile/account/email does (a link to the new address, the `new_email` of the answer until it is opened): both need `current_password` (Supabase Auth's \"require current password\" setting, always on here), checked as a sign-in is. Only the access token of a sign-in updates a user.\n\nA guest (`is_anonymous`, POST /auth/v1/signup without e-mail) sends `email` and `password` together, no `current_password`: it becomes a full account with them, keeping its id and everything it made (the address is not in use: else 422 `email_exists`; counted as a sign-up per client address). One of them alone is 422.",
    limits: [API_KEY_LIMIT, 'A wrong `current_password` counts as a failed sign-in of the account; past the limits: 429 with Retry-After. A guest\'s conversion counts as a sign-up (PASSWORD_SET_MAX_PER_IP).'],
    idempotencyKey: false,
    body: z
      .object({
        email: Email.optional().describe('A new e-mail address: confirmed by a link sent to it.'),
        password: PasswordField.optional(),
        current_password: z.string().max(1024).optional().describe('The password now: needed with `password` or `email`.').meta({ example: 'correct horse battery staple' }),
        data: UserMetadata.optional(),
        app_metadata: z.unknown().optional().describe('Refused: 403 `not_admin`. Only the service-role key writes app_metadata (PUT /auth/v1/admin/users/{id}).'),
      })
      .meta({ example: { data: { name: 'Ada' } } }),
    invalidStatus: 422,
    responses: {
      200: SupabaseUser,
      400: errors('current_password_required', 'invalid_credentials', 'invalid_email'),
      401: errors('unauthorized'),
      403: errors('forbidden', 'unauthorized', 'invalid_token', 'session_ended'),
      422: errors('weak_password', 'email_taken', 'validation_error'),
      429: errors('rate_limited'),
    },
    async handler(ctx) {
      const { body } = ctx;
      // As Supabase Auth: what the service says about a user is not the user's to change.
      if (body.app_metadata !== undefined) throw new HttpError(403, 'forbidden', 'Updating app_metadata requires admin privileges', { error_code: 'not_admin' });
      const [current] = await ctx.db((tx) => tx<{ user: { email: string; is_anonymous: boolean } }[]>`select api.auth_user() as user`);
      if (current!.user.is_anonymous && (body.email !== undefined || body.password !== undefined)) {
        // A guest becomes a full account: the address checked and the request counted as a sign-up's, then one SQL call.
        if (body.email === undefined || body.password === undefined) {
          throw new HttpError(422, 'validation_error', 'A guest sets an e-mail address and a password together', { error_code: 'validation_failed' });
        }
        strongEnough(body.password);
        const credentials = { email: body.email, password: body.password };
        const taken = restated('email_taken', 422, 'email_exists', 'A user with this email address has already been registered');
        const passwordHash = await registrationHash({ ...ctx, body: credentials }).catch(taken);
        const [row] = await ctx
          .db((tx) => tx<{ user: unknown }[]>`select api.auth_guest_convert(${body.email!}, ${passwordHash}, ${body.data ? tx.json(body.data as never) : null}::jsonb) as user`)
          .catch(taken);
        return { status: 200, body: row!.user };
      }
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
];

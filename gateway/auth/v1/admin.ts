// /auth/v1/admin/users (supabase-js `auth.admin.*`), for the service-role
// key only: the operator's SQL (admin.users_list, admin.user_create,
// admin.user_update, admin.user_get, admin.user_delete) over the one user
// table.
import { z } from 'zod';
import { defineRoute, type Context } from '../../http/route.ts';
import { HttpError, toHttpError } from '../../core/web/errors.ts';
import { claimsOf } from '../../core/auth/identity.ts';
import { bearerToken } from '../../core/auth/bearer.ts';
import { Email } from '../../core/web/schemas.ts';
import { errors, type SecurityScheme } from '../../http/responses.ts';
import { disabled, PasswordField, restated, strongEnough, SupabaseUser, UserMetadata } from './shapes.ts';

const ADMIN = { auth: 'public', apiKey: 'required', errorShape: 'supabase_auth', security: ['bearerAuth'] as SecurityScheme[] } as const;
const ADMIN_LIMIT = 'Only with the service-role key (`npm run admin -- keys`) both as `apikey` and as the bearer token, as `createClient(URL, SERVICE_ROLE_KEY)` sends it; the anon key or a user\'s access token: 403 `not_admin`.';

/**
 * The admin routes' credential: the bearer token must be the service-role key
 * (Supabase Auth's requireAdmin): none is 401 `no_authorization`, any other
 * (the anon key, a user's access token) 403 `not_admin`.
 */
function requireServiceRole(ctx: Context<unknown, unknown, unknown>): void {
  const bearer = bearerToken(ctx.request.headers.authorization);
  if (bearer === null) throw new HttpError(401, 'unauthorized', 'This endpoint requires a valid Bearer token');
  if (ctx.services.tokens.apiKeyRole(bearer) !== 'service_role' || ctx.apiKeyRole !== 'service_role') {
    throw new HttpError(403, 'forbidden', 'User not allowed', { error_code: 'not_admin' });
  }
}

const notFound = (err: unknown): never => {
  if (toHttpError(err).code === 'not_found') throw new HttpError(404, 'not_found', 'User not found', { error_code: 'user_not_found' });
  throw err;
};

/** The fields of an admin create or update besides `email`, as Supabase Auth takes them; those this service does not offer are declared so that they are refused (422) rather than ignored. */
const ADMIN_USER_FIELDS = {
  password: PasswordField.optional(),
  user_metadata: UserMetadata.optional(),
  email_confirm: z.boolean().optional().describe('Accepted and ignored: every account is confirmed.'),
  phone: z.string().max(64).optional().describe('Not offered: 422 `phone_provider_disabled`.').meta({ example: '+15555550100' }),
  app_metadata: z
    .record(z.string(), z.unknown())
    .optional()
    .describe('What the service says about the user, merged as `user_metadata` is (a key given as null is removed; at most 16 KB): readable by the user, carried in their next access tokens (claim `app_metadata`) for rules to read, writable only here.'),
  ban_duration: z.string().max(64).optional().describe('Not offered: 422.'),
  role: z.string().max(64).optional().describe('Not offered: 422 (every user has the role `authenticated`).'),
};

/**
 * An admin create or update's refusals and inputs, the same for both: the
 * fields not offered, a weak password; then the password hashed in the
 * gateway (as every password is) and user_metadata (null: unchanged).
 */
async function adminUserInput(
  ctx: Context<unknown, unknown, unknown>,
  body: { password?: string; user_metadata?: Record<string, unknown>; phone?: string; app_metadata?: Record<string, unknown>; ban_duration?: unknown; role?: unknown },
) {
  if (body.phone !== undefined) throw disabled('Phone signups');
  for (const field of ['ban_duration', 'role'] as const) {
    if (body[field] !== undefined) throw new HttpError(422, 'validation_error', `${field} is not offered by this service`, { error_code: 'validation_failed' });
  }
  if (body.password !== undefined) strongEnough(body.password);
  return {
    passwordHash: body.password !== undefined ? await ctx.services.passwords.hash(ctx.clientIp, body.password) : null,
    metadata: body.user_metadata === undefined ? null : (body.user_metadata as never),
    appMetadata: body.app_metadata === undefined ? null : (body.app_metadata as never),
  };
}

/** An empty query parameter as if it were not there. */
const emptyAsUnset = (value: unknown) => (value === '' ? undefined : value);

/**
 * The `Link` header of a page of users, as Supabase Auth writes it: the next
 * page while there is one, then the last; `page` first in each URL (supabase-js
 * reads the number after the first `=`).
 */
function pageLinks(publicUrl: string, page: number, perPage: number, total: number): string {
  const lastPage = Math.ceil(total / perPage);
  const link = (n: number, rel: string) => `<${publicUrl}/auth/v1/admin/users?page=${n}&per_page=${perPage}>; rel="${rel}"`;
  return [...(page < lastPage ? [link(page + 1, 'next')] : []), link(lastPage, 'last')].join(', ');
}

/** A taken address, as Supabase Auth's admin endpoints answer it. */
const EMAIL_EXISTS = restated('email_taken', 422, 'email_exists', 'A user with this email address has already been registered');

export const supabaseAuthAdminRoutes = [
  defineRoute({
    ...ADMIN,
    method: 'get',
    path: '/auth/v1/admin/users',
    summary: 'Supabase Auth admin: a page of the users (the service-role key only).',
    description:
      "Supabase Auth's user list (supabase-js `auth.admin.listUsers({ page, perPage })`), for the service-role key only: the accounts as User objects, oldest first, with `aud`, the `X-Total-Count` header and a `Link` header naming the next page (`rel=\"next\"`, while there is one) and the last (`rel=\"last\"`), as Supabase Auth sends them and supabase-js reads them (its `nextPage`, `lastPage` and `total`). Empty `page` and `per_page` (supabase-js sends them so when not given) are the defaults. Runs the operator's SQL (admin.users_list).",
    limits: [ADMIN_LIMIT],
    query: z.object({
      // supabase-js sends both, empty when not given (`?page=&per_page=`): empty is the default.
      page: z.preprocess(emptyAsUnset, z.coerce.number().int().min(1).max(1_000_000).default(1)).describe('The page, from 1 (empty: 1).'),
      per_page: z.preprocess(emptyAsUnset, z.coerce.number().int().min(1).max(1000).default(50)).describe('Users a page (at most 1,000; empty: 50).'),
    }),
    invalidStatus: 400,
    responses: {
      200: z.object({ users: z.array(SupabaseUser).describe('The page of users.'), aud: z.literal('authenticated').describe('Always `authenticated`.') }).describe('A page of users.'),
      401: errors('unauthorized'),
      403: errors('forbidden'),
    },
    async handler(ctx) {
      requireServiceRole(ctx);
      const [row] = await ctx.db((tx) => tx<{ page: { users: unknown[]; total: number } }[]>`select admin.users_list(${ctx.query.page}, ${ctx.query.per_page}) as page`, claimsOf({ kind: 'gateway' }));
      const { total } = row!.page;
      return {
        status: 200,
        body: { users: row!.page.users, aud: 'authenticated' },
        headers: { 'X-Total-Count': String(total), Link: pageLinks(ctx.services.publicUrl, ctx.query.page, ctx.query.per_page, total) },
      };
    },
  }),

  defineRoute({
    ...ADMIN,
    method: 'post',
    path: '/auth/v1/admin/users',
    summary: 'Supabase Auth admin: create a user (the service-role key only).',
    description:
      "Supabase Auth's user creation (supabase-js `auth.admin.createUser`), for the service-role key only: creates the account as sign-up does (profile and node; the password hashed in the gateway) with `user_metadata` and `app_metadata` merged, and answers the User object. Without a password the account signs in after a set-password link (POST /auth/v1/recover). Accounts need no confirmation here, so `email_confirm` changes nothing. A taken address is 422 `email_exists`; phone users are 422 `phone_provider_disabled`; `ban_duration` and `role` are not offered (422); an invalid address is 400 `validation_failed` as Supabase Auth words it. Runs admin.user_create.",
    limits: [ADMIN_LIMIT],
    body: z
      .object({
        email: Email.optional().describe('The e-mail address the account signs in with (required: there are no phone users).'),
        ...ADMIN_USER_FIELDS,
      })
      .meta({ example: { email: 'ada@example.com', password: 'correct horse battery staple', email_confirm: true, user_metadata: { name: 'Ada' } } }),
    invalidStatus: 422,
    responses: {
      200: SupabaseUser,
      401: errors('unauthorized'),
      403: errors('forbidden'),
      400: errors('invalid_email'),
      422: errors('email_taken', 'weak_password', 'provider_disabled', 'validation_error'),
    },
    async handler(ctx) {
      requireServiceRole(ctx);
      const { body } = ctx;
      if (body.phone === undefined && body.email === undefined) throw new HttpError(422, 'validation_error', 'An email address is required', { error_code: 'validation_failed' });
      const { passwordHash, metadata, appMetadata } = await adminUserInput(ctx, body);
      const [row] = await ctx
        .db(
          (tx) => tx<{ user: unknown }[]>`
            select admin.user_create(${body.email!}, ${passwordHash}, ${metadata === null ? null : tx.json(metadata)}::jsonb, ${appMetadata === null ? null : tx.json(appMetadata)}::jsonb) as user`,
          claimsOf({ kind: 'gateway' }),
        )
        .catch(EMAIL_EXISTS);
      return { status: 200, body: row!.user };
    },
  }),

  defineRoute({
    ...ADMIN,
    method: 'put',
    path: '/auth/v1/admin/users/:id',
    summary: 'Supabase Auth admin: change a user (the service-role key only).',
    description:
      "Supabase Auth's user update (supabase-js `auth.admin.updateUserById`), for the service-role key only, every change at once or none: `email` becomes the account's address at once (no link), `password` replaces the password (hashed in the gateway) and ends every session of the account, `user_metadata` is merged as PUT /auth/v1/user merges it, and `app_metadata` the same way (only here: no user's door writes it; the user's next access token carries it). Answers the User object. A taken address is 422 `email_exists`; `phone`, `ban_duration` and `role` are not offered (422); an invalid address is 400 `validation_failed`. Runs admin.user_update.",
    limits: [ADMIN_LIMIT],
    params: z.object({ id: z.uuid().describe("The user's id.") }),
    invalidParamsStatus: 404,
    body: z
      .object({
        email: Email.optional().describe('The new e-mail address.'),
        ...ADMIN_USER_FIELDS,
      })
      .meta({ example: { user_metadata: { name: 'Ada' } } }),
    invalidStatus: 422,
    responses: {
      200: SupabaseUser,
      401: errors('unauthorized'),
      403: errors('forbidden'),
      404: errors('not_found'),
      400: errors('invalid_email'),
      422: errors('email_taken', 'weak_password', 'provider_disabled', 'validation_error'),
    },
    async handler(ctx) {
      requireServiceRole(ctx);
      const { body } = ctx;
      const { passwordHash, metadata, appMetadata } = await adminUserInput(ctx, body);
      const [row] = await ctx
        .db(
          (tx) => tx<{ user: unknown }[]>`
            select admin.user_update(${ctx.params.id}, ${body.email ?? null}, ${passwordHash}, ${metadata === null ? null : tx.json(metadata)}::jsonb,
                                     ${appMetadata === null ? null : tx.json(appMetadata)}::jsonb) as user`,
          claimsOf({ kind: 'gateway' }),
        )
        .catch(notFound)
        .catch(EMAIL_EXISTS);
      return { status: 200, body: row!.user };
    },
  }),

  defineRoute({
    ...ADMIN,
    method: 'get',
    path: '/auth/v1/admin/users/:id',
    summary: 'Supabase Auth admin: one user (the service-role key only).',
    description: "Supabase Auth's user lookup (supabase-js `auth.admin.getUserById`), for the service-role key only: the account as a User object (admin.user_get).",
    limits: [ADMIN_LIMIT],
    params: z.object({ id: z.uuid().describe("The user's id.") }),
    invalidParamsStatus: 404,
    responses: { 200: SupabaseUser, 401: errors('unauthorized'), 403: errors('forbidden'), 404: errors('not_found') },
    async handler(ctx) {
      requireServiceRole(ctx);
      const [row] = await ctx.db((tx) => tx<{ user: unknown }[]>`select admin.user_get(${ctx.params.id}) as user`, claimsOf({ kind: 'gateway' })).catch(notFound);
      return { status: 200, body: row!.user };
    },
  }),

  defineRoute({
    ...ADMIN,
    method: 'delete',
    path: '/auth/v1/admin/users/:id',
    summary: 'Supabase Auth admin: delete a user (the service-role key only).',
    description:
      "Supabase Auth's user deletion (supabase-js `auth.admin.deleteUser`), for the service-role key only: deletes the account and everything of the person as `npm run admin -- delete-user` does (admin.user_delete); refused (409) while the account is the only manager of a community. Answers the User object as it was.",
    limits: [ADMIN_LIMIT],
    params: z.object({ id: z.uuid().describe("The user's id.") }),
    invalidParamsStatus: 404,
    idempotencyKey: false,
    responses: { 200: SupabaseUser, 401: errors('unauthorized'), 403: errors('forbidden'), 404: errors('not_found'), 409: errors('last_manager_of_communities') },
    async handler(ctx) {
      requireServiceRole(ctx);
      const [row] = await ctx
        .db(async (tx) => {
          const user = await tx<{ user: unknown }[]>`select admin.user_get(${ctx.params.id}) as user`;
          await tx`select admin.user_delete(${ctx.params.id})`;
          return user;
        }, claimsOf({ kind: 'gateway' }))
        .catch(notFound);
      return { status: 200, body: row!.user };
    },
  }),
];

// The caller's API tokens (docs/api.md#api-tokens).
// Creating, listing and deactivating are SQL (api.api_token_create,
// api.api_tokens_list, api.api_token_deactivate); the secret is generated
// there and only its hash is stored. It is answered once, in the creation
// response, and never logged (the request log holds paths and statuses only).
import { z } from 'zod';
import { defineRoute } from '../http/route.ts';
import { ApiToken, PermissionPattern } from '../core/api-tokens.ts';
import { LIMITS } from '../core/limits.ts';
import { errors, succeeded } from '../http/responses.ts';
import { Text, Uuid } from '../core/schemas.ts';

export const CreateApiTokenBody = z.object({
  name: Text(LIMITS.apiTokenNameMaxLength),
  permissions: z.array(PermissionPattern).min(1, { message: 'must list at least one path pattern' }).max(LIMITS.apiTokenPermissionsMaxCount),
  expires_at: z.iso.datetime({ offset: true, message: 'must be an ISO 8601 date-time' }).nullish(),
  /** A community-scoped token (managers of the community only). */
  community_id: Uuid.nullish(),
});

const ApiTokenOut = ApiToken.meta({ id: 'ApiToken' });

interface Created {
  token: ApiToken;
  token_value: string;
}

export const tokenRoutes = [
  defineRoute({
    method: 'get',
    path: '/api/docs/tokens',
    summary: "The caller's API tokens, newest first (never their secrets).",
    auth: 'user',
    responses: { 200: z.object({ tokens: z.array(ApiTokenOut) }) },
    async handler({ db }) {
      const rows = await db((tx) => tx<{ token: ApiToken }[]>`select token from api.api_tokens_list() as token`);
      return { status: 200, body: { tokens: rows.map((row) => row.token) } };
    },
  }),

  defineRoute({
    method: 'post',
    path: '/api/docs/tokens',
    summary: 'Create an API token; its secret (token_value) is returned this once. community_id makes it community-scoped (managers only).',
    auth: 'user',
    body: CreateApiTokenBody,
    invalidStatus: 422,
    responses: { 201: z.object({ token: ApiTokenOut, token_value: z.string() }), 403: errors('forbidden', 'not_community_manager'), 422: errors('validation_error', 'invalid_permissions') },
    async handler({ body, db }) {
      const [row] = await db(
        (tx) => tx<Created[]>`
          select token, token_value
            from api.api_token_create(${body.name}, ${body.permissions}, ${body.expires_at ?? null},
                                      ${body.community_id ?? null})`,
      );
      return { status: 201, body: { token: row!.token, token_value: row!.token_value } };
    },
  }),

  defineRoute({
    method: 'delete',
    path: '/api/docs/tokens/:id',
    summary: 'Deactivate one of the caller\'s API tokens (it stops working at once; it stays listed, inactive).',
    auth: 'user',
    params: z.object({ id: Uuid }),
    invalidParamsStatus: 404,
    responses: { 200: succeeded({ token: ApiTokenOut }), 404: errors('token_not_found') },
    async handler({ params, db }) {
      const [row] = await db((tx) => tx<{ token: ApiToken }[]>`select api.api_token_deactivate(${params.id}) as token`);
      return { status: 200, body: { success: true, token: row!.token } };
    },
  }),
];

// The caller's API tokens (docs/api/integration.md#api-tokens).
// Creating, listing and deactivating are SQL (api.api_token_create,
// api.api_tokens_list, api.api_token_deactivate); the secret is generated
// there and only its hash is stored. It is answered once, in the creation
// response, and never logged (the request log holds paths and statuses only).
import { z } from 'zod';
import { defineRoute } from '../http/route.ts';
import { ApiToken, PermissionPattern } from '../core/auth/api-tokens.ts';
import { LIMITS } from '../core/web/limits.ts';
import { errors, succeeded } from '../http/responses.ts';
import { Text, Uuid } from '../core/web/schemas.ts';

export const CreateApiTokenBody = z
  .object({
    name: Text(LIMITS.apiTokenNameMaxLength).describe('What the token is for (shown in the list).').meta({ example: 'Calendar sync script' }),
    permissions: z
      .array(PermissionPattern)
      .min(1, { message: 'must list at least one path pattern' })
      .max(LIMITS.apiTokenPermissionsMaxCount)
      .describe('The paths the token may call: `*` for all, or paths and path prefixes ending in `*`.'),
    expires_at: z.iso
      .datetime({ offset: true, message: 'must be an ISO 8601 date-time' })
      .nullish()
      .describe('When it stops working; absent or null: never.')
      .meta({ example: '2030-12-31T23:59:59Z' }),
    /** A community-scoped token (managers of the community only). */
    community_id: Uuid.nullish().describe(
      "Makes a community-scoped token: it acts on that community's platform integration only (managers of the community only).",
    ),
  })
  .meta({ example: { name: 'Calendar sync script', permissions: ['/api/mobile/*'] } });

const ApiTokenOut = ApiToken.meta({ id: 'ApiToken', description: "One of the caller's API tokens (never its secret)." });

interface Created {
  token: ApiToken;
  token_value: string;
}

export const tokenRoutes = [
  defineRoute({
    method: 'get',
    path: '/api/docs/tokens',
    summary: "The caller's API tokens, newest first (never their secrets).",
    description:
      "The caller's API tokens, newest first, active or not; never their secrets.",
    auth: 'user',
    responses: { 200: z.object({ tokens: z.array(ApiTokenOut).describe('The tokens, newest first, active or not.') }) },
    async handler({ db }) {
      const rows = await db((tx) => tx<{ token: ApiToken }[]>`select token from api.api_tokens_list() as token`);
      return { status: 200, body: { tokens: rows.map((row) => row.token) } };
    },
  }),

  defineRoute({
    method: 'post',
    path: '/api/docs/tokens',
    summary: 'Create an API token; its secret (token_value) is returned this once. community_id makes it community-scoped (managers only).',
    description:
      "Creates an API token. Its secret (`token_value`) is in this answer only: keep it. The token acts as the caller on the paths its permissions match (403 elsewhere). With `community_id` it is community-scoped (the community's managers only). An API token cannot create tokens: sign in for an access token.",
    limits: [`\`name\` at most ${LIMITS.apiTokenNameMaxLength} characters; at most ${LIMITS.apiTokenPermissionsMaxCount} permissions, each at most ${LIMITS.apiTokenPatternMaxLength} characters.`],
    auth: 'user',
    body: CreateApiTokenBody,
    invalidStatus: 422,
    responses: {
      201: z.object({
        token: ApiTokenOut,
        token_value: z
          .string()
          .describe('The secret: send it as `Authorization: Bearer <token_value>`. It is shown this once; only its hash is kept.')
          .meta({ example: 'cbk_Q7w2Zr9KxLm4Tn8Vb1Hc5Jd3Fs6Ga0PeYu2Ri7Wo' }),
      }),
      403: errors('forbidden', 'not_community_manager'),
      422: errors('validation_error', 'invalid_permissions'),
    },
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
    description:
      "Deactivates one of the caller's API tokens: it stops working at once (open streams end too). It stays in the list, inactive.",
    auth: 'user',
    params: z.object({ id: Uuid.describe("The token's id.") }),
    invalidParamsStatus: 404,
    responses: { 200: succeeded({ token: ApiTokenOut }), 404: errors('token_not_found') },
    async handler({ params, db }) {
      const [row] = await db((tx) => tx<{ token: ApiToken }[]>`select api.api_token_deactivate(${params.id}) as token`);
      return { status: 200, body: { success: true, token: row!.token } };
    },
  }),
];

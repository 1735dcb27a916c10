// GET /auth/v1/settings: what this service offers (e-mail and password, guests).
// GET /auth/v1/.well-known/jwks.json: the public keys that verify access tokens.
import { z } from 'zod';
import { defineRoute } from '../../http/route.ts';
import { errors } from '../../http/responses.ts';
import { API_KEY_LIMIT, COMMON } from './shapes.ts';

export const supabaseAuthSettingsRoutes = [
  defineRoute({
    ...COMMON,
    method: 'get',
    path: '/auth/v1/settings',
    summary: 'Supabase Auth: what this service offers (e-mail and password, guests).',
    description: "Supabase Auth's settings: e-mail sign-in on, guests as AUTH_ANONYMOUS_USERS says (on by default), every external provider and phone off, sign-up open and confirmed at once.",
    limits: [API_KEY_LIMIT],
    responses: {
      200: z
        .object({
          external: z.record(z.string(), z.boolean()).describe('Each sign-in provider, on or off.').meta({ example: { email: true, phone: false } }),
          disable_signup: z.boolean().describe('Always false.'),
          mailer_autoconfirm: z.boolean().describe('Always true: sign-up needs no confirmation.'),
          phone_autoconfirm: z.boolean().describe('Always false.'),
          sms_provider: z.string().describe('Always empty.').meta({ example: '' }),
          saml_enabled: z.boolean().describe('Always false.'),
          anonymous_users: z.boolean().describe('Whether guests may sign in (AUTH_ANONYMOUS_USERS, on by default).'),
        })
        .meta({ id: 'SupabaseAuthSettings', description: "Supabase Auth's settings." }),
      401: errors('unauthorized'),
    },
    async handler({ services }) {
      const guests = services.guestsEnabled !== false;
      const off = Object.fromEntries(
        ['apple', 'azure', 'bitbucket', 'discord', 'facebook', 'figma', 'fly', 'github', 'gitlab', 'google', 'keycloak', 'kakao', 'linkedin', 'linkedin_oidc', 'notion', 'phone', 'slack', 'slack_oidc', 'spotify', 'twitch', 'twitter', 'workos', 'zoom', 'saml'].map((p) => [p, false]),
      );
      return {
        status: 200,
        body: { external: { ...off, anonymous_users: guests, email: true }, disable_signup: false, mailer_autoconfirm: true, phone_autoconfirm: false, sms_provider: '', saml_enabled: false, anonymous_users: guests },
      };
    },
  }),

  defineRoute({
    auth: 'public',
    errorShape: 'supabase_auth',
    method: 'get',
    path: '/auth/v1/.well-known/jwks.json',
    summary: 'Supabase Auth: the public keys that verify access tokens (JWKS).',
    description:
      "The JSON Web Key Set of the asymmetric keys that verify this service's access tokens (ES256, or RS256): the key that signs now, a standby key published before it signs, and a previous key until the tokens it signed have expired; never a revoked one. An access token names its key in its header (`kid`). supabase-js `auth.getClaims()` reads it (and caches it) to verify a token without asking the service; so can any other party. No API key is needed. Operators manage the keys with `npm run admin -- signing-keys` (docs/operations/running.md#signing-keys).",
    responses: {
      200: z
        .object({
          keys: z
            .array(
              z
                .looseObject({
                  kty: z.enum(['EC', 'RSA']).describe('The key type.'),
                  kid: z.string().describe('The key id, as access tokens name it in their header.'),
                  alg: z.enum(['ES256', 'RS256']).describe('The algorithm it verifies.'),
                  use: z.literal('sig').describe('Always `sig`.'),
                  key_ops: z.array(z.literal('verify')).describe('Always `["verify"]`.'),
                })
                .describe('A public key (RFC 7517), with its curve and coordinates (EC) or modulus and exponent (RSA).'),
            )
            .describe('The keys, the one that signs now first.'),
        })
        .meta({
          id: 'SupabaseAuthJwks',
          description: 'A JSON Web Key Set (RFC 7517).',
          example: { keys: [{ kty: 'EC', crv: 'P-256', x: 'f83OJ3D2xF1Bg8vub9tLe1gHMzV76e8Tus9uPHvRVEU', y: 'x_FEzRu9m36HLN_tue659LNpXW6pCyStikYjKIWI5a0', kid: '9f1c2d3e-4b5a-4c6d-8e7f-0a1b2c3d4e5f', alg: 'ES256', use: 'sig', key_ops: ['verify'] }] },
        }),
    },
    async handler(ctx) {
      return { status: 200, body: ctx.services.tokens.jwks(), headers: { 'Cache-Control': 'public, max-age=600' } };
    },
  }),
];

// GET /auth/v1/settings: what this service offers (e-mail and password, guests).
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
];

// POST /auth/v1/logout (supabase-js `auth.signOut`): this session, every
// session or the others end (api.account_sign_out).
import { z } from 'zod';
import { defineRoute } from '../../http/route.ts';
import { errors, noContent } from '../../http/responses.ts';
import { API_KEY_LIMIT, SIGNED_IN, TOKEN_REFUSED } from './shapes.ts';

export const supabaseAuthLogoutRoutes = [
  defineRoute({
    ...SIGNED_IN,
    method: 'post',
    path: '/auth/v1/logout',
    summary: 'Supabase Auth: sign out this session, every session, or the others.',
    description:
      "Supabase Auth's logout (supabase-js `auth.signOut`): `scope=global` (the default) ends every session of the user, `local` the calling one, `others` all but the calling one: their refresh tokens, access tokens, streams and realtime channels stop at once. `global` also ends every signed storage URL the user made (downloads and uploads).",
    limits: [API_KEY_LIMIT],
    query: z.object({
      scope: z.enum(['global', 'local', 'others']).default('global').describe('Which sessions end.'),
    }),
    invalidStatus: 400,
    responses: { 204: noContent('Signed out.'), 401: errors('unauthorized'), 403: TOKEN_REFUSED },
    async handler({ db, query }) {
      await db((tx) => tx`select api.account_sign_out(${query.scope})`);
      return { status: 204 };
    },
  }),
];

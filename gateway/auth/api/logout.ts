// POST /api/auth/logout: the session of a refresh token ends (api.auth_logout).
import { z } from 'zod';
import { defineRoute } from '../../http/route.ts';
import { errors, succeeded } from '../../http/responses.ts';
import { RefreshToken } from '../sessions.ts';

export const authLogoutRoutes = [
  defineRoute({
    method: 'post',
    path: '/api/auth/logout',
    summary: 'End the session of a refresh token.',
    description:
      'Ends the session of the refresh token: its refresh token stops working, and its access tokens stop working at once too (401 `session_ended`).',
    auth: 'public',
    body: z.object({ refresh_token: RefreshToken }),
    invalidStatus: 400,
    responses: { 200: succeeded({ message: z.string().describe('`logged out`.').meta({ example: 'logged out' }) }), 401: errors('invalid_refresh_token') },
    async handler({ body, db }) {
      await db((tx) => tx`select api.auth_logout(${body.refresh_token})`);
      return { status: 200, body: { success: true, message: 'logged out' } };
    },
  }),
];

// Spec section 4, "Profile and hats". Row-level security picks the caller's
// rows; the hat limit and the primary hat are enforced in SQL.
import { z } from 'zod';
import { defineRoute } from '../http/route.ts';
import { ProfileName, Text } from '../lib/schemas.ts';

const HatInput = z.object({
  name: Text(100),
  hat_type: z.string().trim().min(1).max(50),
  description: z.string().max(2000).nullish(),
});

export const profileRoutes = [
  defineRoute({
    method: 'get',
    path: '/api/mobile/profile',
    summary: "The caller's profile, with max_hats from their subscription.",
    auth: 'user',
    errorShapes: { 404: 'flagged' },
    async handler({ db }) {
      const [profile] = await db((tx) => tx`select * from api.profile_get()`);
      return { status: 200, body: { success: true, data: profile } };
    },
  }),

  defineRoute({
    method: 'patch',
    path: '/api/mobile/profile',
    summary: "Set the caller's name (a chosen name is shown to other members; one derived from the e-mail is not).",
    auth: 'user',
    body: z.object({ name: ProfileName }),
    invalidStatus: 422,
    errorShapes: { 404: 'flagged' },
    async handler({ body, db }) {
      const [profile] = await db((tx) => tx`select * from api.profile_update(${body.name})`);
      return { status: 200, body: { success: true, data: profile } };
    },
  }),

  defineRoute({
    method: 'get',
    path: '/api/mobile/hats',
    summary: "The caller's hats, primary first.",
    auth: 'user',
    async handler({ db }) {
      const hats = await db((tx) => tx`select * from api.hats_list()`);
      return { status: 200, body: { success: true, data: hats } };
    },
  }),

  defineRoute({
    method: 'post',
    path: '/api/mobile/hats',
    summary: 'Create a hat; the first is primary; at most max_hats.',
    auth: 'user',
    body: z.object({ hat: HatInput }),
    invalidStatus: 422,
    async handler({ body, db }) {
      const { name, hat_type, description } = body.hat;
      const [hat] = await db((tx) => tx`select * from api.hat_create(${name}, ${hat_type}, ${description ?? null})`);
      return { status: 201, body: { success: true, data: hat } };
    },
  }),

  defineRoute({
    method: 'get',
    path: '/api/mobile/hat_types',
    summary: 'The hat types a hat may have.',
    auth: 'user',
    async handler({ db }) {
      const types = await db((tx) => tx`select * from api.hat_types_list()`);
      return { status: 200, body: { success: true, data: types } };
    },
  }),
];

// Profile and hats (docs/api.md#profile-and-hats). Row-level security picks the caller's
// rows; the hat limit and the primary hat are enforced in SQL.
import { z } from 'zod';
import { defineRoute } from '../http/route.ts';
import { HttpError } from '../core/errors.ts';
import { LIMITS } from '../core/limits.ts';
import { ProfileName, Text } from '../core/schemas.ts';
import { DateTime, errors, Id, succeeded } from '../http/responses.ts';

const HatInput = z.object({
  name: Text(LIMITS.hatNameMaxLength),
  hat_type: z.string().trim().min(1).max(50),
  description: z.string().max(LIMITS.hatDescriptionMaxLength).nullish(),
});

/** UserProfile: the caller's profile. */
const UserProfile = z
  .object({
    id: Id,
    email: z.string(),
    name: z.string(),
    is_premium: z.boolean(),
    subscription_type: z.enum(['basic', 'premium']),
    max_hats: z.number().int().min(0),
    node_id: Id.nullable().optional(),
    created_at: DateTime.optional(),
    updated_at: DateTime.optional(),
  })
  .meta({ id: 'UserProfile' });

/** Hat: one of the caller's personas. */
const Hat = z
  .object({
    id: Id,
    name: z.string(),
    hat_type: z.string(),
    description: z.string().nullable().optional(),
    is_primary: z.boolean().optional(),
    created_at: DateTime.optional(),
  })
  .meta({ id: 'Hat' });

const HatType = z.object({ id: z.string(), name: z.string(), description: z.string().nullable() }).meta({ id: 'HatType' });

export const profileRoutes = [
  defineRoute({
    method: 'get',
    path: '/api/mobile/profile',
    summary: "The caller's profile, with max_hats from their subscription.",
    auth: 'user',
    errorShapes: { 404: 'flagged' },
    responses: { 200: succeeded({ data: UserProfile }), 404: errors('profile_not_found') },
    async handler({ db }) {
      const [profile] = await db((tx) => tx`select * from api.profile_get()`);
      if (!profile) throw new HttpError(404, 'profile_not_found', 'profile not found');
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
    responses: { 200: succeeded({ data: UserProfile }), 404: errors('profile_not_found'), 422: errors('validation_error') },
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
    responses: { 200: succeeded({ data: z.array(Hat) }) },
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
    responses: { 201: succeeded({ data: Hat }), 422: errors('hat_limit_reached', 'unknown_hat_type') },
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
    responses: { 200: succeeded({ data: z.array(HatType) }) },
    async handler({ db }) {
      const types = await db((tx) => tx`select * from api.hat_types_list()`);
      return { status: 200, body: { success: true, data: types } };
    },
  }),
];

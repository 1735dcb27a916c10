// Profile and hats (docs/api/mobile.md#profile-and-hats). Row-level security picks the caller's
// rows; the hat limit and the primary hat are enforced in SQL.
import { z } from 'zod';
import { defineRoute } from '../http/route.ts';
import { HttpError } from '../core/web/errors.ts';
import { LIMITS } from '../core/web/limits.ts';
import { ProfileName, Text } from '../core/web/schemas.ts';
import { DateTime, errors, Id, succeeded } from '../http/responses.ts';
import { IfMatchHeaders, ifMatchTags, versioned, type Versioned } from '../http/versions.ts';

const HatInput = z
  .object({
    name: Text(LIMITS.hatNameMaxLength).describe('What the hat is called, for you and the people you meet.').meta({ example: 'At work' }),
    hat_type: z
      .string()
      .trim()
      .min(1)
      .max(50)
      .describe("The hat's type: the `id` of one of the hat types (GET /api/mobile/hat_types).")
      .meta({ example: 'professional' }),
    description: z
      .string()
      .max(LIMITS.hatDescriptionMaxLength)
      .nullish()
      .describe('A few words about this side of you.')
      .meta({ example: 'Product designer at Acme; ask me about accessible interfaces.' }),
  })
  .describe('The hat to create.');

/** UserProfile: the caller's profile. */
export const UserProfile = z
  .object({
    id: Id.describe("The profile's id (the user's id)."),
    email: z.string().nullable().describe('The e-mail address the user signs in with; null for a guest (supabase-js signInAnonymously) until it sets one.').meta({ example: 'ada@example.com' }),
    name: z
      .string()
      .describe('The name: chosen by the user (shown to other members), or made from the e-mail address until they choose one.')
      .meta({ example: 'Ada Lovelace' }),
    is_premium: z.boolean().describe('Whether the subscription is the premium one.').meta({ example: false }),
    subscription_type: z.enum(['basic', 'premium']).describe('The subscription plan.'),
    max_hats: z.number().int().min(0).describe('How many hats the plan allows (basic 3, premium 10).').meta({ example: 3 }),
    node_id: Id.nullable().describe("The user's node: the id other members connect to (a connection's target_node_id)."),
    created_at: DateTime.describe('When the account was created.'),
    updated_at: DateTime.describe('When the profile last changed.'),
    avatar_url: z
      .url()
      .nullable()
      .describe('The public URL of the avatar (an object of the `avatars` bucket, docs/storage.md), or null.')
      .meta({ example: 'https://community.example.com/storage/v1/object/public/avatars/5f0c8a9e-3b1d-4c62-9a7e-2d4b6f8a1c03/me.png' }),
  })
  .meta({ id: 'UserProfile', description: "The caller's profile, with max_hats from their subscription." });

/** Hat: one of the caller's personas. */
export const Hat = z
  .object({
    id: Id.describe("The hat's id (a check-in's or a connection's hat_id)."),
    name: z.string().describe('What the hat is called.').meta({ example: 'At work' }),
    hat_type: z.string().describe('The `id` of its hat type (GET /api/mobile/hat_types).').meta({ example: 'professional' }),
    description: z.string().nullable().describe('A few words about this side of the user, or null.').meta({ example: 'Product designer at Acme.' }),
    is_primary: z.boolean().describe('Whether it is the primary hat (the first one created).'),
    created_at: DateTime.describe('When the hat was created.'),
  })
  .meta({ id: 'Hat', description: 'A hat: one of the personas a user wears at events (professional, social, ...).' });

const HatType = z
  .object({
    id: z.string().describe('The hat type\'s id: what a hat\'s `hat_type` names.').meta({ example: 'professional' }),
    name: z.string().describe('Its display name.').meta({ example: 'Professional' }),
    description: z.string().nullable().describe('What it is for, or null.').meta({ example: 'Your working self: role, company, skills.' }),
  })
  .meta({ id: 'HatType', description: 'A kind of hat.' });

export const profileRoutes = [
  defineRoute({
    method: 'get',
    path: '/api/mobile/profile',
    summary: "The caller's profile, with max_hats from their subscription.",
    description:
      "The caller's profile: name, e-mail, subscription (and how many hats it allows) and node id.",
    auth: 'user',
    errorShapes: { 404: 'flagged' },
    responses: { 200: succeeded({ data: UserProfile }), 404: errors('profile_not_found') },
    etag: true,
    async handler({ db }) {
      const [row] = await db((tx) => tx<Versioned[]>`select p.*, api.etag(p.updated_at) as etag from api.profile_get() p`);
      if (!row) throw new HttpError(404, 'profile_not_found', 'profile not found');
      const { object: profile, headers } = versioned(row);
      return { status: 200, body: { success: true, data: profile }, headers };
    },
  }),

  defineRoute({
    method: 'patch',
    path: '/api/mobile/profile',
    summary: "Set the caller's name and avatar (a chosen name is shown to other members; one derived from the e-mail is not).",
    description:
      "Changes what the body names. `name`: a name chosen here is shown to other members (in member lists and to the people they connect with); one made from the e-mail address never is. `avatar_path`: an image the caller uploaded to their own folder of the `avatars` bucket (`{user id}/me.png`, docs/storage.md), or null to remove the avatar; the profile then answers its public `avatar_url`.",
    auth: 'user',
    body: z
      .object({
        name: ProfileName.optional().describe('The new name, shown to other members.').meta({ example: 'Ada Lovelace' }),
        avatar_path: z
          .string()
          .min(1)
          .max(1024)
          .nullable()
          .optional()
          .describe("The avatar: the path of an object in the caller's folder of the `avatars` bucket, or null to remove it.")
          .meta({ example: '5f0c8a9e-3b1d-4c62-9a7e-2d4b6f8a1c03/me.png' }),
      })
      .refine((b) => b.name !== undefined || b.avatar_path !== undefined, { message: 'name or avatar_path is required' }),
    headers: IfMatchHeaders,
    invalidStatus: 422,
    errorShapes: { 404: 'flagged' },
    responses: {
      200: succeeded({ data: UserProfile }),
      404: errors('profile_not_found'),
      412: errors('precondition_failed'),
      422: errors('validation_error', 'invalid_image_path'),
    },
    etag: true,
    async handler({ body, headers: { 'if-match': ifMatch }, db }) {
      const [row] = await db(
        (tx) => tx<Versioned[]>`select p.*, api.etag(p.updated_at) as etag from api.profile_patch(${tx.json(body)}, ${ifMatchTags(ifMatch)}::text[]) p`,
      );
      const { object: profile, headers } = versioned(row!);
      return { status: 200, body: { success: true, data: profile }, headers };
    },
  }),

  defineRoute({
    method: 'get',
    path: '/api/mobile/hats',
    summary: "The caller's hats, primary first.",
    description:
      "The caller's hats: the primary one first, then oldest first.",
    auth: 'user',
    responses: { 200: succeeded({ data: z.array(Hat).describe('The hats, primary first, then oldest first.') }) },
    async handler({ db }) {
      const hats = await db((tx) => tx`select * from api.hats_list()`);
      return { status: 200, body: { success: true, data: hats } };
    },
  }),

  defineRoute({
    method: 'post',
    path: '/api/mobile/hats',
    summary: 'Create a hat; the first is primary; at most max_hats.',
    limits: ['At most `max_hats` hats (the profile says how many: basic 3, premium 10); past it: 422 `hat_limit_reached`.'],
    description:
      "Creates a hat for the caller. The first hat is the primary one. A hat's type is one of GET /api/mobile/hat_types.",
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
    description:
      'The hat types a hat may have, in display order.',
    auth: 'user',
    responses: { 200: succeeded({ data: z.array(HatType).describe('The hat types, in display order.') }) },
    async handler({ db }) {
      const types = await db((tx) => tx`select * from api.hat_types_list()`);
      return { status: 200, body: { success: true, data: types } };
    },
  }),
];

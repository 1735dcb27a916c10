// Communities (docs/api/mobile.md#communities), and the public GET /api/community/{id}.
// Membership rules, counts, ordering and pagination are in SQL
// (api.communit*); 400 and 404 use the Flagged body {success:false, error}.
import { z } from 'zod';
import { defineRoute } from '../http/route.ts';
import type { ErrorShape } from '../core/web/errors.ts';
import { jsonObjectWith } from '../core/web/json.ts';
import { LIMITS } from '../core/web/limits.ts';
import { CommunityBase, CommunityManager } from '../core/web/shapes.ts';
import { DateTime, errors, Id, Pagination, succeeded } from '../http/responses.ts';
import { QueryInteger, Uuid } from '../core/web/schemas.ts';

const flagged: Partial<Record<number, ErrorShape>> = { 400: 'flagged', 404: 'flagged' };

const Page = z.object({
  limit: QueryInteger(1, LIMITS.pageLimitMax).default(50).describe('How many items a page holds.').meta({ example: 20 }),
  offset: QueryInteger(0, 1_000_000_000).default(0).describe('How many items to skip (0 for the first page).').meta({ example: 0 }),
});
const Search = Page.extend({
  q: z
    .string()
    .min(1, { message: 'q is required' })
    .max(200)
    .describe('Text to look for in the name, description and tags (case-insensitive).')
    .meta({ example: 'climbing' }),
});
const CommunityPath = z.object({ id: Uuid.describe("The community's id.") });

const Role = z.enum(['member', 'manager']);

/** An element of the caller's own list (api.communities_mine). */
export const MyCommunityListItem = CommunityBase.extend({
  joined_at: DateTime.describe('When the caller joined.'),
  role: Role.describe("The caller's role in it."),
}).meta({ id: 'MyCommunityListItem', description: 'One of the caller\'s communities, with when they joined and their role.' });

/** CommunityListItem: an element of the search results (api.communities_search). */
const CommunityListItem = CommunityBase.extend({
  is_member: z.boolean().describe('Whether the caller is a member.'),
  is_manager: z.boolean().describe('Whether the caller manages it.').meta({ example: false }),
}).meta({ id: 'CommunityListItem', description: 'A community found by a search, with the caller\'s membership.' });

/** CommunityDetail: one community, with its managers and the caller's membership. */
const CommunityDetail = CommunityBase.extend({
  managers: z.array(CommunityManager).describe('Its managers, longest-serving first.'),
  is_member: z.boolean().describe('Whether the caller is a member.'),
  is_manager: z.boolean().describe('Whether the caller manages it.').meta({ example: false }),
  joined_at: DateTime.nullable().describe('When the caller joined; null when they are not a member.'),
  user_role: Role.nullable().describe("The caller's role; null when they are not a member."),
}).meta({ id: 'CommunityDetail', description: 'One community, with its managers and the caller\'s membership.' });

/** CommunityMember: an element of the members page (a node id, never an e-mail). */
const CommunityMember = z
  .object({
    id: Id.describe("The member's node id."),
    role: Role.describe('Their role.'),
    joined_at: DateTime.describe('When they joined.'),
    name: z.string().nullable().describe('Their name, or null when it is not shown to the caller (a name made from an e-mail address).').meta({ example: 'Grace Hopper' }),
  })
  .meta({ id: 'CommunityMember', description: 'A member of a community (a node id, never an e-mail address).' });

const MyCommunityPage = succeeded({ data: z.array(MyCommunityListItem).describe('This page of communities.'), pagination: Pagination });
const CommunityPage = succeeded({ data: z.array(CommunityListItem).describe('This page of communities.'), pagination: Pagination });
const PAGE_LIMITS = `\`limit\` is 1 to ${LIMITS.pageLimitMax} (default 50); \`offset\` 0 or more.`;
const PAGE_ERRORS = errors('invalid_limit', 'invalid_offset');

/** A page as SQL wrote it: `{"data": [...], "pagination": {...}}` as text, passed through. */
interface PageResult {
  page: string;
}

const pageReply = (row: PageResult | undefined) => ({ status: 200, json: jsonObjectWith({ success: true }, row!.page) });

export const communityRoutes = [
  defineRoute({
    method: 'get',
    path: '/api/mobile/communities',
    summary: "The caller's communities, with joined_at and role.",
    description:
      'The communities the caller belongs to, the most recently joined first, a page at a time, with when they joined and their role.',
    limits: [PAGE_LIMITS],
    auth: 'user',
    query: Page,
    errorShapes: flagged,
    responses: { 200: MyCommunityPage, 400: PAGE_ERRORS },
    async handler({ query, db }) {
      const [row] = await db((tx) => tx<PageResult[]>`select api.communities_mine(${query.limit}, ${query.offset})::text as page`);
      return pageReply(row);
    },
  }),

  defineRoute({
    method: 'get',
    path: '/api/mobile/communities/search',
    summary: 'Search all communities by name, description and tags.',
    description:
      'Searches every community by name, description and tags (a case-insensitive substring), by name, a page at a time, with whether the caller is a member or a manager.',
    limits: [PAGE_LIMITS],
    auth: 'user',
    query: Search,
    errorShapes: flagged,
    responses: { 200: CommunityPage, 400: errors('invalid_query', 'invalid_limit', 'invalid_offset') },
    async handler({ query, db }) {
      const [row] = await db(
        (tx) => tx<PageResult[]>`select api.communities_search(${query.q}, ${query.limit}, ${query.offset})::text as page`,
      );
      return pageReply(row);
    },
  }),

  defineRoute({
    method: 'get',
    path: '/api/mobile/communities/:id',
    summary: 'One community with its managers and the caller\'s membership.',
    description:
      'One community, with its managers and whether (and since when, and as what) the caller is a member.',
    auth: 'user',
    params: CommunityPath,
    errorShapes: flagged,
    responses: { 200: succeeded({ data: CommunityDetail }), 404: errors('community_not_found') },
    async handler({ params, db }) {
      const [row] = await db((tx) => tx`select api.community_get(${params.id}) as community`);
      return { status: 200, body: { success: true, data: row!.community } };
    },
  }),

  defineRoute({
    method: 'patch',
    path: '/api/mobile/communities/:id',
    summary: "A manager sets the community's image.",
    description:
      "A manager of the community sets its image: `image_path` is the path of an image uploaded to the community's folder of the `community-images` bucket (`{community id}/logo.png`, docs/storage.md), or null to remove it. Answers the community, with its public `image_url`.",
    auth: 'user',
    params: CommunityPath,
    body: z.object({
      image_path: z
        .string()
        .min(1)
        .max(1024)
        .nullable()
        .describe("The path of an object in the community's folder of `community-images`, or null to remove the image.")
        .meta({ example: '0b6f2c1e-8d4a-4f3b-9c2e-7a1d5e9f3b20/logo.png' }),
    }),
    invalidStatus: 422,
    errorShapes: flagged,
    responses: {
      200: succeeded({ data: CommunityDetail }),
      403: errors('not_community_manager'),
      404: errors('community_not_found'),
      422: errors('validation_error', 'invalid_image_path'),
    },
    async handler({ params, body, db }) {
      const [row] = await db((tx) => tx`select api.community_update(${params.id}, ${tx.json(body)}) as community`);
      return { status: 200, body: { success: true, data: row!.community } };
    },
  }),

  defineRoute({
    method: 'get',
    path: '/api/mobile/communities/:id/members',
    summary: 'The members of a community: managers first, then by joined_at.',
    description:
      'The members of a community, a page at a time: managers first, then the longest-standing members. Members are named by their node id, and by name only where the name may be shown.',
    limits: [PAGE_LIMITS],
    auth: 'user',
    params: CommunityPath,
    query: Page,
    errorShapes: flagged,
    responses: {
      200: succeeded({ data: z.array(CommunityMember).describe('This page of members.'), pagination: Pagination }),
      400: PAGE_ERRORS,
      404: errors('community_not_found'),
    },
    async handler({ params, query, db }) {
      const [row] = await db(
        (tx) => tx<PageResult[]>`select api.community_members(${params.id}, ${query.limit}, ${query.offset})::text as page`,
      );
      return pageReply(row);
    },
  }),

  defineRoute({
    method: 'post',
    path: '/api/mobile/communities/:id/join',
    summary: 'Join a community as a member.',
    description:
      'The caller joins the community as a member (its events then reach them).',
    auth: 'user',
    params: CommunityPath,
    errorShapes: flagged,
    responses: {
      200: succeeded({
        data: z
          .object({
            member_count: z.number().int().describe('How many members the community has now.').meta({ example: 129 }),
            role: z.enum(['member']).describe('The role the caller joined with: always `member`.'),
            joined_at: DateTime.describe('When the caller joined.'),
          })
          .describe('The membership.'),
      }),
      400: errors('already_member', 'user_has_no_node'),
      404: errors('community_not_found'),
    },
    async handler({ params, db }) {
      const [row] = await db((tx) => tx`select api.community_join(${params.id}) as joined`);
      return { status: 200, body: { success: true, data: row!.joined } };
    },
  }),

  defineRoute({
    method: 'post',
    path: '/api/mobile/communities/:id/leave',
    summary: 'Leave a community (the last manager cannot).',
    description:
      'The caller leaves the community. Its last manager cannot leave (400 `last_manager`).',
    auth: 'user',
    params: CommunityPath,
    errorShapes: flagged,
    responses: {
      200: succeeded({
        data: z
          .object({ member_count: z.number().int().describe('How many members the community has now.').meta({ example: 127 }) })
          .describe('The community after the caller left.'),
      }),
      400: errors('not_a_member', 'user_has_no_node', 'last_manager'),
      404: errors('community_not_found'),
    },
    async handler({ params, db }) {
      const [row] = await db((tx) => tx`select api.community_leave(${params.id}) as left`);
      return { status: 200, body: { success: true, data: row!.left } };
    },
  }),

  defineRoute({
    method: 'get',
    path: '/api/community/:community_id',
    summary: 'Public page data of a community (no credential; no member identities).',
    description:
      'What anyone may see of a community, without a credential: its name, description, tags, member count and dates; never who its members are.',
    auth: 'public',
    params: z.object({ community_id: Uuid.describe("The community's id.") }),
    errorShapes: flagged,
    responses: {
      200: succeeded({ data: CommunityBase.meta({ id: 'CommunityPublic', description: 'What anyone may see of a community (no member identities).' }) }),
      404: errors('community_not_found'),
    },
    async handler({ params, db }) {
      const [row] = await db((tx) => tx`select api.community_public(${params.community_id}) as community`);
      return { status: 200, body: { success: true, data: row!.community } };
    },
  }),
];

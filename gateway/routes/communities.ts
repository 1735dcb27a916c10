// Communities (docs/api.md#communities), and the public GET /api/community/{id}.
// Membership rules, counts, ordering and pagination are in SQL
// (api.communit*); 400 and 404 use the Flagged body {success:false, error}.
import { z } from 'zod';
import { defineRoute } from '../http/route.ts';
import type { ErrorShape } from '../core/errors.ts';
import { jsonObjectWith } from '../core/json.ts';
import { LIMITS } from '../core/limits.ts';
import { DateTime, errors, Id, Pagination, succeeded } from '../http/responses.ts';
import { QueryInteger, Uuid } from '../core/schemas.ts';

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
const CommunityPath = z.object({ id: Uuid });

const Role = z.enum(['member', 'manager']);

/** The fields every community payload starts with. */
const CommunityBase = z.object({
  id: Id,
  name: z.string(),
  member_count: z.number().int(),
  created_at: DateTime,
  updated_at: DateTime,
  description: z.string().nullable().optional(),
  tags: z.array(z.string()).optional(),
});

/** CommunityListItem: an element of the list and search results. */
const CommunityListItem = CommunityBase.extend({
  is_member: z.boolean().optional(),
  is_manager: z.boolean().optional(),
  joined_at: DateTime.nullable().optional(),
  role: Role.nullable().optional(),
}).meta({ id: 'CommunityListItem' });

/** CommunityDetail: one community, with its managers and the caller's membership. */
const CommunityDetail = CommunityBase.extend({
  managers: z.array(z.object({ id: Id, name: z.string().nullable() })),
  is_member: z.boolean(),
  is_manager: z.boolean(),
  joined_at: DateTime.nullable().optional(),
  user_role: Role.nullable().optional(),
}).meta({ id: 'CommunityDetail' });

/** CommunityMember: an element of the members page (a node id, never an e-mail). */
const CommunityMember = z
  .object({ id: Id, role: Role, joined_at: DateTime, name: z.string().nullable().optional() })
  .meta({ id: 'CommunityMember' });

const CommunityPage = succeeded({ data: z.array(CommunityListItem), pagination: Pagination });
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
    auth: 'user',
    query: Page,
    errorShapes: flagged,
    responses: { 200: CommunityPage, 400: PAGE_ERRORS },
    async handler({ query, db }) {
      const [row] = await db((tx) => tx<PageResult[]>`select api.communities_mine(${query.limit}, ${query.offset})::text as page`);
      return pageReply(row);
    },
  }),

  defineRoute({
    method: 'get',
    path: '/api/mobile/communities/search',
    summary: 'Search all communities by name, description and tags.',
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
    method: 'get',
    path: '/api/mobile/communities/:id/members',
    summary: 'The members of a community: managers first, then by joined_at.',
    auth: 'user',
    params: CommunityPath,
    query: Page,
    errorShapes: flagged,
    responses: { 200: succeeded({ data: z.array(CommunityMember), pagination: Pagination }), 400: PAGE_ERRORS, 404: errors('community_not_found') },
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
    auth: 'user',
    params: CommunityPath,
    errorShapes: flagged,
    responses: { 200: succeeded({ data: z.object({ member_count: z.number().int(), role: z.string(), joined_at: DateTime }) }), 400: errors('already_member', 'user_has_no_node'), 404: errors('community_not_found') },
    async handler({ params, db }) {
      const [row] = await db((tx) => tx`select api.community_join(${params.id}) as joined`);
      return { status: 200, body: { success: true, data: row!.joined } };
    },
  }),

  defineRoute({
    method: 'post',
    path: '/api/mobile/communities/:id/leave',
    summary: 'Leave a community (the last manager cannot).',
    auth: 'user',
    params: CommunityPath,
    errorShapes: flagged,
    responses: { 200: succeeded({ data: z.object({ member_count: z.number().int() }) }), 400: errors('not_a_member', 'user_has_no_node', 'last_manager'), 404: errors('community_not_found') },
    async handler({ params, db }) {
      const [row] = await db((tx) => tx`select api.community_leave(${params.id}) as left`);
      return { status: 200, body: { success: true, data: row!.left } };
    },
  }),

  defineRoute({
    method: 'get',
    path: '/api/community/:community_id',
    summary: 'Public page data of a community (no credential; no member identities).',
    auth: 'public',
    params: z.object({ community_id: Uuid }),
    errorShapes: flagged,
    responses: { 200: succeeded({ data: CommunityBase.meta({ id: 'CommunityPublic' }) }), 404: errors('community_not_found') },
    async handler({ params, db }) {
      const [row] = await db((tx) => tx`select api.community_public(${params.community_id}) as community`);
      return { status: 200, body: { success: true, data: row!.community } };
    },
  }),
];

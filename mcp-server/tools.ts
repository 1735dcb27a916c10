// The nine tools of the agent interface (docs/agents.md#tools). Each one validates
// its arguments with zod and calls ONE api.mcp_* SQL function as the caller;
// scoping (managed communities only, own members only) and the per-agent
// limits are in SQL (sql/migrations/committed/000016-agents.sql and later).
import { z } from 'zod';
import type { Tx } from '../gateway/core/database/transaction.ts';
import { LIMITS } from '../gateway/core/web/limits.ts';
import { Email, Uuid } from '../gateway/core/web/schemas.ts';

export type ToolKind = 'read' | 'write';

export interface ToolContext {
  /** PUBLIC_URL: events carry links built from it; set-password links too. */
  publicUrl: string;
}

export interface ToolDefinition<S extends z.ZodObject = z.ZodObject> {
  name: string;
  title: string;
  description: string;
  kind: ToolKind;
  annotations: {
    readOnlyHint: boolean;
    destructiveHint: boolean;
    idempotentHint: boolean;
    openWorldHint: boolean;
  };
  input: S;
  run(tx: Tx, args: z.output<S>, ctx: ToolContext): Promise<unknown>;
}

function defineTool<S extends z.ZodObject>(def: ToolDefinition<S>): ToolDefinition {
  return def as unknown as ToolDefinition;
}

/** Reads touch only this service's database: closed world, no side effects. */
const READ = { readOnlyHint: true, destructiveHint: false, idempotentHint: true, openWorldHint: false } as const;

const JsonObject = z.record(z.string(), z.unknown());

async function one(rows: Promise<{ result: unknown }[]>): Promise<unknown> {
  const [row] = await rows;
  return row?.result ?? null;
}

export const tools: ToolDefinition[] = [
  defineTool({
    name: 'community_profile',
    title: 'Community profile',
    description:
      'Profile of a community you manage: name, description, tags, member count, managers, sandbox and draft flags, and whether it accepts onboarding hand-offs.',
    kind: 'read',
    annotations: READ,
    input: z.strictObject({ community_id: Uuid.describe('Id of a community you manage') }),
    run: (tx, a) => one(tx`select api.mcp_community_profile(${a.community_id}) as result`),
  }),
  defineTool({
    name: 'list_community_events',
    title: 'List community events',
    description:
      'Upcoming (and ongoing) events of a community you manage, soonest first, and its past events, latest first (at most 100 of each), with title, date, description and status.',
    kind: 'read',
    annotations: READ,
    input: z.strictObject({ community_id: Uuid.describe('Id of a community you manage') }),
    run: (tx, a, ctx) => one(tx`select api.mcp_community_events(${a.community_id}, ${ctx.publicUrl}) as result`),
  }),
  defineTool({
    name: 'get_event',
    title: 'Get event',
    description: 'One event (by id or node id) of a community you manage, with its status.',
    kind: 'read',
    annotations: READ,
    input: z.strictObject({ event_id: Uuid.describe('Event id or event node id') }),
    run: (tx, a, ctx) => one(tx`select api.mcp_event_get(${a.event_id}, ${ctx.publicUrl}) as result`),
  }),
  defineTool({
    name: 'search_onboarding_communities',
    title: 'Search onboarding communities',
    description: 'The communities you manage that accept onboarding hand-offs (see set_onboarding_opt_in).',
    kind: 'read',
    annotations: READ,
    input: z.strictObject({}),
    run: (tx) => one(tx`select api.mcp_onboarding_communities() as result`),
  }),
  defineTool({
    name: 'get_member',
    title: 'Get member',
    description: 'A member you created with create_member: profile, the signup data and the attributes you set.',
    kind: 'read',
    annotations: READ,
    input: z.strictObject({ member_id: Uuid.describe('The member id create_member returned (or the member node id)') }),
    run: (tx, a) => one(tx`select api.mcp_member_get(${a.member_id}) as result`),
  }),
  defineTool({
    name: 'create_member',
    title: 'Create member',
    description:
      'Creates a member account with no password and e-mails the member a link to set one (no password passes through you). `data` (the signup data you collected) is stored on the member. Limited to 20 per hour.',
    kind: 'write',
    annotations: { readOnlyHint: false, destructiveHint: false, idempotentHint: false, openWorldHint: true },
    input: z.strictObject({
      email: Email.describe("The member's e-mail address"),
      name: z.string().trim().min(1).max(LIMITS.profileNameMaxLength).optional().describe('Display name (default: derived from the e-mail)'),
      data: JsonObject.optional().describe('Signup data collected from the member (free-form object)'),
    }),
    run: (tx, a, ctx) =>
      one(
        tx`select api.mcp_member_create(${a.email}, ${a.name ?? null}, ${a.data === undefined ? null : tx.json(a.data as never)},
                                        ${ctx.publicUrl}) as result`,
      ),
  }),
  defineTool({
    name: 'set_member_attributes',
    title: 'Set member attributes',
    description:
      'Merges attributes onto a member you created: top-level keys replace existing ones, a null value removes a key. Limited to 120 per hour.',
    kind: 'write',
    // Replacing or removing a key destroys the old value.
    annotations: { readOnlyHint: false, destructiveHint: true, idempotentHint: true, openWorldHint: false },
    input: z.strictObject({
      member_id: Uuid.describe('A member you created'),
      attributes: JsonObject.describe('Attributes to merge (null removes a key)'),
    }),
    run: (tx, a) => one(tx`select api.mcp_member_set_attributes(${a.member_id}, ${tx.json(a.attributes as never)}) as result`),
  }),
  defineTool({
    name: 'add_member_to_community',
    title: 'Add member to community',
    description:
      'Hands a member you created to a community you manage (joins them as a member, under your manager authority). Adding a member twice is not an error. Limited to 60 per hour.',
    kind: 'write',
    annotations: { readOnlyHint: false, destructiveHint: false, idempotentHint: true, openWorldHint: false },
    input: z.strictObject({
      member_id: Uuid.describe('A member you created'),
      community_id: Uuid.describe('A community you manage'),
    }),
    run: (tx, a) => one(tx`select api.mcp_member_add_to_community(${a.member_id}, ${a.community_id}) as result`),
  }),
  defineTool({
    name: 'set_onboarding_opt_in',
    title: 'Set onboarding opt-in',
    description: 'Opts a community you manage in or out of onboarding hand-offs (search_onboarding_communities lists those in).',
    kind: 'write',
    // Overwrites the flag (not an additive change).
    annotations: { readOnlyHint: false, destructiveHint: true, idempotentHint: true, openWorldHint: false },
    input: z.strictObject({
      community_id: Uuid.describe('A community you manage'),
      accepts_handoffs: z.boolean().describe('true to accept hand-offs, false to stop'),
    }),
    run: (tx, a) => one(tx`select api.mcp_community_set_onboarding(${a.community_id}, ${a.accepts_handoffs}) as result`),
  }),
];

export const toolsByName = new Map(tools.map((t) => [t.name, t]));

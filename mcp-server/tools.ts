// The nine tools of the agent interface (docs/agents.md#tools). Each one validates
// its arguments with zod (its inputSchema), calls ONE api.mcp_* SQL function as
// the caller, and answers the shape of its `output` (its outputSchema);
// scoping (managed communities only, own members only) and the per-agent
// limits are in SQL (sql/migrations/committed/000016-agents.sql and later).
import { z } from 'zod';
import type { Tx } from '../gateway/core/database/transaction.ts';
import { LIMITS } from '../gateway/core/web/limits.ts';
import { Email, Uuid } from '../gateway/core/web/schemas.ts';
import { CommunityBase, CommunityManager, DateTime, Event, EventStatus, Id } from '../gateway/core/web/shapes.ts';

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
  /** What a successful call answers (its structuredContent, and the JSON of its text). */
  output: z.ZodObject;
  run(tx: Tx, args: z.output<S>, ctx: ToolContext): Promise<unknown>;
}

function defineTool<S extends z.ZodObject>(def: ToolDefinition<S>): ToolDefinition {
  return def as unknown as ToolDefinition;
}

/** Reads touch only this service's database: closed world, no side effects. */
const READ = { readOnlyHint: true, destructiveHint: false, idempotentHint: true, openWorldHint: false } as const;

/**
 * A value the agent chose: any JSON value. Said as the list of JSON types
 * (not a bare `{}`, which strict schema checkers flag as undescribed).
 */
const JsonValue = z
  .unknown()
  .meta({ type: ['string', 'number', 'boolean', 'null', 'array', 'object'] as never, description: 'Any JSON value: a string, number, boolean, null, array or object.' });
/** An object of such values, keyed by names the agent chose (free-form: the service reads none of them). */
const JsonObject = z.record(z.string(), JsonValue);

// ---------------------------------------------------------------------------
// What the tools answer (the SQL functions' JSON). Shapes REST answers too
// come from gateway/core/web/shapes.ts.
// ---------------------------------------------------------------------------

const Role = z.enum(['member', 'manager']);

/** A community as the community tools show it (private.mcp_community_json). */
const ManagedCommunity = CommunityBase.extend({
  node_id: Id.describe("The community's node id."),
  is_sandbox: z.boolean().describe('Whether it is a sandbox (for trying things out).'),
  is_draft: z.boolean().describe('Whether it is a draft (its events are public nowhere).'),
  accepts_handoffs: z.boolean().describe('Whether it accepts onboarding hand-offs (set_onboarding_opt_in).'),
  managers: z.array(CommunityManager).describe('Its managers, longest-serving first.'),
}).describe('A community you manage.');

const EventWithStatus = Event.extend({
  status: EventStatus.describe('Whether it is going on now, over, or still to come.'),
}).describe('An event, as the REST interface gives it to a manager, with its status.');

/** A member an agent created (private.mcp_member_json). */
const Member = z
  .object({
    id: Id.describe("The member's user id (member_id of the member tools)."),
    node_id: Id.describe("The member's node id (accepted as member_id too)."),
    email: z.string().describe("The member's e-mail address.").meta({ example: 'ada@example.com' }),
    name: z.string().describe("The member's display name.").meta({ example: 'Ada Lovelace' }),
    data: JsonObject.describe('The signup data you gave create_member.'),
    attributes: JsonObject.describe('The attributes you set (set_member_attributes).'),
    password_set: z.boolean().describe('Whether the member has set a password (claimed the account: from then on it is no longer yours to manage).'),
    communities: z
      .array(
        z.object({
          community_id: Id.describe('A community you manage that you handed the member to (add_member_to_community).'),
          name: z.string().describe("The community's name.").meta({ example: 'Berlin Climbers' }),
          role: Role.describe("The member's role in it."),
          joined_at: DateTime.describe('When you handed the member to it.'),
        }),
      )
      .describe('The communities you manage that you handed the member to, first handed first (the member joins them when they claim their account).'),
    created_at: DateTime.describe('When you created the member.'),
    updated_at: DateTime.describe('When you last changed the member.'),
  })
  .describe('A member you created.');

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
    output: ManagedCommunity,
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
    output: z.object({
      community_id: Id.describe('The community.'),
      upcoming: z.array(EventWithStatus).describe('Its upcoming and ongoing events, soonest first (at most 100).'),
      past: z.array(EventWithStatus).describe('Its past events, latest first (at most 100).'),
    }),
    run: (tx, a, ctx) => one(tx`select api.mcp_community_events(${a.community_id}, ${ctx.publicUrl}) as result`),
  }),
  defineTool({
    name: 'get_event',
    title: 'Get event',
    description: 'One event (by id or node id) of a community you manage, with its status.',
    kind: 'read',
    annotations: READ,
    input: z.strictObject({ event_id: Uuid.describe('Event id or event node id') }),
    output: EventWithStatus.extend({ community_id: Id.describe("The event's community.") }),
    run: (tx, a, ctx) => one(tx`select api.mcp_event_get(${a.event_id}, ${ctx.publicUrl}) as result`),
  }),
  defineTool({
    name: 'search_onboarding_communities',
    title: 'Search onboarding communities',
    description: 'The communities you manage that accept onboarding hand-offs (see set_onboarding_opt_in).',
    kind: 'read',
    annotations: READ,
    input: z.strictObject({}),
    output: z.object({ communities: z.array(ManagedCommunity).describe('The communities you manage that accept hand-offs, by name.') }),
    run: (tx) => one(tx`select api.mcp_onboarding_communities() as result`),
  }),
  defineTool({
    name: 'get_member',
    title: 'Get member',
    description: 'A member you created with create_member: profile, the signup data and the attributes you set.',
    kind: 'read',
    annotations: READ,
    input: z.strictObject({ member_id: Uuid.describe('The member id create_member returned (or the member node id)') }),
    output: Member,
    run: (tx, a) => one(tx`select api.mcp_member_get(${a.member_id}) as result`),
  }),
  defineTool({
    name: 'create_member',
    title: 'Create member',
    description:
      'Creates a member account with no password and e-mails the member a link to set one (no password passes through you). `data` (the signup data you collected) is stored on the member. An address that already has an account is answered the same way (its owner gets a link; the member you get reaches no account), so nothing tells whether an address has one. Limited to 20 per hour.',
    kind: 'write',
    annotations: { readOnlyHint: false, destructiveHint: false, idempotentHint: false, openWorldHint: true },
    input: z.strictObject({
      email: Email.describe("The member's e-mail address"),
      name: z.string().trim().min(1).max(LIMITS.profileNameMaxLength).optional().describe('Display name (default: derived from the e-mail)'),
      data: JsonObject.optional().describe('Signup data collected from the member: an object of JSON values under names you choose, stored on the member as given (the service reads none of it)'),
    }),
    output: Member.extend({
      set_password_email: z.literal('queued').describe('The set-password e-mail is on its way to the member.'),
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
      attributes: JsonObject.describe('Attributes to merge: an object of JSON values under names you choose; each top-level key replaces the member\'s, and a key whose value is null is removed'),
    }),
    output: Member,
    run: (tx, a) => one(tx`select api.mcp_member_set_attributes(${a.member_id}, ${tx.json(a.attributes as never)}) as result`),
  }),
  defineTool({
    name: 'add_member_to_community',
    title: 'Add member to community',
    description:
      'Hands a member you created to a community you manage, under your manager authority: the member joins it as a member when they claim their account (set a password from the link they were e-mailed); until then the community, its member count and its roster do not change. Adding a member twice is not an error. Limited to 60 per hour.',
    kind: 'write',
    annotations: { readOnlyHint: false, destructiveHint: false, idempotentHint: true, openWorldHint: false },
    input: z.strictObject({
      member_id: Uuid.describe('A member you created'),
      community_id: Uuid.describe('A community you manage'),
    }),
    output: z.object({
      member_id: Id.describe('The member.'),
      community_id: Id.describe('The community.'),
      role: Role.describe("The member's role in it."),
      joined_at: DateTime.describe('When you handed the member to it (they join it when they claim their account).'),
      added: z.boolean().describe('Whether this call handed the member to it (false: you had already).'),
      member_count: z.number().int().describe("The community's member count now (a member joins when they claim their account).").meta({ example: 42 }),
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
    output: ManagedCommunity,
    run: (tx, a) => one(tx`select api.mcp_community_set_onboarding(${a.community_id}, ${a.accepts_handoffs}) as result`),
  }),
];

export const toolsByName = new Map(tools.map((t) => [t.name, t]));

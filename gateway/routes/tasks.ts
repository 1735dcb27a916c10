// Tasks and deals, the CRM (docs/api/mobile.md#tasks-and-links and
// docs/api/mobile.md#deals). The status machine, links and cycle detection, chains,
// grouping by company and deals are SQL functions (api.task_*, api.tasks_*, api.deal_*); row-level security shows a
// user only their own tasks, links and deals.
//
// Error bodies (docs/api/conventions.md#errors): 422 and 403 use the Simple body {error};
// 404 (and 401, 400) the Error body. An id in a path that is not a uuid names
// no task or deal: 404, like an unknown one.
import type postgres from 'postgres';
import { z } from 'zod';
import { defineRoute } from '../http/route.ts';
import type { Tx } from '../core/database/transaction.ts';
import type { ErrorShape } from '../core/web/errors.ts';
import { LIMITS } from '../core/web/limits.ts';
import { BoundedJsonObject, QueryInteger, Uuid } from '../core/web/schemas.ts';
import { DateTime, errors, Id, noContent, succeeded, type Row } from '../http/responses.ts';
import { IfMatchHeaders, ifMatchTags, versioned, type Versioned } from '../http/versions.ts';

// ---------------------------------------------------------------------------
// Shapes
// ---------------------------------------------------------------------------

export const TASK_STATUSES = ['pending', 'in_progress', 'completed'] as const;

/** A path id; one that is not a uuid names nothing: 404 (invalidParamsStatus). */
const IdParams = z.object({ id: Uuid.describe("The task's id.") });
const DealIdParams = z.object({ id: Uuid.describe("The deal's id.") });

const MAX_INT = 2_147_483_647;

const Title = z.string().max(500).describe('What the task is, in a line.').meta({ example: 'Call Acme about the renewal' });
const Description = z
  .string()
  .max(10_000)
  .describe('Details: what to do, for whom, what was said.')
  .meta({ example: 'Ask Jo whether the 3-year plan fits their budget; send the updated quote afterwards.' });
const Company = z
  .string()
  .trim()
  .min(1, { message: 'must not be empty' })
  .max(LIMITS.companyMaxLength)
  .describe("The company the task is about (its deal's company; compared without case).")
  .meta({ example: 'Acme' });
const DealValue = z.number().describe("What the deal is worth, in the user's currency.").meta({ example: 12000 });

const DealContext = z
  .object({ company: Company.nullish(), deal_value: DealValue.nullish() })
  .describe('The deal the task belongs to: a company (which creates or updates the caller\'s deal with it) and what the deal is worth.');

const ListQuery = z.object({
  status: z.enum(TASK_STATUSES).optional().describe('Only tasks with this status.'),
  page: QueryInteger(1, MAX_INT).default(1).describe('The page, from 1.').meta({ example: 1 }),
  /** Default page size: 20. */
  limit: QueryInteger(1, LIMITS.pageLimitMax).default(20).describe('How many tasks a page holds.').meta({ example: 20 }),
});

const CreateBody = z
  .object({
    title: Title.nullish(),
    description: Description.nullish(),
    status: z.enum(TASK_STATUSES).default('pending').describe('The status to start in.'),
    deal_context: DealContext.nullish(),
  })
  .meta({
    example: {
      title: 'Call Acme about the renewal',
      description: 'Ask Jo whether the 3-year plan fits their budget.',
      status: 'pending',
      deal_context: { company: 'Acme', deal_value: 12000 },
    },
  });

// `status` is accepted by the schema only so that the SQL can refuse it with
// 422 (status changes go through start and complete).
const PatchBody = z
  .object({
    title: Title.nullish().describe('The new title; null removes it.'),
    description: Description.nullish().describe('The new description; null removes it.'),
    deal_context: DealContext.nullish().describe('Merged into the task\'s deal_context (a null field removes that field); null removes the deal_context.'),
    status: z.unknown().optional().describe('Not changeable here: any value is refused with 422 (use start and complete).'),
  })
  .meta({ example: { title: 'Call Acme about the 3-year renewal', deal_context: { deal_value: 15000 } } });

const CompleteAndLinkBody = z
  .object({
    next_task: z
      .object({
        title: Title.nullish(),
        description: Description.nullish(),
        status: z.enum(['pending', 'in_progress']).default('pending').describe('The status the next task starts in.'),
      })
      .describe('The task that follows: it carries the completed task\'s company.'),
  })
  .meta({ example: { next_task: { title: 'Send Acme the updated quote', status: 'pending' } } });

const LinkBody = z.object({
  destination_task_id: z.guid({ message: 'must be a uuid' }).describe('The task that follows this one (one of the caller\'s).'),
  transition_meta: BoundedJsonObject(LIMITS.transitionMetaMaxBytes)
    .nullish()
    .describe(`Anything to keep with the link: a JSON object of at most ${LIMITS.transitionMetaMaxBytes} bytes.`)
    .meta({ example: { reason: 'quote accepted' } }),
});

const ChainQuery = z.object({
  direction: z.enum(['forward', 'backward']).default('forward').describe('`forward`: the tasks that follow; `backward`: those before.'),
  depth: QueryInteger(1, LIMITS.taskChainMaxDepth).default(50).describe('How many links to follow at most.').meta({ example: 10 }),
});

const SearchQuery = z.object({
  company: z
    .string()
    .trim()
    .min(1, { message: 'company is required' })
    .max(LIMITS.companyMaxLength)
    .describe('Part of the company name (case-insensitive).')
    .meta({ example: 'acme' }),
});

const CompleteTaskBody = z
  .object({
    new_next_action: z
      .string()
      .max(500)
      .nullish()
      .describe('The next action: a task with this title is created, linked and made current. Absent or empty: the deal has no next action.')
      .meta({ example: 'Send Acme the signed contract' }),
  })
  .optional();

// ---------------------------------------------------------------------------
// Response bodies (the documented shapes)
// ---------------------------------------------------------------------------

/** A task's meta (SQL strips null fields: an absent field has no value). */
const TaskMeta = z
  .object({
    title: z.string().optional().describe('What the task is; absent when it has none.').meta({ example: 'Call Acme about the renewal' }),
    description: z
      .string()
      .optional()
      .describe('Details; absent when it has none.')
      .meta({ example: 'Ask Jo whether the 3-year plan fits their budget.' }),
    status: z.enum(TASK_STATUSES).describe('pending → in_progress → completed (start and complete change it).'),
    deal_context: z
      .object({
        company: z.string().optional().describe('The company of the deal the task belongs to.').meta({ example: 'Acme' }),
        deal_value: z.number().optional().describe('What the deal is worth.').meta({ example: 12000 }),
      })
      .optional()
      .describe('The deal the task belongs to; absent when it belongs to none.'),
  })
  .describe("The task's attributes.");

// Registered as the `Task` component; `TaskFields.nullable()` (not
// TaskOut.nullable(), which would mark the shared component nullable) where a
// task may be null.
const TaskFields = z.object({
  id: Id.describe("The task's id."),
  created_by: Id.describe('The user who created it (the caller).'),
  inserted_at: DateTime.describe('When it was created.'),
  updated_at: DateTime.describe('When it last changed.'),
  meta: TaskMeta,
});
export const TaskOut = TaskFields.meta({ id: 'Task', description: 'A task of the CRM.' });

const TaskLinkOut = z
  .object({
    id: Id.describe("The link's id."),
    type: z.literal('task_transition').describe('Always `task_transition`.'),
    origin_id: Id.describe('The task the link starts from.'),
    destination_id: Id.describe('The task that follows it.'),
    created_by: Id.describe('The user who made the link.'),
    inserted_at: DateTime.describe('When it was made.'),
    meta: z.record(z.string(), z.unknown()).describe('The transition_meta given (an empty object when none).').meta({ example: { reason: 'quote accepted' } }),
  })
  .meta({ id: 'TaskLink', description: 'A link from one task to the task that follows it.' });

export const DealOut = z
  .object({
    id: Id.describe("The deal's id."),
    created_by: Id.describe('The user whose deal it is.'),
    meta: z
      .object({
        company: z.string().describe('The company (one deal per company and user, compared without case).').meta({ example: 'Acme' }),
        deal_value: z.number().nullable().describe('What the deal is worth: the last deal_value a task gave; null before any.').meta({ example: 12000 }),
        current_task_id: Id.nullable().describe('The task the deal is at (start_task and complete_task act on it); null when none.'),
        next_action: z.string().nullable().describe("The current task's title when it was made the next action; null when none.").meta({ example: 'Call Acme about the renewal' }),
      })
      .describe("The deal's state."),
  })
  .meta({ id: 'Deal', description: "The caller's deal with one company: its value, current task and next action." });

const CompanyTasks = z
  .object({
    company_name: z.string().describe('The company (its deal\'s spelling, else the first task\'s).').meta({ example: 'Acme' }),
    deal_value: z.number().nullable().describe("The deal's value, or null.").meta({ example: 12000 }),
    task_count: z.number().int().describe('How many tasks name this company.').meta({ example: 3 }),
    active_task: TaskFields.nullable().describe("The task being worked on: the deal's current task if open, else the newest in_progress, else the newest pending; null when all are completed."),
    all_tasks: z.array(TaskOut).describe('Every task of the company, newest first.'),
    completed_tasks: z.array(TaskOut).describe('Its completed tasks, newest first.'),
  })
  .meta({ id: 'CompanyTasks', description: "The caller's tasks of one company." });

const TaskReply = succeeded({ task: TaskOut });
const TaskList = succeeded({ tasks: z.array(TaskOut).describe('The tasks, newest first.') });
const DealReply = succeeded({ deal: DealOut });
const TASK_NOT_FOUND = errors('task_not_found');
const STALE = errors('precondition_failed');
const TRANSITION = errors('invalid_status_transition');

// ---------------------------------------------------------------------------
// Rows returned by the SQL functions: the response shapes above
// ---------------------------------------------------------------------------

type Task = Row<z.infer<typeof TaskFields>, 'inserted_at' | 'updated_at'>;
type VersionedTask = Versioned<Task>;
type TaskTransition = Row<z.infer<typeof TaskLinkOut>, 'inserted_at'>;
type Deal = z.infer<typeof DealOut>;

/** A jsonb parameter (postgres.js serialises it), or SQL null. */
const jsonb = (tx: Tx, value: Record<string, unknown> | null | undefined) =>
  value === undefined || value === null ? null : tx.json(value as postgres.JSONValue);

const TASK_ERRORS: Partial<Record<number, ErrorShape>> = { 403: 'simple', 422: 'simple' };
const DEAL_ERRORS: Partial<Record<number, ErrorShape>> = { 422: 'simple' };

// ---------------------------------------------------------------------------
// Routes. /tasks/by_company and /tasks/search come before /tasks/:id.
// ---------------------------------------------------------------------------

export const taskRoutes = [
  defineRoute({
    method: 'get',
    path: '/api/mobile/tasks/by_company',
    summary: "The caller's tasks grouped by deal_context.company, with deal value and active task.",
    description:
      "The caller's tasks grouped by their deal_context.company (compared without case), each group with the deal's value, the task being worked on, every task and the completed ones.",
    auth: 'user',
    errorShapes: TASK_ERRORS,
    responses: { 200: succeeded({ companies: z.array(CompanyTasks).describe('One entry per company, by name.') }) },
    async handler({ db }) {
      const companies = await db((tx) => tx`select * from api.tasks_by_company()`);
      return { status: 200, body: { success: true, companies } };
    },
  }),

  defineRoute({
    method: 'get',
    path: '/api/mobile/tasks/search',
    summary: "The caller's tasks whose company contains `company` (case-insensitive), newest first.",
    description:
      "The caller's tasks whose company contains `company` (case-insensitive), newest first.",
    auth: 'user',
    query: SearchQuery,
    invalidStatus: 422,
    errorShapes: TASK_ERRORS,
    responses: {
      200: succeeded({
        search_query: z.string().describe('The `company` searched for (trimmed).').meta({ example: 'acme' }),
        tasks: z.array(TaskOut).describe('The matching tasks, newest first.'),
      }),
    },
    async handler({ query, db }) {
      const tasks = await db((tx) => tx<Task[]>`select * from api.tasks_search(${query.company})`);
      return { status: 200, body: { success: true, search_query: query.company, tasks } };
    },
  }),

  defineRoute({
    method: 'get',
    path: '/api/mobile/tasks',
    summary: "The caller's tasks, newest first; filter by status; page from 1, limit 1..100 (default 20).",
    description:
      "The caller's tasks, newest first, a page at a time, optionally only those with one status.",
    limits: [`\`limit\` is 1 to ${LIMITS.pageLimitMax} (default 20); \`page\` from 1.`],
    auth: 'user',
    query: ListQuery,
    invalidStatus: 422,
    errorShapes: TASK_ERRORS,
    responses: { 200: TaskList },
    async handler({ query, db }) {
      const tasks = await db(
        (tx) => tx<Task[]>`select * from api.tasks_list(${query.status ?? null}, ${query.page}, ${query.limit})`,
      );
      return { status: 200, body: { success: true, tasks } };
    },
  }),

  defineRoute({
    method: 'post',
    path: '/api/mobile/tasks',
    summary: 'Create a task (status default pending); attributes go into meta.',
    description:
      "Creates a task for the caller (status `pending` unless given). Its title, description, status and deal_context are kept in `meta`. A deal_context with a company creates the caller's deal with that company, or updates its value.",
    limits: [`\`title\` at most 500 characters, \`description\` 10,000, \`company\` ${LIMITS.companyMaxLength}.`],
    auth: 'user',
    body: CreateBody,
    invalidStatus: 422,
    errorShapes: TASK_ERRORS,
    responses: { 201: TaskReply, 422: errors('validation_error') },
    etag: true,
    async handler({ body, db }) {
      const [row] = await db(
        (tx) => tx<VersionedTask[]>`
          select t.*, api.etag(t.updated_at) as etag
            from api.task_create(${body.title ?? null}, ${body.description ?? null}, ${body.status},
                                 ${jsonb(tx, body.deal_context)}::jsonb) t`,
      );
      const { object: task, headers } = versioned(row!);
      return { status: 201, body: { success: true, task }, headers };
    },
  }),

  defineRoute({
    method: 'get',
    path: '/api/mobile/tasks/:id',
    summary: 'One of the caller\'s tasks.',
    description:
      "One of the caller's tasks.",
    auth: 'user',
    params: IdParams,
    invalidParamsStatus: 404,
    errorShapes: TASK_ERRORS,
    responses: { 200: TaskReply, 404: TASK_NOT_FOUND },
    etag: true,
    async handler({ params, db }) {
      const [row] = await db((tx) => tx<VersionedTask[]>`select t.*, api.etag(t.updated_at) as etag from api.task_get(${params.id}) t`);
      const { object: task, headers } = versioned(row!);
      return { status: 200, body: { success: true, task }, headers };
    },
  }),

  defineRoute({
    method: 'patch',
    path: '/api/mobile/tasks/:id',
    summary: 'Merge title, description and deal_context into meta (null removes a key); status is not changeable here.',
    description:
      "Changes a task's title, description and deal_context (only the fields given; null removes one). The status changes only through start and complete: a `status` here is 422.",
    auth: 'user',
    params: IdParams,
    invalidParamsStatus: 404,
    body: PatchBody,
    headers: IfMatchHeaders,
    invalidStatus: 422,
    errorShapes: TASK_ERRORS,
    responses: { 200: TaskReply, 404: TASK_NOT_FOUND, 412: STALE, 422: errors('validation_error', 'invalid_status_transition') },
    etag: true,
    async handler({ params, body, headers: { 'if-match': ifMatch }, db }) {
      const [row] = await db(
        (tx) => tx<VersionedTask[]>`
          select t.*, api.etag(t.updated_at) as etag
            from api.task_update(${params.id}, ${jsonb(tx, body)}::jsonb, ${ifMatchTags(ifMatch)}::text[]) t`,
      );
      const { object: task, headers } = versioned(row!);
      return { status: 200, body: { success: true, task }, headers };
    },
  }),

  defineRoute({
    method: 'delete',
    path: '/api/mobile/tasks/:id',
    summary: 'Delete one of the caller\'s tasks (and its links): 204; 403 for another user\'s task.',
    description:
      "Deletes one of the caller's tasks, and its links. Another user's task is 403.",
    auth: 'user',
    params: IdParams,
    invalidParamsStatus: 404,
    errorShapes: TASK_ERRORS,
    headers: IfMatchHeaders,
    responses: { 204: noContent('Deleted.'), 403: errors('not_task_creator'), 404: TASK_NOT_FOUND, 412: STALE },
    async handler({ params, headers: { 'if-match': ifMatch }, db }) {
      await db((tx) => tx`select api.task_delete(${params.id}, ${ifMatchTags(ifMatch)}::text[])`);
      return { status: 204 };
    },
  }),

  defineRoute({
    method: 'post',
    path: '/api/mobile/tasks/:id/start',
    summary: 'pending → in_progress; 422 otherwise.',
    description:
      'Starts a task: pending → in_progress. Any other status is 422 `invalid_status_transition`.',
    auth: 'user',
    params: IdParams,
    invalidParamsStatus: 404,
    errorShapes: TASK_ERRORS,
    responses: { 200: TaskReply, 404: TASK_NOT_FOUND, 422: TRANSITION },
    etag: true,
    async handler({ params, db }) {
      const [row] = await db((tx) => tx<VersionedTask[]>`select t.*, api.etag(t.updated_at) as etag from api.task_start(${params.id}) t`);
      const { object: task, headers } = versioned(row!);
      return { status: 200, body: { success: true, task }, headers };
    },
  }),

  defineRoute({
    method: 'post',
    path: '/api/mobile/tasks/:id/complete',
    summary: 'pending or in_progress → completed; 422 when already completed.',
    description:
      'Completes a task: pending or in_progress → completed. A completed task is 422 `invalid_status_transition`.',
    auth: 'user',
    params: IdParams,
    invalidParamsStatus: 404,
    errorShapes: TASK_ERRORS,
    responses: { 200: TaskReply, 404: TASK_NOT_FOUND, 422: TRANSITION },
    etag: true,
    async handler({ params, db }) {
      const [row] = await db((tx) => tx<VersionedTask[]>`select t.*, api.etag(t.updated_at) as etag from api.task_complete(${params.id}) t`);
      const { object: task, headers } = versioned(row!);
      return { status: 200, body: { success: true, task }, headers };
    },
  }),

  defineRoute({
    method: 'post',
    path: '/api/mobile/tasks/:id/complete_and_link',
    summary: 'Complete the task, create next_task and link them, in one transaction.',
    description:
      "Completes the task, creates the next one and links them, in one transaction. The next task carries the completed task's company (and its deal's value); when the completed task was its deal's current task, the next task becomes the deal's current task and next action.",
    auth: 'user',
    params: IdParams,
    invalidParamsStatus: 404,
    body: CompleteAndLinkBody,
    invalidStatus: 422,
    errorShapes: TASK_ERRORS,
    responses: {
      200: succeeded({ completed_task: TaskOut, next_task: TaskOut }),
      404: TASK_NOT_FOUND,
      422: errors('invalid_status_transition', 'validation_error'),
    },
    async handler({ params, body, db }) {
      const { title, description, status } = body.next_task;
      // Two rows: the completed task, then the next task.
      const [completed, next] = await db(
        (tx) => tx<Task[]>`
          select * from api.task_complete_and_link(${params.id}, ${title ?? null}, ${description ?? null}, ${status})`,
      );
      return { status: 200, body: { success: true, completed_task: completed, next_task: next } };
    },
  }),

  defineRoute({
    method: 'post',
    path: '/api/mobile/tasks/:id/link',
    summary: 'Link the task to a destination task (task_transition); 422 for a self-link or a cycle.',
    description:
      'Links the task to the task that follows it. A link to itself, or one that would close a cycle, is 422 `circular_dependency`.',
    limits: [`\`transition_meta\` is a JSON object of at most ${LIMITS.transitionMetaMaxBytes / 1024} KB.`],
    auth: 'user',
    params: IdParams,
    invalidParamsStatus: 404,
    body: LinkBody,
    invalidStatus: 422,
    errorShapes: TASK_ERRORS,
    responses: {
      200: succeeded({
        link: z
          .object({
            origin_task_id: Id.describe('The task linked from (the path\'s).'),
            destination_task_id: Id.describe('The task linked to.'),
            event: TaskLinkOut,
          })
          .describe('The link made.'),
      }),
      404: errors('task_not_found', 'destination_task_not_found'),
      422: errors('circular_dependency', 'validation_error'),
    },
    async handler({ params, body, db }) {
      const [event] = await db(
        (tx) => tx<TaskTransition[]>`
          select * from api.task_link(${params.id}, ${body.destination_task_id}, ${jsonb(tx, body.transition_meta ?? {})}::jsonb)`,
      );
      return {
        status: 200,
        body: { success: true, link: { origin_task_id: event!.origin_id, destination_task_id: event!.destination_id, event } },
      };
    },
  }),

  defineRoute({
    method: 'get',
    path: '/api/mobile/tasks/:id/next',
    summary: 'The destination of the most recent link out of the task, or null.',
    description:
      'The task the most recent link out of this task leads to, or null.',
    auth: 'user',
    params: IdParams,
    invalidParamsStatus: 404,
    errorShapes: TASK_ERRORS,
    responses: {
      200: succeeded({ next_task: TaskFields.nullable().describe('The task the most recent link out of this one leads to; null when there is none.') }),
      404: TASK_NOT_FOUND,
    },
    async handler({ params, db }) {
      const [task] = await db((tx) => tx<Task[]>`select * from api.task_next(${params.id})`);
      return { status: 200, body: { success: true, next_task: task ?? null } };
    },
  }),

  defineRoute({
    method: 'get',
    path: '/api/mobile/tasks/:id/previous',
    summary: 'The origin of the most recent link into the task, or null.',
    description:
      'The task the most recent link into this task comes from, or null.',
    auth: 'user',
    params: IdParams,
    invalidParamsStatus: 404,
    errorShapes: TASK_ERRORS,
    responses: {
      200: succeeded({ previous_task: TaskFields.nullable().describe('The task the most recent link into this one comes from; null when there is none.') }),
      404: TASK_NOT_FOUND,
    },
    async handler({ params, db }) {
      const [task] = await db((tx) => tx<Task[]>`select * from api.task_previous(${params.id})`);
      return { status: 200, body: { success: true, previous_task: task ?? null } };
    },
  }),

  defineRoute({
    method: 'get',
    path: '/api/mobile/tasks/:id/chain',
    summary: 'The task, then the tasks within `depth` links forward or backward, each once, nearest first.',
    description:
      'The task, then the tasks reached by following links forward (or backward) at most `depth` steps, each once, nearest first.',
    limits: [`\`depth\` is 1 to ${LIMITS.taskChainMaxDepth} (default 50).`],
    auth: 'user',
    params: IdParams,
    invalidParamsStatus: 404,
    query: ChainQuery,
    invalidStatus: 422,
    errorShapes: TASK_ERRORS,
    responses: {
      200: succeeded({
        chain: z.array(TaskOut).describe('The task first, then each task once, nearest first.'),
        depth: z.number().int().describe('The depth used.').meta({ example: 10 }),
        direction: z.enum(['forward', 'backward']).describe('The direction used.'),
      }),
      404: TASK_NOT_FOUND,
    },
    async handler({ params, query, db }) {
      const chain = await db(
        (tx) => tx<Task[]>`select * from api.task_chain(${params.id}, ${query.direction}, ${query.depth})`,
      );
      return { status: 200, body: { success: true, chain, depth: query.depth, direction: query.direction } };
    },
  }),
];

export const dealRoutes = [
  defineRoute({
    method: 'get',
    path: '/api/mobile/deals',
    summary: "The caller's deals, newest first.",
    description:
      "The caller's deals, newest first. A deal is made when a task first names its company (deal_context.company).",
    auth: 'user',
    errorShapes: DEAL_ERRORS,
    responses: { 200: succeeded({ deals: z.array(DealOut).describe('The deals, newest first.') }) },
    async handler({ db }) {
      const deals = await db((tx) => tx<Deal[]>`select * from api.deals_list()`);
      return { status: 200, body: { success: true, deals } };
    },
  }),

  defineRoute({
    method: 'get',
    path: '/api/mobile/deals/:id',
    summary: 'One of the caller\'s deals.',
    description:
      "One of the caller's deals.",
    auth: 'user',
    params: DealIdParams,
    invalidParamsStatus: 404,
    errorShapes: DEAL_ERRORS,
    responses: { 200: DealReply, 404: errors('deal_not_found') },
    async handler({ params, db }) {
      const [deal] = await db((tx) => tx<Deal[]>`select * from api.deal_get(${params.id})`);
      return { status: 200, body: { success: true, deal } };
    },
  }),

  defineRoute({
    method: 'post',
    path: '/api/mobile/deals/:id/start_task',
    summary: "Start the deal's current task.",
    description:
      "Starts the deal's current task (pending → in_progress). A deal without one is 422 `no_current_task`.",
    auth: 'user',
    params: DealIdParams,
    invalidParamsStatus: 404,
    errorShapes: DEAL_ERRORS,
    responses: { 200: DealReply, 404: errors('deal_not_found', 'task_not_found'), 422: errors('no_current_task', 'invalid_status_transition') },
    async handler({ params, db }) {
      const [deal] = await db((tx) => tx<Deal[]>`select * from api.deal_start_task(${params.id})`);
      return { status: 200, body: { success: true, deal } };
    },
  }),

  defineRoute({
    method: 'post',
    path: '/api/mobile/deals/:id/complete_task',
    summary: "Complete the deal's current task; with new_next_action, create, link and make current the next task.",
    description:
      "Completes the deal's current task. With `new_next_action`, a task with that title is created, linked from the completed one and made the deal's current task and next action; without it, the deal has no next action.",
    auth: 'user',
    params: DealIdParams,
    invalidParamsStatus: 404,
    body: CompleteTaskBody,
    invalidStatus: 422,
    errorShapes: DEAL_ERRORS,
    responses: { 200: DealReply, 404: errors('deal_not_found', 'task_not_found'), 422: errors('no_current_task', 'invalid_status_transition', 'validation_error') },
    async handler({ params, body, db }) {
      const [deal] = await db(
        (tx) => tx<Deal[]>`select * from api.deal_complete_task(${params.id}, ${body?.new_next_action ?? null})`,
      );
      return { status: 200, body: { success: true, deal } };
    },
  }),
];

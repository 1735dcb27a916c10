// Tasks and deals, the CRM (docs/api.md#tasks-and-links and
// docs/api.md#deals). The status machine, links and cycle detection, chains,
// grouping by company and deals are SQL functions (api.task_*, api.tasks_*, api.deal_*); row-level security shows a
// user only their own tasks, links and deals.
//
// Error bodies (docs/api.md#errors): 422 and 403 use the Simple body {error};
// 404 (and 401, 400) the Error body. An id in a path that is not a uuid names
// no task or deal: 404, like an unknown one.
import type postgres from 'postgres';
import { z } from 'zod';
import { defineRoute } from '../http/route.ts';
import type { Tx } from '../core/db.ts';
import type { ErrorShape } from '../core/errors.ts';
import { LIMITS } from '../core/limits.ts';
import { BoundedJsonObject, QueryInteger, Uuid } from '../core/schemas.ts';
import { DateTime, errors, Id, noContent, succeeded, type Row } from '../http/responses.ts';

// ---------------------------------------------------------------------------
// Shapes
// ---------------------------------------------------------------------------

export const TASK_STATUSES = ['pending', 'in_progress', 'completed'] as const;

/** A path id; one that is not a uuid names nothing: 404 (invalidParamsStatus). */
const IdParams = z.object({ id: Uuid });

const MAX_INT = 2_147_483_647;

const Title = z.string().max(500);
const Description = z.string().max(10_000);

const DealContext = z.object({
  company: z.string().trim().min(1, { message: 'must not be empty' }).max(LIMITS.companyMaxLength).nullish(),
  deal_value: z.number().nullish(),
});

const ListQuery = z.object({
  status: z.enum(TASK_STATUSES).optional(),
  page: QueryInteger(1, MAX_INT).default(1),
  /** Default page size: 20. */
  limit: QueryInteger(1, LIMITS.pageLimitMax).default(20),
});

const CreateBody = z.object({
  title: Title.nullish(),
  description: Description.nullish(),
  status: z.enum(TASK_STATUSES).default('pending'),
  deal_context: DealContext.nullish(),
});

// `status` is accepted by the schema only so that the SQL can refuse it with
// 422 (status changes go through start and complete).
const PatchBody = z.object({
  title: Title.nullish(),
  description: Description.nullish(),
  deal_context: DealContext.nullish(),
  status: z.unknown().optional(),
});

const CompleteAndLinkBody = z.object({
  next_task: z.object({
    title: Title.nullish(),
    description: Description.nullish(),
    status: z.enum(['pending', 'in_progress']).default('pending'),
  }),
});

const LinkBody = z.object({
  destination_task_id: z.guid({ message: 'must be a uuid' }),
  transition_meta: BoundedJsonObject(LIMITS.transitionMetaMaxBytes).nullish(),
});

const ChainQuery = z.object({
  direction: z.enum(['forward', 'backward']).default('forward'),
  depth: QueryInteger(1, LIMITS.taskChainMaxDepth).default(50),
});

const SearchQuery = z.object({
  company: z.string().trim().min(1, { message: 'company is required' }).max(LIMITS.companyMaxLength),
});

const CompleteTaskBody = z
  .object({ new_next_action: z.string().max(500).nullish() })
  .optional();

// ---------------------------------------------------------------------------
// Response bodies (the documented shapes)
// ---------------------------------------------------------------------------

// Registered as the `Task` component; `TaskFields.nullable()` (not
// TaskOut.nullable(), which would mark the shared component nullable) where a
// task may be null.
const TaskFields = z.object({
  id: Id,
  created_by: Id,
  inserted_at: DateTime,
  updated_at: DateTime,
  meta: z
    .object({
      title: z.string().nullable().optional(),
      description: z.string().nullable().optional(),
      status: z.enum(TASK_STATUSES),
      deal_context: z
        .object({ company: z.string().nullable().optional(), deal_value: z.number().nullable().optional() })
        .nullable()
        .optional(),
    })
    .catchall(z.unknown()),
});
const TaskOut = TaskFields.meta({ id: 'Task' });

const TaskLinkOut = z
  .object({
    id: Id,
    type: z.string(),
    origin_id: Id,
    destination_id: Id,
    created_by: Id,
    inserted_at: DateTime,
    meta: z.record(z.string(), z.unknown()),
  })
  .meta({ id: 'TaskLink' });

const DealOut = z.object({ id: Id, created_by: Id, meta: z.record(z.string(), z.unknown()) }).meta({ id: 'Deal' });

const CompanyTasks = z.object({
  company_name: z.string(),
  deal_value: z.number().nullable(),
  task_count: z.number().int(),
  active_task: TaskFields.nullable(),
  all_tasks: z.array(TaskOut),
  completed_tasks: z.array(TaskOut),
});

const TaskReply = succeeded({ task: TaskOut });
const TaskList = succeeded({ tasks: z.array(TaskOut) });
const DealReply = succeeded({ deal: DealOut });
const TASK_NOT_FOUND = errors('task_not_found');
const TRANSITION = errors('invalid_status_transition');

// ---------------------------------------------------------------------------
// Rows returned by the SQL functions: the response shapes above
// ---------------------------------------------------------------------------

type Task = Row<z.infer<typeof TaskFields>, 'inserted_at' | 'updated_at'>;
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
    auth: 'user',
    errorShapes: TASK_ERRORS,
    responses: { 200: succeeded({ companies: z.array(CompanyTasks) }) },
    async handler({ db }) {
      const companies = await db((tx) => tx`select * from api.tasks_by_company()`);
      return { status: 200, body: { success: true, companies } };
    },
  }),

  defineRoute({
    method: 'get',
    path: '/api/mobile/tasks/search',
    summary: "The caller's tasks whose company contains `company` (case-insensitive), newest first.",
    auth: 'user',
    query: SearchQuery,
    invalidStatus: 422,
    errorShapes: TASK_ERRORS,
    responses: { 200: succeeded({ search_query: z.string(), tasks: z.array(TaskOut) }) },
    async handler({ query, db }) {
      const tasks = await db((tx) => tx<Task[]>`select * from api.tasks_search(${query.company})`);
      return { status: 200, body: { success: true, search_query: query.company, tasks } };
    },
  }),

  defineRoute({
    method: 'get',
    path: '/api/mobile/tasks',
    summary: "The caller's tasks, newest first; filter by status; page from 1, limit 1..100 (default 20).",
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
    auth: 'user',
    body: CreateBody,
    invalidStatus: 422,
    errorShapes: TASK_ERRORS,
    responses: { 201: TaskReply, 422: errors('validation_error') },
    async handler({ body, db }) {
      const [task] = await db(
        (tx) => tx<Task[]>`
          select * from api.task_create(${body.title ?? null}, ${body.description ?? null}, ${body.status},
                                        ${jsonb(tx, body.deal_context)}::jsonb)`,
      );
      return { status: 201, body: { success: true, task } };
    },
  }),

  defineRoute({
    method: 'get',
    path: '/api/mobile/tasks/:id',
    summary: 'One of the caller\'s tasks.',
    auth: 'user',
    params: IdParams,
    invalidParamsStatus: 404,
    errorShapes: TASK_ERRORS,
    responses: { 200: TaskReply, 404: TASK_NOT_FOUND },
    async handler({ params, db }) {
      const [task] = await db((tx) => tx<Task[]>`select * from api.task_get(${params.id})`);
      return { status: 200, body: { success: true, task } };
    },
  }),

  defineRoute({
    method: 'patch',
    path: '/api/mobile/tasks/:id',
    summary: 'Merge title, description and deal_context into meta (null removes a key); status is not changeable here.',
    auth: 'user',
    params: IdParams,
    invalidParamsStatus: 404,
    body: PatchBody,
    invalidStatus: 422,
    errorShapes: TASK_ERRORS,
    responses: { 200: TaskReply, 404: TASK_NOT_FOUND, 422: errors('validation_error', 'invalid_status_transition') },
    async handler({ params, body, db }) {
      const [task] = await db((tx) => tx<Task[]>`select * from api.task_update(${params.id}, ${jsonb(tx, body)}::jsonb)`);
      return { status: 200, body: { success: true, task } };
    },
  }),

  defineRoute({
    method: 'delete',
    path: '/api/mobile/tasks/:id',
    summary: 'Delete one of the caller\'s tasks (and its links): 204; 403 for another user\'s task.',
    auth: 'user',
    params: IdParams,
    invalidParamsStatus: 404,
    errorShapes: TASK_ERRORS,
    responses: { 204: noContent('Deleted.'), 403: errors('not_task_creator'), 404: TASK_NOT_FOUND },
    async handler({ params, db }) {
      await db((tx) => tx`select api.task_delete(${params.id})`);
      return { status: 204 };
    },
  }),

  defineRoute({
    method: 'post',
    path: '/api/mobile/tasks/:id/start',
    summary: 'pending → in_progress; 422 otherwise.',
    auth: 'user',
    params: IdParams,
    invalidParamsStatus: 404,
    errorShapes: TASK_ERRORS,
    responses: { 200: TaskReply, 404: TASK_NOT_FOUND, 422: TRANSITION },
    async handler({ params, db }) {
      const [task] = await db((tx) => tx<Task[]>`select * from api.task_start(${params.id})`);
      return { status: 200, body: { success: true, task } };
    },
  }),

  defineRoute({
    method: 'post',
    path: '/api/mobile/tasks/:id/complete',
    summary: 'pending or in_progress → completed; 422 when already completed.',
    auth: 'user',
    params: IdParams,
    invalidParamsStatus: 404,
    errorShapes: TASK_ERRORS,
    responses: { 200: TaskReply, 404: TASK_NOT_FOUND, 422: TRANSITION },
    async handler({ params, db }) {
      const [task] = await db((tx) => tx<Task[]>`select * from api.task_complete(${params.id})`);
      return { status: 200, body: { success: true, task } };
    },
  }),

  defineRoute({
    method: 'post',
    path: '/api/mobile/tasks/:id/complete_and_link',
    summary: 'Complete the task, create next_task and link them, in one transaction.',
    auth: 'user',
    params: IdParams,
    invalidParamsStatus: 404,
    body: CompleteAndLinkBody,
    invalidStatus: 422,
    errorShapes: TASK_ERRORS,
    responses: { 200: succeeded({ completed_task: TaskOut, next_task: TaskOut }), 404: TASK_NOT_FOUND, 422: errors('invalid_status_transition', 'validation_error') },
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
    auth: 'user',
    params: IdParams,
    invalidParamsStatus: 404,
    body: LinkBody,
    invalidStatus: 422,
    errorShapes: TASK_ERRORS,
    responses: { 200: succeeded({ link: z.object({ origin_task_id: Id, destination_task_id: Id, event: TaskLinkOut }) }), 404: errors('task_not_found', 'destination_task_not_found'), 422: errors('circular_dependency', 'validation_error') },
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
    auth: 'user',
    params: IdParams,
    invalidParamsStatus: 404,
    errorShapes: TASK_ERRORS,
    responses: { 200: succeeded({ next_task: TaskFields.nullable() }), 404: TASK_NOT_FOUND },
    async handler({ params, db }) {
      const [task] = await db((tx) => tx<Task[]>`select * from api.task_next(${params.id})`);
      return { status: 200, body: { success: true, next_task: task ?? null } };
    },
  }),

  defineRoute({
    method: 'get',
    path: '/api/mobile/tasks/:id/previous',
    summary: 'The origin of the most recent link into the task, or null.',
    auth: 'user',
    params: IdParams,
    invalidParamsStatus: 404,
    errorShapes: TASK_ERRORS,
    responses: { 200: succeeded({ previous_task: TaskFields.nullable() }), 404: TASK_NOT_FOUND },
    async handler({ params, db }) {
      const [task] = await db((tx) => tx<Task[]>`select * from api.task_previous(${params.id})`);
      return { status: 200, body: { success: true, previous_task: task ?? null } };
    },
  }),

  defineRoute({
    method: 'get',
    path: '/api/mobile/tasks/:id/chain',
    summary: 'The task, then the tasks within `depth` links forward or backward, each once, nearest first.',
    auth: 'user',
    params: IdParams,
    invalidParamsStatus: 404,
    query: ChainQuery,
    invalidStatus: 422,
    errorShapes: TASK_ERRORS,
    responses: { 200: succeeded({ chain: z.array(TaskOut), depth: z.number().int(), direction: z.enum(['forward', 'backward']) }), 404: TASK_NOT_FOUND },
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
    auth: 'user',
    errorShapes: DEAL_ERRORS,
    responses: { 200: succeeded({ deals: z.array(DealOut) }) },
    async handler({ db }) {
      const deals = await db((tx) => tx<Deal[]>`select * from api.deals_list()`);
      return { status: 200, body: { success: true, deals } };
    },
  }),

  defineRoute({
    method: 'get',
    path: '/api/mobile/deals/:id',
    summary: 'One of the caller\'s deals.',
    auth: 'user',
    params: IdParams,
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
    auth: 'user',
    params: IdParams,
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
    auth: 'user',
    params: IdParams,
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

// What a route declares about its answers (http/route.ts), and the shared
// pieces of response shapes: the three error bodies, errors()/content()/
// noContent(), and ids, timestamps, pagination. The OpenAPI document is built
// from these declarations (http/openapi.ts).
import { z } from 'zod';
import type { ErrorCode } from '../core/web/error-codes.ts';
import type { ErrorShape } from '../core/web/errors.ts';

// ---------------------------------------------------------------------------
// The three error bodies of docs/api/conventions.md#errors
// ---------------------------------------------------------------------------

/** One field that failed validation (core/web/input.ts, http/route.ts validate). */
const ValidationIssue = z
  .object({
    path: z
      .string()
      .describe('Where: `body`, `query`, `path` or `header`, then the field names, dot-separated (e.g. `body.next_task.title`).')
      .meta({ example: 'body.title' }),
    message: z.string().describe('What is wrong with the value, for a person.').meta({ example: 'Too big: expected string to have <=500 characters' }),
  })
  .describe('One field that failed validation.');

/**
 * `details` of the Error body: null, or `issues` on a validation failure
 * (http/route.ts, core/web/input.ts), or `retry_after` on 429, 503 and 409 idempotency_key_in_progress
 * (core/web/throttle.ts, http/fair-share.ts, core/web/errors.ts unavailable(), a SQL
 * refusal's DETAIL), or `communities`, or `etag` and `current` (a SQL refusal's DETAIL).
 */
const ErrorDetails = z
  .object({
    issues: z
      .array(ValidationIssue)
      .optional()
      .describe("On a validation failure (the route's 400 or 422): every field that failed, in order."),
    retry_after: z
      .number()
      .int()
      .min(0)
      .optional()
      .describe('On 429, 503 and 409 `idempotency_key_in_progress`: seconds to wait before trying again (the `Retry-After` header says the same).')
      .meta({ example: 30 }),
    communities: z
      .array(
        z
          .object({
            id: z.guid().describe("The community's id.").meta({ example: '5f0c8a9e-3b1d-4c62-9a7e-2d4b6f8a1c03' }),
            name: z.string().describe("The community's name.").meta({ example: 'Run Club' }),
          })
          .describe('A community the caller is the only manager of.'),
      )
      .optional()
      .describe('With `last_manager_of_communities`: the communities that would be left without a manager.'),
    etag: z
      .string()
      .optional()
      .describe("With `precondition_failed` (412): the current version's ETag, for the next If-Match.")
      .meta({ example: '"1765148400123456"' }),
    current: z
      .record(z.string(), z.unknown())
      .optional()
      .describe('With `precondition_failed` (412): the object as it is now, as the GET answers it (the task, connection, profile or event).'),
  })
  .nullable()
  .describe(
    'Null, or `issues` on a validation failure, or `retry_after` on 429, 503 and 409 `idempotency_key_in_progress`, or `communities` with `last_manager_of_communities`, or `etag` and `current` with 412 `precondition_failed`.',
  );

/** Error: `error` (a machine-readable code), `message`, `details` (object or null). */
export const ErrorBody = z
  .object({
    error: z
      .string()
      .describe('A machine-readable code: what the client matches on (docs/errors.md lists every code and its meaning).')
      .meta({ example: 'task_not_found' }),
    message: z.string().describe('What went wrong, for a person; its wording may change.').meta({ example: 'task not found' }),
    details: ErrorDetails,
  })
  .meta({
    id: 'Error',
    description: 'Error body: a machine-readable code, a message, details or null.',
    example: { error: 'validation_error', message: 'body.title: Too big: expected string to have <=500 characters', details: { issues: [{ path: 'body.title', message: 'Too big: expected string to have <=500 characters' }] } },
  });

/** Simple: `error` (a message). */
export const SimpleErrorBody = z
  .object({ error: z.string().describe('What went wrong, for a person.').meta({ example: 'task not found' }) })
  .meta({ id: 'SimpleError', description: 'Simple error body: a message in `error`.' });

/** Flagged: `success` false and `error` (a message). */
export const FlaggedErrorBody = z
  .object({
    success: z.literal(false).describe('Always false.'),
    error: z.string().describe('What went wrong, for a person.').meta({ example: 'community not found' }),
  })
  .meta({ id: 'FlaggedError', description: 'Flagged error body: `success` false and a message in `error`.' });

/** Supabase Auth's error body (the routes of /auth/v1): the status, Supabase's error code and a message. */
export const SupabaseAuthErrorBody = z
  .object({
    code: z.number().int().describe('The HTTP status again.').meta({ example: 400 }),
    error_code: z
      .string()
      .describe("Supabase Auth's machine-readable code (`invalid_credentials`, `refresh_token_already_used`, ...): what the Supabase SDKs match on.")
      .meta({ example: 'invalid_credentials' }),
    msg: z.string().describe('What went wrong, for a person.').meta({ example: 'Invalid login credentials' }),
    weak_password: z
      .object({ reasons: z.array(z.enum(['length', 'characters', 'pwned'])).describe('Why the password is weak.') })
      .optional()
      .describe('With `weak_password`: why.'),
  })
  .meta({
    id: 'SupabaseAuthError',
    description: "Supabase Auth's error body (docs/supabase-sdks.md#errors): `code` (the status), `error_code`, `msg`.",
    example: { code: 400, error_code: 'invalid_credentials', msg: 'Invalid login credentials' },
  });

/**
 * Supabase Storage's body (the /storage/v1 routes): what supabase-js's
 * storage client reads (`message`, `statusCode`), with this service's code.
 */
export const StorageErrorBody = z
  .object({
    statusCode: z.string().describe('The HTTP status, as a string (as Supabase Storage writes it).').meta({ example: '409' }),
    error: z
      .string()
      .describe("Supabase Storage's name for the error (`Duplicate`, `not_found`, `Unauthorized`, `InvalidJWT`, ...).")
      .meta({ example: 'Duplicate' }),
    code: z
      .string()
      .describe('A machine-readable code: what the client matches on (docs/errors.md lists every code and its meaning).')
      .meta({ example: 'object_exists' }),
    message: z.string().describe('What went wrong, for a person; its wording may change.').meta({ example: 'The resource already exists' }),
  })
  .meta({
    id: 'StorageError',
    description: "Supabase Storage's error body: the status as a string, Supabase's error name, a machine-readable code and a message.",
  });

export const SHAPE_SCHEMAS: Record<ErrorShape, z.ZodType> = {
  default: ErrorBody,
  simple: SimpleErrorBody,
  flagged: FlaggedErrorBody,
  supabase_storage: StorageErrorBody,
  supabase_auth: SupabaseAuthErrorBody,
};

// ---------------------------------------------------------------------------
// What a route declares
// ---------------------------------------------------------------------------

export class ErrorResponse {
  constructor(readonly codes: readonly ErrorCode[]) {}
}

export class ContentResponse {
  constructor(
    readonly contentType: string | null,
    readonly description: string,
    readonly schema?: z.ZodType,
  ) {}
}

export type ResponseSpec = z.ZodType | ErrorResponse | ContentResponse;
export type Responses = Partial<Record<number, ResponseSpec>>;

/**
 * An error status; `codes` are the Error shape's `error` values the route can
 * give, from the register (core/web/error-codes.ts), which also lists the statuses
 * each code comes with (a test checks they agree).
 */
export const errors = (...codes: ErrorCode[]): ErrorResponse => new ErrorResponse(codes);

/** A reply that is not JSON (HTML page, redirect, text, stream). */
export const content = (contentType: string, description: string, schema?: z.ZodType): ContentResponse =>
  new ContentResponse(contentType, description, schema);

/** A reply without a body. */
export const noContent = (description: string): ContentResponse => new ContentResponse(null, description);

/** Security schemes a route accepts (default: both for signed-in routes, none for public ones). */
export type SecurityScheme = 'bearerAuth' | 'apiToken' | 'supabaseApiKey';

// ---------------------------------------------------------------------------
// Shared response pieces
// ---------------------------------------------------------------------------

/** A uuid and a timestamp in a response (gateway/core/web/shapes.ts, which the MCP tools share). */
export { DateTime, Id } from '../core/web/shapes.ts';
export const Pagination = z
  .object({
    total_count: z.number().int().describe('How many items there are in all.').meta({ example: 42 }),
    page: z.number().int().describe('This page\'s number, from 1.').meta({ example: 1 }),
    page_size: z.number().int().describe('The page size asked for (`limit`).').meta({ example: 20 }),
    total_pages: z.number().int().describe('How many pages of this size there are.').meta({ example: 3 }),
  })
  .meta({ id: 'Pagination', description: 'Where a page is in the whole list.' });

/**
 * A row as a SQL function returns it (postgres.js), for a response shape T
 * described by zod: its timestamptz columns K arrive as Date, which the
 * reply's JSON.stringify writes as the ISO strings T describes. So a row type
 * is the response schema's type, not a second declaration.
 */
export type Row<T, K extends keyof T = never> = Omit<T, K> & { [P in K]: Date };

/** `{ success: true, ...fields }`. */
export const succeeded = <T extends z.ZodRawShape>(shape: T) => z.object({ success: z.literal(true).describe('Always true.'), ...shape });


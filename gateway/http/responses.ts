// What a route declares about its answers (http/route.ts), and the shared
// pieces of response shapes: the three error bodies, errors()/content()/
// noContent(), and ids, timestamps, pagination. The OpenAPI document is built
// from these declarations (http/openapi.ts).
import { z } from 'zod';
import type { ErrorCode } from '../core/error-codes.ts';
import type { ErrorShape } from '../core/errors.ts';

// ---------------------------------------------------------------------------
// The three error bodies of docs/api.md#errors
// ---------------------------------------------------------------------------

const Details = z.record(z.string(), z.unknown()).nullable();

/** Error: `error` (a machine-readable code), `message`, `details` (object or null). */
export const ErrorBody = z
  .object({ error: z.string(), message: z.string(), details: Details })
  .meta({ id: 'Error', description: 'Error body: a machine-readable code, a message, details or null.' });

/** Simple: `error` (a message). */
export const SimpleErrorBody = z
  .object({ error: z.string() })
  .meta({ id: 'SimpleError', description: 'Simple error body: a message in `error`.' });

/** Flagged: `success` false and `error` (a message). */
export const FlaggedErrorBody = z
  .object({ success: z.literal(false), error: z.string() })
  .meta({ id: 'FlaggedError', description: 'Flagged error body: `success` false and a message in `error`.' });

export const SHAPE_SCHEMAS: Record<ErrorShape, z.ZodType> = { error: ErrorBody, simple: SimpleErrorBody, flagged: FlaggedErrorBody };

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
 * give, from the register (core/error-codes.ts), which also lists the statuses
 * each code comes with (a test checks they agree).
 */
export const errors = (...codes: ErrorCode[]): ErrorResponse => new ErrorResponse(codes);

/** A reply that is not JSON (HTML page, redirect, text, stream). */
export const content = (contentType: string, description: string, schema?: z.ZodType): ContentResponse =>
  new ContentResponse(contentType, description, schema);

/** A reply without a body. */
export const noContent = (description: string): ContentResponse => new ContentResponse(null, description);

/** Security schemes a route accepts (default: both for signed-in routes, none for public ones). */
export type SecurityScheme = 'bearerAuth' | 'apiToken';

// ---------------------------------------------------------------------------
// Shared response pieces
// ---------------------------------------------------------------------------

export const Id = z.guid();
export const DateTime = z.iso.datetime({ offset: true });
export const Pagination = z
  .object({ total_count: z.number().int(), page: z.number().int(), page_size: z.number().int(), total_pages: z.number().int() })
  .meta({ id: 'Pagination' });

/**
 * A row as a SQL function returns it (postgres.js), for a response shape T
 * described by zod: its timestamptz columns K arrive as Date, which the
 * reply's JSON.stringify writes as the ISO strings T describes. So a row type
 * is the response schema's type, not a second declaration.
 */
export type Row<T, K extends keyof T = never> = Omit<T, K> & { [P in K]: Date };

/** `{ success: true, ...fields }`. */
export const succeeded = <T extends z.ZodRawShape>(shape: T) => z.object({ success: z.literal(true), ...shape });


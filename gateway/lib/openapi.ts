// The OpenAPI 3.0.3 document, generated from the route table: every route's
// zod schemas (params, query, body, headers: the ones the pipeline validates
// with) and its declared `responses`, through @asteasolutions/zod-to-openapi.
// Nothing here describes a request or response shape a second time.
//
// A route declares its responses as status → one of:
//   - a zod schema: a JSON body;
//   - errors('code', ...): an error, in the body shape the route's
//     errorShapes choose for that status (spec section 7); for the Error shape
//     `error` is one of the codes given;
//   - content(type, description, schema?): a non-JSON reply (HTML page,
//     redirect, text, event stream);
//   - noContent(description): no body (204).
// The errors the pipeline itself can give (401 without a credential, the
// route's validation status, 400 for unparsable JSON, 413, 415) are added
// here from the route's configuration, so modules declare only their own.
import { OpenAPIRegistry, OpenApiGeneratorV3, type ResponseConfig, type RouteConfig } from '@asteasolutions/zod-to-openapi';
import { z } from 'zod';
import type { Route } from '../http/route.ts';
import { defaultCode, type ErrorShape } from './errors.ts';

// ---------------------------------------------------------------------------
// The three error bodies of spec section 7
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

const SHAPE_SCHEMAS: Record<ErrorShape, z.ZodType> = { error: ErrorBody, simple: SimpleErrorBody, flagged: FlaggedErrorBody };

// ---------------------------------------------------------------------------
// What a route declares
// ---------------------------------------------------------------------------

export class ErrorResponse {
  constructor(readonly codes: readonly string[]) {}
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

/** An error status; `codes` are the Error shape's `error` values the route can give. */
export const errors = (...codes: string[]): ErrorResponse => new ErrorResponse(codes);

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

/** `{ success: true, ...fields }`. */
export const succeeded = <T extends z.ZodRawShape>(shape: T) => z.object({ success: z.literal(true), ...shape });

// ---------------------------------------------------------------------------
// Sections (tags, and ApiEndpoint.controller)
// ---------------------------------------------------------------------------

const SECTIONS: [RegExp, string][] = [
  [/^\/api\/auth\//, 'Authentication'],
  [/^\/api\/docs\/tokens/, 'API tokens'],
  [/^\/api\/docs|^\/llms\.txt$/, 'Documentation'],
  [/^\/api\/mobile\/(profile|hats|hat_types)/, 'Profile and hats'],
  [/^\/api\/mobile\/(events|venues|checkins)/, 'Events and check-ins'],
  [/^\/api\/mobile\/connections/, 'Connections'],
  [/^\/api\/mobile\/tasks/, 'Tasks'],
  [/^\/api\/mobile\/deals/, 'Deals'],
  [/^\/api\/mobile\/communities|^\/api\/community\//, 'Communities'],
  [/^\/api\/v1\/platform\//, 'Platform integration'],
  [/^\/api\/v1\/forms/, 'Forms'],
  [/^\/(l|e|checkin)\//, 'Deep links'],
  [/^\/mcp/, 'Agent interface'],
  [/^\/health$/, 'Health'],
];

/** The spec section a path belongs to (the OpenAPI tag and the endpoint's controller). */
export function sectionOf(path: string): string {
  return SECTIONS.find(([pattern]) => pattern.test(path))?.[1] ?? 'Other';
}

/** `/api/mobile/tasks/:id` → `/api/mobile/tasks/{id}`. */
export function openApiPath(expressPath: string): string {
  return expressPath.replace(/:([A-Za-z0-9_]+)/g, '{$1}');
}

/**
 * A stable name per route (operationId, ApiEndpoint.action): the method and
 * the path without its group prefix, e.g. `post_tasks_by_id_complete_and_link`.
 */
export function actionOf(method: string, expressPath: string): string {
  const rest = expressPath.replace(/^\/api\/(mobile|v1|docs(?=\/|$))?\/?/, (m, group) => (group === 'docs' ? 'docs/' : ''));
  const words = rest
    .split('/')
    .filter(Boolean)
    .map((segment) => (segment.startsWith(':') ? `by_${segment.slice(1)}` : segment))
    .join('_')
    .replace(/[^A-Za-z0-9_]+/g, '_');
  return `${method.toLowerCase()}_${words || 'root'}`;
}

// ---------------------------------------------------------------------------
// The document
// ---------------------------------------------------------------------------

export const API_TITLE = 'Community, Events, Networking and Task Platform';
export const API_VERSION = '1.0.0';
export const API_SUMMARY =
  'A Supabase-style backend for local communities and events: a mobile REST interface (auth, profile and hats, ' +
  'communities, events and check-ins, connections, a task/deal CRM), platform integration for event platforms ' +
  '(with outbound webhooks signed per Standard Webhooks), ' +
  'developer docs with API tokens and a live test executor, deep links, and an MCP tool server for AI agents.';

/** Codes the pipeline gives for a missing or refused credential (access token, API token). */
export const AUTH_ERROR_CODES = ['unauthorized', 'invalid_token', 'session_ended'];

const AUTH_DESCRIPTION: Record<SecurityScheme, string> = {
  bearerAuth: 'An access token (JWT) from POST /api/auth/login, sent as `Authorization: Bearer <access_token>`.',
  apiToken:
    'An API token (secret `cbk_…`, created with POST /api/docs/tokens and shown once), sent as ' +
    '`Authorization: Bearer <token>`. It acts as its owner on the paths its `permissions` match.',
};

const STATUS_TEXT: Record<number, string> = {
  200: 'OK',
  201: 'Created',
  204: 'No content',
  302: 'Found (redirect)',
  400: 'Bad request',
  401: 'Missing or invalid credential',
  403: 'Forbidden',
  404: 'Not found',
  409: 'Conflict',
  413: 'Payload too large',
  415: 'Unsupported media type',
  422: 'Validation error',
  429: 'Too many requests',
  503: 'Service unavailable',
  504: 'Statement timeout',
};

interface ErrorEntry {
  shape: ErrorShape;
  codes: Set<string>;
}

/** The error statuses of a route: its declared ones plus those of the pipeline. */
function errorEntries(route: Route): Map<number, ErrorEntry[]> {
  const entries = new Map<number, ErrorEntry[]>();
  const add = (status: number, shape: ErrorShape, codes: readonly string[]) => {
    const list = entries.get(status) ?? [];
    const same = list.find((entry) => entry.shape === shape);
    if (same) codes.forEach((code) => same.codes.add(code));
    else list.push({ shape, codes: new Set(codes) });
    entries.set(status, list);
  };
  const { docs, schemas } = route;
  const shapeFor = (status: number): ErrorShape => docs.errorShapes?.[status] ?? 'error';
  for (const [key, spec] of Object.entries(docs.responses ?? {})) {
    const status = Number(key);
    if (spec instanceof ErrorResponse) add(status, shapeFor(status), spec.codes);
  }
  if (route.auth !== 'public') {
    add(401, shapeFor(401), AUTH_ERROR_CODES);
    // An API token whose permissions do not match the path.
    add(403, shapeFor(403), ['forbidden']);
  }
  // Every route: a client past its fair share of the pool waits, then 429
  // (lib/fair-share.ts); the database unreachable or restarting is 503 (with
  // Retry-After); a request cancelled at the statement timeout is 504.
  add(429, shapeFor(429), ['rate_limited']);
  add(503, shapeFor(503), ['service_unavailable']);
  add(504, shapeFor(504), ['statement_timeout']);
  const invalid = docs.invalidStatus ?? 400;
  if (schemas.query || schemas.body || schemas.headers) add(invalid, shapeFor(invalid), [defaultCode(invalid)]);
  if (schemas.params) {
    const status = docs.invalidParamsStatus ?? invalid;
    add(status, shapeFor(status), [defaultCode(status)]);
    // A path that is not valid percent-encoding fails before the route.
    add(400, 'error', ['bad_request']);
  }
  if (schemas.body) {
    // Body parsing happens before the route: always the Error shape.
    add(400, 'error', ['invalid_json', 'bad_request']);
    add(413, 'error', ['payload_too_large']);
    add(415, 'error', ['unsupported_media_type']);
  }
  return entries;
}

function errorSchema(entry: ErrorEntry): z.ZodType {
  if (entry.shape !== 'error' || entry.codes.size === 0) return SHAPE_SCHEMAS[entry.shape];
  const [first, ...rest] = [...entry.codes].sort();
  return ErrorBody.extend({ error: z.enum([first!, ...rest]) });
}

function responsesOf(route: Route): Record<string, ResponseConfig> {
  const out: Record<string, ResponseConfig> = {};
  for (const [key, spec] of Object.entries(route.docs.responses ?? {})) {
    const status = Number(key);
    if (spec instanceof ErrorResponse) continue;
    if (spec instanceof ContentResponse) {
      out[key] = spec.contentType
        ? { description: spec.description, content: { [spec.contentType]: { schema: spec.schema ?? z.string() } } }
        : { description: spec.description };
    } else {
      out[key] = { description: STATUS_TEXT[status] ?? `Status ${status}`, content: { 'application/json': { schema: spec! } } };
    }
  }
  for (const [status, list] of errorEntries(route)) {
    const description = STATUS_TEXT[status] ?? `Status ${status}`;
    if (route.docs.htmlErrors) {
      out[status] = { description: `${description} (an HTML page)`, content: { 'text/html': { schema: z.string() } } };
      continue;
    }
    const schemas = list.map(errorSchema);
    const schema = schemas.length === 1 ? schemas[0]! : z.union(schemas as [z.ZodType, z.ZodType, ...z.ZodType[]]);
    const codes = list.flatMap((entry) => (entry.shape === 'error' ? [...entry.codes] : []));
    out[status] = {
      description: codes.length ? `${description}: ${[...new Set(codes)].sort().join(', ')}` : description,
      content: { 'application/json': { schema } },
    };
  }
  return out;
}

function securityOf(route: Route): Record<string, string[]>[] {
  if (route.auth === 'public') return [];
  const schemes: SecurityScheme[] = route.docs.security ?? ['bearerAuth', 'apiToken'];
  return schemes.map((scheme) => ({ [scheme]: [] }));
}

/** The header parameters a route documents (never the credential). */
function documentedHeaders(schema: z.ZodType | undefined): z.ZodObject | undefined {
  if (!(schema instanceof z.ZodObject)) return undefined;
  const keys = Object.keys(schema.shape).filter((name) => name !== 'authorization');
  if (keys.length === 0) return undefined;
  return schema.pick(Object.fromEntries(keys.map((name) => [name, true])) as Record<string, true>);
}

export type OpenApiDocument = ReturnType<OpenApiGeneratorV3['generateDocument']>;

/** Generates the document of the route table (call once; it is a pure function of the routes). */
export function buildOpenApiDocument(routes: readonly Route[]): OpenApiDocument {
  const registry = new OpenAPIRegistry();
  registry.registerComponent('securitySchemes', 'bearerAuth', {
    type: 'http',
    scheme: 'bearer',
    bearerFormat: 'JWT',
    description: AUTH_DESCRIPTION.bearerAuth,
  });
  registry.registerComponent('securitySchemes', 'apiToken', {
    type: 'http',
    scheme: 'bearer',
    bearerFormat: 'API token (cbk_…)',
    description: AUTH_DESCRIPTION.apiToken,
  });

  for (const route of routes) {
    const { params, query, body, headers } = route.schemas;
    const bodyOptional = body?.safeParse(undefined).success ?? false;
    const request: RouteConfig['request'] = {
      params: params as never,
      query: query as never,
      headers: documentedHeaders(headers) as never,
      body: body
        ? { required: !bodyOptional, content: { 'application/json': { schema: body instanceof z.ZodOptional ? body.unwrap() : body } } }
        : undefined,
    };
    registry.registerPath({
      method: route.method,
      path: openApiPath(route.path),
      operationId: actionOf(route.method, route.path),
      summary: route.summary,
      tags: [sectionOf(route.path)],
      security: securityOf(route),
      request,
      responses: responsesOf(route),
    });
  }

  // The three error bodies are components even where a route narrows `error` to its codes.
  const shared = [ErrorBody, SimpleErrorBody, FlaggedErrorBody].map((schema) => ({ type: 'schema' as const, schema }));
  return new OpenApiGeneratorV3([...registry.definitions, ...shared]).generateDocument({
    openapi: '3.0.3',
    info: { title: API_TITLE, version: API_VERSION, description: API_SUMMARY },
    servers: [{ url: '/' }],
    tags: [...new Set(routes.map((route) => sectionOf(route.path)))].map((name) => ({ name })),
  });
}

/** Routes whose responses are not declared, or declare no success (the coverage test names them). */
export function undocumentedRoutes(routes: readonly Route[]): string[] {
  return routes
    .filter((route) => !Object.keys(route.docs.responses ?? {}).some((status) => Number(status) < 400))
    .map((route) => `${route.method.toUpperCase()} ${route.path}`);
}

// The OpenAPI 3.0.3 document, generated from the route table: every route's
// zod schemas (params, query, body, headers: the ones the pipeline validates
// with) and its declared `responses`, through @asteasolutions/zod-to-openapi.
// Nothing here describes a request or response shape a second time.
//
// A route declares its responses as status → one of:
//   - a zod schema: a JSON body;
//   - errors('code', ...): an error, in the body shape the route's
//     errorShapes choose for that status (docs/api.md#errors); for the Error shape
//     `error` is one of the codes given (registered codes only:
//     core/error-codes.ts);
//   - content(type, description, schema?): a non-JSON reply (HTML page,
//     redirect, text, event stream);
//   - noContent(description): no body (204).
// The errors the pipeline itself can give (401 without a credential, the
// route's validation status, 400 for unparsable JSON, 413, 415) are added
// here from the route's configuration, so modules declare only their own.
import { OpenAPIRegistry, OpenApiGeneratorV3, type ResponseConfig, type RouteConfig } from '@asteasolutions/zod-to-openapi';
import { z } from 'zod';
import type { Route } from './route.ts';
import type { ErrorCode } from '../core/error-codes.ts';
import { defaultCode, type ErrorShape } from '../core/errors.ts';
import { ErrorBody, SimpleErrorBody, FlaggedErrorBody, SHAPE_SCHEMAS, ErrorResponse, ContentResponse, errors, content, noContent, type SecurityScheme } from './responses.ts';
import { SERVICE_NAME } from '../core/service.ts';
import { DocumentedIdempotencyKeyHeaders, REPLAYED_HEADER } from './idempotency.ts';

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
  [/^\/api\/mobile\/calendar\/|^\/(c|cal)\/|^\/e\/[^/]+\.ics$/, 'Calendars'],
  [/^\/(l|e|checkin)\//, 'Deep links'],
  [/^\/mcp/, 'Agent interface'],
  [/^\/health$/, 'Health'],
];

/** The area a path belongs to (the OpenAPI tag and the endpoint's controller). */
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

export const API_TITLE = SERVICE_NAME;
export const API_VERSION = '1.0.0';
export const API_SUMMARY =
  'A Supabase-style backend for local communities and events: a mobile REST interface (auth, profile and hats, ' +
  'communities, events and check-ins, connections, a task/deal CRM), platform integration for event platforms ' +
  '(with outbound webhooks signed per Standard Webhooks), ' +
  'developer docs with API tokens and a live test executor, deep links, and an MCP tool server for AI agents.';

/** Codes the pipeline gives for a missing or refused credential (access token, API token). */
export const AUTH_ERROR_CODES: readonly ErrorCode[] = ['unauthorized', 'invalid_token', 'session_ended'];

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
  304: 'Not modified',
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

export interface ErrorEntry {
  /** The body shape the route answers this status with (only the Error shape carries the code). */
  shape: ErrorShape;
  codes: Set<ErrorCode>;
}

/** One error status a pipeline rule adds: `shape` 'route' is the route's errorShapes choice for the status. */
export interface PipelineStatus {
  status: number;
  shape: ErrorShape | 'route';
  codes: readonly ErrorCode[];
}

/**
 * An error the pipeline gives on every route of a kind, whatever the route
 * declares (http/route.ts, http/body.ts, http/fair-share.ts): added to each
 * such route's responses here, so that modules declare only their own.
 */
export interface PipelineError {
  /** Which routes and why (docs/errors.md). */
  when: string;
  statuses(route: Route): PipelineStatus[];
}

export const PIPELINE_ERRORS: readonly PipelineError[] = [
  {
    when: 'every signed-in route: a missing or refused credential (401); an API token whose permissions do not include the path (403)',
    statuses: (route) =>
      route.auth === 'public'
        ? []
        : [
            { status: 401, shape: 'route', codes: AUTH_ERROR_CODES },
            { status: 403, shape: 'route', codes: ['forbidden'] },
          ],
  },
  {
    // A client past its fair share of the pool waits, then 429
    // (http/fair-share.ts); the database unreachable or restarting is 503
    // (with Retry-After); a request cancelled at the statement timeout is 504.
    when: 'every route: a client past its fair share of the database (429); the database unreachable, restarting or busy (503); the statement timeout (504)',
    statuses: () => [
      { status: 429, shape: 'route', codes: ['rate_limited'] },
      { status: 503, shape: 'route', codes: ['service_unavailable'] },
      { status: 504, shape: 'route', codes: ['statement_timeout'] },
    ],
  },
  {
    when: "every route with a query, body or headers to validate: a value that fails validation, with the route's invalid status (400 or 422)",
    statuses: (route) => {
      const { docs, schemas } = route;
      if (!(schemas.query || schemas.body || schemas.headers)) return [];
      const invalid = docs.invalidStatus ?? 400;
      return [{ status: invalid, shape: 'route', codes: [defaultCode(invalid)] }];
    },
  },
  {
    when:
      'every route with path parameters: a parameter that fails validation (404 where an id that is not a uuid names nothing), or a path that is not valid percent-encoding (400)',
    statuses: (route) => {
      const { docs, schemas } = route;
      if (!schemas.params) return [];
      const status = docs.invalidParamsStatus ?? docs.invalidStatus ?? 400;
      return [
        { status, shape: 'route', codes: [defaultCode(status)] },
        // A path that is not valid percent-encoding fails before the route.
        { status: 400, shape: 'error', codes: ['bad_request'] },
      ];
    },
  },
  {
    when:
      'every POST, PATCH and DELETE of the mobile, platform and token interfaces with an Idempotency-Key: a key that is not 1-255 printable ASCII characters (the route\'s invalid status), a key still in use by another request (409), a key used before for another request (422)',
    statuses: (route) => {
      if (!route.docs.idempotencyKey) return [];
      const invalid = route.docs.invalidStatus ?? 400;
      return [
        { status: invalid, shape: 'route', codes: [defaultCode(invalid)] },
        { status: 409, shape: 'error', codes: ['idempotency_key_in_progress'] },
        { status: 422, shape: 'error', codes: ['idempotency_key_reused'] },
      ];
    },
  },
  {
    // Body parsing happens before the route: always the Error shape.
    when: 'every route with a JSON body: not JSON (400 invalid_json), unreadable (400), over 1 MB (413), not UTF-8 or in an unknown Content-Encoding (415)',
    statuses: (route) =>
      route.schemas.body
        ? [
            { status: 400, shape: 'error', codes: ['invalid_json', 'bad_request'] },
            { status: 413, shape: 'error', codes: ['payload_too_large'] },
            { status: 415, shape: 'error', codes: ['unsupported_media_type'] },
          ]
        : [],
  },
];

/** The body shape a route answers an error status with. */
export const shapeOf = (route: Route, status: number): ErrorShape => route.docs.errorShapes?.[status] ?? 'error';

/**
 * The error statuses of a route and the codes each can carry: its declared
 * ones plus those of the pipeline (the document's `error` enums, and the
 * routes of docs/errors.md, come from here).
 */
export function routeErrors(route: Route): Map<number, ErrorEntry[]> {
  const entries = new Map<number, ErrorEntry[]>();
  const add = (status: number, shape: ErrorShape, codes: readonly ErrorCode[]) => {
    const list = entries.get(status) ?? [];
    const same = list.find((entry) => entry.shape === shape);
    if (same) codes.forEach((code) => same.codes.add(code));
    else list.push({ shape, codes: new Set(codes) });
    entries.set(status, list);
  };
  for (const [key, spec] of Object.entries(route.docs.responses ?? {})) {
    const status = Number(key);
    if (spec instanceof ErrorResponse) add(status, shapeOf(route, status), spec.codes);
  }
  for (const rule of PIPELINE_ERRORS) {
    for (const { status, shape, codes } of rule.statuses(route)) add(status, shape === 'route' ? shapeOf(route, status) : shape, codes);
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
    if (route.docs.idempotencyKey && status < 400) out[key]!.headers = REPLAYED_RESPONSE_HEADER;
  }
  for (const [status, list] of routeErrors(route)) {
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

/** A replayed answer says so (documented on the success responses of routes that take an Idempotency-Key). */
const REPLAYED_RESPONSE_HEADER = {
  [REPLAYED_HEADER]: {
    description: '`true` when this is the stored answer of an earlier request with the same Idempotency-Key.',
    schema: { type: 'string' as const, enum: ['true'] },
  },
};

/** The header parameters a route documents (never the credential); the Idempotency-Key where the route takes one. */
function documentedHeaders(route: Route): z.ZodObject | undefined {
  const schema = route.schemas.headers;
  let own: z.ZodObject | undefined;
  if (schema instanceof z.ZodObject) {
    const keys = Object.keys(schema.shape).filter((name) => name !== 'authorization');
    if (keys.length > 0) own = schema.pick(Object.fromEntries(keys.map((name) => [name, true])) as Record<string, true>);
  }
  if (!route.docs.idempotencyKey) return own;
  return own ? own.extend(DocumentedIdempotencyKeyHeaders.shape) : DocumentedIdempotencyKeyHeaders;
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
    const { params, query, body } = route.schemas;
    const bodyOptional = body?.safeParse(undefined).success ?? false;
    const request: RouteConfig['request'] = {
      params: params as never,
      query: query as never,
      headers: documentedHeaders(route) as never,
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

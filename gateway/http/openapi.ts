// The OpenAPI 3.0.3 document, generated from the route table: every route's
// zod schemas (params, query, body, headers: the ones the pipeline validates
// with) and its declared `responses`, through @asteasolutions/zod-to-openapi.
// Nothing here describes a request or response shape a second time.
//
// A route declares its responses as status → one of:
//   - a zod schema: a JSON body;
//   - errors('code', ...): an error, in the body shape the route's
//     errorShapes choose for that status (docs/api/conventions.md#errors); for the Error shape
//     `error` is one of the codes given (registered codes only:
//     core/web/error-codes.ts);
//   - content(type, description, schema?): a non-JSON reply (HTML page,
//     redirect, text, event stream);
//   - noContent(description): no body (204).
// The errors the pipeline itself can give (401 without a credential, the
// route's validation status, 400 for unparsable JSON, 413, 415) are added
// here from the route's configuration, so modules declare only their own.
import { OpenAPIRegistry, OpenApiGeneratorV3, type ResponseConfig, type RouteConfig } from '@asteasolutions/zod-to-openapi';
import { z } from 'zod';
import type { Route } from './route.ts';
import { ERROR_CODES, type ErrorCode } from '../core/web/error-codes.ts';
import { defaultCode, ERROR_SHAPES, errorBody, HttpError, type ErrorShape } from '../core/web/errors.ts';
import { LIMITS } from '../core/web/limits.ts';
import { SERVICE_NAME } from '../core/web/service.ts';
import { DocumentedIdempotencyKeyHeaders, REPLAYED_HEADER } from './idempotency.ts';
import { MAX_BODY_BYTES } from './body.ts';
import { exampleOf } from './examples.ts';
import { SHAPE_SCHEMAS, ErrorResponse, ContentResponse, type SecurityScheme } from './responses.ts';

// ---------------------------------------------------------------------------
// Sections (tags, and ApiEndpoint.controller)
// ---------------------------------------------------------------------------

const SECTIONS: [RegExp, string, string][] = [
  [/^\/api\/auth\//, 'Authentication', 'Accounts and sessions: register, sign in for an access token (JWT) and a refresh token, rotate and end sessions, set a password from an e-mailed link.'],
  [/^\/api\/mobile\/account(\/|$)|^\/account\//, 'Your account', "The caller's own account: delete it (in the app, or on the web pages an e-mailed link opens), export its data, change its e-mail address and password, see and end its sessions."],
  [/^\/api\/docs\/tokens/, 'API tokens', 'Personal API tokens (`cbk_…`), limited to path patterns: for scripts, the try-it flow of this page and AI agents.'],
  [/^\/api\/docs|^\/llms\.txt$/, 'Documentation', 'This reference, the endpoint list, llms.txt, the live test executor and the log of what agents did with your credentials.'],
  [/^\/api\/mobile\/(profile|hats|hat_types)/, 'Profile and hats', "The caller's profile, and their hats: the personas (professional, personal, ...) they wear at events."],
  [/^\/api\/mobile\/(events|venues|checkins)/, 'Events and check-ins', "Events of the caller's communities (one by one, upcoming, as a live stream), check-ins at events and venues, and the connections made at an event."],
  [/^\/api\/mobile\/connections/, 'Connections', 'People the caller met: connections to other members, with the event, the hats worn, notes, strength and tags.'],
  [/^\/api\/mobile\/tasks/, 'Tasks', 'A small CRM: tasks with a status (pending → in_progress → completed), links from one task to the next, chains, and tasks grouped by company.'],
  [/^\/api\/mobile\/deals/, 'Deals', "One deal per company the caller's tasks name: its value, its current task and the next action."],
  [/^\/api\/mobile\/communities|^\/api\/community\//, 'Communities', 'Communities: the caller\'s, search, one community with its managers, its members, joining and leaving, and the public page data.'],
  [/^\/api\/v1\/platform\//, 'Platform integration', "For external event platforms: push events, register attendees and check them in, with a community manager's credential or a community-scoped API token."],
  [/^\/api\/v1\/forms/, 'Forms', 'Form submissions, stored for the operators (no credential).'],
  [/^\/api\/mobile\/calendar\/|^\/cal\/|^\/c\/[^/]+\/calendar\.ics$|^\/e\/[^/]+\.ics$/, 'Calendars', 'Calendar files (iCalendar) of one event, of a community, and a personal feed of the caller\'s upcoming events, for calendar apps to subscribe to.'],
  [/^\/(l|e|c|checkin|assets)\//, 'Deep links', 'The links shared for events and venues: redirects to the app or to the web, the public event and community pages (with their share previews and default image) and the web check-in form (HTML).'],
  [/^\/storage\/v1\//, 'Storage', "Files and images, in Supabase Storage's interface (supabase-js's `storage` client works unchanged): upload, download, list, move, copy and remove objects of a bucket, public and signed URLs, image transformations and resumable (TUS) uploads. These routes answer Supabase Storage's error body (StorageError)."],
  [/^\/mcp/, 'Agent interface', 'The MCP tool server for AI agents.'],
  [/^\/health$/, 'Health', 'Whether the gateway is up and its database answers (for load balancers and orchestrators).'],
];
const OTHER_SECTION = 'Other';
const OTHER_DESCRIPTION = 'Web pages outside the sections above (the set-password page an e-mailed link opens).';

/** The area a path belongs to (the OpenAPI tag and the endpoint's controller). */
export function sectionOf(path: string): string {
  return SECTIONS.find(([pattern]) => pattern.test(path))?.[1] ?? OTHER_SECTION;
}

/** What a section is about (the OpenAPI tag's description). */
export function sectionDescription(name: string): string {
  return SECTIONS.find(([, section]) => section === name)?.[2] ?? OTHER_DESCRIPTION;
}

/** `/api/mobile/tasks/:id` → `/api/mobile/tasks/{id}`; a wildcard `:path*` → `{path}` (its value holds slashes: `x-path-wildcard`). */
export function openApiPath(expressPath: string): string {
  return expressPath.replace(/:([A-Za-z0-9_]+)\*?/g, '{$1}');
}

/** The name of a route's last-segment wildcard parameter (`/object/:bucket/:path*` → `path`), if any. */
export function wildcardOf(expressPath: string): string | undefined {
  return /\/:([A-Za-z0-9_]+)\*$/.exec(expressPath)?.[1];
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
    .map((segment) => (segment.startsWith(':') ? `by_${segment.slice(1).replace(/\*$/, '')}` : segment))
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

/** The document's introduction (Swagger UI shows it above the operations). */
export const API_DESCRIPTION = [
  API_SUMMARY,
  '',
  '**Credentials.** Sign in with `POST /api/auth/login` for an access token (JWT, `bearerAuth`), or create an API token ' +
    'with `POST /api/docs/tokens` (`apiToken`, limited to path patterns); send either as `Authorization: Bearer <token>`. ' +
    'To try a request on this page, create an API token, press **Authorize** and paste it under `apiToken`.',
  '',
  '**Errors.** Most errors answer the `Error` body: a machine-readable `error` code, a `message` for people and `details` ' +
    '(`issues` naming each field that failed validation, `retry_after` on 429, 503 and 409 `idempotency_key_in_progress`). A few routes answer the `SimpleError` ' +
    'or `FlaggedError` body instead, as their responses say. Every operation lists the statuses and codes it can answer.',
  '',
  `**Limits on every route.** A JSON body is at most ${MAX_BODY_BYTES / (1024 * 1024)} MB. A page holds at most ` +
    `${LIMITS.pageLimitMax} items. A client that takes more than its fair share of the database waits, then gets 429 ` +
    'with Retry-After; a request that runs past the statement timeout is cancelled with 504 (nothing is changed). ' +
    'A write the database stopped answering after it was sent is 504 `outcome_unknown`: it may have been saved, so retry it ' +
    'with the same `Idempotency-Key`. ' +
    'Ids in paths are uuids; one that is not names nothing (404 on most routes).',
].join('\n');

/** Who answers for the interface: the operators of the server that serves the document. */
export const API_CONTACT = { name: 'The operators of this server', url: '/api/docs' };

/** The interface is not published under a licence. */
export const API_LICENSE = { name: 'Proprietary' };

/** Codes the pipeline gives for a missing or refused credential (access token, API token). */
export const AUTH_ERROR_CODES: readonly ErrorCode[] = ['unauthorized', 'invalid_token', 'session_ended'];

const AUTH_DESCRIPTION: Record<SecurityScheme, string> = {
  bearerAuth: 'An access token (JWT) from POST /api/auth/login, sent as `Authorization: Bearer <access_token>`.',
  apiToken:
    'An API token (secret `cbk_…`, created with POST /api/docs/tokens and shown once), sent as ' +
    '`Authorization: Bearer <token>`. It acts as its owner on the paths its `permissions` match.',
  supabaseApiKey:
    'An API key as Supabase issues them (the anon key or the service-role key, printed by `npm run admin -- keys`), sent as ' +
    '`apikey: <key>`, as the Supabase SDKs send it: required on /auth/v1.',
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
  412: 'Precondition failed',
  413: 'Payload too large',
  415: 'Unsupported media type',
  422: 'Validation error',
  429: 'Too many requests',
  503: 'Service unavailable',
  507: 'Insufficient storage',
  504: 'Statement timeout, or no answer after the request was sent',
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
    when:
      "every signed-in route: a missing or refused credential (401); an API token whose permissions do not include the path, or a community-scoped API token anywhere but its community's platform endpoints (403)",
    statuses: (route) =>
      route.auth === 'public'
        ? []
        : [
            { status: 401, shape: 'route', codes: AUTH_ERROR_CODES },
            { status: 403, shape: 'route', codes: ['forbidden', 'community_scope_violation'] },
          ],
  },
  {
    // A client past its fair share of the pool waits, then 429
    // (http/fair-share.ts); the database unreachable or restarting is 503
    // (with Retry-After); a request cancelled at the statement timeout is 504.
    when: 'every route: a client past its fair share of the database (429); the database unreachable, restarting, busy or not answering (503); the statement timeout (504)',
    statuses: () => [
      { status: 429, shape: 'route', codes: ['rate_limited'] },
      { status: 503, shape: 'route', codes: ['service_unavailable'] },
      { status: 504, shape: 'route', codes: ['statement_timeout'] },
    ],
  },
  {
    // A write whose COMMIT was sent when the database stopped answering
    // (core/database/transaction.ts); a GET says 503 instead (http/route.ts).
    when: 'every route but GET: the database stopped answering after the request was sent, so it may have been saved (504)',
    statuses: (route) => (route.method === 'get' ? [] : [{ status: 504, shape: 'route', codes: ['outcome_unknown'] }]),
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
        { status: 400, shape: 'default', codes: ['bad_request'] },
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
        { status: 409, shape: 'default', codes: ['idempotency_key_in_progress'] },
        { status: 422, shape: 'default', codes: ['idempotency_key_reused'] },
      ];
    },
  },
  {
    // Body parsing happens before the route: the Error shape (Supabase Storage's body on /storage/v1).
    when: 'every route with a JSON body: not JSON (400 invalid_json), unreadable (400), over 1 MB (413), not UTF-8 or in an unknown Content-Encoding (415)',
    statuses: (route) => {
      if (!route.schemas.body) return [];
      const shape = route.docs.errorShape ?? 'default';
      return [
        { status: 400, shape, codes: ['invalid_json', 'bad_request'] },
        { status: 413, shape, codes: ['payload_too_large'] },
        { status: 415, shape, codes: ['unsupported_media_type'] },
      ];
    },
  },
];

/** The body shape a route answers an error status with. */
export const shapeOf = (route: Route, status: number): ErrorShape => route.docs.errorShapes?.[status] ?? route.docs.errorShape ?? 'default';

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

/** A shape's component narrowed to the codes a route gives with a status (in the field that carries them): `allOf` the shared component. */
function errorSchema(entry: ErrorEntry): z.ZodType {
  const field = ERROR_SHAPES[entry.shape].codeField;
  if (field === null || entry.codes.size === 0) return SHAPE_SCHEMAS[entry.shape];
  const [first, ...rest] = [...entry.codes].sort();
  const codes = z.enum([first!, ...rest]).describe('The codes this operation answers with this status.');
  return z.intersection(SHAPE_SCHEMAS[entry.shape], z.object({ [field]: codes }));
}


/** An error status's description: what it is, then each code with its meaning (from the register). */
function errorDescription(route: Route, status: number, list: ErrorEntry[]): string {
  const title = STATUS_TEXT[status] ?? `Status ${status}`;
  const lines = [route.docs.htmlErrors ? `${title} (an HTML page).` : `${title}.`];
  for (const entry of list) {
    const note = ERROR_SHAPES[entry.shape].note;
    if (!route.docs.htmlErrors && note !== null) {
      lines.push('', `The body is the ${ERROR_SHAPES[entry.shape].component} shape (${note}); the cause is one of:`);
    }
    lines.push('', ...[...entry.codes].sort().map((code) => `- \`${code}\`: ${ERROR_CODES[code].meaning}`));
  }
  return lines.join('\n');
}

/**
 * An example of an error answer: the first code the route gives with the
 * status, its meaning's first sentence as the message, and the details the
 * status carries (a validation issue, or retry_after).
 */
function errorExample(route: Route, status: number, entry: ErrorEntry): unknown {
  const code = [...entry.codes][0] ?? defaultCode(status);
  const message = ERROR_CODES[code].meaning.split(/(?<=\.) /)[0]!;
  if (entry.shape !== 'default') return errorBody(entry.shape, new HttpError(status, code, message));
  const field = validatedField(route);
  const details =
    field && status === (route.docs.invalidStatus ?? 400) && code === defaultCode(status)
      ? { issues: [{ path: field, message: 'Invalid input' }] }
      : status === 429 || status === 503
        ? { retry_after: 1 }
        : null;
  return { error: code, message, details };
}

/** The first field a route validates in its body or query (`body.title`), for an example of a validation issue. */
function validatedField(route: Route): string | undefined {
  for (const [where, schema] of [['body', route.schemas.body], ['query', route.schemas.query]] as const) {
    let inner = schema;
    while (inner instanceof z.ZodOptional || inner instanceof z.ZodPipe) inner = inner instanceof z.ZodOptional ? (inner.unwrap() as z.ZodType) : (inner.out as z.ZodType);
    const first = inner instanceof z.ZodObject ? Object.keys(inner.shape)[0] : undefined;
    if (first) return `${where}.${first}`;
  }
  return undefined;
}

/** A JSON media object with the schema's example (http/examples.ts), when it has a complete one. */
function jsonMedia(schema: z.ZodType): { schema: z.ZodType; example?: unknown } {
  const { value } = exampleOf(schema);
  return value === undefined ? { schema } : { schema, example: value };
}

/** The media type of an HTML form's body (the web pages' routes with bodyType 'form'). */
const FORM_MEDIA_TYPE = 'application/x-www-form-urlencoded';

function responsesOf(route: Route): Record<string, ResponseConfig> {
  const out: Record<string, ResponseConfig> = {};
  for (const [key, spec] of Object.entries(route.docs.responses ?? {})) {
    const status = Number(key);
    if (spec instanceof ErrorResponse) continue;
    if (spec instanceof ContentResponse) {
      out[key] = spec.contentType
        ? { description: spec.description, content: { [spec.contentType]: spec.schema ? jsonMedia(spec.schema) : { schema: z.string() } } }
        : { description: spec.description };
    } else {
      out[key] = { description: STATUS_TEXT[status] ?? `Status ${status}`, content: { 'application/json': jsonMedia(spec!) } };
    }
    if (status < 400) {
      const headers = {
        ...(route.docs.idempotencyKey ? REPLAYED_RESPONSE_HEADER : {}),
        ...(route.docs.readOnly ? {} : CONSISTENCY_TOKEN_RESPONSE_HEADER),
        ...(route.docs.etag && status !== 204 ? ETAG_RESPONSE_HEADER : {}),
      };
      if (Object.keys(headers).length > 0) out[key]!.headers = headers;
    }
  }
  for (const [status, list] of routeErrors(route)) {
    const description = errorDescription(route, status, list);
    if (route.docs.htmlErrors) {
      out[status] = { description, content: { 'text/html': { schema: z.string() } } };
      continue;
    }
    const schemas = list.map(errorSchema);
    const schema = schemas.length === 1 ? schemas[0]! : z.union(schemas as [z.ZodType, z.ZodType, ...z.ZodType[]]);
    out[status] = { description, content: { 'application/json': { schema, example: errorExample(route, status, list[0]!) } } };
  }
  return out;
}

/** The statuses and codes of a route's errors, on one line each (the operation's description). */
function errorSummary(route: Route): string[] {
  return [...routeErrors(route)]
    .sort(([a], [b]) => a - b)
    .map(([status, list]) => {
      const codes = [...new Set(list.flatMap((entry) => [...entry.codes]))].sort();
      return `- ${status}: ${codes.map((code) => `\`${code}\``).join(', ')}`;
    });
}

/** What a route documents in its operation: its description, then its limits and its errors. */
export function operationDescription(route: Route): string {
  const parts = [route.docs.description ?? route.summary];
  const limits = [...(route.docs.limits ?? [])];
  if (route.schemas.body) limits.push(`The ${route.docs.bodyType === 'form' ? 'form' : 'JSON'} body is at most ${MAX_BODY_BYTES / (1024 * 1024)} MB.`);
  if (limits.length) parts.push(`**Limits**\n\n${limits.map((line) => `- ${line}`).join('\n')}`);
  parts.push(`**Errors** (each response below explains its codes)\n\n${errorSummary(route).join('\n')}`);
  return parts.join('\n\n');
}

function securityOf(route: Route): Record<string, string[]>[] {
  // A route that requires an API key requires it beside the bearer credential (both at once).
  const key: Record<string, string[]> = route.docs.apiKey ? { supabaseApiKey: [] } : {};
  if (route.auth === 'public') return route.docs.apiKey ? [key] : [];
  const schemes = (route.docs.security ?? ['bearerAuth', 'apiToken']).filter((scheme) => scheme !== 'supabaseApiKey');
  return schemes.map((scheme) => ({ ...key, [scheme]: [] }));
}

/** A replayed answer says so (documented on the success responses of routes that take an Idempotency-Key). */
const REPLAYED_RESPONSE_HEADER = {
  [REPLAYED_HEADER]: {
    description: '`true` when this is the stored answer of an earlier request with the same Idempotency-Key.',
    schema: { type: 'string' as const, enum: ['true'] },
  },
};

/** The object's version (documented on the success responses of routes that answer one: http/versions.ts). */
const ETAG_RESPONSE_HEADER = {
  ETag: {
    description:
      "The object's version (api.etag: its updated_at in microseconds since 1970, quoted). Send it back as If-Match on PATCH or DELETE: " +
      'a write made on an older version is refused with 412 `precondition_failed` (docs/offline-writes.md).',
    schema: { type: 'string' as const, pattern: '^"[0-9]+"$', example: '"1765148400123456"' },
  },
};

/** What a consistency token is, for both of its headers (docs/operations/scaling.md#read-replicas). */
const CONSISTENCY_TOKEN_TEXT =
  'With read replicas (docs/operations/scaling.md#read-replicas): the position of a write in the database (its commit), answered by every request ' +
  'that writes. Sent back on a read, the read is served by a database replica only if that replica has the write, else by the primary: ' +
  'a client reads its own writes whichever gateway and replica it reaches. A value that is not a token sends the read to the primary. ' +
  'Without the header, a signed-in session still reads its writes made through the same gateway process within a few seconds. ' +
  'A read takes it in the request header of the same name (optional, on any GET).';

/** A write's consistency token (documented on the success responses of the routes that are not read-only GETs). */
const CONSISTENCY_TOKEN_RESPONSE_HEADER = {
  'X-Consistency-Token': {
    description: CONSISTENCY_TOKEN_TEXT,
    schema: { type: 'string' as const, pattern: '^[0-9A-F]{1,8}/[0-9A-F]{1,8}$', example: '0/3A2B5C8' },
  },
};

/**
 * The header parameters a route documents (never the credential); the
 * Idempotency-Key where the route takes one. The consistency token a client
 * may send back on a read is described with the header that answers it, not
 * as a parameter of every GET: an optional header parameter on every read
 * would change the signature of every read in a generated client (orval's
 * `output.headers` makes it an argument), for a header most clients never
 * send (test/http/typed-client.test.ts).
 */
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

/**
 * An operation served outside the route table (GET /health, answered by
 * app.ts before the pipeline): documented as it is, with no pipeline errors.
 */
export interface PlainOperation {
  method: 'get';
  path: string;
  summary: string;
  description: string;
  /** status → JSON body. */
  responses: Record<number, z.ZodType>;
}

export type OpenApiDocument = ReturnType<OpenApiGeneratorV3['generateDocument']>;

/** Generates the document of the route table and the plain operations (call once; it is a pure function of them). */
export function buildOpenApiDocument(routes: readonly Route[], plain: readonly PlainOperation[] = []): OpenApiDocument {
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

  registry.registerComponent('securitySchemes', 'supabaseApiKey', {
    type: 'apiKey',
    in: 'header',
    name: 'apikey',
    description: AUTH_DESCRIPTION.supabaseApiKey,
  });

  for (const route of routes) {
    const { params, query, body } = route.schemas;
    const bodyOptional = body?.safeParse(undefined).success ?? false;
    const bodySchema = body instanceof z.ZodOptional ? (body.unwrap() as z.ZodType) : body;
    const raw = route.docs.rawBody;
    const request: RouteConfig['request'] = {
      params: params as never,
      query: query as never,
      headers: documentedHeaders(route) as never,
      body: raw
        ? { description: raw.description, required: true, content: Object.fromEntries(Object.entries(raw.content).map(([type, schema]) => [type, { schema }])) }
        : bodySchema
          ? { required: !bodyOptional, content: { [route.docs.bodyType === 'form' ? FORM_MEDIA_TYPE : 'application/json']: jsonMedia(bodySchema) } }
          : undefined,
    };
    const wildcard = wildcardOf(route.path);
    registry.registerPath({
      ...(wildcard ? { 'x-path-wildcard': wildcard } : {}),
      method: route.method,
      path: openApiPath(route.path),
      operationId: actionOf(route.method, route.path),
      summary: route.summary,
      description: operationDescription(route),
      tags: [sectionOf(route.path)],
      security: securityOf(route),
      request,
      responses: responsesOf(route),
    });
  }
  for (const operation of plain) {
    registry.registerPath({
      method: operation.method,
      path: operation.path,
      operationId: actionOf(operation.method, operation.path),
      summary: operation.summary,
      description: operation.description,
      tags: [sectionOf(operation.path)],
      security: [],
      responses: Object.fromEntries(
        Object.entries(operation.responses).map(([status, schema]) => [
          status,
          {
            description: STATUS_TEXT[Number(status)] ?? `Status ${status}`,
            content: { 'application/json': Number(status) < 400 ? jsonMedia(schema) : { schema } },
          },
        ]),
      ),
    });
  }

  const paths = [...routes.map((route) => route.path), ...plain.map((operation) => operation.path)];
  const document = new OpenApiGeneratorV3(registry.definitions).generateDocument({
    openapi: '3.0.3',
    info: {
      title: API_TITLE,
      version: API_VERSION,
      description: API_DESCRIPTION,
      contact: API_CONTACT,
      license: API_LICENSE,
    },
    servers: [{ url: '/', description: 'This server.' }],
    tags: [...new Set(paths.map(sectionOf))].map((name) => ({ name, description: sectionDescription(name) })),
  });
  return forGenerators(typedNullables(document));
}

/**
 * A pattern as written, without the escapes of a JavaScript regex literal
 * that a pattern does not need: RegExp#source writes every `/` as `\/`,
 * which a JSON Schema pattern need not escape and which client generators
 * that write the pattern into a regex literal of their own escape again
 * (openapi-zod-client wrote `/^(\*|\\/...)$/`, which does not parse).
 */
export function plainPattern(pattern: string): string {
  return pattern.replace(/\\(.)/gsu, (escape, char: string) => (char === '/' ? '/' : escape));
}

/**
 * What client generators need of the document, done once here:
 *   - patterns without needless escapes (plainPattern);
 *   - a nullable enum lists its values, not null: `type` with
 *     `nullable: true` says null is allowed (OpenAPI 3.0's reading, which
 *     generators follow: openapi-typescript, orval, hey-api and
 *     openapi-zod-client all make `... | null` of it), while a `null` among
 *     the values made openapi-zod-client write `z.enum([..., null])`, which
 *     does not compile.
 */
function forGenerators<T>(document: T): T {
  const visit = (node: unknown): void => {
    if (Array.isArray(node)) return node.forEach(visit);
    if (!isNode(node)) return;
    if (typeof node.pattern === 'string') node.pattern = plainPattern(node.pattern);
    if (node.nullable === true && Array.isArray(node.enum) && node.enum.some((v) => v !== null)) {
      node.enum = node.enum.filter((v) => v !== null);
    }
    for (const value of Object.values(node)) visit(value);
  };
  visit(document);
  return document;
}

type Node = Record<string, unknown>;
const isNode = (value: unknown): value is Node => typeof value === 'object' && value !== null && !Array.isArray(value);
const isNullMarker = (value: unknown) => isNode(value) && Object.keys(value).length === 1 && value.nullable === true;

/**
 * OpenAPI 3.0 allows `nullable` only beside a `type`. zod-to-openapi writes
 * it alone for a value that can be anything (z.unknown(): any JSON value,
 * which needs no `nullable`) and as `allOf: [$ref, {nullable: true}]` for a
 * nullable reference (here: the referenced component's type beside
 * `nullable`, the reference in `allOf`); a nullable union of members of
 * different types gets a member that is only null.
 */
function typedNullables<T>(document: T): T {
  const schemas = ((document as Node).components as Node | undefined)?.schemas as Record<string, Node> | undefined;
  const typeOf = (schema: unknown): unknown => {
    if (!isNode(schema)) return undefined;
    if (typeof schema.$ref === 'string') return schemas?.[schema.$ref.replace('#/components/schemas/', '')]?.type;
    if (schema.type) return schema.type;
    const members = (schema.allOf ?? schema.anyOf ?? schema.oneOf) as unknown[] | undefined;
    const types = new Set(members?.map(typeOf));
    return types.size === 1 ? [...types][0] : undefined;
  };
  const visit = (node: unknown, where: string): void => {
    if (Array.isArray(node)) return node.forEach((item, i) => visit(item, `${where}/${i}`));
    if (!isNode(node)) return;
    for (const key of ['allOf', 'anyOf', 'oneOf'] as const) {
      const members = node[key];
      if (!Array.isArray(members) || !members.some(isNullMarker)) continue;
      node[key] = members.filter((member) => !isNullMarker(member));
      node.nullable = true;
    }
    if (node.nullable === true && node.type === undefined) {
      const type = typeOf(node);
      const union = (node.anyOf ?? node.oneOf) as unknown[] | undefined;
      if (node.$ref === undefined && node.allOf === undefined && union === undefined) {
        delete node.nullable;
      } else if (type !== undefined) {
        node.type = type;
      } else if (union) {
        // Members of different types: null is one more member.
        union.push({ type: 'string', nullable: true, enum: [null], description: 'null' });
        delete node.nullable;
      } else {
        throw new Error(`OpenAPI document: a nullable value of no single type at ${where}`);
      }
    }
    for (const [key, value] of Object.entries(node)) visit(value, `${where}/${key}`);
  };
  visit(document, '#');
  return document;
}

/** Routes whose responses are not declared, or declare no success (the coverage test names them). */
export function undocumentedRoutes(routes: readonly Route[]): string[] {
  return routes
    .filter((route) => !Object.keys(route.docs.responses ?? {}).some((status) => Number(status) < 400))
    .map((route) => `${route.method.toUpperCase()} ${route.path}`);
}

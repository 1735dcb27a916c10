// The developer docs (docs/api/integration.md#developer-docs): the OpenAPI document
// generated from the route table, a Swagger UI page served from this server
// (no CDN), the endpoint list discovered from the router, and the llms.txt
// index; and the live test executor (test-executor.ts).
import { createRequire } from 'node:module';
import fs from 'node:fs';
import path from 'node:path';
import { z } from 'zod';
import { defineRoute, type Reply, type Route } from '../http/route.ts';
import type { Page } from '../core/web/html.ts';
import { liveTestRoute } from './test-executor.ts';
import { WEBHOOK_EVENT_TYPES } from './webhooks.ts';
import { healthOperation } from './health.ts';
import { API_SUMMARY, API_TITLE, actionOf, buildOpenApiDocument, openApiPath, sectionOf, type OpenApiDocument } from '../http/openapi.ts';
import { DateTime, Id, content } from '../http/responses.ts';

/** ApiEndpoint: a route the gateway serves (or served: deprecated). */
export const ApiEndpoint = z
  .object({
    id: Id.describe("The endpoint's id (the live test executor's endpoint_id)."),
    path: z.string().describe('Its path, with `{parameters}`.').meta({ example: '/api/mobile/tasks/{id}' }),
    http_method: z.enum(['GET', 'POST', 'PUT', 'DELETE', 'PATCH']).describe('Its method.'),
    controller: z.string().describe('The area it belongs to (the tag of this document).').meta({ example: 'Tasks' }),
    action: z.string().describe('Its name (the operationId of this document).').meta({ example: 'get_tasks_by_id' }),
    discovered_at: DateTime.describe('When the gateway first served it.'),
    last_updated: DateTime.describe('When its entry last changed.'),
    deprecated: z.boolean().describe('True for an endpoint the gateway no longer serves.').meta({ example: false }),
    description: z.string().nullable().describe('What it does, in a line.').meta({ example: "One of the caller's tasks." }),
    tags: z.array(z.string()).describe('Its tags.').meta({ example: ['Tasks'] }),
  })
  .meta({ id: 'ApiEndpoint', description: 'An endpoint the gateway serves (or served: deprecated).' });

// ---------------------------------------------------------------------------
// The document and llms.txt, built once per route table
// ---------------------------------------------------------------------------

const documents = new WeakMap<readonly Route[], { json: string; document: OpenApiDocument }>();

/**
 * The OpenAPI document of a route table, as GET /api/docs/openapi.json serves
 * it (and `npm run lint:openapi` lints it): the routes and GET /health.
 * Generated on first use, then kept.
 */
export function openApiDocument(routes: readonly Route[]): { json: string; document: OpenApiDocument } {
  let entry = documents.get(routes);
  if (!entry) {
    const document = buildOpenApiDocument(routes, [healthOperation]);
    entry = { document, json: JSON.stringify(document) };
    documents.set(routes, entry);
  }
  return entry;
}

/** llms.txt (https://llmstxt.org): what this is, then sections of links. */
export function llmsTxt(routes: readonly Route[], publicUrl: string): string {
  const link = (p: string) => `${publicUrl}${p}`;
  const lines = [
    `# ${API_TITLE}`,
    '',
    `> ${API_SUMMARY}`,
    '',
    'Every request and response is JSON unless noted. The OpenAPI 3.0.3 document is the complete, machine-readable',
    'reference (generated from the same schemas the server validates with); the sections below index it.',
    '',
    '## Docs',
    '',
    `- [OpenAPI document](${link('/api/docs/openapi.json')}): OpenAPI 3.0.3, version 1.0.0, every operation with its schemas`,
    `- [API reference](${link('/api/docs')}): interactive HTML reference with a try-it flow (authorize with an API token)`,
    `- [Endpoint list](${link('/api/docs/endpoints')}): the endpoints the server serves, as JSON (ApiEndpoint)`,
    `- [Live test executor](${link('/api/docs')}): POST /api/docs/test replays a request against this server with your API token`,
    '',
    '## Auth',
    '',
    `- [Log in](${link('/api/auth/login')}): POST e-mail and password for an access token (JWT); send it as \`Authorization: Bearer <token>\``,
    `- [API tokens](${link('/api/docs/tokens')}): create a token (shown once, prefix \`cbk_\`) limited to path patterns; send it as a bearer credential`,
    '',
    '## Webhooks',
    '',
    `- [Webhook endpoints](${link('/api/docs')}#/${encodeURIComponent('Platform integration')}): a community's managers register https endpoints (POST /api/v1/platform/webhooks, the events listed below); every delivery is signed per Standard Webhooks (headers webhook-id, webhook-timestamp, webhook-signature: v1,<base64 HMAC-SHA256 of "id.timestamp.body"> keyed by the whsec_ secret), sent at least once, retried with back-off, and can be replayed`,
    `- Event types: ${WEBHOOK_EVENT_TYPES.join(', ')} (and webhook.ping on request); body {"type", "timestamp", "data"}`,
    '',
    '## Agent interface',
    '',
    `- [MCP endpoint](${link('/mcp')}): Model Context Protocol (Streamable HTTP, protocol 2025-03-26) with a personal API token as bearer credential`,
  ];
  const sections = new Map<string, Route[]>();
  for (const route of routes) {
    const section = sectionOf(route.path);
    sections.set(section, [...(sections.get(section) ?? []), route]);
  }
  lines.push('', '## Endpoints', '');
  for (const [section, list] of sections) {
    lines.push(`### ${section}`, '');
    for (const route of list) {
      const anchor = `#/${encodeURIComponent(section)}/${actionOf(route.method, route.path)}`;
      lines.push(`- [${route.method.toUpperCase()} ${openApiPath(route.path)}](${link('/api/docs')}${anchor}): ${route.summary}`);
    }
    lines.push('');
  }
  return lines.join('\n');
}

// ---------------------------------------------------------------------------
// The HTML reference: Swagger UI from swagger-ui-dist, served from here
// ---------------------------------------------------------------------------

const require = createRequire(import.meta.url);
const SWAGGER_DIR = path.dirname(require.resolve('swagger-ui-dist/package.json'));

const INIT_SCRIPT = `window.addEventListener('load', function () {
  window.ui = SwaggerUIBundle({
    url: '/api/docs/openapi.json',
    dom_id: '#swagger-ui',
    deepLinking: true,
    docExpansion: 'list',
    tryItOutEnabled: true,
    persistAuthorization: false,
    displayRequestDuration: true,
    filter: true,
    // Parameters show their limits (minimum, maximum, maxLength, pattern).
    showCommonExtensions: true,
    defaultModelsExpandDepth: 0,
    validatorUrl: null
  });
});
`;

const PAGE_STYLE = `html { box-sizing: border-box; overflow-y: scroll; }
*, *:before, *:after { box-sizing: inherit; }
body { margin: 0; background: #fafafa; }
.intro { max-width: 1460px; margin: 0 auto; padding: 16px 20px 0; font: 14px/1.5 system-ui, sans-serif; color: #3b4151; }
.intro code { background: #eee; padding: 1px 4px; border-radius: 3px; }
`;

const ASSETS: Record<string, { type: string; load: () => Buffer | string }> = {
  'swagger-ui.css': { type: 'text/css; charset=utf-8', load: () => fs.readFileSync(path.join(SWAGGER_DIR, 'swagger-ui.css')) },
  'swagger-ui-bundle.js': {
    type: 'text/javascript; charset=utf-8',
    load: () => fs.readFileSync(path.join(SWAGGER_DIR, 'swagger-ui-bundle.js')),
  },
  'docs.css': { type: 'text/css; charset=utf-8', load: () => PAGE_STYLE },
  'docs.js': { type: 'text/javascript; charset=utf-8', load: () => INIT_SCRIPT },
};
const assetCache = new Map<string, Buffer | string>();
const asset = (name: string) => {
  let data = assetCache.get(name);
  if (data === undefined) {
    data = ASSETS[name]!.load();
    assetCache.set(name, data);
  }
  return data;
};

/** Only this server's own scripts, styles and requests. */
const DOCS_CSP = [
  "default-src 'none'",
  "script-src 'self'",
  "style-src 'self'",
  "img-src 'self' data:",
  "font-src 'self'",
  "connect-src 'self'",
  "form-action 'self'",
  "base-uri 'none'",
  "frame-ancestors 'none'",
].join('; ');

const SECURITY_HEADERS = {
  'Content-Security-Policy': DOCS_CSP,
  'X-Content-Type-Options': 'nosniff',
  'Referrer-Policy': 'no-referrer',
  'X-Frame-Options': 'DENY',
  'Cross-Origin-Opener-Policy': 'same-origin',
  'Cross-Origin-Resource-Policy': 'same-origin',
};

/** The reference page: static (scripts and styles are same-origin files, no inline code), with the docs' own CSP. */
const DOCS_PAGE: Page = {
  html: `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>API reference: ${API_TITLE}</title>
<link rel="icon" href="data:,">
<link rel="stylesheet" href="/api/docs/assets/swagger-ui.css">
<link rel="stylesheet" href="/api/docs/assets/docs.css">
</head>
<body>
<div class="intro">To try a request, create an API token (<code>POST /api/docs/tokens</code>), press
<strong>Authorize</strong> and paste it under <code>apiToken</code>. Machine-readable:
<a href="/api/docs/openapi.json">openapi.json</a> · <a href="/api/docs/endpoints">endpoints</a> · <a href="/llms.txt">llms.txt</a></div>
<div id="swagger-ui"></div>
<script src="/api/docs/assets/swagger-ui-bundle.js"></script>
<script src="/api/docs/assets/docs.js"></script>
</body>
</html>
`,
  headers: SECURITY_HEADERS,
};

/** A non-JSON body with its content type. */
function raw(status: number, type: string, data: Buffer | string, headers: Record<string, string> = {}): Reply {
  return { status, headers: { 'Content-Type': type, ...headers }, stream: (res) => res.end(data) };
}

export const docsRoutes = (table: () => readonly Route[]): Route[] => [
  defineRoute({
    method: 'get',
    path: '/api/docs',
    summary: 'The API reference (Swagger UI), served from this server, with a try-it flow that takes an API token.',
    description:
      'This page: the API reference (Swagger UI, served from this server), with a try-it flow that takes an API token.',
    auth: 'public',
    responses: { 200: content('text/html', 'The HTML reference page.') },
    async handler() {
      return { status: 200, page: DOCS_PAGE, headers: { 'Cache-Control': 'no-cache' } };
    },
  }),

  defineRoute({
    method: 'get',
    path: '/api/docs/assets/:file',
    summary: "The reference page's scripts and styles (Swagger UI, from the swagger-ui-dist package).",
    description:
      "The reference page's scripts and styles (Swagger UI, from the swagger-ui-dist package, and this page's own).",
    auth: 'public',
    params: z.object({ file: z.enum(Object.keys(ASSETS) as [string, ...string[]]).describe('The file.') }),
    invalidParamsStatus: 404,
    responses: {
      200: content('text/javascript', 'A script or a style sheet (text/css).'),
    },
    async handler({ params }) {
      return raw(200, ASSETS[params.file]!.type, asset(params.file), { ...SECURITY_HEADERS, 'Cache-Control': 'public, max-age=3600' });
    },
  }),

  defineRoute({
    method: 'get',
    path: '/api/docs/openapi.json',
    summary: 'The OpenAPI 3.0.3 document of this interface (version 1.0.0), generated from the validation schemas.',
    description:
      'This document: OpenAPI 3.0.3, generated from the schemas the server validates requests with and the responses each route declares.',
    auth: 'public',
    responses: {
      200: content('application/json', 'The OpenAPI document.', z
          .record(z.string(), z.unknown())
          .describe('An OpenAPI 3.0.3 document (this one).')
          .meta({ example: { openapi: '3.0.3', info: { title: API_TITLE, version: '1.0.0' }, paths: {} } })),
    },
    async handler() {
      return raw(200, 'application/json; charset=utf-8', openApiDocument(table()).json, { 'Cache-Control': 'no-cache' });
    },
  }),

  defineRoute({
    method: 'get',
    path: '/api/docs/endpoints',
    summary: 'The endpoints this server serves, discovered from its router at start (deprecated ones flagged).',
    description:
      'The endpoints this server serves, as its router discovered them at start (endpoints it no longer serves are kept, flagged deprecated). Their ids are what the live test executor takes.',
    auth: 'public',
    responses: { 200: z.array(ApiEndpoint).describe('The endpoints, by path, then method.') },
    async handler({ db }) {
      const [row] = await db((tx) => tx<{ endpoints: unknown[] }[]>`select api.api_endpoints_list() as endpoints`);
      return { status: 200, body: row!.endpoints };
    },
  }),

  defineRoute({
    method: 'get',
    path: '/llms.txt',
    summary: 'A machine-readable index of the platform (the llms.txt convention).',
    description:
      'An index of the platform for language models (the llms.txt convention): what it is, then links to the docs, the credentials and every endpoint.',
    auth: 'public',
    responses: { 200: content('text/plain', 'Markdown: title, summary, sections of links.') },
    async handler({ services }) {
      return raw(200, 'text/plain; charset=utf-8', llmsTxt(table(), services.publicUrl), { 'Cache-Control': 'no-cache' });
    },
  }),

  liveTestRoute,
];

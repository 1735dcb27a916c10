// Developer docs over HTTP: the OpenAPI document (valid for a third-party
// validator, every route of the route table with its responses, both
// security schemes), the contract checker every api() call goes through, the
// Swagger UI page and its assets (served from here, strict CSP), the endpoint
// list discovered from the router, llms.txt, and bad input on each.
import SwaggerParser from '@apidevtools/swagger-parser';
import { describe, expect, it } from 'vitest';
import { routes } from '../../gateway/app.ts';
import { actionOf, openApiPath, sectionOf, undocumentedRoutes } from '../../gateway/http/openapi.ts';
import { api, baseUrl, publicUrl, registerUser } from '../helpers.ts';
import { checkContract } from '../support/contract.ts';
import { ISO, UUID } from '../support/formats.ts';

type Operation = { responses: Record<string, { content?: Record<string, { schema?: Record<string, unknown> }> }>; security?: unknown[]; parameters?: { name: string; in: string }[]; requestBody?: unknown };

async function openapi() {
  const res = await api('GET', '/api/docs/openapi.json');
  expect(res.status).toBe(200);
  expect(res.headers.get('content-type')).toMatch(/^application\/json/);
  return res.body as { openapi: string; info: { version: string; title: string }; paths: Record<string, Record<string, Operation>>; components: { schemas: Record<string, Record<string, unknown>>; securitySchemes: Record<string, Record<string, unknown>> } };
}

const operationOf = (doc: Awaited<ReturnType<typeof openapi>>, route: { method: string; path: string }) =>
  doc.paths[openApiPath(route.path)]?.[route.method];

describe('GET /api/docs/openapi.json', () => {
  it('is an OpenAPI 3.0.3 document, version 1.0.0, that @apidevtools/swagger-parser validates', async () => {
    const doc = await openapi();
    expect(doc.openapi).toBe('3.0.3');
    expect(doc.info.version).toBe('1.0.0');
    await expect(SwaggerParser.validate(structuredClone(doc) as never)).resolves.toBeTruthy();
  });

  it('has both security schemes; public routes need none, signed-in routes accept both', async () => {
    const doc = await openapi();
    expect(doc.components.securitySchemes.bearerAuth).toMatchObject({ type: 'http', scheme: 'bearer', bearerFormat: 'JWT' });
    expect(doc.components.securitySchemes.apiToken).toMatchObject({ type: 'http', scheme: 'bearer' });
    expect(operationOf(doc, { method: 'post', path: '/api/auth/login' })!.security).toEqual([]);
    expect(operationOf(doc, { method: 'get', path: '/api/mobile/profile' })!.security).toEqual([{ bearerAuth: [] }, { apiToken: [] }]);
  });

  it('describes every route of the route table: parameters, body, responses', async () => {
    const doc = await openapi();
    for (const route of routes) {
      const op = operationOf(doc, route);
      expect(op, `${route.method} ${route.path}`).toBeDefined();
      for (const name of route.path.match(/:([A-Za-z0-9_]+)/g) ?? []) {
        expect(op!.parameters?.some((p) => p.in === 'path' && p.name === name.slice(1)), `${route.path} ${name}`).toBe(true);
      }
      if (route.schemas.body) expect(op!.requestBody, `${route.method} ${route.path} body`).toBeDefined();
    }
    // Query parameters come from the zod schema (with their limits).
    const list = operationOf(doc, { method: 'get', path: '/api/mobile/communities' })!;
    expect(list.parameters!.map((p) => `${p.in}:${p.name}`).sort()).toEqual(['query:limit', 'query:offset']);
  });

  it('coverage: every route documents a success response and its error responses, each in one of the three error shapes', async () => {
    const missing = undocumentedRoutes(routes);
    expect(missing, `routes without \`responses\` (declare them in the route module): ${missing.join(', ')}`).toEqual([]);
    const doc = await openapi();
    const shapes = ['#/components/schemas/Error', '#/components/schemas/SimpleError', '#/components/schemas/FlaggedError'];
    for (const route of routes) {
      const op = operationOf(doc, route)!;
      const where = `${route.method.toUpperCase()} ${route.path}`;
      const statuses = Object.keys(op.responses).map(Number);
      expect(statuses.some((s) => s < 400), `${where}: a success response`).toBe(true);
      if (route.auth !== 'public') expect(statuses, `${where}: 401`).toContain(401);
      if (route.schemas.params) expect(statuses, `${where}: invalid path`).toContain(route.docs.invalidParamsStatus ?? route.docs.invalidStatus ?? 400);
      if (route.schemas.body || route.schemas.query) expect(statuses, `${where}: invalid input`).toContain(route.docs.invalidStatus ?? 400);
      for (const status of statuses.filter((s) => s >= 400)) {
        const content = op.responses[status]!.content!;
        if (route.docs.htmlErrors) {
          expect(Object.keys(content), `${where} ${status}`).toEqual(['text/html']);
          continue;
        }
        const schema = content['application/json']!.schema!;
        const text = JSON.stringify(schema);
        const isErrorShape =
          shapes.some((ref) => text.includes(ref)) ||
          // The Error shape narrowed to the route's codes.
          (JSON.stringify(Object.keys((schema.properties ?? {}) as object)) === '["error","message","details"]');
        expect(isErrorShape, `${where} ${status}: ${text}`).toBe(true);
      }
    }
  });

  it('names the error codes a route can give (Error shape)', async () => {
    const doc = await openapi();
    const op = operationOf(doc, { method: 'get', path: '/api/mobile/tasks/:id' })!;
    const schema = op.responses['404']!.content!['application/json']!.schema as { properties: { error: { enum: string[] } } };
    expect(schema.properties.error.enum).toEqual(['not_found', 'task_not_found']);
    const login = operationOf(doc, { method: 'post', path: '/api/auth/login' })!;
    expect(JSON.stringify(login.responses['401'])).toContain('invalid_credentials');
  });

  it('shared component schemas are never nullable themselves', async () => {
    const doc = await openapi();
    for (const [name, schema] of Object.entries(doc.components.schemas)) expect(schema.nullable, name).toBeUndefined();
    expect(Object.keys(doc.components.schemas)).toEqual(expect.arrayContaining(['Error', 'SimpleError', 'FlaggedError', 'Event', 'Task', 'ApiEndpoint']));
  });
});

describe('the contract check of api()', () => {
  it('fails a body that breaks the document, and a status the document does not give', async () => {
    await expect(
      checkContract(baseUrl, 'GET', '/api/mobile/profile', 200, 'application/json', { success: true, data: { id: 'nope' } }),
    ).rejects.toThrow(/does not match the document/);
    await expect(checkContract(baseUrl, 'GET', '/api/mobile/profile', 418, 'application/json', {})).rejects.toThrow(/not documented/);
    await expect(
      checkContract(baseUrl, 'GET', '/api/mobile/tasks/search?company=x', 422, 'application/json', { message: 'no error field' }),
    ).rejects.toThrow(/does not match/);
    // Fields the document does not name are refused too (the check is strict).
    await expect(
      checkContract(baseUrl, 'GET', '/api/mobile/tasks/search', 422, 'application/json', { error: 'x', surprise: 1 }),
    ).rejects.toThrow(/must NOT have additional properties/);
    // The same path template with a valid body passes.
    await expect(checkContract(baseUrl, 'GET', '/api/mobile/tasks/search', 422, 'application/json', { error: 'company is required' })).resolves.toBeUndefined();
  });

  it('passes real answers (every HTTP test goes through it)', async () => {
    const user = await registerUser('contract');
    const res = await api('GET', '/api/mobile/profile', { token: user.accessToken });
    expect(res.status).toBe(200);
  });
});

describe('GET /api/docs (Swagger UI)', () => {
  it('is an HTML page that loads only this server\'s scripts and styles, under a self-only CSP', async () => {
    const res = await api('GET', '/api/docs');
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toMatch(/^text\/html/);
    const csp = res.headers.get('content-security-policy')!;
    expect(csp).toContain("default-src 'none'");
    expect(csp).toContain("script-src 'self'");
    expect(csp).toContain("connect-src 'self'");
    expect(csp).not.toMatch(/https?:|\*|unsafe-eval/);
    expect(res.headers.get('x-content-type-options')).toBe('nosniff');
    const sources = [...res.text.matchAll(/(?:src|href)="([^"]+)"/g)].map((m) => m[1]!);
    expect(sources.length).toBeGreaterThan(3);
    for (const source of sources) expect(source, source).toMatch(/^(\/(?!\/)|data:)/);
    expect(res.text).not.toMatch(/<script>[^<]/);
  });

  it('serves the Swagger UI assets from swagger-ui-dist; anything else is 404', async () => {
    const js = await api('GET', '/api/docs/assets/swagger-ui-bundle.js');
    expect(js.status).toBe(200);
    expect(js.headers.get('content-type')).toMatch(/^text\/javascript/);
    expect(js.text).toContain('SwaggerUIBundle');
    const css = await api('GET', '/api/docs/assets/swagger-ui.css');
    expect(css.status).toBe(200);
    expect(css.headers.get('content-type')).toMatch(/^text\/css/);
    const init = await api('GET', '/api/docs/assets/docs.js');
    expect(init.text).toContain("url: '/api/docs/openapi.json'");
    for (const bad of ['package.json', '..%2Fpackage.json', '%2e%2e%2fswagger-ui.css', 'swagger-ui-bundle.js.map', 'x'.repeat(5000)]) {
      const res = await api('GET', `/api/docs/assets/${bad}`);
      expect(res.status, bad).toBe(404);
    }
  });
});

describe('GET /api/docs/endpoints', () => {
  it('lists every route the gateway serves as ApiEndpoint, discovered at start', async () => {
    const res = await api('GET', '/api/docs/endpoints');
    expect(res.status).toBe(200);
    const endpoints = res.body as Record<string, unknown>[];
    for (const route of routes) {
      const found = endpoints.find((e) => e.http_method === route.method.toUpperCase() && e.path === openApiPath(route.path));
      expect(found, `${route.method} ${route.path}`).toMatchObject({
        controller: sectionOf(route.path),
        action: actionOf(route.method, route.path),
        description: route.summary,
        deprecated: false,
        tags: [sectionOf(route.path)],
      });
      expect(found!.id).toMatch(UUID);
      expect(found!.discovered_at).toMatch(ISO);
      expect(found!.last_updated).toMatch(ISO);
    }
    // Routes outside the route table are discovered from the router too.
    expect(endpoints.find((e) => e.path === '/health')).toMatchObject({ http_method: 'GET', controller: 'Health' });
    // Sorted by path, then method.
    const keys = endpoints.map((e) => `${e.path} ${e.http_method}`);
    expect(keys).toEqual([...keys].sort((a, b) => (a < b ? -1 : a > b ? 1 : 0)));
  });

  it('needs no credential and ignores a bad one', async () => {
    const res = await api('GET', '/api/docs/endpoints?junk=1', { token: 'not-a-token' });
    expect(res.status).toBe(200);
  });
});

describe('GET /llms.txt', () => {
  it('follows the llms.txt convention and links the docs, the endpoints, the MCP endpoint and every route', async () => {
    const res = await api('GET', '/llms.txt');
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toMatch(/^text\/plain/);
    const lines = res.text.split('\n');
    expect(lines[0]).toMatch(/^# \S/);
    expect(lines.find((l) => l.startsWith('> '))).toBeDefined();
    for (const link of ['/api/docs/openapi.json', '/api/docs)', '/api/docs/endpoints', '/mcp', '/api/auth/login', '/api/docs/tokens']) {
      expect(res.text).toContain(`${publicUrl}${link}`);
    }
    expect(res.text).toMatch(/^## Docs$/m);
    expect(res.text).toMatch(/^## Auth$/m);
    for (const route of routes) expect(res.text).toContain(`${route.method.toUpperCase()} ${openApiPath(route.path)}`);
  });
});

describe('bad input on the docs routes', () => {
  it('answers 4xx, never 500', async () => {
    const cases: [string, string, number][] = [
      ['POST', '/api/docs', 404],
      ['DELETE', '/api/docs/openapi.json', 404],
      ['GET', '/api/docs/endpoints/x', 404],
      ['GET', '/api/docs/assets/', 404],
      ['GET', '/api/docs/assets/%ZZ', 400],
      ['PUT', '/llms.txt', 404],
    ];
    for (const [method, path, status] of cases) {
      const res = await api(method, path, { rawBody: method === 'GET' ? undefined : '{bad json' });
      expect(res.status, `${method} ${path}`).toBeLessThan(500);
      expect([status, 400, 404]).toContain(res.status);
    }
  });
});

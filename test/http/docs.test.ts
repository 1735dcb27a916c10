// Developer docs over HTTP: the OpenAPI document (valid for a third-party
// validator, every route of the route table with its responses, both
// security schemes), the contract checker every api() call goes through, the
// Swagger UI page and its assets (served from here, strict CSP), the endpoint
// list discovered from the router, llms.txt, and bad input on each.
import SwaggerParser from '@apidevtools/swagger-parser';
import { Ajv } from 'ajv';
import addFormatsModule from 'ajv-formats';
import { describe, expect, it } from 'vitest';
import { routes } from '../../gateway/app.ts';
import { ERROR_SHAPES, type ErrorShape } from '../../gateway/core/web/errors.ts';
import { actionOf, openApiPath, sectionOf, undocumentedRoutes } from '../../gateway/http/openapi.ts';
import { openApiDocument } from '../../gateway/routes/docs.ts';
import { api, baseUrl, publicUrl, registerUser } from '../helpers.ts';
import { checkContract, toJsonSchema } from '../support/contract.ts';
import { coverage } from '../support/openapi-coverage.ts';
import { ISO, UUID } from '../support/formats.ts';

// ajv-formats is CommonJS: its default export arrives as `.default` under ESM.
type AddFormats = (ajv: Ajv) => Ajv;
const addFormats = ((addFormatsModule as unknown as { default?: AddFormats }).default ?? addFormatsModule) as unknown as AddFormats;

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
    // A write answers the consistency token of read replicas (docs/operations/scaling.md#read-replicas); a read may send it
    // back, which its description says, but it is no parameter of every GET (it would change every generated read).
    expect(list.parameters!.map((p) => `${p.in}:${p.name}`).sort()).toEqual(['query:limit', 'query:offset']);
    const create = operationOf(doc, { method: 'post', path: '/api/mobile/tasks' })!;
    expect(create.parameters?.some((p) => p.name === 'X-Consistency-Token') ?? false).toBe(false);
    expect(Object.keys((create.responses[201] as { headers?: object }).headers ?? {})).toContain('X-Consistency-Token');
    expect(Object.keys((list.responses[200] as { headers?: object }).headers ?? {})).not.toContain('X-Consistency-Token');
  });

  // Statuses whose body is another protocol's own message, documented as such, not an error body:
  // ElectricSQL's 409 is the `must-refetch` control message its clients act on.
  const protocolAnswers: Record<string, number[]> = { 'GET /sync/v1/shape': [409] };

  it('coverage: every route documents a success response and its error responses, each in the error shape of its route group', async () => {
    const missing = undocumentedRoutes(routes);
    expect(missing, `routes without \`responses\` (declare them in the route module): ${missing.join(', ')}`).toEqual([]);
    const doc = await openapi();
    const ref = (shape: ErrorShape) => `#/components/schemas/${ERROR_SHAPES[shape].component}`;
    const shapes = (['default', 'simple', 'flagged'] as const).map(ref);
    const others = (Object.keys(ERROR_SHAPES) as ErrorShape[]).map(ref);
    for (const route of routes) {
      const op = operationOf(doc, route)!;
      const where = `${route.method.toUpperCase()} ${route.path}`;
      const statuses = Object.keys(op.responses).map(Number);
      expect(statuses.some((s) => s < 400), `${where}: a success response`).toBe(true);
      if (route.auth !== 'public') expect(statuses, `${where}: 401`).toContain(401);
      if (route.schemas.params) expect(statuses, `${where}: invalid path`).toContain(route.docs.invalidParamsStatus ?? route.docs.invalidStatus ?? 400);
      if (route.schemas.body || route.schemas.query) expect(statuses, `${where}: invalid input`).toContain(route.docs.invalidStatus ?? 400);
      for (const status of statuses.filter((s) => s >= 400 && !(protocolAnswers[where] ?? []).includes(s))) {
        const content = op.responses[status]!.content!;
        if (route.docs.htmlErrors) {
          expect(Object.keys(content), `${where} ${status}`).toEqual(['text/html']);
          continue;
        }
        const schema = content['application/json']!.schema!;
        const text = JSON.stringify(schema);
        // A route group with Supabase's body (/storage/v1, /auth/v1) answers it alone; a 400 can also be
        // the Error body of a request URL that is not valid percent-encoding, refused before any route is known.
        const group = route.docs.errorShape ?? 'default';
        const isErrorShape = group !== 'default'
          ? (text.includes(ref(group)) || (status === 400 && text.includes(ref('default')))) &&
            (status === 400 || others.every((other) => other === ref(group) || !text.includes(other)))
          : shapes.some((shape) => text.includes(shape)) ||
            // The Error shape narrowed to the route's codes.
            JSON.stringify(Object.keys((schema.properties ?? {}) as object)) === '["error","message","details"]';
        expect(isErrorShape, `${where} ${status}: ${text}`).toBe(true);
      }
    }
  });

  it('names the error codes a route can give: the shared Error component narrowed to them, each explained', async () => {
    const doc = await openapi();
    const op = operationOf(doc, { method: 'get', path: '/api/mobile/tasks/:id' })!;
    const schema = op.responses['404']!.content!['application/json']!.schema as { allOf: [{ $ref: string }, { properties: { error: { enum: string[] } } }] };
    expect(schema.allOf[0].$ref).toBe('#/components/schemas/Error');
    expect(schema.allOf[1].properties.error.enum).toEqual(['not_found', 'task_not_found']);
    expect((op.responses['404'] as { description: string }).description).toMatch(/`task_not_found`: No task with this id/);
    const login = operationOf(doc, { method: 'post', path: '/api/auth/login' })!;
    expect(JSON.stringify(login.responses['401'])).toContain('invalid_credentials');
    // Error.details is described exactly: validation issues, retry_after, the communities of last_manager_of_communities,
    // or the current object and its ETag of precondition_failed.
    const details = (doc.components.schemas.Error as { properties: { details: { properties: Record<string, unknown> } } }).properties.details;
    expect(Object.keys(details.properties).sort()).toEqual(['communities', 'current', 'etag', 'issues', 'retry_after']);
  });

  it('is exactly the document `npm run lint:openapi` lints (routes/docs.ts openApiDocument), with GET /health', async () => {
    const res = await api('GET', '/api/docs/openapi.json');
    expect(res.text).toBe(openApiDocument(routes).json);
    const doc = res.body as Awaited<ReturnType<typeof openapi>>;
    expect(Object.keys(doc.paths['/health']!)).toEqual(['get']);
    const health = await api('GET', '/health');
    expect(health.status).toBe(200);
    expect(health.body).toEqual({ status: 'ok', database: 'ok' });
  });

  it('has no `nullable` without a `type` (OpenAPI 3.0), tag descriptions, contact and licence', async () => {
    const doc = (await openapi()) as unknown as Record<string, unknown> & { info: Record<string, unknown>; tags: { name: string; description?: string }[] };
    const untyped: string[] = [];
    const walk = (node: unknown, where: string): void => {
      if (Array.isArray(node)) return node.forEach((item, i) => walk(item, `${where}/${i}`));
      if (!node || typeof node !== 'object') return;
      const object = node as Record<string, unknown>;
      if ('nullable' in object && object.type === undefined) untyped.push(where);
      for (const [key, value] of Object.entries(object)) walk(value, `${where}/${key}`);
    };
    walk(doc, '#');
    expect(untyped).toEqual([]);
    expect(doc.info.contact).toBeDefined();
    expect(doc.info.license).toBeDefined();
    expect(doc.tags.filter((tag) => !tag.description).map((tag) => tag.name)).toEqual([]);
  });

  it('types query parameters as what they mean: integers with bounds, enums; still parsed strictly from the query string', async () => {
    const doc = await openapi();
    type Param = { name: string; in: string; schema: Record<string, unknown> };
    const query = (method: string, path: string) =>
      Object.fromEntries(((operationOf(doc, { method, path })!.parameters ?? []) as Param[]).filter((p) => p.in === 'query').map((p) => [p.name, p.schema]));
    expect(query('get', '/api/mobile/communities').limit).toMatchObject({ type: 'integer', minimum: 1, maximum: 100, default: 50 });
    expect(query('get', '/api/mobile/communities').offset).toMatchObject({ type: 'integer', minimum: 0, default: 0 });
    expect(query('get', '/api/mobile/tasks').page).toMatchObject({ type: 'integer', minimum: 1, default: 1 });
    expect(query('get', '/api/mobile/tasks').limit).toMatchObject({ type: 'integer', minimum: 1, maximum: 100, default: 20 });
    expect(query('get', '/api/mobile/tasks').status).toMatchObject({ type: 'string', enum: ['pending', 'in_progress', 'completed'] });
    expect(query('get', '/api/mobile/tasks/:id/chain').depth).toMatchObject({ type: 'integer', minimum: 1, maximum: 1000, default: 50 });
    expect(query('get', '/api/docs/agent-calls').before_id).toMatchObject({ type: 'integer', minimum: 1 });
    const user = await registerUser('query-ints');
    for (const bad of ['abc', '1.5', '-1', '1e2', '0x10', '', '101']) {
      const res = await api('GET', `/api/mobile/communities?limit=${encodeURIComponent(bad)}`, { token: user.accessToken });
      expect(res.status, `limit=${bad}`).toBe(400);
    }
    expect((await api('GET', '/api/mobile/communities?limit=007&offset=0', { token: user.accessToken })).status).toBe(200);
    for (const bad of ['x', '0', '2.0', ' 1']) {
      const res = await api('GET', `/api/mobile/tasks?page=${encodeURIComponent(bad)}`, { token: user.accessToken });
      expect(res.status, `page=${bad}`).toBe(422);
    }
    // The task routes answer 422 with the Simple body: the message names the field.
    const simple = (await api('GET', '/api/mobile/tasks?limit=many', { token: user.accessToken })).body;
    expect(simple).toEqual({ error: 'query.limit: must be a whole number' });
  });

  it('shared component schemas are never nullable themselves', async () => {
    const doc = await openapi();
    for (const [name, schema] of Object.entries(doc.components.schemas)) expect(schema.nullable, name).toBeUndefined();
    expect(Object.keys(doc.components.schemas)).toEqual(expect.arrayContaining(['Error', 'SimpleError', 'FlaggedError', 'Event', 'Task', 'ApiEndpoint']));
  });
});

describe('what a client developer reads (descriptions and examples)', () => {
  it('every route has a description (the `description` of its defineRoute)', () => {
    const missing = routes.filter((route) => !route.docs.description?.trim()).map((route) => `${route.method.toUpperCase()} ${route.path}`);
    expect(missing, `routes without a description (add \`description\` to their defineRoute):\n${missing.join('\n')}`).toEqual([]);
  });

  it('every parameter, property and component has a description (written in the zod schemas: .describe() or .meta())', async () => {
    const doc = await openapi();
    const { parameters, properties, components } = coverage(doc as never);
    const missing = [
      ...parameters.missing.map((m) => `parameter ${m}`),
      ...properties.missing.map((m) => `property ${m}`),
      ...components.missing.map((m) => `component ${m}`),
    ];
    expect(missing, `without a description:\n${missing.join('\n')}`).toEqual([]);
  });

  it('every request body and success response has an example, and each example validates against its schema', async () => {
    const doc = await openapi();
    const { examples } = coverage(doc as never);
    expect(examples.missing, `without an example (a string or number field needs .meta({ example })):\n${examples.missing.join('\n')}`).toEqual([]);
    const ajv = new Ajv({ strict: false, allErrors: true });
    addFormats(ajv);
    const definitions = toJsonSchema(doc.components.schemas as never);
    const invalid: string[] = [];
    let checked = 0;
    const check = (where: string, media: { schema?: unknown; example?: unknown } | undefined) => {
      if (!media || media.example === undefined) return;
      checked++;
      const validate = ajv.compile({ ...(toJsonSchema(media.schema as never) as object), definitions });
      if (!validate(media.example)) invalid.push(`${where}: ${ajv.errorsText(validate.errors)}`);
    };
    for (const [path, item] of Object.entries(doc.paths)) {
      for (const [method, op] of Object.entries(item)) {
        const where = `${method.toUpperCase()} ${path}`;
        const body = (op.requestBody as { content?: Record<string, { schema?: unknown; example?: unknown }> } | undefined)?.content?.['application/json'];
        check(`${where} request body`, body);
        for (const [status, response] of Object.entries(op.responses)) check(`${where} ${status}`, response.content?.['application/json'] as never);
      }
    }
    expect(invalid, `examples that do not validate:\n${invalid.join('\n')}`).toEqual([]);
    expect(checked).toBeGreaterThan(80);
  });

  it('documents the Idempotency-Key header, and Idempotent-Replayed on the success answers, exactly where a route takes a key', async () => {
    const doc = await openapi();
    type Header = { name: string; in: string; required?: boolean; description?: string; schema?: { example?: unknown } };
    type Answer = { headers?: Record<string, { description?: string; schema?: unknown }> };
    const keyed = routes.filter((route) => route.docs.idempotencyKey);
    expect(keyed.map((route) => `${route.method} ${route.path}`)).toEqual(
      expect.arrayContaining(['post /api/mobile/tasks', 'post /api/v1/platform/webhooks', 'post /api/mobile/calendar/feed', 'delete /api/docs/tokens/:id']),
    );
    for (const route of routes) {
      const where = `${route.method.toUpperCase()} ${route.path}`;
      const op = operationOf(doc, route)!;
      const key = (op.parameters as Header[] | undefined)?.find((p) => p.in === 'header' && p.name === 'Idempotency-Key');
      const answers = Object.entries(op.responses as Record<string, Answer>).filter(([status]) => Number(status) < 400);
      if (!route.docs.idempotencyKey) {
        expect(key, where).toBeUndefined();
        for (const [status, answer] of answers) expect(answer.headers?.['Idempotent-Replayed'], `${where} ${status}`).toBeUndefined();
        continue;
      }
      expect(key, where).toBeDefined();
      expect(key!.required, where).toBe(false);
      expect(key!.description, where).toMatch(/retry/);
      expect(key!.schema?.example, where).toEqual(expect.any(String));
      expect(answers.length, where).toBeGreaterThan(0);
      for (const [status, answer] of answers) {
        expect(answer.headers?.['Idempotent-Replayed'], `${where} ${status}`).toMatchObject({ description: expect.stringMatching(/Idempotency-Key/), schema: { type: 'string', enum: ['true'] } });
      }
    }
  });

  it('try-it sends realistic values: a task created from the example has a meaningful title', async () => {
    const doc = await openapi();
    const op = operationOf(doc, { method: 'post', path: '/api/mobile/tasks' }) as Operation & { requestBody: { content: Record<string, { example: Record<string, unknown> }> } };
    const example = op.requestBody.content['application/json']!.example;
    const user = await registerUser('try-it');
    const res = await api('POST', '/api/mobile/tasks', { token: user.accessToken, body: example });
    expect(res.status).toBe(201);
    expect(res.body.task.meta.title).toBe('Call Acme about the renewal');
    // A hat from the example is of a real hat type; a token from the example is accepted.
    const hat = operationOf(doc, { method: 'post', path: '/api/mobile/hats' }) as typeof op;
    expect((await api('POST', '/api/mobile/hats', { token: user.accessToken, body: hat.requestBody.content['application/json']!.example })).status).toBe(201);
    const token = operationOf(doc, { method: 'post', path: '/api/docs/tokens' }) as typeof op;
    expect((await api('POST', '/api/docs/tokens', { token: user.accessToken, body: token.requestBody.content['application/json']!.example })).status).toBe(201);
    // The live test executor's example answer is a real status.
    const live = operationOf(doc, { method: 'post', path: '/api/docs/test' })!;
    expect((live.responses['200']!.content!['application/json'] as { example: { status: number } }).example.status).toBe(200);
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

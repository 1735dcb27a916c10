// The contract test: every JSON body an HTTP test receives through api() is
// validated against the OpenAPI document the gateway serves. The operation is
// found by method and path template; the body must match the schema of the
// response for its status (ajv, OpenAPI 3.0 schemas turned into JSON Schema:
// `nullable` → a null alternative). A status the operation does not document,
// or a body that does not match, fails the test. Operations that declare no
// success response yet (routes without `responses`) are skipped here: the
// coverage test in docs.test.ts names them.
import { Ajv, type ValidateFunction } from 'ajv';
import addFormatsModule from 'ajv-formats';

type Json = null | boolean | number | string | Json[] | { [key: string]: Json };
type JsonObject = { [key: string]: Json };

interface Operation {
  template: string;
  pattern: RegExp;
  literalSegments: number;
  method: string;
  responses: JsonObject;
}

interface Contract {
  operations: Operation[];
  components: JsonObject;
  validators: Map<string, ValidateFunction>;
  ajv: Ajv;
}

const METHODS = ['get', 'post', 'put', 'patch', 'delete'];

/**
 * OpenAPI 3.0 schema → JSON Schema (draft 7) for ajv: nullable, and refs into
 * `definitions`. `open`: a member of an `allOf`, which narrows a schema
 * another member closes (an Error whose `error` is one of a route's codes).
 */
export function toJsonSchema(schema: Json, open = false): Json {
  if (Array.isArray(schema)) return schema.map((item) => toJsonSchema(item));
  if (schema === null || typeof schema !== 'object') return schema;
  const out: JsonObject = {};
  for (const [key, value] of Object.entries(schema)) {
    if (key === '$ref' && typeof value === 'string') out.$ref = value.replace('#/components/schemas/', '#/definitions/');
    else if (key === 'properties' || key === 'definitions') {
      out[key] = Object.fromEntries(Object.entries(value as JsonObject).map(([k, v]) => [k, toJsonSchema(v)]));
    } else if (key === 'allOf' && Array.isArray(value)) out.allOf = value.map((member) => toJsonSchema(member, true));
    else if (key !== 'nullable' && key !== 'example' && key !== 'discriminator') out[key] = toJsonSchema(value);
  }
  // Strict: an object names all its fields (zod-to-openapi leaves additionalProperties
  // open; the contract test closes it so that an undocumented field is found).
  if (!open && out.type === 'object' && out.properties && out.additionalProperties === undefined) out.additionalProperties = false;
  if (schema.nullable !== true) return out;
  const composed = out.allOf !== undefined || out.anyOf !== undefined || out.oneOf !== undefined;
  if (typeof out.type === 'string' && !composed) {
    out.type = [out.type, 'null'];
    if (Array.isArray(out.enum) && !out.enum.includes(null)) out.enum = [...out.enum, null];
    return out;
  }
  if (Object.keys(out).length === 0) return out;
  return { anyOf: [out, { type: 'null' }] };
}

// ajv-formats is CommonJS: its default export arrives as `.default` under ESM.
type AddFormats = (ajv: Ajv) => Ajv;
const addFormats = ((addFormatsModule as unknown as { default?: AddFormats }).default ?? addFormatsModule) as unknown as AddFormats;

let contract: Promise<Contract> | undefined;

function load(baseUrl: string): Promise<Contract> {
  contract ??= (async () => {
    const res = await fetch(`${baseUrl}/api/docs/openapi.json`);
    if (res.status !== 200) throw new Error(`contract: GET /api/docs/openapi.json answered ${res.status}`);
    const document = (await res.json()) as JsonObject;
    const operations: Operation[] = [];
    for (const [template, item] of Object.entries(document.paths as JsonObject)) {
      const segments = template.split('/');
      // A last-segment wildcard (`x-path-wildcard`: an object path) holds slashes.
      const wildcard = METHODS.map((m) => ((item as JsonObject)[m] as JsonObject | undefined)?.['x-path-wildcard']).find((w) => typeof w === 'string');
      // A parameter may take part of a segment (`/e/{shortlink}.ics`).
      const pattern = new RegExp(
        `^${segments
          .map((s) =>
            s.replace(/\{[^}]+\}|[^{]+/g, (part) =>
              part === `{${wildcard}}` ? '.+' : part.startsWith('{') ? '[^/]+' : part.replace(/[.*+?^$()|[\]\\]/g, '\\$&'),
            ),
          )
          .join('/')}$`,
      );
      for (const method of METHODS) {
        const operation = (item as JsonObject)[method] as JsonObject | undefined;
        if (!operation) continue;
        operations.push({
          template,
          pattern,
          method,
          literalSegments: segments.filter((s) => !/^\{.+\}$/.test(s)).length,
          responses: operation.responses as JsonObject,
        });
      }
    }
    // Literal segments first: /tasks/search before /tasks/{id}.
    operations.sort((a, b) => b.literalSegments - a.literalSegments);
    const components = toJsonSchema(((document.components as JsonObject)?.schemas ?? {}) as Json) as JsonObject;
    const ajv = new Ajv({ strict: false, allErrors: true });
    addFormats(ajv);
    return { operations, components, ajv, validators: new Map() };
  })();
  return contract;
}

const documentsSuccess = (responses: JsonObject) => Object.keys(responses).some((status) => Number(status) < 400);

/**
 * Throws when a response breaks the document. `contentType` and `body` are the
 * response's; `body` is undefined when it is not JSON.
 */
export async function checkContract(
  baseUrl: string,
  method: string,
  url: string,
  status: number,
  contentType: string | null,
  body: unknown,
): Promise<void> {
  const { operations, components, ajv, validators } = await load(baseUrl);
  const path = url.split('?')[0]!;
  const lower = method.toLowerCase();
  const operation = operations.find((op) => op.method === lower && op.pattern.test(path));
  if (!operation || !documentsSuccess(operation.responses)) return;
  const where = `${method.toUpperCase()} ${operation.template} → ${status}`;
  const response = operation.responses[String(status)] as JsonObject | undefined;
  if (!response) throw new Error(`contract: ${where} is not documented (documented: ${Object.keys(operation.responses).join(', ')})`);
  const isJson = contentType !== null && /\bjson\b/.test(contentType);
  if (!isJson || body === undefined) return;
  const media = (response.content as JsonObject | undefined)?.['application/json'] as JsonObject | undefined;
  if (!media) throw new Error(`contract: ${where} answered JSON, but the document gives no JSON body for it`);
  const key = `${lower} ${operation.template} ${status}`;
  let validate = validators.get(key);
  if (!validate) {
    validate = ajv.compile({ ...(toJsonSchema(media.schema ?? {}) as JsonObject), definitions: components });
    validators.set(key, validate);
  }
  if (!validate(body)) {
    const problems = (validate.errors ?? []).map((e) => `${e.instancePath || '(body)'} ${e.message}${e.params ? ` ${JSON.stringify(e.params)}` : ''}`);
    throw new Error(`contract: ${where}: the body does not match the document:\n  ${problems.slice(0, 8).join('\n  ')}\nbody: ${JSON.stringify(body).slice(0, 1500)}`);
  }
}

/**
 * fetch for an SDK's client (supabase-js' `global.fetch`): every answer to a
 * path under `prefix` is checked against the OpenAPI document served at
 * `baseUrl`; `onRequest` hears each request (`GET /auth/v1/user`), for tests
 * that count what a client asks.
 */
export function contractCheckedFetch(baseUrl: string, prefix: string, onRequest?: (request: string) => void): typeof fetch {
  return async (input, init) => {
    const url = new URL(typeof input === 'string' ? input : input instanceof URL ? input.href : input.url);
    onRequest?.(`${init?.method ?? 'GET'} ${url.pathname}`);
    const res = await fetch(input, init);
    const text = await res.clone().text();
    let body: unknown;
    try {
      body = text ? JSON.parse(text) : undefined;
    } catch {
      body = undefined;
    }
    if (url.pathname.startsWith(prefix)) {
      await checkContract(baseUrl, init?.method ?? 'GET', url.pathname + url.search, res.status, res.headers.get('content-type'), body);
    }
    return res;
  };
}

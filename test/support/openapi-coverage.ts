// What a client developer reads in the OpenAPI document, counted: which
// operations, parameters and schema properties have a description, and which
// request bodies and success responses carry an example. The docs test fails
// with the list of what is missing; `node --import tsx
// test/support/openapi-coverage.ts FILE` prints the counts of a saved document.
import fs from 'node:fs';

type Json = null | boolean | number | string | Json[] | { [key: string]: Json };
type Node = { [key: string]: Json };

const METHODS = ['get', 'put', 'post', 'delete', 'patch'];
const isNode = (value: unknown): value is Node => typeof value === 'object' && value !== null && !Array.isArray(value);

export interface Coverage {
  operations: { total: number; missing: string[] };
  parameters: { total: number; missing: string[] };
  properties: { total: number; missing: string[] };
  components: { total: number; missing: string[] };
  /** Request bodies and success (2XX) JSON responses. */
  examples: { total: number; missing: string[] };
}

/** A property is described by its own description, or by the component it references. */
function described(schema: Json): boolean {
  if (!isNode(schema)) return false;
  if (typeof schema.description === 'string' && schema.description.trim() !== '') return true;
  if (typeof schema.$ref === 'string') return true;
  const members = schema.allOf ?? schema.anyOf ?? schema.oneOf;
  return Array.isArray(members) && members.length === 1 && isNode(members[0]) && typeof members[0].$ref === 'string';
}

/** Every property of a schema, recursively (not through references: components are counted once, on their own). */
function walkProperties(schema: Json, where: string, visit: (where: string, property: Json) => void): void {
  if (Array.isArray(schema)) return schema.forEach((item, i) => walkProperties(item, `${where}[${i}]`, visit));
  if (!isNode(schema)) return;
  if (isNode(schema.properties)) {
    for (const [name, property] of Object.entries(schema.properties)) {
      visit(`${where}.${name}`, property);
      walkProperties(property, `${where}.${name}`, visit);
    }
  }
  for (const key of ['items', 'additionalProperties']) if (isNode(schema[key])) walkProperties(schema[key], `${where}[]`, visit);
  for (const key of ['allOf', 'anyOf', 'oneOf']) if (Array.isArray(schema[key])) walkProperties(schema[key], where, visit);
}

export function coverage(document: Node): Coverage {
  const result: Coverage = {
    operations: { total: 0, missing: [] },
    parameters: { total: 0, missing: [] },
    properties: { total: 0, missing: [] },
    components: { total: 0, missing: [] },
    examples: { total: 0, missing: [] },
  };
  const property = (where: string, schema: Json) => {
    result.properties.total++;
    if (!described(schema)) result.properties.missing.push(where);
  };
  for (const [path, item] of Object.entries(document.paths as Node)) {
    for (const method of METHODS) {
      const operation = (item as Node)[method];
      if (!isNode(operation)) continue;
      const name = `${method.toUpperCase()} ${path}`;
      result.operations.total++;
      if (typeof operation.description !== 'string' || !operation.description.trim()) result.operations.missing.push(name);
      for (const parameter of (operation.parameters ?? []) as Node[]) {
        result.parameters.total++;
        if (typeof parameter.description !== 'string' || !parameter.description.trim()) {
          result.parameters.missing.push(`${name} ${parameter.in} ${parameter.name}`);
        }
      }
      const body = ((operation.requestBody as Node | undefined)?.content as Node | undefined)?.['application/json'] as Node | undefined;
      if (body) {
        walkProperties(body.schema ?? null, `${name} body`, property);
        result.examples.total++;
        if (body.example === undefined) result.examples.missing.push(`${name} request body`);
      }
      for (const [status, response] of Object.entries(operation.responses as Node)) {
        const media = ((response as Node).content as Node | undefined)?.['application/json'] as Node | undefined;
        if (!media) continue;
        walkProperties(media.schema ?? null, `${name} ${status}`, property);
        if (Number(status) >= 400) continue;
        result.examples.total++;
        if (media.example === undefined) result.examples.missing.push(`${name} ${status}`);
      }
    }
  }
  for (const [name, schema] of Object.entries(((document.components as Node | undefined)?.schemas ?? {}) as Node)) {
    result.components.total++;
    if (!isNode(schema) || typeof schema.description !== 'string' || !schema.description.trim()) result.components.missing.push(name);
    walkProperties(schema, name, property);
  }
  return result;
}

/** "described/total" per kind. */
export function counts(c: Coverage): Record<keyof Coverage, string> {
  return Object.fromEntries(
    Object.entries(c).map(([kind, { total, missing }]) => [kind, `${total - missing.length}/${total}`]),
  ) as Record<keyof Coverage, string>;
}

if (process.argv[1] === import.meta.filename) {
  const c = coverage(JSON.parse(fs.readFileSync(process.argv[2]!, 'utf8')) as Node);
  console.log(JSON.stringify(counts(c)));
  if (process.argv.includes('--list')) for (const [kind, { missing }] of Object.entries(c)) for (const m of missing) console.log(`${kind}: ${m}`);
}

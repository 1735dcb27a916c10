// Examples for the OpenAPI document, from the zod schemas themselves: a
// schema's own `example` (.meta({ example })) wins; otherwise an object's
// example is made of its fields' examples, an array's of its item's, and a
// default, literal, enum or boolean is its own example. Strings and numbers
// need an example written beside them (a uuid, a date-time, an e-mail address
// or a URL gets a plain one), so that what Swagger UI's try-it sends, and
// what a generator shows, is realistic. A schema for which no complete
// example can be made names the fields that lack one (the docs test lists them).
import { z } from 'zod';

export interface Example {
  /** The example; undefined when some required field has none. */
  value?: unknown;
  /** Fields (dot paths) with no example, where one is needed. */
  missing: string[];
}

const FORMAT_EXAMPLES: Record<string, unknown> = {
  uuid: '5f0c8a9e-3b1d-4c62-9a7e-2d4b6f8a1c03',
  guid: '5f0c8a9e-3b1d-4c62-9a7e-2d4b6f8a1c03',
  datetime: '2026-05-14T18:30:00.000Z',
  email: 'ada@example.com',
  url: 'https://example.com/',
};

type Def = { type: string } & Record<string, unknown>;
const defOf = (schema: z.ZodType): Def => (schema as unknown as { _zod: { def: Def } })._zod.def;

/** The example of a schema, or the fields that lack one. */
export function exampleOf(schema: z.ZodType, path = ''): Example {
  const own = schema.meta()?.example;
  if (own !== undefined) return { value: structuredClone(own), missing: [] };
  const def = defOf(schema);
  const here = path || '(body)';
  switch (def.type) {
    case 'optional':
    case 'nullable':
    case 'readonly':
    case 'nonoptional':
    case 'catch':
    case 'prefault':
      return exampleOf(def.innerType as z.ZodType, path);
    case 'default': {
      const inner = exampleOf(def.innerType as z.ZodType, path);
      if (inner.value !== undefined) return inner;
      const fallback = typeof def.defaultValue === 'function' ? (def.defaultValue as () => unknown)() : def.defaultValue;
      return { value: fallback, missing: [] };
    }
    case 'pipe': {
      // z.preprocess: the documented schema is the output; a transform: the input.
      const input = def.in as z.ZodType;
      return exampleOf(defOf(input).type === 'transform' ? (def.out as z.ZodType) : input, path);
    }
    case 'lazy':
      return exampleOf((def.getter as () => z.ZodType)(), path);
    case 'object': {
      const value: Record<string, unknown> = {};
      const missing: string[] = [];
      for (const [key, field] of Object.entries((schema as z.ZodObject).shape as Record<string, z.ZodType>)) {
        const example = exampleOf(field, path ? `${path}.${key}` : key);
        if (example.value !== undefined) value[key] = example.value;
        else if (!field.safeParse(undefined).success) missing.push(...example.missing);
      }
      return missing.length ? { missing } : { value, missing: [] };
    }
    case 'array': {
      const item = exampleOf(def.element as z.ZodType, `${path}[]`);
      return item.value === undefined ? item : { value: [item.value], missing: [] };
    }
    case 'union': {
      const options = def.options as z.ZodType[];
      const results = options.map((option) => exampleOf(option, path));
      return results.find((result) => result.value !== undefined) ?? { missing: results.flatMap((result) => result.missing) };
    }
    case 'intersection': {
      const left = exampleOf(def.left as z.ZodType, path);
      const right = exampleOf(def.right as z.ZodType, path);
      if (left.value === undefined || right.value === undefined) return { missing: [...left.missing, ...right.missing] };
      return { value: { ...(left.value as object), ...(right.value as object) }, missing: [] };
    }
    case 'literal':
      return { value: (def.values as unknown[])[0], missing: [] };
    case 'enum':
      return { value: Object.values(def.entries as Record<string, unknown>)[0], missing: [] };
    case 'boolean':
      return { value: true, missing: [] };
    case 'null':
      return { value: null, missing: [] };
    case 'string': {
      const format = (schema as z.ZodString).format;
      if (format && format in FORMAT_EXAMPLES) return { value: FORMAT_EXAMPLES[format], missing: [] };
      return { missing: [here] };
    }
    default:
      return { missing: [here] };
  }
}

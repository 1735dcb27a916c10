// JSON built by SQL, passed through as text: a list's jsonb goes out as the
// text Postgres wrote, without JSON.parse into objects and JSON.stringify back.

/**
 * `{...fields, ...object}` as JSON text, where `objectText` is a JSON object
 * as text (e.g. `jsonb::text`). `fields` come first; `objectText` must not
 * repeat their keys.
 */
export function jsonObjectWith(fields: Record<string, unknown>, objectText: string): string {
  const head = JSON.stringify(fields);
  const body = objectText.trim();
  if (!body.startsWith('{') || !body.endsWith('}')) throw new Error('not a JSON object');
  if (/^\{\s*\}$/.test(body)) return head;
  if (head === '{}') return body;
  return `${head.slice(0, -1)},${body.slice(1)}`;
}

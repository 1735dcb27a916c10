// Versions of single objects, for offline writes (docs/offline-writes.md): every
// single-object answer of the REST interface carries an ETag, the object's
// version as SQL computes it (api.etag: its updated_at in microseconds), and
// PATCH and DELETE take If-Match. The comparison and the 412 with the current
// object are SQL's (app.check_if_match, in the write's own transaction, the row
// locked); this module only reads the header and writes the answer's.
import { z } from 'zod';
import { listedTags } from './conditional.ts';

/** An entity tag (RFC 9110 8.8.3): optionally weak, quoted, without a quote inside. */
const ENTITY_TAG = String.raw`(?:W/)?"[\x21\x23-\x7e\x80-\xff]*"`;
/** `*`, or a comma-separated list of at most 50 entity tags. */
const IF_MATCH = new RegExp(String.raw`^[ \t]*(?:\*|${ENTITY_TAG}(?:[ \t]*,[ \t]*${ENTITY_TAG}){0,49})[ \t]*$`);

/** The If-Match request header of a write of a single object: validated (a malformed one is the route's 400 or 422). */
export const IfMatchHeaders = z.object({
  'if-match': z
    .string()
    .max(4096)
    .regex(IF_MATCH, { message: 'must be * or a comma-separated list of entity tags ("...")' })
    .optional()
    .describe(
      'The ETag of the version this write was made on (from the GET or the last write). When the object has changed since, ' +
        'nothing is written and the answer is 412 `precondition_failed` with the current object and its ETag in `details`. ' +
        '`*` matches any version. Weak tags (`W/"..."`) never match. Absent: the write applies to whatever is current.',
    )
    .meta({ example: '"1765148400123456"' }),
});

/** The tags of If-Match, for the SQL function's if_match parameter (null: no header, no condition). */
export function ifMatchTags(header: string | undefined): string[] | null {
  return listedTags(header);
}

/** A row of a single-object answer with its version (`etag`, selected beside it as api.etag(updated_at)). */
export type Versioned<T = Record<string, unknown>> = T & { etag: string };

/** A row answered with its version (`etag`, as api.etag made it), split into the object and the answer's ETag header. */
export function versioned<T extends { etag: string | null }>(row: T): { object: Omit<T, 'etag'>; headers: Record<string, string> } {
  const { etag, ...object } = row;
  return { object, headers: etagHeader(etag) };
}

/** The answer's ETag header for a version (none when there is none). */
export function etagHeader(etag: string | null | undefined): Record<string, string> {
  return etag ? { ETag: etag } : {};
}

// Conditional requests (RFC 9110 13.1), for every route that answers
// validators: the entity tags of If-None-Match and If-Match, and the date of
// If-Modified-Since. A GET compares weakly (If-None-Match: a `W/` tag names
// the same representation); a write compares strongly (If-Match: a weak tag
// never matches). The validators themselves are SQL's or the byte store's
// (an object's ETag, a calendar's); this module only reads the headers.

/** At most this many tags of one header are read (a longer list is cut). */
const MAX_TAGS = 50;

/** The entity tags a header lists, as sent (`W/` kept; `*` kept), or null when it is absent. */
export function listedTags(header: string | undefined): string[] | null {
  if (header === undefined) return null;
  const tags: string[] = [];
  for (const match of header.matchAll(/\s*(\*|(?:W\/)?"[^"]*")\s*(?:,|$)/g)) {
    tags.push(match[1]!);
    if (tags.length >= MAX_TAGS) break;
  }
  return tags;
}

/**
 * The entity tags of If-None-Match (`W/` dropped: a GET compares weakly;
 * `*` kept), or null when the header is absent.
 */
export function entityTags(header: string | undefined): string[] | null {
  return listedTags(header)?.map((tag) => (tag.startsWith('W/') ? tag.slice(2) : tag)) ?? null;
}

/** Whether If-None-Match names `etag` (weak comparison, `*` included): the answer is 304. */
export function noneMatch(ifNoneMatch: string | undefined, etag: string): boolean {
  const tags = entityTags(ifNoneMatch);
  return tags !== null && (tags.includes('*') || tags.includes(etag));
}

/**
 * Whether a write's If-Match lets it go ahead on a representation whose
 * ETag is `etag` (null: there is none): no header, `*` when there is one, or
 * a tag equal to it by strong comparison (a weak tag never matches). False:
 * the answer is 412.
 */
export function ifMatch(header: string | undefined, etag: string | null): boolean {
  const tags = listedTags(header);
  if (tags === null) return true;
  if (etag === null) return false;
  return tags.includes('*') || (!etag.startsWith('W/') && tags.includes(etag));
}

/** An HTTP date (If-Modified-Since), or null when absent or not a date. */
export function httpDate(header: string | undefined): Date | null {
  if (header === undefined) return null;
  const date = new Date(header);
  return Number.isNaN(date.getTime()) ? null : date;
}

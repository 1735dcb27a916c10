// What hostile or malformed input gets, decided once for every route (the
// pipeline in route.ts and app.ts call these; SQLSTATE backstops are in
// gateway/core/web/errors.ts):
//
// - A path segment whose percent-encoding is not valid UTF-8 (e.g. the bytes
//   of a lone surrogate, `%ED%A0%80`, or a stray `%`) is decoded leniently,
//   as browsers do: each bad byte becomes U+FFFD. The route's own validation
//   then refuses it like any other bad value (an id: 404; a page: its HTML
//   error page), instead of failing with a URIError.
// - Strings Postgres cannot store (a NUL character, a lone UTF-16 surrogate),
//   in path parameters, query values or anywhere in a JSON body (keys too),
//   are refused by the route with its invalid-input status (400 or 422, 404
//   for path ids) before any validation or SQL runs.
// - JSON nested deeper than MAX_JSON_DEPTH is refused the same way (jsonb and
//   the serialisers recurse).
// - Numbers JSON.parse turns into Infinity (`1e999`) are refused the same way.
// Repeated query keys (arrays), wrong JSON types, oversized strings and
// numbers out of range are each route's zod schema's business (400/422).
import type { Duplex } from 'node:stream';
import type { ErrorCode } from './error-codes.ts';
import { defaultCode, HttpError } from './errors.ts';

export const MAX_JSON_DEPTH = 64;

const lenient = new TextDecoder('utf-8', { fatal: false });

/** Percent-decodes `segment`, turning invalid UTF-8 into U+FFFD and a stray `%` into itself. */
function decodeLeniently(segment: string): string {
  const bytes: number[] = [];
  for (let i = 0; i < segment.length; i++) {
    const ch = segment[i]!;
    if (ch === '%' && /^[0-9A-Fa-f]{2}$/.test(segment.slice(i + 1, i + 3))) {
      bytes.push(parseInt(segment.slice(i + 1, i + 3), 16));
      i += 2;
    } else {
      bytes.push(...Buffer.from(ch, 'utf8'));
    }
  }
  return lenient.decode(Uint8Array.from(bytes));
}

/** The path with undecodable segments re-encoded, so that every path parameter decodes. */
export function repairPath(pathname: string): string {
  if (!pathname.includes('%')) return pathname;
  return pathname
    .split('/')
    .map((segment) => {
      if (!segment.includes('%')) return segment;
      try {
        decodeURIComponent(segment);
        return segment;
      } catch {
        return encodeURIComponent(decodeLeniently(segment));
      }
    })
    .join('/');
}

// A NUL, or a surrogate not part of a pair.
const UNSTORABLE = /\u0000|[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

function problemWith(value: unknown): { path: string[]; message: string } | undefined {
  const stack: { value: unknown; path: string[] }[] = [{ value, path: [] }];
  while (stack.length > 0) {
    const { value: v, path } = stack.pop()!;
    if (typeof v === 'string') {
      if (UNSTORABLE.test(v)) return { path, message: 'must not contain NUL characters or unpaired surrogates' };
    } else if (typeof v === 'number') {
      if (!Number.isFinite(v)) return { path, message: 'number out of range' };
    } else if (v !== null && typeof v === 'object') {
      if (path.length >= MAX_JSON_DEPTH) return { path, message: `nested deeper than ${MAX_JSON_DEPTH} levels` };
      for (const [key, child] of Object.entries(v)) {
        if (UNSTORABLE.test(key)) return { path: [...path, key.replace(UNSTORABLE, '?')], message: 'key must not contain NUL characters or unpaired surrogates' };
        stack.push({ value: child, path: [...path, key] });
      }
    }
  }
  return undefined;
}

/**
 * Refuses input no route can store (see the top of this file) with `status`
 * and the same details shape as a validation failure.
 */
export function assertStorable(value: unknown, where: string, status: number): void {
  const problem = problemWith(value);
  if (!problem) return;
  const path = [where, ...problem.path].join('.');
  throw new HttpError(status, defaultCode(status), `${path}: ${problem.message}`, { issues: [{ path, message: problem.message }] });
}

/**
 * Requests Node's HTTP parser refuses before the gateway sees them (headers over
 * 16 KB, malformed request lines or headers) get a JSON Error body too: the
 * server's clientError handler (Fastify's clientErrorHandler, gateway/app.ts).
 */
export function answerClientError(err: NodeJS.ErrnoException, socket: Duplex): void {
  if (!socket.writable || (socket as Duplex & { _httpMessage?: unknown })._httpMessage) {
    socket.destroy();
    return;
  }
  const status = err.code === 'HPE_HEADER_OVERFLOW' ? 431 : err.code === 'HPE_CHUNK_EXTENSIONS_OVERFLOW' ? 413 : 400;
  const reason = status === 431 ? 'Request Header Fields Too Large' : status === 413 ? 'Payload Too Large' : 'Bad Request';
  const code: ErrorCode = status === 431 ? 'headers_too_large' : defaultCode(status);
  const body = JSON.stringify({
    error: code,
    message: status === 431 ? 'the request line and headers are larger than 16 KB' : 'the request is malformed',
    details: null,
  });
  socket.end(
    `HTTP/1.1 ${status} ${reason}\r\nContent-Type: application/json; charset=utf-8\r\nContent-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`,
  );
}

// CORS for browser clients (supabase-js in a web app, the docs page's
// try-it). CORS_ORIGINS lists the allowed origins (comma-separated, e.g.
// `https://app.example.com,http://localhost:5173`); unset, no CORS headers
// are sent and browsers keep cross-origin calls out.
//
// - A listed origin is echoed in Access-Control-Allow-Origin, with
//   Access-Control-Allow-Credentials: true and Vary: Origin.
// - `*` allows any origin, but never with credentials (the browser then sends
//   no cookies; bearer tokens in Authorization still work).
// - Preflights (OPTIONS with Access-Control-Request-Method) are answered 204
//   before any route; from an origin not allowed, 204 without
//   Access-Control-Allow-Origin (the browser refuses).
//
// @fastify/cors sends them (gateway/app.ts registers it when CORS_ORIGINS is
// set); this says, per request, with which options.
import type { FastifyCorsOptions, FastifyCorsOptionsDelegateCallback } from '@fastify/cors';

const METHODS = 'GET, POST, PUT, PATCH, DELETE, OPTIONS';
const EXPOSED = 'X-Request-Id, Retry-After, Location, Content-Range, WWW-Authenticate, Idempotent-Replayed, ETag, Last-Modified, X-Consistency-Token';
const DEFAULT_HEADERS = 'authorization, content-type, apikey, x-client-info, x-request-id, last-event-id, idempotency-key, if-none-match, x-consistency-token';
const HEADER_LIST = /^[A-Za-z0-9!#$%&'*+.^_`|~-]+(\s*,\s*[A-Za-z0-9!#$%&'*+.^_`|~-]+)*$/;
/** Matches no origin: the request gets no Access-Control-Allow-Origin. */
const NONE = /(?!)/;

/** @fastify/cors's options for one request, from CORS_ORIGINS. */
export function corsDelegator(origins: string[]): FastifyCorsOptionsDelegateCallback {
  const any = origins.includes('*');
  const allowed = new Set(origins.filter((o) => o !== '*').map((o) => o.toLowerCase()));
  return (req, callback) => {
    const origin = req.headers.origin;
    const listed = typeof origin === 'string' && allowed.has(origin.toLowerCase());
    const requested = req.headers['access-control-request-headers'];
    const options: FastifyCorsOptions = {
      origin: listed ? origin : any && origin ? '*' : NONE,
      credentials: listed,
      exposedHeaders: listed || (any && origin) ? EXPOSED : (null as unknown as string),
      methods: METHODS,
      allowedHeaders: typeof requested === 'string' && requested.length <= 1000 && HEADER_LIST.test(requested.trim()) ? requested.trim() : DEFAULT_HEADERS,
      maxAge: 600,
      optionsSuccessStatus: 204,
      strictPreflight: false,
    };
    // Per request: @fastify/cors then sends Vary: Origin on every answer.
    callback(null, options);
  };
}

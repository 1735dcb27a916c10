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
//   here, before any route; from an origin not allowed, 204 without CORS
//   headers (the browser refuses).
import type { IncomingMessage, ServerResponse } from 'node:http';

const METHODS = 'GET, POST, PUT, PATCH, DELETE, OPTIONS';
const EXPOSED = 'X-Request-Id, Retry-After, Location, Content-Range, WWW-Authenticate, Idempotent-Replayed, ETag, Last-Modified, X-Consistency-Token';
const HEADER_LIST = /^[A-Za-z0-9!#$%&'*+.^_`|~-]+(\s*,\s*[A-Za-z0-9!#$%&'*+.^_`|~-]+)*$/;

/** Sets the CORS headers of a request; true when it answered it (a preflight). */
export function cors(origins: string[]): (req: IncomingMessage, res: ServerResponse) => boolean {
  const any = origins.includes('*');
  const allowed = new Set(origins.filter((o) => o !== '*').map((o) => o.toLowerCase()));
  const answer = (res: ServerResponse) => {
    res.statusCode = 204;
    res.end();
    return true;
  };
  return (req, res) => {
    if (origins.length === 0) return false;
    const origin = req.headers.origin;
    const preflight = req.method === 'OPTIONS' && req.headers['access-control-request-method'] !== undefined;
    res.appendHeader('Vary', 'Origin');
    if (typeof origin === 'string' && origin !== '') {
      if (allowed.has(origin.toLowerCase())) {
        res.setHeader('Access-Control-Allow-Origin', origin);
        res.setHeader('Access-Control-Allow-Credentials', 'true');
      } else if (any) {
        res.setHeader('Access-Control-Allow-Origin', '*');
      } else if (preflight) {
        return answer(res);
      } else {
        return false;
      }
      res.setHeader('Access-Control-Expose-Headers', EXPOSED);
    }
    if (!preflight) return false;
    res.setHeader('Access-Control-Allow-Methods', METHODS);
    const requested = req.headers['access-control-request-headers'];
    if (typeof requested === 'string' && requested.length <= 1000 && HEADER_LIST.test(requested.trim())) {
      res.setHeader('Access-Control-Allow-Headers', requested.trim());
    } else {
      res.setHeader('Access-Control-Allow-Headers', 'authorization, content-type, apikey, x-client-info, x-request-id, last-event-id, idempotency-key, if-none-match, x-consistency-token');
    }
    res.setHeader('Access-Control-Max-Age', '600');
    res.appendHeader('Vary', 'Access-Control-Request-Method, Access-Control-Request-Headers');
    return answer(res);
  };
}

// Finds a request's route without Express's router: Express tests every
// route's pattern in turn (a regular expression and a chain of next() calls
// per route); here each method's routes are compiled to segment lists once and
// compared segment by segment, in declaration order, as Express would
// (case-insensitive, one trailing slash allowed, HEAD served by GET, path
// parameters URI-decoded). A path that names no route goes on to the 404
// handler.
import type { RequestHandler } from 'express';

export interface Dispatchable {
  method: string;
  path: string;
  handler: RequestHandler;
}

interface Compiled {
  /** Lower-cased literal segments; null where the segment is a parameter. */
  literals: (string | null)[];
  names: (string | null)[];
  handler: RequestHandler;
}

function compile(route: Dispatchable): Compiled {
  const segments = route.path.split('/').slice(1);
  return {
    literals: segments.map((s) => (s.startsWith(':') ? null : s.toLowerCase())),
    names: segments.map((s) => (s.startsWith(':') ? s.slice(1) : null)),
    handler: route.handler,
  };
}

function match(route: Compiled, segments: string[]): Record<string, string> | null | undefined {
  if (route.literals.length !== segments.length) return undefined;
  for (let i = 0; i < segments.length; i++) {
    const literal = route.literals[i];
    if (literal !== null && literal !== segments[i]!.toLowerCase()) return undefined;
    if (literal === null && segments[i] === '') return undefined;
  }
  const params: Record<string, string> = {};
  for (let i = 0; i < segments.length; i++) {
    const name = route.names[i];
    if (name === null || name === undefined) continue;
    try {
      params[name] = decodeURIComponent(segments[i]!);
    } catch {
      return null; // malformed percent-encoding names nothing
    }
  }
  return params;
}

/** The dispatch middleware, carrying the method and path of every route it serves (docs discovery reads them). */
export type DispatchHandler = RequestHandler & { served: readonly { method: string; path: string }[] };

export function dispatch(routes: Dispatchable[]): DispatchHandler {
  const byMethod = new Map<string, Compiled[]>();
  for (const route of routes) {
    const method = route.method.toUpperCase();
    if (!byMethod.has(method)) byMethod.set(method, []);
    byMethod.get(method)!.push(compile(route));
  }
  const handler: RequestHandler = (req, res, next) => {
    const candidates = byMethod.get(req.method === 'HEAD' ? 'GET' : req.method);
    if (!candidates) return next();
    let path = req.path;
    if (path.length > 1 && path.endsWith('/')) path = path.slice(0, -1);
    const segments = path.split('/').slice(1);
    for (const route of candidates) {
      const params = match(route, segments);
      if (params === undefined) continue;
      if (params === null) return next();
      req.params = params;
      return route.handler(req, res, next);
    }
    next();
  };
  return Object.assign(handler, { served: routes.map((r) => ({ method: r.method.toLowerCase(), path: r.path })) });
}

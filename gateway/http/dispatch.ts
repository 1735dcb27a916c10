// Finds a request's route: each method's routes are compiled to segment
// lists once and compared segment by segment, in declaration order
// (case-insensitive, one trailing slash allowed, HEAD served by GET, path
// parameters URI-decoded). A path that names no route is the caller's 404.

export interface Dispatchable<H> {
  method: string;
  path: string;
  handler: H;
}

interface Compiled<H> {
  /** Lower-cased literal segments; null where the segment is a parameter. */
  literals: (string | null)[];
  names: (string | null)[];
  handler: H;
}

function compile<H>(route: Dispatchable<H>): Compiled<H> {
  const segments = route.path.split('/').slice(1);
  return {
    literals: segments.map((s) => (s.startsWith(':') ? null : s.toLowerCase())),
    names: segments.map((s) => (s.startsWith(':') ? s.slice(1) : null)),
    handler: route.handler,
  };
}

function match<H>(route: Compiled<H>, segments: string[]): Record<string, string> | null | undefined {
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

export interface Match<H> {
  handler: H;
  params: Record<string, string>;
}

export class RouteTable<H> {
  private readonly byMethod = new Map<string, Compiled<H>[]>();
  /** Method (lower case) and path of every route served (docs discovery reads them). */
  readonly served: readonly { method: string; path: string }[];

  constructor(routes: Dispatchable<H>[]) {
    for (const route of routes) {
      const method = route.method.toUpperCase();
      if (!this.byMethod.has(method)) this.byMethod.set(method, []);
      this.byMethod.get(method)!.push(compile(route));
    }
    this.served = routes.map((r) => ({ method: r.method.toLowerCase(), path: r.path }));
  }

  /** The route for `method` and `path` (no query string), with its parameters; undefined if none. */
  find(method: string, path: string): Match<H> | undefined {
    const candidates = this.byMethod.get(method === 'HEAD' ? 'GET' : method);
    if (!candidates) return undefined;
    const trimmed = path.length > 1 && path.endsWith('/') ? path.slice(0, -1) : path;
    const segments = trimmed.split('/').slice(1);
    for (const route of candidates) {
      const params = match(route, segments);
      if (params === undefined) continue;
      if (params === null) return undefined;
      return { handler: route.handler, params };
    }
    return undefined;
  }
}

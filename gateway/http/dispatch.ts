// Finds a request's route: each method's routes are compiled to segment
// lists once and compared segment by segment, in declaration order
// (case-insensitive, one trailing slash allowed, HEAD served by GET, path
// parameters URI-decoded). A parameter may end with a literal suffix
// (`/e/:shortlink.ics`: the segment must end with `.ics`, which is not part
// of the value). The last segment may be a wildcard (`/object/:bucket/:path*`:
// one or more segments, each decoded, joined by `/`; its literal segments
// are matched case-sensitively, as object paths are). A path that names no
// route is the caller's 404.

export interface Dispatchable<H> {
  method: string;
  path: string;
  handler: H;
}

interface Compiled<H> {
  /** Lower-cased literal segments; null where the segment is a parameter. */
  literals: (string | null)[];
  names: (string | null)[];
  /** Lower-cased literal suffix of a parameter segment ('' when none). */
  suffixes: string[];
  /** The name of a last-segment wildcard (`:path*`), or null. */
  wildcard: string | null;
  handler: H;
}

const PARAMETER = /^:([A-Za-z0-9_]+)(.*)$/;
const WILDCARD = /^:([A-Za-z0-9_]+)\*$/;

function compile<H>(route: Dispatchable<H>): Compiled<H> {
  const all = route.path.split('/').slice(1);
  const wildcard = WILDCARD.exec(all.at(-1) ?? '')?.[1] ?? null;
  const segments = wildcard ? all.slice(0, -1) : all;
  const parameters = segments.map((s) => PARAMETER.exec(s));
  return {
    literals: segments.map((s, i) => (parameters[i] ? null : s.toLowerCase())),
    names: parameters.map((p) => (p ? p[1]! : null)),
    suffixes: parameters.map((p) => (p ? p[2]!.toLowerCase() : '')),
    wildcard,
    handler: route.handler,
  };
}

function match<H>(route: Compiled<H>, all: string[]): Record<string, string> | null | undefined {
  if (route.wildcard ? all.length <= route.literals.length : route.literals.length !== all.length) return undefined;
  const segments = route.wildcard ? all.slice(0, route.literals.length) : all;
  for (let i = 0; i < segments.length; i++) {
    const literal = route.literals[i];
    const segment = segments[i]!;
    if (literal !== null && literal !== segment.toLowerCase()) return undefined;
    if (literal === null) {
      const suffix = route.suffixes[i]!;
      if (segment.length <= suffix.length) return undefined;
      if (suffix !== '' && !segment.toLowerCase().endsWith(suffix)) return undefined;
    }
  }
  const params: Record<string, string> = {};
  for (let i = 0; i < segments.length; i++) {
    const name = route.names[i];
    if (name === null || name === undefined) continue;
    const segment = segments[i]!;
    try {
      params[name] = decodeURIComponent(segment.slice(0, segment.length - route.suffixes[i]!.length));
    } catch {
      return null; // malformed percent-encoding names nothing
    }
  }
  if (route.wildcard) {
    try {
      params[route.wildcard] = all.slice(route.literals.length).map(decodeURIComponent).join('/');
    } catch {
      return null;
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
    // A parameter with a suffix is more specific than one without: tried first
    // (`/e/:shortlink.ics` before `/e/:shortlink`), otherwise in declaration order.
    // A wildcard route is tried after every other, the one with more literal segments first
    // (`/object/sign/:bucket/:path*` before `/object/:bucket/:path*`).
    const suffixed = (route: Compiled<H>) => route.suffixes.filter((suffix) => suffix !== '').length;
    const literal = (route: Compiled<H>) => route.literals.filter((l) => l !== null).length;
    const rank = (route: Compiled<H>) => (route.wildcard ? -1000 + literal(route) : 1000 + suffixed(route));
    for (const list of this.byMethod.values()) list.sort((a, b) => rank(b) - rank(a));
    this.served = routes.map((r) => ({ method: r.method.toLowerCase(), path: r.path }));
  }

  /** The route for `method` and `path` (no query string), with its parameters; undefined if none. */
  find(method: string, path: string): Match<H> | undefined {
    const candidates = this.byMethod.get(method === 'HEAD' ? 'GET' : method);
    if (!candidates) return undefined;
    const segments = path.split('/').slice(1);
    // One trailing slash is allowed (not inside a wildcard: `a/b/` is no object path).
    if (segments.length > 1 && segments.at(-1) === '') segments.pop();
    for (const route of candidates) {
      const params = match(route, segments);
      if (params === undefined) continue;
      if (params === null) return undefined;
      return { handler: route.handler, params };
    }
    return undefined;
  }
}

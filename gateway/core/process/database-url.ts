// Reading a database URL (DATABASE_URL, DATABASE_DIRECT_URL) without `new URL`:
// it may name several hosts (`postgres://u:p@h1:5432,h2:5432/db?target_session_attrs=read-write`,
// as libpq and postgres.js read it), which is not a WHATWG URL. What is done
// with the hosts (following the primary) is in core/database/hosts.ts.
export interface DatabaseHost {
  host: string;
  port: number;
}

interface Parts {
  /** `postgres://` or `postgresql://`. */
  scheme: string;
  /** `user:pass@`, or ''. */
  credentials: string;
  hosts: DatabaseHost[];
  /** `/db?query` (possibly empty). */
  rest: string;
}

const DEFAULT_PORT = 5432;

function split(url: string): Parts | null {
  const match = /^(postgres(?:ql)?:\/\/)(?:([^@/?#]*)@)?([^/?#]*)(.*)$/s.exec(url);
  if (!match) return null;
  const hosts = match[3]!
    .split(',')
    .filter(Boolean)
    .map((part): DatabaseHost => {
      const v6 = /^\[([^\]]+)\](?::(\d+))?$/.exec(part);
      if (v6) return { host: v6[1]!, port: v6[2] ? Number(v6[2]) : DEFAULT_PORT };
      const colon = part.lastIndexOf(':');
      return colon === -1 ? { host: part, port: DEFAULT_PORT } : { host: part.slice(0, colon), port: Number(part.slice(colon + 1)) || DEFAULT_PORT };
    });
  return { scheme: match[1]!, credentials: match[2] === undefined ? '' : `${match[2]}@`, hosts, rest: match[4]! };
}

/** The hosts a database URL names, in order (one for an ordinary URL; none for a URL without a host, e.g. a Unix socket in the query). */
export function databaseHosts(url: string): DatabaseHost[] {
  return split(url)?.hosts ?? [];
}

/** The query parameter `name` of a database URL (URLSearchParams reads the query part alone, which is well-formed). */
export function queryParam(url: string, name: string): string | null {
  const query = /\?([^#]*)/.exec(url)?.[1];
  return query === undefined ? null : new URLSearchParams(query).get(name);
}

/** The same URL naming `host` alone, without target_session_attrs (a single host is what it is). */
export function withHost(url: string, host: DatabaseHost): string {
  const parts = split(url);
  if (!parts) return url;
  const name = host.host.includes(':') ? `[${host.host}]` : host.host;
  const [pathPart, query = ''] = parts.rest.split('?', 2) as [string, string?];
  const params = new URLSearchParams(query);
  params.delete('target_session_attrs');
  const left = params.toString();
  return `${parts.scheme}${parts.credentials}${name}:${host.port}${pathPart}${left ? `?${left}` : ''}`;
}


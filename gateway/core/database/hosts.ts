// DATABASE_URL (and DATABASE_DIRECT_URL) may name several hosts, as libpq
// and postgres.js read them:
//
//   postgres://user:pass@h1:5432,h2:5432/db?target_session_attrs=read-write
//
// Such a URL is not a WHATWG URL (`new URL` refuses it), so nothing here reads
// a database URL that way. postgres.js (the pools, LISTEN, the watch's probe)
// takes it as it is: each new connection tries the hosts in turn and, with
// target_session_attrs=read-write, passes over a standby, so the pools follow
// the primary after a failover. node-postgres (`pg`, under graphile-worker and
// graphile-migrate) takes one host only: `primaryUrl` asks every host which
// one is the primary now and names that one alone, and `FollowingPrimary` is
// a pg Client class that does so at each of its connections.
import pg from 'pg';
import postgres from 'postgres';
import { databaseHosts, queryParam, withHost } from '../process/database-url.ts';

/** No host of the URL takes writes now (all down, or all standbys): retried like a refused connection. */
export class NoPrimaryError extends Error {
  readonly code = 'NO_PRIMARY';
}

/** How long each host has to answer whether it is the primary. */
const LOCATE_TIMEOUT_MS = 2_000;

/**
 * A single-host URL of the host that takes writes now: the URL itself when it
 * names one host; else the first host, in the URL's order, that answers and
 * is not a read-only standby (or, without target_session_attrs=read-write or
 * primary, the first that answers). NoPrimaryError when none does.
 */
export async function primaryUrl(url: string): Promise<string> {
  const hosts = databaseHosts(url);
  if (hosts.length <= 1) return url;
  const attrs = queryParam(url, 'target_session_attrs') ?? 'any';
  const wantsPrimary = attrs === 'read-write' || attrs === 'primary';
  const answers = await Promise.all(
    hosts.map(async (host) => {
      const single = withHost(url, host);
      const client = postgres(single, {
        max: 1,
        connect_timeout: LOCATE_TIMEOUT_MS / 1000,
        fetch_types: false,
        idle_timeout: 1,
        onnotice: () => {},
        connection: { application_name: 'db-locate-primary' },
      });
      try {
        const [row] = await client<{ writable: boolean }[]>`select not pg_is_in_recovery() and current_setting('transaction_read_only') = 'off' as writable`;
        return { single, answered: true, writable: Boolean(row?.writable) };
      } catch (err) {
        return { single, answered: false, writable: false, err };
      } finally {
        void client.end({ timeout: 0 }).catch(() => {});
      }
    }),
  );
  const chosen = answers.find((a) => a.answered && (a.writable || !wantsPrimary));
  if (chosen) return chosen.single;
  const answered = answers.filter((a) => a.answered).length;
  throw new NoPrimaryError(
    answered ? `none of the ${hosts.length} database hosts takes writes (${answered} answered as standbys)` : `none of the ${hosts.length} database hosts answers`,
  );
}

/**
 * A pg (node-postgres) Client class for `url`: each connection goes to the
 * host that is the primary at that moment (primaryUrl), so a pg Pool made
 * with it (graphile-worker's) follows a failover as its connections are
 * replaced. With a single-host URL it is pg's own Client.
 */
export function followingPrimary(url: string): typeof pg.Client {
  if (databaseHosts(url).length <= 1) return pg.Client;
  return class FollowingPrimary extends pg.Client {
    // pg's connect() (callback or promise) goes through _connect: choose the host first.
    _connect(callback: (err?: Error) => void): void {
      primaryUrl(url).then(
        (single) => {
          const [host] = databaseHosts(single);
          const self = this as unknown as { host: string; port: number; connectionParameters: { host: string; port: number } };
          self.host = self.connectionParameters.host = host!.host;
          self.port = self.connectionParameters.port = host!.port;
          (pg.Client.prototype as unknown as { _connect(cb: (err?: Error) => void): void })._connect.call(this, callback);
        },
        (err: Error) => callback(err),
      );
    }
  } as unknown as typeof pg.Client;
}

/**
 * A pg Pool on `url` that follows the primary (followingPrimary); the
 * connection string it is given names one host, pg's parser taking no more.
 * `onError` hears the errors of its connections, idle or checked out (a
 * failover closes them all): pg drops such a connection, and without a
 * listener the error would end the process.
 */
export function primaryFollowingPool(url: string, options: pg.PoolConfig, onError: (err: Error) => void): pg.Pool {
  const [first] = databaseHosts(url);
  const pool = new pg.Pool({ ...options, connectionString: first ? withHost(url, first) : url, Client: followingPrimary(url) } as pg.PoolConfig);
  pool.on('error', onError);
  pool.on('connect', (client) => client.on('error', onError));
  return pool;
}

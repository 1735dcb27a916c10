// What the MCP server's parts (server.ts, oauth.ts) are given: the pool, the
// configuration, the log, and the addresses it answers for.
import type { Config } from '../gateway/core/process/config.ts';
import type { Sql } from '../gateway/core/database/pool.ts';
import type { Replicas } from '../gateway/core/database/replicas.ts';
import type { Logger } from '../gateway/core/process/log.ts';
import type { Passwords } from '../gateway/core/auth/passwords.ts';

export interface McpDeps {
  sql: Sql;
  /** Read replicas (DATABASE_REPLICA_URLS, gateway/core/database/replicas.ts); absent: everything on sql. */
  replicas?: Replicas;
  config: Config;
  log: Logger;
  /** The public URL of /mcp (PUBLIC_URL + /mcp): OAuth resource and discovery. */
  resourceUrl: string;
  allowedHosts: string[];
  allowedOrigins: string[];
  /** Password hashing in this process, bounded (the consent form's sign-in). */
  passwords: Passwords;
}

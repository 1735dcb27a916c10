// Configuration, read once from the environment. Both processes (gateway and
// MCP server) use this; see README.md "Configuration" for what each variable does.
import path from 'node:path';
import { z } from 'zod';

const optionalString = z
  .string()
  .optional()
  .transform((v) => (v === undefined || v.trim() === '' ? undefined : v.trim()));

const port = (fallback: number) =>
  z.coerce.number().int().min(0).max(65535).optional().default(fallback);

const EnvSchema = z.object({
  DATABASE_URL: optionalString,
  PORT: port(3000),
  HOST: optionalString,
  PUBLIC_URL: optionalString,
  APP_SCHEME: optionalString,
  JWT_SECRET: optionalString,
  JWT_SIGNING_KEYS: optionalString,
  ACCESS_TOKEN_TTL: z.coerce.number().int().min(30).max(86_400).optional().default(3600),
  LOG_LEVEL: z
    .enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'])
    .optional()
    .default('info'),
  DATA_DIR: optionalString,
  EMBEDDED_PG_PORT: port(54329),
  DB_POOL_MAX: z.coerce.number().int().min(1).max(500).optional().default(10),
  STATEMENT_TIMEOUT_MS: z.coerce.number().int().min(100).optional().default(15_000),
});

export interface Config {
  /** Postgres to use; when unset an embedded Postgres is started. */
  databaseUrl: string | undefined;
  port: number;
  host: string | undefined;
  publicUrl: string;
  appScheme: string;
  jwtSecret: string | undefined;
  /** JSON: one JWK or an array of JWKs with private parts; the first signs. */
  jwtSigningKeys: string | undefined;
  accessTokenTtlSeconds: number;
  logLevel: z.infer<typeof EnvSchema>['LOG_LEVEL'];
  /** Git-ignored folder for the embedded database and the dev JWT secret. */
  dataDir: string;
  embeddedPgPort: number;
  dbPoolMax: number;
  statementTimeoutMs: number;
}

export class ConfigError extends Error {}

export function loadConfig(env: NodeJS.ProcessEnv = process.env): Config {
  const parsed = EnvSchema.safeParse(env);
  if (!parsed.success) {
    const problems = parsed.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`);
    throw new ConfigError(`invalid configuration: ${problems.join('; ')}`);
  }
  const e = parsed.data;
  return {
    databaseUrl: e.DATABASE_URL,
    port: e.PORT,
    host: e.HOST,
    publicUrl: (e.PUBLIC_URL ?? `http://localhost:${e.PORT}`).replace(/\/+$/, ''),
    appScheme: e.APP_SCHEME ?? 'communityapp',
    jwtSecret: e.JWT_SECRET,
    jwtSigningKeys: e.JWT_SIGNING_KEYS,
    accessTokenTtlSeconds: e.ACCESS_TOKEN_TTL,
    logLevel: e.LOG_LEVEL,
    dataDir: path.resolve(e.DATA_DIR ?? path.join(projectRoot(), '.data')),
    embeddedPgPort: e.EMBEDDED_PG_PORT,
    dbPoolMax: e.DB_POOL_MAX,
    statementTimeoutMs: e.STATEMENT_TIMEOUT_MS,
  };
}

/** The repository root (this file lives in gateway/lib/). */
export function projectRoot(): string {
  return path.resolve(import.meta.dirname, '..', '..');
}

// Shared test helpers: HTTP calls against the real gateway, users made
// through the real endpoints, and a direct database connection for SQL-level
// tests and for setting up states no endpoint creates.
import crypto from 'node:crypto';
import path from 'node:path';
import { SignJWT } from 'jose';
import postgres from 'postgres';
import { destination } from 'pino';
import { afterAll, inject } from 'vitest';
import { withClaims, type RequestClaims, type Tx } from '../gateway/core/database/transaction.ts';
import type { Sql } from '../gateway/core/database/pool.ts';
import { Passwords } from '../gateway/core/auth/passwords.ts';
import { FairQueue } from '../gateway/core/auth/fair-queue.ts';
import { register } from '../gateway/auth/sign-in.ts';
import { createLogger } from '../gateway/core/process/log.ts';
import { checkContract } from './support/contract.ts';
import { startTestEnvironment, type EnvironmentOptions } from './support/environment.ts';

/**
 * Where another throwaway database of this run is made (support/environment.ts):
 * a copy of the run's migrated template, on the run's server.
 */
export const databaseServer: Pick<EnvironmentOptions, 'serverUrl' | 'template' | 'databasePrefix' | 'parentDir'> = {
  serverUrl: inject('testServerUrl'),
  template: inject('testTemplate'),
  databasePrefix: inject('testDatabasePrefix'),
  parentDir: inject('testRoot'),
};

// This file's own database (a copy of the template) and its own gateway and
// MCP server, started when a test file first imports this module and stopped
// after its last test: files never share state, so they run in parallel.
// The gateway logs everything (debug) to a file, so tests can check that no
// password or token ever reaches the logs.
let gatewayLogFile = '';
const environment = await startTestEnvironment({
  ...databaseServer,
  // TEST_PGBOUNCER=1: every file's gateway behind PgBouncer in transaction mode.
  pgbouncer: process.env.TEST_PGBOUNCER === '1',
  gatewayLog: (dir) => {
    gatewayLogFile = path.join(dir, 'gateway.log');
    return createLogger('debug', 'gateway', destination({ dest: gatewayLogFile, sync: true }));
  },
});
afterAll(() => environment.stop(), 120_000);

export const baseUrl = environment.baseUrl;
/** The MCP process's own address (the gateway proxies /mcp to it). */
export const mcpUrl = environment.mcpUrl;
export const databaseUrl = environment.databaseUrl;
export const jwtSecret = environment.jwtSecret;
export const publicUrl = environment.config.publicUrl;
/** The gateway's DATA_DIR: its stored files are under `storage/`. */
export const dataDir = environment.dir;
/** The gateway's log (every line, at debug). */
export const logFile = gatewayLogFile;

export interface ApiResponse<T = any> {
  status: number;
  body: T;
  text: string;
  headers: Headers;
}

export interface ApiOptions {
  token?: string;
  body?: unknown;
  /** Sent as is, with content-type application/json. */
  rawBody?: string;
  headers?: Record<string, string>;
  /** Skip the OpenAPI contract check (only for requests that deliberately bypass the interface). */
  noContract?: boolean;
}

export async function api<T = any>(method: string, path: string, options: ApiOptions = {}): Promise<ApiResponse<T>> {
  const headers: Record<string, string> = { ...options.headers };
  if (options.token) headers.authorization = `Bearer ${options.token}`;
  let body: string | undefined;
  if (options.rawBody !== undefined) body = options.rawBody;
  else if (options.body !== undefined) body = JSON.stringify(options.body);
  if (body !== undefined && !headers['content-type']) headers['content-type'] = 'application/json';
  const res = await fetch(baseUrl + path, { method, headers, body, redirect: 'manual' });
  const text = await res.text();
  let parsed: unknown = undefined;
  try {
    parsed = text ? JSON.parse(text) : undefined;
  } catch {
    parsed = undefined;
  }
  // Every answer must be the one the OpenAPI document describes (support/contract.ts).
  if (!options.noContract) await checkContract(baseUrl, method, path, res.status, res.headers.get('content-type'), parsed);
  return { status: res.status, body: parsed as T, text, headers: res.headers };
}

export function uniqueEmail(prefix = 'user'): string {
  return `${prefix}-${crypto.randomBytes(6).toString('hex')}@example.com`;
}

export interface TestUser {
  email: string;
  password: string;
  userId: string;
  accessToken: string;
  refreshToken: string;
}

/**
 * A new signed-in user: a unique e-mail starting with `prefix` and this
 * file's test password (testPassword()), or the given e-mail and password.
 *
 * With given credentials, the account is made and signed in through the HTTP
 * API (POST /api/auth/register, then /api/auth/login). Otherwise through the
 * same SQL steps those routes take, without their two bcrypt operations (the
 * largest part of the suite's CPU time): the account made by
 * api.auth_register with the hash of the test password made once per file,
 * a session started by private.password_attempt_start and
 * private.auth_login_finish (the password known to match that hash), and its
 * token pair from the gateway's POST /api/auth/refresh. Tests of registering
 * and signing in call those routes themselves.
 */
export async function registerUser(prefix = 'user', credentials?: { email: string; password: string }): Promise<TestUser> {
  if (credentials) return registerThroughHttp(credentials.email, credentials.password);
  // Two at a time, as the gateway's bcrypt paced them on two cores: a test making 50 users at once does not send
  // 50 sign-ins at once to a database the other files are using too.
  return testUsers.run('tests', () => registerWithTestPassword(prefix));
}

const testUsers = new FairQueue({ concurrency: 2, maxQueued: Number.MAX_SAFE_INTEGER, what: 'test users' });

async function registerWithTestPassword(prefix: string): Promise<TestUser> {
  const email = uniqueEmail(prefix);
  const { password, hash } = await testPassword();
  const { authLimits } = environment.config;
  const [start] = await db()`
    select * from private.password_set_start('register', '127.0.0.1', ${authLimits.maxPasswordSetsPerIp}, ${authLimits.windowSeconds}, ${email})`;
  if (start!.status !== 'hash') throw new Error(`register refused: ${JSON.stringify(start)}`);
  const [user] = await asAnon((tx) => register(tx, { email, password }, hash));
  const [attempt] = await db()`
    select * from private.password_attempt_start('login', ${email}, '127.0.0.1', ${passwords.cost}, ${authLimits.maxFailuresPerEmailAndClient},
                                                 ${authLimits.maxFailuresPerEmail}, ${authLimits.maxFailuresPerIp}, ${authLimits.windowSeconds})`;
  if (attempt!.status !== 'check' || attempt!.rehash) throw new Error(`login refused: ${JSON.stringify(attempt)}`);
  // What fetch sends (user agent `node`, from 127.0.0.1), as a login through the route records.
  const [session] = await db()`select * from private.auth_login_finish(${attempt!.attempt}, true, null, 'node', '127.0.0.1')`;
  if (session!.status !== 'ok') throw new Error(`login failed: ${JSON.stringify(session)}`);
  const pair = await api('POST', '/api/auth/refresh', { body: { refresh_token: session!.refresh_token } });
  if (pair.status !== 200) throw new Error(`refresh failed: ${pair.status} ${pair.text}`);
  return { email, password, userId: user!.user_id, accessToken: pair.body.access_token, refreshToken: pair.body.refresh_token };
}

async function registerThroughHttp(email: string, password: string): Promise<TestUser> {
  const reg = await api('POST', '/api/auth/register', { body: { email, password } });
  if (reg.status !== 201) throw new Error(`register failed: ${reg.status} ${reg.text}`);
  const login = await api('POST', '/api/auth/login', { body: { email, password } });
  if (login.status !== 200) throw new Error(`login failed: ${login.status} ${login.text}`);
  return {
    email,
    password,
    userId: reg.body.user_id,
    accessToken: login.body.access_token,
    refreshToken: login.body.refresh_token,
  };
}

let testPasswordHash: Promise<{ password: string; hash: string }> | undefined;

/** The password of this file's registerUser() accounts, random per file, and its bcrypt hash at the gateway's cost (made once). */
export function testPassword(): Promise<{ password: string; hash: string }> {
  testPasswordHash ??= (async () => {
    const password = `pw-${crypto.randomBytes(8).toString('hex')}`;
    return { password, hash: await passwords.hashNow(password) };
  })();
  return testPasswordHash;
}

let shared: Sql | undefined;

/** A superuser connection to the test database (closed after the file). */
export function db(): Sql {
  if (!shared) {
    shared = postgres(databaseUrl, { max: 20, onnotice: () => {} });
    const conn = shared;
    afterAll(async () => {
      await conn.end({ timeout: 5 });
      if (shared === conn) shared = undefined;
    });
  }
  return shared;
}

/** Runs fn as a signed-in user, exactly as the gateway does for a request. */
export function asUser<T>(userId: string, fn: (tx: Tx) => Promise<T>): Promise<T> {
  const claims: RequestClaims = { role: 'authenticated', sub: userId, aud: 'authenticated' };
  return withClaims(db(), claims, fn);
}

/** Runs fn as an anonymous request. */
export function asAnon<T>(fn: (tx: Tx) => Promise<T>): Promise<T> {
  return withClaims(db(), { role: 'anon' }, fn);
}

/** The process-side password work of the tests, at the cost of the file's gateway (BCRYPT_COST, 10 by default). */
export const passwords = new Passwords({ cost: environment.config.passwords.cost, concurrency: 2, maxQueued: 100 });

export interface SqlSignIn {
  status: string;
  user_id: string | null;
  refresh_token: string | null;
  session_id: string | null;
}

/**
 * A login exactly as POST /api/auth/login does it, on the SQL level:
 * private.password_attempt_start, bcrypt in this process, private.auth_login_finish
 * (both as the connection's own role, as the gateway runs them).
 */
export async function sqlSignIn(email: string, password: string, clientIp = '198.51.100.1', cost = passwords.cost): Promise<SqlSignIn> {
  const [attempt] = await db()`
    select * from private.password_attempt_start('login', ${email}, ${clientIp}, ${cost}, 10, 100, 1000000, 900)`;
  if (attempt!.status !== 'check') return { status: attempt!.status, user_id: null, refresh_token: null, session_id: null };
  const matched = await passwords.verifyNow(password, attempt!.password_hash);
  const newHash = matched && attempt!.rehash ? await new Passwords({ cost, concurrency: 1, maxQueued: 1 }).hashNow(password) : null;
  const [result] = await db()`select * from private.auth_login_finish(${attempt!.attempt}, ${matched}, ${newHash})`;
  return result as unknown as SqlSignIn;
}

/** A JWT signed with the test secret (or another key), for tampering tests. */
export async function forgeToken(
  claims: Record<string, unknown>,
  options: { secret?: string; expiresIn?: string | number; audience?: string; issuer?: string } = {},
): Promise<string> {
  const jwt = new SignJWT({ role: 'authenticated', ...claims })
    .setProtectedHeader({ alg: 'HS256', typ: 'JWT' })
    .setIssuedAt()
    .setAudience(options.audience ?? 'authenticated')
    .setIssuer(options.issuer ?? `${publicUrl}/api/auth`)
    .setExpirationTime(options.expiresIn ?? '1h');
  return jwt.sign(new TextEncoder().encode(options.secret ?? jwtSecret));
}

/** An API key as `npm run admin -- keys` prints it (docs/supabase-sdks.md#api-keys), signed with the test secret (or another). */
export function apiKey(role: 'anon' | 'service_role', secret = jwtSecret): Promise<string> {
  return new SignJWT({ role, ref: 'api-key' })
    .setProtectedHeader({ alg: 'HS256', typ: 'JWT' })
    .setIssuer(`${publicUrl}/api/auth`)
    .setIssuedAt()
    .setExpirationTime('3650d')
    .sign(new TextEncoder().encode(secret));
}

/** A token with `alg: none` (unsigned). */
export function unsignedToken(claims: Record<string, unknown>): string {
  const enc = (o: unknown) => Buffer.from(JSON.stringify(o)).toString('base64url');
  const now = Math.floor(Date.now() / 1000);
  return `${enc({ alg: 'none', typ: 'JWT' })}.${enc({ role: 'authenticated', aud: 'authenticated', iss: `${publicUrl}/api/auth`, iat: now, exp: now + 3600, ...claims })}.`;
}

/** The Error body (docs/api/conventions.md#errors). */
export function expectErrorShape(body: unknown): void {
  const b = body as Record<string, unknown>;
  if (typeof b?.error !== 'string' || typeof b?.message !== 'string' || !('details' in b)) {
    throw new Error(`not an Error body: ${JSON.stringify(body)}`);
  }
}

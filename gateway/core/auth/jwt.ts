// Access tokens: JWTs signed with jose and verified with fast-jwt.
//
// Keys:
//   the database      (the gateway's case: createTokenService with `sql`)
//                     asymmetric keys in identity.signing_keys
//                     (signing-keys.ts, sql/areas/jwks.sql): the current one
//                     signs access tokens (ES256 unless an operator added an
//                     RS256 one), the standby, current and recent previous
//                     ones verify and are published as the JWKS
//                     (GET /auth/v1/.well-known/jwks.json); reloaded on
//                     NOTIFY signing_keys_changed, every minute, and when a
//                     token names a key id not known yet
//   JWT_SIGNING_KEYS  one JWK or an array of JWKs with their private parts
//                     (e.g. from `supabase gen signing-key`); the first signs,
//                     all verify; the database's keys are then not used
//   JWT_SECRET        a shared HS256 secret (at least 32 characters), e.g. a
//                     Supabase project's legacy JWT secret; without it a
//                     random one generated once and kept in
//                     DATA_DIR/jwt-secret (development). It always verifies
//                     (older HS256 access tokens, the API keys) and signs the
//                     API keys; it signs access tokens only without `sql`
//                     and without JWT_SIGNING_KEYS (the tooling, unit tests)
// Verification (createAccessTokenVerifier) accepts only the algorithm of the
// key the token names (never `none`), checks the signature, expiry, audience
// and issuer, and requires a uuid `sub` and the role `authenticated`.
// Verified tokens are kept until they expire (verified-tokens.ts), so a
// client sending the same token on every request pays for its signature once.
// test/unit/jwt-parity.test.ts holds fast-jwt to jose's verdicts.
// Why fast-jwt verifies and jose signs, measured: docs/decisions.md#access-token-verification.
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { createVerifier, TokenError, type Algorithm } from 'fast-jwt';
import { importJWK, SignJWT, type JWK, type JWTPayload } from 'jose';
import { z } from 'zod';
import type { Config } from '../process/config.ts';
import type { Sql } from '../database/pool.ts';
import { loadSigningKeys, watchSigningKeys } from './signing-keys.ts';
import { makeDataFolder } from '../process/data-folder.ts';
import { VerifiedTokenCache } from './verified-tokens.ts';

export const AUDIENCE = 'authenticated';

export interface AccessClaims extends JWTPayload {
  sub: string;
  role: 'authenticated';
  email?: string;
  session_id?: string;
  /** A guest's tokens: true (private.access_token_claims). */
  is_anonymous?: boolean;
}

export interface IssuedToken {
  accessToken: string;
  expiresIn: number;
}

/** The roles of the API keys (docs/supabase-sdks.md#api-keys): what Supabase calls the anon key and the service-role key. */
export type ApiKeyRole = 'anon' | 'service_role';

/** What an access token is signed for: its user and session, and the claims SQL adds (private.access_token_claims: app_metadata, user_metadata, is_anonymous). */
export interface TokenSubject {
  id: string;
  email: string;
  sessionId: string;
  /** More claims, as SQL gives them; they cannot replace the ones above or the registered ones. */
  claims?: Record<string, unknown>;
}

/** The public keys that verify access tokens, as a JSON Web Key Set (RFC 7517). */
export interface Jwks {
  keys: JWK[];
}

export interface TokenService {
  issue(user: TokenSubject): Promise<IssuedToken>;
  /** Verified claims, or throws InvalidTokenError. */
  verify(token: string): Promise<AccessClaims>;
  /** An API key as Supabase issues them: a JWT of role `anon` or `service_role`, signed with the service's key, valid ten years. */
  apiKey(role: ApiKeyRole): Promise<string>;
  /** The role of a valid API key (the `apikey` header), or null: its signature, issuer and expiry checked. */
  apiKeyRole(key: string): ApiKeyRole | null;
  /** The published key set: the public half of every asymmetric key that verifies. */
  jwks(): Jwks;
  /**
   * With the database (`sql`): loads its key set (making the first key on a
   * database that has none) and watches it. Call it once the migrations have
   * run; until then access tokens are signed with the shared secret.
   */
  start(): Promise<void>;
  /** Stops watching the database's key set. */
  close(): Promise<void>;
}

export class InvalidTokenError extends Error {}

/** The message of a token no loaded key verifies (its alg and kid name none). */
const NO_KEY = 'no key for this token';

/**
 * The claims an access token must carry beyond what fast-jwt checks (`exp`,
 * `aud`, `iss`, `nbf`): a user, the role, and a numeric `iat` if any (jose
 * refuses any other `iat` too).
 */
const UserClaims = z.looseObject({ sub: z.uuid(), role: z.literal('authenticated'), iat: z.number().optional() });

/**
 * A shared secret as a WebCrypto HMAC key for jose's signing, imported once
 * (given the raw bytes, jose imports them again on every signature).
 */
function hmacKey(secret: Uint8Array, alg: string): Promise<CryptoKey> {
  const hash = { HS256: 'SHA-256', HS384: 'SHA-384', HS512: 'SHA-512' }[alg];
  if (!hash) throw new Error(`unsupported algorithm ${alg} for a shared secret`);
  return crypto.webcrypto.subtle.importKey('raw', secret, { name: 'HMAC', hash }, false, ['sign']);
}

/** One key that verifies tokens: its algorithm, its id if it has one, and what fast-jwt verifies with. */
export interface VerifierKey {
  alg: string;
  kid: string | undefined;
  /** A shared secret's bytes (HS*), or a public key as SPKI PEM. */
  material: Buffer | string;
}

interface KeyEntry extends VerifierKey {
  /** jose's signing key, when this key can sign. */
  signKey?: Awaited<ReturnType<typeof importJWK>>;
  /** The public JWK, for an asymmetric key (published in the JWKS). */
  publicJwk?: JWK;
}

const PRIVATE_JWK_FIELDS = ['d', 'p', 'q', 'dp', 'dq', 'qi', 'k'] as const;
const JwkSchema = z
  .object({ kty: z.string(), alg: z.string().optional(), kid: z.string().optional(), k: z.string().optional() })
  .passthrough();

async function keysFromJwks(json: string): Promise<KeyEntry[]> {
  let parsed: unknown;
  try {
    parsed = JSON.parse(json);
  } catch {
    throw new Error('JWT_SIGNING_KEYS is not valid JSON');
  }
  const list = z.array(JwkSchema).min(1).parse(Array.isArray(parsed) ? parsed : [parsed]);
  return Promise.all(
    list.map(async (jwk): Promise<KeyEntry> => {
      const alg = jwk.alg ?? (jwk.kty === 'EC' ? 'ES256' : jwk.kty === 'RSA' ? 'RS256' : 'HS256');
      if (jwk.kty === 'oct') {
        const secret = Buffer.from(jwk.k ?? '', 'base64url');
        if (secret.length === 0) throw new Error('JWT_SIGNING_KEYS: an "oct" key needs "k"');
        return { kid: jwk.kid, alg, signKey: await hmacKey(secret, alg), material: secret };
      }
      return asymmetricKey(jwk as JWK, alg);
    }),
  );
}

/** An asymmetric key from its JWK (private or public): it signs when the JWK has its private part. */
async function asymmetricKey(jwk: JWK, alg: string): Promise<KeyEntry> {
  const publicJwk: JWK = { ...jwk };
  for (const field of PRIVATE_JWK_FIELDS) delete publicJwk[field];
  await importJWK(publicJwk, alg); // refuses a key that does not fit its alg, at start
  return {
    kid: jwk.kid,
    alg,
    signKey: 'd' in jwk ? await importJWK(jwk, alg) : undefined,
    publicJwk: { ...publicJwk, alg, use: 'sig', key_ops: ['verify'] },
    material: crypto.createPublicKey({ key: publicJwk as crypto.JsonWebKey, format: 'jwk' }).export({ type: 'spki', format: 'pem' }) as string,
  };
}

export interface VerifierOptions {
  issuer: string;
  /** How many verified tokens are kept, each until it expires (verified-tokens.ts); 0: none. */
  cacheSize?: number;
  /** A fixed "now" in ms since the epoch (tests). */
  clockTimestamp?: number;
}

/** The protected header of a compact JWS, for choosing the key; fast-jwt then verifies the whole token. */
function protectedHeader(token: string): { alg?: unknown; kid?: unknown } {
  const header: unknown = JSON.parse(Buffer.from(token.slice(0, token.indexOf('.')), 'base64url').toString());
  if (typeof header !== 'object' || header === null) throw new InvalidTokenError('invalid token');
  return header;
}

/**
 * Verifies access tokens with fast-jwt: the claims of a valid token (frozen:
 * cached claims are shared by every request that sends the token), or
 * throws InvalidTokenError ('token has expired' for an expired one). With
 * one key and no key ids, every token goes to that key's verifier; otherwise
 * to the key whose `alg` (and `kid`, when both have one) the header names.
 */
export function createAccessTokenVerifier(keys: VerifierKey[], options: VerifierOptions): (token: string) => AccessClaims {
  const verifiers = keys.map((key) => ({
    alg: key.alg,
    kid: key.kid,
    verify: createVerifier({
      key: key.material,
      algorithms: [key.alg as Algorithm],
      allowedAud: AUDIENCE,
      allowedIss: options.issuer,
      requiredClaims: ['sub', 'exp', 'aud', 'iss'],
      cache: false,
      ...(options.clockTimestamp !== undefined ? { clockTimestamp: options.clockTimestamp } : {}),
    }) as (token: string) => Record<string, unknown>,
  }));
  const only = verifiers.length === 1 && !verifiers[0]!.kid ? verifiers[0]!.verify : undefined;
  const verifierFor = (token: string) => {
    const header = protectedHeader(token);
    const match = verifiers.find((v) => v.alg === header.alg && (!header.kid || !v.kid || v.kid === header.kid));
    if (!match) throw new InvalidTokenError(NO_KEY);
    return match.verify;
  };

  const cacheSize = options.cacheSize ?? 10_000;
  const verified = cacheSize > 0 ? new VerifiedTokenCache<AccessClaims>(cacheSize) : undefined;

  return (token) => {
    const cached = verified?.get(token, options.clockTimestamp);
    if (cached) return cached;
    let claims: Record<string, unknown>;
    try {
      claims = (only ?? verifierFor(token))(token);
    } catch (err) {
      if (err instanceof InvalidTokenError) throw err;
      if (err instanceof TokenError && err.code === TokenError.codes.expired) throw new InvalidTokenError('token has expired');
      // Whatever else a malformed token makes the decoder throw, it is not valid.
      throw new InvalidTokenError('invalid token');
    }
    if (!UserClaims.safeParse(claims).success) throw new InvalidTokenError('token is not a user access token');
    return verified ? verified.set(token, claims as AccessClaims) : (Object.freeze(claims) as AccessClaims);
  };
}

const ApiKeyClaims = z.looseObject({ role: z.enum(['anon', 'service_role']), ref: z.literal('api-key') });

/**
 * Verifies API keys (the `apikey` header): signed by one of the keys, not
 * expired, this service's issuer, a role of anon or service_role. Keys are
 * few and sent on every request: verdicts are kept (a bounded map).
 */
export function createApiKeyVerifier(keys: VerifierKey[], options: { issuer: string }): (key: string) => ApiKeyRole | null {
  const verifiers = keys.map((key) =>
    createVerifier({ key: key.material, algorithms: [key.alg as Algorithm], allowedIss: options.issuer, requiredClaims: ['role', 'iss', 'exp'], cache: false }),
  );
  const known = new Map<string, { role: ApiKeyRole; exp: number }>();
  return (key) => {
    const hit = known.get(key);
    if (hit && hit.exp * 1000 > Date.now()) return hit.role;
    for (const verify of verifiers) {
      let claims: unknown;
      try {
        claims = verify(key);
      } catch {
        continue;
      }
      const parsed = ApiKeyClaims.safeParse(claims);
      if (!parsed.success) return null;
      if (known.size >= 100) known.clear();
      known.set(key, { role: parsed.data.role, exp: Number((claims as { exp: number }).exp) });
      return parsed.data.role;
    }
    return null;
  };
}

/**
 * The generated development secret, made once per DATA_DIR. Processes
 * starting together (WEB_CONCURRENCY workers) agree on one: the file appears
 * whole or not at all (written aside, then hard-linked into place, which
 * fails if another process got there first), and everyone reads it back.
 */
function devSecret(dataDir: string): string {
  const file = path.join(dataDir, 'jwt-secret');
  if (!fs.existsSync(file)) {
    makeDataFolder(dataDir);
    const aside = `${file}.${process.pid}`;
    fs.writeFileSync(aside, crypto.randomBytes(48).toString('base64url') + '\n', { mode: 0o600 });
    try {
      fs.linkSync(aside, file);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
    } finally {
      fs.rmSync(aside, { force: true });
    }
  }
  return fs.readFileSync(file, 'utf8').trim();
}

/** How often a process reloads the database's key set besides NOTIFY (a previous key's time ends; a notification missed). */
const RELOAD_EVERY_MS = 60_000;
/** A token naming an unknown key id reloads the set at most this often (a key another process just made current). */
const UNKNOWN_KID_RELOAD_MS = 2_000;

export interface TokenServiceOptions {
  /** The database holding the signing keys (identity.signing_keys); without it the keys come from the configuration only. */
  sql?: Sql;
  /** Where NOTIFY signing_keys_changed is heard (a session-mode connection); `sql` by default. */
  listenSql?: Sql;
  /** Told when reloading the key set fails (the keys already loaded stay in use). */
  onReloadError?: (err: unknown) => void;
}

export async function createTokenService(config: Config, options: TokenServiceOptions = {}): Promise<TokenService> {
  const envKeys: KeyEntry[] = config.jwtSigningKeys ? await keysFromJwks(config.jwtSigningKeys) : [];
  const sharedSecret = async (text: string): Promise<KeyEntry> => {
    const secret = Buffer.from(text, 'utf8');
    return { kid: undefined, alg: 'HS256', signKey: await hmacKey(secret, 'HS256'), material: secret };
  };
  if (config.jwtSecret && config.jwtSecret.length < 32) throw new Error('JWT_SECRET must be at least 32 characters');
  // The shared secret verifies older access tokens and the API keys, whatever signs new access tokens.
  const secretKey = config.jwtSecret || envKeys.length === 0 ? await sharedSecret(config.jwtSecret ?? devSecret(config.dataDir)) : undefined;
  const staticKeys = [...envKeys, ...(secretKey ? [secretKey] : [])];
  const apiKeySigner = envKeys.find((k) => k.signKey) ?? secretKey;
  if (!apiKeySigner?.signKey) throw new Error('no JWT key can sign: give a private JWK or JWT_SECRET');
  const issuer = `${config.publicUrl}/api/auth`;
  const ttl = config.accessTokenTtlSeconds;
  const { sql } = envKeys.length === 0 ? options : {};

  /** The keys of the moment: which signs access tokens, the verifier of them all (a new one, with an empty cache, whenever the set changes), the JWKS. */
  interface KeySet {
    signer: KeyEntry;
    verify: (token: string) => AccessClaims;
    jwks: Jwks;
  }
  const keySetOf = (dbKeys: KeyEntry[]): KeySet => {
    const keys = [...dbKeys, ...staticKeys];
    return {
      signer: dbKeys[0] ?? apiKeySigner,
      verify: createAccessTokenVerifier(keys, { issuer }),
      jwks: { keys: keys.flatMap((k) => (k.publicJwk ? [k.publicJwk] : [])) },
    };
  };
  const loadDbKeys = async (db: Sql): Promise<KeyEntry[]> =>
    // Current first (private.signing_keys_usable's order): it signs.
    Promise.all((await loadSigningKeys(db, ttl)).map((k) => asymmetricKey(k.private_jwk ?? k.public_jwk, k.alg)));

  let current = keySetOf([]);
  let started = false;
  let lastReload = Date.now();
  let reloading: Promise<void> | undefined;
  const reload = (): Promise<void> => {
    if (!sql || !started) return Promise.resolve();
    reloading ??= loadDbKeys(sql)
      .then((keys) => {
        current = keySetOf(keys);
      })
      .catch((err: unknown) => options.onReloadError?.(err))
      .finally(() => {
        lastReload = Date.now();
        reloading = undefined;
      });
    return reloading;
  };
  let timer: NodeJS.Timeout | undefined;
  let listener: { unlisten(): Promise<void> } | undefined;

  const sign = (payload: JWTPayload, key: KeyEntry) =>
    new SignJWT(payload).setProtectedHeader(key.kid ? { alg: key.alg, kid: key.kid, typ: 'JWT' } : { alg: key.alg, typ: 'JWT' }).setIssuer(issuer).setIssuedAt();

  return {
    async issue(user) {
      // The one place an access token's claims are put together: SQL's extra
      // claims first, so that none of them can replace the session's own.
      const token = await sign({ ...user.claims, role: 'authenticated', email: user.email, session_id: user.sessionId }, current.signer)
        .setSubject(user.id)
        .setAudience(AUDIENCE)
        .setExpirationTime(`${ttl}s`)
        .sign(current.signer.signKey!);
      return { accessToken: token, expiresIn: ttl };
    },

    async verify(token) {
      try {
        return current.verify(token);
      } catch (err) {
        // A key id this process has not loaded yet (another process made it
        // current a moment ago): reload once, then decide.
        if (!(err instanceof InvalidTokenError) || err.message !== NO_KEY || !sql || Date.now() - lastReload < UNKNOWN_KID_RELOAD_MS) throw err;
        await reload();
        return current.verify(token);
      }
    },

    async apiKey(role) {
      // `ref` tells an API key from an access token (which never has it), as
      // Supabase's keys carry their project's ref. API keys stay with the
      // shared secret (or JWT_SIGNING_KEYS' first key): a rotation of the
      // database's keys leaves them valid.
      return sign({ role, ref: 'api-key' }, apiKeySigner).setExpirationTime('3650d').sign(apiKeySigner.signKey!);
    },

    apiKeyRole: createApiKeyVerifier(staticKeys, { issuer }),

    jwks: () => current.jwks,

    async start() {
      if (!sql || started) return;
      current = keySetOf(await loadDbKeys(sql));
      lastReload = Date.now();
      started = true;
      timer = setInterval(() => void reload(), RELOAD_EVERY_MS);
      timer.unref();
      listener = await watchSigningKeys(options.listenSql ?? sql, () => void reload());
    },

    async close() {
      if (timer) clearInterval(timer);
      await listener?.unlisten().catch(() => {});
    },
  };
}

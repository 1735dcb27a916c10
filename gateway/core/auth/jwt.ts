// Access tokens: JWTs signed with jose and verified with fast-jwt.
//
// Keys, in order of preference:
//   JWT_SIGNING_KEYS  one JWK or an array of JWKs with their private parts
//                     (e.g. from `supabase gen signing-key`); the first signs,
//                     all verify, so keys can be rotated
//   JWT_SECRET        a shared HS256 secret (at least 32 characters), e.g. a
//                     Supabase project's legacy JWT secret
//   neither           a random HS256 secret generated once and kept in
//                     DATA_DIR/jwt-secret (development)
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
import { makeDataFolder } from '../process/data-folder.ts';
import { VerifiedTokenCache } from './verified-tokens.ts';

export const AUDIENCE = 'authenticated';

export interface AccessClaims extends JWTPayload {
  sub: string;
  role: 'authenticated';
  email?: string;
  session_id?: string;
  /** A guest's tokens: true (private.session_claims). */
  is_anonymous?: boolean;
}

export interface IssuedToken {
  accessToken: string;
  expiresIn: number;
}

/** The roles of the API keys (docs/supabase-sdks.md#api-keys): what Supabase calls the anon key and the service-role key. */
export type ApiKeyRole = 'anon' | 'service_role';

export interface TokenService {
  /** `claims`: what SQL says the session's tokens carry besides (private.session_claims: is_anonymous), signed as given. */
  issue(user: { id: string; email: string; sessionId: string; claims?: Record<string, unknown> }): Promise<IssuedToken>;
  /** Verified claims, or throws InvalidTokenError. */
  verify(token: string): Promise<AccessClaims>;
  /** An API key as Supabase issues them: a JWT of role `anon` or `service_role`, signed with the service's key, valid ten years. */
  apiKey(role: ApiKeyRole): Promise<string>;
  /** The role of a valid API key (the `apikey` header), or null: its signature, issuer and expiry checked. */
  apiKeyRole(key: string): ApiKeyRole | null;
}

export class InvalidTokenError extends Error {}

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
      const publicJwk: JWK = { ...(jwk as JWK) };
      for (const field of PRIVATE_JWK_FIELDS) delete publicJwk[field];
      await importJWK(publicJwk, alg); // refuses a key that does not fit its alg, at start
      return {
        kid: jwk.kid,
        alg,
        signKey: 'd' in jwk ? await importJWK(jwk as JWK, alg) : undefined,
        material: crypto.createPublicKey({ key: publicJwk as crypto.JsonWebKey, format: 'jwk' }).export({ type: 'spki', format: 'pem' }) as string,
      };
    }),
  );
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
    if (!match) throw new InvalidTokenError('no key for this token');
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

export async function createTokenService(config: Config): Promise<TokenService> {
  const keys: KeyEntry[] = [];
  if (config.jwtSigningKeys) keys.push(...(await keysFromJwks(config.jwtSigningKeys)));
  const sharedSecret = async (text: string): Promise<KeyEntry> => {
    const secret = Buffer.from(text, 'utf8');
    return { kid: undefined, alg: 'HS256', signKey: await hmacKey(secret, 'HS256'), material: secret };
  };
  if (config.jwtSecret) {
    if (config.jwtSecret.length < 32) throw new Error('JWT_SECRET must be at least 32 characters');
    keys.push(await sharedSecret(config.jwtSecret));
  }
  if (keys.length === 0) keys.push(await sharedSecret(devSecret(config.dataDir)));
  const signer = keys.find((k) => k.signKey);
  if (!signer?.signKey) throw new Error('no JWT key can sign: give a private JWK or JWT_SECRET');
  const signKey = signer.signKey;
  const issuer = `${config.publicUrl}/api/auth`;
  const ttl = config.accessTokenTtlSeconds;
  const verify = createAccessTokenVerifier(keys, { issuer });
  const apiKeyRole = createApiKeyVerifier(keys, { issuer });

  return {
    async issue(user) {
      const token = await new SignJWT({ ...user.claims, role: 'authenticated', email: user.email, session_id: user.sessionId })
        .setProtectedHeader(signer.kid ? { alg: signer.alg, kid: signer.kid, typ: 'JWT' } : { alg: signer.alg, typ: 'JWT' })
        .setSubject(user.id)
        .setAudience(AUDIENCE)
        .setIssuer(issuer)
        .setIssuedAt()
        .setExpirationTime(`${ttl}s`)
        .sign(signKey);
      return { accessToken: token, expiresIn: ttl };
    },

    async verify(token) {
      return verify(token);
    },

    async apiKey(role) {
      // `ref` tells an API key from an access token (which never has it), as
      // Supabase's keys carry their project's ref.
      return new SignJWT({ role, ref: 'api-key' })
        .setProtectedHeader(signer.kid ? { alg: signer.alg, kid: signer.kid, typ: 'JWT' } : { alg: signer.alg, typ: 'JWT' })
        .setIssuer(issuer)
        .setIssuedAt()
        .setExpirationTime('3650d')
        .sign(signKey);
    },

    apiKeyRole,
  };
}

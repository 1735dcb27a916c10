// Access tokens: JWTs signed and verified with jose.
//
// Keys, in order of preference:
//   JWT_SIGNING_KEYS  one JWK or an array of JWKs with their private parts
//                     (e.g. from `supabase gen signing-key`); the first signs,
//                     all verify, so keys can be rotated
//   JWT_SECRET        a shared HS256 secret (at least 32 characters), e.g. a
//                     Supabase project's legacy JWT secret
//   neither           a random HS256 secret generated once and kept in
//                     DATA_DIR/jwt-secret (development)
// Verification accepts only the algorithms of the configured keys (never
// `none`), checks the signature, expiry, audience and issuer, and requires a
// uuid `sub`. Tokens signed with a shared secret (HS256/384/512) are
// verified with node:crypto (jwt-hmac.ts: WebCrypto made each new token cost
// a stream opening ~0.4 ms of the gateway's thread); the others by jose.
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { errors as joseErrors, importJWK, jwtVerify, SignJWT, type JWK, type JWTHeaderParameters, type JWTPayload } from 'jose';
import { z } from 'zod';
import type { Config } from './config.ts';
import { HmacTokenError, isHmacAlgorithm, protectedHeader, verifyHmacToken, type HmacKey } from './jwt-hmac.ts';
import { VerifiedTokenCache } from './verified-tokens.ts';
import { makeDataFolder } from './data-folder.ts';

export const AUDIENCE = 'authenticated';

export interface AccessClaims extends JWTPayload {
  sub: string;
  role: 'authenticated';
  email?: string;
  session_id?: string;
}

export interface IssuedToken {
  accessToken: string;
  expiresIn: number;
}

export interface TokenService {
  issue(user: { id: string; email: string; sessionId: string }): Promise<IssuedToken>;
  /** Verified claims, or throws InvalidTokenError. */
  verify(token: string): Promise<AccessClaims>;
}

export class InvalidTokenError extends Error {}

const Uuid = z.uuid();

type VerifyKey = Awaited<ReturnType<typeof importJWK>> | CryptoKey;

/**
 * A shared secret as a WebCrypto HMAC key, imported once: given the raw
 * bytes, jose imports them again on every verification (a measurable part
 * of opening a stream).
 */
function hmacKey(secret: Uint8Array, alg: string): Promise<CryptoKey> {
  const hash = { HS256: 'SHA-256', HS384: 'SHA-384', HS512: 'SHA-512' }[alg];
  if (!hash) throw new Error(`unsupported algorithm ${alg} for a shared secret`);
  return crypto.webcrypto.subtle.importKey('raw', secret, { name: 'HMAC', hash }, false, ['sign', 'verify']);
}

interface KeyEntry {
  kid: string | undefined;
  alg: string;
  signKey?: VerifyKey;
  verifyKey: VerifyKey;
  /** A shared secret's bytes (HS* keys), for jwt-hmac.ts. */
  secret?: Uint8Array;
}

const PRIVATE_JWK_FIELDS = ['d', 'p', 'q', 'dp', 'dq', 'qi', 'k'] as const;
const JwkSchema = z
  .object({ kty: z.string(), alg: z.string().optional(), kid: z.string().optional() })
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
      const full = jwk as JWK;
      if (jwk.kty === 'oct') {
        const imported = await importJWK(full, alg);
        if (!(imported instanceof Uint8Array)) return { kid: jwk.kid, alg, signKey: imported, verifyKey: imported };
        const key = await hmacKey(imported, alg);
        return { kid: jwk.kid, alg, signKey: key, verifyKey: key, secret: imported };
      }
      const publicJwk: JWK = { ...full };
      for (const field of PRIVATE_JWK_FIELDS) delete publicJwk[field];
      return {
        kid: jwk.kid,
        alg,
        signKey: 'd' in jwk ? await importJWK(full, alg) : undefined,
        verifyKey: await importJWK(publicJwk, alg),
      };
    }),
  );
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
  if (config.jwtSecret) {
    if (config.jwtSecret.length < 32) throw new Error('JWT_SECRET must be at least 32 characters');
    const secret = new TextEncoder().encode(config.jwtSecret);
    const key = await hmacKey(secret, 'HS256');
    keys.push({ kid: undefined, alg: 'HS256', signKey: key, verifyKey: key, secret });
  }
  if (keys.length === 0) {
    const secret = new TextEncoder().encode(devSecret(config.dataDir));
    const key = await hmacKey(secret, 'HS256');
    keys.push({ kid: undefined, alg: 'HS256', signKey: key, verifyKey: key, secret });
  }
  const signer = keys.find((k) => k.signKey);
  if (!signer?.signKey) throw new Error('no JWT key can sign: give a private JWK or JWT_SECRET');
  const signKey = signer.signKey;
  const algorithms = [...new Set(keys.map((k) => k.alg))];
  const issuer = `${config.publicUrl}/api/auth`;
  const ttl = config.accessTokenTtlSeconds;
  const verified = new VerifiedTokenCache<AccessClaims>();
  const claimsOptions = { algorithms, audience: AUDIENCE, issuer, requiredClaims: ['sub', 'exp'] };
  const hmacKeys: HmacKey[] = keys.flatMap((k) => (k.secret && isHmacAlgorithm(k.alg) ? [{ alg: k.alg, kid: k.kid, secret: k.secret }] : []));

  const keyFor = (header: JWTHeaderParameters): VerifyKey => {
    const match = keys.find((k) => k.alg === header.alg && (!header.kid || !k.kid || k.kid === header.kid));
    if (!match) throw new InvalidTokenError('no key for this token');
    return match.verifyKey;
  };

  return {
    async issue(user) {
      const token = await new SignJWT({ role: 'authenticated', email: user.email, session_id: user.sessionId })
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
      const cached = verified.get(token);
      if (cached) return cached;
      try {
        const payload = isHmacAlgorithm(protectedHeader(token).alg)
          ? verifyHmacToken(token, hmacKeys, claimsOptions)
          : (await jwtVerify(token, keyFor, claimsOptions)).payload;
        if (payload.role !== 'authenticated' || !Uuid.safeParse(payload.sub).success) {
          throw new InvalidTokenError('token is not a user access token');
        }
        return verified.set(token, payload as AccessClaims);
      } catch (err) {
        if (err instanceof InvalidTokenError) throw err;
        if (err instanceof joseErrors.JWTExpired || (err instanceof HmacTokenError && err.expired)) {
          throw new InvalidTokenError('token has expired');
        }
        // Whatever else a malformed token makes jose throw, it is not valid.
        throw new InvalidTokenError('invalid token');
      }
    },
  };
}

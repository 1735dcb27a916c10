// fast-jwt (gateway/core/auth/jwt.ts createAccessTokenVerifier) against jose's
// jwtVerify with the same keys and options plus the user check the gateway
// always made (role `authenticated`, a uuid `sub`): every token gets the same
// verdict from both (accepted, expired or refused), crafted edge cases and
// random claim sets alike, for a shared secret and for asymmetric keys. The
// clock is pinned half-way through a second on both sides.
//
// Where they may differ, by design, each checked on its own:
//   * fast-jwt checks `exp` before `iss`, `aud` and the type of `iat`, jose
//     after: a token that is expired AND wrong otherwise is "expired" for
//     fast-jwt, "refused" for jose (both refuse it; only the message differs);
//   * fast-jwt is stricter where no issuer of access tokens goes: a `crit`
//     header (jose understands `b64`), base64 padding or whitespace, an
//     `aud` array holding a non-string.
import crypto from 'node:crypto';
import fc from 'fast-check';
import { errors as joseErrors, jwtVerify } from 'jose';
import { describe, expect, it } from 'vitest';
import { createAccessTokenVerifier, InvalidTokenError, type VerifierKey } from '../../gateway/core/auth/jwt.ts';

const ISSUER = 'https://example.test/api/auth';
const NOW_MS = Math.floor(Date.now() / 1000) * 1000 + 500;
const NOW = Math.floor(NOW_MS / 1000);
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

type Verdict = 'accepted' | 'expired' | 'refused';

interface Key {
  alg: 'HS256' | 'ES256' | 'RS256';
  /** Signs a JWS signing input. */
  sign(input: string, hash?: string): Buffer;
  /** What fast-jwt verifies with. */
  verifier: VerifierKey;
  /** What jose verifies with. */
  jose: crypto.KeyObject | crypto.webcrypto.CryptoKey;
}

const SECRET = Buffer.from('a-shared-secret-of-at-least-32-characters');
const hs256: Key = {
  alg: 'HS256',
  sign: (input, hash = 'sha256') => crypto.createHmac(hash, SECRET).update(input).digest(),
  verifier: { alg: 'HS256', kid: undefined, material: SECRET },
  jose: await crypto.webcrypto.subtle.importKey('raw', SECRET, { name: 'HMAC', hash: 'SHA-256' }, false, ['verify']),
};

function asymmetric(alg: 'ES256' | 'RS256'): Key {
  const { privateKey, publicKey } =
    alg === 'ES256' ? crypto.generateKeyPairSync('ec', { namedCurve: 'P-256' }) : crypto.generateKeyPairSync('rsa', { modulusLength: 2048 });
  return {
    alg,
    sign: (input) => crypto.sign('sha256', Buffer.from(input), alg === 'ES256' ? { key: privateKey, dsaEncoding: 'ieee-p1363' } : privateKey),
    verifier: { alg, kid: undefined, material: publicKey.export({ type: 'spki', format: 'pem' }) as string },
    jose: publicKey,
  };
}
const es256 = asymmetric('ES256');
const rs256 = asymmetric('RS256');

const b64 = (bytes: Buffer | string) => Buffer.from(bytes).toString('base64url');

/** A compact JWS of exactly these header and payload bytes, signed with the key. */
function token(key: Key, header: unknown, payload: unknown, { hash, rawPayload }: { hash?: string; rawPayload?: Buffer } = {}): string {
  const input = `${b64(JSON.stringify(header))}.${b64(rawPayload ?? JSON.stringify(payload))}`;
  return `${input}.${b64(key.sign(input, hash))}`;
}

const good = () => ({ sub: crypto.randomUUID(), role: 'authenticated', aud: 'authenticated', iss: ISSUER, iat: NOW, exp: NOW + 600 });

function byFastJwt(key: Key, t: string): Verdict {
  const verify = createAccessTokenVerifier([key.verifier], { issuer: ISSUER, cacheSize: 0, clockTimestamp: NOW_MS });
  try {
    verify(t);
    return 'accepted';
  } catch (err) {
    if (!(err instanceof InvalidTokenError)) throw err; // anything else is a bug
    return err.message === 'token has expired' ? 'expired' : 'refused';
  }
}

async function byJose(key: Key, t: string): Promise<Verdict> {
  try {
    const { payload } = await jwtVerify(t, key.jose, {
      algorithms: [key.alg],
      audience: 'authenticated',
      issuer: ISSUER,
      requiredClaims: ['sub', 'exp'],
      currentDate: new Date(NOW_MS),
    });
    return payload.role === 'authenticated' && typeof payload.sub === 'string' && UUID.test(payload.sub) ? 'accepted' : 'refused';
  } catch (err) {
    return err instanceof joseErrors.JWTExpired ? 'expired' : 'refused';
  }
}

/** The claims of a token, if its payload is a JSON object. */
function claimsOf(t: string): Record<string, unknown> | undefined {
  try {
    const claims: unknown = JSON.parse(Buffer.from(t.split('.')[1] ?? '', 'base64url').toString());
    return typeof claims === 'object' && claims !== null ? (claims as Record<string, unknown>) : undefined;
  } catch {
    return undefined;
  }
}

/** Same verdict, or the one ordering difference: expired (fast-jwt) where jose refused an expired token for another reason. */
async function expectSameVerdict(key: Key, t: string): Promise<void> {
  const fast = byFastJwt(key, t);
  const jose = await byJose(key, t);
  if (fast === 'expired' && jose === 'refused') {
    const exp = claimsOf(t)?.exp;
    expect(typeof exp === 'number' && exp <= NOW, `fast-jwt says expired, jose refused, for ${t}`).toBe(true);
    return;
  }
  expect(fast, t).toBe(jose);
}

const flip = (t: string) => t.slice(0, -2) + (t.at(-2) === 'A' ? 'B' : 'A') + t.at(-1);
const HS256 = { alg: 'HS256', typ: 'JWT' };

const hmacCases: Record<string, () => string> = {
  valid: () => token(hs256, HS256, good()),
  'no typ header': () => token(hs256, { alg: 'HS256' }, good()),
  'a kid header': () => token(hs256, { ...HS256, kid: 'any' }, good()),
  'aud as an array holding it': () => token(hs256, HS256, { ...good(), aud: ['other', 'authenticated'] }),
  expired: () => token(hs256, HS256, { ...good(), exp: NOW - 10 }),
  'exp is now': () => token(hs256, HS256, { ...good(), exp: NOW }),
  'exp a second from now': () => token(hs256, HS256, { ...good(), exp: NOW + 1 }),
  'exp as a string': () => token(hs256, HS256, { ...good(), exp: String(NOW + 600) }),
  'exp null': () => token(hs256, HS256, { ...good(), exp: null }),
  'nbf in the future': () => token(hs256, HS256, { ...good(), nbf: NOW + 60 }),
  'nbf a second from now': () => token(hs256, HS256, { ...good(), nbf: NOW + 1 }),
  'nbf is now': () => token(hs256, HS256, { ...good(), nbf: NOW }),
  'nbf in the past': () => token(hs256, HS256, { ...good(), nbf: NOW - 60 }),
  'nbf as a string': () => token(hs256, HS256, { ...good(), nbf: 'yesterday' }),
  'iat as a string': () => token(hs256, HS256, { ...good(), iat: 'now' }),
  'iat in the future': () => token(hs256, HS256, { ...good(), iat: NOW + 3600 }),
  'no exp': () => token(hs256, HS256, { ...good(), exp: undefined }),
  'no sub': () => token(hs256, HS256, { ...good(), sub: undefined }),
  'sub not a uuid': () => token(hs256, HS256, { ...good(), sub: 'admin' }),
  'role anon': () => token(hs256, HS256, { ...good(), role: 'anon' }),
  'role service_role': () => token(hs256, HS256, { ...good(), role: 'service_role' }),
  'no role': () => token(hs256, HS256, { ...good(), role: undefined }),
  'no aud': () => token(hs256, HS256, { ...good(), aud: undefined }),
  'no iss': () => token(hs256, HS256, { ...good(), iss: undefined }),
  'wrong aud': () => token(hs256, HS256, { ...good(), aud: 'anon' }),
  'aud array without it': () => token(hs256, HS256, { ...good(), aud: ['anon'] }),
  'empty aud array': () => token(hs256, HS256, { ...good(), aud: [] }),
  'wrong iss': () => token(hs256, HS256, { ...good(), iss: 'https://evil.test/api/auth' }),
  'iss with a trailing slash': () => token(hs256, HS256, { ...good(), iss: `${ISSUER}/` }),
  'expired and wrong aud': () => token(hs256, HS256, { ...good(), aud: 'anon', exp: NOW - 10 }),
  'wrong secret': () => token({ ...hs256, sign: (input) => crypto.createHmac('sha256', 'another-secret-of-at-least-32-chars!').update(input).digest() }, HS256, good()),
  'tampered signature': () => flip(token(hs256, HS256, good())),
  'tampered payload': () => {
    const [h, , s] = token(hs256, HS256, good()).split('.');
    return `${h}.${b64(JSON.stringify({ ...good(), sub: crypto.randomUUID() }))}.${s}`;
  },
  'no signature': () => token(hs256, HS256, good()).replace(/\.[^.]*$/, '.'),
  'alg none': () => `${b64(JSON.stringify({ alg: 'none' }))}.${b64(JSON.stringify(good()))}.`,
  'alg none with a signature': () => `${b64(JSON.stringify({ alg: 'none' }))}.${b64(JSON.stringify(good()))}.${b64('x')}`,
  'alg HS512 (not allowed)': () => token(hs256, { alg: 'HS512' }, good(), { hash: 'sha512' }),
  'alg HS384 (not allowed)': () => token(hs256, { alg: 'HS384' }, good(), { hash: 'sha384' }),
  'alg RS256 signed with the secret': () => token(hs256, { alg: 'RS256' }, good()),
  'alg hs256 (lower case)': () => token(hs256, { alg: 'hs256' }, good()),
  'alg missing': () => token(hs256, { typ: 'JWT' }, good()),
  'header is an array': () => token(hs256, ['HS256'], good()),
  'header is not JSON': () => `${b64('{alg')}.${b64(JSON.stringify(good()))}.${b64('x')}`,
  'claims are an array': () => token(hs256, HS256, [good()]),
  'claims are a string': () => token(hs256, HS256, 'claims'),
  'claims are not UTF-8': () => token(hs256, HS256, null, { rawPayload: Buffer.from([0x7b, 0xff, 0x7d]) }),
  'claims are not JSON': () => token(hs256, HS256, null, { rawPayload: Buffer.from('not json') }),
  'two parts': () => token(hs256, HS256, good()).split('.').slice(0, 2).join('.'),
  'four parts': () => `${token(hs256, HS256, good())}.x`,
  'one part': () => 'abc',
  empty: () => '',
};

describe('fast-jwt gives the verdicts jose gives', () => {
  for (const [name, make] of Object.entries(hmacCases)) {
    it(`HS256: ${name}`, async () => {
      await expectSameVerdict(hs256, make());
    });
  }

  it('the crafted cases include acceptances, expiries and refusals (so agreement means something)', async () => {
    const verdicts = await Promise.all(Object.values(hmacCases).map((make) => byJose(hs256, make())));
    expect(new Set(verdicts)).toEqual(new Set(['accepted', 'expired', 'refused']));
    expect(verdicts.filter((v) => v === 'accepted').length).toBeGreaterThanOrEqual(5);
  });

  for (const key of [es256, rs256]) {
    const header = { alg: key.alg, typ: 'JWT' };
    const cases: Record<string, () => string> = {
      valid: () => token(key, header, good()),
      expired: () => token(key, header, { ...good(), exp: NOW - 1 }),
      'wrong aud': () => token(key, header, { ...good(), aud: 'anon' }),
      'tampered signature': () => flip(token(key, header, good())),
      'tampered payload': () => {
        const [h, , s] = token(key, header, good()).split('.');
        return `${h}.${b64(JSON.stringify({ ...good(), sub: crypto.randomUUID() }))}.${s}`;
      },
      'signed by another key': () => token(asymmetric(key.alg as 'ES256' | 'RS256'), header, good()),
      'alg none': () => `${b64(JSON.stringify({ alg: 'none' }))}.${b64(JSON.stringify(good()))}.`,
      // Algorithm confusion: an HMAC made with the public key's PEM as the secret.
      'alg HS256 signed with the public key': () =>
        token({ ...key, sign: (input) => crypto.createHmac('sha256', key.verifier.material).update(input).digest() }, HS256, good()),
      'alg PS256 (not allowed)': () => token(key, { alg: 'PS256' }, good()),
    };
    for (const [name, make] of Object.entries(cases)) {
      it(`${key.alg}: ${name}`, async () => {
        await expectSameVerdict(key, make());
      });
    }
    it(`${key.alg}: accepts its own token and refuses the confused one`, async () => {
      expect(byFastJwt(key, cases.valid!())).toBe('accepted');
      expect(byFastJwt(key, cases['alg HS256 signed with the public key']!())).toBe('refused');
    });
  }

  it('agrees with jose on random claim sets, algorithms and signatures', async () => {
    const claim = <T>(right: T, ...wrong: unknown[]) => fc.constantFrom<unknown>(right, undefined, ...wrong);
    await fc.assert(
      fc.asyncProperty(
        fc.record({
          sub: claim(crypto.randomUUID(), 42, '', 'not-a-uuid'),
          role: claim('authenticated', 'anon', null),
          aud: claim('authenticated', ['authenticated'], ['x', 'authenticated'], 'anon', [], null),
          iss: claim(ISSUER, `${ISSUER}/`, 7),
          exp: claim(NOW + 600, NOW - 1, NOW, NOW + 1, `${NOW + 600}`, 1e999, null),
          nbf: claim(NOW - 5, NOW, NOW + 1, NOW + 5, 'x', null),
          iat: claim(NOW, NOW + 100, '1', true),
        }),
        fc.constantFrom<unknown>('HS256', 'HS384', 'none', '', 1, 'RS256'),
        fc.boolean(),
        async (claims, alg, tamper) => {
          const t0 = token(hs256, { alg, typ: 'JWT' }, claims, { hash: alg === 'HS384' ? 'sha384' : 'sha256' });
          await expectSameVerdict(hs256, tamper ? flip(t0) : t0);
        },
      ),
      { numRuns: 500 },
    );
  });

  // Where fast-jwt is stricter than jose: no issuer of access tokens sends these.
  const stricter: Record<string, () => string> = {
    'a crit header (jose understands b64)': () => token(hs256, { alg: 'HS256', crit: ['b64'], b64: true }, good()),
    'base64 padding (RFC 7515 has none)': () => `${token(hs256, HS256, good())}=`,
    'whitespace in a part': () => `${token(hs256, HS256, good()).slice(0, -4)} ${token(hs256, HS256, good()).slice(-4)}`,
    'an aud array holding a non-string': () => token(hs256, HS256, { ...good(), aud: ['authenticated', 5] }),
  };
  for (const [name, make] of Object.entries(stricter)) {
    it(`refuses ${name}`, () => {
      expect(byFastJwt(hs256, make())).toBe('refused');
    });
  }
});

describe('several keys', () => {
  const other: Key = { ...hs256, verifier: { ...hs256.verifier, kid: 'b', material: Buffer.from('another-secret-of-at-least-32-chars!') } };
  const keys = [{ ...hs256.verifier, kid: 'a' }, other.verifier, es256.verifier];
  const verify = createAccessTokenVerifier(keys, { issuer: ISSUER, cacheSize: 0, clockTimestamp: NOW_MS });

  it('uses the key the header names by alg and kid, and no other', () => {
    expect(verify(token(hs256, { alg: 'HS256', kid: 'a' }, good())).role).toBe('authenticated');
    expect(verify(token(es256, { alg: 'ES256', kid: 'anything' }, good())).role).toBe('authenticated');
    // Signed with key a but naming key b: b's verifier refuses it.
    expect(() => verify(token(hs256, { alg: 'HS256', kid: 'b' }, good()))).toThrow(InvalidTokenError);
    // No kid: the first HS256 key (a).
    expect(verify(token(hs256, HS256, good())).role).toBe('authenticated');
    expect(() => verify(token(hs256, { alg: 'HS384', kid: 'a' }, good(), { hash: 'sha384' }))).toThrow('no key for this token');
    expect(() => verify('not.a.token')).toThrow(InvalidTokenError);
    expect(() => verify('')).toThrow(InvalidTokenError);
  });
});

describe('the cache of verified tokens', () => {
  it('answers a token it verified with the same frozen claims, and never past exp', async () => {
    const verify = createAccessTokenVerifier([hs256.verifier], { issuer: ISSUER });
    const now = Math.floor(Date.now() / 1000);
    // Expires at the next whole second but one: verified now, cached, then refused once exp has passed.
    const t = token(hs256, HS256, { ...good(), iat: now, exp: now + 2 });
    const first = verify(t);
    expect(Object.isFrozen(first)).toBe(true);
    expect(verify(t)).toBe(first);
    await new Promise((r) => setTimeout(r, (now + 2) * 1000 - Date.now() + 5));
    expect(() => verify(t)).toThrow('token has expired');
  });

  it('does not remember a refusal as an acceptance, nor an acceptance for a changed token', () => {
    const verify = createAccessTokenVerifier([hs256.verifier], { issuer: ISSUER });
    const t = token(hs256, HS256, good());
    expect(verify(t).role).toBe('authenticated');
    expect(() => verify(flip(t))).toThrow(InvalidTokenError);
    expect(() => verify(flip(t))).toThrow(InvalidTokenError);
    expect(verify(t).role).toBe('authenticated');
  });
});

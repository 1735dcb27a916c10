// The node:crypto verifier of HMAC-signed tokens (gateway/core/jwt-hmac.ts)
// against jose's jwtVerify with the same key and options: every token gets
// the same verdict from both (accepted, expired, or refused), crafted edge
// cases and random claim sets alike. Where it is stricter (a `crit` header,
// base64 padding or whitespace) is checked on its own.
import crypto from 'node:crypto';
import fc from 'fast-check';
import { errors as joseErrors, jwtVerify } from 'jose';
import { describe, expect, it } from 'vitest';
import { HmacTokenError, verifyHmacToken, type HmacKey } from '../../gateway/core/jwt-hmac.ts';

const SECRET = new TextEncoder().encode('a-shared-secret-of-at-least-32-characters');
const KEY: HmacKey = { alg: 'HS256', kid: undefined, secret: SECRET };
const OPTIONS = { algorithms: ['HS256'], audience: 'authenticated', issuer: 'https://example.test/api/auth', requiredClaims: ['sub', 'exp'] };
const cryptoKey = await crypto.webcrypto.subtle.importKey('raw', SECRET, { name: 'HMAC', hash: 'SHA-256' }, false, ['verify']);
const now = () => Math.floor(Date.now() / 1000);

const b64 = (bytes: Buffer | string) => Buffer.from(bytes).toString('base64url');

/** A compact JWS of exactly these header and payload bytes, signed (or not) with the secret. */
function token(header: unknown, payload: unknown, { hash = 'sha256', rawPayload }: { hash?: string; rawPayload?: Buffer } = {}): string {
  const input = `${b64(JSON.stringify(header))}.${b64(rawPayload ?? JSON.stringify(payload))}`;
  return `${input}.${b64(crypto.createHmac(hash, SECRET).update(input).digest())}`;
}

const good = () => ({ sub: crypto.randomUUID(), role: 'authenticated', aud: 'authenticated', iss: OPTIONS.issuer, iat: now(), exp: now() + 600 });
const HS256 = { alg: 'HS256', typ: 'JWT' };

type Verdict = 'accepted' | 'expired' | 'refused';

async function byJose(t: string): Promise<Verdict> {
  try {
    await jwtVerify(t, cryptoKey, OPTIONS);
    return 'accepted';
  } catch (err) {
    return err instanceof joseErrors.JWTExpired ? 'expired' : 'refused';
  }
}

function byNode(t: string): Verdict {
  try {
    verifyHmacToken(t, [KEY], OPTIONS);
    return 'accepted';
  } catch (err) {
    if (!(err instanceof HmacTokenError)) throw err; // anything else is a bug
    return err.expired ? 'expired' : 'refused';
  }
}

const flip = (t: string) => t.slice(0, -2) + (t.at(-2) === 'A' ? 'B' : 'A') + t.at(-1);

describe('HMAC token verification matches jose', () => {
  const cases: Record<string, () => string> = {
    valid: () => token(HS256, good()),
    'no typ header': () => token({ alg: 'HS256' }, good()),
    'aud as an array holding it': () => token(HS256, { ...good(), aud: ['other', 'authenticated'] }),
    expired: () => token(HS256, { ...good(), exp: now() - 10 }),
    'exp is now': () => token(HS256, { ...good(), exp: now() }),
    'exp as a string': () => token(HS256, { ...good(), exp: String(now() + 600) }),
    'nbf in the future': () => token(HS256, { ...good(), nbf: now() + 60 }),
    'nbf in the past': () => token(HS256, { ...good(), nbf: now() - 60 }),
    'nbf as a string': () => token(HS256, { ...good(), nbf: 'yesterday' }),
    'iat as a string': () => token(HS256, { ...good(), iat: 'now' }),
    'iat in the future': () => token(HS256, { ...good(), iat: now() + 3600 }),
    'no exp': () => token(HS256, { ...good(), exp: undefined }),
    'no sub': () => token(HS256, { ...good(), sub: undefined }),
    'no aud': () => token(HS256, { ...good(), aud: undefined }),
    'no iss': () => token(HS256, { ...good(), iss: undefined }),
    'wrong aud': () => token(HS256, { ...good(), aud: 'anon' }),
    'aud array without it': () => token(HS256, { ...good(), aud: ['anon'] }),
    'wrong iss': () => token(HS256, { ...good(), iss: 'https://evil.test/api/auth' }),
    'expired and wrong aud': () => token(HS256, { ...good(), aud: 'anon', exp: now() - 10 }),
    'tampered signature': () => flip(token(HS256, good())),
    'tampered payload': () => {
      const [h, , s] = token(HS256, good()).split('.');
      return `${h}.${b64(JSON.stringify({ ...good(), sub: crypto.randomUUID() }))}.${s}`;
    },
    'no signature': () => token(HS256, good()).replace(/\.[^.]*$/, '.'),
    'alg none': () => `${b64(JSON.stringify({ alg: 'none' }))}.${b64(JSON.stringify(good()))}.`,
    'alg HS512 (not allowed)': () => token({ alg: 'HS512' }, good(), { hash: 'sha512' }),
    'alg hs256 (lower case)': () => token({ alg: 'hs256' }, good()),
    'alg missing': () => token({ typ: 'JWT' }, good()),
    'header is an array': () => token(['HS256'], good()),
    'claims are an array': () => token(HS256, [good()]),
    'claims are not UTF-8': () => token(HS256, null, { rawPayload: Buffer.from([0x7b, 0xff, 0x7d]) }),
    'claims are not JSON': () => token(HS256, null, { rawPayload: Buffer.from('not json') }),
    'two parts': () => token(HS256, good()).split('.').slice(0, 2).join('.'),
    'four parts': () => `${token(HS256, good())}.x`,
    empty: () => '',
  };

  for (const [name, make] of Object.entries(cases)) {
    it(name, async () => {
      const t = make();
      expect(byNode(t)).toBe(await byJose(t));
    });
  }

  it('the crafted cases include acceptances, expiries and refusals (so agreement means something)', async () => {
    const verdicts = new Set(await Promise.all(Object.values(cases).map((make) => byJose(make()))));
    expect(verdicts).toEqual(new Set(['accepted', 'expired', 'refused']));
  });

  it('agrees with jose on random claim sets and signatures', async () => {
    const claim = <T>(right: T, ...wrong: unknown[]) => fc.constantFrom<unknown>(right, undefined, ...wrong);
    await fc.assert(
      fc.asyncProperty(
        fc.record({
          sub: claim(crypto.randomUUID(), 42, ''),
          aud: claim('authenticated', ['authenticated'], ['x', 'authenticated'], 'anon', [], null),
          iss: claim(OPTIONS.issuer, `${OPTIONS.issuer}/`, 7),
          exp: claim(now() + 600, now() - 1, now(), `${now() + 600}`, 1e999, null),
          nbf: claim(now() - 5, now() + 5, 'x', null),
          iat: claim(now(), now() + 100, '1', true),
        }),
        fc.constantFrom<unknown>('HS256', 'HS384', 'none', '', 1),
        fc.boolean(),
        async (claims, alg, tamper) => {
          const t0 = token({ alg, typ: 'JWT' }, claims, { hash: alg === 'HS384' ? 'sha384' : 'sha256' });
          const t = tamper ? flip(t0) : t0;
          expect(byNode(t)).toBe(await byJose(t));
        },
      ),
      { numRuns: 400 },
    );
  });

  // Where it is stricter than jose: no issuer of access tokens sends these.
  const stricter: Record<string, () => string> = {
    'a crit header (jose understands b64)': () => token({ alg: 'HS256', crit: ['b64'], b64: true }, good()),
    'base64 padding (RFC 7515 has none)': () => `${token(HS256, good())}=`,
    'whitespace in a part': () => `${token(HS256, good()).slice(0, -4)} ${token(HS256, good()).slice(-4)}`,
  };
  for (const [name, make] of Object.entries(stricter)) {
    it(`refuses ${name}`, async () => {
      const t = make();
      expect(byNode(t)).toBe('refused');
    });
  }

  it('uses a key only for its alg and kid', () => {
    const keyed: HmacKey = { ...KEY, kid: 'a' };
    expect(() => verifyHmacToken(token({ alg: 'HS256', kid: 'b' }, good()), [keyed], OPTIONS)).toThrow(HmacTokenError);
    expect(verifyHmacToken(token({ alg: 'HS256', kid: 'a' }, good()), [keyed], OPTIONS).role).toBe('authenticated');
    expect(() => verifyHmacToken(token(HS256, good()), [{ ...KEY, alg: 'HS512' }], { ...OPTIONS, algorithms: ['HS256', 'HS512'] })).toThrow(
      HmacTokenError,
    );
  });
});

// What verifying an access token costs the gateway's thread (no database):
// the token service (gateway/core/auth/jwt.ts) with each kind of key verifies
// BENCH_JWT_TOKENS tokens it has not seen (as when thousands of event
// streams open, each with a new token), then the same tokens again (the
// cache of verified tokens).
//
//   new, one by one   wall time per token, each verification awaited
//   new, all at once  all verifications started together; the event loop's
//                     busy time per token (what the gateway's one thread
//                     pays; work sent to the thread pool is not counted)
//   seen              wall time per token of a token already verified
import crypto from 'node:crypto';
import { performance } from 'node:perf_hooks';
import { exportJWK, generateKeyPair } from 'jose';
import { loadConfig } from '../../gateway/core/process/config.ts';
import { createTokenService, type TokenService } from '../../gateway/core/auth/jwt.ts';
import type { Bench } from './harness.ts';

const TOKENS = Number(process.env.BENCH_JWT_TOKENS ?? 5000);
const ROUNDS = Number(process.env.BENCH_REPEAT ?? 3);

async function signingKey(alg: 'ES256' | 'RS256'): Promise<string> {
  const { privateKey } = await generateKeyPair(alg, { extractable: true });
  return JSON.stringify({ ...(await exportJWK(privateKey)), kid: `bench-${alg}`, alg });
}

async function issueMany(tokens: TokenService, n: number): Promise<string[]> {
  const out: string[] = [];
  for (let i = 0; i < n; i++) {
    out.push((await tokens.issue({ id: crypto.randomUUID(), email: `b${i}@example.com`, sessionId: crypto.randomUUID() })).accessToken);
  }
  return out;
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

async function measure(env: Record<string, string>) {
  const oneByOne: number[] = [];
  const together: number[] = [];
  const seen: number[] = [];
  for (let round = 0; round < ROUNDS; round++) {
    // A fresh service each round: nothing verified yet.
    const tokens = await createTokenService(loadConfig({ ...env, DATA_DIR: '/nonexistent' }));
    const [a, b] = [await issueMany(tokens, TOKENS), await issueMany(tokens, TOKENS)];
    await tokens.verify(a[0]!); // warm up the code path
    let started = performance.now();
    for (const t of a) await tokens.verify(t);
    oneByOne.push(((performance.now() - started) * 1000) / TOKENS);

    const elu = performance.eventLoopUtilization();
    await Promise.all(b.map((t) => tokens.verify(t)));
    together.push((performance.eventLoopUtilization(elu).active * 1000) / TOKENS);

    started = performance.now();
    for (const t of a) await tokens.verify(t);
    seen.push(((performance.now() - started) * 1000) / TOKENS);
  }
  return { newOneByOneUs: median(oneByOne), newTogetherLoopUs: median(together), seenUs: median(seen) };
}

const bench: Bench = {
  name: 'jwt',
  description: `access token verification, ${TOKENS} new tokens per key kind, median of ${ROUNDS}`,
  async standalone() {
    const kinds: [string, Record<string, string>][] = [
      ['HS256 (JWT_SECRET)', { JWT_SECRET: crypto.randomBytes(32).toString('base64url') }],
      ['ES256 (JWT_SIGNING_KEYS)', { JWT_SIGNING_KEYS: await signingKey('ES256') }],
      ['RS256 (JWT_SIGNING_KEYS)', { JWT_SIGNING_KEYS: await signingKey('RS256') }],
    ];
    const results: Record<string, unknown> = {};
    console.log('key                       new, one by one µs  new, all at once: loop µs  seen µs');
    for (const [label, env] of kinds) {
      const r = await measure(env);
      results[label] = r;
      console.log(
        `${label.padEnd(26)}${r.newOneByOneUs.toFixed(1).padStart(18)}${r.newTogetherLoopUs.toFixed(1).padStart(27)}${r.seenUs.toFixed(2).padStart(9)}`,
      );
    }
    return results;
  },
};
export default bench;

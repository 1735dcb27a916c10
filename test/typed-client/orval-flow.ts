// A client program over the fetch client orval generates from
// /api/docs/openapi.json with `output.headers: true` (into generated/orval.ts,
// at test time, not committed): orval leaves every header parameter out of
// the functions it generates unless that option is on, the Idempotency-Key
// included. test/process/typed-client-orval.test.ts generates it, compiles this file
// with `tsc --strict` and runs it against the test gateway.
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import { getProfile, postAuthLogin, postAuthRegister, postHats } from './generated/orval.ts';

export async function orvalFlow(): Promise<{ replayed: string | null }> {
  const suffix = crypto.randomBytes(4).toString('hex');
  const email = `orval-${suffix}@example.com`;
  const password = `pw-${suffix}-orval`;
  const registered = await postAuthRegister({ email, password });
  assert.equal(registered.status, 201);
  const login = await postAuthLogin({ email, password });
  assert.ok(login.status === 200);
  const auth = { headers: { authorization: `Bearer ${login.data.access_token}` } };

  const profile = await getProfile(auth);
  assert.ok(profile.status === 200);
  assert.equal(profile.data.data.email, email);

  // The generated Idempotency-Key parameter: the same key twice, one hat.
  const key = crypto.randomUUID();
  const first = await postHats({ hat: { name: 'At work', hat_type: 'professional' } }, { 'Idempotency-Key': key }, auth);
  const second = await postHats({ hat: { name: 'At work', hat_type: 'professional' } }, { 'Idempotency-Key': key }, auth);
  assert.ok(first.status === 201 && second.status === 201);
  assert.equal(second.data.data.id, first.data.data.id);
  return { replayed: second.headers.get('idempotent-replayed') };
}

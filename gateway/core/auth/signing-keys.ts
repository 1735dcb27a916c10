// The asymmetric keys that sign access tokens, kept in Postgres
// (identity.signing_keys, sql/areas/jwks.sql) so that every process on every
// machine signs and verifies with the same set: made here (jose), stored and
// rotated by SQL, reloaded by each process when Postgres says the set changed
// (NOTIFY signing_keys_changed) and every minute.
import crypto from 'node:crypto';
import { exportJWK, generateKeyPair, type JWK } from 'jose';
import type { Sql } from '../database/pool.ts';

export const SIGNING_ALGORITHMS = ['ES256', 'RS256'] as const;
export type SigningAlgorithm = (typeof SIGNING_ALGORITHMS)[number];

/** A key as private.signing_keys_usable answers it: the private JWK only for the current key. */
export interface StoredSigningKey {
  kid: string;
  alg: SigningAlgorithm;
  status: 'current' | 'standby' | 'previous';
  public_jwk: JWK;
  private_jwk: JWK | null;
}

/** A new key pair: its id, and its public and private JWKs, each naming its kid and alg. */
export async function newSigningKey(alg: SigningAlgorithm): Promise<{ kid: string; alg: SigningAlgorithm; publicJwk: JWK; privateJwk: JWK }> {
  const { publicKey, privateKey } = await generateKeyPair(alg, { extractable: true, ...(alg === 'RS256' ? { modulusLength: 2048 } : {}) });
  const kid = crypto.randomUUID();
  const common = { kid, alg, use: 'sig' };
  return {
    kid,
    alg,
    publicJwk: { ...(await exportJWK(publicKey)), ...common, key_ops: ['verify'] },
    privateJwk: { ...(await exportJWK(privateKey)), ...common },
  };
}

/**
 * The keys this process verifies with (and signs with: the current one's
 * private JWK). On a database where none signs yet, the first process to
 * start makes an ES256 key the current one (the others wait for its lock and
 * take it).
 */
export async function loadSigningKeys(sql: Sql, tokenTtlSeconds: number): Promise<StoredSigningKey[]> {
  const usable = () => sql<StoredSigningKey[]>`select * from private.signing_keys_usable(${tokenTtlSeconds})`;
  let keys = await usable();
  if (!keys.some((k) => k.status === 'current')) {
    const made = await newSigningKey('ES256');
    await sql`select private.signing_key_first(${made.kid}, ${made.alg}, ${sql.json(made.publicJwk as never)}, ${sql.json(made.privateJwk as never)})`;
    keys = await usable();
  }
  return keys;
}

/** Calls onChange whenever the key set changes (and after the LISTEN connection comes back, when a change may have been missed). */
export async function watchSigningKeys(sql: Sql, onChange: () => void): Promise<{ unlisten(): Promise<void> }> {
  return sql.listen('signing_keys_changed', onChange, onChange);
}

// The token service with each kind of key configuration: a generated dev
// secret, JWT_SECRET, and JWT_SIGNING_KEYS (asymmetric, with rotation).
import fs from 'node:fs';
import path from 'node:path';
import { exportJWK, generateKeyPair } from 'jose';
import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../gateway/core/process/config.ts';
import { createTokenService, InvalidTokenError } from '../../gateway/core/auth/jwt.ts';
import { testDir } from '../support/test-dir.ts';

const user = { id: crypto.randomUUID(), email: 'a@example.com', sessionId: crypto.randomUUID() };

async function privateJwk(kid: string) {
  const { privateKey } = await generateKeyPair('ES256', { extractable: true });
  return { ...(await exportJWK(privateKey)), kid, alg: 'ES256' };
}

describe('token service', () => {
  it('generates a dev secret once and keeps it', async () => {
    const dir = path.join(testDir, `jwt-${crypto.randomUUID()}`);
    const a = await createTokenService(loadConfig({ DATA_DIR: dir }));
    const b = await createTokenService(loadConfig({ DATA_DIR: dir }));
    const { accessToken } = await a.issue(user);
    expect((await b.verify(accessToken)).sub).toBe(user.id);
    expect(fs.statSync(path.join(dir, 'jwt-secret')).mode & 0o777).toBe(0o600);
  });

  it('refuses a JWT_SECRET shorter than 32 characters', async () => {
    await expect(createTokenService(loadConfig({ JWT_SECRET: 'short' }))).rejects.toThrow(/32/);
  });

  it('signs with the first JWT_SIGNING_KEYS key and verifies with all (rotation)', async () => {
    const oldKey = await privateJwk('old');
    const newKey = await privateJwk('new');
    const before = await createTokenService(loadConfig({ JWT_SIGNING_KEYS: JSON.stringify(oldKey) }));
    const after = await createTokenService(loadConfig({ JWT_SIGNING_KEYS: JSON.stringify([newKey, oldKey]) }));
    const oldToken = (await before.issue(user)).accessToken;
    const newToken = (await after.issue(user)).accessToken;
    expect(JSON.parse(Buffer.from(newToken.split('.')[0]!, 'base64url').toString())).toMatchObject({ alg: 'ES256', kid: 'new' });
    expect((await after.verify(oldToken)).sub).toBe(user.id);
    await expect(before.verify(newToken)).rejects.toBeInstanceOf(InvalidTokenError);
  });

  it('an HS256 token is refused when only asymmetric keys are configured (no algorithm confusion)', async () => {
    const hs = await createTokenService(loadConfig({ JWT_SECRET: 'x'.repeat(40) }));
    const es = await createTokenService(loadConfig({ JWT_SIGNING_KEYS: JSON.stringify(await privateJwk('k')) }));
    await expect(es.verify((await hs.issue(user)).accessToken)).rejects.toBeInstanceOf(InvalidTokenError);
  });

  it('rejects malformed JWT_SIGNING_KEYS at start', async () => {
    await expect(createTokenService(loadConfig({ JWT_SIGNING_KEYS: 'not json' }))).rejects.toThrow(/JSON/);
  });
});

// GET /health answers 503 while the gateway is not migrated and when the
// database does not answer (a real connection to a closed port).
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { AddressInfo } from 'node:net';
import { afterAll, describe, expect, it } from 'vitest';
import { createApp, type App } from '../../gateway/app.ts';
import { loadConfig } from '../../gateway/core/process/config.ts';
import { createPool } from '../../gateway/core/database/pool.ts';
import { createTokenService } from '../../gateway/core/auth/jwt.ts';
import { createLogger } from '../../gateway/core/process/log.ts';
import { Passwords } from '../../gateway/core/auth/passwords.ts';
import { ChangeHub } from '../../gateway/realtime/hub.ts';
import { StorageService } from '../../gateway/storage/service.ts';
import { databaseUrl } from '../helpers.ts';

const servers: App[] = [];
afterAll(() => Promise.all(servers.map((s) => s.close())));

async function serve(url: string, ready: boolean): Promise<string> {
  const config = loadConfig({ JWT_SECRET: 'y'.repeat(40), DATA_DIR: fs.mkdtempSync(path.join(os.tmpdir(), 'health-test-')) });
  const sql = createPool(url, { max: 1, applicationName: 'health-test' });
  const app = await createApp({
    services: {
      sql,
      tokens: await createTokenService(config),
      statementTimeoutMs: 1000,
      publicUrl: config.publicUrl,
      appScheme: 'x',
      // Not started: these servers serve no streams.
      realtime: new ChangeHub(sql, config.realtime, createLogger('silent'), { publicUrl: config.publicUrl, statementTimeoutMs: 1000 }),
      passwords: new Passwords(config.passwords),
      storage: new StorageService(config.storage),
    },
    log: createLogger('silent'),
    isReady: () => ready,
  });
  servers.push(app);
  await app.listen({ port: 0, host: '127.0.0.1' });
  return `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`;
}

describe('GET /health', () => {
  it('200 when migrated and the database answers', async () => {
    const base = await serve(databaseUrl, true);
    expect((await fetch(`${base}/health`)).status).toBe(200);
  });

  it('503 while migrations have not run; other routes answer 503 too', async () => {
    const base = await serve(databaseUrl, false);
    expect((await fetch(`${base}/health`)).status).toBe(503);
    const profile = await fetch(`${base}/api/mobile/profile`);
    expect(profile.status).toBe(503);
    expect(await profile.json()).toMatchObject({ error: 'service_unavailable' });
  });

  it('503 when the database does not answer', async () => {
    const base = await serve('postgres://nobody:pw@127.0.0.1:1/none', true);
    const res = await fetch(`${base}/health`);
    expect(res.status).toBe(503);
    expect(await res.json()).toMatchObject({ status: 'unavailable' });
  });

  it('a request while the database is down is a 503 Error body with Retry-After, not a 500', async () => {
    const base = await serve('postgres://nobody:pw@127.0.0.1:1/none', true);
    const tokens = await createTokenService(loadConfig({ JWT_SECRET: 'y'.repeat(40) }));
    const { accessToken } = await tokens.issue({ id: crypto.randomUUID(), email: 'a@example.com', sessionId: crypto.randomUUID() });
    const res = await fetch(`${base}/api/mobile/profile`, { headers: { authorization: `Bearer ${accessToken}` } });
    expect(res.status).toBe(503);
    expect(res.headers.get('retry-after')).toBe('1');
    expect(await res.json()).toEqual({ error: 'service_unavailable', message: 'the database is not reachable', details: { retry_after: 1 } });
  });
});

// CORS_ORIGINS: listed origins get CORS headers with credentials, `*` any
// origin without credentials, preflights are answered, and without
// CORS_ORIGINS no CORS header is sent (the shared gateway).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../gateway/core/process/config.ts';
import { createLogger } from '../../gateway/core/process/log.ts';
import { startGateway, type RunningGateway } from '../../gateway/server.ts';
import { baseUrl, databaseUrl, jwtSecret, publicUrl, registerUser } from '../helpers.ts';

const gateways: RunningGateway[] = [];
async function gatewayWith(origins: string): Promise<string> {
  const config = loadConfig({ PORT: '0', HOST: '127.0.0.1', PUBLIC_URL: publicUrl, JWT_SECRET: jwtSecret, DB_POOL_MAX: '2', CORS_ORIGINS: origins });
  const gw = await startGateway(config, databaseUrl, createLogger('silent'), { includeCurrentMigration: true });
  gateways.push(gw);
  return gw.url;
}
let listed: string;
let wildcard: string;
beforeAll(async () => {
  listed = await gatewayWith('https://app.example.com, http://localhost:5173/');
  wildcard = await gatewayWith('*');
});
afterAll(async () => {
  await Promise.all(gateways.map((g) => g.close()));
});

const preflight = (url: string, origin: string, method = 'POST', headers = 'authorization, content-type, x-client-info') =>
  fetch(`${url}/api/mobile/tasks`, {
    method: 'OPTIONS',
    headers: { origin, 'access-control-request-method': method, 'access-control-request-headers': headers },
  });

describe('CORS', () => {
  it('a listed origin: preflight answered, credentials allowed, origin echoed', async () => {
    const res = await preflight(listed, 'https://app.example.com');
    expect(res.status).toBe(204);
    expect(res.headers.get('access-control-allow-origin')).toBe('https://app.example.com');
    expect(res.headers.get('access-control-allow-credentials')).toBe('true');
    expect(res.headers.get('access-control-allow-methods')).toContain('PATCH');
    expect(res.headers.get('access-control-allow-headers')).toBe('authorization, content-type, x-client-info');
    expect(res.headers.get('vary')).toContain('Origin');

    const user = await registerUser('cors');
    const get = await fetch(`${listed}/api/mobile/profile`, {
      headers: { origin: 'http://localhost:5173', authorization: `Bearer ${user.accessToken}` },
    });
    expect(get.status).toBe(200);
    expect(get.headers.get('access-control-allow-origin')).toBe('http://localhost:5173');
    expect(get.headers.get('access-control-expose-headers')).toContain('X-Request-Id');
    // A browser client may read a write's consistency token and send it back (docs/operations/scaling.md#read-replicas).
    expect(get.headers.get('access-control-expose-headers')).toContain('X-Consistency-Token');
  });

  it('an origin not listed gets no CORS headers', async () => {
    const res = await preflight(listed, 'https://evil.example.net');
    expect(res.status).toBe(204);
    expect(res.headers.get('access-control-allow-origin')).toBeNull();
    const get = await fetch(`${listed}/health`, { headers: { origin: 'https://evil.example.net' } });
    expect(get.headers.get('access-control-allow-origin')).toBeNull();
  });

  it('`*` allows any origin but never with credentials', async () => {
    const res = await preflight(wildcard, 'https://anywhere.example.org', 'DELETE');
    expect(res.status).toBe(204);
    expect(res.headers.get('access-control-allow-origin')).toBe('*');
    expect(res.headers.get('access-control-allow-credentials')).toBeNull();
    const get = await fetch(`${wildcard}/health`, { headers: { origin: 'https://anywhere.example.org' } });
    expect(get.headers.get('access-control-allow-origin')).toBe('*');
    expect(get.headers.get('access-control-allow-credentials')).toBeNull();
  });

  it('without CORS_ORIGINS no CORS header is sent', async () => {
    const res = await preflight(baseUrl, 'https://app.example.com');
    expect(res.headers.get('access-control-allow-origin')).toBeNull();
    expect(res.status).toBe(404);
  });
});

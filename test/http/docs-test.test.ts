// POST /api/docs/test, the live test executor: API token only (401 for no
// credential, an access token or a bad token), replays the request against
// this gateway with the same token (its permissions and usage count apply),
// records an ApiTestResult (never the secret), and answers LiveTestResponse;
// every invalid request, and every path that could name another host, is 400.
import crypto from 'node:crypto';
import { beforeAll, describe, expect, it } from 'vitest';
import { api, db, expectErrorShape, registerUser, type TestUser } from '../helpers.ts';
import { createToken, type CreatedToken } from '../support/api-tokens.ts';

let user: TestUser;
let token: CreatedToken;
const endpoints = new Map<string, string>();
const endpointId = (method: string, path: string) => {
  const id = endpoints.get(`${method} ${path}`);
  if (!id) throw new Error(`no endpoint ${method} ${path}`);
  return id;
};

beforeAll(async () => {
  user = await registerUser('livetest');
  token = await createToken(user, { name: 'live tests', permissions: ['/api/*'] });
  const list = await api('GET', '/api/docs/endpoints');
  for (const e of list.body as { id: string; http_method: string; path: string }[]) endpoints.set(`${e.http_method} ${e.path}`, e.id);
});

const run = (body: unknown, secret = token.secret) => api('POST', '/api/docs/test', { token: secret, body });

describe('what a live test stores (issue 27, finding 7)', () => {
  it('keeps at most about 16 KB of each body, marked as truncated; the caller still gets the whole answer', async () => {
    // 700 KB (random: not compressible) sent to an endpoint (the replay is refused, 413), and a response of well over 16 KB.
    const sent = await run({ endpoint_id: endpointId('POST', '/api/v1/forms'), method: 'POST', path: '/api/v1/forms', body: { note: crypto.randomBytes(525_000).toString('base64') } });
    expect(sent.status, sent.text).toBe(200);
    expect(sent.body.status).toBe(413);
    const doc = await run({ endpoint_id: endpointId('GET', '/api/docs/openapi.json'), method: 'GET', path: '/api/docs/openapi.json' });
    expect(doc.status).toBe(200);
    expect(JSON.stringify(doc.body.body).length).toBeGreaterThan(32_768);
    expect(doc.body.body.openapi).toBe('3.0.3');

    const rows = await db()<{ payload: number; response: number; payload_marker: any; response_marker: any }[]>`
      select octet_length(request_payload::text) as payload, octet_length(response_body::text) as response,
             request_payload - 'preview' as payload_marker, response_body - 'preview' as response_marker
        from app.api_test_results where id in (${sent.body.test_result_id}, ${doc.body.test_result_id})
       order by executed_at`;
    expect(rows[0]!.payload).toBeLessThanOrEqual(17_000);
    expect(rows[0]!.payload_marker).toEqual({ truncated: true, bytes: expect.any(Number) });
    expect(rows[0]!.payload_marker.bytes).toBeGreaterThan(700_000);
    expect(rows[1]!.response).toBeLessThanOrEqual(17_000);
    expect(rows[1]!.response_marker).toMatchObject({ truncated: true });
    // Fifteen such calls store about 15 × 16 KB, not 15 × 700 KB.
    const [total] = await db()<{ bytes: number }[]>`
      select sum(pg_column_size(r.*))::int as bytes from app.api_test_results r where id in (${sent.body.test_result_id}, ${doc.body.test_result_id})`;
    expect(total!.bytes).toBeLessThan(40_000);
  });
});

describe('POST /api/docs/test', () => {
  it('replays a GET with the same token and records the ApiTestResult (no secret stored)', async () => {
    const [before] = await db()`select usage_count from app.api_tokens where id = ${token.id}`;
    const res = await run({ endpoint_id: endpointId('GET', '/api/mobile/profile'), method: 'GET', path: '/api/mobile/profile' });
    expect(res.status, res.text).toBe(200);
    expect(res.body).toMatchObject({ status: 200, success: true, error_message: null });
    expect(res.body.body).toMatchObject({ success: true, data: { id: user.userId, email: user.email } });
    expect(res.body.headers['content-type']).toMatch(/^application\/json/);
    expect(Number.isInteger(res.body.response_time_ms) && res.body.response_time_ms >= 0).toBe(true);

    const [row] = await db()`select * from app.api_test_results where id = ${res.body.test_result_id}`;
    expect(row).toMatchObject({
      api_endpoint_id: endpointId('GET', '/api/mobile/profile'),
      api_token_id: token.id,
      user_id: user.userId,
      request_method: 'GET',
      request_path: '/api/mobile/profile',
      response_status: 200,
      response_time_ms: res.body.response_time_ms,
      success: true,
      error_message: null,
    });
    expect(row!.response_body).toEqual(res.body.body);
    expect(JSON.stringify(row)).not.toContain(token.secret);
    // The call and its replay are two uses of the token.
    const [after] = await db()`select usage_count from app.api_tokens where id = ${token.id}`;
    expect(Number(after!.usage_count) - Number(before!.usage_count)).toBe(2);
  });

  it('replays a POST with its body, params and headers, acting as the token owner', async () => {
    const res = await run({
      endpoint_id: endpointId('POST', '/api/mobile/hats'),
      method: 'POST',
      path: '/api/mobile/hats',
      headers: { 'X-Request-Id': 'live-test-1' },
      body: { hat: { name: 'Tester', hat_type: 'professional' } },
    });
    expect(res.status, res.text).toBe(200);
    expect(res.body).toMatchObject({ status: 201, success: true });
    expect(res.body.headers['x-request-id']).toBe('live-test-1');
    const [hat] = await db()`select user_id, name from app.hats where id = ${res.body.body.data.id}`;
    expect(hat).toEqual({ user_id: user.userId, name: 'Tester' });
    const [row] = await db()`select request_headers, request_payload from app.api_test_results where id = ${res.body.test_result_id}`;
    expect(row!.request_headers).toEqual({ 'X-Request-Id': 'live-test-1', 'content-type': 'application/json' });
    expect(row!.request_payload).toEqual({ hat: { name: 'Tester', hat_type: 'professional' } });

    const page = await run({ endpoint_id: endpointId('GET', '/api/mobile/communities'), method: 'GET', path: '/api/mobile/communities', params: { limit: 1, offset: 0 } });
    expect(page.body.body.pagination).toMatchObject({ page_size: 1, page: 1 });
  });

  it('records failures of the replayed request: 404, and 403 for a path outside the token permissions', async () => {
    const missing = await run({ endpoint_id: endpointId('GET', '/api/mobile/tasks/{id}'), method: 'GET', path: `/api/mobile/tasks/${crypto.randomUUID()}` });
    expect(missing.status).toBe(200);
    expect(missing.body).toMatchObject({ status: 404, success: false, error_message: null });
    expect(missing.body.body).toMatchObject({ error: 'task_not_found' });

    const narrow = await createToken(user, { name: 'docs only', permissions: ['/api/docs/test'] });
    const refused = await run({ endpoint_id: endpointId('GET', '/api/mobile/profile'), method: 'GET', path: '/api/mobile/profile' }, narrow.secret);
    expect(refused.status).toBe(200);
    expect(refused.body).toMatchObject({ status: 403, success: false });

    // A non-JSON answer (a redirect page): body null, headers kept.
    const link = await run({ endpoint_id: endpointId('GET', '/l/checkin/event/{event_node_id}'), method: 'GET', path: `/l/checkin/event/${crypto.randomUUID()}` }, (await createToken(user, { permissions: ['*'] })).secret);
    expect(link.body).toMatchObject({ status: 404, success: false, body: null });
    expect(link.body.headers['content-type']).toMatch(/^text\/html/);
  });

  it('is 401 without an API token: no credential, an access token, an unknown or deactivated token', async () => {
    const body = { endpoint_id: endpointId('GET', '/api/mobile/profile'), method: 'GET', path: '/api/mobile/profile' };
    const none = await api('POST', '/api/docs/test', { body });
    const jwt = await api('POST', '/api/docs/test', { token: user.accessToken, body });
    const unknown = await api('POST', '/api/docs/test', { token: `cbk_${'A'.repeat(40)}`, body });
    const revoked = await createToken(user, { permissions: ['/api/*'] });
    expect((await api('DELETE', `/api/docs/tokens/${revoked.id}`, { token: user.accessToken })).status).toBe(200);
    const inactive = await run(body, revoked.secret);
    for (const res of [none, jwt, unknown, inactive]) {
      expect(res.status, res.text).toBe(401);
      expectErrorShape(res.body);
    }
    expect(jwt.body.error).toBe('api_token_required');
    const [count] = await db()`select count(*)::int as n from app.api_test_results where api_token_id = ${revoked.id}`;
    expect(count!.n).toBe(0);
  });

  it('answers 400 (Error body) for every invalid request, and never reaches another host', async () => {
    const profile = endpointId('GET', '/api/mobile/profile');
    const task = endpointId('GET', '/api/mobile/tasks/{id}');
    const cases: [string, unknown, string?][] = [
      ['unknown endpoint', { endpoint_id: crypto.randomUUID(), method: 'GET', path: '/api/mobile/profile' }, 'unknown_endpoint'],
      ['endpoint id not a uuid', { endpoint_id: 'x', method: 'GET', path: '/api/mobile/profile' }],
      ['wrong method for the endpoint', { endpoint_id: profile, method: 'POST', path: '/api/mobile/profile' }, 'method_mismatch'],
      ['unknown method', { endpoint_id: profile, method: 'TRACE', path: '/api/mobile/profile' }],
      ['lower-case method', { endpoint_id: profile, method: 'get', path: '/api/mobile/profile' }],
      ['path of another endpoint', { endpoint_id: profile, method: 'GET', path: '/api/mobile/hats' }, 'path_mismatch'],
      ['extra segment', { endpoint_id: task, method: 'GET', path: `/api/mobile/tasks/${crypto.randomUUID()}/x` }, 'path_mismatch'],
      ['absolute URL', { endpoint_id: profile, method: 'GET', path: 'http://example.com/api/mobile/profile' }],
      ['scheme-relative URL', { endpoint_id: profile, method: 'GET', path: '//example.com/api/mobile/profile' }],
      ['backslash', { endpoint_id: profile, method: 'GET', path: '/\\example.com/api/mobile/profile' }],
      ['backslash inside', { endpoint_id: profile, method: 'GET', path: '/api\\mobile/profile' }],
      ['no leading slash', { endpoint_id: profile, method: 'GET', path: 'api/mobile/profile' }],
      ['whitespace', { endpoint_id: profile, method: 'GET', path: '/api/mobile/profile extra' }],
      ['dot segments', { endpoint_id: task, method: 'GET', path: '/api/mobile/tasks/..' }],
      ['encoded dot segments', { endpoint_id: task, method: 'GET', path: '/api/mobile/tasks/%2e%2e' }],
      ['the executor itself', { endpoint_id: endpointId('POST', '/api/docs/test'), method: 'POST', path: '/api/docs/test' }, 'recursive_test'],
      ['GET with a body', { endpoint_id: profile, method: 'GET', path: '/api/mobile/profile', body: { a: 1 } }],
      ['Host header', { endpoint_id: profile, method: 'GET', path: '/api/mobile/profile', headers: { Host: 'example.com' } }],
      ['Authorization header', { endpoint_id: profile, method: 'GET', path: '/api/mobile/profile', headers: { authorization: 'Bearer x' } }],
      ['header value with a newline', { endpoint_id: profile, method: 'GET', path: '/api/mobile/profile', headers: { 'X-A': 'a\r\nHost: x' } }],
      ['headers not an object', { endpoint_id: profile, method: 'GET', path: '/api/mobile/profile', headers: ['x'] }],
      ['body not an object', { endpoint_id: profile, method: 'POST', path: '/api/mobile/profile', body: [1] }],
      ['missing path', { endpoint_id: profile, method: 'GET' }],
      ['empty object', {}],
      ['not an object', 'hello'],
    ];
    const [before] = await db()`select count(*)::int as n from app.api_test_results where api_token_id = ${token.id}`;
    for (const [what, body, code] of cases) {
      const res = await run(body);
      expect(res.status, `${what}: ${res.text}`).toBe(400);
      expectErrorShape(res.body);
      if (code) expect(res.body.error, what).toBe(code);
    }
    const bad = await api('POST', '/api/docs/test', { token: token.secret, rawBody: '{"endpoint_id":' });
    expect(bad.status).toBe(400);
    const [after] = await db()`select count(*)::int as n from app.api_test_results where api_token_id = ${token.id}`;
    expect(after!.n).toBe(before!.n);
  });

  it('another user cannot read the results (row-level security)', async () => {
    const res = await run({ endpoint_id: endpointId('GET', '/api/mobile/hats'), method: 'GET', path: '/api/mobile/hats' });
    const other = await registerUser('livetest-other');
    const { asUser } = await import('../helpers.ts');
    const seen = await asUser(other.userId, (tx) => tx`select id from app.api_test_results where id = ${res.body.test_result_id}`);
    expect(seen).toEqual([]);
    const own = await asUser(user.userId, (tx) => tx`select id from app.api_test_results where id = ${res.body.test_result_id}`);
    expect(own).toHaveLength(1);
  });
});

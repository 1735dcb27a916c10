// The JSON body reader (gateway/http/body.ts) through the real server:
// compressed bodies, charsets, strictness, the 1 MB limit after
// decompression, and bodies that are not JSON.
import zlib from 'node:zlib';
import { describe, expect, it } from 'vitest';
import { baseUrl, expectErrorShape, uniqueEmail } from '../helpers.ts';

async function post(path: string, body: Buffer | string, headers: Record<string, string>) {
  const res = await fetch(baseUrl + path, { method: 'POST', headers, body: typeof body === 'string' ? body : new Uint8Array(body) });
  const text = await res.text();
  return { status: res.status, body: text ? JSON.parse(text) : null, connection: res.headers.get('connection') };
}

const registration = (email: string) => JSON.stringify({ email, password: 'password123' });

describe('request bodies', () => {
  it('reads gzip, deflate and br bodies as their JSON', async () => {
    for (const [encoding, compress] of [
      ['gzip', zlib.gzipSync],
      ['deflate', zlib.deflateSync],
      ['br', zlib.brotliCompressSync],
    ] as const) {
      const res = await post('/api/auth/register', compress(registration(uniqueEmail('zip'))), {
        'content-type': 'application/json',
        'content-encoding': encoding,
      });
      // The body was understood: the account is created.
      expect(res.status, encoding).toBe(201);
    }
  });

  it('accepts application/*+json and a UTF-8 charset', async () => {
    for (const type of ['application/vnd.api+json', 'application/json; charset=UTF-8', 'application/json;charset="utf8"']) {
      const res = await post('/api/auth/register', registration(uniqueEmail('type')), { 'content-type': type });
      expect(res.status, type).toBe(201);
    }
  });

  it('415 for another charset or an unknown content encoding', async () => {
    const latin1 = await post('/api/auth/register', registration(uniqueEmail('cs')), { 'content-type': 'application/json; charset=latin1' });
    expect(latin1.status).toBe(415);
    expect(latin1.body.error).toBe('unsupported_media_type');
    const unknown = await post('/api/auth/register', registration(uniqueEmail('enc')), {
      'content-type': 'application/json',
      'content-encoding': 'compress',
    });
    expect(unknown.status).toBe(415);
    expectErrorShape(unknown.body);
  });

  it('400 invalid_json for a JSON scalar, broken gzip or text that is not JSON', async () => {
    for (const [body, headers] of [
      ['"just a string"', { 'content-type': 'application/json' }],
      ['42', { 'content-type': 'application/json' }],
      [Buffer.from('not gzip at all'), { 'content-type': 'application/json', 'content-encoding': 'gzip' }],
    ] as const) {
      const res = await post('/api/auth/register', body, headers);
      expect(res.status).toBe(400);
      expectErrorShape(res.body);
    }
  });

  it('413 for a body over 1 MB once decompressed, and the connection is closed after the answer', async () => {
    const bomb = zlib.gzipSync(JSON.stringify({ email: 'a@example.com', password: 'x'.repeat(2_000_000) }));
    expect(bomb.length).toBeLessThan(100_000);
    const res = await post('/api/auth/register', bomb, { 'content-type': 'application/json', 'content-encoding': 'gzip' });
    expect(res.status).toBe(413);
    expect(res.body.error).toBe('payload_too_large');
    expect(res.connection).toBe('close');
  });

  it('a body that is not JSON (another content type) is no body: the route refuses it as invalid', async () => {
    const res = await post('/api/auth/register', 'email=a@example.com&password=x', { 'content-type': 'application/x-www-form-urlencoded' });
    expect(res.status).toBe(400);
    expectErrorShape(res.body);
  });

  it('413 before reading: the rest of the body is read and thrown away, so a Node fetch client gets the answer, not EPIPE (issue 27, finding 10)', async () => {
    // Declared over the limit: refused before a byte is parsed. Without the draining, the socket closed
    // under the client while it was still sending.
    const body = Buffer.alloc(6 * 1024 * 1024, 0x61);
    for (let i = 0; i < 5; i++) {
      const res = await post('/api/auth/register', body, { 'content-type': 'application/json' });
      expect(res.status).toBe(413);
      expect(res.body.error).toBe('payload_too_large');
      expect(res.connection).toBe('close');
    }
    // Without a Content-Length (chunked): refused once past 1 MB while reading.
    const chunks = Array.from({ length: 24 }, () => new Uint8Array(256 * 1024).fill(0x61));
    const stream = new ReadableStream<Uint8Array>({
      pull(controller) {
        const next = chunks.shift();
        if (next) controller.enqueue(next);
        else controller.close();
      },
    });
    const chunked = await fetch(baseUrl + '/api/auth/register', {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: stream,
      duplex: 'half',
    } as RequestInit);
    expect(chunked.status).toBe(413);
    expect((await chunked.json()).error).toBe('payload_too_large');
  });

  it('a 415 (unsupported charset) is answered the same way, after the rest of the body', async () => {
    for (let i = 0; i < 3; i++) {
      const res = await post('/api/auth/register', Buffer.alloc(6 * 1024 * 1024, 0x61), { 'content-type': 'application/json; charset=utf-16' });
      expect(res.status).toBe(415);
      expect(res.body.error).toBe('unsupported_media_type');
      expect(res.connection).toBe('close');
    }
  });

  it('/mcp through the gateway: an answer the MCP process gives before reading the body (401, 413) reaches the client, which can go on (issue 27, finding 10)', async () => {
    const { createAgent } = await import('../mcp/support.ts');
    const agent = await createAgent('bigbody');
    const send = (token: string, size: number) =>
      fetch(`${baseUrl}/mcp`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', authorization: `Bearer ${token}` },
        body: Buffer.alloc(size, 0x61),
        // Without the gateway reading the rest, the client waited for ever.
        signal: AbortSignal.timeout(10_000),
      });
    for (const size of [5, 6, 8, 12].map((mb) => mb * 1024 * 1024)) {
      const refused = await send(`cbk_${'a'.repeat(40)}`, size);
      expect(refused.status).toBe(401);
      expect((await refused.json()).error).toBe('invalid_token');
      const tooLarge = await send(agent.apiToken, size);
      expect(tooLarge.status).toBe(413);
      expect((await tooLarge.json()).error.code).toBe(-32700);
    }
  });
});

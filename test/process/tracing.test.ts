// Traces, read by a local OTLP receiver (OTLP/HTTP with JSON encoding, as a
// collector accepts it): a real gateway process with
// OTEL_EXPORTER_OTLP_ENDPOINT, one process and WEB_CONCURRENCY=2. A request
// sent with a known traceparent continues it; its SQL call is a child span
// named after the api function; a /mcp request's span in the MCP process is
// a child of the gateway's; the log lines carry the trace id. A request that
// queues a job (a webhook delivery) passes its trace on: the job's span
// (worker on) is a child of the request's, and the webhook receiver gets a
// traceparent of the same trace; with traces not exported the receiver gets
// the request's incoming traceparent as is.
import crypto from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import postgres from 'postgres';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { databaseServer, databaseUrl } from '../helpers.ts';
import { startTestEnvironment, type TestEnvironment } from '../support/environment.ts';
import { exited, freePort, startGatewayProcess, waitUntil, type GatewayProcess } from '../support/processes.ts';
import { WebhookReceiver } from '../support/webhook-receiver.ts';

interface ReceivedSpan {
  service: string;
  traceId: string;
  spanId: string;
  parentSpanId: string;
  name: string;
  kind: number;
  attributes: Record<string, unknown>;
}

type AnyValue = { stringValue?: string; intValue?: string | number; boolValue?: boolean; doubleValue?: number };
const valueOf = (v: AnyValue) => v.stringValue ?? (v.intValue !== undefined ? Number(v.intValue) : (v.boolValue ?? v.doubleValue));
const attributesOf = (list: { key: string; value: AnyValue }[] = []) => Object.fromEntries(list.map((a) => [a.key, valueOf(a.value)]));

/** An OTLP/HTTP receiver (JSON): POST /v1/traces, the spans kept. */
async function startReceiver(): Promise<{ url: string; spans: ReceivedSpan[]; close(): Promise<void> }> {
  const spans: ReceivedSpan[] = [];
  const server = http.createServer((req, res) => {
    let body = '';
    req.setEncoding('utf8');
    req.on('data', (chunk: string) => (body += chunk));
    req.on('end', () => {
      if (req.url === '/v1/traces' && req.headers['content-type']?.startsWith('application/json')) {
        const payload = JSON.parse(body) as {
          resourceSpans: { resource: { attributes: { key: string; value: AnyValue }[] }; scopeSpans: { spans: Record<string, unknown>[] }[] }[];
        };
        for (const rs of payload.resourceSpans) {
          const service = String(attributesOf(rs.resource.attributes)['service.name']);
          for (const ss of rs.scopeSpans) {
            for (const s of ss.spans) {
              spans.push({
                service,
                traceId: String(s.traceId),
                spanId: String(s.spanId),
                parentSpanId: String(s.parentSpanId ?? ''),
                name: String(s.name),
                kind: Number(s.kind),
                attributes: attributesOf(s.attributes as { key: string; value: AnyValue }[]),
              });
            }
          }
        }
      }
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end('{}');
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    spans,
    close: () => new Promise((resolve) => server.close(() => resolve())),
  };
}

for (const processes of [1, 2]) {
  describe(`traces over OTLP (WEB_CONCURRENCY=${processes})`, () => {
    let receiver: Awaited<ReturnType<typeof startReceiver>>;
    let gateway: GatewayProcess;
    beforeAll(async () => {
      receiver = await startReceiver();
      gateway = await startGatewayProcess({
        DATABASE_URL: databaseUrl,
        PORT: String(freePort()),
        WORKER: 'off',
        WEB_CONCURRENCY: String(processes),
        OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url,
        OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json',
        OTEL_BSP_SCHEDULE_DELAY: '100',
        LOG_LEVEL: 'info',
      });
      // Every gateway process serving (each says so), and the MCP process.
      await waitUntil(() => (gateway.output().match(/gateway listening on/g)?.length ?? 0) >= processes, 60_000, 'every gateway process');
      await waitUntil(async () => (await fetch(`${gateway.url}/mcp`, { method: 'POST' }).catch(() => null))?.status === 401, 60_000, 'the MCP process');
    }, 120_000);
    afterAll(async () => {
      gateway?.child.kill('SIGTERM');
      if (gateway) await exited(gateway.child);
      await receiver?.close();
    });

    it('continues a traceparent: the server span, its SQL call as a child span, and the log line', { timeout: 30_000 }, async () => {
      const traceId = crypto.randomBytes(16).toString('hex');
      const parent = crypto.randomBytes(8).toString('hex');
      const res = await fetch(`${gateway.url}/api/community/${crypto.randomUUID()}`, {
        headers: { traceparent: `00-${traceId}-${parent}-01`, 'x-request-id': `trace-${traceId.slice(0, 8)}` },
      });
      expect(res.status).toBe(404);
      const ofTrace = () => receiver.spans.filter((s) => s.traceId === traceId);
      await waitUntil(() => ofTrace().length >= 2, 20_000, 'the spans of the request');
      const server = ofTrace().find((s) => s.kind === 2)!;
      expect(server).toMatchObject({
        service: 'community-backend',
        parentSpanId: parent,
        name: 'GET /api/community/{community_id}',
        attributes: { 'http.request.method': 'GET', 'http.route': '/api/community/{community_id}', 'http.response.status_code': 404 },
      });
      const sql = ofTrace().find((s) => s.kind === 3)!;
      expect(sql).toMatchObject({
        parentSpanId: server.spanId,
        name: 'api.community_public',
        attributes: { 'db.system': 'postgresql', 'db.operation.name': 'api.community_public', 'error.type': 'PT404' },
      });
      // No id in any span.
      expect(JSON.stringify(ofTrace())).not.toMatch(/[0-9a-f]{8}-[0-9a-f]{4}-/);
      await waitUntil(() => gateway.output().includes(`"reqId":"trace-${traceId.slice(0, 8)}","traceId":"${traceId}"`), 5_000, 'the log line with the trace id');
    });

    it('traces /mcp across the gateway and the MCP process', { timeout: 30_000 }, async () => {
      const traceId = crypto.randomBytes(16).toString('hex');
      const res = await fetch(`${gateway.url}/mcp`, {
        method: 'POST',
        headers: { traceparent: `00-${traceId}-${crypto.randomBytes(8).toString('hex')}-01`, 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
        body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/list' }),
      });
      expect(res.status).toBe(401);
      const ofTrace = () => receiver.spans.filter((s) => s.traceId === traceId);
      // Each process exports on its own schedule: the MCP span (ended first)
      // can arrive before the gateway's.
      await waitUntil(
        () => ofTrace().some((s) => s.service === 'community-backend-mcp') && ofTrace().some((s) => s.service === 'community-backend'),
        20_000,
        'the gateway and the MCP process spans',
      );
      const gatewaySpan = ofTrace().find((s) => s.service === 'community-backend')!;
      const mcpSpan = ofTrace().find((s) => s.service === 'community-backend-mcp')!;
      expect(gatewaySpan.name).toBe('POST /mcp');
      expect(mcpSpan.parentSpanId).toBe(gatewaySpan.spanId);
      expect(mcpSpan.name).toBe('POST /mcp');
    });
  });
}

/** JSON over HTTP to a gateway. */
async function call(base: string, method: string, path: string, options: { token?: string; body?: unknown; headers?: Record<string, string> } = {}) {
  const res = await fetch(base + path, {
    method,
    headers: {
      ...(options.token ? { authorization: `Bearer ${options.token}` } : {}),
      ...(options.body === undefined ? {} : { 'content-type': 'application/json' }),
      ...options.headers,
    },
    body: options.body === undefined ? undefined : JSON.stringify(options.body),
  });
  const text = await res.text();
  return { status: res.status, body: text ? JSON.parse(text) : undefined, text };
}

for (const exported of [true, false]) {
  describe(`a job carries the trace of the request that queued it (traces ${exported ? 'exported' : 'not exported'}, worker on)`, () => {
    let env: TestEnvironment;
    let receiver: Awaited<ReturnType<typeof startReceiver>> | undefined;
    const hooks = new WebhookReceiver();
    let gateway: GatewayProcess;
    let manager: { token: string; communityId: string };
    beforeAll(async () => {
      await hooks.start();
      if (exported) receiver = await startReceiver();
      // A database of its own: this gateway's worker is the only one on it.
      env = await startTestEnvironment({ ...databaseServer, env: { WORKER: 'off' } });
      gateway = await startGatewayProcess({
        DATABASE_URL: env.databaseUrl,
        PORT: String(freePort()),
        WORKER: 'on',
        WEB_CONCURRENCY: '1',
        WEBHOOK_ALLOW_PRIVATE_TARGETS: '1',
        ...(receiver ? { OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url, OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json', OTEL_BSP_SCHEDULE_DELAY: '100' } : {}),
      });
      const email = `traced-${crypto.randomBytes(5).toString('hex')}@example.com`;
      const password = 'correct horse battery';
      expect((await call(gateway.url, 'POST', '/api/auth/register', { body: { email, password } })).status).toBe(201);
      const login = await call(gateway.url, 'POST', '/api/auth/login', { body: { email, password } });
      const sql = postgres(env.databaseUrl, { max: 1, onnotice: () => {} });
      const [row] = await sql<{ id: string }[]>`select admin.create_community('Traced club', null, '{}', ${email}) as id`;
      await sql.end();
      const communityId = row!.id;
      manager = { token: login.body.access_token, communityId };
      const hook = await call(gateway.url, 'POST', '/api/v1/platform/webhooks', {
        token: manager.token,
        body: { community_id: communityId, url: hooks.url('/traced'), events: ['event.created'] },
      });
      expect(hook.status, hook.text).toBe(201);
    }, 180_000);
    afterAll(async () => {
      gateway?.child.kill('SIGTERM');
      if (gateway) await exited(gateway.child);
      await env?.stop();
      await receiver?.close();
      await hooks.stop();
    }, 60_000);

    const title = exported
      ? "the job runs in a span under the request's, and the webhook receiver gets the delivery span's traceparent"
      : "the webhook receiver gets the request's incoming traceparent as is";
    it(title, { timeout: 60_000 }, async () => {
      const traceId = crypto.randomBytes(16).toString('hex');
      const parent = crypto.randomBytes(8).toString('hex');
      const incoming = `00-${traceId}-${parent}-01`;
      const eventTitle = `Traced ${crypto.randomBytes(4).toString('hex')}`;
      const created = await call(gateway.url, 'POST', '/api/v1/platform/events', {
        token: manager.token,
        headers: { traceparent: incoming },
        body: {
          community_id: manager.communityId,
          external_platform: 'platform_a',
          external_id: `ext-${crypto.randomBytes(4).toString('hex')}`,
          title: eventTitle,
          description: 'Doors at six',
          date: new Date(Date.now() + 86_400_000).toISOString(),
        },
      });
      expect(created.status, created.text).toBe(201);
      await waitUntil(() => hooks.received.some((r) => r.payload.data?.title === eventTitle), 30_000, 'the webhook delivery');
      const delivered = hooks.received.find((r) => r.payload.data?.title === eventTitle)!;
      const header = delivered.headers.traceparent ?? '';
      expect(header).toMatch(new RegExp(`^00-${traceId}-[0-9a-f]{16}-01$`));
      if (!receiver) {
        // No SDK: the context the request came with is passed on as it was.
        expect(header).toBe(incoming);
        return;
      }
      const ofTrace = () => receiver!.spans.filter((s) => s.traceId === traceId);
      await waitUntil(() => ofTrace().some((s) => s.name === 'webhook_deliver') && ofTrace().some((s) => s.name === 'webhook deliver'), 20_000, 'the job and delivery spans');
      const byId = new Map(ofTrace().map((s) => [s.spanId, s]));
      const server = ofTrace().find((s) => s.kind === 2)!;
      expect(server).toMatchObject({ parentSpanId: parent, name: 'POST /api/v1/platform/events' });
      const job = ofTrace().find((s) => s.name === 'webhook_deliver')!;
      expect(job.kind).toBe(5); // CONSUMER
      expect(job.attributes).toMatchObject({ 'messaging.operation.type': 'process', 'messaging.destination.name': 'webhook_deliver' });
      // The request's server span is among the job span's ancestors.
      const ancestors: string[] = [];
      for (let at = byId.get(job.parentSpanId); at; at = byId.get(at.parentSpanId)) ancestors.push(at.spanId);
      expect(ancestors).toContain(server.spanId);
      // The delivery is a client span under the job's, and its traceparent is what the receiver got.
      const delivery = ofTrace().find((s) => s.name === 'webhook deliver')!;
      expect(delivery).toMatchObject({ kind: 3, parentSpanId: job.spanId });
      expect(header).toBe(`00-${traceId}-${delivery.spanId}-01`);
    });
  });
}

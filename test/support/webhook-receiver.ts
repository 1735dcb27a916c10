// A real webhook receiver for the tests: an HTTP server on loopback that
// records every request and answers as told (per path: a status, a body, a
// delay, or no answer at all), and checks signatures with the
// `standardwebhooks` package, as an integrator would.
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { Webhook } from 'standardwebhooks';

export interface ReceivedWebhook {
  path: string;
  headers: Record<string, string>;
  body: string;
  /** The parsed body: {type, timestamp, data}. */
  payload: { type: string; timestamp: string; data: Record<string, any> };
  at: number;
}

export interface Answer {
  status?: number;
  body?: string;
  headers?: Record<string, string>;
  /** Wait this long before answering. */
  delayMs?: number;
  /** Never answer (the request stays open until the receiver stops). */
  hang?: boolean;
}

export class WebhookReceiver {
  readonly received: ReceivedWebhook[] = [];
  private readonly plans = new Map<string, Answer[]>();
  private readonly fallback = new Map<string, Answer>();
  private server: http.Server | undefined;
  private port = 0;
  private waiters = new Set<() => void>();

  async start(): Promise<this> {
    this.server = http.createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        const path = (req.url ?? '/').split('?')[0]!;
        const body = Buffer.concat(chunks).toString('utf8');
        let payload: ReceivedWebhook['payload'];
        try {
          payload = JSON.parse(body);
        } catch {
          payload = { type: '(not json)', timestamp: '', data: {} };
        }
        const headers = Object.fromEntries(Object.entries(req.headers).map(([k, v]) => [k, Array.isArray(v) ? v.join(', ') : (v ?? '')]));
        this.received.push({ path, headers, body, payload, at: Date.now() });
        for (const wake of this.waiters) wake();
        const answer = this.plans.get(path)?.shift() ?? this.fallback.get(path) ?? {};
        if (answer.hang) return;
        const reply = () => {
          res.writeHead(answer.status ?? 200, { 'content-type': 'text/plain', ...answer.headers });
          res.end(answer.body ?? 'ok');
        };
        if (answer.delayMs) setTimeout(reply, answer.delayMs);
        else reply();
      });
    });
    await new Promise<void>((resolve) => this.server!.listen(0, '127.0.0.1', resolve));
    this.port = (this.server.address() as AddressInfo).port;
    return this;
  }

  /** An http URL of this receiver (loopback: needs WEBHOOK_ALLOW_PRIVATE_TARGETS=1). */
  url(path: string): string {
    return `http://127.0.0.1:${this.port}${path}`;
  }

  get listeningPort(): number {
    return this.port;
  }

  /** The next requests to `path` get these answers, in order; then `then` (default 200). */
  answer(path: string, answers: Answer[], then?: Answer): void {
    this.plans.set(path, [...answers]);
    if (then) this.fallback.set(path, then);
    else this.fallback.delete(path);
  }

  at(path: string): ReceivedWebhook[] {
    return this.received.filter((r) => r.path === path);
  }

  /** Resolves with the requests to `path` once `enough` says they are enough. */
  async waitFor(
    path: string,
    enough: (requests: ReceivedWebhook[]) => boolean,
    { timeoutMs = 15_000, what = `requests to ${path}` } = {},
  ): Promise<ReceivedWebhook[]> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const requests = this.at(path);
      if (enough(requests)) return requests;
      const left = deadline - Date.now();
      if (left <= 0) throw new Error(`timed out waiting for ${what}; got ${requests.map((r) => r.payload.type).join(', ') || 'nothing'}`);
      await new Promise<void>((resolve) => {
        const wake = () => {
          this.waiters.delete(wake);
          clearTimeout(timer);
          resolve();
        };
        const timer = setTimeout(wake, Math.min(left, 200));
        this.waiters.add(wake);
      });
    }
  }

  async stop(): Promise<void> {
    const server = this.server;
    if (!server) return;
    server.closeAllConnections();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  }
}

/** Verifies a received webhook with `secret` as the standardwebhooks package does; returns the payload or throws. */
export function verifyWebhook(secret: string, request: ReceivedWebhook): unknown {
  return new Webhook(secret).verify(request.body, {
    'webhook-id': request.headers['webhook-id'] ?? '',
    'webhook-timestamp': request.headers['webhook-timestamp'] ?? '',
    'webhook-signature': request.headers['webhook-signature'] ?? '',
  });
}

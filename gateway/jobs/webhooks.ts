// The `webhook_deliver` task: sends the due deliveries of one endpoint
// (app.webhook_deliveries), oldest first, signed per Standard Webhooks
// (standardwebhooks.com), and records each outcome. What to send, to which
// secrets, and what follows an attempt (retry with back-off and jitter, the
// endpoint's own back-off after consecutive failures, giving up, turning a
// failing endpoint off) are SQL: private.webhook_delivery_next / _finish.
//
// One endpoint, one sender at a time, and a community at most
// WEBHOOK_COMMUNITY_CONCURRENCY senders at once (across every worker):
// private.webhook_send_begin takes the endpoint's advisory lock and one of
// its community's slots (session-level, on one connection; Postgres drops
// them with a dead worker's connection). A task that finds the endpoint
// taken ends at once (the holder looks for due deliveries again after
// letting go, so one committed meanwhile is never left behind); one whose
// community has no free slot leaves the endpoint waiting and ends too, so a
// community whose receivers never answer holds only its own share of the
// worker, never the rest (private.webhook_send_end wakes the next waiting
// endpoint of the community).
//
//   headers  webhook-id         msg_<delivery id>: the same for every attempt
//                                and replay of the delivery (receivers dedupe on it)
//            webhook-timestamp  unix seconds of this attempt
//            webhook-signature  v1,<base64 HMAC-SHA256 of "id.timestamp.body"
//                                keyed by the secret's bytes>, one per valid
//                                secret (the previous one for 24 h after a
//                                rotation), space-separated
//   body     the stored payload, byte for byte the same on every attempt
//
// An attempt succeeds on a 2xx. Anything else fails it: another status
// (redirects are not followed; `HTTP <status>` and the first 1 KB of the
// answer are kept), or no answer at all: the address or port rule refused
// the target (webhook-targets.ts), the name did not resolve, no connection
// within 3 s, a connection or TLS error, or no answer within 10 s. All of
// those are recorded as the same NO_ANSWER, so that the deliveries of a
// webhook cannot map a network (which addresses exist, which ports are
// open, closed or filtered); the worker's log has the reason.
import crypto from 'node:crypto';
import http from 'node:http';
import https from 'node:https';
import type { JobHelpers, Task } from 'graphile-worker';
import type { Logger } from '../core/process/log.ts';
import { guardedLookup, sendRefusal, type TargetRules } from './webhook-targets.ts';
import { metricsOn, webhookDeliveries } from '../core/process/metrics.ts';
import { jobTraceparent, startClientSpan } from '../core/process/tracing.ts';

export const WEBHOOK_TIMEOUT_MS = 10_000;
/** A connection (and its TLS handshake) must be up within this. */
export const WEBHOOK_CONNECT_TIMEOUT_MS = 3_000;
/** What an attempt that got no HTTP answer records, whatever the reason (the log has it). */
export const NO_ANSWER = 'no answer from the endpoint';
/** How much of the receiver's answer is kept. */
export const RESPONSE_BODY_LIMIT = 1024;
const USER_AGENT = 'community-backend-webhooks/1.0';

export interface WebhookSenderOptions {
  /** WEBHOOK_ALLOW_PRIVATE_TARGETS and WEBHOOK_ALLOWED_PORTS. */
  rules: TargetRules;
  /** Seconds before each retry (WEBHOOK_RETRY_SCHEDULE). */
  retrySchedule: number[];
  /** WEBHOOK_COMMUNITY_CONCURRENCY: a community's deliveries sent at once, across every worker. */
  communityConcurrency: number;
  timeoutMs?: number;
  connectTimeoutMs?: number;
  /** Deliveries one job sends to its endpoint before leaving the rest to a new job (default 500). */
  batchSize?: number;
  /** Where the reason of an attempt without an answer is written (info; never in the delivery). */
  log?: Logger;
}

/** The webhook-signature header: one `v1,<signature>` per secret. */
export function signatures(secrets: readonly string[], webhookId: string, timestamp: number, body: string): string {
  const content = `${webhookId}.${timestamp}.${body}`;
  return secrets
    .map((secret) => {
      const key = Buffer.from(secret.replace(/^whsec_/, ''), 'base64');
      return `v1,${crypto.createHmac('sha256', key).update(content).digest('base64')}`;
    })
    .join(' ');
}

interface Attempt {
  statusCode: number | null;
  error: string | null;
  body: string | null;
  /** Why there was no answer (the log's, never recorded). */
  reason?: string;
}

/** An attempt without an HTTP answer: the same record whatever the reason. */
const noAnswer = (reason: string): Attempt => ({ statusCode: null, error: NO_ANSWER, body: null, reason });

/** Deliveries one job sends at most (then the endpoint gets a new job). */
const DEFAULT_BATCH = 500;

/** The connection graphile-worker lends a task (a pg client). */
type Queryable = Parameters<Parameters<JobHelpers['withPgClient']>[0]>[0];

interface NextRow {
  delivery_id: string;
  url: string;
  secrets: string[];
  webhook_id: string;
  body: string;
  attempt: number;
}

export function webhookDeliverTask(options: WebhookSenderOptions): { task: Task; close(): void } {
  const lookup = guardedLookup(options.rules.allowPrivate);
  // Keep-alive connections per receiver; a socket idle for 4 s is closed
  // (before the usual 5 s of a receiver's keep-alive).
  const agents = {
    'http:': new http.Agent({ keepAlive: true, maxSockets: 8, timeout: 4_000, lookup } as http.AgentOptions),
    'https:': new https.Agent({ keepAlive: true, maxSockets: 8, timeout: 4_000, lookup } as https.AgentOptions),
  };
  const timeoutMs = options.timeoutMs ?? WEBHOOK_TIMEOUT_MS;
  const connectTimeoutMs = options.connectTimeoutMs ?? WEBHOOK_CONNECT_TIMEOUT_MS;
  const batch = options.batchSize ?? DEFAULT_BATCH;

  const task: Task = async (payload, helpers) => {
    const endpointId = (payload as { endpoint_id?: unknown } | null)?.endpoint_id;
    if (typeof endpointId !== 'string') return;
    await helpers.withPgClient(async (client) => {
      let sent = 0;
      for (;;) {
        const { rows } = await client.query<{ status: string; slot: number | null; community_id: string | null }>(
          'select * from private.webhook_send_begin($1::uuid, $2::int)',
          [endpointId, options.communityConcurrency],
        );
        const begun = rows[0];
        // Another worker sends to this endpoint (it looks again after letting
        // go), or its community's share is in use (the endpoint waits to be woken).
        if (begun?.status !== 'sending') return;
        try {
          while (sent < batch) {
            const { rows: next } = await client.query<NextRow>('select * from private.webhook_delivery_next($1::uuid)', [endpointId]);
            const row = next[0];
            if (!row) break;
            await deliver(row, client, helpers);
            sent++;
          }
        } finally {
          await client.query('select private.webhook_send_end($1::uuid, $2::uuid, $3::int)', [endpointId, begun.community_id, begun.slot]);
        }
        if (sent >= batch) {
          // Enough for one job (other endpoints get their turn): the rest in a
          // new one, added after letting go of the lock (so it can take it).
          await client.query('select private.webhook_schedule($1::uuid)', [endpointId]);
          return;
        }
        // A delivery committed after our last look, whose own job found the lock taken.
        const { rows: due } = await client.query<{ due: boolean }>('select private.webhook_due($1::uuid) as due', [endpointId]);
        if (!due[0]?.due) break;
      }
      // The next retry of this endpoint, if one waits (not before its back-off ends).
      await client.query('select private.webhook_endpoint_reschedule($1::uuid)', [endpointId]);
    });
  };

  const deliver = async (row: NextRow, client: Queryable, helpers: JobHelpers) => {
    const timestamp = Math.floor(Date.now() / 1000);
    const headers = {
      'content-type': 'application/json',
      'user-agent': USER_AGENT,
      'webhook-id': row.webhook_id,
      'webhook-timestamp': String(timestamp),
      'webhook-signature': signatures(row.secrets, row.webhook_id, timestamp, row.body),
    };
    const sending = performance.now();
    // Traces exported: the delivery is a span under the job's, and the receiver
    // gets its traceparent. Not exported: the receiver gets the traceparent of
    // the request that queued the job, as is (OpenTelemetry's API without an
    // SDK propagates the context it was given); none without one.
    const traced = startClientSpan('webhook deliver', { 'webhook.id': row.webhook_id });
    const traceparent = traced?.traceparent ?? jobTraceparent(helpers.job.payload);
    const outcome = await post(row.url, traceparent ? { ...headers, traceparent } : headers, row.body, { rules: options.rules, timeoutMs, connectTimeoutMs, agents, helpers });
    if (traced) {
      traced.span.setAttribute('http.response.status_code', outcome.statusCode ?? 0);
      traced.span.end();
    }
    if (metricsOn()) {
      const result = outcome.statusCode === null ? 'no_answer' : outcome.error === null ? 'delivered' : 'refused';
      webhookDeliveries.observe({ outcome: result }, (performance.now() - sending) / 1000);
    }
    if (outcome.reason) options.log?.info({ delivery: row.delivery_id, reason: outcome.reason }, 'webhook attempt without an answer');
    await client.query(
      'select private.webhook_delivery_finish($1::uuid, $2::int, $3::int, $4::text, $5::text, $6::float8[])',
      [row.delivery_id, row.attempt, outcome.statusCode, outcome.error, outcome.body, options.retrySchedule],
    );
  };
  return {
    task,
    close() {
      agents['http:'].destroy();
      agents['https:'].destroy();
    },
  };
}

interface PostOptions {
  rules: TargetRules;
  timeoutMs: number;
  connectTimeoutMs: number;
  agents: Record<'http:' | 'https:', http.Agent>;
  helpers: JobHelpers;
}

/** A worker shutting down mid-send: the job is retried (by the next worker), nothing is recorded. */
class Interrupted extends Error {}

async function post(rawUrl: string, headers: Record<string, string>, body: string, options: PostOptions): Promise<Attempt> {
  let url: URL;
  try {
    url = new URL(rawUrl);
  } catch {
    return noAnswer('invalid url');
  }
  const refused = sendRefusal(url, options.rules);
  if (refused) return noAnswer(`refused: ${refused}`);
  // A kept-alive socket the receiver closed meanwhile fails at once: send
  // again on a new connection (Node's advice for reused sockets).
  for (let tries = 1; ; tries++) {
    const result = await postOnce(url, headers, body, options);
    if (result === 'retry-fresh' && tries === 1) continue;
    if (result === 'retry-fresh') return noAnswer('connection reset');
    return result;
  }
}

function postOnce(url: URL, headers: Record<string, string>, body: string, options: PostOptions): Promise<Attempt | 'retry-fresh'> {
  const shutdown = options.helpers.abortSignal;
  return new Promise((resolve, reject) => {
    let settled = false;
    const finish = (value: Attempt | 'retry-fresh' | Error) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      shutdown?.removeEventListener('abort', onShutdown);
      if (value instanceof Error) reject(value);
      else resolve(value);
    };
    const req = (url.protocol === 'https:' ? https : http).request(url, {
      method: 'POST',
      headers: { ...headers, 'content-length': String(Buffer.byteLength(body)) },
      agent: options.agents[url.protocol as 'http:' | 'https:'],
    });
    const timer = setTimeout(() => {
      finish(noAnswer(`timeout: no answer within ${options.timeoutMs / 1000} s`));
      req.destroy();
    }, options.timeoutMs);
    // A new connection must be up (TLS included) within connectTimeoutMs; a kept-alive one is.
    req.on('socket', (socket) => {
      if (!socket.connecting) return;
      const connectTimer = setTimeout(() => {
        finish(noAnswer(`timeout: no connection within ${options.connectTimeoutMs / 1000} s`));
        req.destroy();
      }, options.connectTimeoutMs);
      socket.once(url.protocol === 'https:' ? 'secureConnect' : 'connect', () => clearTimeout(connectTimer));
      socket.once('close', () => clearTimeout(connectTimer));
    });
    const onShutdown = () => {
      finish(new Interrupted('the worker is shutting down; the delivery will be retried'));
      req.destroy();
    };
    shutdown?.addEventListener('abort', onShutdown);
    req.on('response', (res) => {
      const chunks: Buffer[] = [];
      let size = 0;
      const done = () => {
        const text = Buffer.concat(chunks).subarray(0, RESPONSE_BODY_LIMIT).toString('utf8').replace(/\u0000/g, '');
        const status = res.statusCode ?? 0;
        const ok = status >= 200 && status <= 299;
        const error = ok ? null : status >= 300 && status <= 399 ? `HTTP ${status} (redirects are not followed)` : `HTTP ${status}`;
        finish({ statusCode: status, error, body: text });
      };
      res.on('data', (chunk: Buffer) => {
        if (size < RESPONSE_BODY_LIMIT) chunks.push(chunk);
        size += chunk.length;
        // Enough kept: stop reading (the connection is not reused).
        if (size > 64 * 1024) {
          done();
          res.destroy();
        }
      });
      res.on('end', done);
      res.on('error', done);
      res.on('aborted', done);
    });
    req.on('error', (err: NodeJS.ErrnoException) => {
      if (req.reusedSocket && (err.code === 'ECONNRESET' || err.code === 'EPIPE')) return finish('retry-fresh');
      finish(noAnswer(err.code === 'ETARGETREFUSED' ? `refused: ${err.message}` : describe(err)));
    });
    req.end(body);
  });
}

function describe(err: NodeJS.ErrnoException): string {
  return err.code ? `${err.code}: ${err.message}` : err.message;
}

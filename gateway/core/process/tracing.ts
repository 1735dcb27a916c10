// Traces (OpenTelemetry), exported over OTLP when the standard
// OTEL_EXPORTER_OTLP_ENDPOINT or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT is set
// (OTEL_EXPORTER_OTLP_PROTOCOL, OTEL_SERVICE_NAME, OTEL_BSP_* and the other
// standard variables apply as the SDK reads them). When neither is set the
// SDK is not even loaded: the pipeline's hooks test one variable.
//
// The spans are made by the pipeline's hooks, once for every route: the
// request's server span where its log line starts and ends
// (core/web/request-log.ts; an incoming W3C traceparent is continued), and
// a client span for its SQL call around the request's transaction
// (core/database/transaction.ts). No automatic instrumentation is loaded.
//
// A job carries the trace of the request that queued it: the request's
// traceparent goes into its transaction (request.traceparent), SQL keeps it
// in the job's payload (private.enqueue_job), and the worker runs the job as
// a consumer span that continues it (inJobSpan); a webhook delivery is a
// client span under the job's, whose traceparent the receiver gets.
import { context, propagation, ROOT_CONTEXT, SpanKind, SpanStatusCode, trace, type Context, type Span, type Tracer } from '@opentelemetry/api';

let tracer: Tracer | undefined;
let shutdown: (() => Promise<void>) | undefined;

/** Whether traces are exported (the environment names an OTLP endpoint). */
export function tracingConfigured(env: NodeJS.ProcessEnv = process.env): boolean {
  return Boolean(env.OTEL_EXPORTER_OTLP_ENDPOINT?.trim() || env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT?.trim());
}

/**
 * Starts the OpenTelemetry SDK (traces only; metrics are Prometheus's, on the
 * admin server) when an OTLP endpoint is configured. `service` is the
 * default service.name (OTEL_SERVICE_NAME wins).
 */
export async function startTracing(service: string): Promise<void> {
  if (tracer || !tracingConfigured()) return;
  // Only traces go out over OTLP unless the operator asks for more.
  process.env.OTEL_METRICS_EXPORTER ??= 'none';
  process.env.OTEL_LOGS_EXPORTER ??= 'none';
  const { NodeSDK } = await import('@opentelemetry/sdk-node');
  const sdk = new NodeSDK({ serviceName: process.env.OTEL_SERVICE_NAME || service, instrumentations: [] });
  sdk.start();
  tracer = trace.getTracer('community-backend');
  shutdown = () => sdk.shutdown();
}

/** Sends the spans still buffered and stops the SDK (at shutdown). */
export async function stopTracing(): Promise<void> {
  await shutdown?.().catch(() => {});
}

/** A request's server span and its context (the parent of its SQL call's span). */
export interface ServerSpan {
  span: Span;
  context: Context;
  method: string;
}

/** The server span of a request (continuing its traceparent), or undefined when tracing is off. */
export function startServerSpan(method: string, headers: Record<string, string | string[] | undefined>): ServerSpan | undefined {
  if (!tracer) return undefined;
  const parent = propagation.extract(context.active(), headers);
  const span = tracer.startSpan(method, { kind: SpanKind.SERVER, attributes: { 'http.request.method': method } }, parent);
  return { span, context: trace.setSpan(parent, span), method };
}

/** Ends a request's server span, named `METHOD route` (OpenTelemetry's HTTP span name). */
export function endServerSpan(server: ServerSpan, route: string | undefined, status: number): void {
  if (route) {
    server.span.updateName(`${server.method} ${route}`);
    server.span.setAttribute('http.route', route);
  }
  server.span.setAttribute('http.response.status_code', status);
  if (status >= 500) server.span.setStatus({ code: SpanStatusCode.ERROR });
  server.span.end();
}

/** The traceparent of a span, for a request or a job it causes. */
export function traceparentOfSpan(span: Span): string {
  const { traceId, spanId, traceFlags } = span.spanContext();
  return `00-${traceId}-${spanId}-${traceFlags.toString(16).padStart(2, '0')}`;
}

/** A client span for a SQL call under `parent` (the request's server span), or undefined when tracing is off. */
export function startSqlSpan(parent: Context | undefined): Span | undefined {
  if (!tracer || !parent) return undefined;
  return tracer.startSpan('postgresql', { kind: SpanKind.CLIENT, attributes: { 'db.system': 'postgresql', 'db.system.name': 'postgresql' } }, parent);
}

/** Ends a SQL call's span, named after the api function (OpenTelemetry's db.operation.name). */
export function endSqlSpan(span: Span, operation: string, errorType: string): void {
  span.updateName(operation);
  span.setAttribute('db.operation.name', operation);
  if (errorType) {
    span.setAttribute('error.type', errorType);
    span.setStatus({ code: SpanStatusCode.ERROR });
  }
  span.end();
}

/** A span of the job worker's (a webhook delivery), a child of the running job's (inJobSpan), with its traceparent for the receiver; undefined when tracing is off. */
export function startClientSpan(name: string, attributes: Record<string, string>): { span: Span; traceparent: string } | undefined {
  if (!tracer) return undefined;
  const span = tracer.startSpan(name, { kind: SpanKind.CLIENT, attributes });
  return { span, traceparent: traceparentOfSpan(span) };
}

/** The W3C traceparent a job's payload carries (the request that queued it), when well-formed. */
export function jobTraceparent(payload: unknown): string | undefined {
  const value = (payload as { traceparent?: unknown } | null)?.traceparent;
  return typeof value === 'string' && /^00-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}$/.test(value) ? value : undefined;
}

/**
 * Runs a job as a consumer span named after its task, a child of the
 * traceparent its payload carries (a new trace without one); the spans it
 * starts (a webhook delivery's) are its children. As is when tracing is off.
 */
export async function inJobSpan<T>(task: string, payload: unknown, run: () => Promise<T>): Promise<T> {
  if (!tracer) return run();
  const traceparent = jobTraceparent(payload);
  const parent = traceparent ? propagation.extract(ROOT_CONTEXT, { traceparent }) : ROOT_CONTEXT;
  const span = tracer.startSpan(
    task,
    { kind: SpanKind.CONSUMER, attributes: { 'messaging.operation.type': 'process', 'messaging.destination.name': task } },
    parent,
  );
  try {
    return await context.with(trace.setSpan(parent, span), run);
  } catch (err) {
    span.setAttribute('error.type', err instanceof Error ? err.name : 'error');
    span.setStatus({ code: SpanStatusCode.ERROR });
    throw err;
  } finally {
    span.end();
  }
}

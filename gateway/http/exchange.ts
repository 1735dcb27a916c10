// One request as the pipeline (http/route.ts) sees it: the thin adapter from
// Fastify's request and reply (gateway/app.ts). Fastify routes it, parses its
// query and body; the pipeline answers on the raw response (the reply is
// hijacked once a handler owns it, and keeps the headers the hooks set, such
// as CORS's). What it needs: the path (undecodable percent-encoding repaired,
// see input.ts), the query (node's querystring: Express's 'simple' parser),
// the route's path parameters, the parsed body, the request id and log, and
// three ways to answer (JSON, HTML, an error body).
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { ParsedUrlQuery } from 'node:querystring';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { errorBody, type ErrorShape, type HttpError } from '../core/web/errors.ts';
import type { Logger } from '../core/process/log.ts';
import { noteCause, type RequestLog } from '../core/web/request-log.ts';
import { retryAfterOf } from '../core/web/throttle.ts';

export class Exchange {
  /** The URL as the client sent it (the MCP process gets it unchanged). */
  readonly originalUrl: string;
  /** The path, without the query string; undecodable percent-encoding repaired (input.ts). */
  readonly path: string;
  /** The raw query string, without `?` ('' when none). */
  readonly search: string;
  /** Path parameters of the matched route (URI-decoded). */
  params: Record<string, string>;
  /** The parsed body; undefined when the request has none (or not JSON). */
  readonly body: unknown;
  /** The query string parsed as Express's 'simple' parser does (repeated keys become arrays). */
  readonly query: ParsedUrlQuery;
  readonly req: IncomingMessage;
  readonly res: ServerResponse;
  /** The request id (X-Request-Id), its log line and its logger. */
  readonly requestLog: RequestLog;

  constructor(request: FastifyRequest, reply: FastifyReply) {
    this.req = request.raw;
    this.res = reply.raw;
    this.requestLog = request.requestLog!;
    this.originalUrl = request.originalUrl;
    const url = request.url;
    const q = url.indexOf('?');
    this.path = q === -1 ? url : url.slice(0, q);
    this.search = q === -1 ? '' : url.slice(q + 1);
    this.params = { ...(request.params as Record<string, string>) };
    this.body = request.body;
    this.query = (request.query ?? {}) as ParsedUrlQuery;
  }

  get method(): string {
    return this.req.method ?? 'GET';
  }

  get log(): Logger {
    return this.requestLog.log;
  }

  /** The signed-in user, for the request log line. */
  set userId(id: string | undefined) {
    this.requestLog.userId = id;
  }

  /** What the request log line shows instead of a path that holds a secret. */
  set logPath(path: string) {
    this.requestLog.path = path;
  }
}

export function exchangeOf(request: FastifyRequest, reply: FastifyReply): Exchange {
  return new Exchange(request, reply);
}

/**
 * Takes the response over from Fastify (reply.hijack): the pipeline writes
 * the raw response itself, with the headers Fastify's hooks set on the reply
 * (CORS's) already on it.
 */
export function adoptReply(reply: FastifyReply): void {
  if (reply.sent) return;
  for (const [name, value] of Object.entries(reply.getHeaders())) if (value !== undefined) reply.raw.setHeader(name, value as string | string[]);
  reply.hijack();
}

/** Sends `text` (or bytes) with `status` and its content type; HEAD gets the headers only. */
export function sendText(res: ServerResponse, status: number, contentType: string, text: string | Uint8Array): void {
  res.statusCode = status;
  res.setHeader('Content-Type', contentType);
  res.setHeader('Content-Length', Buffer.byteLength(text));
  res.end(res.req.method === 'HEAD' ? undefined : text);
}

/** Sends JSON text with `status`. */
export function sendJson(res: ServerResponse, status: number, json: string): void {
  sendText(res, status, 'application/json; charset=utf-8', json);
}

export function sendHtml(res: ServerResponse, status: number, html: string, headers?: Record<string, string>): void {
  for (const [name, value] of Object.entries(headers ?? {})) res.setHeader(name, value);
  sendText(res, status, 'text/html; charset=utf-8', html);
}

/** An error in one of the three bodies of docs/api/conventions.md#errors (unless the response already started). */
export function sendError(res: ServerResponse, err: HttpError, shape: ErrorShape = 'default'): void {
  if (res.headersSent) {
    res.destroy();
    return;
  }
  noteCause(res, err.code);
  const retryAfter = retryAfterOf(err);
  if (retryAfter) res.setHeader('Retry-After', retryAfter);
  sendJson(res, err.status, JSON.stringify(errorBody(shape, err)));
}

/**
 * A Location header value: characters a header may not carry, and `%` that
 * starts no escape, are percent-encoded (as Express's res.location did);
 * escapes already present are kept.
 */
export function locationHeader(url: string): string {
  return url.replace(/%(?![0-9A-Fa-f]{2})|[^\x21-\x7e]/gu, (c) => {
    try {
      return encodeURIComponent(c);
    } catch {
      return encodeURIComponent('\uFFFD'); // a lone surrogate
    }
  });
}

// The gateway's side of the agent interface: /mcp, the OAuth endpoints and
// their discovery documents are served by the MCP process (mcp-server/) and
// passed through here unchanged, streaming: request and response bodies are
// piped (server-sent events arrive as they are written), and a client that
// goes away closes the upstream request.
//
// The MCP process counts requests per client IP, so the gateway tells it the
// client's address in X-Forwarded-For: one address, the client as this
// gateway sees it (TRUST_PROXY says whether the gateway itself is behind
// trusted proxies), replacing whatever the client sent. The MCP process
// believes that header only from the gateway: from a loopback peer, or, with
// MCP_PROXY_SECRET set, from a request carrying the secret, which the
// gateway adds here (any copy sent by the client is dropped).
import http from 'node:http';
import { traceparentOf } from '../core/web/request-log.ts';
import { HttpError } from '../core/web/errors.ts';
import { PROXY_SECRET_HEADER, clientIp } from '../core/web/client-ip.ts';
import type { TrustProxy } from '../core/process/config.ts';
import type { Logger } from '../core/process/log.ts';
import { discardRest, hasBody } from './body.ts';
import { sendError, type Exchange } from './exchange.ts';

/** Path prefixes served by the MCP process. */
export const MCP_PATHS = [
  '/mcp',
  '/authorize',
  '/token',
  '/register',
  '/revoke',
  '/oauth',
  '/.well-known/oauth-authorization-server',
  '/.well-known/openid-configuration',
  '/.well-known/oauth-protected-resource',
];

const HOP_BY_HOP = new Set([
  'connection',
  'keep-alive',
  'proxy-authenticate',
  'proxy-authorization',
  'proxy-connection',
  'te',
  'trailer',
  'upgrade',
]);


export interface McpProxyOptions {
  /** Where the MCP process listens now (it may move: gateway/mcp-child.ts); undefined while it is not up (503). */
  upstreamUrl: () => string | undefined;
  trustProxy: TrustProxy;
  /** MCP_PROXY_SECRET, sent with every request passed on. */
  proxySecret?: string;
  log: Logger;
}

/** The MCP process's path prefix `path` falls under (one of MCP_PATHS, or below one; case-insensitive), if any: also the metrics' route. */
export function mcpPathOf(path: string): string | undefined {
  const lower = path.toLowerCase();
  return MCP_PATHS.find((prefix) => lower === prefix || lower.startsWith(`${prefix}/`));
}

/** Passes the exchange's request to the MCP process, and its answer back. */
export function mcpProxy({ upstreamUrl, trustProxy, proxySecret, log }: McpProxyOptions): (exchange: Exchange) => void {
  const agent = new http.Agent({ keepAlive: true, maxSockets: 256 });
  const unavailable = () => new HttpError(503, 'service_unavailable', 'the agent interface is not available, try again');
  let parsed: { url: string; upstream: URL } | undefined;
  return ({ req, res, originalUrl, requestLog }) => {
    const url = upstreamUrl();
    if (!url) {
      requestLog.cause = 'mcp';
      return sendError(res, unavailable());
    }
    if (parsed?.url !== url) parsed = { url, upstream: new URL(url) };
    const { upstream } = parsed;
    const headers: http.OutgoingHttpHeaders = {};
    for (const [name, value] of Object.entries(req.headers)) {
      if (value !== undefined && !HOP_BY_HOP.has(name) && name !== PROXY_SECRET_HEADER) headers[name] = value;
    }
    // The client as this gateway sees it (TRUST_PROXY: core/web/client-ip.ts); the MCP process believes this one address.
    headers['x-forwarded-for'] = clientIp(req.socket.remoteAddress, req.headers['x-forwarded-for'], trustProxy);
    if (proxySecret) headers[PROXY_SECRET_HEADER] = proxySecret;
    headers['x-forwarded-proto'] = 'encrypted' in req.socket && req.socket.encrypted ? 'https' : 'http';
    headers['x-request-id'] = requestLog.id;
    // The same trace on both sides: the MCP process's log lines (and its transactions) carry this request's trace id
    // (an incoming traceparent that is not valid, which this request did not continue, is not passed on).
    if (requestLog.span || requestLog.traceparent === undefined) headers.traceparent = traceparentOf(requestLog);
    const outgoing = http.request(
      {
        protocol: upstream.protocol,
        hostname: upstream.hostname,
        port: upstream.port,
        method: req.method,
        path: originalUrl,
        headers,
        agent,
      },
      (incoming) => {
        const responseHeaders: http.OutgoingHttpHeaders = {};
        for (const [name, value] of Object.entries(incoming.headers)) {
          if (value !== undefined && !HOP_BY_HOP.has(name)) responseHeaders[name] = value;
        }
        res.writeHead(incoming.statusCode ?? 502, responseHeaders);
        // Send headers at once (an SSE stream may not write for a while).
        res.flushHeaders();
        res.socket?.setNoDelay(true);
        incoming.pipe(res);
        incoming.on('error', () => res.destroy());
        if (hasBody(req) && !req.complete) answeredEarly();
      },
    );
    // The MCP process answered before it had the whole body (a refusal:
    // 401, 413, ...), so it will not read the rest: passing it on would stall
    // (and the client, still sending, would wait for ever). The rest is read
    // here and thrown away (as for the gateway's own refusals, at most 8 MB
    // and 5 s; past that the connection is closed), and the upstream request
    // is dropped once the answer is out.
    const answeredEarly = () => {
      req.unpipe(outgoing);
      res.once('finish', () => outgoing.destroy());
      void discardRest(req).then(() => {
        if (!req.complete) req.socket.destroy();
      });
    };
    outgoing.on('error', (err) => {
      if (res.writableFinished) return;
      if (res.headersSent) {
        res.destroy();
        return;
      }
      log.warn({ err: err.message }, 'the MCP server is not reachable');
      requestLog.cause = 'mcp';
      sendError(res, unavailable());
    });
    // The client went away (e.g. closed an SSE stream): stop the upstream request.
    res.on('close', () => {
      if (!res.writableFinished) outgoing.destroy();
    });
    req.pipe(outgoing);
  };
}

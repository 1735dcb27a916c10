// The gateway's side of the agent interface: /mcp, the OAuth endpoints and
// their discovery documents are served by the MCP process (mcp-server/) and
// passed through here unchanged, streaming: request and response bodies are
// piped (server-sent events arrive as they are written), and a client that
// goes away closes the upstream request.
//
// The MCP process counts requests per client IP, so the gateway tells it the
// client's address in X-Forwarded-For (replacing whatever the client sent,
// unless TRUST_PROXY says the gateway itself is behind trusted proxies; the
// MCP process it starts trusts exactly one hop: the gateway on loopback).
import http from 'node:http';
import express, { type Router } from 'express';
import { errorBody, HttpError } from '../lib/errors.ts';
import { clientIp, type TrustProxy } from '../lib/client-ip.ts';
import type { Logger } from '../lib/log.ts';

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
  upstreamUrl: string;
  trustProxy: TrustProxy;
  log: Logger;
}

export function mcpProxy({ upstreamUrl, trustProxy, log }: McpProxyOptions): Router {
  const upstream = new URL(upstreamUrl);
  const agent = new http.Agent({ keepAlive: true, maxSockets: 256 });
  const proxyApp = express();
  proxyApp.disable('x-powered-by');
  proxyApp.use((req, res) => {
    const headers: http.OutgoingHttpHeaders = {};
    for (const [name, value] of Object.entries(req.headers)) {
      if (value !== undefined && !HOP_BY_HOP.has(name)) headers[name] = value;
    }
    // The client as this gateway sees it (TRUST_PROXY: lib/client-ip.ts); the MCP process trusts this one hop.
    headers['x-forwarded-for'] = clientIp(req.socket.remoteAddress, req.headers['x-forwarded-for'], trustProxy);
    headers['x-forwarded-proto'] = req.protocol;
    if (typeof res.locals.requestId === 'string') headers['x-request-id'] = res.locals.requestId;
    const outgoing = http.request(
      {
        protocol: upstream.protocol,
        hostname: upstream.hostname,
        port: upstream.port,
        method: req.method,
        path: req.originalUrl,
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
      },
    );
    outgoing.on('error', (err) => {
      if (res.headersSent) {
        res.destroy();
        return;
      }
      log.warn({ err: err.message }, 'the MCP server is not reachable');
      res
        .status(503)
        .json(errorBody('error', new HttpError(503, 'service_unavailable', 'the agent interface is not available, try again')));
    });
    // The client went away (e.g. closed an SSE stream): stop the upstream request.
    res.on('close', () => {
      if (!res.writableFinished) outgoing.destroy();
    });
    req.pipe(outgoing);
  });
  const router = express.Router();
  router.use(MCP_PATHS, (req, res, next) => {
    // Mounting strips the prefix; the MCP process needs the full path (originalUrl).
    proxyApp(req, res, next);
  });
  return router;
}

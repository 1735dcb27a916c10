// The client address the MCP process counts limits against (requests per
// minute, failed sign-ins on the consent form).
//
// Its one proxy is the gateway, which replaces X-Forwarded-For with the one
// address it sees (gateway/http/mcp-proxy.ts). That header is believed only
// from the gateway, whatever MCP_HOST is:
//   * MCP_PROXY_SECRET set: from a request carrying that secret (the gateway
//     adds it), from any peer;
//   * unset: from a loopback peer (the gateway on the same machine).
// From anyone else the address is the socket's, so a client that reaches the
// MCP port directly cannot pick the address it is counted under.
// TRUST_PROXY is the gateway's setting and means nothing here.
import crypto from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import net from 'node:net';
import { clientIp, PROXY_SECRET_HEADER } from '../gateway/core/web/client-ip.ts';

function isLoopback(address: string | undefined): boolean {
  if (!address) return false;
  const a = address.toLowerCase().startsWith('::ffff:') ? address.slice(7) : address;
  if (net.isIPv4(a)) return a.startsWith('127.');
  return a === '::1';
}

function sameSecret(presented: string | string[] | undefined, secret: string): boolean {
  if (typeof presented !== 'string') return false;
  const a = crypto.createHash('sha256').update(presented).digest();
  const b = crypto.createHash('sha256').update(secret).digest();
  return crypto.timingSafeEqual(a, b);
}

/** Whether the request came through the gateway (so its X-Forwarded-For is the gateway's). */
export function fromGateway(req: IncomingMessage, proxySecret: string | undefined): boolean {
  return proxySecret ? sameSecret(req.headers[PROXY_SECRET_HEADER], proxySecret) : isLoopback(req.socket.remoteAddress);
}

/** The client's address: the one the gateway forwarded, or the socket's. */
export function mcpClientIp(req: IncomingMessage, proxySecret: string | undefined): string {
  const trusted = fromGateway(req, proxySecret);
  return clientIp(req.socket.remoteAddress, trusted ? req.headers['x-forwarded-for'] : undefined, trusted ? 1 : undefined);
}

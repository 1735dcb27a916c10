// The client's IP address, for limits counted per client (login throttling,
// fair shares). Shared by the gateway and the MCP server.
//
// Without TRUST_PROXY it is the socket's peer address: X-Forwarded-For is
// ignored, since any client can send it. Behind proxies, TRUST_PROXY names
// how many proxy hops to trust (e.g. `1` behind one load balancer): the
// client is then the address that many entries from the right of
// X-Forwarded-For (each trusted proxy appends the address it saw). `true`
// trusts the whole header (its leftmost entry).
import net from 'node:net';
import type { TrustProxy } from '../process/config.ts';

/** `::ffff:1.2.3.4` → `1.2.3.4`; anything that is not an IP address → undefined. */
function normalise(address: string | undefined): string | undefined {
  if (!address) return undefined;
  let a = address.trim();
  if (a.startsWith('[') && a.includes(']')) a = a.slice(1, a.indexOf(']')); // [v6]:port
  else if (/^\d+\.\d+\.\d+\.\d+:\d+$/.test(a)) a = a.slice(0, a.lastIndexOf(':')); // v4:port
  if (a.toLowerCase().startsWith('::ffff:') && net.isIPv4(a.slice(7))) a = a.slice(7);
  return net.isIP(a) ? a.toLowerCase() : undefined;
}

export function clientIp(
  socketAddress: string | undefined,
  forwardedFor: string | string[] | undefined,
  trust: TrustProxy,
): string {
  const peer = normalise(socketAddress) ?? 'unknown';
  if (trust === undefined || forwardedFor === undefined) return peer;
  const entries = (Array.isArray(forwardedFor) ? forwardedFor.join(',') : forwardedFor)
    .split(',')
    .map((e) => e.trim())
    .filter(Boolean);
  if (entries.length === 0) return peer;
  const index = trust === 'all' ? 0 : Math.max(0, entries.length - trust);
  return normalise(entries[index]) ?? peer;
}

/** The header that carries MCP_PROXY_SECRET from the gateway to the MCP process. */
export const PROXY_SECRET_HEADER = 'x-mcp-proxy-secret';

// The client address of a raw request (a websocket upgrade, which Express
// never sees), by the same rule as Express's req.ip: walk X-Forwarded-For from
// the nearest hop while the hop is a trusted proxy (TRUST_PROXY, compiled by
// Express as the app setting 'trust proxy fn').
import type http from 'node:http';

export type TrustProxyFn = (address: string, hop: number) => boolean;

export function clientIpOf(req: http.IncomingMessage, trust: TrustProxyFn | undefined): string {
  const socketAddress = req.socket.remoteAddress ?? 'unknown';
  if (!trust) return socketAddress;
  const header = req.headers['x-forwarded-for'];
  const forwarded = (Array.isArray(header) ? header.join(',') : header ?? '')
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean)
    .reverse();
  const hops = [socketAddress, ...forwarded];
  for (let i = 0; i < hops.length - 1; i++) {
    if (!trust(hops[i]!, i)) return hops[i]!;
  }
  return hops[hops.length - 1]!;
}

// Where a webhook may be sent (no server-side request forgery): one rule for
// registration (the gateway's webhook routes) and for every send (the worker).
//
//   * The URL is https (http too with WEBHOOK_ALLOW_PRIVATE_TARGETS=1), with
//     no user name or password in it.
//   * Every address it goes to is a public unicast address, as ipaddr.js
//     classifies them: loopback, private (RFC 1918, unique local), link-local
//     (which holds the cloud metadata address 169.254.169.254), multicast,
//     carrier-grade NAT, reserved and unspecified addresses are refused, and
//     so are IPv4-mapped IPv6 addresses of those. A literal address is judged
//     at registration; a name is resolved at every send and EVERY address it
//     resolves to must pass (a DNS change cannot redirect a registered
//     webhook), and the connection goes to an address that passed.
//   * WEBHOOK_ALLOW_PRIVATE_TARGETS=1 (tests, local development) allows all
//     addresses.
import dns from 'node:dns';
import type { LookupFunction } from 'node:net';
import ipaddr from 'ipaddr.js';

/** A send refused by the address rule (recorded as the attempt's error). */
export class TargetRefused extends Error {
  readonly code = 'ETARGETREFUSED';
}

/** Whether an address (IPv4 or IPv6 text) is public unicast. */
export function isPublicAddress(address: string): boolean {
  if (!ipaddr.isValid(address)) return false;
  let parsed = ipaddr.parse(address);
  if (parsed.kind() === 'ipv6' && (parsed as ipaddr.IPv6).isIPv4MappedAddress()) {
    parsed = (parsed as ipaddr.IPv6).toIPv4Address();
  }
  return parsed.range() === 'unicast';
}

/** The host of a URL as an address when it is a literal one (brackets of IPv6 removed), else null. */
export function literalAddress(url: URL): string | null {
  const host = url.hostname.replace(/^\[(.*)\]$/, '$1');
  return ipaddr.isValid(host) ? host : null;
}

/** Why a webhook URL cannot be registered (null: it can). */
export function webhookUrlProblem(raw: string, allowPrivate: boolean): string | null {
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    return 'url must be an absolute URL';
  }
  if (url.protocol !== 'https:' && !(allowPrivate && url.protocol === 'http:')) return 'url must be https';
  if (url.username || url.password) return 'url must not contain a user name or password';
  if (!url.hostname) return 'url must name a host';
  const literal = literalAddress(url);
  if (literal && !allowPrivate && !isPublicAddress(literal)) {
    return `url must not name a loopback, private, link-local, multicast or reserved address (${literal})`;
  }
  return null;
}

/**
 * A `lookup` for http(s).request that resolves the name and refuses the
 * connection unless every address is public (all addresses pass when
 * allowPrivate).
 */
export function guardedLookup(allowPrivate: boolean): LookupFunction {
  return (hostname, options, callback) => {
    dns.lookup(hostname, { all: true, family: options.family, hints: options.hints }, (err, addresses) => {
      if (err) return callback(err, '', 0);
      if (addresses.length === 0) return callback(new TargetRefused(`${hostname} has no address`), '', 0);
      const refused = allowPrivate ? undefined : addresses.find((a) => !isPublicAddress(a.address));
      if (refused) {
        return callback(new TargetRefused(`${hostname} resolves to ${refused.address}, which is not a public address`), '', 0);
      }
      if (options.all) return (callback as unknown as (e: null, a: dns.LookupAddress[]) => void)(null, addresses);
      callback(null, addresses[0]!.address, addresses[0]!.family);
    });
  };
}

// Where a webhook may be sent (no server-side request forgery): one rule for
// registration (the gateway's webhook routes) and for every send (the worker).
//
//   * The URL is https, with no user name or password, on an allowed port:
//     443 or 8443 (WEBHOOK_ALLOWED_PORTS replaces the list).
//   * Every address it goes to is public, judged by the explicit table of
//     REFUSED_RANGES below (private, loopback, link-local, documentation,
//     benchmarking, deprecated and special-purpose ranges, each with why); an
//     IPv6 address must also be global unicast (2000::/3), and the IPv4
//     address inside a 6to4 or NAT64 address is judged too. A literal address
//     is judged at registration; a name is resolved at every send and EVERY
//     address it resolves to must pass (a DNS change cannot redirect a
//     registered webhook), and the connection goes to an address that passed.
//   * WEBHOOK_ALLOW_PRIVATE_TARGETS=1 (tests, local development) allows http,
//     every address and every port.
//
// ipaddr.js parses; it does not judge: its range() calls an IPv4-compatible
// address (::7f00:1, i.e. [::127.0.0.1]) unicast, and it reads "::a.b.c.d"
// as IPv4-mapped. Addresses are put in the URL standard's form first (hex
// groups, never dotted), then matched against the table.
import dns from 'node:dns';
import type { LookupFunction } from 'node:net';
import ipaddr from 'ipaddr.js';

/** A send refused by the address rule (recorded as the attempt's generic error; the log has the reason). */
export class TargetRefused extends Error {
  readonly code = 'ETARGETREFUSED';
}

/** What the address and port rules allow. */
export interface TargetRules {
  /** WEBHOOK_ALLOW_PRIVATE_TARGETS=1: http, any address, any port. */
  allowPrivate: boolean;
  /** WEBHOOK_ALLOWED_PORTS (default 443, 8443). */
  allowedPorts: readonly number[];
}

/** Ranges no webhook may reach, each with why. Checked in order; the first match refuses. */
export const REFUSED_RANGES: readonly { cidr: string; why: string }[] = [
  // IPv4 (RFC 6890 and its updates)
  { cidr: '0.0.0.0/8', why: '"this network" (0.0.0.0 reaches the local host)' },
  { cidr: '10.0.0.0/8', why: 'private (RFC 1918)' },
  { cidr: '100.64.0.0/10', why: 'carrier-grade NAT (shared address space)' },
  { cidr: '127.0.0.0/8', why: 'loopback' },
  { cidr: '169.254.0.0/16', why: 'link-local (the cloud metadata service, 169.254.169.254)' },
  { cidr: '172.16.0.0/12', why: 'private (RFC 1918)' },
  { cidr: '192.0.0.0/24', why: 'IETF protocol assignments' },
  { cidr: '192.0.2.0/24', why: 'documentation (TEST-NET-1)' },
  { cidr: '192.88.99.0/24', why: '6to4 relay anycast (deprecated)' },
  { cidr: '192.168.0.0/16', why: 'private (RFC 1918)' },
  { cidr: '198.18.0.0/15', why: 'benchmarking' },
  { cidr: '198.51.100.0/24', why: 'documentation (TEST-NET-2)' },
  { cidr: '203.0.113.0/24', why: 'documentation (TEST-NET-3)' },
  { cidr: '224.0.0.0/4', why: 'multicast' },
  { cidr: '240.0.0.0/4', why: 'reserved, and the broadcast address' },
  // IPv6 (the IANA special-purpose registry)
  { cidr: '::1/128', why: 'loopback' },
  { cidr: '::/128', why: 'unspecified' },
  { cidr: '::/96', why: 'IPv4-compatible (deprecated): ::7f00:1 is [::127.0.0.1]' },
  { cidr: '::ffff:0:0/96', why: 'IPv4-mapped' },
  { cidr: '::ffff:0:0:0/96', why: 'IPv4-translated (SIIT)' },
  { cidr: '64:ff9b:1::/48', why: 'local-use NAT64' },
  { cidr: '100::/64', why: 'discard-only' },
  { cidr: '2001::/32', why: 'Teredo' },
  { cidr: '2001:2::/48', why: 'benchmarking' },
  { cidr: '2001:10::/28', why: 'ORCHID (deprecated)' },
  { cidr: '2001:20::/28', why: 'ORCHIDv2' },
  { cidr: '2001::/23', why: 'IETF protocol assignments' },
  { cidr: '2001:db8::/32', why: 'documentation' },
  { cidr: '3fff::/20', why: 'documentation' },
  { cidr: '5f00::/16', why: 'segment routing (SRv6) identifiers' },
  { cidr: 'fc00::/7', why: 'unique local (fd00:ec2::254 is a cloud metadata service)' },
  { cidr: 'fe80::/10', why: 'link-local' },
  { cidr: 'fec0::/10', why: 'site-local (deprecated)' },
  { cidr: 'ff00::/8', why: 'multicast' },
];

const REFUSED = REFUSED_RANGES.map(({ cidr, why }) => ({ range: ipaddr.parseCIDR(cidr), why }));
const GLOBAL_UNICAST = ipaddr.parseCIDR('2000::/3');
const NAT64 = ipaddr.parseCIDR('64:ff9b::/96');
const SIX_TO_FOUR = ipaddr.parseCIDR('2002::/16');

/** An address in the URL standard's form (IPv6: hex groups), parsed; null when it is not an address. */
function parse(address: string): ipaddr.IPv4 | ipaddr.IPv6 | null {
  const text = address.replace(/^\[(.*)\]$/, '$1');
  if (!ipaddr.isValid(text)) return null;
  if (!text.includes(':')) return ipaddr.IPv4.isValidFourPartDecimal(text) ? ipaddr.IPv4.parse(text) : null;
  try {
    return ipaddr.IPv6.parse(new URL(`http://[${text}]/`).hostname.slice(1, -1));
  } catch {
    return null; // a zone id, or anything else the URL standard refuses
  }
}

function inRange(address: ipaddr.IPv4 | ipaddr.IPv6, [network, bits]: [ipaddr.IPv4 | ipaddr.IPv6, number]): boolean {
  return address.kind() === network.kind() && address.match(network, bits);
}

/** Why an address is refused (a row of REFUSED_RANGES, or another rule); null when it is public. */
export function addressRefusal(address: string): string | null {
  const parsed = parse(address);
  if (!parsed) return 'not an IP address';
  for (const { range, why } of REFUSED) if (inRange(parsed, range)) return why;
  if (parsed.kind() === 'ipv4') return null;
  const bytes = parsed.toByteArray();
  // NAT64 (64:ff9b::/96) and 6to4 (2002::/16) carry an IPv4 address: it must be public too.
  if (inRange(parsed, NAT64)) return embedded(bytes.slice(12, 16), 'NAT64');
  if (!inRange(parsed, GLOBAL_UNICAST)) return 'not global unicast (outside 2000::/3)';
  if (inRange(parsed, SIX_TO_FOUR)) return embedded(bytes.slice(2, 6), '6to4');
  return null;
}

function embedded(bytes: number[], what: string): string | null {
  const why = addressRefusal(bytes.join('.'));
  return why && `${what} of an address that is ${why}`;
}

/** Whether an address (IPv4 or IPv6 text) is public. */
export function isPublicAddress(address: string): boolean {
  return addressRefusal(address) === null;
}

/** The host of a URL as an address when it is a literal one (brackets of IPv6 removed), else null. */
export function literalAddress(url: URL): string | null {
  const host = url.hostname.replace(/^\[(.*)\]$/, '$1');
  return ipaddr.isValid(host) ? host : null;
}

/** The port a URL goes to (its default when it names none). */
function portOf(url: URL): number {
  return url.port ? Number(url.port) : url.protocol === 'https:' ? 443 : 80;
}

/** Why a webhook URL cannot be registered (null: it can). */
export function webhookUrlProblem(raw: string, rules: TargetRules): string | null {
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    return 'url must be an absolute URL';
  }
  if (url.protocol !== 'https:' && !(rules.allowPrivate && url.protocol === 'http:')) return 'url must be https';
  if (url.username || url.password) return 'url must not contain a user name or password';
  if (!url.hostname) return 'url must name a host';
  if (rules.allowPrivate) return null;
  if (!rules.allowedPorts.includes(portOf(url))) return `url must use the port ${rules.allowedPorts.join(' or ')}`;
  const literal = literalAddress(url);
  if (literal && !isPublicAddress(literal)) return 'url must not name a private, loopback, link-local or special-purpose address';
  return null;
}

/** Why a send to this URL is refused before any connection (null: go ahead; names are judged by guardedLookup). */
export function sendRefusal(url: URL, rules: TargetRules): string | null {
  if (url.protocol !== 'https:' && !(rules.allowPrivate && url.protocol === 'http:')) return 'the url is not https';
  if (rules.allowPrivate) return null;
  if (!rules.allowedPorts.includes(portOf(url))) return `port ${portOf(url)} is not allowed`;
  const literal = literalAddress(url);
  const why = literal && addressRefusal(literal);
  return why ? `${literal} is ${why}` : null;
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
        return callback(new TargetRefused(`${hostname} resolves to ${refused.address}, which is ${addressRefusal(refused.address)}`), '', 0);
      }
      if (options.all) return (callback as unknown as (e: null, a: dns.LookupAddress[]) => void)(null, addresses);
      callback(null, addresses[0]!.address, addresses[0]!.family);
    });
  };
}

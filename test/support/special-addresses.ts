// Addresses a webhook must never reach, one or more per special range (the
// IANA special-purpose registries, deprecated forms included), each with
// the reason the address rule (gateway/jobs/webhook-targets.ts) gives; and
// public addresses it must accept. Written out here, apart from the rule's
// own table, so that a range dropped from the rule fails the tests.
// Used by test/unit/webhook-targets.test.ts and, over HTTP, by
// test/process/webhook-workers.test.ts.

export const REFUSED_ADDRESSES: readonly [address: string, reason: RegExp][] = [
  ['0.0.0.0', /this network/],
  ['0.1.2.3', /this network/],
  ['10.1.2.3', /private/],
  ['100.100.100.200', /carrier-grade NAT/],
  ['127.0.0.1', /loopback/],
  ['127.255.255.254', /loopback/],
  ['169.254.169.254', /link-local/],
  ['172.16.0.1', /private/],
  ['172.31.255.255', /private/],
  ['192.0.0.8', /IETF protocol assignments/],
  ['192.0.2.1', /documentation/],
  ['192.88.99.1', /6to4 relay/],
  ['192.168.1.1', /private/],
  ['198.18.0.1', /benchmarking/],
  ['198.19.255.254', /benchmarking/],
  ['198.51.100.7', /documentation/],
  ['203.0.113.9', /documentation/],
  ['224.0.0.1', /multicast/],
  ['239.255.255.250', /multicast/],
  ['240.0.0.1', /reserved/],
  ['255.255.255.255', /broadcast/],
  ['::', /unspecified/],
  ['::1', /loopback/],
  // IPv4-compatible (::/96, deprecated): the review's [::127.0.0.1], which ipaddr.js calls unicast.
  ['::127.0.0.1', /IPv4-compatible/],
  ['::7f00:1', /IPv4-compatible/],
  ['::10.0.0.1', /IPv4-compatible/],
  ['::1.1.1.1', /IPv4-compatible/],
  ['::ffff:127.0.0.1', /IPv4-mapped/],
  ['::ffff:1.1.1.1', /IPv4-mapped/],
  ['::ffff:0:10.0.0.1', /IPv4-translated/],
  ['64:ff9b::10.0.0.1', /NAT64 of an address that is private/],
  ['64:ff9b::127.0.0.1', /NAT64 of an address that is loopback/],
  ['64:ff9b::169.254.169.254', /NAT64 of an address that is link-local/],
  ['64:ff9b:1::1', /local-use NAT64/],
  ['100::1', /discard-only/],
  ['2001::1', /Teredo/],
  ['2001:0:4136:e378:8000:63bf:3fff:fdd2', /Teredo/],
  ['2001:2::1', /benchmarking/],
  ['2001:10::1', /ORCHID/],
  ['2001:20::1', /ORCHIDv2/],
  ['2001:4:112::1', /IETF protocol assignments/],
  ['2001:db8::1', /documentation/],
  ['2002:a00:1::1', /6to4 of an address that is private/],
  ['2002:7f00:1::1', /6to4 of an address that is loopback/],
  ['2002:c0a8:101::1', /6to4 of an address that is private/],
  ['3fff::1', /documentation/],
  ['5f00::1', /segment routing/],
  ['fc00::1', /unique local/],
  ['fd00:ec2::254', /unique local/],
  ['fe80::1', /link-local/],
  ['fec0::1', /site-local/],
  ['ff02::1', /multicast/],
  ['4000::1', /not global unicast/],
  ['1::1', /not global unicast/],
];

export const PUBLIC_ADDRESSES: readonly string[] = [
  '1.1.1.1',
  '8.8.8.8',
  '93.184.215.14',
  '2606:4700:4700::1111',
  '2001:4860:4860::8888',
  // NAT64 and 6to4 of public addresses.
  '64:ff9b::8.8.8.8',
  '2002:808:808::1',
];

/** The host part of a URL for an address (IPv6 in brackets). */
export const urlHost = (address: string) => (address.includes(':') ? `[${address}]` : address);

// The webhook address and port rule (gateway/jobs/webhook-targets.ts), table
// by table: every special range refused with its reason (IPv4-compatible,
// IPv4-mapped and -translated, NAT64 and 6to4 of non-public addresses,
// Teredo, site-local, ORCHID, documentation, benchmarking...), public
// addresses accepted, and only the allowed ports. The same tables go through
// the real gateway in test/process/webhook-workers.test.ts.
import { describe, expect, it } from 'vitest';
import { addressRefusal, isPublicAddress, sendRefusal, webhookUrlProblem } from '../../gateway/jobs/webhook-targets.ts';
import { DEFAULT_WEBHOOK_PORTS } from '../../gateway/core/config.ts';
import { PUBLIC_ADDRESSES, REFUSED_ADDRESSES, urlHost } from '../support/special-addresses.ts';

const strict = { allowPrivate: false, allowedPorts: DEFAULT_WEBHOOK_PORTS };

describe('the address rule', () => {
  it.each(REFUSED_ADDRESSES)('refuses %s (%s), as a literal in a URL too', (address, reason) => {
    expect(addressRefusal(address)).toMatch(reason);
    expect(isPublicAddress(address)).toBe(false);
    const url = `https://${urlHost(address)}/hook`;
    expect(webhookUrlProblem(url, strict)).toMatch(/must not name/);
    expect(sendRefusal(new URL(url), strict)).toMatch(/ is /);
  });

  it.each(PUBLIC_ADDRESSES)('accepts %s', (address) => {
    expect(addressRefusal(address)).toBeNull();
    expect(webhookUrlProblem(`https://${urlHost(address)}/hook`, strict)).toBeNull();
  });

  it('reads every way of writing an IPv4 address in a URL as the URL standard does', () => {
    for (const url of ['https://2130706433/', 'https://0x7f.1/', 'https://0177.0.0.1/', 'https://127.1/', 'https://[::ffff:7f00:1]/']) {
      expect(webhookUrlProblem(url, strict), url).toMatch(/must not name/);
    }
  });

  it('refuses what is not an address', () => {
    for (const text of ['', 'localhost', '1.2.3', '::g', 'fe80::1%eth0']) expect(addressRefusal(text), text).not.toBeNull();
  });
});

describe('the port rule', () => {
  it('allows 443 and 8443 (or the configured list), at registration and at send', () => {
    for (const [url, ok] of [
      ['https://hooks.example.com/', true],
      ['https://hooks.example.com:443/', true],
      ['https://hooks.example.com:8443/', true],
      ['https://1.1.1.1:6379/', false],
      ['https://hooks.example.com:80/', false],
      ['https://hooks.example.com:22/', false],
      ['https://hooks.example.com:9443/', false],
    ] as const) {
      expect(webhookUrlProblem(url, strict) === null, url).toBe(ok);
      expect(sendRefusal(new URL(url), strict) === null, url).toBe(ok);
    }
    const custom = { allowPrivate: false, allowedPorts: [9443] };
    expect(webhookUrlProblem('https://hooks.example.com:9443/', custom)).toBeNull();
    expect(webhookUrlProblem('https://hooks.example.com/', custom)).toMatch(/port 9443/);
  });

  it('WEBHOOK_ALLOW_PRIVATE_TARGETS (tests, development) lifts the address and port rules and allows http', () => {
    const open = { allowPrivate: true, allowedPorts: DEFAULT_WEBHOOK_PORTS };
    for (const url of ['http://127.0.0.1:6379/hook', 'https://[::127.0.0.1]:1/', 'https://10.0.0.1/']) {
      expect(webhookUrlProblem(url, open), url).toBeNull();
      expect(sendRefusal(new URL(url), open), url).toBeNull();
    }
    expect(webhookUrlProblem('ftp://127.0.0.1/', open)).toMatch(/https/);
  });
});

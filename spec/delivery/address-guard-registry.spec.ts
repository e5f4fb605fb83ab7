/**
 * The SSRF guard against the IANA special-purpose address registries
 * (iana-ipv4-special-registry, iana-ipv6-special-registry; RFC 6890 and its
 * updates), plus multicast, site-local and the IPv6 forms that embed an IPv4
 * address. Pure: only `isAllowed` is called, nothing is connected to.
 *
 * The table is written from the registries, not from the guard's own lists,
 * so a guard (or ipaddr.js) change that opens a range fails here.
 */
import { expect } from 'chai';
import ipaddr from 'ipaddr.js';
import { createAddressGuard } from '../../lib/delivery/address-guard.ts';

interface SpecialRange {
  readonly cidr: string;
  readonly name: string;
  readonly source: string;
  /** The registry's "Globally Reachable" column (`n/a` where it says N/A, or for entries outside the registry). */
  readonly globallyReachable: boolean | 'n/a';
  /**
   * What the guard does: `blocked` refuses every address in the range;
   * `embedded` judges the IPv4 address in the last 32 bits, so `allowedInside`
   * (a public IPv4) passes and `refusedInside` (a private one) does not.
   */
  readonly guard: 'blocked' | 'embedded';
  readonly allowedInside?: string;
  readonly refusedInside?: string;
}

/**
 * Every entry of the IANA IPv4 special-purpose registry, plus multicast.
 * The few marked globally reachable are anycast or AS112 infrastructure that
 * no webhook receiver lives on: the guard refuses them too, on purpose.
 */
const IPV4_RANGES: readonly SpecialRange[] = [
  { cidr: '0.0.0.0/8', name: '"This network"', source: 'RFC 791', globallyReachable: false, guard: 'blocked' },
  { cidr: '0.0.0.0/32', name: '"This host on this network"', source: 'RFC 1122', globallyReachable: false, guard: 'blocked' },
  { cidr: '10.0.0.0/8', name: 'Private-Use', source: 'RFC 1918', globallyReachable: false, guard: 'blocked' },
  { cidr: '100.64.0.0/10', name: 'Shared Address Space (CGNAT)', source: 'RFC 6598', globallyReachable: false, guard: 'blocked' },
  { cidr: '127.0.0.0/8', name: 'Loopback', source: 'RFC 1122', globallyReachable: false, guard: 'blocked' },
  { cidr: '169.254.0.0/16', name: 'Link Local (and the cloud metadata service)', source: 'RFC 3927', globallyReachable: false, guard: 'blocked' },
  { cidr: '172.16.0.0/12', name: 'Private-Use', source: 'RFC 1918', globallyReachable: false, guard: 'blocked' },
  { cidr: '192.0.0.0/24', name: 'IETF Protocol Assignments', source: 'RFC 6890', globallyReachable: false, guard: 'blocked' },
  { cidr: '192.0.0.0/29', name: 'IPv4 Service Continuity Prefix (DS-Lite)', source: 'RFC 7335', globallyReachable: false, guard: 'blocked' },
  { cidr: '192.0.0.8/32', name: 'IPv4 dummy address', source: 'RFC 7600', globallyReachable: false, guard: 'blocked' },
  { cidr: '192.0.0.9/32', name: 'Port Control Protocol Anycast', source: 'RFC 7723', globallyReachable: true, guard: 'blocked' },
  { cidr: '192.0.0.10/32', name: 'TURN Anycast', source: 'RFC 8155', globallyReachable: true, guard: 'blocked' },
  { cidr: '192.0.0.170/32', name: 'NAT64/DNS64 Discovery', source: 'RFC 7050', globallyReachable: false, guard: 'blocked' },
  { cidr: '192.0.0.171/32', name: 'NAT64/DNS64 Discovery', source: 'RFC 7050', globallyReachable: false, guard: 'blocked' },
  { cidr: '192.0.2.0/24', name: 'Documentation (TEST-NET-1)', source: 'RFC 5737', globallyReachable: false, guard: 'blocked' },
  { cidr: '192.31.196.0/24', name: 'AS112-v4', source: 'RFC 7535', globallyReachable: true, guard: 'blocked' },
  { cidr: '192.52.193.0/24', name: 'AMT', source: 'RFC 7450', globallyReachable: true, guard: 'blocked' },
  { cidr: '192.88.99.0/24', name: 'Deprecated (6to4 Relay Anycast)', source: 'RFC 7526', globallyReachable: 'n/a', guard: 'blocked' },
  { cidr: '192.88.99.2/32', name: '6a44-relay anycast address', source: 'RFC 6751', globallyReachable: true, guard: 'blocked' },
  { cidr: '192.168.0.0/16', name: 'Private-Use', source: 'RFC 1918', globallyReachable: false, guard: 'blocked' },
  { cidr: '192.175.48.0/24', name: 'Direct Delegation AS112 Service', source: 'RFC 7534', globallyReachable: true, guard: 'blocked' },
  { cidr: '198.18.0.0/15', name: 'Benchmarking', source: 'RFC 2544', globallyReachable: false, guard: 'blocked' },
  { cidr: '198.51.100.0/24', name: 'Documentation (TEST-NET-2)', source: 'RFC 5737', globallyReachable: false, guard: 'blocked' },
  { cidr: '203.0.113.0/24', name: 'Documentation (TEST-NET-3)', source: 'RFC 5737', globallyReachable: false, guard: 'blocked' },
  { cidr: '224.0.0.0/4', name: 'Multicast (not in the special registry)', source: 'RFC 5771', globallyReachable: 'n/a', guard: 'blocked' },
  { cidr: '240.0.0.0/4', name: 'Reserved', source: 'RFC 1112', globallyReachable: false, guard: 'blocked' },
  { cidr: '255.255.255.255/32', name: 'Limited Broadcast', source: 'RFC 919', globallyReachable: false, guard: 'blocked' },
];

/**
 * Every entry of the IANA IPv6 special-purpose registry, plus multicast,
 * site-local and the deprecated IPv4-compatible and IPv4-translated forms.
 * Only the forms that stand for an IPv4 address the packet ends up at are
 * judged by that address; tunnelling and local-use forms are refused whole.
 */
const IPV6_RANGES: readonly SpecialRange[] = [
  { cidr: '::1/128', name: 'Loopback Address', source: 'RFC 4291', globallyReachable: false, guard: 'blocked' },
  { cidr: '::/128', name: 'Unspecified Address', source: 'RFC 4291', globallyReachable: false, guard: 'blocked' },
  { cidr: '::/96', name: 'IPv4-compatible (deprecated; not in the registry)', source: 'RFC 4291 §2.5.5.1', globallyReachable: 'n/a', guard: 'blocked' },
  {
    cidr: '::ffff:0:0/96',
    name: 'IPv4-mapped Address',
    source: 'RFC 4291',
    globallyReachable: false,
    guard: 'embedded',
    allowedInside: '::ffff:8.8.8.8',
    refusedInside: '::ffff:169.254.169.254',
  },
  {
    cidr: '::ffff:0:0:0/96',
    name: 'IPv4-translated (SIIT; not in the registry)',
    source: 'RFC 6145',
    globallyReachable: 'n/a',
    guard: 'embedded',
    allowedInside: '::ffff:0:8.8.8.8',
    refusedInside: '::ffff:0:127.0.0.1',
  },
  {
    cidr: '64:ff9b::/96',
    name: 'IPv4-IPv6 Translat. (NAT64 well-known prefix)',
    source: 'RFC 6052',
    globallyReachable: true,
    guard: 'embedded',
    allowedInside: '64:ff9b::1.1.1.1',
    refusedInside: '64:ff9b::10.0.0.1',
  },
  { cidr: '64:ff9b:1::/48', name: 'IPv4-IPv6 Translat. (local-use NAT64)', source: 'RFC 8215', globallyReachable: false, guard: 'blocked' },
  { cidr: '100::/64', name: 'Discard-Only Address Block', source: 'RFC 6666', globallyReachable: false, guard: 'blocked' },
  { cidr: '100:0:0:1::/64', name: 'Dummy IPv6 Prefix', source: 'RFC 9780', globallyReachable: false, guard: 'blocked' },
  { cidr: '2001::/23', name: 'IETF Protocol Assignments', source: 'RFC 2928', globallyReachable: false, guard: 'blocked' },
  { cidr: '2001::/32', name: 'TEREDO', source: 'RFC 4380', globallyReachable: 'n/a', guard: 'blocked' },
  { cidr: '2001:1::1/128', name: 'Port Control Protocol Anycast', source: 'RFC 7723', globallyReachable: true, guard: 'blocked' },
  { cidr: '2001:1::2/128', name: 'TURN Anycast', source: 'RFC 8155', globallyReachable: true, guard: 'blocked' },
  { cidr: '2001:1::3/128', name: 'DNS-SD Service Registration Protocol Anycast', source: 'RFC 9665', globallyReachable: true, guard: 'blocked' },
  { cidr: '2001:2::/48', name: 'Benchmarking', source: 'RFC 5180', globallyReachable: false, guard: 'blocked' },
  { cidr: '2001:3::/32', name: 'AMT', source: 'RFC 7450', globallyReachable: true, guard: 'blocked' },
  { cidr: '2001:4:112::/48', name: 'AS112-v6', source: 'RFC 7535', globallyReachable: true, guard: 'blocked' },
  { cidr: '2001:10::/28', name: 'Deprecated (previously ORCHID)', source: 'RFC 4843', globallyReachable: 'n/a', guard: 'blocked' },
  { cidr: '2001:20::/28', name: 'ORCHIDv2', source: 'RFC 7343', globallyReachable: true, guard: 'blocked' },
  { cidr: '2001:30::/28', name: 'Drone Remote ID Protocol Entity Tags (DETs)', source: 'RFC 9374', globallyReachable: true, guard: 'blocked' },
  { cidr: '2001:db8::/32', name: 'Documentation', source: 'RFC 3849', globallyReachable: false, guard: 'blocked' },
  { cidr: '2002::/16', name: '6to4', source: 'RFC 3056', globallyReachable: 'n/a', guard: 'blocked' },
  { cidr: '2620:4f:8000::/48', name: 'Direct Delegation AS112 Service', source: 'RFC 7534', globallyReachable: true, guard: 'blocked' },
  { cidr: '3fff::/20', name: 'Documentation', source: 'RFC 9637', globallyReachable: false, guard: 'blocked' },
  { cidr: '5f00::/16', name: 'Segment Routing (SRv6) SIDs', source: 'RFC 9602', globallyReachable: false, guard: 'blocked' },
  { cidr: 'fc00::/7', name: 'Unique-Local', source: 'RFC 4193', globallyReachable: false, guard: 'blocked' },
  { cidr: 'fe80::/10', name: 'Link-Local Unicast', source: 'RFC 4291', globallyReachable: false, guard: 'blocked' },
  { cidr: 'fec0::/10', name: 'Site-local (deprecated; not in the registry)', source: 'RFC 3879', globallyReachable: 'n/a', guard: 'blocked' },
  { cidr: 'ff00::/8', name: 'Multicast (not in the special registry)', source: 'RFC 4291', globallyReachable: 'n/a', guard: 'blocked' },
];

/** Public addresses, some of them just outside a special range: they must stay allowed. */
const PUBLIC_ADDRESSES: readonly string[] = [
  '8.8.8.8',
  '1.1.1.1',
  '93.184.216.34',
  '1.0.0.0',
  '9.255.255.255',
  '11.0.0.0',
  '100.63.255.255',
  '100.128.0.0',
  '126.255.255.255',
  '128.0.0.0',
  '169.253.255.255',
  '169.255.0.0',
  '172.15.255.255',
  '172.32.0.0',
  '192.0.1.255',
  '192.0.3.0',
  '192.167.255.255',
  '192.169.0.0',
  '198.17.255.255',
  '198.20.0.0',
  '223.255.255.255',
  '2606:4700:4700::1111',
  '2606:4700::1111',
  '2001:4860:4860::8888',
  '2a00:1450:4001::1',
  '2001:200::1',
  '2001:db7:ffff:ffff:ffff:ffff:ffff:ffff',
  '2001:db9::1',
  '2620:4f:7fff:ffff:ffff:ffff:ffff:ffff',
  '2620:4f:8001::',
  '3fff:1000::1',
];

// Address arithmetic for the table, on bytes: first, last and the middle of a range.

function bytesToBig(bytes: readonly number[]): bigint {
  return bytes.reduce((n, byte) => (n << 8n) | BigInt(byte), 0n);
}

function bigToAddress(n: bigint, byteCount: number): string {
  const bytes: number[] = [];
  for (let i = byteCount - 1; i >= 0; i--) bytes.push(Number((n >> BigInt(i * 8)) & 0xffn));
  return ipaddr.fromByteArray(bytes).toString();
}

interface Span {
  readonly first: string;
  readonly inside: string;
  readonly last: string;
  /** first, first + 1, middle, last - 1, last (fewer for tiny ranges). */
  readonly samples: readonly string[];
}

function spanOf(cidr: string): Span {
  const [base, bits] = ipaddr.parseCIDR(cidr);
  const byteCount = base.kind() === 'ipv4' ? 4 : 16;
  const hostBits = BigInt(byteCount * 8 - bits);
  const first = (bytesToBig(base.toByteArray()) >> hostBits) << hostBits;
  const size = 1n << hostBits;
  const last = first + size - 1n;
  const middle = first + size / 2n;
  const points = [...new Set([first, first + 1n, middle, last - 1n, last].filter((n) => n >= first && n <= last))];
  return {
    first: bigToAddress(first, byteCount),
    inside: bigToAddress(middle, byteCount),
    last: bigToAddress(last, byteCount),
    samples: points.map((n) => bigToAddress(n, byteCount)),
  };
}

const hex16 = (n: number): string => (n & 0xffff).toString(16);

/**
 * Every IPv6 form that carries `v4`, named. Mapped, compatible, translated and
 * NAT64 put it in the last 32 bits; local-use NAT64 with a /48 prefix splits
 * it around the u-octet (RFC 6052 §2.2); 6to4 puts it in bits 16–48; Teredo
 * puts the server in bits 32–64 and the client, inverted, in the last 32.
 */
function embeddedForms(v4: string): Array<[string, string]> {
  const [a, b, c, d] = ipaddr.IPv4.parse(v4).octets as [number, number, number, number];
  const high = (a << 8) | b;
  const low = (c << 8) | d;
  return [
    ['IPv4-mapped', `::ffff:${v4}`],
    ['IPv4-mapped, hex', `::ffff:${hex16(high)}:${hex16(low)}`],
    ['IPv4-compatible', `::${v4}`],
    ['IPv4-compatible, hex', `::${hex16(high)}:${hex16(low)}`],
    ['IPv4-translated', `::ffff:0:${v4}`],
    ['NAT64 well-known prefix', `64:ff9b::${v4}`],
    ['NAT64 local-use, /96 layout', `64:ff9b:1::${v4}`],
    ['NAT64 local-use, /48 layout', `64:ff9b:1:${hex16(high)}:${hex16(c)}:${hex16(d << 8)}::`],
    ['6to4', `2002:${hex16(high)}:${hex16(low)}::1`],
    ['Teredo server', `2001:0:${hex16(high)}:${hex16(low)}::f7f7:f7f7`],
    ['Teredo client', `2001:0:808:808:8000:ffff:${hex16(~high)}:${hex16(~low)}`],
  ];
}

function describeRange(range: SpecialRange): string {
  const reach = range.globallyReachable === 'n/a' ? 'n/a' : range.globallyReachable ? 'yes' : 'no';
  return `${range.cidr} ${range.name} (${range.source}; globally reachable: ${reach})`;
}

describe('createAddressGuard against the IANA special-purpose registries', () => {
  const guard = createAddressGuard([]);

  for (const [family, ranges] of [['IPv4', IPV4_RANGES], ['IPv6', IPV6_RANGES]] as const) {
    context(`${family} special-purpose ranges`, () => {
      for (const range of ranges) {
        const { first, inside, last } = spanOf(range.cidr);
        if (range.guard === 'blocked') {
          it(`refuses ${describeRange(range)}: ${first}, ${inside}, ${last}`, () => {
            for (const ip of [first, inside, last]) expect(guard.isAllowed(ip), ip).to.equal(false);
          });
        } else {
          it(`judges ${describeRange(range)} by its IPv4: refuses ${first}, ${last}, ${range.refusedInside}; allows ${range.allowedInside}`, () => {
            for (const ip of [first, last, range.refusedInside!]) expect(guard.isAllowed(ip), ip).to.equal(false);
            expect(guard.isAllowed(range.allowedInside!), range.allowedInside).to.equal(true);
          });
        }
      }
    });
  }

  context('every IPv6 form of a refused IPv4 address', () => {
    const blockedV4 = IPV4_RANGES.filter((range) => range.guard === 'blocked');
    for (const range of blockedV4) {
      const { samples } = spanOf(range.cidr);
      it(`is refused for ${range.cidr} (${samples.join(', ')})`, () => {
        for (const v4 of samples) {
          expect(guard.isAllowed(v4), v4).to.equal(false);
          for (const [form, ip] of embeddedForms(v4)) {
            expect(guard.isAllowed(ip), `${form} ${ip} of ${v4}`).to.equal(false);
          }
        }
      });
    }
  });

  context('public addresses', () => {
    it(`stay allowed (${PUBLIC_ADDRESSES.join(', ')})`, () => {
      for (const ip of PUBLIC_ADDRESSES) expect(guard.isAllowed(ip), ip).to.equal(true);
    });

    for (const v4 of ['8.8.8.8', '1.1.1.1', '93.184.216.34']) {
      it(`allows ${v4} as IPv4-mapped, IPv4-translated and NAT64 (well-known), and refuses its tunnelled and deprecated forms`, () => {
        const judged = new Set(['IPv4-mapped', 'IPv4-mapped, hex', 'IPv4-translated', 'NAT64 well-known prefix']);
        for (const [form, ip] of embeddedForms(v4)) {
          expect(guard.isAllowed(ip), `${form} ${ip}`).to.equal(judged.has(form));
        }
      });
    }
  });

  context('with allowNetworks 127.0.0.0/8', () => {
    const local = createAddressGuard(['127.0.0.0/8']);

    it('allows 127.0.0.1 and its IPv4-mapped form, which is how a dual-stack socket names it', () => {
      expect(local.isAllowed('127.0.0.1')).to.equal(true);
      expect(local.isAllowed('127.255.255.254')).to.equal(true);
      expect(local.isAllowed('::ffff:127.0.0.1')).to.equal(true);
      expect(local.isAllowed('::ffff:7f00:1')).to.equal(true);
    });

    it('keeps the other embedded forms of 127.0.0.1 refused: they are routed elsewhere, not to this host', () => {
      for (const [form, ip] of embeddedForms('127.0.0.1')) {
        if (form.startsWith('IPv4-mapped')) continue;
        expect(local.isAllowed(ip), `${form} ${ip}`).to.equal(false);
      }
    });

    it('opens nothing else', () => {
      for (const ip of ['::1', '10.0.0.1', '169.254.169.254', '::ffff:169.254.169.254', '::169.254.169.254']) {
        expect(local.isAllowed(ip), ip).to.equal(false);
      }
      expect(local.isAllowed('8.8.8.8')).to.equal(true);
    });
  });

  context('with an IPv6 allowNetworks entry covering an embedded form', () => {
    it('opens exactly that IPv6 range, e.g. a local-use NAT64 prefix', () => {
      const nat64 = createAddressGuard(['64:ff9b:1::/48']);
      expect(nat64.isAllowed('64:ff9b:1::10.0.0.1')).to.equal(true);
      expect(nat64.isAllowed('64:ff9b::10.0.0.1')).to.equal(false);
      expect(nat64.isAllowed('10.0.0.1')).to.equal(false);
    });
  });
});

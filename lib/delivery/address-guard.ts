/**
 * The SSRF guard: which IP addresses the sender may connect to.
 *
 * Only public unicast addresses pass by default. Private, loopback,
 * link-local (and with it the cloud metadata service at 169.254.169.254),
 * CGNAT, multicast, broadcast, unspecified, documentation, benchmarking and
 * other special-purpose ranges of the IANA registries are refused, for IPv4
 * and IPv6; an IPv6 address must also lie in global unicast, 2000::/3.
 *
 * IPv6 forms that carry an IPv4 address:
 * - judged as the IPv4 address they carry: IPv4-mapped (::ffff:0:0/96),
 *   IPv4-translated (::ffff:0:0:0/96, RFC 6145) and the NAT64 well-known
 *   prefix (64:ff9b::/96, RFC 6052);
 * - refused whatever they carry: IPv4-compatible (::/96, deprecated), local-use
 *   NAT64 (64:ff9b:1::/48, RFC 8215), 6to4 (2002::/16) and Teredo (2001::/32).
 *   See {@link REFUSED_IPV6_FORMS} for why.
 *
 * `allowNetworks` opens chosen ranges again, for tests and local demos. An
 * IPv4 entry opens those addresses and their IPv4-mapped forms (how a
 * dual-stack socket names an IPv4 peer), not the other embedded forms, whose
 * packets go to a translator or a tunnel rather than to that address; an
 * IPv6 entry opens exactly the IPv6 addresses it covers.
 *
 * The sender asks the guard about the address it actually connects to, after
 * DNS, so a name that resolves to a private address (DNS rebinding) is caught.
 */
import net from 'node:net';
import ipaddr from 'ipaddr.js';
import { BlockedAddressError, ConfigError } from '../errors.ts';

type Address = ipaddr.IPv4 | ipaddr.IPv6;
type Network = [Address, number];

export interface AddressGuard {
  /** Whether the sender may connect to `ip` (an IPv4 or IPv6 literal). Anything unparsable is refused. */
  isAllowed(ip: string): boolean;
  /**
   * Throws unless the sender may connect to `ip`.
   *
   * @param host the name being resolved, for the error message.
   * @throws BlockedAddressError (`HERALD_BLOCKED_ADDRESS`)
   */
  check(ip: string, host: string): void;
}

/** The ipaddr.js range names that are fit to send webhooks to: only global unicast. */
const ALLOWED_RANGES: ReadonlySet<string> = new Set(['unicast']);

const network = (text: string): Network => ipaddr.parseCIDR(text);

/** IPv6 global unicast (RFC 4291 §2.4): everything outside it is special-purpose or reserved by the IETF. */
const IPV6_GLOBAL_UNICAST: readonly Network[] = [network('2000::/3')];

/** IPv4-mapped: a dual-stack socket's name for an IPv4 peer; the packets go to that IPv4 address. */
const IPV4_MAPPED: readonly Network[] = [network('::ffff:0:0/96')];

/**
 * IPv6 forms whose last 32 bits are the IPv4 address a translator sends the
 * packets on to: judged as that address, so `64:ff9b::a9fe:a9fe` is refused
 * like 169.254.169.254 and `64:ff9b::808:808` allowed like 8.8.8.8.
 */
const IPV4_TRANSLATED: readonly Network[] = [
  network('::ffff:0:0:0/96'), // IPv4-translated, RFC 6145 (SIIT)
  network('64:ff9b::/96'), // NAT64 well-known prefix, RFC 6052
];

/**
 * IPv6 forms that carry an IPv4 address but are refused whatever it is,
 * rather than judged by it. Each is either where the embedded address is
 * not in one fixed place, or where the packet goes to a tunnel endpoint (on
 * this host or a relay) whose far side we cannot see; none is a place where
 * anyone hosts a webhook receiver, so refusing costs nothing and judging
 * would be a bet on parsing the form the same way the network does.
 */
const REFUSED_IPV6_FORMS: readonly Network[] = [
  // IPv4-compatible (RFC 4291 §2.5.5.1, deprecated since 2006). ::/96 is not
  // global unicast anyway; listed so that the reason is written down: with an
  // automatic tunnel (Linux sit0) the kernel sends to the embedded IPv4.
  network('::/96'),
  // Local-use NAT64 (RFC 8215): not globally reachable, and the operator
  // chooses the prefix length (/48 … /96), so the IPv4 address may sit in
  // bits 48–88 around the RFC 6052 u-octet, not in the last 32 bits.
  network('64:ff9b:1::/48'),
  // 6to4 (RFC 3056, relays deprecated by RFC 7526): the IPv4 in bits 16–48 is
  // where a 6to4 interface on this host sends the encapsulated packets, e.g.
  // 2002:a9fe:a9fe:: to 169.254.169.254.
  network('2002::/16'),
  // Teredo (RFC 4380): two IPv4 addresses (server in bits 32–64, client
  // inverted in the last 32) and a relay in between; also inside 2001::/23.
  network('2001::/32'),
];

/** Whether `address` is public unicast IPv4. */
function isPublicIPv4(address: ipaddr.IPv4): boolean {
  return ALLOWED_RANGES.has(address.range());
}

/** Whether `address` is public unicast IPv6, not counting the forms that carry an IPv4 address. */
function isPublicIPv6(address: ipaddr.IPv6): boolean {
  return (
    inNetworks(address, IPV6_GLOBAL_UNICAST) &&
    !inNetworks(address, REFUSED_IPV6_FORMS) &&
    ALLOWED_RANGES.has(address.range())
  );
}

/** The IPv4 address in the last 32 bits of `address`. */
function lastIPv4(address: ipaddr.IPv6): ipaddr.IPv4 {
  return new ipaddr.IPv4(address.toByteArray().slice(12, 16));
}

/** An IPv6 literal ending in a dotted-quad, e.g. `::ffff:127.0.0.1`, split as head, four octets, zone. */
const DOTTED_TAIL = /^([^%]*:)(\d+)\.(\d+)\.(\d+)\.(\d+)(%.*)?$/;

/**
 * The IPv6 literal with a trailing dotted-quad written as two hex groups, as
 * RFC 4291 §2.2 reads it and as Node connects to it. ipaddr.js alone reads
 * `::127.0.0.1` as the IPv4-mapped `::ffff:127.0.0.1`, but it is the
 * IPv4-compatible `::7f00:1`, a different destination.
 */
function withHexTail(ip: string): string {
  const match = DOTTED_TAIL.exec(ip);
  if (match === null) return ip;
  const [, head, a, b, c, d, zone = ''] = match;
  const group = (high: string | undefined, low: string | undefined): string => ((Number(high) << 8) | Number(low)).toString(16);
  return `${head}${group(a, b)}:${group(c, d)}${zone}`;
}

function parseAddress(ip: string): Address | undefined {
  // Accept only canonical literals, as Node reads them (`ipaddr.isValid` also takes forms such as `0x7f.1`).
  try {
    if (ipaddr.IPv4.isValidFourPartDecimal(ip)) return ipaddr.IPv4.parse(ip);
    if (net.isIPv6(ip)) return ipaddr.IPv6.parse(withHexTail(ip));
  } catch {
    // Refused below.
  }
  return undefined;
}

function parseNetwork(cidr: unknown): Network {
  if (typeof cidr === 'string') {
    try {
      const [address = '', bits] = cidr.trim().split('/');
      return ipaddr.parseCIDR(`${withHexTail(address)}/${bits}`);
    } catch {
      // Reported below, with the rule.
    }
  }
  throw new ConfigError('allowNetworks', cidr, 'must be a CIDR such as 127.0.0.0/8 or ::1/128');
}

function inNetworks(address: Address, networks: readonly Network[]): boolean {
  return networks.some(([base, bits]) => base.kind() === address.kind() && address.match(base, bits));
}

/**
 * Creates a guard that refuses every address that is not public unicast,
 * except those inside `allowNetworks`.
 *
 * @param allowNetworks CIDRs to open, e.g. `127.0.0.0/8` or `::1/128`.
 * @throws ConfigError (`HERALD_INVALID_CONFIG`) when an entry is not a CIDR.
 */
export function createAddressGuard(allowNetworks: readonly string[]): AddressGuard {
  if (!Array.isArray(allowNetworks)) {
    throw new ConfigError('allowNetworks', allowNetworks, 'must be a list of CIDRs such as ["127.0.0.0/8", "::1/128"]');
  }
  const networks = allowNetworks.map(parseNetwork);

  function isAllowed(ip: string): boolean {
    const address = parseAddress(ip);
    if (address === undefined) return false;
    if (inNetworks(address, networks)) return true;
    if (address instanceof ipaddr.IPv4) return isPublicIPv4(address);
    if (inNetworks(address, IPV4_MAPPED)) {
      const v4 = lastIPv4(address);
      return inNetworks(v4, networks) || isPublicIPv4(v4);
    }
    if (inNetworks(address, IPV4_TRANSLATED)) return isPublicIPv4(lastIPv4(address));
    return isPublicIPv6(address);
  }

  return Object.freeze({
    isAllowed,
    check(ip: string, host: string): void {
      if (!isAllowed(ip)) throw new BlockedAddressError(ip, host);
    },
  });
}

/**
 * The SSRF guard: which IP addresses the sender may connect to.
 *
 * Only public unicast addresses pass by default. Private, loopback,
 * link-local (and with it the cloud metadata service at 169.254.169.254),
 * CGNAT, multicast, broadcast, unspecified and reserved ranges are refused,
 * for IPv4 and IPv6; an IPv6 address that embeds an IPv4 one (IPv4-mapped,
 * IPv4-translated, NAT64) is judged as that IPv4 address. `allowNetworks`
 * opens chosen ranges again, for tests and local demos.
 *
 * The sender asks the guard about the address it actually connects to, after
 * DNS, so a name that resolves to a private address (DNS rebinding) is caught.
 */
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

/** IPv6 ranges whose last 32 bits are an IPv4 address that the packets end up at. */
const IPV4_EMBEDDING_RANGES: ReadonlySet<string> = new Set(['ipv4Mapped', 'rfc6145', 'rfc6052']);

/** The IPv4 address an IPv6 one stands for, if it embeds one. */
function embeddedIPv4(address: ipaddr.IPv6): ipaddr.IPv4 | undefined {
  if (!IPV4_EMBEDDING_RANGES.has(address.range())) return undefined;
  const bytes = address.toByteArray();
  return new ipaddr.IPv4(bytes.slice(12, 16));
}

function parseAddress(ip: string): Address | undefined {
  // Accept only canonical literals (`ipaddr.isValid` also takes forms such as `0x7f.1`).
  if (!ipaddr.IPv4.isValidFourPartDecimal(ip) && !ipaddr.IPv6.isValid(ip)) return undefined;
  try {
    return ipaddr.parse(ip);
  } catch {
    return undefined;
  }
}

function parseNetwork(cidr: unknown): Network {
  if (typeof cidr === 'string') {
    try {
      return ipaddr.parseCIDR(cidr.trim());
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
    const v4 = address instanceof ipaddr.IPv6 ? embeddedIPv4(address) : undefined;
    if (inNetworks(address, networks) || (v4 !== undefined && inNetworks(v4, networks))) return true;
    return ALLOWED_RANGES.has((v4 ?? address).range());
  }

  return Object.freeze({
    isAllowed,
    check(ip: string, host: string): void {
      if (!isAllowed(ip)) throw new BlockedAddressError(ip, host);
    },
  });
}

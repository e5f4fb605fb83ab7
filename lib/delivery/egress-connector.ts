/**
 * How the sender's pools open their connections: straight to the endpoint,
 * or through the egress proxy; plain, or TLS with a private CA and a client
 * certificate. The SSRF guard is in both ways.
 *
 * Straight: undici's connector with the guard around it. IP literals (which
 * skip DNS) are checked before any packet is sent, names through the lookup,
 * and every socket's remote address once connected.
 *
 * Through the proxy the socket's remote address is the proxy's (the
 * operator's, on any address), so the guard cannot judge it after connecting.
 * Instead the endpoint's name is resolved here, through the same guarded
 * lookup, and the CONNECT names the allowed IP address, not the name: the
 * proxy connects to exactly that address and has nothing to resolve, so a name
 * that resolves to a private address is refused before the proxy hears of it,
 * and a proxy (or its resolver) cannot be steered elsewhere. TLS then runs
 * inside the tunnel with the endpoint's host name as SNI and for the
 * certificate check, and the `Host` header is the URL's, as without a proxy.
 */
import dns from 'node:dns';
import net from 'node:net';
import type tls from 'node:tls';
import type * as Undici from 'undici';
import type { Clock } from '../clock.ts';
import { BlockedAddressError } from '../errors.ts';
import type { AddressGuard } from './address-guard.ts';
import { openTunnel, type EgressProxy } from './egress-proxy.ts';
import { buildConnector } from './undici-parts.ts';

/**
 * A DNS lookup that hands `net.connect` only addresses the guard allows, and
 * fails with `BlockedAddressError` when none is. This is the check on the
 * address about to be connected to, so a name rebound to a private address
 * between validation and sending is still caught.
 */
export function guardedLookup(guard: AddressGuard): net.LookupFunction {
  return (hostname, options, callback) => {
    dns.lookup(hostname, { ...options, all: true }, (error, addresses) => {
      if (error !== null) {
        callback(error, '', 0);
        return;
      }
      const allowed = addresses.filter((entry) => guard.isAllowed(entry.address));
      const first = allowed[0];
      if (first === undefined) {
        callback(blockedLookupError(addresses[0]?.address ?? 'no address', hostname), '', 0);
      } else if (options.all === true) {
        callback(null, allowed);
      } else {
        callback(null, first.address, first.family);
      }
    });
  };
}

/** `BlockedAddressError` is a HeraldError; `net` wants an errno-style error from a lookup. */
function blockedLookupError(address: string, hostname: string): NodeJS.ErrnoException {
  return new BlockedAddressError(address, hostname) as NodeJS.ErrnoException;
}

/** undici's connect options: the TLS context of a pool with a private CA or a client certificate. */
function connectorOptions(timeoutMs: number, secureContext: tls.SecureContext | undefined): Undici.buildConnector.BuildOptions {
  return secureContext === undefined ? { timeout: timeoutMs } : { timeout: timeoutMs, secureContext };
}

/** The host name of undici's connect options without the brackets of an IPv6 literal. */
function bareHost(hostname: string): string {
  return hostname.startsWith('[') && hostname.endsWith(']') ? hostname.slice(1, -1) : hostname;
}

/** undici's connector with the SSRF guard around it, straight to the endpoint. */
export function directConnector(guard: AddressGuard, timeoutMs: number, secureContext?: tls.SecureContext): Undici.buildConnector.connector {
  const connect = buildConnector({ ...connectorOptions(timeoutMs, secureContext), lookup: guardedLookup(guard) });
  return (options, callback) => {
    const { hostname } = options;
    if (net.isIP(hostname) !== 0 && !guard.isAllowed(hostname)) {
      const error = new BlockedAddressError(hostname, hostname);
      queueMicrotask(() => callback(error, null));
      return;
    }
    connect(options, (error, socket) => {
      if (error !== null) {
        callback(error, null);
        return;
      }
      const remote = socket.remoteAddress;
      if (remote === undefined || !guard.isAllowed(remote)) {
        socket.destroy();
        callback(new BlockedAddressError(remote ?? 'an unknown address', hostname), null);
        return;
      }
      callback(null, socket);
    });
  };
}

/** A pool's connector through the proxy, and how many of its tunnels are being opened now. */
export interface ProxiedConnector {
  readonly connect: Undici.buildConnector.connector;
  /** Tunnels asked of the proxy and not yet answered: a request timing out meanwhile waited for the proxy. */
  readonly opening: number;
}

export interface ProxiedConnectorOptions {
  readonly guard: AddressGuard;
  readonly proxy: EgressProxy;
  readonly clock: Clock;
  /** The most a tunnel may take to open, on `clock`. */
  readonly tunnelTimeoutMs: number;
  /** undici's own timeout of the TLS handshake inside the tunnel. */
  readonly timeoutMs: number;
  readonly secureContext?: tls.SecureContext | undefined;
}

/** A connector that opens each connection in a CONNECT tunnel to an address the guard allows. */
export function proxiedConnector(options: ProxiedConnectorOptions): ProxiedConnector {
  const { guard, proxy, clock, tunnelTimeoutMs } = options;
  const lookup = guardedLookup(guard);
  const secure = buildConnector(connectorOptions(options.timeoutMs, options.secureContext));
  let opening = 0;

  const connect: Undici.buildConnector.connector = (connectOptions, callback) => {
    const hostname = bareHost(connectOptions.hostname);
    const https = connectOptions.protocol === 'https:';
    const port = Number(connectOptions.port) || (https ? 443 : 80);
    const tunnel = (ip: string): void => {
      opening++;
      openTunnel(proxy, { ip, port }, { clock, timeoutMs: tunnelTimeoutMs }, (error, socket) => {
        opening--;
        if (error !== null || socket === null) callback(error ?? new Error('no tunnel'), null);
        else if (!https) callback(null, socket);
        // TLS to the endpoint inside the tunnel; SNI and the certificate check use its host name.
        else secure({ ...connectOptions, httpSocket: socket }, callback);
      });
    };
    if (net.isIP(hostname) !== 0) {
      if (guard.isAllowed(hostname)) tunnel(hostname);
      else queueMicrotask(() => callback(new BlockedAddressError(hostname, hostname), null));
      return;
    }
    lookup(hostname, {}, (error, address) => {
      if (error !== null) callback(error, null);
      else tunnel(address as string);
    });
  };
  return {
    connect,
    get opening() {
      return opening;
    },
  };
}

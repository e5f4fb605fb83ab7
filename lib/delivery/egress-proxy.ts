/**
 * The egress proxy (`delivery.proxy`): an HTTP proxy every delivery leaves
 * through, in a CONNECT tunnel, so that a team's webhooks come from the
 * proxy's static addresses.
 *
 * A tunnel is opened per connection of a pool, then kept alive like any
 * pooled connection:
 *
 *   net.connect(proxy) ─► "CONNECT <ip>:<port>" ─► status line and headers
 *        │                                            ├─ 2xx ─► the socket is the tunnel (TLS, if any, goes inside it)
 *        │                                            └─ other ─► ProxyError(status)
 *        ├─ refused, reset, closed before an answer ─► ProxyError(null)
 *        └─ no answer within the tunnel timeout ─► ProxyError(null), the socket destroyed
 *
 * The CONNECT names an IP address, never a host name: the sender resolves the
 * endpoint's name itself and hands only an address the SSRF guard allows
 * (lib/delivery/egress-connector.ts). A proxy given a name would resolve it
 * again, and could reach an address the guard refuses.
 */
import net from 'node:net';
import type { Clock } from '../clock.ts';
import { ConfigError, ProxyError, messageOf } from '../errors.ts';

/** A validated proxy URL. */
export interface EgressProxy {
  readonly host: string;
  readonly port: number;
  /** `Basic …` for `Proxy-Authorization` when the URL carries a user; `null` otherwise. Never logged. */
  readonly authorization: string | null;
  /** The URL with its password replaced by `***`: what logs, errors and the status page show. */
  readonly display: string;
}

/** The most header bytes read from a proxy's answer to a CONNECT. */
const ANSWER_MAX_BYTES = 16 * 1_024;
const HEADER_END = '\r\n\r\n';
const STATUS_LINE = /^HTTP\/1\.[01] (\d{3})(?: (.*))?$/;

/** The URL with the password (if any) masked. */
function displayOf(url: URL): string {
  const user = url.username === '' ? '' : `${url.username}${url.password === '' ? '' : ':***'}@`;
  return `${url.protocol}//${user}${url.host}`;
}

/**
 * Reads `http://[user[:password]@]host:port` (a trailing `/` allowed).
 *
 * @param field the configuration key, for the error.
 * @throws ConfigError (`HERALD_INVALID_CONFIG`) naming `field`, showing the value without its password.
 */
export function parseProxyUrl(value: unknown, field: string): EgressProxy {
  const rule = 'must be an HTTP proxy URL such as http://proxy.internal:3128 or http://user:password@proxy.internal:3128';
  if (typeof value !== 'string' || value === '') throw new ConfigError(field, value, rule);
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    throw new ConfigError(field, value.replace(/:[^:@/]*@/, ':***@'), rule);
  }
  const display = displayOf(url);
  if (url.protocol !== 'http:') throw new ConfigError(field, display, `${rule} (only http: proxies, got ${url.protocol})`);
  if ((url.pathname !== '/' && url.pathname !== '') || url.search !== '' || url.hash !== '') {
    throw new ConfigError(field, display, `${rule} (no path, query or fragment)`);
  }
  const port = url.port === '' ? 80 : Number(url.port);
  const credentials = url.username === '' ? null : `${decodeURIComponent(url.username)}:${decodeURIComponent(url.password)}`;
  return Object.freeze({
    host: url.hostname.startsWith('[') ? url.hostname.slice(1, -1) : url.hostname,
    port,
    authorization: credentials === null ? null : `Basic ${Buffer.from(credentials, 'utf8').toString('base64')}`,
    display,
  });
}

/** Where a tunnel leads: an address the guard allowed, and a port. */
export interface TunnelTarget {
  readonly ip: string;
  readonly port: number;
}

/**
 * Opens a CONNECT tunnel through `proxy` to `target`; calls back once, with
 * the tunnel's socket or a `ProxyError`. `timeoutMs` (on `clock`) bounds the
 * whole handshake, from connecting to the proxy to its answer.
 */
export function openTunnel(
  proxy: EgressProxy,
  target: TunnelTarget,
  timing: { readonly clock: Clock; readonly timeoutMs: number },
  callback: (error: ProxyError | null, socket: net.Socket | null) => void,
): void {
  const authority = net.isIPv6(target.ip) ? `[${target.ip}]:${target.port}` : `${target.ip}:${target.port}`;
  const socket = net.connect({ host: proxy.host, port: proxy.port });
  let answer = '';
  let rest = '';
  let done = false;
  const finish = (error: ProxyError | null): void => {
    if (done) return;
    done = true;
    timer.cancel();
    socket.off('data', onData).off('error', onError).off('close', onClose);
    if (error === null) {
      // Paused until its next reader (undici's parser, or TLS) takes it, so no byte is lost in between.
      socket.pause();
      if (rest !== '') socket.unshift(Buffer.from(rest, 'latin1'));
      callback(null, socket);
    } else {
      socket.destroy();
      callback(error, null);
    }
  };
  const fail = (status: number | null, what: string, cause?: unknown): void =>
    finish(new ProxyError(proxy.display, status, `${what} (CONNECT ${authority})`, cause === undefined ? undefined : { cause }));
  const onData = (chunk: Buffer): void => {
    answer += chunk.toString('latin1');
    const end = answer.indexOf(HEADER_END);
    if (end === -1) {
      if (answer.length > ANSWER_MAX_BYTES) fail(null, `answered with more than ${ANSWER_MAX_BYTES} bytes of headers`);
      return;
    }
    const statusLine = answer.slice(0, answer.indexOf('\r\n'));
    const match = STATUS_LINE.exec(statusLine);
    if (match === null) {
      fail(null, `answered ${JSON.stringify(statusLine.slice(0, 64))}, not an HTTP status line`);
      return;
    }
    const status = Number(match[1]);
    if (status < 200 || status > 299) {
      fail(status, match[2] === undefined || match[2] === '' ? 'refused the tunnel' : match[2]);
      return;
    }
    // Anything after the headers is already the endpoint's: given back to the socket.
    rest = answer.slice(end + HEADER_END.length);
    finish(null);
  };
  const onError = (error: Error): void => fail(null, messageOf(error), error);
  const onClose = (): void => fail(null, 'closed the connection before answering');
  const timer = timing.clock.setTimeout(() => fail(null, `no answer within ${timing.timeoutMs} ms`), timing.timeoutMs);
  socket.on('data', onData).on('error', onError).on('close', onClose);
  socket.once('connect', () => {
    const authorization = proxy.authorization === null ? '' : `Proxy-Authorization: ${proxy.authorization}\r\n`;
    socket.write(`CONNECT ${authority} HTTP/1.1\r\nHost: ${authority}\r\n${authorization}\r\n`);
  });
}

/**
 * Real egress parts on 127.0.0.1 for the tests: an HTTP CONNECT proxy that counts its tunnels
 * and can refuse them, and an HTTPS sink with the test CA (spec/fixtures/tls) that can demand a
 * client certificate.
 */
import { readFileSync } from 'node:fs';
import http from 'node:http';
import https from 'node:https';
import net from 'node:net';
import type { AddressInfo } from 'node:net';
import { setImmediate as nextTurn } from 'node:timers/promises';

const TLS_DIR = new URL('../fixtures/tls/', import.meta.url);

/** A PEM file of spec/fixtures/tls. */
export function tlsFixture(name: string): string {
  return readFileSync(new URL(name, TLS_DIR), 'utf8');
}

/** How the proxy answers a CONNECT: open the tunnel, answer with a status and close, or never answer. */
export type ProxyMode = { readonly kind: 'tunnel' } | { readonly kind: 'refuse'; readonly status: number } | { readonly kind: 'hang' };

/** An HTTP CONNECT proxy on 127.0.0.1. */
export class ConnectProxy {
  /** Tunnels opened to a target. */
  tunnels = 0;
  /** Every CONNECT target asked for, as `host:port`. */
  readonly targets: string[] = [];
  /** The `Proxy-Authorization` of each CONNECT (`undefined` when absent). */
  readonly authorizations: Array<string | undefined> = [];
  mode: ProxyMode = { kind: 'tunnel' };
  /** When set, a CONNECT without exactly this `Proxy-Authorization` gets a 407. */
  requireAuthorization: string | undefined;
  readonly #server: http.Server;
  readonly #sockets = new Set<net.Socket>();

  private constructor() {
    this.#server = http.createServer((_req, res) => {
      res.statusCode = 405;
      res.end();
    });
    this.#server.on('connect', (req: http.IncomingMessage, client: net.Socket, head: Buffer) => this.#connect(req, client, head));
  }

  static async start(): Promise<ConnectProxy> {
    const proxy = new ConnectProxy();
    await new Promise<void>((resolve, reject) => proxy.#server.once('error', reject).listen(0, '127.0.0.1', () => resolve()));
    return proxy;
  }

  get port(): number {
    return (this.#server.address() as AddressInfo).port;
  }

  get url(): string {
    return `http://127.0.0.1:${this.port}`;
  }

  #connect(req: http.IncomingMessage, client: net.Socket, head: Buffer): void {
    this.#sockets.add(client);
    client.on('close', () => this.#sockets.delete(client));
    client.on('error', () => {});
    const target = req.url ?? '';
    this.targets.push(target);
    const authorization = req.headers['proxy-authorization'];
    this.authorizations.push(authorization);
    if (this.requireAuthorization !== undefined && authorization !== this.requireAuthorization) {
      client.end('HTTP/1.1 407 Proxy Authentication Required\r\nProxy-Authenticate: Basic realm="test"\r\nContent-Length: 0\r\n\r\n');
      return;
    }
    const mode = this.mode;
    if (mode.kind === 'hang') return;
    if (mode.kind === 'refuse') {
      client.end(`HTTP/1.1 ${mode.status} ${http.STATUS_CODES[mode.status] ?? 'Refused'}\r\nContent-Length: 0\r\n\r\n`);
      return;
    }
    const { hostname, port } = new URL(`http://${target}`);
    const upstream = net.connect({ host: hostname.replace(/^\[|\]$/g, ''), port: Number(port) });
    this.#sockets.add(upstream);
    upstream.on('close', () => this.#sockets.delete(upstream));
    upstream.once('connect', () => {
      this.tunnels++;
      client.write('HTTP/1.1 200 Connection Established\r\n\r\n');
      if (head.length > 0) upstream.write(head);
      upstream.pipe(client);
      client.pipe(upstream);
    });
    upstream.on('error', () => client.destroy());
    client.on('close', () => upstream.destroy());
  }

  async close(): Promise<void> {
    for (const socket of this.#sockets) socket.destroy();
    this.#server.closeAllConnections();
    await new Promise<void>((resolve) => this.#server.close(() => resolve()));
    await nextTurn();
  }
}

/** An HTTPS server on 127.0.0.1 with the test server certificate; with `requireClientCert`, mutual TLS against the test CA. */
export class TlsSink {
  /** Requests received, with the subject CN of the client certificate (`null` without one). */
  readonly requests: Array<{ readonly path: string; readonly host: string | undefined; readonly clientCn: string | null }> = [];
  readonly #server: https.Server;

  private constructor(requireClientCert: boolean) {
    this.#server = https.createServer(
      {
        cert: tlsFixture('server.pem'),
        key: tlsFixture('server.key'),
        ca: tlsFixture('ca.pem'),
        requestCert: requireClientCert,
        rejectUnauthorized: requireClientCert,
      },
      (req, res) => {
        const socket = req.socket as import('node:tls').TLSSocket;
        const peer = socket.getPeerCertificate();
        const cn = peer?.subject?.CN;
        this.requests.push({ path: req.url ?? '', host: req.headers.host, clientCn: typeof cn === 'string' ? cn : null });
        req.resume();
        req.on('end', () => res.end('ok'));
      },
    );
    this.#server.on('tlsClientError', () => {});
  }

  static async start(options: { readonly requireClientCert: boolean }): Promise<TlsSink> {
    const sink = new TlsSink(options.requireClientCert);
    await new Promise<void>((resolve, reject) => sink.#server.once('error', reject).listen(0, '127.0.0.1', () => resolve()));
    return sink;
  }

  url(host = '127.0.0.1', path = '/hook'): string {
    return `https://${host}:${(this.#server.address() as AddressInfo).port}${path}`;
  }

  async close(): Promise<void> {
    this.#server.closeAllConnections();
    await new Promise<void>((resolve) => this.#server.close(() => resolve()));
    await nextTurn();
  }
}

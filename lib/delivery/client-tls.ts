/**
 * TLS material for the sender: the extra CAs it trusts (`delivery.caFile`)
 * and an endpoint's client certificate for mutual TLS, as one TLS context per
 * identity.
 *
 * A `ca` given to Node replaces its built-in roots; here the extra CAs are
 * added to them, so a private CA does not cost the public ones. The context is
 * built once per identity (loading ~150 roots costs milliseconds) and shared by
 * every connection of its pool.
 *
 * An endpoint's stored certificate has its key sealed; `ClientCertificates`
 * opens it for the sender.
 */
import { readFileSync } from 'node:fs';
import tls from 'node:tls';
import { ConfigError } from '../errors.ts';
import type { ClientTls, Endpoint } from '../model.ts';
import type { SecretBox } from '../signing/secret-box.ts';

/** An endpoint's client certificate, opened (its key in clear), as the sender uses it. */
export interface ClientCertificate {
  /** SHA-256 of the certificate: names its pool. */
  readonly fingerprint: string;
  /** The certificate (and any intermediates), PEM. */
  readonly cert: string;
  /** The private key, PEM, in clear. */
  readonly key: string;
  /** The key's passphrase, if it is encrypted. */
  readonly passphrase?: string;
  /** When the certificate expires (epoch ms): after that no attempt is made with it. */
  readonly notAfter: number;
}

/**
 * The CA certificates of `delivery.caFile` (one PEM text, any number of certificates); none for `null`.
 * @throws ConfigError (`HERALD_INVALID_CONFIG`) naming `delivery.caFile` when it cannot be read or holds no certificate.
 */
export function readCaFile(path: string | null): string[] {
  if (path === null) return [];
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (cause) {
    throw new ConfigError('delivery.caFile', path, `cannot be read (${(cause as NodeJS.ErrnoException).code ?? 'error'})`);
  }
  if (!text.includes('-----BEGIN CERTIFICATE-----')) throw new ConfigError('delivery.caFile', path, 'must hold PEM certificates ("-----BEGIN CERTIFICATE-----")');
  return [text];
}

/**
 * A TLS context with the built-in roots plus `ca`, and the client certificate if given; `undefined`
 * when there is neither (Node's default context, the common case).
 * @throws Error from node:tls when a PEM does not load.
 */
export function secureContextOf(ca: readonly string[], client?: ClientCertificate): tls.SecureContext | undefined {
  if (ca.length === 0 && client === undefined) return undefined;
  return tls.createSecureContext({
    ...(ca.length === 0 ? {} : { ca: [...tls.rootCertificates, ...ca] }),
    ...(client === undefined
      ? {}
      : { cert: client.cert, key: client.key, ...(client.passphrase === undefined ? {} : { passphrase: client.passphrase }) }),
  });
}

/**
 * Endpoints' client certificates opened for sending: each stored one is opened once per loaded
 * endpoint version, remembered against the object the actor holds (as `SigningKeys` does), so
 * the key in clear goes when that version of the endpoint is dropped.
 */
export class ClientCertificates {
  readonly #box: SecretBox;
  readonly #opened = new WeakMap<ClientTls, ClientCertificate>();

  constructor(box: SecretBox) {
    this.#box = box;
  }

  /**
   * The endpoint's client certificate, opened; `undefined` when it has none.
   * @throws SecretUnreadableError when its key or passphrase cannot be opened on this node.
   */
  of(endpoint: Endpoint): ClientCertificate | undefined {
    const stored = endpoint.clientTls;
    if (stored === undefined) return undefined;
    let opened = this.#opened.get(stored);
    if (opened === undefined) {
      const passphrase = stored.passphrase === null ? undefined : this.#box.open(stored.passphrase, endpoint.id);
      opened = {
        fingerprint: stored.fingerprint,
        cert: stored.cert,
        key: this.#box.open(stored.key, endpoint.id),
        ...(passphrase === undefined ? {} : { passphrase }),
        notAfter: stored.notAfter,
      };
      this.#opened.set(stored, opened);
    }
    return opened;
  }
}

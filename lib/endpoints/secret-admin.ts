/**
 * Endpoint signing secrets over their life: rotation (a new current secret, of the same scheme or
 * another; the previous ones keep signing for the overlap) and re-encryption under the current key after a key rotation
 * (`herald secrets reencrypt`), which re-seals the secret header values, the `auth` secret and a client
 * certificate's key and passphrase too. Both write the secrets only while they are still those read, so a
 * change on another node meanwhile is never overwritten.
 */
import type { Clock } from '../clock.ts';
import { ErrorCode, hasCode, SecretUnreadableError, ValidationError } from '../errors.ts';
import { SignatureScheme, type Endpoint, type SigningSecret } from '../model.ts';
import { generateSigningSecret, schemeOf } from '../signing/secret.ts';
import type { SecretBox } from '../signing/secret-box.ts';
import type { EndpointPatch, Store } from '../store/port.ts';
import { clientTlsNeedsSealing, resealClientTls } from './client-tls-input.ts';
import type { EndpointAdmin, EndpointHandoff, EndpointView } from './endpoint-admin.ts';
import { signatureScheme } from './endpoint-input.ts';
import { authSecretOf, sealAuth } from './endpoint-auth-input.ts';
import { sealHeaders } from './endpoint-headers.ts';

/** How many times re-encryption reads an endpoint again when its secrets changed under it. */
const REENCRYPT_ROUNDS = 5;

/** What `reencrypt()` did: endpoints looked at, rewritten under the current key, and those it could not open. */
export interface ReencryptOutcome {
  readonly checked: number;
  readonly rewritten: number;
  readonly unreadable: ReadonlyArray<{ readonly endpointId: string; readonly error: SecretUnreadableError }>;
}

export class SecretAdmin {
  readonly #store: Store;
  readonly #clock: Clock;
  readonly #secretBox: SecretBox;
  readonly #rotationOverlapMs: number;
  readonly #endpoints: EndpointAdmin;
  readonly #engine: EndpointHandoff;

  constructor(deps: {
    readonly store: Store;
    readonly clock: Clock;
    readonly secretBox: SecretBox;
    /** How long a replaced secret keeps signing (`signing.rotationOverlapMs`). */
    readonly rotationOverlapMs: number;
    readonly endpoints: EndpointAdmin;
    readonly engine: EndpointHandoff;
  }) {
    this.#store = deps.store;
    this.#clock = deps.clock;
    this.#secretBox = deps.secretBox;
    this.#rotationOverlapMs = deps.rotationOverlapMs;
    this.#endpoints = deps.endpoints;
    this.#engine = deps.engine;
  }

  /**
   * A new current secret; the previous one keeps signing for the overlap. `input.signatureScheme`
   * picks its scheme (`hmac-sha256` or `ed25519`), by default the current secret's.
   * @returns the endpoint and what its consumer verifies with: the new `whsec_` (shown this once)
   *   or the new `whpk_` public key.
   * @throws ValidationError naming the field; NotFoundError; ConflictError when another rotation
   *   (or a re-encryption) of this endpoint's secrets was written between this one's read and its
   *   write (nothing is written).
   */
  async rotate(id: string, input: unknown = undefined): Promise<{ endpoint: EndpointView; secret: string }> {
    const requested = rotationScheme(input);
    const endpoint = await this.#endpoints.endpoint(id);
    const now = this.#clock.now();
    const current = endpoint.secrets[0];
    const { secret, publicKey } = generateSigningSecret(requested ?? (current === undefined ? SignatureScheme.HMAC_SHA256 : schemeOf(current)));
    const expiresAt = now + this.#rotationOverlapMs;
    const previous = endpoint.secrets
      .filter((s) => s.expiresAt === null || s.expiresAt > now)
      .map((s) => ({ ...this.#resealed(s, id), expiresAt: s.expiresAt === null ? expiresAt : Math.min(s.expiresAt, expiresAt) }));
    const sealed = this.#secretBox.seal(secret, id);
    const updated = await this.#endpoints.patch(id, {
      secrets: [{ secret: sealed, createdAt: now, expiresAt: null, ...(publicKey === undefined ? {} : { publicKey }) }, ...previous],
      expectedSecrets: endpoint.secrets.map((s) => s.secret),
    });
    return { endpoint: updated, secret: publicKey ?? secret };
  }

  /**
   * Rewrites every endpoint's secrets (`whsec_` and `whsk_` alike: opaque text to the box) that are plain or sealed under a previous key under the
   * current key; afterwards the previous keys can be dropped. An endpoint whose secrets this node
   * cannot open is left as it is and listed in `unreadable`. `onProgress` hears after each
   * endpoint. A no-op without a key (secrets stay plain).
   */
  async reencrypt(onProgress: (done: number, total: number) => void = () => {}): Promise<ReencryptOutcome> {
    const endpoints = await this.#store.listEndpoints({});
    const unreadable: Array<{ endpointId: string; error: SecretUnreadableError }> = [];
    let rewritten = 0;
    for (const [i, listed] of endpoints.entries()) {
      try {
        if (await this.#reencryptOne(listed)) rewritten++;
      } catch (error) {
        if (!(error instanceof SecretUnreadableError)) throw error;
        unreadable.push({ endpointId: listed.id, error });
      }
      onProgress(i + 1, endpoints.length);
    }
    return { checked: endpoints.length, rewritten, unreadable };
  }

  /**
   * One endpoint's secrets under the current key; whether anything was written. Only the secrets
   * are written, and only while they are still those read: a rotation written meanwhile (on any
   * node) is read again and re-encrypted in turn, never overwritten. Gone meanwhile: nothing to do.
   */
  async #reencryptOne(listed: Endpoint): Promise<boolean> {
    let endpoint: Endpoint | undefined = listed;
    for (let round = 1; endpoint !== undefined; round++) {
      const { clientTls } = endpoint;
      const staleTls = clientTls !== undefined && clientTlsNeedsSealing(clientTls, this.#secretBox);
      if (!staleTls && !sealedTextsOf(endpoint).some((text) => this.#secretBox.needsSealing(text))) return false;
      const id = endpoint.id;
      const reseal = (stored: string): string => this.#secretBox.seal(this.#secretBox.open(stored, id), id);
      const { headers, auth } = endpoint;
      const patch: EndpointPatch = {
        secrets: endpoint.secrets.map((s) => ({ ...s, secret: reseal(s.secret) })),
        expectedSecrets: endpoint.secrets.map((s) => s.secret),
        ...(headers === undefined && auth === undefined
          ? {}
          : {
              headers: headers === undefined ? null : sealHeaders(headers, reseal),
              auth: auth === undefined ? null : sealAuth(auth, reseal),
              expectedCredentials: { headers: headers ?? null, auth: auth ?? null },
            }),
        // The client key and passphrase too, written only while they are still those read.
        ...(staleTls ? { clientTls: resealClientTls(clientTls, this.#secretBox, id), expectedClientTlsKey: clientTls.key } : {}),
      };
      try {
        const updated = await this.#store.updateEndpoint(id, patch, this.#clock.now());
        if (updated === undefined) return false;
        // Not awaited: the same secrets under another key, and a rotation walks every endpoint.
        void this.#engine.endpointChanged(updated, id);
        return true;
      } catch (error) {
        // Each conflict is another write to these secrets that landed first: a few in a row mean a loop, not a race.
        if (!hasCode(error, ErrorCode.CONFLICT) || round >= REENCRYPT_ROUNDS) throw error;
      }
      endpoint = await this.#store.getEndpoint(id);
    }
    return false;
  }

  /** A stored secret under the current key when it can be opened; as it is when not (it is never lost). */
  #resealed(secret: SigningSecret, endpointId: string): SigningSecret {
    if (!this.#secretBox.needsSealing(secret.secret)) return secret;
    try {
      return { ...secret, secret: this.#secretBox.seal(this.#secretBox.open(secret.secret, endpointId), endpointId) };
    } catch (error) {
      if (error instanceof SecretUnreadableError) return secret;
      throw error;
    }
  }
}

/** The scheme a rotation asks for: `{ signatureScheme }`, or nothing (no body) for the current one's. */
function rotationScheme(input: unknown): SignatureScheme | undefined {
  if (input === undefined || input === null) return undefined;
  if (typeof input !== 'object' || Array.isArray(input)) throw new ValidationError('body', 'must be a JSON object');
  for (const key of Object.keys(input)) {
    if (key !== 'signatureScheme') throw new ValidationError(key, 'is not a known field (allowed: signatureScheme)');
  }
  const { signatureScheme: given } = input as { signatureScheme?: unknown };
  return given === undefined ? undefined : signatureScheme(given, 'signatureScheme');
}

/** Every sealed (or plain, without a key) text an endpoint stores: signing secrets, secret header values, the `auth` secret. */
function sealedTextsOf(endpoint: Endpoint): string[] {
  return [
    ...endpoint.secrets.map((s) => s.secret),
    ...(endpoint.headers ?? []).filter((h) => h.secret).map((h) => h.value),
    ...(endpoint.auth === undefined ? [] : [authSecretOf(endpoint.auth)]),
  ];
}

/**
 * Endpoint secrets sealed at rest: AES-256-GCM under Herald's secret key, so
 * the database (its file, a dump, a backup) holds no usable `whsec_` secret.
 *
 * A sealed value describes itself:
 *
 *     enc:v1:<keyId>:<nonce, base64>:<ciphertext and 16-byte tag, base64>
 *
 * `keyId` is the first 8 hex digits of the SHA-256 of the key, so a reader
 * knows which of its keys opens a value (the current one, or one kept during a
 * key rotation) without trying each. The nonce is 96 random bits per value:
 * with at most a few million seals under one key, a repeat stays far below
 * the 2^-32 bound NIST sets for random GCM nonces. The associated data is the
 * value's header and the endpoint's id, so a sealed secret copied into another
 * endpoint's row, or relabelled with another key id, does not open.
 *
 * A value without the `enc:` prefix is a plain `whsec_` secret written before
 * encryption existed (or while no key is configured): it opens as itself, and
 * `needsSealing()` says it should be rewritten.
 */
import { createCipheriv, createDecipheriv, createHash, randomBytes } from 'node:crypto';
import { ErrorCode, SecretUnreadableError } from '../errors.ts';

/** The prefix and version of the current form; a later form gets `enc:v2:` and this module keeps reading v1. */
export const SEALED_PREFIX = 'enc:v1:';
/** AES-256: the key is 32 bytes. */
export const SECRET_KEY_BYTES = 32;
const NONCE_BYTES = 12;
const TAG_BYTES = 16;
const ALGORITHM = 'aes-256-gcm';

/** The short fingerprint naming a key in sealed values and messages: 8 hex digits of its SHA-256. */
export function keyIdOf(key: Buffer): string {
  return createHash('sha256').update(key).digest('hex').slice(0, 8);
}

/** Whether a stored value is sealed (in any version), as opposed to a plain legacy `whsec_` secret. */
export function isSealed(stored: string): boolean {
  return stored.startsWith('enc:');
}

/**
 * The keys Herald seals and opens endpoint secrets with: the current key seals,
 * and it or any previous key (kept during a key rotation) opens. `SecretBox.plain()`
 * holds no key: it stores secrets as they are (no key configured).
 */
export class SecretBox {
  readonly #current: { readonly key: Buffer; readonly id: string } | null;
  readonly #byId: ReadonlyMap<string, Buffer>;

  /**
   * `current` seals; it and `previous` open. `null`: no key, a plain box (see `plain()`).
   * @throws RangeError when a key is not 32 bytes, two keys share an id, or previous keys come
   *   without a current one (the config checks all this first, naming the setting).
   */
  constructor(current: Buffer | null, previous: readonly Buffer[] = []) {
    if (current === null && previous.length > 0) throw new RangeError('previous secret keys need a current one');
    const byId = new Map<string, Buffer>();
    for (const key of current === null ? [] : [current, ...previous]) {
      if (key.length !== SECRET_KEY_BYTES) throw new RangeError(`a secret key must be ${SECRET_KEY_BYTES} bytes (got ${key.length})`);
      const id = keyIdOf(key);
      if (byId.has(id)) throw new RangeError(`secret key ${id} is given twice`);
      byId.set(id, Buffer.from(key));
    }
    this.#current = current === null ? null : { key: Buffer.from(current), id: keyIdOf(current) };
    this.#byId = byId;
  }

  /** A box without keys: `seal()` returns the secret as it is, `open()` reads plain values only. */
  static plain(): SecretBox {
    return new SecretBox(null);
  }

  /** The id of the key new values are sealed with; `null` for a plain box. */
  get currentKeyId(): string | null {
    return this.#current?.id ?? null;
  }

  /** The ids of every key that opens values, current first. */
  get keyIds(): readonly string[] {
    return [...this.#byId.keys()];
  }

  /** `secret` sealed under the current key, bound to `endpointId`; as it is for a plain box. */
  seal(secret: string, endpointId: string): string {
    const current = this.#current;
    if (current === null) return secret;
    const header = `${SEALED_PREFIX}${current.id}:`;
    const nonce = randomBytes(NONCE_BYTES);
    const cipher = createCipheriv(ALGORITHM, current.key, nonce, { authTagLength: TAG_BYTES });
    cipher.setAAD(associatedData(header, endpointId));
    const sealed = Buffer.concat([cipher.update(secret, 'utf8'), cipher.final(), cipher.getAuthTag()]);
    return `${header}${nonce.toString('base64')}:${sealed.toString('base64')}`;
  }

  /**
   * The secret a stored value holds: a sealed value opened, a plain one as it is.
   *
   * @throws SecretUnreadableError `HERALD_SECRET_KEY_UNKNOWN` when sealed under a key this box
   *   lacks; `HERALD_SECRET_UNREADABLE` when malformed, of an unknown version, altered, or bound to
   *   another endpoint.
   */
  open(stored: string, endpointId: string): string {
    if (!isSealed(stored)) return stored;
    const unreadable = (keyId: string | null, why: string, cause?: unknown) =>
      new SecretUnreadableError(ErrorCode.SECRET_UNREADABLE, endpointId, keyId, why, { cause });
    if (!stored.startsWith(SEALED_PREFIX)) {
      throw unreadable(null, `is sealed in a form this Herald does not know (${stored.split(':', 2).join(':')})`);
    }
    const [keyId, nonceText, sealedText, ...rest] = stored.slice(SEALED_PREFIX.length).split(':');
    if (keyId === undefined || nonceText === undefined || sealedText === undefined || rest.length > 0 || !/^[0-9a-f]{8}$/.test(keyId)) {
      throw unreadable(null, 'is not a well-formed enc:v1 value');
    }
    const key = this.#byId.get(keyId);
    if (key === undefined) {
      throw new SecretUnreadableError(
        ErrorCode.SECRET_KEY_UNKNOWN,
        endpointId,
        keyId,
        'was sealed with a key this node does not hold: give it in HERALD_SECRET_KEYS_PREVIOUS (secrets.previousKeys)',
      );
    }
    const nonce = Buffer.from(nonceText, 'base64');
    const sealed = Buffer.from(sealedText, 'base64');
    if (nonce.length !== NONCE_BYTES || sealed.length < TAG_BYTES) throw unreadable(keyId, 'is not a well-formed enc:v1 value');
    const decipher = createDecipheriv(ALGORITHM, key, nonce, { authTagLength: TAG_BYTES });
    decipher.setAAD(associatedData(`${SEALED_PREFIX}${keyId}:`, endpointId));
    decipher.setAuthTag(sealed.subarray(sealed.length - TAG_BYTES));
    try {
      return Buffer.concat([decipher.update(sealed.subarray(0, sealed.length - TAG_BYTES)), decipher.final()]).toString('utf8');
    } catch (cause) {
      throw unreadable(keyId, 'does not authenticate: it was altered, or copied from another endpoint', cause);
    }
  }

  /** Whether `stored` should be rewritten: plain or under another key while this box has a key. */
  needsSealing(stored: string): boolean {
    const current = this.#current;
    return current !== null && !stored.startsWith(`${SEALED_PREFIX}${current.id}:`);
  }
}

function associatedData(header: string, endpointId: string): Buffer {
  return Buffer.from(`${header}${endpointId}`, 'utf8');
}

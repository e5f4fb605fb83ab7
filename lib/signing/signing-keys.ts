/**
 * The HMAC keys an endpoint signs with now: its secrets still within their
 * rotation overlap, opened from their stored (sealed) form and decoded.
 *
 * Each stored secret is opened once per loaded endpoint, not per delivery: the
 * opened key is remembered against the secret object the actor holds, so the
 * memory goes when the actor drops that version of the endpoint (an edit, a
 * rotation or eviction loads a new one). An AES-GCM open costs a few µs, an
 * attempt's signature about as much; doing both per attempt would double it.
 */
import type { Endpoint, SigningSecret } from '../model.ts';
import { secretKey } from './secret.ts';
import type { SecretBox } from './secret-box.ts';

export class SigningKeys {
  readonly #box: SecretBox;
  readonly #opened = new WeakMap<SigningSecret, Buffer>();

  constructor(box: SecretBox) {
    this.#box = box;
  }

  /**
   * The keys of the secrets active at `now`, current first.
   * @throws SecretUnreadableError when one of them cannot be opened (no partial signature set: a
   *   consumer still on the previous secret would fail verification without telling why).
   */
  active(endpoint: Endpoint, now: number): Buffer[] {
    return endpoint.secrets.filter((s) => s.expiresAt === null || s.expiresAt > now).map((s) => this.#keyOf(s, endpoint.id));
  }

  #keyOf(secret: SigningSecret, endpointId: string): Buffer {
    let key = this.#opened.get(secret);
    if (key === undefined) {
      key = secretKey(this.#box.open(secret.secret, endpointId));
      this.#opened.set(secret, key);
    }
    return key;
  }
}

/**
 * The keys an endpoint signs with now: its secrets still within their rotation
 * overlap, opened from their stored (sealed) form and decoded: HMAC key bytes
 * for a `whsec_`, a ready ed25519 `KeyObject` for a `whsk_` (making one from
 * the key's text costs more than the signature it makes).
 *
 * Each stored secret is opened once per loaded endpoint, not per delivery: the
 * opened key is remembered against the secret object the actor holds, so the
 * memory goes when the actor drops that version of the endpoint (an edit, a
 * rotation or eviction loads a new one). An AES-GCM open costs a few µs, an
 * attempt's signature about as much; doing both per attempt would double it.
 */
import type { Endpoint, SigningSecret } from '../model.ts';
import { signingKey } from './secret.ts';
import type { SigningKey } from './signature.ts';
import type { SecretBox } from './secret-box.ts';

export class SigningKeys {
  readonly #box: SecretBox;
  readonly #opened = new WeakMap<SigningSecret, SigningKey>();

  constructor(box: SecretBox) {
    this.#box = box;
  }

  /**
   * The keys of the secrets active at `now`, current first.
   * @throws SecretUnreadableError when one of them cannot be opened (no partial signature set: a
   *   consumer still on the previous secret would fail verification without telling why).
   */
  active(endpoint: Endpoint, now: number): SigningKey[] {
    return endpoint.secrets.filter((s) => s.expiresAt === null || s.expiresAt > now).map((s) => this.#keyOf(s, endpoint.id));
  }

  #keyOf(secret: SigningSecret, endpointId: string): SigningKey {
    let key = this.#opened.get(secret);
    if (key === undefined) {
      key = signingKey(this.#box.open(secret.secret, endpointId));
      this.#opened.set(secret, key);
    }
    return key;
  }
}

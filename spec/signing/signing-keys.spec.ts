import { expect } from 'chai';
import { randomBytes } from 'node:crypto';
import type { Endpoint } from '../../lib/model.ts';
import { generateSecret, secretKey } from '../../lib/signing/secret.ts';
import { SecretBox } from '../../lib/signing/secret-box.ts';
import { SigningKeys } from '../../lib/signing/signing-keys.ts';

/** A box that counts its opens. */
class CountingBox extends SecretBox {
  opens = 0;
  override open(stored: string, endpointId: string): string {
    this.opens++;
    return super.open(stored, endpointId);
  }
}

describe('SigningKeys', () => {
  const box = new CountingBox(randomBytes(32));
  const [current, previous, expired] = [generateSecret(), generateSecret(), generateSecret()];
  const endpoint = {
    id: 'ep_1',
    secrets: [
      { secret: box.seal(current, 'ep_1'), createdAt: 3_000, expiresAt: null },
      { secret: box.seal(previous, 'ep_1'), createdAt: 2_000, expiresAt: 10_000 },
      { secret: box.seal(expired, 'ep_1'), createdAt: 1_000, expiresAt: 5_000 },
    ],
  } as unknown as Endpoint;

  it('gives the keys of the secrets active now, current first, each opened once per loaded endpoint', () => {
    const keys = new SigningKeys(box);
    box.opens = 0;
    expect(keys.active(endpoint, 6_000)).to.deep.equal([secretKey(current), secretKey(previous)]);
    expect(keys.active(endpoint, 7_000)).to.deep.equal([secretKey(current), secretKey(previous)]);
    expect(box.opens, 'opened on the first signature only').to.equal(2);
    expect(keys.active(endpoint, 10_000)).to.deep.equal([secretKey(current)]);
    // A newer version of the endpoint (an edit, a rotation) is opened afresh.
    keys.active({ ...endpoint, secrets: endpoint.secrets.map((s) => ({ ...s })) }, 6_000);
    expect(box.opens).to.equal(4);
  });
});

import { expect } from 'chai';
import * as undici from 'undici';
import { buildConnector, Pool, undiciErrors } from '../../lib/delivery/undici-parts.ts';

describe('undici parts (lib/delivery/undici-parts.ts)', () => {
  it('are the very objects undici exports, loaded without the rest of undici', () => {
    expect(Pool).to.equal(undici.Pool);
    expect(buildConnector).to.equal(undici.buildConnector);
    expect(undiciErrors).to.equal(undici.errors);
    expect(undiciErrors.HTTPParserError).to.equal(undici.errors.HTTPParserError);
  });
});

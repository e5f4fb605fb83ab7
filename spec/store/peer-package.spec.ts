import { expect } from 'chai';
import { ConfigError, ErrorCode } from '../../lib/errors.ts';
import { importPeer } from '../../lib/store/peer-package.ts';

/** A name no registry package has: what `import()` meets when a peer is not installed. */
const MISSING = 'herald-spec-peer-that-is-not-installed';
const REQUEST = { key: 'store', value: 'postgres://herald@db.example/herald' };

async function rejection(promise: Promise<unknown>): Promise<unknown> {
  try {
    await promise;
  } catch (error) {
    return error;
  }
  throw new Error('expected the promise to reject');
}

describe('importPeer', () => {
  context('when the package is installed', () => {
    it('gives what the importer gives', async () => {
      const pg = await importPeer({ name: 'pg', load: async () => (await import('pg')).default }, REQUEST);
      expect(pg.Pool).to.be.a('function');
    });
  });

  context('when the package is not installed', () => {
    it('fails with a ConfigError naming the setting, the package and the command that installs it', async () => {
      const error = await rejection(importPeer({ name: MISSING, load: () => import(MISSING) }, REQUEST));
      expect(error).to.be.instanceOf(ConfigError);
      expect((error as ConfigError).code).to.equal(ErrorCode.INVALID_CONFIG);
      expect((error as ConfigError).key).to.equal('store');
      expect((error as ConfigError).message).to.equal(
        `config store="postgres://herald@db.example/herald": needs the package "${MISSING}", not installed: npm install ${MISSING}`,
      );
    });
  });

  context('when the package is installed but does not load', () => {
    it('rethrows a dependency of the package that is missing as it is, not as the package missing', async () => {
      // pg is found: the module that is missing is another one, which installing pg again would not fix.
      const error = await rejection(importPeer({ name: 'pg', load: () => import(MISSING) }, REQUEST));
      expect(error).not.to.be.instanceOf(ConfigError);
      expect((error as { code?: unknown }).code).to.equal('ERR_MODULE_NOT_FOUND');
    });

    it('rethrows what the package throws as it loads', async () => {
      const thrown = new Error('the addon was built for another Node');
      expect(await rejection(importPeer({ name: 'pg', load: () => Promise.reject(thrown) }, REQUEST))).to.equal(thrown);
    });
  });
});

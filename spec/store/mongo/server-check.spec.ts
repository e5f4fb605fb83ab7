import { expect } from 'chai';
import { checkServerSupport } from '../../../lib/store/mongo/server-check.ts';

describe('checkServerSupport', () => {
  context('when the server is a replica set member of 4.0 or newer', () => {
    it('accepts it', () => {
      expect(checkServerSupport({ hello: { setName: 'rs0', isWritablePrimary: true, maxWireVersion: 21 }, buildInfo: { version: '7.0.12' } })).to.deep.equal({
        ok: true,
        support: { topology: 'replica-set', version: '7.0.12', maxWireVersion: 21 },
      });
      expect(checkServerSupport({ hello: { setName: 'rs0', ismaster: true, maxWireVersion: 7 } }).ok).to.equal(true);
    });
  });

  context('when the server is standalone', () => {
    it('refuses it, saying a replica set is needed and how to make one', () => {
      const result = checkServerSupport({ hello: { isWritablePrimary: true, maxWireVersion: 25 }, buildInfo: { version: '8.0.4' } });
      expect(result.ok).to.equal(false);
      if (result.ok) return;
      expect(result.problem).to.include('not part of a replica set').and.include('--replSet rs0').and.include('rs.initiate()').and.include('?replicaSet=rs0');
    });
  });

  context('when the server is older than 4.0', () => {
    it('refuses it, naming the version', () => {
      const result = checkServerSupport({ hello: { setName: 'rs0', maxWireVersion: 6 }, buildInfo: { version: '3.6.23' } });
      expect(result).to.deep.equal({
        ok: false,
        problem: 'MongoDB 3.6.23 (wire version 6) is too old: Herald needs 4.0 or newer for change streams and transactions',
      });
    });
  });

  context('when the server is a mongos', () => {
    it('accepts 4.2 or newer and refuses 4.0, which has no sharded transactions', () => {
      expect(checkServerSupport({ hello: { msg: 'isdbgrid', maxWireVersion: 8 } })).to.deep.include({ ok: true });
      const old = checkServerSupport({ hello: { msg: 'isdbgrid', maxWireVersion: 7 }, buildInfo: { version: '4.0.28' } });
      expect(old.ok).to.equal(false);
      if (!old.ok) expect(old.problem).to.include('4.0.28').and.include('4.2');
    });
  });
});

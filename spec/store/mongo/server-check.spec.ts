import { expect } from 'chai';
import { checkServerSupport, MIN_WIRE_VERSION, tooOldProblem } from '../../../lib/store/mongo/server-check.ts';

describe('checkServerSupport', () => {
  context('when the server is a replica set member of 4.4 or newer', () => {
    it('accepts it', () => {
      expect(checkServerSupport({ hello: { setName: 'rs0', isWritablePrimary: true, maxWireVersion: 21 }, buildInfo: { version: '7.0.12' } })).to.deep.equal({
        ok: true,
        support: { topology: 'replica-set', version: '7.0.12', maxWireVersion: 21 },
      });
      expect(checkServerSupport({ hello: { setName: 'rs0', ismaster: true, maxWireVersion: 9 } }).ok).to.equal(true);
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

  context('when the server is older than 4.4, the oldest the driver (v7) supports', () => {
    it('refuses a replica set of 4.0 and 4.2, naming the version and what is needed', () => {
      expect(MIN_WIRE_VERSION).to.equal(9);
      for (const [version, wire] of [['4.0.28', 7], ['4.2.25', 8]] as const) {
        expect(checkServerSupport({ hello: { setName: 'rs0', maxWireVersion: wire }, buildInfo: { version } })).to.deep.equal({
          ok: false,
          problem: `MongoDB ${version} (wire version ${wire}) is too old: Herald needs MongoDB 4.4 or newer (wire version 9), the oldest its driver supports`,
        });
      }
    });

    it('words the refusal without a version when none is known', () => {
      expect(tooOldProblem()).to.equal('the server is too old: Herald needs MongoDB 4.4 or newer (wire version 9), the oldest its driver supports');
    });
  });

  context('when the server is a mongos', () => {
    it('accepts 4.4 or newer and refuses 4.2, with the same rule as a replica set', () => {
      expect(checkServerSupport({ hello: { msg: 'isdbgrid', maxWireVersion: 9 } })).to.deep.include({ ok: true });
      const old = checkServerSupport({ hello: { msg: 'isdbgrid', maxWireVersion: 8 }, buildInfo: { version: '4.2.25' } });
      expect(old).to.deep.equal({ ok: false, problem: tooOldProblem('4.2.25', 8) });
    });
  });
});

import { expect } from 'chai';
import { existsSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { resolveAdminToken } from '../../lib/api/admin-token.ts';

describe('resolveAdminToken', () => {
  let root: string;

  beforeEach(() => {
    root = mkdtempSync(join(tmpdir(), 'herald-token-'));
  });

  afterEach(() => {
    rmSync(root, { recursive: true, force: true });
  });

  context('when no token is configured and none is kept', () => {
    it('generates one into <dataDir>/admin-token readable only by the owner', () => {
      const dataDir = join(root, 'data', 'nested');
      const first = resolveAdminToken(null, dataDir);
      const path = join(dataDir, 'admin-token');
      expect(first).to.include({ source: 'generated', path });
      expect(first.token).to.have.length.of.at.least(16);
      expect(readFileSync(path, 'utf8').trim()).to.equal(first.token);
      if (process.platform !== 'win32') expect(statSync(path).mode & 0o777).to.equal(0o600);
    });

    it('generates a different token in another data folder', () => {
      const a = resolveAdminToken(null, join(root, 'a'));
      const b = resolveAdminToken(null, join(root, 'b'));
      expect(a.token).to.not.equal(b.token);
    });
  });

  context('when a token was generated before', () => {
    it('reuses it on the next call', () => {
      const first = resolveAdminToken(null, root);
      const second = resolveAdminToken(null, root);
      expect(second).to.deep.equal({ token: first.token, source: 'file', path: join(root, 'admin-token') });
    });
  });

  context('when the kept file is too short to be a token', () => {
    it('replaces it with a generated one, still readable only by the owner', () => {
      const path = join(root, 'admin-token');
      writeFileSync(path, 'short\n', { mode: 0o644 });
      const token = resolveAdminToken(null, root);
      expect(token.source).to.equal('generated');
      expect(readFileSync(path, 'utf8').trim()).to.equal(token.token);
      if (process.platform !== 'win32') expect(statSync(path).mode & 0o777).to.equal(0o600);
    });
  });

  context('when a token is configured', () => {
    it('uses it and writes nothing', () => {
      const dataDir = join(root, 'data');
      const token = resolveAdminToken('configured-token-0123456789', dataDir);
      expect(token).to.deep.equal({ token: 'configured-token-0123456789', source: 'config', path: null });
      expect(existsSync(dataDir)).to.equal(false);
    });

    it('wins over a kept token', () => {
      const kept = resolveAdminToken(null, root);
      const token = resolveAdminToken('configured-token-0123456789', root);
      expect(token.token).to.equal('configured-token-0123456789');
      expect(readFileSync(join(root, 'admin-token'), 'utf8').trim()).to.equal(kept.token);
    });
  });
});

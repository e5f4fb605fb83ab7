import { expect } from 'chai';
import { randomBytes } from 'node:crypto';
import { chmodSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { resolveConfig, type ConfigOverrides } from '../../lib/config/config.ts';
import { ConfigError } from '../../lib/errors.ts';
import { generateSecret } from '../../lib/signing/secret.ts';
import { keyIdOf } from '../../lib/signing/secret-box.ts';
import { GENERATED_KEY_FILE, resolveSecretKeys, SecretKeyOrigin } from '../../lib/signing/secret-key-source.ts';

function secretsConfig(secrets: ConfigOverrides['secrets']) {
  return resolveConfig({ secrets }).secrets;
}

describe('resolveSecretKeys()', () => {
  let dir: string;
  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'herald-key-'));
  });
  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  context('when secrets.key is set', () => {
    it('seals with it and opens with the previous keys too', () => {
      const [key, old] = [randomBytes(32), randomBytes(32)];
      const keys = resolveSecretKeys(secretsConfig({ key: key.toString('base64'), previousKeys: [old.toString('hex')] }), dir);
      expect(keys.origin).to.equal(SecretKeyOrigin.CONFIG);
      expect(keys.box.keyIds).to.deep.equal([keyIdOf(key), keyIdOf(old)]);
      // Nothing is generated when a key is configured.
      expect(() => statSync(join(dir, GENERATED_KEY_FILE))).to.throw(/ENOENT/);
    });

    it('refuses a previous key equal to the current one, naming it', () => {
      const key = randomBytes(32).toString('base64');
      const error = (() => {
        try {
          return resolveSecretKeys(secretsConfig({ key, previousKeys: [key] }), null);
        } catch (e) {
          return e;
        }
      })();
      expect(error).to.be.instanceOf(ConfigError).with.property('key', 'secrets.previousKeys[0]');
    });
  });

  context('when secrets.keyFile is set', () => {
    it('reads the key from it, and warns when others can read the file', () => {
      const key = randomBytes(32);
      const path = join(dir, 'key');
      writeFileSync(path, `${key.toString('hex')}\n`, { mode: 0o600 });
      const private_ = resolveSecretKeys(secretsConfig({ keyFile: path }), null);
      expect(private_.box.currentKeyId).to.equal(keyIdOf(key));
      expect(private_.origin).to.equal(SecretKeyOrigin.FILE);
      expect(private_.warnings).to.deep.equal([]);
      chmodSync(path, 0o644);
      const readable = resolveSecretKeys(secretsConfig({ keyFile: path }), null);
      expect(readable.warnings).to.have.length(1);
      expect(readable.warnings[0]).to.include(path).and.include('644').and.include('chmod 600');
    });

    it('refuses a missing file or one without a key, naming secrets.keyFile and the path', () => {
      const missing = join(dir, 'nope');
      expect(() => resolveSecretKeys(secretsConfig({ keyFile: missing }), null)).to.throw(ConfigError, /secrets\.keyFile.*nope.*ENOENT/);
      const junk = join(dir, 'junk');
      writeFileSync(junk, 'not a key\n');
      expect(() => resolveSecretKeys(secretsConfig({ keyFile: junk }), null)).to.throw(ConfigError, /secrets\.keyFile.*must hold 32 bytes/);
    });
  });

  context('when no key is configured and a folder is given (a SQLite store)', () => {
    it('generates dataDir/secret-key with mode 0600 once, and every later start reads the same key', () => {
      const first = resolveSecretKeys(secretsConfig({}), dir);
      const path = join(dir, GENERATED_KEY_FILE);
      expect(first.origin).to.equal(SecretKeyOrigin.GENERATED);
      expect(first.path).to.equal(path);
      expect(statSync(path).mode & 0o777).to.equal(0o600);
      const again = resolveSecretKeys(secretsConfig({}), dir);
      expect(again.origin).to.equal(SecretKeyOrigin.FILE);
      expect(again.box.currentKeyId).to.equal(first.box.currentKeyId);
      const secret = generateSecret();
      expect(again.box.open(first.box.seal(secret, 'ep_1'), 'ep_1')).to.equal(secret);
    });

    it('never replaces a damaged key file (what it sealed would be lost): it stops with a ConfigError', () => {
      const path = join(dir, GENERATED_KEY_FILE);
      writeFileSync(path, 'damaged\n', { mode: 0o600 });
      expect(() => resolveSecretKeys(secretsConfig({}), dir)).to.throw(ConfigError, /secret-key/);
      expect(readFileSync(path, 'utf8')).to.equal('damaged\n');
    });
  });

  context('when no key is configured and no folder is given (PostgreSQL, MongoDB)', () => {
    it('keeps secrets plain and warns', () => {
      const keys = resolveSecretKeys(secretsConfig({}), null);
      expect(keys.origin).to.equal(SecretKeyOrigin.NONE);
      expect(keys.box.currentKeyId).to.equal(null);
      expect(keys.warnings.join()).to.include('stored plain').and.include('HERALD_SECRET_KEY');
    });

    it('refuses previous keys without a current one', () => {
      expect(() => resolveSecretKeys(secretsConfig({ previousKeys: [randomBytes(32).toString('base64')] }), null)).to.throw(
        ConfigError,
        /secrets\.previousKeys.*need a current key/,
      );
    });
  });
});

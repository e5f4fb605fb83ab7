import { expect } from 'chai';
import { assertCurrent, clientTlsView, sealClientTls, validateClientTls } from '../../lib/endpoints/client-tls-input.ts';
import { SecretBox } from '../../lib/signing/secret-box.ts';
import { tlsFixture } from '../support/egress-parts.ts';
import { validationErrorOf } from '../support/validation-error.ts';

const cert = tlsFixture('client.pem');
const key = tlsFixture('client.key');

describe('validateClientTls', () => {
  it('reads the certificate\'s subject, issuer, SHA-256 fingerprint and expiry', () => {
    const tls = validateClientTls({ cert, key });
    expect(clientTlsView(tls)).to.deep.include({ subject: 'CN=herald-client\nO=Herald Tests', issuer: 'CN=Herald Test CA' });
    expect(tls.fingerprint).to.match(/^([0-9A-F]{2}:){31}[0-9A-F]{2}$/);
    expect(tls.notAfter).to.be.greaterThan(Date.UTC(2100, 0, 1));
    expect(tls.passphrase).to.equal(null);
  });

  it('names the field and the rule of each mistake, never showing the key', () => {
    const cases: Array<[unknown, string]> = [
      ['pem', 'clientTls'],
      [{ cert, key, extra: 1 }, 'clientTls.extra'],
      [{ cert: 'not a pem', key }, 'clientTls.cert'],
      [{ cert: '-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n', key }, 'clientTls.cert'],
      [{ cert, key: 'nope' }, 'clientTls.key'],
      [{ cert, key: tlsFixture('server.key') }, 'clientTls.key'],
      [{ cert, key: tlsFixture('client-encrypted.key') }, 'clientTls.key'],
      [{ cert, key: tlsFixture('client-encrypted.key'), passphrase: 'wrong' }, 'clientTls.key'],
      [{ cert, key, passphrase: '' }, 'clientTls.passphrase'],
    ];
    for (const [value, field] of cases) {
      const error = validationErrorOf(() => validateClientTls(value));
      expect(error.field, JSON.stringify(value).slice(0, 80)).to.equal(field);
      expect(error.message).to.not.include('PRIVATE KEY');
    }
    expect(validationErrorOf(() => validateClientTls({ cert, key: tlsFixture('client-encrypted.key') })).rule).to.include('passphrase');
    expect(validationErrorOf(() => validateClientTls({ cert, key: tlsFixture('server.key') })).rule).to.include('does not match');
  });

  it('refuses a certificate expired by the given time', () => {
    const tls = validateClientTls({ cert, key });
    expect(() => assertCurrent(tls, tls.notAfter - 1)).to.not.throw();
    expect(validationErrorOf(() => assertCurrent(tls, tls.notAfter)).field).to.equal('clientTls.cert');
  });

  it('seals the key and passphrase for the endpoint, leaving the public parts as they are', () => {
    const box = new SecretBox(Buffer.alloc(32, 7));
    const tls = validateClientTls({ cert, key: tlsFixture('client-encrypted.key'), passphrase: 'test-passphrase' });
    const sealed = sealClientTls(tls, box, 'ep_1');
    expect(sealed.key.startsWith('enc:v1:')).to.equal(true);
    expect(box.open(sealed.key, 'ep_1')).to.equal(tls.key);
    expect(box.open(sealed.passphrase ?? '', 'ep_1')).to.equal('test-passphrase');
    expect(sealed).to.include({ cert, subject: tls.subject, fingerprint: tls.fingerprint, notAfter: tls.notAfter });
    expect(sealed).to.not.have.property('sealed');
  });
});

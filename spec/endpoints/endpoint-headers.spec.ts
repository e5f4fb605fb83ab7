import { expect } from 'chai';
import { authView, sealAuth } from '../../lib/endpoints/endpoint-auth-input.ts';
import { headersView, MAX_HEADERS, sealHeaders } from '../../lib/endpoints/endpoint-headers.ts';
import { validateEndpointChanges, validateNewEndpoint, type EndpointDefaults } from '../../lib/endpoints/endpoint-input.ts';
import { validationErrorOf } from '../support/validation-error.ts';

const DEFAULTS: EndpointDefaults = { timeoutMs: 10_000, concurrency: 4, retry: { preset: 'default' }, adaptiveConcurrency: false };
const create = (fields: Record<string, unknown>) => validateNewEndpoint({ tenantId: 'acme', url: 'https://hooks.example/in', ...fields }, DEFAULTS);

describe('Endpoint headers and auth input', () => {
  describe('headers', () => {
    it('takes a string (not secret) or {value, secret}, in the order given, and an empty map as none', () => {
      expect(create({ headers: { 'X-Team': 'payments', 'X-Api-Key': { value: 'k_live_1', secret: true }, 'X-Plain': { value: '' } } }).headers).to.deep.equal([
        { name: 'X-Team', value: 'payments', secret: false },
        { name: 'X-Api-Key', value: 'k_live_1', secret: true },
        { name: 'X-Plain', value: '', secret: false },
      ]);
      expect(create({ headers: {} })).to.not.have.property('headers');
      expect(create({ headers: null })).to.not.have.property('headers');
      expect(validateEndpointChanges({ headers: null }).headers).to.equal(null);
      expect(validateEndpointChanges({ headers: {} }).headers).to.equal(null);
    });

    it('refuses Herald\'s and the connection\'s names, bad names and values, duplicates and too many', () => {
      const cases: Array<[unknown, string, string]> = [
        [{ 'webhook-id': 'x' }, 'headers.webhook-id', 'is set by Herald or the connection and cannot be given'],
        [{ 'Webhook-Signature': 'x' }, 'headers.Webhook-Signature', 'is set by Herald or the connection and cannot be given'],
        ...['Idempotency-Key', 'traceparent', 'tracestate', 'Content-Type', 'content-length', 'Host', 'transfer-encoding', 'connection', 'user-agent'].map(
          (name): [unknown, string, string] => [{ [name]: 'x' }, `headers.${name}`, 'is set by Herald or the connection and cannot be given'],
        ),
        [{ 'X Foo': 'x' }, 'headers.X Foo', "must be a header name: 1-256 of A-Z a-z 0-9 and !#$%&'*+-.^_`|~"],
        [{ 'X-Foo:': 'x' }, 'headers.X-Foo:', "must be a header name: 1-256 of A-Z a-z 0-9 and !#$%&'*+-.^_`|~"],
        [{ 'X-Foo': 'a\r\nX-Injected: 1' }, 'headers.X-Foo', 'must be printable ASCII without CR, LF, NUL or other control characters, and without surrounding spaces'],
        [{ 'X-Foo': 'a\u0000' }, 'headers.X-Foo', 'must be printable ASCII without CR, LF, NUL or other control characters, and without surrounding spaces'],
        [{ 'X-Foo': ' padded' }, 'headers.X-Foo', 'must be printable ASCII without CR, LF, NUL or other control characters, and without surrounding spaces'],
        [{ 'X-Foo': { value: 'v', secret: 'yes' } }, 'headers.X-Foo.secret', 'must be true or false (got "yes")'],
        [{ 'X-Foo': { value: 'v', hidden: true } }, 'headers.X-Foo.hidden', 'is not a known field (allowed: value, secret)'],
        [{ 'X-Foo': 3 }, 'headers.X-Foo', 'must be a string or {value, secret}'],
        [{ 'X-Foo': 'a'.repeat(4_097) }, 'headers.X-Foo', 'must be at most 4096 characters (got 4097)'],
        [{ 'X-Foo': 'a', 'x-foo': 'b' }, 'headers.x-foo', 'is given twice (header names are case-insensitive)'],
        [['X-Foo: a'], 'headers', 'must be an object of header name to value, or to {value, secret}'],
        [Object.fromEntries(Array.from({ length: MAX_HEADERS + 1 }, (_, i) => [`X-H${i}`, 'v'])), 'headers', 'must hold at most 20 headers (got 21)'],
        [Object.fromEntries(Array.from({ length: 3 }, (_, i) => [`X-H${i}`, 'v'.repeat(3_000)])), 'headers', 'must hold at most 8192 characters of names and values (got 9012)'],
      ];
      for (const [headers, field, rule] of cases) {
        const error = validationErrorOf(() => create({ headers }));
        expect({ field: error.field, rule: error.rule }, JSON.stringify(headers).slice(0, 80)).to.deep.equal({ field, rule });
      }
    });

    it('refuses authorization among the headers when auth is given', () => {
      const error = validationErrorOf(() => create({ headers: { Authorization: 'Bearer x' }, auth: { type: 'bearer', token: 't' } }));
      expect([error.field, error.rule]).to.deep.equal(['headers.Authorization', 'cannot be given while the endpoint has auth (it sets authorization)']);
      expect(create({ headers: { Authorization: 'Bearer x' } }).headers).to.have.length(1);
    });

    it('seals secret values only, and shows them without their value', () => {
      const sealed = sealHeaders(create({ headers: { 'X-Team': 'payments', 'X-Key': { value: 'k', secret: true } } }).headers ?? [], (v) => `sealed(${v})`);
      expect(sealed).to.deep.equal([
        { name: 'X-Team', value: 'payments', secret: false },
        { name: 'X-Key', value: 'sealed(k)', secret: true },
      ]);
      expect(headersView(sealed)).to.deep.equal({ 'X-Team': { value: 'payments', secret: false }, 'X-Key': { secret: true } });
      expect(headersView(undefined)).to.equal(null);
    });
  });

  describe('auth', () => {
    it('takes bearer, basic and oauth2 (tokenUrl normalised), and seals and hides each secret part', () => {
      const bearer = create({ auth: { type: 'bearer', token: 'tok_1' } }).auth!;
      const basic = create({ auth: { type: 'basic', username: 'herald', password: 'pa ss' } }).auth!;
      const oauth = create({ auth: { type: 'oauth2', tokenUrl: 'HTTPS://auth.example/token', clientId: 'c1', clientSecret: 's1', scope: 'hooks:write' } }).auth!;
      expect(oauth).to.deep.equal({ type: 'oauth2', tokenUrl: 'https://auth.example/token', clientId: 'c1', clientSecret: 's1', scope: 'hooks:write' });
      const seal = (v: string): string => `sealed(${v})`;
      expect(sealAuth(bearer, seal)).to.deep.equal({ type: 'bearer', token: 'sealed(tok_1)' });
      expect(sealAuth(basic, seal)).to.deep.equal({ type: 'basic', username: 'herald', password: 'sealed(pa ss)' });
      expect(sealAuth(oauth, seal)).to.include({ clientSecret: 'sealed(s1)', clientId: 'c1' });
      expect(authView(bearer)).to.deep.equal({ type: 'bearer', tokenSet: true });
      expect(authView(basic)).to.deep.equal({ type: 'basic', username: 'herald', passwordSet: true });
      expect(authView(oauth)).to.deep.equal({
        type: 'oauth2', tokenUrl: 'https://auth.example/token', clientId: 'c1', clientSecretSet: true, scope: 'hooks:write', audience: null,
      });
      expect(validateEndpointChanges({ auth: null }).auth).to.equal(null);
    });

    it('names the field and the rule of a bad one', () => {
      const cases: Array<[unknown, string, string]> = [
        ['bearer x', 'auth', 'must be an object with a type: bearer, basic or oauth2'],
        [{ type: 'digest' }, 'auth.type', 'must be one of bearer, basic, oauth2 (got "digest")'],
        [{ type: 'bearer' }, 'auth.token', 'must be a string (got undefined)'],
        [{ type: 'bearer', token: '' }, 'auth.token', 'must not be empty'],
        [{ type: 'bearer', token: 'a\nb' }, 'auth.token', 'must be printable ASCII without CR, LF, NUL or other control characters, and without surrounding spaces'],
        [{ type: 'bearer', token: 't', username: 'u' }, 'auth.username', 'is not a field of bearer auth (allowed: type, token)'],
        [{ type: 'basic', username: 'a:b', password: 'p' }, 'auth.username', 'must not contain ":"'],
        [{ type: 'basic', username: 'a' }, 'auth.password', 'must be a string (got undefined)'],
        [{ type: 'oauth2', tokenUrl: 'ftp://auth.example/', clientId: 'c', clientSecret: 's' }, 'auth.tokenUrl', 'must use http or https (got ftp:)'],
        [{ type: 'oauth2', tokenUrl: 'https://u:p@auth.example/', clientId: 'c', clientSecret: 's' }, 'auth.tokenUrl', 'must not contain a username or password'],
        [{ type: 'oauth2', tokenUrl: 'https://auth.example/', clientId: 'c' }, 'auth.clientSecret', 'must be a string (got undefined)'],
      ];
      for (const [auth, field, rule] of cases) {
        const error = validationErrorOf(() => create({ auth }));
        expect({ field: error.field, rule: error.rule }, JSON.stringify(auth)).to.deep.equal({ field, rule });
      }
    });
  });
});

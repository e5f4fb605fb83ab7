import { expect } from 'chai';
import { ValidationError } from '../../lib/errors.ts';
import { DeliveryMode } from '../../lib/model.ts';
import { validateEndpointChanges, validateNewEndpoint } from '../../lib/endpoints/endpoint-input.ts';
import type { EndpointDefaults } from '../../lib/endpoints/endpoint-input.ts';

const DEFAULTS: EndpointDefaults = { timeoutMs: 10_000, concurrency: 4, retry: { preset: 'default' } };

const INJECTED = 'http://host/a\r\nX-Injected: 1';
const RULE = 'must not contain control characters or surrounding spaces (found "\\r" at index 13)';

function thrown(run: () => unknown): ValidationError {
  try {
    run();
  } catch (error) {
    expect(error).to.be.instanceOf(ValidationError);
    return error as ValidationError;
  }
  return expect.fail('expected a ValidationError');
}

describe('endpoint input', () => {
  describe('validateNewEndpoint', () => {
    context('when the url holds CR LF', () => {
      it('refuses it with a ValidationError naming url and the rule', () => {
        const error = thrown(() => validateNewEndpoint({ tenantId: 'acme', url: INJECTED }, DEFAULTS));
        expect(error.field).to.equal('url');
        expect(error.rule).to.equal(RULE);
      });
    });

    context('when the url has surrounding spaces', () => {
      it('refuses it rather than trimming it', () => {
        const error = thrown(() => validateNewEndpoint({ tenantId: 'acme', url: '  https://hooks.example/in' }, DEFAULTS));
        expect(error.field).to.equal('url');
        expect(error.rule).to.match(/^must not contain control characters or surrounding spaces \(found " " at index 0\)$/);
      });
    });

    context('when the url is acceptable', () => {
      it('keeps the normalised URL, not the raw string', () => {
        const fields = validateNewEndpoint({ tenantId: 'acme', url: 'HTTPS://Hooks.Example:443' }, DEFAULTS);
        expect(fields).to.deep.include({ tenantId: 'acme', url: 'https://hooks.example/', mode: DeliveryMode.AT_LEAST_ONCE });
      });
    });
  });

  describe('validateEndpointChanges (PATCH)', () => {
    context('when the url holds CR LF', () => {
      it('refuses it with a ValidationError naming url and the rule', () => {
        const error = thrown(() => validateEndpointChanges({ url: INJECTED }));
        expect(error.field).to.equal('url');
        expect(error.rule).to.equal(RULE);
      });
    });

    context('when the url holds a NUL or DEL', () => {
      it('refuses it', () => {
        expect(thrown(() => validateEndpointChanges({ url: 'https://hooks.example/\u0000' })).field).to.equal('url');
        expect(thrown(() => validateEndpointChanges({ url: 'https://hooks.example/\u007f' })).field).to.equal('url');
      });
    });

    context('when the url is acceptable', () => {
      it('returns the normalised URL', () => {
        expect(validateEndpointChanges({ url: 'http://hooks.example/a b' })).to.deep.equal({ url: 'http://hooks.example/a%20b' });
      });
    });
  });
});

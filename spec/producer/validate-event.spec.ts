import { expect } from 'chai';
import { ErrorCode, ValidationError } from '../../lib/errors.ts';
import { validateEventInput } from '../../lib/producer/validate-event.ts';

const LIMITS = { maxPayloadBytes: 1_024 };

function failure(input: unknown, limits = LIMITS): ValidationError {
  try {
    validateEventInput(input, limits);
  } catch (error) {
    if (error instanceof ValidationError) return error;
    throw error;
  }
  throw new Error('expected a ValidationError');
}

const valid = { tenantId: 'acme', type: 'invoice.paid', payload: { amount: 42 } };

describe('validateEventInput', () => {
  context('when the event is valid', () => {
    it('serialises the payload once and keeps the optional fields', () => {
      expect(validateEventInput(valid, LIMITS)).to.deep.equal({
        tenantId: 'acme',
        type: 'invoice.paid',
        payloadJson: '{"amount":42}',
      });
      expect(
        validateEventInput({ ...valid, id: 'order-17:paid', endpointId: 'ep_1', payload: [1, 'two', null, true] }, LIMITS),
      ).to.deep.equal({
        tenantId: 'acme',
        type: 'invoice.paid',
        payloadJson: '[1,"two",null,true]',
        id: 'order-17:paid',
        endpointId: 'ep_1',
      });
    });

    it('accepts JSON primitives as the payload', () => {
      expect(validateEventInput({ ...valid, payload: 'text' }, LIMITS).payloadJson).to.equal('"text"');
      expect(validateEventInput({ ...valid, payload: 0 }, LIMITS).payloadJson).to.equal('0');
      expect(validateEventInput({ ...valid, payload: null }, LIMITS).payloadJson).to.equal('null');
    });
  });

  context('when the input is not an object', () => {
    it('names the event', () => {
      for (const input of [null, 'x', 42, [valid]]) {
        expect(failure(input).field).to.equal('event');
      }
    });
  });

  context('when a field breaks its rule', () => {
    const cases: ReadonlyArray<[string, Record<string, unknown>, string, RegExp]> = [
      ['tenantId missing', { type: 't', payload: 1 }, 'tenantId', /is required/],
      ['tenantId not a string', { ...valid, tenantId: 7 }, 'tenantId', /must be a string/],
      ['tenantId empty', { ...valid, tenantId: '' }, 'tenantId', /must not be empty/],
      ['tenantId too long', { ...valid, tenantId: 'a'.repeat(129) }, 'tenantId', /at most 128 characters/],
      ['tenantId with a space', { ...valid, tenantId: 'ac me' }, 'tenantId', /letters, digits/],
      ['type missing', { tenantId: 'acme', payload: 1 }, 'type', /is required/],
      ['type too long', { ...valid, type: 'a'.repeat(257) }, 'type', /at most 256 characters/],
      ['type with a slash', { ...valid, type: 'invoice/paid' }, 'type', /letters, digits/],
      ['id too long', { ...valid, id: 'k'.repeat(129) }, 'id', /at most 128 characters/],
      ['id with unicode', { ...valid, id: 'clé' }, 'id', /letters, digits/],
      ['id not a string', { ...valid, id: 12 }, 'id', /must be a string/],
      ['endpointId not a string', { ...valid, endpointId: {} }, 'endpointId', /must be a string/],
      ['endpointId empty', { ...valid, endpointId: '' }, 'endpointId', /must not be empty/],
      ['payload missing', { tenantId: 'acme', type: 't' }, 'payload', /is required/],
    ];
    for (const [what, input, field, rule] of cases) {
      it(`names ${field} and the rule (${what})`, () => {
        const error = failure(input);
        expect(error.code).to.equal(ErrorCode.INVALID_INPUT);
        expect(error.field).to.equal(field);
        expect(error.rule).to.match(rule);
        expect(error.message).to.match(new RegExp(`^${field}: `));
      });
    }
  });

  context('when the payload is not JSON', () => {
    const circular: Record<string, unknown> = {};
    circular['self'] = circular;
    const cases: ReadonlyArray<[string, unknown]> = [
      ['undefined', undefined],
      ['a function', () => 1],
      ['a nested function', { handler: () => 1 }],
      ['a symbol', Symbol('s')],
      ['a BigInt', { amount: 10n }],
      ['NaN', { ratio: Number.NaN }],
      ['Infinity', [Number.POSITIVE_INFINITY]],
      ['a cycle', circular],
    ];
    for (const [what, payload] of cases) {
      it(`refuses ${what} with 'payload: must be JSON'`, () => {
        const error = failure({ ...valid, payload });
        expect(error.field).to.equal('payload');
        expect(error.message).to.match(/^payload: must be JSON/);
      });
    }
  });

  context('when the payload is too large', () => {
    it('measures UTF-8 bytes of the JSON and throws HERALD_PAYLOAD_TOO_LARGE', () => {
      // 'é' is one UTF-16 unit but two UTF-8 bytes: 500 of them plus quotes = 1002 bytes.
      expect(validateEventInput({ ...valid, payload: 'é'.repeat(500) }, { maxPayloadBytes: 1_002 }).payloadJson).to.have.length(502);
      const error = failure({ ...valid, payload: 'é'.repeat(500) }, { maxPayloadBytes: 1_001 });
      expect(error.code).to.equal(ErrorCode.PAYLOAD_TOO_LARGE);
      expect(error.field).to.equal('payload');
      expect(error.rule).to.equal('must be at most 1001 bytes (got 1002)');
    });
  });
});

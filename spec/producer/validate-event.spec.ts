import { expect } from 'chai';
import { ErrorCode, ValidationError } from '../../lib/errors.ts';
import { JsonText } from '../../lib/producer/json-text.ts';
import { MAX_PAYLOAD_DEPTH, validateEventInput, validateEventInputs } from '../../lib/producer/validate-event.ts';

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
        validateEventInput({ ...valid, id: 'order-17:paid', endpointId: 'ep_1', orderingKey: 'customer 42/ünï', payload: [1, 'two', null, true] }, LIMITS),
      ).to.deep.equal({
        tenantId: 'acme',
        type: 'invoice.paid',
        payloadJson: '[1,"two",null,true]',
        id: 'order-17:paid',
        endpointId: 'ep_1',
        orderingKey: 'customer 42/ünï',
      });
      expect(validateEventInput({ ...valid, orderingKey: 'k'.repeat(200) }, LIMITS).orderingKey).to.have.length(200);
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
      ['orderingKey not a string', { ...valid, orderingKey: 7 }, 'orderingKey', /must be a string/],
      ['orderingKey empty', { ...valid, orderingKey: '' }, 'orderingKey', /must not be empty/],
      ['orderingKey too long', { ...valid, orderingKey: 'k'.repeat(201) }, 'orderingKey', /at most 200 characters \(got 201\)/],
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

  context('when the event has a field Herald does not know', () => {
    it('refuses it, naming the field and listing the allowed ones', () => {
      const error = failure({ ...valid, priority: 'high' });
      expect(error.code).to.equal(ErrorCode.INVALID_INPUT);
      expect(error.field).to.equal('priority');
      expect(error.rule).to.equal('is not a known field (allowed: tenantId, type, payload, id, endpointId, orderingKey)');
      expect(failure({ ...valid, tenantID: 'acme' }).field).to.equal('tenantID');
    });

    it('names the item in a list', () => {
      const events = [valid, valid, valid, { ...valid, priority: 'high' }];
      try {
        validateEventInputs(events, LIMITS);
        expect.fail('expected a ValidationError');
      } catch (error) {
        expect(error).to.be.instanceOf(ValidationError);
        expect((error as ValidationError).field).to.equal('[3].priority');
        expect((error as ValidationError).message).to.match(/^\[3\]\.priority: is not a known field \(allowed: /);
      }
    });
  });

  context('when the payload is nested too deep', () => {
    function nested(depth: number): unknown {
      let value: unknown = 1;
      for (let i = 0; i < depth; i++) value = i % 2 === 0 ? [value] : { v: value };
      return value;
    }

    it(`accepts ${MAX_PAYLOAD_DEPTH} levels and refuses more, naming the limit and the depth found`, () => {
      expect(MAX_PAYLOAD_DEPTH).to.equal(64);
      expect(validateEventInput({ ...valid, payload: nested(64) }, LIMITS).payloadJson).to.have.length.greaterThan(64);
      const error = failure({ ...valid, payload: nested(65) });
      expect(error.code).to.equal(ErrorCode.INVALID_INPUT);
      expect(error.field).to.equal('payload');
      expect(error.rule).to.equal('must be nested at most 64 levels of arrays and objects deep (got 65)');
    });

    it('measures a payload far too deep for JSON.stringify without overflowing', () => {
      expect(failure({ ...valid, payload: nested(200_000) }, { maxPayloadBytes: 10_000_000 }).rule).to.include('(got 200000)');
    });

    it('measures shared sub-objects once, and counts a Date as a scalar', () => {
      let shared: unknown = { leaf: new Date(0) };
      for (let i = 0; i < 40; i++) shared = [shared, shared];
      // 2^40 paths through 41 distinct objects: walking (or serialising) every path would take hours.
      let wrapped = shared;
      for (let i = 0; i < 25; i++) wrapped = [wrapped];
      const depthOfShared = failure({ ...valid, payload: wrapped }).rule;
      expect(depthOfShared).to.equal('must be nested at most 64 levels of arrays and objects deep (got 66)');
      expect(validateEventInput({ ...valid, payload: [[{ at: new Date(0) }]] }, LIMITS).payloadJson).to.equal(
        '[[{"at":"1970-01-01T00:00:00.000Z"}]]',
      );
    });

    it('applies to JsonText payloads too', () => {
      const deep = JsonText.parse(`${'['.repeat(65)}${']'.repeat(65)}`);
      expect(failure({ ...valid, payload: deep }).rule).to.equal('must be nested at most 64 levels of arrays and objects deep (got 65)');
      expect(() => validateEventInput({ ...valid, payload: JsonText.parse(`${'['.repeat(64)}${']'.repeat(64)}`) }, LIMITS)).not.to.throw();
    });
  });

  context('when the payload is JsonText', () => {
    it('keeps its text verbatim instead of re-serialising it', () => {
      const text = '{ "big": 12345678901234567890, "float": 1.0, "exp": 1e2, "negzero": -0, "s": "\\u00e9" }';
      expect(validateEventInput({ ...valid, payload: JsonText.parse(text) }, LIMITS).payloadJson).to.equal(text);
    });

    it('measures the UTF-8 bytes of the text as sent', () => {
      // 'é' raw is 2 bytes; the escape \u00e9 is 6: the limit applies to what is sent.
      const raw = JsonText.parse(`"${'é'.repeat(10)}"`);
      const escaped = JsonText.parse(`"${'\\u00e9'.repeat(10)}"`);
      expect(validateEventInput({ ...valid, payload: raw }, { maxPayloadBytes: 22 }).payloadJson).to.equal(raw.text);
      expect(failure({ ...valid, payload: escaped }, { maxPayloadBytes: 22 }).rule).to.equal('must be at most 22 bytes (got 62)');
    });
  });
});

import { expect } from 'chai';
import { validateEndpointChanges, validateNewEndpoint, type EndpointDefaults } from '../../lib/endpoints/endpoint-input.ts';
import { FILTER_MAX_BYTES, FILTER_MAX_CONDITIONS, FILTER_MAX_DEPTH, validatePayloadFilter } from '../../lib/endpoints/payload-filter.ts';
import { ErrorCode, ValidationError } from '../../lib/errors.ts';

const DEFAULTS: EndpointDefaults = { timeoutMs: 10_000, concurrency: 4, retry: { preset: 'default' }, adaptiveConcurrency: false };

function refusal(value: unknown): { field: string; rule: string } {
  try {
    validatePayloadFilter(value);
  } catch (error) {
    expect(error).to.be.instanceOf(ValidationError);
    expect((error as ValidationError).code).to.equal(ErrorCode.INVALID_INPUT);
    return { field: (error as ValidationError).field, rule: (error as ValidationError).rule };
  }
  return expect.fail(`expected ${JSON.stringify(value)} to be refused`);
}

describe('payload filter validation', () => {
  context('when the filter is well formed', () => {
    it('takes paths into the payload and the type, literals, every operator, $or and $and, and answers a plain copy', () => {
      const filter = {
        'payload.amount': { $gte: 100, $lt: 1_000_000 },
        'payload.country': { $in: ['BR', 'PT'] },
        'payload.items.0.sku': { $exists: true },
        'payload.note': { $nin: [null, ''], $ne: 'x' },
        'payload.customer': { $eq: { tier: 'gold', tags: ['a'] } },
        'payload.flag': true,
        'payload.at': { $gt: '2026-01-01T00:00:00Z', $lte: '2027-01-01T00:00:00Z' },
        payload: { $exists: true },
        type: 'order.paid',
        $or: [{ 'payload.a': 1 }, { $and: [{ 'payload.b': { $eq: null } }, { type: { $ne: 'x' } }] }],
      };
      const copy = validatePayloadFilter(filter);
      expect(copy).to.deep.equal(filter);
      expect(copy).to.not.equal(filter);
    });

    it('takes a literal object (no $ keys) as equality, $ keys inside $eq included', () => {
      expect(validatePayloadFilter({ 'payload.meta': { a: { b: 1 } } })).to.deep.equal({ 'payload.meta': { a: { b: 1 } } });
      expect(validatePayloadFilter({ 'payload.meta': { $eq: { $raw: 1 } } })).to.deep.equal({ 'payload.meta': { $eq: { $raw: 1 } } });
      expect(validatePayloadFilter({ 'payload.meta': {} })).to.deep.equal({ 'payload.meta': {} });
    });
  });

  context('when the filter is not an object of conditions', () => {
    it('refuses a list, a string, null inside $or, and an empty filter, naming the place', () => {
      expect(refusal([])).to.deep.include({ field: 'filter' });
      expect(refusal('payload.a = 1').field).to.equal('filter');
      expect(refusal({})).to.deep.equal({ field: 'filter', rule: 'must hold at least one condition (null removes the filter)' });
      expect(refusal({ $or: [{ 'payload.a': 1 }, null] }).field).to.equal('filter.$or[1]');
      expect(refusal({ $and: [{}] }).field).to.equal('filter.$and[0]');
    });
  });

  context('when a key is not a path', () => {
    it('names it: no payload. or type prefix, empty segments, too long', () => {
      expect(refusal({ amount: 1 })).to.deep.equal({
        field: 'filter.amount',
        rule: 'must be a path starting with "payload." or "type", or $or/$and (got "amount")',
      });
      expect(refusal({ 'type.name': 1 }).field).to.equal('filter.type.name');
      expect(refusal({ 'payload.a..b': 1 })).to.deep.equal({ field: 'filter.payload.a..b', rule: 'must not have an empty segment (two dots, or a dot at the end)' });
      expect(refusal({ 'payload.': 1 }).field).to.equal('filter.payload.');
      expect(refusal({ [`payload.${'a'.repeat(300)}`]: 1 }).rule).to.match(/^must be a path of at most 256 characters/);
    });
  });

  context('when an operator is unknown or misplaced', () => {
    it('names the operator and lists those allowed', () => {
      expect(refusal({ 'payload.a': { $regex: '^x' } })).to.deep.equal({
        field: 'filter.payload.a.$regex',
        rule: 'is not a known operator (allowed: $eq, $ne, $gt, $gte, $lt, $lte, $in, $nin, $exists)',
      });
      expect(refusal({ $not: { 'payload.a': 1 } })).to.deep.include({ field: 'filter.$not' });
      expect(refusal({ 'payload.a': { $or: [1, 2] } }).rule).to.match(/^is allowed only beside paths/);
      expect(refusal({ 'payload.a': { $gt: 1, b: 2 } })).to.deep.equal({
        field: 'filter.payload.a.b',
        rule: 'cannot sit beside operators: to compare with an object, write {"$eq": {…}}',
      });
    });
  });

  context('when an operand has the wrong type', () => {
    it('$gt, $gte, $lt and $lte take a number or a string', () => {
      expect(refusal({ 'payload.amount': { $gte: true } })).to.deep.equal({ field: 'filter.payload.amount.$gte', rule: 'must be a number or a string (got true)' });
      expect(refusal({ 'payload.amount': { $lt: null } }).field).to.equal('filter.payload.amount.$lt');
      expect(refusal({ 'payload.amount': { $gt: [1] } }).field).to.equal('filter.payload.amount.$gt');
      expect(refusal({ 'payload.amount': { $lte: { a: 1 } } }).field).to.equal('filter.payload.amount.$lte');
    });

    it('$in and $nin take a non-empty list', () => {
      expect(refusal({ 'payload.c': { $in: 'BR' } })).to.deep.equal({ field: 'filter.payload.c.$in', rule: 'must be a non-empty list of values (got "BR")' });
      expect(refusal({ 'payload.c': { $nin: [] } }).field).to.equal('filter.payload.c.$nin');
    });

    it('$exists takes a boolean', () => {
      expect(refusal({ 'payload.c': { $exists: 1 } })).to.deep.equal({ field: 'filter.payload.c.$exists', rule: 'must be true or false (got 1)' });
    });

    it('$or and $and take a non-empty list of filters', () => {
      expect(refusal({ $or: [] })).to.deep.equal({ field: 'filter.$or', rule: 'must be a non-empty list of filters (got [])' });
      expect(refusal({ $and: { 'payload.a': 1 } }).field).to.equal('filter.$and');
    });

    it('conditions on type compare strings only, in lists too', () => {
      expect(refusal({ type: 5 })).to.deep.equal({ field: 'filter.type', rule: 'must be a string: an event type is one (got 5)' });
      expect(refusal({ type: { $in: ['a', 2] } }).field).to.equal('filter.type.$in[1]');
      expect(refusal({ type: { $gt: 1 } })).to.deep.equal({ field: 'filter.type.$gt', rule: 'must be a string (got 1)' });
    });

    it('refuses what JSON cannot hold (from a library caller), naming where', () => {
      expect(refusal({ 'payload.a': Number.NaN }).field).to.equal('filter.payload.a');
      expect(refusal({ 'payload.a': { $gte: Number.POSITIVE_INFINITY } }).field).to.equal('filter.payload.a.$gte');
      expect(refusal({ 'payload.a': { $eq: { when: new Date(0) } } }).field).to.equal('filter.payload.a.$eq.when');
      expect(refusal({ 'payload.a': { $in: [1, undefined] } }).field).to.equal('filter.payload.a.$in[1]');
      expect(refusal({ 'payload.a': BigInt(10) }).field).to.equal('filter.payload.a');
    });
  });

  context('when a filter passes a limit', () => {
    it(`refuses more than ${FILTER_MAX_CONDITIONS} conditions, naming the first one over`, () => {
      const many = Object.fromEntries(Array.from({ length: FILTER_MAX_CONDITIONS + 1 }, (_, i) => [`payload.k${i}`, i]));
      expect(refusal(many)).to.deep.equal({ field: `filter.payload.k${FILTER_MAX_CONDITIONS}`, rule: `is one condition too many: a filter holds at most ${FILTER_MAX_CONDITIONS}` });
      const atLimit = Object.fromEntries(Array.from({ length: FILTER_MAX_CONDITIONS }, (_, i) => [`payload.k${i}`, i]));
      expect(validatePayloadFilter(atLimit)).to.deep.equal(atLimit);
    });

    it(`refuses nesting deeper than ${FILTER_MAX_DEPTH} levels (a cycle too), naming where`, () => {
      let nested: Record<string, unknown> = { 'payload.a': 1 };
      for (let i = 0; i < FILTER_MAX_DEPTH; i += 1) nested = { $or: [nested] };
      const refused = refusal(nested);
      expect(refused.rule).to.equal(`must nest at most ${FILTER_MAX_DEPTH} levels of objects and lists`);
      expect(refused.field).to.match(/^filter(\.\$or\[0\])+/);
      const cycle: Record<string, unknown> = { a: 1 };
      cycle.self = cycle;
      expect(refusal({ 'payload.a': { $eq: cycle } }).rule).to.equal(`must nest at most ${FILTER_MAX_DEPTH} levels of objects and lists`);
    });

    it(`refuses more than ${FILTER_MAX_BYTES} bytes of JSON, counting UTF-8 bytes`, () => {
      const big = { 'payload.c': { $in: Array.from({ length: 20 }, () => 'é'.repeat(420)) } };
      const bytes = Buffer.byteLength(JSON.stringify(big));
      expect(bytes).to.be.greaterThan(FILTER_MAX_BYTES);
      expect(refusal(big)).to.deep.equal({ field: 'filter', rule: `must be at most ${FILTER_MAX_BYTES} bytes as JSON (got ${bytes})` });
    });
  });

  context('when given to an endpoint', () => {
    const url = 'https://hooks.example/in';

    it('is kept on create, absent without one, and a create with null has none', () => {
      expect(validateNewEndpoint({ tenantId: 'acme', url, filter: { 'payload.a': 1 } }, DEFAULTS).filter).to.deep.equal({ 'payload.a': 1 });
      expect(validateNewEndpoint({ tenantId: 'acme', url }, DEFAULTS)).to.not.have.property('filter');
      expect(validateNewEndpoint({ tenantId: 'acme', url, filter: null }, DEFAULTS)).to.not.have.property('filter');
    });

    it('is replaced by a patch, and removed by null', () => {
      expect(validateEndpointChanges({ filter: { type: 'a.b' } })).to.deep.equal({ filter: { type: 'a.b' } });
      expect(validateEndpointChanges({ filter: null })).to.deep.equal({ filter: null });
    });

    it('names the field inside the filter when refused, on create and on patch', () => {
      for (const run of [
        () => validateNewEndpoint({ tenantId: 'acme', url, filter: { 'payload.amount': { $gte: false } } }, DEFAULTS),
        () => validateEndpointChanges({ filter: { 'payload.amount': { $gte: false } } }),
      ]) {
        try {
          run();
          expect.fail('expected a ValidationError');
        } catch (error) {
          expect(error).to.be.instanceOf(ValidationError);
          expect((error as ValidationError).field).to.equal('filter.payload.amount.$gte');
        }
      }
    });
  });
});

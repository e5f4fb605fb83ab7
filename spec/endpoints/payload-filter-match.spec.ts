import { expect } from 'chai';
import { compilePayloadFilter, eventSubject, filterTestOf, MISSING, type FilterSubject } from '../../lib/endpoints/payload-filter-match.ts';
import { validatePayloadFilter } from '../../lib/endpoints/payload-filter.ts';
import type { JsonValue, PayloadFilter } from '../../lib/model.ts';

const ORDER: { readonly [key: string]: JsonValue } = { amount: 150, country: 'BR', at: '2026-05-01T10:00:00Z', paid: true, note: null, items: [{ sku: 'A-1', qty: 2 }, { sku: 'B-2' }], meta: { tier: 'gold', tags: ['x', 'y'] } };

/** What the filter answers for a payload (and type): null when it matches, else the failed condition. */
function failed(filter: unknown, payload: JsonValue | typeof MISSING = ORDER, type: string | typeof MISSING = 'order.paid'): string | null {
  return compilePayloadFilter(validatePayloadFilter(filter))({ type, payload });
}

describe('payload filter evaluation', () => {
  describe('$eq and literals', () => {
    it('compares scalars of the same type only, without coercion', () => {
      expect(failed({ 'payload.amount': 150 })).to.equal(null);
      expect(failed({ 'payload.amount': '150' })).to.equal('payload.amount');
      expect(failed({ 'payload.paid': 1 })).to.equal('payload.paid');
      expect(failed({ 'payload.country': { $eq: 'BR' } })).to.equal(null);
      expect(failed({ 'payload.country': { $eq: 'br' } })).to.equal('payload.country.$eq');
      expect(failed({ 'payload.note': null })).to.equal(null);
    });

    it('compares lists and objects deeply: lists in order, object keys in any order', () => {
      expect(failed({ 'payload.meta': { tags: ['x', 'y'], tier: 'gold' } })).to.equal(null);
      expect(failed({ 'payload.meta.tags': ['y', 'x'] })).to.equal('payload.meta.tags');
      expect(failed({ 'payload.meta': { $eq: { tier: 'gold' } } })).to.equal('payload.meta.$eq');
      expect(failed({ 'payload.items.1': { sku: 'B-2' } })).to.equal(null);
      expect(failed({ 'payload.meta.tags': 'x' }), 'a list is not searched').to.equal('payload.meta.tags');
    });
  });

  describe('$ne', () => {
    it('holds for a different value, a different type, and a missing path', () => {
      expect(failed({ 'payload.country': { $ne: 'PT' } })).to.equal(null);
      expect(failed({ 'payload.amount': { $ne: '150' } })).to.equal(null);
      expect(failed({ 'payload.nothing': { $ne: 1 } })).to.equal(null);
      expect(failed({ 'payload.country': { $ne: 'BR' } })).to.equal('payload.country.$ne');
      expect(failed({ 'payload.meta.tags': { $ne: ['x', 'y'] } })).to.equal('payload.meta.tags.$ne');
    });
  });

  describe('$gt, $gte, $lt, $lte', () => {
    it('compare numbers with numbers at the bounds', () => {
      expect(failed({ 'payload.amount': { $gte: 150 } })).to.equal(null);
      expect(failed({ 'payload.amount': { $gt: 150 } })).to.equal('payload.amount.$gt');
      expect(failed({ 'payload.amount': { $lte: 150 } })).to.equal(null);
      expect(failed({ 'payload.amount': { $lt: 150 } })).to.equal('payload.amount.$lt');
      expect(failed({ 'payload.amount': { $gt: 100, $lt: 200 } })).to.equal(null);
      expect(failed({ 'payload.amount': { $gt: 100, $lt: 120 } })).to.equal('payload.amount.$lt');
    });

    it('compare strings with strings (ISO times in order), and are false across types', () => {
      expect(failed({ 'payload.at': { $gte: '2026-01-01T00:00:00Z', $lt: '2027-01-01T00:00:00Z' } })).to.equal(null);
      expect(failed({ 'payload.at': { $lt: '2026-05-01T09:59:59Z' } })).to.equal('payload.at.$lt');
      expect(failed({ 'payload.amount': { $gt: '100' } }), 'a number against a string').to.equal('payload.amount.$gt');
      expect(failed({ 'payload.country': { $lt: 5 } }), 'a string against a number').to.equal('payload.country.$lt');
      expect(failed({ 'payload.note': { $gte: 0 } }), 'null against a number').to.equal('payload.note.$gte');
      expect(failed({ 'payload.paid': { $lte: 'z' } }), 'a boolean against a string').to.equal('payload.paid.$lte');
    });
  });

  describe('$in and $nin', () => {
    it('$in holds when the value equals one of the list, lists and objects deeply', () => {
      expect(failed({ 'payload.country': { $in: ['BR', 'PT'] } })).to.equal(null);
      expect(failed({ 'payload.country': { $in: ['US'] } })).to.equal('payload.country.$in');
      expect(failed({ 'payload.amount': { $in: ['150', 151] } })).to.equal('payload.amount.$in');
      expect(failed({ 'payload.meta.tags': { $in: [['x', 'y'], 'z'] } })).to.equal(null);
      expect(failed({ 'payload.note': { $in: [null] } })).to.equal(null);
      expect(failed({ 'payload.missing': { $in: [null] } }), 'missing is not null').to.equal('payload.missing.$in');
    });

    it('$nin holds when it equals none, and for a missing path', () => {
      expect(failed({ 'payload.country': { $nin: ['US', 'CA'] } })).to.equal(null);
      expect(failed({ 'payload.country': { $nin: ['BR'] } })).to.equal('payload.country.$nin');
      expect(failed({ 'payload.missing': { $nin: ['BR'] } })).to.equal(null);
    });
  });

  describe('$exists', () => {
    it('true holds for any present value, null included; false only for a missing path', () => {
      expect(failed({ 'payload.note': { $exists: true } })).to.equal(null);
      expect(failed({ 'payload.note': { $exists: false } })).to.equal('payload.note.$exists');
      expect(failed({ 'payload.missing': { $exists: false } })).to.equal(null);
      expect(failed({ 'payload.missing': { $exists: true } })).to.equal('payload.missing.$exists');
    });
  });

  describe('missing paths', () => {
    it('make every other operator fail', () => {
      for (const condition of [null, { $eq: null }, { $gt: 0 }, { $gte: '' }, { $lt: 0 }, { $lte: 'z' }, { $in: [1] }]) {
        expect(failed({ 'payload.missing': condition as JsonValue }), JSON.stringify(condition)).to.not.equal(null);
      }
    });

    it('come from a key an object lacks, an index past the end, a non-index into a list, a scalar in the way', () => {
      expect(failed({ 'payload.items.0.sku': 'A-1', 'payload.items.1.sku': 'B-2' })).to.equal(null);
      expect(failed({ 'payload.items.2': { $exists: false } })).to.equal(null);
      expect(failed({ 'payload.items.sku': { $exists: false } })).to.equal(null);
      expect(failed({ 'payload.items.01': { $exists: false } }), 'no leading zero').to.equal(null);
      expect(failed({ 'payload.items.-1': { $exists: false } })).to.equal(null);
      expect(failed({ 'payload.amount.value': { $exists: false } })).to.equal(null);
      expect(failed({ 'payload.meta.toString': { $exists: false } }), 'own keys only').to.equal(null);
      expect(failed({ 'payload.meta.__proto__': { $exists: false } })).to.equal(null);
    });

    it('reads an index key of an object as a key, and the whole payload at "payload"', () => {
      expect(failed({ 'payload.0': 'zero' }, { 0: 'zero' })).to.equal(null);
      expect(failed({ payload: [1, 2] }, [1, 2])).to.equal(null);
      expect(failed({ 'payload.1': 2 }, [1, 2])).to.equal(null);
      expect(failed({ payload: { $exists: false } }, MISSING)).to.equal(null);
      expect(failed({ 'payload.a': { $ne: 1 } }, MISSING)).to.equal(null);
      expect(failed({ 'payload.a': { $eq: 1 } }, MISSING)).to.equal('payload.a.$eq');
    });
  });

  describe('the event type', () => {
    it('is a path like the payload\'s, missing when not given', () => {
      expect(failed({ type: 'order.paid' })).to.equal(null);
      expect(failed({ type: { $in: ['order.refunded'] } })).to.equal('type.$in');
      expect(failed({ type: { $gte: 'order.' } })).to.equal(null);
      expect(failed({ type: 'order.paid' }, ORDER, MISSING)).to.equal('type');
      expect(failed({ type: { $exists: false } }, ORDER, MISSING)).to.equal(null);
    });
  });

  describe('$or, $and and several keys', () => {
    it('holds when every key holds, naming the first that fails in the order written', () => {
      expect(failed({ 'payload.amount': { $gte: 100 }, 'payload.country': { $in: ['BR', 'PT'] } })).to.equal(null);
      expect(failed({ 'payload.country': 'US', 'payload.amount': { $gte: 1000 } })).to.equal('payload.country');
      expect(failed({ 'payload.amount': { $gte: 1000 }, 'payload.country': 'US' })).to.equal('payload.amount.$gte');
    });

    it('$or holds when one filter does, and is named when none does', () => {
      expect(failed({ $or: [{ 'payload.country': 'US' }, { 'payload.amount': { $gt: 100 } }] })).to.equal(null);
      expect(failed({ $or: [{ 'payload.country': 'US' }, { 'payload.amount': { $gt: 1000 } }] })).to.equal('$or');
    });

    it('$and holds when all do, naming the failing one inside it', () => {
      expect(failed({ $and: [{ 'payload.amount': { $gt: 100 } }, { 'payload.amount': { $lt: 200 } }] })).to.equal(null);
      expect(failed({ $and: [{ 'payload.amount': { $gt: 100 } }, { 'payload.amount': { $lt: 120 } }] })).to.equal('$and[1].payload.amount.$lt');
    });

    it('nests: an $or inside an $and inside an $or', () => {
      const filter = {
        $or: [
          { type: 'user.created' },
          { $and: [{ 'payload.paid': true }, { $or: [{ 'payload.country': 'PT' }, { 'payload.meta.tier': 'gold' }] }] },
        ],
      };
      expect(failed(filter)).to.equal(null);
      expect(failed(filter, { ...ORDER, meta: { tier: 'silver' } })).to.equal('$or');
      const inner = { $and: [{ 'payload.paid': true }, { $or: [{ 'payload.country': 'PT' }, { 'payload.meta.tier': 'gold' }] }] };
      expect(failed(inner, { ...ORDER, meta: { tier: 'silver' } })).to.equal('$and[1].$or');
      expect(failed(inner, { ...ORDER, paid: false })).to.equal('$and[0].payload.paid');
    });
  });

  describe('a filter from a newer Herald', () => {
    it('lets through what it does not know rather than drop the event', () => {
      const newer = { 'payload.amount': { $gte: 100, $regex: 'x' }, $nor: [{ 'payload.a': 1 }] } as unknown as PayloadFilter;
      expect(compilePayloadFilter(newer)({ type: 'order.paid', payload: ORDER })).to.equal(null);
      expect(compilePayloadFilter(newer)({ type: 'order.paid', payload: { amount: 5 } })).to.equal('payload.amount.$gte');
    });
  });

  describe('compiled once', () => {
    it('answers the same compiled test for one filter object, another for another', () => {
      const filter = validatePayloadFilter({ 'payload.a': 1 });
      expect(filterTestOf(filter)).to.equal(filterTestOf(filter));
      expect(filterTestOf(validatePayloadFilter({ 'payload.a': 1 }))).to.not.equal(filterTestOf(filter));
    });
  });

  describe('eventSubject', () => {
    it('parses the payload once, and makes a payload that is not JSON missing rather than throw', () => {
      const subject: FilterSubject = eventSubject('order.paid', '{"amount": 5}');
      expect(subject).to.deep.equal({ type: 'order.paid', payload: { amount: 5 } });
      expect(eventSubject('order.paid', '{not json').payload).to.equal(MISSING);
    });
  });
});

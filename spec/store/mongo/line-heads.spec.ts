import { expect } from 'chai';
import {
  claimableHeads,
  contributingEndpoints,
  isFifo,
  keepLineHeads,
  LINE_HEAD_PROJECTION,
  LINE_ORDER,
  lineHeadFilter,
  lineKey,
  linesOf,
  mayGoInFlight,
  OPEN_STATUSES,
  pendingLinesPipeline,
} from '../../../lib/store/mongo/line-heads.ts';
import type { LineHead } from '../../../lib/store/mongo/line-heads.ts';
import { Collections, indexSpecs } from '../../../lib/store/mongo/schema.ts';
import type { DeliveryDoc } from '../../../lib/store/mongo/schema.ts';

const NOW = 1_000_000;
const OWNED = { slot: 3, epoch: 7 };

/**
 * How MongoDB evaluates the plain filters built here: equality (null also matching a missing
 * field) and `$in`. Enough to check that a filter selects exactly the documents meant.
 */
function matches(doc: Record<string, unknown>, filter: Record<string, unknown>): boolean {
  return Object.entries(filter).every(([field, want]) => {
    const got = doc[field] ?? null;
    if (want !== null && typeof want === 'object' && '$in' in want) return (want.$in as unknown[]).includes(got);
    return got === want;
  });
}

/** MongoDB's ascending order on numbers and strings, missing and null lowest. */
function ascending(order: Record<string, 1>): (a: Record<string, unknown>, b: Record<string, unknown>) => number {
  return (a, b) => {
    for (const field of Object.keys(order)) {
      const x = a[field] ?? null;
      const y = b[field] ?? null;
      if (x === y) continue;
      if (x === null) return -1;
      if (y === null) return 1;
      return (x as number | string) < (y as number | string) ? -1 : 1;
    }
    return 0;
  };
}

/** What `find(lineHeadFilter(line)).sort(LINE_ORDER).limit(1)` answers on `docs`. */
function headIn(docs: readonly Partial<DeliveryDoc>[], filter: object): string | undefined {
  const found = docs.filter((d) => matches(d as Record<string, unknown>, filter as Record<string, unknown>));
  return [...found].sort(ascending(LINE_ORDER as unknown as Record<string, 1>))[0]?._id;
}

const doc = (_id: string, fields: Partial<DeliveryDoc>): Partial<DeliveryDoc> => ({
  _id,
  endpointId: 'ep_f',
  status: 'pending',
  createdAt: NOW,
  ...fields,
});

const head = (_id: string, fields: Partial<LineHead> = {}): LineHead => ({
  _id,
  endpointId: 'ep_f',
  slot: OWNED.slot,
  status: 'pending',
  nextAttemptAt: NOW,
  ...fields,
});

describe('MongoDB FIFO lines', () => {
  describe('the index deliveries_open_line (schema 11)', () => {
    it('indexes the line head query: equalities first, then the line\'s order', () => {
      const index = indexSpecs(null)[Collections.DELIVERIES].find((i) => i.name === 'deliveries_open_line');
      const filter = lineHeadFilter({ endpointId: 'ep_f', orderingKey: 'k' });
      expect(index?.key).to.deep.equal({ endpointId: 1, status: 1, orderingKey: 1, ...LINE_ORDER });
      // The filter's fields are exactly the index's first three, the sort its next three: so the
      // server reads each `status` range in the sort's order and merges them (no in-memory sort).
      expect(Object.keys(index!.key as object).slice(0, 3).sort()).to.deep.equal(Object.keys(filter).sort());
      expect(Object.keys(index!.key as object).slice(3)).to.deep.equal(Object.keys(LINE_ORDER));
      expect(index).to.not.have.property('partialFilterExpression');
      expect(Object.keys(LINE_HEAD_PROJECTION).every((field) => field in head('x'))).to.equal(true);
    });

    it('serves the pending-lines walk as a DISTINCT_SCAN: equality on its first two fields, sorted on its prefix, grouped by the third alone', () => {
      const pipeline = pendingLinesPipeline('ep_f');
      expect(pipeline).to.deep.equal([
        { $match: { endpointId: 'ep_f', status: 'pending' } },
        { $sort: { endpointId: 1, status: 1, orderingKey: 1 } },
        { $group: { _id: '$orderingKey' } },
      ]);
      const key = indexSpecs(null)[Collections.DELIVERIES].find((i) => i.name === 'deliveries_open_line')!.key as object;
      expect(Object.keys(pipeline[1]!.$sort as object)).to.deep.equal(Object.keys(key).slice(0, 3));
    });
  });

  describe('lineHeadFilter with LINE_ORDER', () => {
    const docs = [
      doc('dlv_done', { orderingKey: 'k', sequence: 1, status: 'delivered' }),
      doc('dlv_dead', { orderingKey: 'k', sequence: 2, status: 'dead' }),
      doc('dlv_k4', { orderingKey: 'k', sequence: 4 }),
      doc('dlv_k3', { orderingKey: 'k', sequence: 3, status: 'in_flight' }),
      doc('dlv_j1', { orderingKey: 'j', sequence: 0 }),
      doc('dlv_other', { endpointId: 'ep_other', orderingKey: 'k', sequence: 0 }),
      // The default line: a null key and a missing one are the same line.
      doc('dlv_n5', { orderingKey: null, sequence: 5 }),
      doc('dlv_missing_key', { sequence: 6 }),
      // Written before numbering: no sequence, so first, oldest created first.
      doc('dlv_old', { createdAt: NOW - 5 }),
      doc('dlv_older', { createdAt: NOW - 10 }),
    ];

    it('finds the earliest open delivery of the line, skipping closed ones, other lines and other endpoints', () => {
      expect(headIn(docs, lineHeadFilter({ endpointId: 'ep_f', orderingKey: 'k' }))).to.equal('dlv_k3');
      expect(headIn(docs, lineHeadFilter({ endpointId: 'ep_f', orderingKey: 'j' }))).to.equal('dlv_j1');
      expect(headIn(docs, lineHeadFilter({ endpointId: 'ep_f', orderingKey: 'gone' }))).to.equal(undefined);
      expect(lineHeadFilter({ endpointId: 'ep_f', orderingKey: 'k' })).to.deep.equal({
        endpointId: 'ep_f',
        status: { $in: ['pending', 'in_flight'] },
        orderingKey: 'k',
      });
      expect(OPEN_STATUSES).to.deep.equal(['pending', 'in_flight']);
    });

    it('puts the deliveries without a sequence first in the default line, oldest created first, and takes a missing key as null', () => {
      const line = lineHeadFilter({ endpointId: 'ep_f', orderingKey: null });
      expect(headIn(docs, line)).to.equal('dlv_older');
      expect(headIn(docs.filter((d) => d.sequence !== undefined), line)).to.equal('dlv_n5');
      expect(headIn(docs.filter((d) => d.sequence !== undefined && d.orderingKey !== null), line)).to.equal('dlv_missing_key');
    });
  });

  describe('lines', () => {
    it('takes a missing and a null ordering key as one line, and keys that look alike as different lines', () => {
      const lines = linesOf([
        { endpointId: 'ep_f', orderingKey: 'a' },
        { endpointId: 'ep_f' },
        { endpointId: 'ep_f', orderingKey: null },
        { endpointId: 'ep_f', orderingKey: 'a' },
        { endpointId: 'ep_g', orderingKey: 'a' },
      ]);
      expect(lines).to.deep.equal([
        { endpointId: 'ep_f', orderingKey: 'a' },
        { endpointId: 'ep_f', orderingKey: null },
        { endpointId: 'ep_g', orderingKey: 'a' },
      ]);
      expect(lineKey({ endpointId: 'a","b', orderingKey: 'c' })).to.not.equal(lineKey({ endpointId: 'a', orderingKey: 'b","c' }));
      expect(lineKey({ endpointId: 'ep_f', orderingKey: 'null' })).to.not.equal(lineKey({ endpointId: 'ep_f', orderingKey: null }));
    });

    it('reads an endpoint as FIFO only when its ordering says so (missing: none)', () => {
      expect([isFifo({ ordering: 'fifo' }), isFifo({ ordering: 'none' }), isFifo({})]).to.deep.equal([true, false, false]);
    });
  });

  describe('claimableHeads', () => {
    it('keeps the heads that are pending, due and in the owned slot, earliest due first (ties by id), at most n', () => {
      const heads = [
        head('dlv_late', { nextAttemptAt: NOW - 1 }),
        null,
        head('dlv_flying', { status: 'in_flight', nextAttemptAt: NOW - 100 }),
        head('dlv_retry_later', { nextAttemptAt: NOW + 1 }),
        head('dlv_b', { nextAttemptAt: NOW - 5 }),
        head('dlv_a', { nextAttemptAt: NOW - 5 }),
        head('dlv_elsewhere', { slot: OWNED.slot + 1, nextAttemptAt: NOW - 50 }),
        head('dlv_a', { nextAttemptAt: NOW - 5 }),
      ];
      expect(claimableHeads(heads, OWNED, NOW, 10).map((c) => c._id)).to.deep.equal(['dlv_a', 'dlv_b', 'dlv_late']);
      expect(claimableHeads(heads, OWNED, NOW, 2).map((c) => c._id)).to.deep.equal(['dlv_a', 'dlv_b']);
      expect(claimableHeads(heads, OWNED, NOW, 0)).to.deep.equal([]);
      expect(claimableHeads([head('dlv_x')], OWNED, NOW, 1)).to.deep.equal([{ _id: 'dlv_x', endpointId: 'ep_f', slot: OWNED.slot, nextAttemptAt: NOW }]);
    });
  });

  describe('keepLineHeads', () => {
    it('keeps every candidate of an endpoint without ordering, and of a FIFO endpoint only its lines\' heads', () => {
      const candidates = [
        { _id: 'dlv_any1', endpointId: 'ep_any' },
        { _id: 'dlv_any2', endpointId: 'ep_any' },
        { _id: 'dlv_f1', endpointId: 'ep_f' },
        { _id: 'dlv_f2', endpointId: 'ep_f' },
        { _id: 'dlv_g1', endpointId: 'ep_g' },
      ];
      const kept = keepLineHeads(candidates, new Set(['ep_f', 'ep_g']), new Set(['dlv_f1', 'dlv_any2']));
      expect(kept.map((c) => c._id)).to.deep.equal(['dlv_any1', 'dlv_any2', 'dlv_f1']);
    });
  });

  describe('contributingEndpoints', () => {
    it('counts a FIFO endpoint from its first claimable head, drops one whose lines are all held, leaves the others alone', () => {
      const busy = [
        { endpointId: 'ep_held', first: NOW - 100, slot: 1 },
        { endpointId: 'ep_f', first: NOW - 90, slot: 1 },
        { endpointId: 'ep_any', first: NOW - 80, slot: 2 },
      ];
      const headsOf = new Map([
        ['ep_held', []],
        ['ep_f', [{ nextAttemptAt: NOW - 10 }, { nextAttemptAt: NOW - 5 }]],
      ]);
      expect(contributingEndpoints(busy, headsOf)).to.deep.equal([
        { endpointId: 'ep_f', first: NOW - 10, slot: 1 },
        { endpointId: 'ep_any', first: NOW - 80, slot: 2 },
      ]);
    });
  });

  describe('mayGoInFlight (fan-out)', () => {
    const planned = (id: string, endpointId: string, orderingKey: string | null) => ({ id, endpointId, orderingKey });

    it('lets in flight every named delivery of an endpoint without ordering, and none that is not named', () => {
      const fresh = [planned('d1', 'ep_any', 'k'), planned('d2', 'ep_any', 'k'), planned('d3', 'ep_any', 'k')];
      expect([...mayGoInFlight(fresh, new Set(['d1', 'd2']), new Set(), new Set())]).to.deep.equal(['d1', 'd2']);
    });

    it('lets in flight only the first new delivery of an empty FIFO line, the first in numbering order', () => {
      const fresh = [planned('a1', 'ep_f', 'a'), planned('n1', 'ep_f', null), planned('a2', 'ep_f', 'a'), planned('n2', 'ep_f', null), planned('b1', 'ep_f', 'b')];
      const all = new Set(fresh.map((d) => d.id));
      expect([...mayGoInFlight(fresh, all, new Set(['ep_f']), new Set())]).to.deep.equal(['a1', 'n1', 'b1']);
    });

    it('lets none of a line in flight when the line has an open delivery, or when its first new one is not named', () => {
      const fresh = [planned('a1', 'ep_f', 'a'), planned('a2', 'ep_f', 'a'), planned('b1', 'ep_f', 'b'), planned('n1', 'ep_f', null)];
      const open = new Set([lineKey({ endpointId: 'ep_f', orderingKey: 'b' }), lineKey({ endpointId: 'ep_f', orderingKey: null })]);
      expect([...mayGoInFlight(fresh, new Set(['a2', 'b1', 'n1']), new Set(['ep_f']), open)]).to.deep.equal([]);
    });
  });
});

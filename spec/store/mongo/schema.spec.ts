import { expect } from 'chai';
import type { Db } from 'mongodb';
import {
  Collections,
  indexSpecs,
  LEGACY_RETRYING_FILTER,
  MAX_TTL_SECONDS,
  migrateDeadLetterTriage,
  migrateFailureKinds,
  retentionSeconds,
  SCHEMA_VERSION,
} from '../../../lib/store/mongo/schema.ts';

describe('MongoDB schema', () => {
  it('declares indexes for every collection, TTL indexes on attempts and dead letters', () => {
    const specs = indexSpecs(2_592_000);
    expect(Object.keys(specs).sort()).to.deep.equal(Object.values(Collections).sort());
    const ttl = Object.entries(specs).flatMap(([collection, list]) =>
      list.filter((i) => i.expireAfterSeconds !== undefined).map((i) => [collection, i.name, i.expireAfterSeconds, i.key]),
    );
    expect(ttl).to.deep.equal([
      ['attempts', 'attempts_ttl', 2_592_000, { at: 1 }],
      ['dead_letters', 'dead_letters_ttl', 2_592_000, { at: 1 }],
    ]);
    const names = Object.values(specs).flatMap((list) => list.map((i) => i.name));
    expect(new Set(names).size, 'index names are unique').to.equal(names.length);
  });

  it('has the indexes claims and the fan-out loop rely on', () => {
    const specs = indexSpecs(null);
    expect(specs.deliveries.map((i) => i.key)).to.deep.include({ status: 1, slot: 1, nextAttemptAt: 1 });
    expect(specs.deliveries.map((i) => i.key)).to.deep.include({ endpointId: 1, status: 1, nextAttemptAt: 1 });
    expect(specs.events.find((i) => i.name === 'events_unfanned')?.partialFilterExpression).to.deep.equal({ fannedOut: false });
    expect(specs.events.find((i) => i.name === 'events_unfanned_tenant')).to.deep.include({ key: { tenantId: 1, createdAt: 1, ord: 1 }, partialFilterExpression: { fannedOut: false } });
    expect(specs.attempts.some((i) => i.expireAfterSeconds !== undefined)).to.equal(false);
    expect(specs.dead_letters.map((i) => i.key)).to.deep.include({ 'triage.state': 1, createdAt: -1, ord: -1 });
  });

  it('gives version 2 to dead letters without a triage: replayed since their replay, else new since their creation, in batches', async () => {
    type Doc = { _id: string; createdAt: number; replayedAt: number | null; triage?: unknown };
    const docs: Doc[] = [
      ...Array.from({ length: 600 }, (_, i): Doc => ({ _id: `dl_${i}`, createdAt: i, replayedAt: null })),
      { _id: 'dl_replayed', createdAt: 5, replayedAt: 9 },
      { _id: 'dl_done', createdAt: 1, replayedAt: null, triage: { state: 'acknowledged', note: 'n', by: 'b', at: 3 } },
    ];
    const untriaged = () => docs.filter((d) => d.triage === undefined);
    const collection = {
      find: () => ({ limit: (n: number) => ({ toArray: async () => untriaged().slice(0, n).map(({ _id, createdAt, replayedAt }) => ({ _id, createdAt, replayedAt })) }) }),
      bulkWrite: async (ops: Array<{ updateOne: { filter: { _id: string }; update: { $set: { triage: unknown } } } }>) => {
        let modifiedCount = 0;
        for (const { updateOne } of ops) {
          const doc = docs.find((d) => d._id === updateOne.filter._id && d.triage === undefined);
          if (doc === undefined) continue;
          doc.triage = updateOne.update.$set.triage;
          modifiedCount++;
        }
        return { modifiedCount };
      },
    };
    const db = { collection: (name: string) => (name === Collections.DEAD_LETTERS ? collection : expect.fail(name)) } as unknown as Db;
    expect(await migrateDeadLetterTriage(db)).to.equal(601);
    expect(untriaged()).to.deep.equal([]);
    expect(docs.find((d) => d._id === 'dl_42')?.triage).to.deep.equal({ state: 'new', note: null, by: null, at: 42 });
    expect(docs.find((d) => d._id === 'dl_replayed')?.triage).to.deep.equal({ state: 'replayed', note: null, by: null, at: 9 });
    expect(docs.find((d) => d._id === 'dl_done')?.triage).to.deep.equal({ state: 'acknowledged', note: 'n', by: 'b', at: 3 });
    expect(await migrateDeadLetterTriage(db), 'run again: nothing left').to.equal(0);
  });

  it('is at version 14: dead letters carry their triage (2), failures their kind (3), tenant tokens (4) and delivery minutes (5) have a collection, waiting events an index by tenant (7), endpoint sequences a collection and deliveries an index by sequence (8), replay jobs a collection (10), FIFO lines an index (11), the endpoint change log a collection (12), nodes their requests in flight and clock offset (13), the event-type catalog a collection (14)', () => {
    expect(SCHEMA_VERSION).to.equal(14);
    expect(indexSpecs(null)[Collections.EVENT_TYPES]).to.deep.equal([]);
    expect(indexSpecs(null)[Collections.ENDPOINT_CHANGES]).to.deep.equal([{ key: { changedAt: 1 }, name: 'endpoint_changes_changed' }]);
  });

  it('indexes deliveries by (endpointId, sequence), unique among those that have one', () => {
    const index = indexSpecs(null)[Collections.DELIVERIES].find((i) => i.name === 'deliveries_endpoint_sequence');
    expect(index).to.deep.include({ key: { endpointId: 1, sequence: 1 }, unique: true, partialFilterExpression: { sequence: { $type: 'number' } } });
  });

  it('gives version 3 to retrying deliveries without a failure kind (unknown, since their last update) and to every dead letter, in batches', async () => {
    type Delivery = { _id: string; updatedAt: number; lastFailureKind?: string; lastFailureAt?: number };
    const deliveries: Delivery[] = Array.from({ length: 501 }, (_, i) => ({ _id: `dlv_${i}`, updatedAt: i }));
    const untouched = () => deliveries.filter((d) => d.lastFailureKind === undefined);
    const filters: unknown[] = [];
    const deliveryCollection = {
      find: (filter: unknown) => {
        filters.push(filter);
        return { limit: (n: number) => ({ toArray: async () => untouched().slice(0, n).map(({ _id, updatedAt }) => ({ _id, updatedAt })) }) };
      },
      bulkWrite: async (ops: Array<{ updateOne: { filter: { _id: string }; update: { $set: { lastFailureKind: string; lastFailureAt: number } } } }>) => {
        for (const { updateOne } of ops) Object.assign(deliveries.find((d) => d._id === updateOne.filter._id)!, updateOne.update.$set);
        return { modifiedCount: ops.length };
      },
    };
    const deadUpdates: unknown[] = [];
    const deadLetterCollection = {
      updateMany: async (filter: unknown, update: unknown) => {
        deadUpdates.push([filter, update]);
        return { modifiedCount: 7 };
      },
    };
    const db = {
      collection: (name: string) => (name === Collections.DELIVERIES ? deliveryCollection : name === Collections.DEAD_LETTERS ? deadLetterCollection : expect.fail(name)),
    } as unknown as Db;
    expect(await migrateFailureKinds(db)).to.equal(508);
    expect(filters[0]).to.deep.equal(LEGACY_RETRYING_FILTER);
    expect(LEGACY_RETRYING_FILTER).to.deep.equal({ status: 'pending', attempts: { $gt: 0 }, lastFailureKind: { $exists: false } });
    expect(deliveries[42]).to.deep.equal({ _id: 'dlv_42', updatedAt: 42, lastFailureKind: 'unknown', lastFailureAt: 42 });
    expect(untouched()).to.deep.equal([]);
    expect(deadUpdates).to.deep.equal([[{ failureKind: { $exists: false } }, { $set: { failureKind: 'unknown' } }]]);
  });

  it('turns retention into whole TTL seconds within MongoDB\'s limits', () => {
    expect(retentionSeconds(null)).to.equal(null);
    expect(retentionSeconds(30 * 24 * 3600 * 1000)).to.equal(2_592_000);
    expect(retentionSeconds(1_500)).to.equal(2);
    expect(retentionSeconds(1e15)).to.equal(MAX_TTL_SECONDS);
  });
});

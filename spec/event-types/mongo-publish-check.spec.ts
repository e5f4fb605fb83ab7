/**
 * The catalog's check in a MongoDB producer (`publishMongo`), on a fake database (no mongod can run
 * here; spec/store/mongo.spec.ts runs the store against a replica set where one can): the catalog's
 * version is read in the publish's transaction on every call, the catalog reloaded when it moved,
 * and a payload the schema refuses is refused before any insert.
 */
import { expect } from 'chai';
import { ErrorCode, isHeraldError, type HeraldError } from '../../lib/errors.ts';
import { ManualClock } from '../../lib/clock.ts';
import { publish, type MongoDatabase, type MongoSession } from '../../lib/producer/mongo-publish.ts';
import { Collections, MetaKeys } from '../../lib/store/mongo/schema.ts';

const AMOUNT = JSON.stringify({ type: 'object', required: ['amount'], properties: { amount: { type: 'number', minimum: 0 } } });

interface Op {
  readonly collection: string;
  readonly op: string;
  readonly filter?: unknown;
  readonly inSession: boolean;
}

/** A database of a few documents per collection, recording every operation. */
function fakeMongo() {
  const ops: Op[] = [];
  const docs: Record<string, Array<Record<string, unknown>>> = {
    [Collections.META]: [],
    [Collections.EVENT_TYPES]: [],
    [Collections.ENDPOINTS]: [{ _id: 'ep_1', tenantId: 'acme' }],
    [Collections.EVENTS]: [],
  };
  const matches = (doc: Record<string, unknown>, filter: Record<string, unknown>): boolean => Object.entries(filter).every(([k, v]) => doc[k] === v);
  const collection = (name: string) => ({
    async findOne(filter: Record<string, unknown>, options: { session?: unknown } = {}) {
      ops.push({ collection: name, op: 'findOne', filter, inSession: options.session !== undefined });
      return (docs[name] ?? []).find((doc) => matches(doc, filter)) ?? null;
    },
    find(filter: Record<string, unknown>, options: { session?: unknown; projection?: { versions?: { $slice: number } } } = {}) {
      ops.push({ collection: name, op: 'find', filter, inSession: options.session !== undefined });
      const found = (docs[name] ?? []).filter((doc) => matches(doc, filter)).map((doc) =>
        options.projection?.versions === undefined ? doc : { ...doc, versions: (doc['versions'] as unknown[]).slice(options.projection.versions.$slice) });
      const cursor = { sort: () => cursor, toArray: async () => found };
      return cursor;
    },
    async insertOne(doc: Record<string, unknown>, options: { session?: unknown } = {}) {
      ops.push({ collection: name, op: 'insertOne', inSession: options.session !== undefined });
      docs[name]?.push(doc);
      return { acknowledged: true };
    },
  });
  const db: MongoDatabase = { collection };
  let transactions = 0;
  const session: MongoSession = {
    inTransaction: () => false,
    withTransaction: async (fn) => ((transactions += 1), fn()),
  };
  return {
    db,
    session,
    ops,
    docs,
    transactions: () => transactions,
    setType(name: string, schema: string | null, version: number): void {
      const types = docs[Collections.EVENT_TYPES]!;
      types.splice(0, types.length, { _id: name, description: '', versions: [{ version: 1, schema: null, createdAt: 0 }, { version: 2, schema, createdAt: 0 }], deprecatedAt: null, deprecationNote: null, createdAt: 0, updatedAt: 0 });
      docs[Collections.META]!.splice(0, 1, { _id: MetaKeys.EVENT_TYPES_VERSION, value: version });
    },
  };
}

async function refusal(promise: Promise<unknown>): Promise<HeraldError> {
  try {
    await promise;
  } catch (error) {
    if (isHeraldError(error)) return error;
    throw error;
  }
  throw new Error('expected publish to reject');
}

describe('publish into a MongoDB outbox, checked against the event-type catalog (a fake database)', () => {
  const clock = new ManualClock(1_767_225_600_000);

  it('refuses a payload its type\'s newest schema refuses, naming the pointer and the rule, before any insert', async () => {
    const mongo = fakeMongo();
    mongo.setType('invoice.paid', AMOUNT, 1);
    const error = await refusal(publish(mongo.session, [
      { tenantId: 'acme', type: 'invoice.paid', payload: { amount: 1 } },
      { tenantId: 'acme', type: 'invoice.paid', payload: { amount: -1 } },
    ], { db: mongo.db, clock }));
    expect(error).to.deep.include({ code: ErrorCode.INVALID_INPUT, field: '[1].payload/amount', rule: 'must be >= 0 (minimum)' });
    expect(mongo.ops.filter((op) => op.op === 'insertOne')).to.deep.equal([]);
    expect(mongo.docs[Collections.EVENTS]).to.deep.equal([]);
  });

  it('reads the catalog version in the transaction on every publish, and reloads the catalog only when it moved', async () => {
    const mongo = fakeMongo();
    mongo.setType('invoice.paid', AMOUNT, 1);
    const client = { db: () => mongo.db };
    const options = { client, dbName: 'app', clock };
    await publish(mongo.session, { tenantId: 'acme', type: 'invoice.paid', payload: { amount: 1 } }, options);
    await publish(mongo.session, { tenantId: 'acme', type: 'invoice.paid', payload: { amount: 2 } }, options);
    const catalogOps = () => mongo.ops.filter((op) => op.collection === Collections.META || op.collection === Collections.EVENT_TYPES);
    expect(catalogOps().map((op) => `${op.collection}.${op.op}`)).to.deep.equal(['meta.findOne', 'event_types.find', 'meta.findOne']);
    expect(catalogOps().every((op) => op.inSession)).to.equal(true);

    // Another process changes the catalog: the next publish sees it.
    mongo.setType('invoice.paid', JSON.stringify({ type: 'object', properties: { amount: { type: 'string' } } }), 2);
    const error = await refusal(publish(mongo.session, { tenantId: 'acme', type: 'invoice.paid', payload: { amount: 3 } }, options));
    expect(error).to.deep.include({ field: 'payload/amount', rule: 'must be string (type)' });
    mongo.setType('invoice.paid', null, 3);
    expect(await publish(mongo.session, { tenantId: 'acme', type: 'invoice.paid', payload: { amount: 3 } }, options)).to.have.length(1);
    expect(mongo.docs[Collections.EVENTS]).to.have.length(3);
  });
});

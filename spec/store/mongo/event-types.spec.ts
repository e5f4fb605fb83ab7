/**
 * The event-type catalog in MongoDB, on the recording fake (the conformance suite runs it against a
 * replica set where a mongod is available): each write and the bump of the catalog version share one
 * transaction, schemas are kept as JSON text, a duplicate name is a conflict.
 */
import { expect } from 'chai';
import { MongoServerError } from 'mongodb';
import { ErrorCode, isHeraldError } from '../../../lib/errors.ts';
import type { EventType } from '../../../lib/store/event-type-port.ts';
import { loadMongoDriver } from '../../../lib/store/mongo/driver.ts';
import { createEventType, deleteEventType, eventTypeToDoc, readCatalog, updateEventType } from '../../../lib/store/mongo/event-types.ts';
import { MetaKeys } from '../../../lib/store/mongo/schema.ts';
import { FAKE_SESSION, fakeDb } from './fake-db.ts';

const NOW = 1_000_000;
const SCHEMA = { type: 'object', properties: { 'a.b': { $ref: '#/$defs/x' } }, $defs: { x: { type: 'string' } } };

function eventType(overrides: Partial<EventType> = {}): EventType {
  return {
    name: 'invoice.paid', description: '', versions: [{ version: 1, schema: SCHEMA, createdAt: NOW }],
    deprecated: false, deprecatedAt: null, deprecationNote: null, createdAt: NOW, updatedAt: NOW, ...overrides,
  };
}

const BUMP = [{ _id: MetaKeys.EVENT_TYPES_VERSION }, { $inc: { value: 1 } }, { upsert: true, session: FAKE_SESSION }];

describe('MongoDB event types', () => {
  before(() => loadMongoDriver({ key: 'store', value: 'mongodb://spec' }));

  it('inserts a type with its schemas as JSON text and bumps the catalog version, in one transaction', async () => {
    const fake = fakeDb();
    await createEventType(fake.db, eventType());
    expect(fake.transactions()).to.equal(1);
    const [insert] = fake.callsTo('eventTypes', 'insertOne');
    expect(insert?.args).to.deep.equal([{ ...eventTypeToDoc(eventType()), versions: [{ version: 1, schema: JSON.stringify(SCHEMA), createdAt: NOW }] }, { session: FAKE_SESSION }]);
    expect(fake.callsTo('meta', 'updateOne').map((call) => call.args)).to.deep.equal([BUMP]);
  });

  it('answers a duplicate name with HERALD_CONFLICT', async () => {
    const fake = fakeDb();
    fake.c.eventTypes.on('insertOne', () => {
      throw new MongoServerError({ message: 'E11000 duplicate key', code: 11000 });
    });
    const error = await createEventType(fake.db, eventType()).catch((e: unknown) => e);
    expect(isHeraldError(error) && error.code).to.equal(ErrorCode.CONFLICT);
    expect(fake.callsTo('meta', 'updateOne')).to.deep.equal([]);
  });

  it('updates by reading, replacing and bumping in one transaction, a new schema as the next version', async () => {
    const fake = fakeDb();
    fake.c.eventTypes.on('findOne', () => eventTypeToDoc(eventType()));
    const updated = await updateEventType(fake.db, 'invoice.paid', { schema: { type: 'object' } }, NOW + 1);
    expect(updated?.versions.map((v) => [v.version, v.schema])).to.deep.equal([[1, SCHEMA], [2, { type: 'object' }]]);
    expect(fake.callsTo('eventTypes', 'findOne')[0]?.args[1]).to.deep.equal({ session: FAKE_SESSION });
    expect(fake.callsTo('eventTypes', 'replaceOne')[0]?.args).to.deep.equal([{ _id: 'invoice.paid' }, eventTypeToDoc(updated!), { session: FAKE_SESSION }]);
    expect(fake.callsTo('meta', 'updateOne').map((call) => call.args)).to.deep.equal([BUMP]);
    expect(fake.transactions()).to.equal(1);
  });

  it('bumps the version on a delete only when a type went', async () => {
    const fake = fakeDb();
    fake.c.eventTypes.on('deleteOne', () => ({ deletedCount: 0 }));
    expect(await deleteEventType(fake.db, 'invoice.paid')).to.equal(false);
    expect(fake.callsTo('meta', 'updateOne')).to.deep.equal([]);
    fake.c.eventTypes.on('deleteOne', () => ({ deletedCount: 1 }));
    expect(await deleteEventType(fake.db, 'invoice.paid')).to.equal(true);
    expect(fake.callsTo('meta', 'updateOne')).to.have.length(1);
  });

  it('reads the catalog: the version first, then each type\'s newest version only', async () => {
    const fake = fakeDb();
    fake.c.meta.on('findOne', () => ({ _id: MetaKeys.EVENT_TYPES_VERSION, value: 7 }));
    fake.c.eventTypes.on('find', () => [{ _id: 'invoice.paid', versions: [{ version: 2, schema: JSON.stringify(SCHEMA), createdAt: NOW }] }]);
    expect(await readCatalog(fake.db)).to.deep.equal({ version: 7, entries: [{ name: 'invoice.paid', version: 2, schema: SCHEMA }] });
    expect(fake.calls.map((call) => `${call.collection}.${call.op}`)).to.deep.equal(['meta.findOne', 'eventTypes.find']);
    expect(fake.callsTo('eventTypes', 'find')[0]?.args[1]).to.deep.equal({ projection: { versions: { $slice: -1 } } });
  });
});

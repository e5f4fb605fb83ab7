/**
 * A recording fake of the open store's collections (`StoreDb`), for unit
 * tests of the concern modules without a server. Every call is recorded in
 * order; what a call answers comes from a handler the test sets per
 * collection and operation (`on`), else a neutral default (nothing found,
 * every write matched). A handler may throw to play a failure.
 */
import type { ClientSession } from 'mongodb';
import type { StoreDb } from '../../../lib/store/mongo/collections.ts';

export interface Call {
  readonly collection: string;
  readonly op: string;
  /** The call's arguments; for `find`, the third is the cursor's `{ sort, limit }`. */
  readonly args: readonly unknown[];
}

type Handler = (...args: any[]) => unknown;

const NAMES = ['meta', 'endpoints', 'events', 'deliveries', 'attempts', 'deadLetters', 'leases', 'nodes', 'endpointSequences', 'endpointChanges', 'deliveryMinutes', 'eventTypes'] as const;
export type CollectionKey = (typeof NAMES)[number];

export class FakeCollection {
  readonly #name: string;
  readonly #calls: Call[];
  readonly handlers = new Map<string, Handler>();

  constructor(name: string, calls: Call[]) {
    this.#name = name;
    this.#calls = calls;
  }

  on(op: string, handler: Handler): this {
    this.handlers.set(op, handler);
    return this;
  }

  #call(op: string, args: unknown[], fallback: () => unknown): unknown {
    this.#calls.push({ collection: this.#name, op, args });
    const handler = this.handlers.get(op);
    return handler === undefined ? fallback() : handler(...args);
  }

  find(filter: unknown, options?: unknown) {
    const cursor: { sort?: unknown; limit?: number } = {};
    const chain = {
      sort: (sort: unknown) => ((cursor.sort = sort), chain),
      limit: (limit: number) => ((cursor.limit = limit), chain),
      toArray: async () => this.#call('find', [filter, options, cursor], () => []),
    };
    return chain;
  }

  aggregate(pipeline: unknown, options?: unknown) {
    return { toArray: async () => this.#call('aggregate', [pipeline, options], () => []) };
  }

  async findOne(filter: unknown, options?: unknown) {
    return this.#call('findOne', [filter, options], () => null);
  }

  async findOneAndUpdate(filter: unknown, update: unknown, options?: unknown) {
    return this.#call('findOneAndUpdate', [filter, update, options], () => null);
  }

  async countDocuments(filter: unknown, options?: unknown) {
    return this.#call('countDocuments', [filter, options], () => 0);
  }

  async bulkWrite(ops: readonly unknown[], options?: unknown) {
    return this.#call('bulkWrite', [ops, options], () => ({ matchedCount: ops.length, modifiedCount: ops.length }));
  }

  async updateMany(filter: unknown, update: unknown, options?: unknown) {
    return this.#call('updateMany', [filter, update, options], () => ({ matchedCount: 0, modifiedCount: 0 }));
  }

  async updateOne(filter: unknown, update: unknown, options?: unknown) {
    return this.#call('updateOne', [filter, update, options], () => ({ matchedCount: 1, modifiedCount: 1 }));
  }

  async replaceOne(filter: unknown, doc: unknown, options?: unknown) {
    return this.#call('replaceOne', [filter, doc, options], () => ({ matchedCount: 1, modifiedCount: 1 }));
  }

  async insertOne(doc: unknown, options?: unknown) {
    return this.#call('insertOne', [doc, options], () => ({ acknowledged: true }));
  }

  async insertMany(docs: readonly unknown[], options?: unknown) {
    return this.#call('insertMany', [docs, options], () => ({ insertedCount: docs.length }));
  }

  async deleteOne(filter: unknown, options?: unknown) {
    return this.#call('deleteOne', [filter, options], () => ({ deletedCount: 1 }));
  }

  async deleteMany(filter: unknown, options?: unknown) {
    return this.#call('deleteMany', [filter, options], () => ({ deletedCount: 0 }));
  }
}

export interface FakeDb {
  readonly db: StoreDb;
  readonly calls: Call[];
  readonly c: Record<CollectionKey, FakeCollection>;
  /** Transactions begun. */
  readonly transactions: () => number;
  /** The calls to one collection's operation, in order. */
  callsTo(collection: CollectionKey, op: string): Call[];
}

export const FAKE_SESSION = { id: 'fake-session' } as unknown as ClientSession;

export function fakeDb(origin = 'origin-test'): FakeDb {
  const calls: Call[] = [];
  const c = Object.fromEntries(NAMES.map((name) => [name, new FakeCollection(name, calls)])) as Record<CollectionKey, FakeCollection>;
  let transactions = 0;
  const db = {
    ...c,
    origin,
    transaction: async <T>(fn: (session: ClientSession) => Promise<T>): Promise<T> => {
      transactions++;
      return fn(FAKE_SESSION);
    },
  } as unknown as StoreDb;
  return {
    db,
    calls,
    c,
    transactions: () => transactions,
    callsTo: (collection, op) => calls.filter((call) => call.collection === collection && call.op === op),
  };
}

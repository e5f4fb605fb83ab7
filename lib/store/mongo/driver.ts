/**
 * The MongoDB driver, the one module of the adapter that imports it as a
 * value. It is loaded on first use (`MongoStore.init()`, `publishMongo`),
 * never when Herald is imported: `mongodb` is an optional peer dependency,
 * and an application on another store neither installs nor loads it.
 *
 *   not loaded ──loadMongoDriver()──► loaded (for the life of the process)
 *
 * Every other module of the adapter imports the driver's types only, and
 * takes its classes from {@link mongoDriver}: the error classes in
 * `mongo-errors.ts`, `ObjectId` through {@link newObjectId}.
 */
import type { ObjectId } from 'mongodb';
import { StoreError } from '../../errors.ts';
import { importPeer, type PeerPackage, type PeerRequest } from '../peer-package.ts';

export type MongoDriver = typeof import('mongodb');

const MONGODB_PACKAGE: PeerPackage<MongoDriver> = Object.freeze({ name: 'mongodb', load: () => import('mongodb') });

let loaded: MongoDriver | undefined;

/**
 * Loads the driver, once per process.
 * @throws ConfigError (`HERALD_INVALID_CONFIG`) naming `request` when `mongodb` is not installed.
 */
export async function loadMongoDriver(request: PeerRequest): Promise<MongoDriver> {
  if (loaded === undefined) loaded = await importPeer(MONGODB_PACKAGE, request);
  return loaded;
}

/**
 * The loaded driver. Anything that can hand the adapter a driver value (an error, a document)
 * comes after `loadMongoDriver()`: a call before it is Herald's own bug.
 * @throws StoreError (`HERALD_STORE`) when the driver is not loaded yet.
 */
export function mongoDriver(): MongoDriver {
  if (loaded === undefined) throw new StoreError('mongodb: the driver is used before it was loaded (MongoStore.init() and publishMongo load it)');
  return loaded;
}

/** A fresh ObjectId: increasing within the process (insertion order), unique across processes. */
export function newObjectId(): ObjectId {
  return new (mongoDriver().ObjectId)();
}

/**
 * `store: mongodb-memory-server`: an embedded single-node MongoDB replica set
 * (mongodb-memory-server's `MongoMemoryReplSet`), for demos and local tries.
 * Its data lives in a temporary folder and is gone when Herald stops.
 *
 * It needs a mongod binary: `MONGOMS_SYSTEM_BINARY=/path/to/mongod`, one
 * already in mongodb-memory-server's cache (`~/.cache/mongodb-binaries`), or
 * a download, which many networks block. When none can be had, the start fails
 * with a `StoreError` saying so and what to set.
 *
 * mongodb-memory-server-core is an optional peer dependency, like the driver:
 * imported at the start, never when Herald is imported.
 */
import { messageOf, StoreError } from '../../errors.ts';
import { importPeer } from '../peer-package.ts';
import { EMBEDDED_MONGODB_SETTING } from './mongo-uri.ts';

/** A running server the store owns: it stops it on `close()`. */
export interface EmbeddedServer {
  readonly uri: string;
  stop(): Promise<void>;
}

/** Starts a server and returns where it listens. */
export type StartEmbeddedServer = () => Promise<EmbeddedServer>;

/** The advice given whenever no mongod binary can be obtained. */
export const NO_MONGOD_ADVICE =
  'set MONGOMS_SYSTEM_BINARY to the path of a mongod binary (MongoDB 4.4 or newer), ' +
  'or let mongodb-memory-server download one (it needs access to fastdl.mongodb.org)';

const MEMORY_SERVER_PACKAGE = Object.freeze({
  name: 'mongodb-memory-server-core',
  load: () => import('mongodb-memory-server-core'),
});

/**
 * Starts a single-node replica set on 127.0.0.1 (a free port), WiredTiger
 * storage (transactions need it).
 * @throws ConfigError (`HERALD_INVALID_CONFIG`) when mongodb-memory-server-core is not installed.
 * @throws StoreError (`HERALD_STORE`) when no mongod can be obtained or started, saying why.
 */
export async function startEmbeddedReplicaSet(): Promise<EmbeddedServer> {
  const { MongoBinary, MongoMemoryReplSet } = await importPeer(MEMORY_SERVER_PACKAGE, { key: 'store', value: EMBEDDED_MONGODB_SETTING });
  try {
    // Find (or download) the binary first: a failure here is quiet, where one inside
    // create() prints the library's own stack traces before ours.
    await MongoBinary.getPath();
  } catch (error) {
    throw new StoreError(
      `mongodb-memory-server: cannot start an embedded MongoDB replica set: no mongod binary could be obtained (${messageOf(error)}); ${NO_MONGOD_ADVICE}`,
      { cause: error },
    );
  }
  let replSet: InstanceType<typeof MongoMemoryReplSet>;
  try {
    replSet = await MongoMemoryReplSet.create({ replSet: { count: 1, storageEngine: 'wiredTiger' } });
  } catch (error) {
    throw new StoreError(
      `mongodb-memory-server: cannot start an embedded MongoDB replica set: ${messageOf(error)}. ` +
        `The mongod binary did not start; ${NO_MONGOD_ADVICE}`,
      { cause: error },
    );
  }
  return {
    uri: replSet.getUri(),
    async stop() {
      await replSet.stop();
    },
  };
}

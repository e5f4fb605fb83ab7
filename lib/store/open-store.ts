/**
 * Opens the store a `store` setting names: `sqlite:<path>`, a `mongodb://`
 * (or `mongodb+srv://`) URI, or `mongodb-memory-server` (an embedded
 * single-node replica set, for demos). Nothing connects here: the store's
 * `init()` opens the file or connects and checks the server.
 *
 * The MongoDB adapter is imported only when a MongoDB store is named: its
 * driver costs ≈ 22 MB of memory that a process on SQLite has no use for.
 */
import type { Clock } from '../clock.ts';
import type { ChangeFeedRestart } from './mongo/change-feed.ts';
import { ConfigError, ValidationError } from '../errors.ts';
import { EMBEDDED_MONGODB_SETTING, parseMongoUri, redactMongoUri } from './mongo/mongo-uri.ts';
import type { Store } from './port.ts';
import { SqliteStore } from './sqlite/sqlite-store.ts';

const STORE_RULE = 'must be sqlite:<path>, a mongodb:// (or mongodb+srv://) URI, or mongodb-memory-server';

export async function openStore(
  setting: string,
  options: {
    clock: Clock;
    pollIntervalMs: number;
    /** SQLite: run the store on a thread of its own (`SqliteStoreThread`, system clock). */
    thread?: boolean;
    /** TTL of attempts and dead letters in MongoDB (its TTL indexes); default 30 days. */
    retentionMs?: number;
    /** Told when the MongoDB change feed restarts (lost token, invalidate, non-resumable error). */
    onChangeFeedRestart?: (restart: ChangeFeedRestart) => void;
  },
): Promise<Store> {
  if (setting.startsWith('sqlite:')) {
    if (options.thread === true) {
      const { SqliteStoreThread } = await import('./sqlite/sqlite-store-thread.ts');
      return new SqliteStoreThread({ path: setting.slice('sqlite:'.length), pollIntervalMs: options.pollIntervalMs });
    }
    return new SqliteStore({ path: setting.slice('sqlite:'.length), clock: options.clock, pollIntervalMs: options.pollIntervalMs });
  }
  const mongo = {
    clock: options.clock,
    ...(options.retentionMs === undefined ? {} : { retentionMs: options.retentionMs }),
    ...(options.onChangeFeedRestart === undefined ? {} : { onChangeFeedRestart: options.onChangeFeedRestart }),
  };
  if (setting === EMBEDDED_MONGODB_SETTING) {
    const [{ MongoStore }, { startEmbeddedReplicaSet }] = await Promise.all([
      import('./mongo/mongo-store.ts'),
      import('./mongo/embedded-server.ts'),
    ]);
    return new MongoStore({ embedded: startEmbeddedReplicaSet, ...mongo });
  }
  if (setting.startsWith('mongodb://') || setting.startsWith('mongodb+srv://')) {
    try {
      parseMongoUri(setting);
    } catch (error) {
      if (error instanceof ValidationError) throw new ConfigError('store', redactUri(setting), error.rule);
      throw error;
    }
    const { MongoStore } = await import('./mongo/mongo-store.ts');
    return new MongoStore({ uri: setting, ...mongo });
  }
  throw new ConfigError('store', redactUri(setting), STORE_RULE);
}

/** Hides a password (and secret URI options) in a connection string before it reaches a message or a log. */
export function redactUri(uri: string): string {
  return redactMongoUri(uri);
}

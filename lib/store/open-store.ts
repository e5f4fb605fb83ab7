/**
 * Opens the store a `store` setting names: `sqlite:<path>`, a `postgres://`
 * (or `postgresql://`) URI, a `mongodb://` (or `mongodb+srv://`) URI, or
 * `mongodb-memory-server` (an embedded single-node replica set, for demos).
 * Nothing connects here: the store's `init()` opens the file or connects and
 * checks the server.
 *
 * The PostgreSQL and MongoDB adapters are imported only when named: a driver
 * costs memory that a process on SQLite has no use for (≈ 22 MB for MongoDB's).
 * Their drivers are optional peer dependencies, loaded by the store's `init()`
 * (`peer-package.ts`): one not installed fails there with a `ConfigError`
 * naming it and `npm install <name>`.
 */
import type { Clock } from '../clock.ts';
import type { ChangeFeedRestart } from './mongo/change-feed.ts';
import { ConfigError, ValidationError } from '../errors.ts';
import { EMBEDDED_MONGODB_SETTING, parseMongoUri } from './mongo/mongo-uri.ts';
import type { Store } from './port.ts';
import type { WorkSignalRestart } from './postgres/work-signal.ts';
import { isPostgresSetting, parsePostgresSetting } from './postgres/postgres-uri.ts';
import { SqliteStore } from './sqlite/sqlite-store.ts';
import { redactUri, STORE_RULE } from './store-setting.ts';

export { redactUri } from './store-setting.ts';

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
    /** Told when the PostgreSQL work signal's connection drops and is opened again. */
    onWorkSignalRestart?: (restart: WorkSignalRestart) => void;
  },
): Promise<Store> {
  if (setting.startsWith('sqlite:')) {
    if (options.thread === true) {
      const { SqliteStoreThread } = await import('./sqlite/sqlite-store-thread.ts');
      return new SqliteStoreThread({ path: setting.slice('sqlite:'.length), pollIntervalMs: options.pollIntervalMs });
    }
    return new SqliteStore({ path: setting.slice('sqlite:'.length), clock: options.clock, pollIntervalMs: options.pollIntervalMs });
  }
  if (isPostgresSetting(setting)) {
    let parsed;
    try {
      parsed = parsePostgresSetting(setting);
    } catch (error) {
      if (error instanceof ValidationError) throw new ConfigError('store', redactUri(setting), error.rule);
      throw error;
    }
    const { PostgresStore } = await import('./postgres/postgres-store.ts');
    return new PostgresStore({
      ...parsed,
      clock: options.clock,
      ...(options.onWorkSignalRestart === undefined ? {} : { onWorkSignalRestart: options.onWorkSignalRestart }),
    });
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

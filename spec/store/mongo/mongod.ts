/**
 * The MongoDB servers the Mongo specs run against, and the decision to skip
 * them. No mongod can be downloaded on the machines that run `npm test` here,
 * so the specs that need one skip visibly (one line, saying why and how to run
 * them, see {@link skipLine}) instead of failing. The check is fast and never touches the network
 * unless asked to (HERALD_TEST_MONGOD_DOWNLOAD=1):
 *
 * - MONGOMS_SYSTEM_BINARY set: it must be an executable file;
 * - otherwise a binary must already be in mongodb-memory-server's cache
 *   (`~/.cache/mongodb-binaries`, MONGOMS_DOWNLOAD_DIR, …).
 *
 * One replica set serves every spec file (started on first use, stopped
 * after the whole run); each test uses its own database.
 */
import { accessSync, constants, statSync } from 'node:fs';
import { MongoClient } from 'mongodb';
import type { MongoMemoryReplSet, MongoMemoryServer } from 'mongodb-memory-server-core';

const NO_BINARY = 'no mongod binary available (download blocked)';

/** The one line printed when the Mongo specs skip. */
export function skipLine(why: string = NO_BINARY): string {
  return `MongoDB store tests skipped: ${why}. Run them with MONGOMS_SYSTEM_BINARY=/path/to/mongod npm test`;
}

const downloadAllowed = process.env['HERALD_TEST_MONGOD_DOWNLOAD'] === '1';
if (!downloadAllowed) {
  // Never download during a test run unless asked to: that is what blocks, slowly, here.
  process.env['MONGOMS_RUNTIME_DOWNLOAD'] ??= 'false';
  process.env['MONGOMS_DISABLE_POSTINSTALL'] ??= '1';
}

let availability: Promise<string | undefined> | undefined;
let printed = false;

/** Why no mongod can be used here, or undefined when one can. */
export function whyNoMongod(): Promise<string | undefined> {
  availability ??= findMongod();
  return availability;
}

async function findMongod(): Promise<string | undefined> {
  const system = process.env['MONGOMS_SYSTEM_BINARY'];
  if (system !== undefined && system !== '') {
    try {
      if (!statSync(system).isFile()) return `MONGOMS_SYSTEM_BINARY=${system} is not a file`;
      accessSync(system, constants.X_OK);
      return undefined;
    } catch {
      return `MONGOMS_SYSTEM_BINARY=${system} is not an executable file`;
    }
  }
  if (downloadAllowed) return undefined;
  try {
    const { DryMongoBinary } = await import('mongodb-memory-server-core');
    const found = await DryMongoBinary.locateBinary(DryMongoBinary.getEnsuredOptions());
    return found === undefined ? NO_BINARY : undefined;
  } catch (error) {
    return `no mongod binary available (${error instanceof Error ? error.message : String(error)})`;
  }
}

/**
 * In a `before` hook: skips the suite (printing {@link skipLine} once per run)
 * when no mongod can be used, else returns the shared replica set's URI.
 */
export async function replicaSetOrSkip(context: Mocha.Context): Promise<string> {
  context.timeout(120_000);
  const why = (await whyNoMongod()) ?? (await startReplicaSet().then(() => undefined, (error: unknown) => startFailure(error)));
  if (why !== undefined) {
    if (!printed) {
      printed = true;
      console.log(`      ${skipLine(why)}`);
    }
    context.skip();
  }
  return (await startReplicaSet()).getUri();
}

let replSet: Promise<MongoMemoryReplSet> | undefined;

function startReplicaSet(): Promise<MongoMemoryReplSet> {
  replSet ??= (async () => {
    const { MongoMemoryReplSet } = await import('mongodb-memory-server-core');
    return MongoMemoryReplSet.create({ replSet: { count: 1, storageEngine: 'wiredTiger' } });
  })();
  return replSet;
}

function startFailure(error: unknown): string {
  return `a mongod was found but the replica set did not start (${error instanceof Error ? error.message : String(error)})`;
}

/** Starts a standalone mongod (no replica set); the caller stops it. */
export async function startStandalone(): Promise<MongoMemoryServer> {
  const { MongoMemoryServer } = await import('mongodb-memory-server-core');
  return MongoMemoryServer.create({ instance: { storageEngine: 'wiredTiger' } });
}

let dbSeq = 0;

/** A database name no other test uses in this run. */
export function freshDbName(prefix = 'herald_test'): string {
  return `${prefix}_${process.pid}_${++dbSeq}`;
}

/** Drops a database (best effort), through a short-lived client. */
export async function dropDatabase(uri: string, dbName: string): Promise<void> {
  const client = new MongoClient(uri);
  try {
    await client.db(dbName).dropDatabase();
  } finally {
    await client.close();
  }
}

// Stop the shared replica set once every spec file has run (a root-level hook).
after(async function () {
  this.timeout(60_000);
  if (replSet === undefined) return;
  const started = await replSet.catch(() => undefined);
  replSet = undefined;
  await started?.stop();
});

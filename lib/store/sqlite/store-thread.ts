/**
 * The SQLite store's own thread: owns the connection and runs the port's
 * calls that `SqliteStoreThread` posts, in the order they arrive, on the
 * system clock. Writes are group-committed: the calls that arrive while a
 * transaction runs form the next one.
 *
 * Messages in: `{type: 'call', id, method, args}`, `{type: 'watch' | 'unwatch'}`.
 * Messages out: `{type: 'result', id, value}`, `{type: 'error', id, error}`
 * (a Herald error as plain fields, rebuilt on the other side), `{type: 'changed'}`.
 */
import { parentPort, workerData } from 'node:worker_threads';
import { systemClock } from '../../clock.ts';
import type { Store } from '../port.ts';
import { SqliteStore, type SqliteStoreOptions } from './sqlite-store.ts';
import { serialiseError, type StoreThreadRequest, type StoreThreadReply } from './store-thread-messages.ts';

const port = parentPort;
if (port === null) throw new Error('store-thread.ts runs as a worker thread');
const options = workerData as Omit<SqliteStoreOptions, 'clock' | 'groupCommit'>;
const store = new SqliteStore({ ...options, clock: systemClock, groupCommit: true });
const post = (reply: StoreThreadReply): void => port.postMessage(reply);
let unwatch: (() => void) | undefined;

port.on('message', (request: StoreThreadRequest) => {
  switch (request.type) {
    case 'watch':
      unwatch ??= store.watch(() => post({ type: 'changed' }));
      return;
    case 'unwatch':
      unwatch?.();
      unwatch = undefined;
      return;
    case 'call': {
      const method = store[request.method] as (...args: unknown[]) => Promise<unknown>;
      method.apply(store, [...request.args]).then(
        (value) => post({ type: 'result', id: request.id, value }),
        (error: unknown) => post({ type: 'error', id: request.id, error: serialiseError(error) }),
      );
      return;
    }
  }
});

